// Reduce to accumulators: each REDUCE becomes a REG buffer initialized with the reduction's identity,
// updated inside the reduce loops and read after them, ordered with AFTER and END. Reductions over the same
// loops (the copies an UPCAST makes) update their accumulators in one loop. On a GPU the accumulator joins the
// start of the reduced value's chain (((acc + p0) + p1) + ...: an UNROLL's copies as expand combines them), so
// that each product is one fused multiply-add; a CPU keeps acc + (p0 + p1 + ...), whose copies' sum overlaps
// the next iteration's (src/codegen/opt/unrolls.ts).
import { AddrSpace, type DType, dtypes } from '../dtype.ts';
import { Ops, type ReduceOp } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

/** The value a reduction starts from, which leaves any other value unchanged. */
export function reduceIdentity(op: ReduceOp, dtype: DType): UOp {
  if (op === Ops.ADD) return UOp.const(dtype, 0);
  if (op === Ops.MUL) return UOp.const(dtype, 1);
  return UOp.const(dtype, dtype.isFloat ? -Infinity : dtype.min);
}

/** An accumulator, the loops that update it and how many loops enclose them. */
interface Loop {
  acc: UOp;
  ranges: string;
  depth: number;
}

const axisId = (r: UOp) => r.argOf(Ops.RANGE).id;

interface Ctx {
  next: number;
  loops: Loop[];
  /** The accumulator starts the value's chain of the reduce op instead of being added to its end. */
  chain: boolean;
}

/** The terms of a left-leaning chain of `op`, ((t0 op t1) op t2) op t3, in order. */
function chainTerms(value: UOp, op: ReduceOp): UOp[] {
  const terms: UOp[] = [];
  let u = value;
  for (; u.op === op; u = u.src[0]!) terms.push(u.src[1]!);
  terms.push(u);
  return terms.reverse();
}

function accumulate(r: UOp, ctx: Ctx): UOp {
  const { op } = r.argOf(Ops.REDUCE);
  const [value, ...ranges] = r.src as [UOp, ...UOp[]];
  // a vector reduction (shape (k,)) keeps k lanes in one register
  const lanes = r.shape!.length ? Number(r.shape![0]) : 0;
  const acc = UOp.make(Ops.PARAM, [UOp.shapeVec([Math.max(lanes, 1)])], {
    slot: ctx.next++,
    dtype: r.dtype,
    addrspace: AddrSpace.REG,
  });
  const whole = lanes
    ? UOp.make(Ops.VCONST, [], { values: Array.from({ length: lanes }, (_, i) => i), dtype: dtypes.index })
    : UOp.index(0);
  const start = reduceIdentity(op, r.dtype);
  // the accumulator restarts for every element of the loops around the reduce
  const outer = [...rangesOf(r)].sort((a, b) => axisId(a) - axisId(b));
  const home = outer.length ? UOp.make(Ops.AFTER, [acc, ...outer]) : acc;
  const init = UOp.make(Ops.STORE, [
    UOp.make(Ops.INDEX, [home, whole]),
    lanes ? UOp.make(Ops.STACK, Array(lanes).fill(start)) : start,
  ]);
  // read and written in every iteration of the reduce loops
  const running = UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [acc, init, ...ranges]), whole]);
  const terms = ctx.chain ? chainTerms(value, op) : [value];
  const sum = terms.reduce((a, t) => UOp.make(op, [a, t]), UOp.make(Ops.LOAD, [running]));
  const update = UOp.make(Ops.STORE, [running, sum]);
  const done = UOp.make(Ops.END, [update, ...ranges]);
  ctx.loops.push({
    acc,
    ranges: ranges
      .map((x) => axisId(x))
      .sort((a, b) => a - b)
      .join(','),
    depth: outer.length,
  });
  return UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [acc, done]), whole])]);
}

const rules = new PatternMatcher<Ctx>([
  [new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }, ctx) => accumulate(r!, ctx)],
]);

/** The accumulator an END's loop updates. */
function updated(end: UOp): UOp | undefined {
  const store = end.src[0]!;
  const buf = store.op === Ops.STORE ? store.src[0]!.src[0]! : undefined;
  return buf?.op === Ops.AFTER ? buf.src[0] : undefined;
}

/** One END for the updates of the accumulators that run over the same loops, innermost loops first. */
function shareLoops(ast: UOp, loops: readonly Loop[]): UOp {
  const groups = new Map<string, Loop[]>();
  for (const l of loops) groups.set(l.ranges, [...(groups.get(l.ranges) ?? []), l]);
  const shared = [...groups.values()].filter((g) => g.length > 1).sort((a, b) => b[0]!.depth - a[0]!.depth);
  for (const group of shared) {
    const accs = new Set(group.map((l) => l.acc));
    // found again each time: merging an inner group rebuilt the ENDs around it
    const ends = ast.toposort().filter((u) => u.op === Ops.END && accs.has(updated(u)!));
    const one = UOp.make(Ops.END, [
      UOp.make(
        Ops.GROUP,
        ends.map((e) => e.src[0]!),
      ),
      ...ends[0]!.src.slice(1),
    ]);
    ast = substitute(ast, new Map(ends.map((e) => [e, one])));
  }
  return ast;
}

/** `chain`: each term of the reduced value is added to the accumulator in turn (a GPU's fused multiply-adds). */
export function reduceToAccumulators(ast: UOp, chain = false): UOp {
  // after the registers STAGE holds its copies in
  const held = ast
    .toposort()
    .filter((u) => u.op === Ops.PARAM && u.argOf(Ops.PARAM).addrspace === AddrSpace.REG);
  const ctx: Ctx = {
    next: Math.max(-1, ...held.map((u) => u.argOf(Ops.PARAM).slot as number)) + 1,
    loops: [],
    chain,
  };
  return shareLoops(graphRewrite(ast, rules, { ctx, name: 'reduce to accumulators' }), ctx.loops);
}
