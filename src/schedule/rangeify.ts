// Rangeify: splits a tensor graph into kernels. Movement ops become index maps over RANGEs, elementwise
// chains fuse, a reduce fuses with its inputs and with the elementwise ops that consume it, and values a
// kernel cannot recompute cheaply (reduces seen through an expand, CONTIGUOUS) end their own kernel. An
// assign that one kernel reads at the element it writes is stored by that kernel too (sharedKernels).
import { AddrSpace, type DType, dtypes } from '../dtype.ts';
import { AxisType, GroupOp, Ops, opName } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import type { sint } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';

/** One kernel: its AST (a SINK over its stores) and the tensor-level buffers it binds, in slot order. */
export interface Kernel {
  ast: UOp;
  /**
   * BUFFER nodes of the tensor graph; bufs[k] is the kernel's PARAM k; bufs[0] is written, and so are those of
   * the assigns it stores too.
   */
  bufs: UOp[];
}

export interface Schedule {
  kernels: Kernel[];
  /** Each realized root's BUFFER (the same node for a root that was already a buffer). */
  outputs: Map<UOp, UOp>;
}

let nextBufferSlot = 0;

/** A tensor-level buffer: a BUFFER, or a function's PARAM standing for one. */
const isStorage = (u: UOp) => u.op === Ops.BUFFER || u.op === Ops.PARAM;

/** A fresh tensor-level buffer for a value of this shape, dtype and device. */
export function newBuffer(shape: readonly sint[], dtype: DType, device: string): UOp {
  return UOp.buffer(nextBufferSlot++, dtype, shape, device);
}

/** Ops that map each element to at most one place: a reduce below them is still computed once per element. */
const ONE_TO_ONE = new Set([
  ...GroupOp.Unary,
  ...GroupOp.Binary,
  ...GroupOp.Ternary,
  ...GroupOp.Marker,
  Ops.RESHAPE,
  Ops.PERMUTE,
  Ops.SHRINK,
  Ops.FLIP,
  Ops.PAD,
]);

/** Whether a REDUCE can be computed inside its consumers' kernel: nothing above it repeats or reduces it. */
function fusable(r: UOp, users: Map<UOp, UOp[]>, realized: Set<UOp>): boolean {
  const stack = [r];
  const seen = new Set<UOp>();
  while (stack.length) {
    const u = stack.pop()!;
    for (const p of users.get(u) ?? []) {
      if (seen.has(p)) continue;
      seen.add(p);
      // a reduce above repeats this one for each of its steps, even when it gets its own kernel
      if (!ONE_TO_ONE.has(p.op)) return false;
      if (!realized.has(p)) stack.push(p);
    }
  }
  return true;
}

/** Ops worth computing once rather than again for every copy an expand makes. */
const EXPENSIVE = new Set([
  Ops.EXP2,
  Ops.LOG2,
  Ops.SIN,
  Ops.SQRT,
  Ops.RECIP,
  Ops.POW,
  Ops.IDIV,
  Ops.MOD,
  Ops.DIV,
]);

/** Whether computing u (down to buffers, constants and reduces) involves an expensive op. */
function costly(u: UOp, memo: Map<UOp, boolean>): boolean {
  const stack = [u];
  while (stack.length) {
    const x = stack.pop()!;
    if (memo.get(x) === true || EXPENSIVE.has(x.op)) return true;
    if (memo.has(x) || isStorage(x) || x.op === Ops.REDUCE || x.op === Ops.CONST) continue;
    memo.set(x, false);
    stack.push(...x.src);
  }
  return false;
}

const numel = (u: UOp) => u.shape!.reduce<number>((n, d) => n * (typeof d === 'number' ? d : 2), 1);

/**
 * Decides which nodes get their own buffer: the roots, CONTIGUOUS, reduces that cannot fuse, and costly
 * elementwise values that an expand would recompute for every copy.
 */
export function findRealized(roots: readonly UOp[]): Set<UOp> {
  const realized = new Set<UOp>();
  const order = UOp.sink(...roots).toposort();
  // each node's users, built where a reduce asks (a wide graph without reduces needs none)
  let users: Map<UOp, UOp[]> | undefined;
  const usersOf = () => {
    if (users !== undefined) return users;
    users = new Map();
    for (const u of order)
      for (const s of u.src) {
        const list = users.get(s);
        if (list === undefined) users.set(s, [u]);
        else list.push(u);
      }
    return users;
  };
  for (const r of roots) if (!isStorage(r)) realized.add(r);
  for (const u of order) if (u.op === Ops.CONTIGUOUS || u.op === Ops.AFTER) realized.add(u);
  const memo = new Map<UOp, boolean>();
  for (const u of order) {
    if (u.op !== Ops.EXPAND || numel(u) <= numel(u.src[0]!)) continue;
    let v = u.src[0]!;
    while (GroupOp.Movement.has(v.op)) v = v.src[0]!;
    if (!isStorage(v) && v.op !== Ops.REDUCE && v.op !== Ops.CONST && costly(v, memo)) realized.add(v);
  }
  // users first, so a reduce knows whether the reduces above it are realized. A reduce over constants only
  // (an arange's prefix sum, a mask) stays fused: codegen collapses such counting loops
  const readsMemory = new Map<UOp, boolean>();
  for (const u of order) readsMemory.set(u, isStorage(u) || u.src.some((x) => readsMemory.get(x)));
  for (let i = order.length - 1; i >= 0; i--) {
    const u = order[i]!;
    if (u.op === Ops.REDUCE && !realized.has(u) && readsMemory.get(u) && !fusable(u, usersOf(), realized))
      realized.add(u);
  }
  return realized;
}

/** Row-major linear offset of an index into a shape. */
export function linearIndex(idx: readonly UOp[], shape: readonly sint[]): UOp {
  let lin = UOp.const(dtypes.index, 0);
  let stride: sint = 1;
  for (let k = shape.length - 1; k >= 0; k--) {
    lin = lin.add(idx[k]!.mul(UOp.index(stride)));
    stride =
      typeof stride === 'number' && typeof shape[k] === 'number'
        ? stride * (shape[k] as number)
        : UOp.index(stride).mul(UOp.index(shape[k]!));
  }
  return lin;
}

/** The indices into `shape` of a row-major linear offset. */
function unflatten(lin: UOp, shape: readonly sint[]): UOp[] {
  const out = new Array<UOp>(shape.length);
  let stride: sint = 1;
  for (let k = shape.length - 1; k >= 0; k--) {
    out[k] =
      shape[k] === 1 ? UOp.const(dtypes.index, 0) : lin.idiv(UOp.index(stride)).mod(UOp.index(shape[k]!));
    stride =
      typeof stride === 'number' && typeof shape[k] === 'number'
        ? stride * (shape[k] as number)
        : UOp.index(stride).mul(UOp.index(shape[k]!));
  }
  return out;
}

const TRUE = () => UOp.const(dtypes.bool, true);

// Lowering a value into a kernel is a rewrite: AT(u, i_0, ..., i_n-1, valid), an INDEX tagged AT, stands for
// tensor node u's element at indices i under the gate valid (a load outside it is not done). Each rule moves
// AT one node down (movement ops map the indices, a reduce opens loops, elementwise ops distribute) until it
// reaches memory (a load) or a constant; hash-consing shares equal subproblems.
const AT = 'at';
// (a scalar beside shaped operands, a constant mostly, takes no indices)
const at = (u: UOp, idx: readonly UOp[], valid: UOp) =>
  u.op === Ops.CONST ? u : UOp.make(Ops.INDEX, [u, ...(u.ndim ? idx : []), valid], null, AT);

/** Where element idx of a movement op's output lies in its source: the spec's movement ops as index maps. */
const INDEX_MAPS: Partial<Record<Ops, (u: UOp, idx: readonly UOp[]) => UOp[]>> = {
  [Ops.RESHAPE]: (u, idx) => unflatten(linearIndex(idx, u.shape!), u.src[0]!.shape!),
  [Ops.PERMUTE]: (u, idx) => {
    const inner = new Array<UOp>(idx.length);
    u.argOf(Ops.PERMUTE).forEach((a, k) => {
      inner[a] = idx[k]!;
    });
    return inner;
  },
  [Ops.EXPAND]: (u, idx) => idx.map((i, k) => (u.src[0]!.shape![k] === 1 ? UOp.const(dtypes.index, 0) : i)),
  [Ops.SHRINK]: (u, idx) => idx.map((i, k) => i.add(UOp.index(u.src[1]!.sizes[k]!))),
  [Ops.FLIP]: (u, idx) =>
    idx.map((i, k) => (u.argOf(Ops.FLIP)[k] ? UOp.index(u.shape![k]!).sub(1).sub(i) : i)),
};

/** Builds the kernels of one realized value. */
export class KernelBuilder {
  readonly bufs: UOp[] = [];
  private readonly params = new Map<UOp, UOp>();
  private rangeId = 0;

  constructor(
    private readonly realizedBuf: (u: UOp) => UOp | undefined,
    out: UOp,
  ) {
    this.param(out);
  }

  /** The kernel PARAM standing for a tensor-level buffer (a flat view of it). */
  param(buf: UOp): UOp {
    let p = this.params.get(buf);
    if (p === undefined) {
      const a = buf.argOf(Ops.BUFFER, Ops.PARAM);
      const size = buf.shape!.reduce<sint>(
        (n, d) => (typeof n === 'number' && typeof d === 'number' ? n * d : UOp.index(n).mul(UOp.index(d))),
        1,
      );
      p = UOp.make(Ops.PARAM, [UOp.shapeVec([size])], {
        slot: this.bufs.length,
        dtype: a.dtype,
        addrspace: AddrSpace.GLOBAL,
      });
      this.params.set(buf, p);
      this.bufs.push(buf);
    }
    return p;
  }

  /** A loop over an axis; an axis of size 1 needs none. */
  range(size: sint, type: AxisType): UOp {
    return size === 1 ? UOp.const(dtypes.index, 0) : UOp.range(size, this.rangeId++, type);
  }

  /** The scalar value of tensor node u at index idx, where `valid` holds: u lowered by the rules below. */
  lower(u: UOp, idx: readonly UOp[], valid: UOp): UOp {
    return graphRewrite(at(u, idx, valid), lowering, {
      ctx: this,
      bottomUp: true,
      name: 'lower into a kernel',
    });
  }

  /** One step of lowering AT(u, idx, valid). */
  step(x: UOp): UOp {
    let [u, ...idx] = x.src as [UOp, ...UOp[]];
    const valid = idx.pop()!;
    // a view of a constant is the constant: no index arithmetic (a JS number beside a tensor is one)
    let v = u;
    while ((INDEX_MAPS[v.op] !== undefined || GroupOp.Marker.has(v.op)) && this.realizedBuf(v) === undefined)
      v = v.src[0]!;
    if (v.op === Ops.CONST) return v;
    // a run of index maps and markers is one step: a chain of 100,000 views is not 100,000 rewrites of one node
    for (;;) {
      const buf = this.realizedBuf(u);
      if (buf !== undefined || u.op === Ops.BUFFER || u.op === Ops.PARAM)
        return this.load(buf ?? u, idx, valid);
      const map = INDEX_MAPS[u.op];
      if (map !== undefined) idx = map(u, idx);
      else if (!GroupOp.Marker.has(u.op)) break;
      u = u.src[0]!;
    }
    if (u.op === Ops.CONST) return u;
    if (u.op === Ops.PAD) {
      const offset = u.src[1]!.sizes;
      const inner = u.src[0]!.shape!;
      let inside = TRUE();
      const shifted = idx.map((i, k) => {
        const o = UOp.index(offset[k]!);
        inside = inside.and(i.ge(o)).and(i.lt(o.add(UOp.index(inner[k]!))));
        return i.sub(o);
      });
      return inside.where(at(u.src[0]!, shifted, valid.and(inside)), u.constLike(0));
    }
    if (u.op === Ops.REDUCE) {
      const { op, axes } = u.argOf(Ops.REDUCE);
      const shape = u.src[0]!.shape!;
      const loops = axes.map((a) => this.range(shape[a]!, AxisType.REDUCE));
      const inner = idx.map((i, k) => {
        const j = axes.indexOf(k);
        return j < 0 ? i : loops[j]!;
      });
      const ranges = loops.filter((r) => r.op === Ops.RANGE);
      const value = at(u.src[0]!, inner, valid);
      // reducing axes of size 1 leaves the one element
      return ranges.length ? UOp.make(Ops.REDUCE, [value, ...ranges], { op, axes: [] }) : value;
    }
    if (
      GroupOp.Unary.has(u.op) ||
      GroupOp.Binary.has(u.op) ||
      GroupOp.Ternary.has(u.op) ||
      u.op === Ops.BITCAST
    )
      return u.withSrc(u.src.map((s) => at(s, idx, valid)));
    throw new Error(`rangeify: cannot put ${opName(u.op)} in a kernel yet`);
  }

  private load(buf: UOp, idx: readonly UOp[], valid: UOp): UOp {
    const address = UOp.make(Ops.INDEX, [this.param(buf), linearIndex(idx, buf.shape!)]);
    if (valid.op === Ops.CONST && valid.constValue === true) return UOp.make(Ops.LOAD, [address]);
    return UOp.make(Ops.LOAD, [address, UOp.const(buf.dtype, 0), valid]);
  }
}

/** A gated load already reads 0 outside its gate: where(inside, load gated by ... & inside, 0) is the load. */
function gatedLoad(w: UOp): UOp | undefined {
  const [inside, load, zero] = w.src as [UOp, UOp, UOp];
  if (load.op !== Ops.LOAD || load.src.length !== 3 || zero.op !== Ops.CONST || zero.constValue !== 0)
    return undefined;
  // the gate is a conjunction built outside in: valid & inside & inside2 ...
  for (let g: UOp | undefined = load.src[2]; g !== undefined; g = g.op === Ops.AND ? g.src[0] : undefined)
    if (g === inside || (g.op === Ops.AND && g.src[1] === inside)) return load;
  return undefined;
}

const lowering = new PatternMatcher<KernelBuilder>([
  [new UPat({ op: Ops.INDEX, name: 'x', where: (u) => u.tag === AT }), ({ x }, kb) => kb.step(x!)],
  [new UPat({ op: Ops.WHERE, name: 'w' }), ({ w }) => gatedLoad(w!)],
]);

/** A store of a tensor-level value into a tensor-level buffer, one element per iteration of a kernel's loops. */
type Output = { value: UOp; out: UOp };

/**
 * The kernel storing each output's value into its buffer (the first output's is bufs[0]); all have one shape, so
 * they share the loops, and what their values share is computed once.
 */
function kernelFor(outputs: readonly Output[], bufferOf: Map<UOp, UOp>): Kernel {
  const values = new Set(outputs.map((o) => o.value));
  const kb = new KernelBuilder((x) => (values.has(x) ? undefined : bufferOf.get(x)), outputs[0]!.out);
  const shape = outputs[0]!.value.shape!;
  const ranges = shape.map((d) => kb.range(d, AxisType.LOOP));
  const stores = outputs.map(({ value, out }) => {
    const address = UOp.make(Ops.INDEX, [kb.param(out), linearIndex(ranges, shape)]);
    return UOp.make(Ops.STORE, [address, kb.lower(value, ranges, TRUE())]);
  });
  const body = stores.length === 1 ? stores[0]! : UOp.make(Ops.GROUP, stores);
  const loops = ranges.filter((r) => r.op === Ops.RANGE);
  return { ast: UOp.sink(loops.length ? UOp.make(Ops.END, [body, ...loops]) : body), bufs: kb.bufs };
}

/** Whether a kernel reads each buffer it writes only at the element it writes there (so writing in place is safe). */
function readsOnlyWhereItWrites(k: Kernel): boolean {
  const nodes = k.ast.toposort();
  const written = new Map<UOp, UOp>();
  for (const u of nodes) if (u.op === Ops.STORE) written.set(u.src[0]!.src[0]!, u.src[0]!);
  return nodes.every((u) => u.op !== Ops.INDEX || (written.get(u.src[0]!) ?? u) === u);
}

/** The value an assign, AFTER(buf, STORE(buf, value)), writes into its buffer. */
const assigned = (u: UOp) => u.src[1]!.src[1]!;

/**
 * The realized nodes and buffers a kernel computing `value` reads, those it reads only at the element it computes
 * (through elementwise ops of its shape), and whether its graph down to them reduces.
 */
function kernelReads(
  value: UOp,
  realized: Set<UOp>,
): { reads: Set<UOp>; aligned: Set<UOp>; reduces: boolean } {
  const reads = new Set<UOp>();
  const aligned = new Set<UOp>();
  const elsewhere = new Set<UOp>();
  let reduces = false;
  // (node, whether every op above it on this path is elementwise over the value's shape)
  const stack: [UOp, boolean][] = [[value, true]];
  const seen = new Set<UOp>();
  const seenAligned = new Set<UOp>();
  while (stack.length) {
    const [u, inLine] = stack.pop()!;
    if (u !== value && (realized.has(u) || isStorage(u))) {
      reads.add(u);
      (inLine && u.shape !== null && sameShape(u.shape, value.shape!) ? aligned : elsewhere).add(u);
      continue;
    }
    if ((inLine ? seenAligned : seen).has(u)) continue;
    (inLine ? seenAligned : seen).add(u);
    if (u.op === Ops.REDUCE) reduces = true;
    const keeps =
      inLine && (GroupOp.Unary.has(u.op) || GroupOp.Binary.has(u.op) || GroupOp.Ternary.has(u.op));
    for (const s of u.src) stack.push([s, keeps && s.shape !== null && sameShape(s.shape, value.shape!)]);
  }
  for (const u of elsewhere) aligned.delete(u);
  return { reads, aligned, reduces };
}

const sameShape = (a: readonly sint[], b: readonly sint[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * Assigns that the kernel of the one realized node reading them stores too: an assign whose own kernel would be
 * elementwise, read by one other kernel, only at the element that kernel writes (an optimizer's moments, read
 * by its parameter's update), and whose inputs no kernel scheduled between the two overwrites. One kernel then
 * does the work of several, and the assigned values are not read back from memory. Maps each node whose kernel
 * takes assigns in to them.
 */
function sharedKernels(order: readonly UOp[], realized: Set<UOp>): Map<UOp, UOp[]> {
  const steps = order.filter((u) => realized.has(u));
  // only assigns are taken in: a graph without them (a forward pass) needs no walk of its kernels' reads
  if (!steps.some((u) => u.op === Ops.AFTER)) return new Map();
  const reads = steps.map((u) => kernelReads(u.op === Ops.AFTER ? assigned(u) : u, realized));
  const readers = new Map<UOp, number>();
  for (const r of reads) for (const x of r.reads) readers.set(x, (readers.get(x) ?? 0) + 1);
  const at = new Map(steps.map((u, i) => [u, i]));
  const taken = new Map<UOp, UOp[]>();
  steps.forEach((u, i) => {
    // each buffer written once (successive writes to one buffer, a chain of setitems, keep their kernels)
    const writes = new Set(u.op === Ops.AFTER ? [u.src[0]!] : []);
    const mine: UOp[] = [];
    for (const r of reads[i]!.aligned) {
      const j = at.get(r);
      // (one level: a kernel that takes assigns in is not taken in itself)
      if (j === undefined || r.op !== Ops.AFTER || readers.get(r) !== 1 || reads[j]!.reduces || taken.has(r))
        continue;
      if (writes.has(r.src[0]!)) continue;
      // a kernel between the two must not overwrite what r reads, nor read the buffer r writes
      const apart = steps
        .slice(j + 1, i)
        .some(
          (w, k) =>
            (w.op === Ops.AFTER && reads[j]!.reads.has(w.src[0]!)) || reads[j + 1 + k]!.reads.has(r.src[0]!),
        );
      if (apart) continue;
      mine.push(r);
      writes.add(r.src[0]!);
    }
    if (mine.length > 0) taken.set(u, mine);
  });
  return taken;
}

/** The kernels that compute `roots`, in an order where every kernel runs after the kernels it reads. */
export function rangeify(
  roots: readonly UOp[],
  device: (u: UOp) => string,
  maxBuffers = Number.POSITIVE_INFINITY,
): Schedule {
  const realized = findRealized(roots);
  const outputs = new Map<UOp, UOp>();
  for (const r of roots) if (isStorage(r)) outputs.set(r, r);
  const bufferOf = new Map<UOp, UOp>();
  const kernels: Kernel[] = [];
  // sources before users: a kernel's inputs are scheduled before it
  const order = UOp.sink(...roots).toposort();
  const taken = sharedKernels(order, realized);
  const takenIn = new Set([...taken.values()].flat());
  for (const u of order) {
    if (!realized.has(u)) continue;
    // an assign, AFTER(buf, STORE(buf, value)), writes value into buf itself
    const isAssign = u.op === Ops.AFTER;
    const value = isAssign ? assigned(u) : u;
    const out = isAssign ? u.src[0]! : newBuffer(u.shape!, u.dtype, device(u));
    // an empty result needs no kernel (and its loops would not hold the store once indices fold), and an assign
    // that a later kernel stores has none of its own
    if (!u.shape!.includes(0) && !takenIn.has(u)) {
      const others = taken.get(u) ?? [];
      const also = others.map((r) => ({ value: assigned(r), out: r.src[0]! }));
      // the value computes the assigns it read from memory
      const inline = new Map(others.map((r) => [r, assigned(r)]));
      const shared =
        also.length > 0
          ? kernelFor([{ value: substitute(value, inline), out }, ...also], bufferOf)
          : undefined;
      if (shared !== undefined && shared.bufs.length <= maxBuffers && readsOnlyWhereItWrites(shared))
        kernels.push(shared);
      else {
        // too many buffers, or a store another output reads elsewhere: each in a kernel of its own, as before
        for (const o of also) kernels.push(...kernelsFor(o, true, bufferOf, device));
        kernels.push(...kernelsFor({ value, out }, isAssign, bufferOf, device));
      }
    }
    bufferOf.set(u, out);
    if (roots.includes(u)) outputs.set(u, out);
  }
  return { kernels, outputs };
}

/**
 * The kernel storing a value into its buffer, or, for an assign that reads other elements of the buffer it
 * overwrites, a kernel computing it aside and one copying it over.
 */
function kernelsFor(
  o: Output,
  isAssign: boolean,
  bufferOf: Map<UOp, UOp>,
  device: (u: UOp) => string,
): Kernel[] {
  const k = kernelFor([o], bufferOf);
  if (!isAssign || readsOnlyWhereItWrites(k)) return [k];
  const temp = newBuffer(o.value.shape!, o.value.dtype, device(o.value));
  return [
    kernelFor([{ value: o.value, out: temp }], bufferOf),
    kernelFor([{ value: temp, out: o.out }], bufferOf),
  ];
}
