// Rangeify: splits a tensor graph into kernels. Movement ops become index maps over RANGEs, elementwise
// chains fuse, a reduce fuses with its inputs and with the elementwise ops that consume it, and values a
// kernel cannot recompute cheaply (reduces seen through an expand, CONTIGUOUS) end their own kernel.
import { AddrSpace, type DType, dtypes } from '../dtype.ts';
import { AxisType, GroupOp, Ops, opName } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { sint } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';

/** One kernel: its AST (a SINK over the store into bufs[0]) and the tensor-level buffers it binds, in slot order. */
export interface Kernel {
  ast: UOp;
  /** BUFFER nodes of the tensor graph; bufs[k] is the kernel's PARAM k; bufs[0] is written. */
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

/** The kernel storing `value` (a tensor-level node) into the tensor-level buffer `out`. */
function kernelFor(value: UOp, out: UOp, bufferOf: Map<UOp, UOp>): Kernel {
  const kb = new KernelBuilder((x) => (x === value ? undefined : bufferOf.get(x)), out);
  const shape = value.shape!;
  const ranges = shape.map((d) => kb.range(d, AxisType.LOOP));
  const address = UOp.make(Ops.INDEX, [kb.param(out), linearIndex(ranges, shape)]);
  const store = UOp.make(Ops.STORE, [address, kb.lower(value, ranges, TRUE())]);
  const loops = ranges.filter((r) => r.op === Ops.RANGE);
  return { ast: UOp.sink(loops.length ? UOp.make(Ops.END, [store, ...loops]) : store), bufs: kb.bufs };
}

/** Whether a kernel reads its output buffer only at the element it writes (so writing in place is safe). */
function readsOnlyWhereItWrites(k: Kernel): boolean {
  const out = k.ast.toposort().find((u) => u.op === Ops.STORE)!.src[0]!;
  return k.ast.toposort().every((u) => u.op !== Ops.INDEX || u.src[0] !== out.src[0] || u === out);
}

/** The kernels that compute `roots`, in an order where every kernel runs after the kernels it reads. */
export function rangeify(roots: readonly UOp[], device: (u: UOp) => string): Schedule {
  const realized = findRealized(roots);
  const outputs = new Map<UOp, UOp>();
  for (const r of roots) if (isStorage(r)) outputs.set(r, r);
  const bufferOf = new Map<UOp, UOp>();
  const kernels: Kernel[] = [];
  // sources before users: a kernel's inputs are scheduled before it
  for (const u of UOp.sink(...roots).toposort()) {
    if (!realized.has(u)) continue;
    // an assign, AFTER(buf, STORE(buf, value)), writes value into buf itself
    const isAssign = u.op === Ops.AFTER;
    const value = isAssign ? u.src[1]!.src[1]! : u;
    const out = isAssign ? u.src[0]! : newBuffer(u.shape!, u.dtype, device(u));
    // an empty result needs no kernel (and its loops would not hold the store once indices fold)
    if (!u.shape!.includes(0)) {
      const k = kernelFor(value, out, bufferOf);
      if (!isAssign || readsOnlyWhereItWrites(k)) kernels.push(k);
      else {
        // the value reads other elements of the buffer it overwrites: compute it aside, then copy
        const temp = newBuffer(u.shape!, u.dtype, device(u));
        kernels.push(kernelFor(value, temp, bufferOf), kernelFor(temp, out, bufferOf));
      }
    }
    bufferOf.set(u, out);
    if (roots.includes(u)) outputs.set(u, out);
  }
  return { kernels, outputs };
}
