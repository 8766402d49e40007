// Vectors to what the C target supports. After a lane range is expanded, values of shape (k,) are vectors.
// Their addresses are put in one form, INDEX(buf, base + VCONST(offsets)) with a scalar base (lane 0's
// address), from which the renderer picks a vector load or store (offsets 0..k-1) or one access per lane.
// Values C cannot compute as vectors (per-lane conditions, gathers through computed addresses) become
// STACKs of their lanes; a kernel whose vectors still fall outside this is expanded with scalar copies.
import { type DType, dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';

/** Element types of vector values: C vector extensions compute on these as the scalar code does. */
const VECTOR_DTYPES: ReadonlySet<DType> = new Set([
  dtypes.float32,
  dtypes.float64,
  dtypes.int32,
  dtypes.uint32,
  dtypes.int64,
  dtypes.uint64,
]);

export const vectorDtype = (d: DType) => VECTOR_DTYPES.has(d);

const laneValues = (u: UOp) => u.argOf(Ops.VCONST).values.map(Number);

type Offsets = Map<UOp, number[] | undefined>;

/**
 * Lane j of an index expression as lane 0's value plus offsets[j], when it is affine in the lanes. `known` keeps
 * what each node adds to its lanes (undefined: not affine) for the next expression of the same kernel.
 */
function laneOffsets(idx: UOp, known: Offsets = new Map()): number[] | undefined {
  // sources first, stopping at nodes known (the addresses of one kernel share most of their arithmetic)
  const stack: UOp[] = [idx];
  while (stack.length) {
    const u = stack[stack.length - 1]!;
    if (known.has(u)) {
      stack.pop();
      continue;
    }
    let ready = true;
    for (const s of u.src)
      if (!known.has(s)) {
        stack.push(s);
        ready = false;
      }
    if (!ready) continue;
    stack.pop();
    let o: number[] | undefined;
    if (!u.isVector) o = [0];
    else if (u.op === Ops.VCONST) o = laneValues(u);
    else if (u.op === Ops.ADD || u.op === Ops.SUB || u.op === Ops.MUL) {
      const a = known.get(u.src[0]!);
      const b = known.get(u.src[1]!);
      if (a !== undefined && b !== undefined) {
        if (u.op !== Ops.MUL) {
          const sign = u.op === Ops.ADD ? 1 : -1;
          const k = Math.max(a.length, b.length);
          o = Array.from({ length: k }, (_, j) => (a[j] ?? a[0]!) + sign * (b[j] ?? b[0]!));
        } else {
          const c = u.src.find((s) => s.op === Ops.CONST);
          if (c !== undefined) o = (c === u.src[0] ? b : a).map((x) => x * Number(c.constValue));
        }
      }
    }
    known.set(u, o);
  }
  const out = known.get(idx);
  return out === undefined ? undefined : out.map((x) => x - out[0]!);
}

/** How far index expression idx moves per step of range r, when it is affine in r. */
export function stride(idx: UOp, r: UOp): number | undefined {
  const steps = UOp.make(Ops.VCONST, [], { values: [0, 1], dtype: dtypes.index });
  const offsets = laneOffsets(substitute(idx, new Map([[r, steps]])));
  return offsets?.length === 1 ? 0 : offsets?.[1]; // one offset: idx does not read r
}

/**
 * contiguousLanes's answers by address, for as long as the address lives: the heuristics ask the same question of
 * a kernel's loads again and again (the transformer step: 467 asked, 113 different).
 */
const contiguous = new WeakMap<UOp, Map<string, boolean>>();

/** Whether idx reads contiguous elements along the lanes of range r split by `lanes` (as the lowering will). */
export function contiguousLanes(idx: UOp, r: UOp, lanes: number): boolean {
  const n = Number(r.src[0]!.constValue);
  if (n % lanes !== 0) return false;
  let known = contiguous.get(idx);
  if (known === undefined) contiguous.set(idx, (known = new Map()));
  const key = `${r.id}:${lanes}`;
  let answer = known.get(key);
  if (answer === undefined) {
    // ranges for the analysis only: ids no kernel uses
    const [outer, inner] = [UOp.range(n / lanes, 1e9), UOp.range(lanes, 1e9 + 1)];
    const split = substitute(idx, new Map([[r, outer.mul(lanes).add(inner)]]));
    known.set(key, (answer = stride(simplifyGraph(split, 'split lanes'), inner) === 1));
  }
  return answer;
}

/** idx in the form base + VCONST(offsets), or undefined when it is not affine in the lanes. */
function canonicalAddress(idx: UOp, known: Offsets): UOp | undefined {
  const offsets = laneOffsets(idx, known);
  if (offsets === undefined) return undefined;
  const lane0 = new Map(
    idx.toposort().flatMap((u) => (u.op === Ops.VCONST ? [[u, UOp.index(laneValues(u)[0]!)] as const] : [])),
  );
  const base = simplifyGraph(substitute(idx, lane0), 'lane 0 address');
  return UOp.make(Ops.ADD, [base, UOp.make(Ops.VCONST, [], { values: offsets, dtype: dtypes.index })]);
}

/** A STACK of a vector value's lanes (made by lowerLanes), not one that lists a shape. */
const laneStack = (x: UOp) => x.op === Ops.STACK && x.isVector && x.dtype !== dtypes.index;

/** root rebuilt from the nodes `at` gives a value for (those below them left out of the walk). */
function rebuildAt(root: UOp, at: (x: UOp) => UOp | undefined): UOp {
  const out = new Map<UOp, UOp>();
  const stack: UOp[] = [root];
  while (stack.length) {
    const x = stack[stack.length - 1]!;
    if (out.has(x)) {
      stack.pop();
      continue;
    }
    const given = at(x);
    let ready = true;
    if (given === undefined)
      for (const s of x.src)
        if (!out.has(s)) {
          stack.push(s);
          ready = false;
        }
    if (!ready) continue;
    stack.pop();
    if (given !== undefined) out.set(x, given);
    else {
      out.set(x, x.withSourcesFrom(out));
    }
  }
  return out.get(root)!;
}

/** A lane of a vector reduce: INDEX(reduce, lane). */
const reduceLane = (x: UOp) => x.op === Ops.INDEX && x.src[0]!.op === Ops.REDUCE && x.src[0]!.isVector;

/** What x is in lane j, where lane() stops at x rather than rebuild it from its sources. */
function laneAt(x: UOp, j: number): UOp | undefined {
  if (x.op === Ops.VCONST) return UOp.index(laneValues(x)[j]!);
  // the stores an AFTER waits for (a LOCAL tile's vector copies) are no lane of u; a lane read is one already
  if (x.op === Ops.AFTER || reduceLane(x)) return x;
  // a value already made of its lanes (an inner select of relu's gradient, under the outer one)
  if (laneStack(x)) return x.src[j]!;
  // a vector reduce is summed once, as a vector, and its lane read: reduced per lane as well, a masked matmul's
  // gradient summed every product twice (GELU's backward in the transformer: 40 accumulators for 20 sums)
  if (x.op === Ops.REDUCE && x.isVector) return UOp.make(Ops.INDEX, [x, UOp.index(j)]);
  return undefined;
}

/**
 * u's value in lane j, simplified. The lanes of reduces it reads are named scalars while it simplifies: the
 * simplifier would rewrite a reduce's body (its vector addresses out of canonical form), a second reduce.
 */
function lane(u: UOp, j: number): UOp {
  const reads = new Map<UOp, UOp>();
  const named = rebuildAt(
    rebuildAt(u, (x) => laneAt(x, j)),
    (x) => {
      if (!reduceLane(x)) return undefined;
      const name = UOp.make(Ops.PARAM, [UOp.shapeVec([])], {
        slot: `reduce lane ${reads.size}`,
        dtype: x.dtype,
      });
      reads.set(name, x);
      return name;
    },
  );
  return substitute(simplifyGraph(named, 'one lane'), reads);
}

/** Comparisons whose vector C computes whole, as a mask of lanes (GCC's all-ones or zero integers). */
export const MASK_OPS: ReadonlySet<Ops> = new Set([Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]);
/** Ops that combine masks of one width bit by bit. */
const MASK_LOGIC: ReadonlySet<Ops> = new Set([Ops.OR, Ops.AND, Ops.XOR]);

/** Whether c is `m != true` (logical not, as the simplifier writes it). */
export const maskNot = (c: UOp) =>
  c.op === Ops.CMPNE &&
  c.src[0]!.dtype === dtypes.bool &&
  c.src[1]!.op === Ops.CONST &&
  c.src[1]!.constValue === true;

/**
 * The width in bytes of the integer lanes of c where vector C computes c whole, as a mask: a comparison of
 * vectors of C types, or masks of one width combined by or, and, xor and not (GELU's gradient selects by
 * `0 < x | !(x != 0)`, which was computed lane by lane with all it reads).
 */
export function maskWidth(c: UOp): number | undefined {
  if (!c.isVector || c.dtype !== dtypes.bool) return undefined;
  if (maskNot(c)) return maskWidth(c.src[0]!);
  if (MASK_OPS.has(c.op)) {
    const [a, b] = c.src as [UOp, UOp];
    return VECTOR_DTYPES.has(a.dtype) && a.dtype === b.dtype ? a.dtype.itemsize : undefined;
  }
  if (!MASK_LOGIC.has(c.op) || !c.src.every((x) => x.isVector)) return undefined;
  const w = maskWidth(c.src[0]!);
  return w !== undefined && w === maskWidth(c.src[1]!) ? w : undefined;
}

/**
 * Whether u is a select of vectors by a mask of the same width: C selects with the mask's bits (relu's
 * gradient: 16 lanes of float compare and select in 4 ops, not 16 scalar selects).
 */
const maskSelect = (u: UOp) =>
  u.op === Ops.WHERE && VECTOR_DTYPES.has(u.dtype) && maskWidth(u.src[0]!) === u.dtype.itemsize;

/** Whether C cannot compute vector u as a vector: it reads a bool vector (a per-lane condition) other than a
 * mask it selects by, or it is a load whose address is not affine in the lanes. Such a value is made of its
 * lanes computed as scalars. */
function byLanes(u: UOp, known: Offsets): boolean {
  if (!u.isVector || u.dtype === dtypes.bool || u.dtype === dtypes.index || maskSelect(u)) return false;
  if (u.src.some((s) => s.isVector && s.dtype === dtypes.bool)) return true;
  // C has no vector of the index type: a lane index cast to int (a causal mask's column) is made of its lanes,
  // and what compares it stays a mask
  if (u.op === Ops.CAST && u.src[0]!.isVector && u.src[0]!.dtype === dtypes.index) return true;
  return (
    u.op === Ops.LOAD && u.src[0]!.src[1]!.isVector && laneOffsets(u.src[0]!.src[1]!, known) === undefined
  );
}

/**
 * The kernel with its vector values lowered bottom-up (so that what a value is made of is lowered first: an
 * INDEX's buffer may be an AFTER over stores with vector addresses, a LOCAL tile a BARRIER waits for): loads C
 * cannot compute as vectors as STACKs of their lanes, where `byLanes`, and vector addresses in canonical form.
 */
function lowerLanes(ast: UOp, stacks: boolean): { out: UOp; addresses: Set<UOp> } {
  const done = new Map<UOp, UOp>();
  const addresses = new Set<UOp>();
  const known: Offsets = new Map();
  for (const u of ast.toposort()) {
    const v = u.withSourcesFrom(done);
    let out = v;
    if (stacks && byLanes(v, known))
      out = UOp.make(
        Ops.STACK,
        Array.from({ length: Number(v.shape![0]) }, (_, j) => lane(v, j)),
      );
    else if (v.op === Ops.INDEX && v.src.length === 2 && v.src[1]!.isVector) {
      const address = canonicalAddress(v.src[1]!, known);
      if (address !== undefined) {
        out = v.withSrc([v.src[0]!, address]);
        addresses.add(address);
      }
    }
    done.set(u, out);
  }
  return { out: done.get(ast)!, addresses };
}

/** The kernel with its vector addresses in canonical form (a tensor-core kernel's tile copies). */
export const canonicalAddresses = (ast: UOp): UOp => lowerLanes(ast, false).out;

/** Why the kernel's vectors are not supported, or the kernel with canonical vector addresses. */
export function lowerVectors(ast: UOp): UOp | string {
  const { out, addresses } = lowerLanes(ast, true);
  // what is left of the lanes: index vectors as addresses only, bool vectors as masks (of selects, or of the
  // masks that combine them) only, values of C types
  for (const u of out.toposort()) {
    const bools = u.src.filter((s) => s.isVector && s.dtype === dtypes.bool);
    const selects = maskSelect(u) && bools.length === 1 && bools[0] === u.src[0];
    if (bools.length && !selects && maskWidth(u) === undefined) return `${Ops[u.op]} reads a bool per lane`;
  }
  for (const u of out.toposort()) {
    if (
      !u.isVector ||
      u.op === Ops.VCONST ||
      u.op === Ops.STACK ||
      addresses.has(u) ||
      maskWidth(u) !== undefined
    )
      continue;
    if (u.dtype === dtypes.index) return `${Ops[u.op]} computes with the lane index`;
    if (u.dtype === dtypes.bool) return `${Ops[u.op]} makes a bool per lane`;
    if (u.op !== Ops.PARAM && !VECTOR_DTYPES.has(u.dtype)) return `a vector of ${u.dtype.name}`;
  }
  return out;
}
