// Stored operands: costly math that a sum of products reads many times is stored once instead of computed
// again for every output it is multiplied into, and (off GPUs) a product that would gather its operand reads a
// copy in the layout its register tile takes vectors from.
import { type ConstValue, dtypes } from '../dtype.ts';
import { execAlu } from '../uop/alu.ts';
import { ALU, AxisType, GroupOp, Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { findRealized, KernelBuilder, newBuffer } from './rangeify.ts';

/**
 * An operand costing at least this many ops is worth a store: a gradient through pooling and batch norm (16 to
 * 30 ops) is; a relu's mask, even one that recomputes the relu of a sum and a bias (4 to 6), is not: the tiles
 * compute it once for all their columns.
 */
const STORED_COST = 8;
/** ... where the sum reads each of its elements at least this often: tiles share a computed one among 16 copies. */
const STORED_READS = 8;

/** The fewest lanes worth a vector (AVX2's floats; AVX-512 takes 16). */
const MIN_LANES = 8;

/** Nodes a kernel reads from memory or knows: an operand's cost stops at them. */
const ENDS = new Set([Ops.BUFFER, Ops.PARAM, Ops.CONST, Ops.REDUCE, Ops.CONTIGUOUS, Ops.AFTER]);

const addressOf = (load: UOp) => load.src[0]!.src[1]!;
const numel = (u: UOp) => u.shape!.reduce<number>((n, d) => n * (typeof d === 'number' ? d : 2), 1);
const viewed = (u: UOp) => {
  while (GroupOp.Movement.has(u.op)) u = u.src[0]!;
  return u;
};

/** The distinct ALU ops computing v, down to what a kernel loads. */
function cost(v: UOp): number {
  const seen = new Set<UOp>();
  let n = 0;
  for (const stack = [v]; stack.length; ) {
    const x = stack.pop()!;
    if (seen.has(x) || (x !== v && ENDS.has(x.op))) continue;
    seen.add(x);
    if (ALU.has(x.op)) n++;
    stack.push(...x.src);
  }
  return n;
}

/**
 * The padded value a product's side reads through its views below every expand (a conv's padded input, not
 * its windows), if any: stored padded, the sum's loads of it need no bounds test, which kept them scalar (the
 * transposed conv of an input gradient ran at 3 GFLOP/s reading its padded output gradient, 27 stored).
 */
function paddedView(side: UOp): UOp | undefined {
  let pad: UOp | undefined;
  for (let x = side; GroupOp.Movement.has(x.op); x = x.src[0]!)
    if (x.op === Ops.EXPAND) pad = undefined;
    else if (x.op === Ops.PAD) pad ??= x;
  return pad;
}

/**
 * The value of an index expression with every range in it given a value, computed node by node as constant
 * folding would (src/uop/alu.ts); undefined where a node is not plain arithmetic on constants, ranges and
 * variables (a slice's start, callify.ts: taken at its least, as steps between addresses do not depend on it).
 */
function evaluate(
  idx: UOp,
  values: ReadonlyMap<UOp, number>,
  order: readonly UOp[] = idx.toposort(),
): number | undefined {
  const known = new Map<UOp, ConstValue | undefined>();
  for (const u of order) {
    let v: ConstValue | undefined;
    if (u.op === Ops.CONST) v = u.constValue;
    else if (u.op === Ops.RANGE) v = values.get(u);
    else if (u.op === Ops.PARAM && u.src.length === 3)
      v = u.vmin; // a variable: PARAM (shape, min, max)
    else if (ALU.has(u.op) && u.dtype.count === 1) {
      const vals = u.src.map((x) => known.get(x));
      if (vals.every((x) => x !== undefined))
        v = execAlu(u.op, u.src[u.op === Ops.WHERE ? 1 : 0]!.dtype, vals as ConstValue[], u.dtype);
    }
    known.set(u, v);
  }
  const out = known.get(idx);
  return typeof out === 'number' ? out : undefined;
}

/**
 * The axis of the stored value v that should be innermost for the product `m` (whose `side` reads v through
 * views) to take vectors from it: the innermost output axis of the sum that only this side reads. Found by
 * lowering the product over fresh loops, down to what rangeify realizes (`realized`), and stepping each loop
 * once in v's address.
 */
function laneAxis(
  m: UOp,
  side: number,
  reduced: readonly number[],
  v: UOp,
  realized: ReadonlySet<UOp>,
): number | undefined {
  // v and what rangeify realizes are read from buffers, as in the kernel: lowered through, a side of a
  // transformer's gradient took the whole network with it (seconds a probe, then the heap)
  const bufs = new Map<UOp, UOp>();
  const bufOf = (x: UOp) => {
    if (x !== v && !realized.has(x)) return undefined;
    return bufs.get(x) ?? bufs.set(x, newBuffer(x.shape!, x.dtype, 'probe')).get(x)!;
  };
  const buf = bufOf(v)!;
  const kb = new KernelBuilder(bufOf, buf);
  const loops = m.shape!.map((d) => kb.range(d, AxisType.LOOP));
  const lowered = m.src.map((s) => kb.lower(s, loops, UOp.const(dtypes.bool, true)));
  const load = lowered[side]!.toposort().find((u) => u.op === Ops.LOAD && u.src[0]!.src[0] === kb.param(buf));
  if (load === undefined || typeof v.shape!.at(-1) !== 'number') return undefined;
  const address = addressOf(load);
  const other = lowered[1 - side]!.toposort();
  // each address's nodes and ranges, walked once for all the steps asked of it
  const walks = new Map<UOp, { order: UOp[]; ranges: UOp[] }>();
  const walk = (a: UOp) => {
    let w = walks.get(a);
    if (w === undefined) {
      const order = a.toposort();
      walks.set(a, (w = { order, ranges: order.filter((l) => l.op === Ops.RANGE) }));
    }
    return w;
  };
  // every range at 0 but r at 1 (the ranges of a reduce inside a side too)
  const at = (a: UOp, r?: UOp) => new Map(walk(a).ranges.map((l) => [l, l === r ? 1 : 0]));
  const origins = new Map<UOp, number | undefined>();
  const step = (a: UOp, r: UOp) => {
    if (!origins.has(a)) origins.set(a, evaluate(a, at(a), walk(a).order));
    const [from, to] = [origins.get(a), evaluate(a, at(a, r), walk(a).order)];
    return from === undefined || to === undefined ? undefined : to - from;
  };
  // none where the other side has vectors already: an output axis only it reads, contiguously
  const mine = lowered[side]!.toposort();
  const otherLoads = other.filter((x) => x.op === Ops.LOAD).map(addressOf);
  const otherLanes = loops.some(
    (r, i) =>
      r.op === Ops.RANGE &&
      !reduced.includes(i) &&
      !mine.includes(r) &&
      (m.shape![i] as number) % MIN_LANES === 0 &&
      otherLoads.every((a) => !walk(a).ranges.includes(r) || step(a, r) === 1),
  );
  if (otherLanes) return undefined;
  // nor where every load reads the innermost reduce axis in whole vectors (A @ B^T: the tiles take lanes there)
  const inner = reduced.filter((i) => loops[i]!.op === Ops.RANGE).at(-1);
  const loads = [...other, ...mine].filter((x) => x.op === Ops.LOAD).map(addressOf);
  if (
    inner !== undefined &&
    (m.shape![inner] as number) % MIN_LANES === 0 &&
    loads.every((a) => [0, 1].includes(step(a, loops[inner]!) ?? -1))
  )
    return undefined;
  const strides = (v.shape as number[]).map((_, k) =>
    (v.shape as number[]).slice(k + 1).reduce((n, d) => n * d, 1),
  );
  for (let i = loops.length - 1; i >= 0; i--) {
    const r = loops[i]!;
    if (r.op !== Ops.RANGE || reduced.includes(i) || other.includes(r)) continue;
    const by = step(address, r);
    if (by !== undefined && by !== 0) return strides.includes(by) ? strides.indexOf(by) : undefined;
  }
  return undefined;
}

/**
 * The graph with costly operands of sums of products stored (CONTIGUOUS): an operand of >= STORED_COST ops
 * that the sum reads >= STORED_READS times an element (a conv's output gradient through pooling, batch norm
 * and relu: 16 ops, read 800 times by conv2's weight and input gradients in beautiful_mnist), and off GPUs a
 * padded view an operand reads (paddedView). Stored, they are plain loads that the CPU's register tiles reuse;
 * where the sum's vector axis is not the stored value's innermost (a conv's weight gradient wants the output
 * channels, NCHW has them outside), that sum reads a copy with the axis moved innermost (of a weight, a stored
 * value, or a cheap one, which the copy computes: the relu-masked input gradient from the layer above). GPUs
 * store too, with no copies (their threads coalesce along other axes): beautiful_mnist's 5x5 input gradient
 * by windows, which computed the gradient (20 ops) once for 4 x 5 products, 1.65 -> 1.17 ms on an H200; its
 * weight gradient 1.86 -> 1.72 (bench/steps_gpu.ts, one call).
 */
export function storeOperands(sink: UOp, gpu: boolean): UOp {
  const stored = new Set<UOp>();
  // products that read a stored value through a copy with another axis innermost: the side and the axis
  const relaid: { m: UOp; side: number; v: UOp; axis: number }[] = [];
  // what rangeify realizes of the graph as it comes, for the layout probes (found where one first asks)
  let realized: Set<UOp> | undefined;
  for (const u of sink.toposort()) {
    if (u.op !== Ops.REDUCE || u.argOf(Ops.REDUCE).op !== Ops.ADD) continue;
    let m = u.src[0]!;
    while (GroupOp.Movement.has(m.op) || m.op === Ops.CAST) m = m.src[0]!;
    if (m.op !== Ops.MUL) continue;
    m.src.forEach((s, side) => {
      // a GPU's gated loads cost little: a padded view stays a view there
      const padded = gpu ? undefined : paddedView(s);
      if (padded !== undefined && numel(m) >= STORED_READS * numel(padded)) stored.add(padded);
      const v = viewed(s);
      if (numel(m) < STORED_READS * numel(v) || v.op === Ops.CONST || v.op === Ops.REDUCE) return;
      // memory as it is (a weight) and a value cheap to recompute (a relu's mask times the gradient of the
      // layer above) may still be read through a copy in another layout, which computes it once
      if (!ENDS.has(v.op) && cost(v) >= STORED_COST) stored.add(v);
      // the layout is chosen where the product has the reduce's own shape (the sums of matmuls and convs)
      if (gpu || m !== u.src[0] || s === v) return;
      realized ??= findRealized(sink.src);
      const axis = laneAxis(m, side, u.argOf(Ops.REDUCE).axes, v, realized);
      if (axis !== undefined && axis !== v.shape!.length - 1) relaid.push({ m, side, v, axis });
    });
  }
  if (stored.size === 0 && relaid.length === 0) return sink;
  // rebuilt sources first: a stored value may hold another's sum (the gradient of the layer below)
  const relays = new Map<UOp, typeof relaid>();
  for (const r of relaid) relays.set(r.m, [...(relays.get(r.m) ?? []), r]);
  const rebuilt = new Map<UOp, UOp>();
  for (const u of sink.toposort()) {
    let w = u.withSourcesFrom(rebuilt);
    for (const { side, v, axis } of relays.get(u) ?? []) {
      const n = v.shape!.length;
      const order = [...Array(n).keys()].filter((k) => k !== axis).concat(axis);
      const back = order.map((_, k) => order.indexOf(k));
      const copy = UOp.make(Ops.CONTIGUOUS, [rebuilt.get(v)!.permute(order)]).permute(back);
      const read = new Map([[rebuilt.get(v)!, copy]]);
      w = w.withSrc(w.src.map((x, i) => (i === side ? substitute(x, read) : x)));
    }
    rebuilt.set(u, stored.has(u) ? UOp.make(Ops.CONTIGUOUS, [w]) : w);
  }
  return rebuilt.get(sink)!;
}
