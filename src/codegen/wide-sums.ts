// Wide sums: a float32 sum that streams its input accumulates in float64 and rounds once at the end, so a long
// sum keeps float32 accuracy at any length (a float32 accumulator loses about sqrt(n) ulps, and stalls at 2^24
// on ones). Streaming means each element is read once: the loop is bound by memory, and the wider add is free.
// A sum of products that reuses its loads (matmul, conv) keeps float32: there the adds are the cost, as in BLAS.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

/** Whether every load the reduce's loops read is read once: it depends on all the loops around it. */
function streams(r: UOp): boolean {
  const own = r.src.slice(1);
  const outer = rangesOf(r);
  for (const u of r.src[0]!.toposort()) {
    if (u.op !== Ops.LOAD) continue;
    const at = rangesOf(u);
    if (!own.some((x) => at.has(x))) continue; // read once per output, outside the loop
    for (const x of outer) if (!at.has(x)) return false;
  }
  return true;
}

function widen(r: UOp): UOp | undefined {
  if (r.dtype !== dtypes.float32 || r.argOf(Ops.REDUCE).op !== Ops.ADD || !streams(r)) return undefined;
  const [value, ...ranges] = r.src as [UOp, ...UOp[]];
  return r.withSrc([value.cast(dtypes.float64), ...ranges]).cast(dtypes.float32);
}

const rules = new PatternMatcher([[new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }) => widen(r!)]]);

/** The kernel with its streaming float32 sums accumulated in float64. */
export const widenSums = (ast: UOp): UOp => graphRewrite(ast, rules, { name: 'widen streaming sums' });
