// Reduce to accumulators: each REDUCE becomes a REG buffer initialized with the reduction's identity,
// updated inside the reduce loops and read after them, ordered with AFTER and END.
import { AddrSpace, type DType } from '../dtype.ts';
import { type ArgOf, Ops, type ReduceOp } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

/** The value a reduction starts from, which leaves any other value unchanged. */
export function reduceIdentity(op: ReduceOp, dtype: DType): UOp {
  if (op === Ops.ADD) return UOp.const(dtype, 0);
  if (op === Ops.MUL) return UOp.const(dtype, 1);
  return UOp.const(dtype, dtype.isFloat ? -Infinity : dtype.min);
}

interface Ctx {
  next: number;
}

function accumulate(r: UOp, ctx: Ctx): UOp {
  const { op } = r.arg as ArgOf<Ops.REDUCE>;
  const [value, ...ranges] = r.src as [UOp, ...UOp[]];
  const acc = UOp.make(Ops.PARAM, [UOp.shapeVec([1])], {
    slot: ctx.next++,
    dtype: r.dtype,
    addrspace: AddrSpace.REG,
  });
  const zero = UOp.index(0);
  // the accumulator restarts for every element of the loops around the reduce
  const outer = [...rangesOf(r)].sort((a, b) => a.id - b.id);
  const home = outer.length ? UOp.make(Ops.AFTER, [acc, ...outer]) : acc;
  const init = UOp.make(Ops.STORE, [UOp.make(Ops.INDEX, [home, zero]), reduceIdentity(op, r.dtype)]);
  // read and written in every iteration of the reduce loops
  const running = UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [acc, init, ...ranges]), zero]);
  const update = UOp.make(Ops.STORE, [running, UOp.make(op, [UOp.make(Ops.LOAD, [running]), value])]);
  const done = UOp.make(Ops.END, [update, ...ranges]);
  return UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [acc, done]), zero])]);
}

const rules = new PatternMatcher<Ctx>([
  [new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }, ctx) => accumulate(r!, ctx)],
]);

export function reduceToAccumulators(ast: UOp): UOp {
  return graphRewrite(ast, rules, { ctx: { next: 0 }, name: 'reduce to accumulators' });
}
