// Callify: the graph to realize becomes one stateless function over PARAMs (its input buffers) and its constants,
// whose content key caches everything downstream: a graph identical but for its buffers or the values of its
// constants reuses the whole schedule.
import type { ConstValue, DType } from '../dtype.ts';
import { GroupOp, Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

export interface Callified {
  /** The function body: a SINK of the roots, input buffers replaced by PARAM 0, 1, ..., constants by placeholders. */
  readonly body: UOp;
  /** The input BUFFERs, in PARAM order. */
  readonly inputs: readonly UOp[];
  /** The value of each placeholder, by its number. */
  readonly values: readonly ConstValue[];
  /** Whether the graph calls functions (FUNCTION, CALL): it must be resolved first (schedule/resolve.ts). */
  readonly calls: boolean;
  /** The assigns (AFTER) the body makes: realizing it does them (markDone). */
  readonly assigns: readonly UOp[];
}

/**
 * Assigns done, with the buffer each wrote. A graph built before an assign was realized still holds its AFTER:
 * realized later, it reads that buffer, and does not write it again (as tinygrad's realize rewrites the graphs of
 * every live tensor). An assign made again (the same node: the same value over the same buffer) is a new write
 * (assignMade).
 */
const done = new WeakMap<UOp, UOp>();

/** Records that a realize did these assigns. */
export function markDone(assigns: readonly UOp[]): void {
  for (const a of assigns) done.set(a, a.src[0]!);
}

/** An assign node made by a tensor's assign: a write to do, even where an equal node was done before. */
export function assignMade(after: UOp): UOp {
  done.delete(after);
  return after;
}

const isValueDType = (d: DType) =>
  d.count === 1 && (d.kind === 'float' || d.kind === 'int' || d.kind === 'uint');

/**
 * Whether source i of tensor node u is a value the kernels compute with (an operand, what a movement op or a
 * reduce reads, what an assign stores), not a bound, a shape or a variable's range.
 */
const isValueUse = (u: UOp, i: number): boolean =>
  GroupOp.Unary.has(u.op) ||
  GroupOp.Binary.has(u.op) ||
  GroupOp.Ternary.has(u.op) ||
  u.op === Ops.BITCAST ||
  (i === 0 && (GroupOp.Movement.has(u.op) || GroupOp.Marker.has(u.op) || u.op === Ops.REDUCE)) ||
  (i === 1 && u.op === Ops.STORE);

/**
 * A graph constant's placeholder, numbered by its use (two uses of one constant are two placeholders, so graphs
 * of one shape number them alike whatever their values). Its value, 1, only has to be one rangeify treats as
 * any other: a constant 0 would let a gated load absorb the where around it.
 */
const placeholder = (k: number, dtype: DType) => UOp.make(Ops.CONST, [], { value: 1, dtype }, k);

/** The starts a kernel reads at run time travel as int32 (engine/lift.ts). */
const MAX_START = 2 ** 31 - 1;

/**
 * Where u slices the leading axis of a stored input, seen through reshapes (a batch out of a data set): its start
 * and the largest start it could have. That start becomes a placeholder, so a loop over batches runs one schedule
 * and one program.
 */
function inputSlice(u: UOp): { start: number; max: number } | undefined {
  if (u.op !== Ops.SHRINK) return undefined;
  let x = u.src[0]!;
  while (x.op === Ops.RESHAPE) x = x.src[0]!;
  const [start] = u.src[1]!.sizes;
  const [size] = u.src[2]!.sizes;
  const [dim] = u.src[0]!.shape!;
  if (x.op !== Ops.BUFFER || typeof start !== 'number' || typeof dim !== 'number' || typeof size !== 'number')
    return undefined;
  return size < dim && dim - size <= MAX_START ? { start, max: dim - size } : undefined;
}

/**
 * A slice's start as a placeholder: a variable in [0, max] (every start the slice can have), so that rangeify's
 * index math holds for any value, numbered as the constants' placeholders are.
 */
const startPlaceholder = (k: number, max: number) => UOp.variable('start', 0, max).withTag(k);

/**
 * callify's result by graph (the SINK of its roots; hash-consing makes an equal graph the same node), for as long
 * as the graph lives: an eager loop that realizes the same graph again (an op on the same tensors) walks it once.
 * Nothing else goes in: the inputs are buffer nodes, whose contents are read when the kernels run.
 */
const callified = new WeakMap<UOp, Callified>();

/**
 * Replaces the realized buffers under `roots` by PARAMs numbered in order of first appearance (an assign done
 * already by the buffer it wrote), each use of a float or integer constant as a value by a placeholder, and the
 * start of a slice of an input (inputSlice) by one (engine/lift.ts gives kernels their values).
 */
export function callify(roots: readonly UOp[]): Callified {
  const sink = UOp.sink(...roots);
  let f = callified.get(sink);
  // an assign of the graph done since reads its buffer instead; a graph that reads done assigns is not kept, as
  // one of them made again is to be done again
  if (f === undefined || f.assigns.some((a) => done.has(a))) {
    const [g, readsDone] = callifyGraph(sink);
    if (readsDone) callified.delete(sink);
    else callified.set(sink, g);
    f = g;
  }
  return f;
}

function callifyGraph(sink: UOp): [Callified, boolean] {
  const inputs: UOp[] = [];
  const values: ConstValue[] = [];
  // the nodes that change (most of a graph's are its shapes' and stay): the others map to themselves
  const out = new Map<UOp, UOp>();
  const assigns: UOp[] = [];
  let calls = false;
  let readsDone = false;
  const input = (buf: UOp) => {
    let p = out.get(buf);
    if (p === undefined) {
      const { dtype, device } = buf.argOf(Ops.BUFFER);
      // the buffer's own shape vector: UOp.param would build it again from the shape
      out.set(buf, (p = UOp.make(Ops.PARAM, buf.src, { slot: inputs.length, dtype, device })));
      inputs.push(buf);
    }
    return p;
  };
  for (const u of sink.toposort((x) => done.has(x))) {
    if (u.op === Ops.FUNCTION || u.op === Ops.CALL) calls = true;
    if (u.op === Ops.AFTER) assigns.push(u);
    if (u.op === Ops.BUFFER) {
      input(u);
      continue;
    }
    let src: UOp[] | undefined;
    for (let i = 0; i < u.src.length; i++) {
      const s = u.src[i]!;
      const wrote = done.get(s);
      if (wrote !== undefined) readsDone = true;
      let r = wrote !== undefined ? input(wrote) : (out.get(s) ?? s);
      if (s.op === Ops.CONST && isValueDType(s.dtype) && isValueUse(u, i)) {
        r = placeholder(values.length, s.dtype);
        values.push(s.constValue);
      } else if (i === 1 && u.op === Ops.SHRINK) {
        const slice = inputSlice(u);
        if (slice !== undefined) {
          r = UOp.shapeVec([startPlaceholder(values.length, slice.max), ...s.sizes.slice(1)]);
          values.push(slice.start);
        }
      }
      if (r !== s && src === undefined) src = u.srcHead(i);
      src?.push(r);
    }
    if (src !== undefined) out.set(u, u.withSrc(src));
  }
  return [{ body: out.get(sink) ?? sink, inputs, values, calls, assigns }, readsDone];
}
