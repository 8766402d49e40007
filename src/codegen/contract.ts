// Fused multiply-adds placed by the IR, for a target whose compiler contracts none of its own (the CPU's C is
// compiled with -ffp-contract=off): a float32 or float64 ADD of a MUL becomes MULACC, rendered as an FMA, so a
// kernel's bits are the same at every optimization level of its compiler (gcc contracts only from -O2 on, where
// its PRE pass decides which products meet which adds). Halves are left: they round after every op.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { UOp } from '../uop/uop.ts';

const CONTRACTED = new Set([dtypes.float32, dtypes.float64]);

/** a + b as one MULACC where b, else a, is a product: the accumulator's own term, b, is tried first. */
function fused(add: UOp): UOp | undefined {
  if (!CONTRACTED.has(add.dtype.base)) return undefined;
  const [a, b] = add.src as [UOp, UOp];
  const [product, addend] = b.op === Ops.MUL ? [b, a] : a.op === Ops.MUL ? [a, b] : [];
  if (product === undefined || addend === undefined) return undefined;
  return product.src[0]!.alu(Ops.MULACC, product.src[1]!, addend);
}

const rules = new PatternMatcher([[new UPat({ op: Ops.ADD, name: 'add' }), ({ add }) => fused(add!)]]);

export const contractMulAdds = (k: UOp): UOp =>
  graphRewrite(k, rules, { name: 'fused multiply-adds', ctx: {} });
