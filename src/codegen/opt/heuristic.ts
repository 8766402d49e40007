// Hand-coded optimizations: the opts a kernel gets when none are given (NOOPT=1 turns them off).
import { ContextVar } from '../../helpers.ts';
import { type ArgOf, AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { kernelRanges, type Opt } from './opts.ts';

export const NOOPT = new ContextVar('NOOPT', 0);

/** Reduce loops at least this long are unrolled by UNROLL_BY, so the sum of each step's copies overlaps the next. */
const UNROLL_FROM = 16;
const UNROLL_BY = 4;

export function handCodedOpts(ast: UOp): Opt[] {
  if (NOOPT.value) return [];
  const opts: Opt[] = [];
  kernelRanges(ast).forEach((r, i) => {
    const n = r.src[0]!.op === Ops.CONST ? Number(r.src[0]!.constValue) : 0;
    if ((r.arg as ArgOf<Ops.RANGE>).type === AxisType.REDUCE && n >= UNROLL_FROM && n % UNROLL_BY === 0)
      // each split adds a range after this one, so later axes move by one per opt made
      opts.push({ op: 'SPLIT', axis: i + opts.length, factor: UNROLL_BY, target: AxisType.UNROLL });
  });
  return opts;
}
