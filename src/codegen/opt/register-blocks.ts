// Register blocks: the GPU's opts for a big float32 sum of products without tensor cores (an sgemm). Each thread
// sums a tile of outputs in registers, the group's threads cover a block of 64 or 128 along each output axis,
// and K is staged through LOCAL memory a slab at a time (STAGE), copied through registers one slab ahead.
import { dtypes } from '../../dtype.ts';
import { AxisType } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';
import { isLoop, productLoads, reads } from './operands.ts';
import { applyOpts, type Opt, type Target } from './opts.ts';

/** Outputs a thread sums along each axis at once: a float4 of B read from a staged tile, and four rows of A. */
const QUAD = 4;
/** Threads of the group along each output axis: 16 x 16 = 256. */
const THREADS = 16;
/**
 * K a staged slab holds (UNROLLs of QUAD, twice): 16 multiply-adds per output between BARRIERs. On an H200, 4096^3
 * by 8 with copies 1 or 2 iterations ahead: 31.9 and 31.5 TFLOP/s; by 16: 37.4 and 37.6 (both before the
 * accumulators chained the products, src/codegen/accumulate.ts).
 */
const SLAB = 16;

/**
 * Blocks largest first, each where the grid keeps at least `groups` workgroups (two a multiprocessor of a
 * 132-SM H100; the smallest, about one: fewer outputs are left to the other opts, whose groups share a long
 * reduce). A half of 2 gives a thread two quads of the axis 64 outputs apart (an 8 x 8 tile at 2 x 2):
 * the threads of a warp then read 16 consecutive float4 of a staged row, and each loaded value serves 8 sums.
 */
const BLOCKS: readonly { halvesM: number; halvesN: number; groups: number }[] = [
  { halvesM: 2, halvesN: 2, groups: 256 },
  { halvesM: 2, halvesN: 1, groups: 256 },
  { halvesM: 1, halvesN: 1, groups: 128 },
];

/** Work (multiply-adds) from which a sum of products gets register blocks: 256^3. */
const BLOCKS_FROM = 1 << 24;

/** The splits of one output axis into GLOBAL x halves x THREADS (LOCAL) x QUAD (UPCAST). */
const axisSplits = (axis: number, halves: number): Opt[] => [
  { op: 'SPLIT', axis, factor: QUAD, target: AxisType.UPCAST },
  { op: 'SPLIT', axis, factor: THREADS, target: AxisType.LOCAL },
  ...(halves > 1 ? [{ op: 'SPLIT', axis, factor: halves, target: AxisType.UPCAST } as const] : []),
];

/** The innermost output axis that `side` reads and `other` does not. */
function onlyAxis(ranges: readonly UOp[], side: UOp, other: UOp): number {
  for (let axis = ranges.length - 1; axis >= 0; axis--)
    if (isLoop(ranges[axis]!) && reads(side, ranges[axis]!) && !reads(other, ranges[axis]!)) return axis;
  return -1;
}

/**
 * Register blocks for a float32 sum of two loads over one reduce axis, with at least BLOCKS_FROM multiply-adds:
 * the first of BLOCKS that divides the axes, fits the local memory and keeps its groups; none where no block
 * does. M and N are the output axes only one load reads (a batch axis both read stays GLOBAL).
 */
export function registerBlocks(ast: UOp, target: Target): Opt[] {
  const loads = productLoads(ast);
  const ranges = kernelRanges(ast);
  const reduces = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  const work = ranges.reduce((n, r) => n * (constSize(r) ?? 0), 1);
  if (loads === undefined || reduces.length !== 1 || work < BLOCKS_FROM || target.grid === undefined)
    return [];
  if (loads.some((l) => l.dtype !== dtypes.float32)) return [];
  const [m, n] = [onlyAxis(ranges, loads[0], loads[1]), onlyAxis(ranges, loads[1], loads[0])];
  if (m < 0 || n < 0) return [];
  for (const { halvesM, halvesN, groups } of BLOCKS) {
    // the later axis first: a split adds its ranges after the one split
    const splits = [
      { axis: m, halves: halvesM },
      { axis: n, halves: halvesN },
    ]
      .sort((a, b) => b.axis - a.axis)
      .flatMap(({ axis, halves }) => axisSplits(axis, halves));
    try {
      const k = kernelRanges(applyOpts(ast, splits, target)).findIndex(
        (r) => rangeArg(r).type === AxisType.REDUCE,
      );
      const opts: Opt[] = [
        ...splits,
        { op: 'SPLIT', axis: k, factor: QUAD, target: AxisType.UNROLL },
        { op: 'SPLIT', axis: k, factor: SLAB / QUAD, target: AxisType.UNROLL },
        // synchronous copies: A's tile is stored by columns (element by element, which cp.async cannot), and
        // the copies run one slab ahead through registers. On the H100 (bench/gemm.ts, events) 4096^3 46.3
        // TFLOP/s, 2048^3 44.2, 1024^3 26.0 against 41.7, 39.7, 27.3 copied asynchronously one slab ahead
        { op: 'STAGE', axis: k },
      ];
      const grid = kernelRanges(applyOpts(ast, opts, target)).reduce(
        (g, r) => (rangeArg(r).type === AxisType.GLOBAL ? g * (constSize(r) ?? 1) : g),
        1,
      );
      if (grid >= groups) return opts;
    } catch {
      // a factor that does not divide its axis, or tiles too big for local memory
    }
  }
  return [];
}
