// WMMA accumulates in place: a sum into a WMMA's result becomes its accumulator operand (D = A * B + C), so a
// tensor-core reduction's accumulator register is C itself and no separate vector add follows each WMMA.
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { UOp } from '../uop/uop.ts';

const isZero = (u: UOp) =>
  (u.op === Ops.STACK && u.src.every(isZero)) || (u.op === Ops.CONST && Number(u.constValue) === 0);

/** x + WMMA(a, b, c) as WMMA(a, b, x + c), and x alone where c is zero. */
function accumulate(x: UOp, w: UOp): UOp {
  const [a, b, c] = w.src as [UOp, UOp, UOp];
  return w.withSrc([a, b, isZero(c) ? x : x.add(c)]);
}

const rules = new PatternMatcher([
  [
    new UPat({
      op: Ops.ADD,
      src: [new UPat({ name: 'x' }), new UPat({ op: Ops.WMMA, name: 'w' })],
      anyOrder: true,
    }),
    ({ x, w }) => accumulate(x!, w!),
  ],
]);

/** The kernel with each sum into a WMMA's result moved into its accumulator. */
export function accumulateInWmma(ast: UOp): UOp {
  return graphRewrite(ast, rules, { name: 'WMMA accumulates in place' });
}
