// Unrolled reduce loops: the last heuristic rule on every target.
import { dtypes } from '../../dtype.ts';
import { AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { kernelRanges } from './axes.ts';
import type { Opt } from './opts.ts';

/** Reduce loops at least this long are unrolled by UNROLL_BY, so the sum of each step's copies overlaps the next. */
export const UNROLL_FROM = 16;
export const UNROLL_BY = 4;

/** At most this many value nodes (buffer, address, load, ops) in a reduced value: a plain sum, max or mean. */
const SMALL_BODY = 4;

/**
 * The reduce loops worth unrolling: plain reductions over loads with no gate and no division in their index
 * math. Bigger bodies (conv windows, masked loads) are left to the optimizer to come: copying their index
 * math four times may cost more than the overlapped sums save.
 */
function unrollable(ast: UOp): Set<UOp> {
  const out = new Set<UOp>();
  for (const u of ast.toposort()) {
    if (u.op !== Ops.REDUCE) continue;
    const body = u.src[0]!.toposort().filter((x) => x.dtype !== dtypes.index && x.op !== Ops.CONST);
    const plain = body.every((x) => x.op !== Ops.WHERE && !(x.op === Ops.LOAD && x.src.length > 1));
    const indexMath = u.src[0]!.toposort().some((x) => x.op === Ops.IDIV || x.op === Ops.MOD);
    if (plain && !indexMath && body.length <= SMALL_BODY) for (const r of u.src.slice(1)) out.add(r);
  }
  return out;
}

/** Plain reduce loops unrolled by UNROLL_BY (scalar copies whose sum overlaps the next step's). */
export function unrolls(ast: UOp): Opt[] {
  const opts: Opt[] = [];
  const candidates = unrollable(ast);
  kernelRanges(ast).forEach((r, i) => {
    const n = r.src[0]!.op === Ops.CONST ? Number(r.src[0]!.constValue) : 0;
    if (
      candidates.has(r) &&
      r.argOf(Ops.RANGE).type === AxisType.REDUCE &&
      n >= UNROLL_FROM &&
      n % UNROLL_BY === 0
    )
      // each split adds a range after this one, so later axes move by one per opt made
      opts.push({ op: 'SPLIT', axis: i + opts.length, factor: UNROLL_BY, target: AxisType.UNROLL });
  });
  return opts;
}
