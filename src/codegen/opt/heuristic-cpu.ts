// The CPU's hand-coded opts: THREAD splits, then register tiles in vector lanes (the first rule that fits).
import { dtypes } from '../../dtype.ts';
import { ALU, AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { contiguousLanes, stride } from '../vectors.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';
import { laneCounts, outputLanes } from './lanes.ts';
import { address, dividing, isLoad, isLoop, loadsReading, productOperands, reads } from './operands.ts';
import { applyOpts, type Opt, type Target } from './opts.ts';
import { UNROLL_BY, UNROLL_FROM, unrolls } from './unrolls.ts';

/** A reduce axis at most this long is a window (a conv's kernel, a pool's), unrolled whole. */
const SMALL_WINDOW = 4;
/** Whether a range is a small window's: a constant size of at most SMALL_WINDOW. */
const isSmallWindow = (r: UOp) => (constSize(r) ?? SMALL_WINDOW + 1) <= SMALL_WINDOW;

/** A reduce's UNROLL at least this wide becomes the lanes under UPCASTs (codegen/expand.ts's WIDE_UNROLL). */
const WIDE_LANES = 8;

/** Kernels with fewer iterations than this run on one thread: starting threads costs microseconds. */
const THREAD_FROM = 1 << 16;

/**
 * Register tiling of a sum of products: an output axis that only one operand reads becomes vector lanes (the
 * innermost such axis, unless another fills more than twice its lanes; one, two or four vectors of them; that
 * operand's vectors are reused by every row), and an output axis that operand does not read becomes rows (each
 * row's scalar is reused by every lane), as many as half the vector registers hold.
 */
function tile(ast: UOp, target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const ranges = kernelRanges(ast);
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  // an output axis only one operand reads, where that operand's loads fill whole vectors along it (lanes that
  // are not contiguous would gather: matrix-vector products reduce in lanes instead)
  const laneOf = (r: UOp) => {
    const vector = reads(operands[0], r) ? operands[0] : operands[1];
    const lanes = dividing(constSize(r)!, laneCounts(target, vector.dtype.itemsize));
    const loads = loadsReading(vector, r);
    return lanes !== undefined && loads.every((l) => contiguousLanes(address(l), r, lanes))
      ? { lane: r, vector, lanes, vectorLoads: loads }
      : undefined;
  };
  // the innermost, unless another axis fills more than twice its lanes: a conv's 32 output channels in 16 lanes
  // rather than its 20 columns in 4 (beautiful_mnist's second conv, one core: 252 -> 160 ms), but its 24 columns
  // in 8 rather than 16 channels (3 -> 16 channels 5x5 at batch 64: 1.35 against 2.5 ms) and 16 columns rather
  // than 64 channels (32 -> 64 3x3: 4.0 against 5.9 ms), where the lanes also compute a relu'd operand
  const candidates = loops
    .filter((r) => reads(operands[0], r) !== reads(operands[1], r))
    .map(laneOf)
    .filter((x) => x !== undefined);
  const innermost = candidates.at(-1);
  const widest = candidates.reduce<typeof innermost>(
    (best, x) => (best === undefined || x.lanes >= best.lanes ? x : best),
    undefined,
  );
  const found = widest !== undefined && widest.lanes > 2 * innermost!.lanes ? widest : innermost;
  if (found === undefined) return [];
  const { lane, vector, lanes, vectorLoads } = found;
  const row = loops
    .filter((r) => r !== lane && !reads(vector, r))
    .sort((a, b) => constSize(b)! - constSize(a)!)[0];
  const splits: { r: UOp; factor: number; target: AxisType }[] = [];
  const upcast = (r: UOp, factor: number) => splits.push({ r, factor, target: AxisType.UPCAST });
  // half the registers hold accumulators, two vectors of lanes where 4 rows of them fit: on AVX-512 8 rows of
  // 2 x 16 lanes, on AVX2 4 rows of 2 x 8 (both measured best); four where each row's value is computed (the
  // relu of the layer before), so that it is computed for more columns at a time
  const budget = (target.registers * 4) / vector.dtype.itemsize / 2;
  const rowOperand = vector === operands[0] ? operands[1] : operands[0];
  const want = budget < 4 * 2 * lanes ? 1 : isLoad(rowOperand) ? 2 : Math.min(4, budget / (4 * lanes));
  upcast(lane, lanes);
  // the vectors from the lane axis, else from another axis only the vector operand reads (a panel's)
  const along =
    dividing(
      constSize(lane)! / lanes,
      [4, 2].filter((f) => f <= want),
    ) ?? 1;
  if (along > 1) upcast(lane, along);
  const beside = loops.filter((r) => r !== lane && reads(vector, r) && !reads(rowOperand, r)).at(-1);
  const more =
    (beside &&
      dividing(
        constSize(beside)!,
        [4, 2].filter((f) => f * along <= want),
      )) ??
    1;
  if (more > 1) upcast(beside!, more);
  let tileSize = lanes * along * more;
  const rows =
    row &&
    dividing(
      constSize(row)!,
      [16, 8, 4, 2].filter((f) => f * tileSize <= budget),
    );
  if (row !== undefined && rows !== undefined) {
    upcast(row, rows);
    tileSize *= rows;
  }
  // a small window (a conv's kernel) is unrolled whole, and where it slides along an output axis two
  // neighbours on that axis share most of their loads. A short axis outside a long one (a weight gradient's
  // batch, split 16 x 4) only where the rows share a cache line: its copies each read the rows as streams of
  // their own, 8 image planes by 4 copies thrashed the L1 (5x5 at batch 64: 96 -> 23 ms without), one line of
  // 8 channels-last by 4 did not (1x1: 1.3 ms, 1.6 without)
  const rowLine =
    row !== undefined &&
    loadsReading(rowOperand, row).every(
      (l) => Math.abs(stride(address(l), row) ?? CACHE_LINE) * (rows ?? 1) * l.dtype.itemsize <= CACHE_LINE,
    );
  const reduces = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  const windows = reduces.filter(
    (r, i) => isSmallWindow(r) && (rowLine || reduces.slice(i).every(isSmallWindow)),
  );
  for (const r of windows) splits.push({ r, factor: constSize(r)!, target: AxisType.UNROLL });
  const step = (r: UOp) => stride(address(vectorLoads[0]!), r);
  const slide = loops.find(
    (r) =>
      r !== lane &&
      r !== row &&
      constSize(r)! % 2 === 0 &&
      windows.some((w) => step(w) !== 0 && step(w) === step(r)),
  );
  const paired = slide !== undefined && tileSize * 2 <= budget;
  if (paired) upcast(slide, 2);
  // codegen takes the innermost UPCAST as the lanes: an UPCAST after the lane axis would take them, so the lane
  // axis first trades places with the innermost loop (a weight gradient x^T @ dy whose lanes are x's columns)
  const last = loops.at(-1)!;
  if (splits.some((x) => x.target === AxisType.UPCAST && ranges.indexOf(x.r) > ranges.indexOf(lane))) {
    const swap: Opt = { op: 'SWAP', axis: ranges.indexOf(lane), other: ranges.indexOf(last) };
    return [swap, ...tile(applyOpts(ast, [swap], target), target)];
  }
  // a split renumbers the axes after it: later axes are split first (a lane axis' lanes before its pairs)
  const order = splits
    .map((x, i) => ({ ...x, i }))
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r) || a.i - b.i);
  const opts: Opt[] = order.map(({ r, factor, target }) => ({
    op: 'SPLIT',
    axis: ranges.indexOf(r),
    factor,
    target,
  }));
  const columns = lanes * along * more * (paired ? 2 : 1);
  if (columns <= (rows ?? 1) || footprint(ast, vector) <= CACHE_BYTES) return opts;
  const tiled = applyOpts(ast, opts, target);
  return [...opts, ...rowsInnermost(tiled, productOperands(tiled)![operands.indexOf(vector)]!)];
}

/** The bytes of a cache line. */
const CACHE_LINE = 64;

/** A block that fits this stays in cache between sweeps: the smaller L2 of the machines measured (AMD znver3). */
const CACHE_BYTES = 512 * 1024;

/** The bytes a load reads over the whole kernel: its dtype by the sizes of the ranges its address uses. */
const footprint = (ast: UOp, operand: UOp) =>
  kernelRanges(ast)
    .filter((r) => reads(operand, r))
    .reduce((n, r) => n * (constSize(r) ?? 1), operand.dtype.itemsize);

/**
 * SWAPs that move the loops the vector load does not read (the rows) inside the ones it reads, keeping each
 * group's order. A tile of r rows by c columns reads a block of each load along the whole reduce; whichever
 * load's loops run outside keeps its block in cache while the inner loops sweep the other load. Rows inside,
 * the row load streams once per column block (M*K*N/c values); rows outside, the vector load streams once per
 * row block (M*K*N/r), unless all of it fits in cache. So the rows go inside when c > r and the vector load
 * does not fit: a 2048^3 matmul's 8x32 tile ran at 290 GFLOP/s so and 230 the other way, 4096^3 at 270 and
 * 120; a conv's 16x16 tile (its window's loads shared by neighbours) was faster as it was.
 */
function rowsInnermost(ast: UOp, vector: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  const loops = ranges.filter(isLoop);
  const want = [...loops.filter((r) => reads(vector, r)), ...loops.filter((r) => !reads(vector, r))];
  const at = loops.map((r) => ranges.indexOf(r));
  const now = [...loops];
  const opts: Opt[] = [];
  want.forEach((r, i) => {
    const j = now.indexOf(r);
    if (j === i) return;
    opts.push({ op: 'SWAP', axis: at[i]!, other: at[j]! });
    [now[i], now[j]] = [now[j]!, now[i]!];
  });
  return opts;
}

/**
 * An output axis this short is upcast whole in a reduce tile: conv1's weight gradient (Cin = 1, its 5x5 window
 * read only by the images) went from 120-160 ms to 50-75 at batch 128 with the 5 columns of the window as copies.
 */
const SMALL_AXIS = 8;

/** Copies of each operand in a tile across lanes of the reduce, where both are loads (4 x 4 ran as 8 x 2). */
const REDUCE_TILE = 4;

/** Copies of a computed operand in such a tile (each costs its math; each shares the other's loads). */
const COMPUTED_COPIES = 2;

/**
 * Register tiling of a sum of products that reads contiguously only along its innermost reduce axis (A @ B^T:
 * the transposed operand, as a layer's input gradient reads the forward's weight panels): that axis becomes
 * vector lanes (an UNROLL of at least 8, which codegen makes the lanes under UPCASTs), and an output axis only
 * one operand reads is upcast, so each vector of the other is used by every copy. Each copy sums its own
 * vector, added up after the loop, in half the vector registers: 4 x 4 copies of two loads; where one operand
 * is computed (the gradient through a relu's mask), half of them copies of the loaded one, along as many axes
 * as fit, so each computed vector serves them all, by 2 of the computed one, so each loaded vector serves 2.
 * A 64x512 @ (512x512)^T input gradient on one AVX-512 core: 2.2 ms with the lanes alone, 0.6 tiled 4 x 4;
 * through a relu's mask computed lane by lane 3.2 ms 4 x 4, 1.9 8 x 2, 1.4 16 x 1; with the mask on whole
 * vectors, CPU time on 2 threads 0.92 ms 16 x 1, 0.75 8 x 2 (256 / batch 32: 0.2 -> 0.15; 1024 / 128: 7.6 ->
 * 5.4). A 3x3 conv's weight gradient (64 -> 64 channels onto 8 x 8, batch 128): 19.6 CPU-ms with the window's
 * columns as copies, 14.2 with its columns, rows and 2 channels in (18), 12.8 with columns and rows by 2
 * channels out.
 */
function reduceTile(ast: UOp, target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const ranges = kernelRanges(ast);
  const inner = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE).at(-1);
  if (inner === undefined) return [];
  const loads = ast.toposort().filter((u) => u.op === Ops.LOAD && reads(address(u), inner));
  const itemsize = Math.max(...operands.map((o) => o.dtype.itemsize));
  const wide = laneCounts(target, itemsize).filter((f) => f >= WIDE_LANES);
  const lanes = dividing(constSize(inner) ?? 0, wide);
  if (lanes === undefined || !loads.length || !loads.every((l) => contiguousLanes(address(l), inner, lanes)))
    return [];
  let sums = (target.registers * 4) / itemsize / lanes / 2;
  const computed = operands.filter((o) => !isLoad(o));
  const copies: [UOp, UOp, number][] =
    computed.length === 1
      ? [
          [operands.find(isLoad)!, computed[0]!, sums / 2],
          [computed[0]!, operands.find(isLoad)!, COMPUTED_COPIES],
        ]
      : [
          [operands[0], operands[1], REDUCE_TILE],
          [operands[1], operands[0], REDUCE_TILE],
        ];
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  const splits: { r: UOp; factor: number; target: AxisType }[] = [
    { r: inner, factor: lanes, target: AxisType.UNROLL },
  ];
  for (const [mine, other, most] of copies) {
    const only = loops.filter((x) => reads(mine, x) && !reads(other, x)).reverse();
    // two loads: the innermost axis each; one computed: as many as fit, innermost first (a conv's weight
    // gradient: the window's columns, then its rows, then channels), at most `most` copies of each operand
    let room = most;
    for (const r of computed.length === 1 ? only : only.slice(0, 1)) {
      // a small axis (a conv's window: 3, 5, 7) may be taken whole
      const whole = constSize(r)! <= SMALL_AXIS ? [constSize(r)!] : [];
      const factor = dividing(
        constSize(r)!,
        [...whole, 16, 8, 4, 2].filter((f) => f <= Math.min(sums, room)),
      );
      if (factor === undefined) continue;
      splits.push({ r, factor, target: AxisType.UPCAST });
      sums /= factor;
      room /= factor;
    }
  }
  // a split renumbers the axes after it: later axes first
  return splits
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r))
    .map(({ r, factor, target }) => ({ op: 'SPLIT', axis: ranges.indexOf(r), factor, target }));
}

/** Copies in a tile of scalars, at most 8 along one axis (8 x 2 ran faster than 4 x 4 and 16 x 1). */
const COPY_TILE = 16;

/** The ops computing a value (not its index math): what an operand costs each time it is read. */
const cost = (u: UOp) => u.toposort().filter((x) => x.dtype !== dtypes.index && ALU.has(x.op)).length;

/**
 * Copies of a sum of products that no vector rule fits (a conv's gradients: NCHW rows of 20 or 6, operands
 * computed through pooling, batch norm and a relu): an output axis only the cheaper operand reads is upcast,
 * so that each value of the costlier one serves its copies, then one only the costlier reads. beautiful_mnist
 * at batch 64 on one core: conv2's weight gradient 10.5 s without copies, 4.0 s 4 x 4, 2.1 s 8 x 2; a 3x3
 * conv's 1.1 s to 0.29 s.
 */
function copyTile(ast: UOp, _target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const [cheap, costly] = cost(operands[0]) <= cost(operands[1]) ? operands : [operands[1], operands[0]];
  const ranges = kernelRanges(ast);
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  const splits: { r: UOp; factor: number }[] = [];
  let room = COPY_TILE;
  for (const [mine, other] of [
    [cheap, costly],
    [costly, cheap],
  ] as const) {
    const only = loops.filter((x) => reads(mine, x) && !reads(other, x));
    const fits = (x: UOp) =>
      dividing(
        constSize(x)!,
        [8, 4, 2].filter((f) => f <= room),
      );
    const r = only.filter((x) => fits(x) !== undefined).sort((a, b) => fits(b)! - fits(a)!)[0];
    if (r === undefined) continue;
    splits.push({ r, factor: fits(r)! });
    room /= fits(r)!;
  }
  return splits
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r))
    .map(({ r, factor }) => ({ op: 'SPLIT', axis: ranges.indexOf(r), factor, target: AxisType.UPCAST }));
}

/**
 * Vector lanes along the innermost reduce axis when every load reads it contiguously (a matrix-vector
 * product, a sum along rows): each lane sums its own elements, and the lanes are added after the loop.
 */
function unrollLanes(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const inner = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE).at(-1);
  if (inner === undefined) return [];
  const loads = ast.toposort().filter((u) => u.op === Ops.LOAD && reads(u, inner));
  if (loads.length === 0) return [];
  const itemsize = Math.max(...loads.map((l) => l.dtype.itemsize));
  const lanes = dividing(constSize(inner) ?? 0, laneCounts(target, itemsize));
  if (lanes === undefined) return [];
  if (!loads.every((l) => contiguousLanes(address(l), inner, lanes)) || constSize(inner)! < 4 * lanes)
    return [];
  const axis = ranges.indexOf(inner);
  const split = { op: 'SPLIT', axis, factor: lanes, target: AxisType.UNROLL } as const;
  // and four vectors a step, so the adds into the accumulator do not wait on each other
  const steps = constSize(inner)! / lanes;
  return steps % UNROLL_BY === 0 && steps >= UNROLL_FROM ? [split, { ...split, factor: UNROLL_BY }] : [split];
}

/** Loops outside a THREAD loop may repeat its parallel region at most this often (each costs microseconds). */
const MAX_REGIONS = 16;

/**
 * The outermost loop axis that divides among the threads split so, when the kernel is big enough to pay for
 * them (a batch of 3 on 2 threads: the next axis, its parallel region entered 3 times).
 */
function threads(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const work = ranges.reduce((n, r) => n * (constSize(r) ?? 1), 1);
  if (target.threads < 2 || work < THREAD_FROM) return [];
  const counts = Array.from({ length: target.threads - 1 }, (_, i) => target.threads - i);
  let regions = 1;
  for (const [axis, r] of ranges.entries()) {
    const n = constSize(r);
    if (!isLoop(r) || n === undefined || regions > MAX_REGIONS) return [];
    const factor = dividing(n, counts);
    if (factor !== undefined) return [{ op: 'SPLIT', axis, factor, target: AxisType.THREAD, top: true }];
    regions *= n;
  }
  return [];
}

/** Copies of a window reduce's output, at most this many along one axis (16 ran no faster than 8). */
const WINDOW_COPIES = [8, 4, 2];

/**
 * Copies of a reduce over small windows only (a max pool's 2 x 2, the count of its maxima): its innermost
 * output axis that some count of copies divides is upcast, and the windows unrolled whole. One output's reduce
 * is a chain of a few dependent max or add steps; copies run as many chains side by side (their loads gathered
 * into vectors, windows being strided). beautiful_mnist's pools at batch 512 on one core: the 2 x 2 max of
 * 512x32x20x20 28.6 -> 3.1 ms, of 512x64x6x6 5.4 -> 0.5 ms.
 */
function windowCopies(ast: UOp, _target: Target): Opt[] {
  if (productOperands(ast) !== undefined) return [];
  const ranges = kernelRanges(ast);
  const windows = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  if (!windows.length || !windows.every(isSmallWindow)) return [];
  const copies = (r: UOp) => dividing(constSize(r)!, WINDOW_COPIES);
  const along = ranges
    .filter((r) => isLoop(r) && constSize(r) !== undefined && copies(r) !== undefined)
    .at(-1);
  const splits: { r: UOp; factor: number; target: AxisType }[] = windows.map((r) => ({
    r,
    factor: constSize(r)!,
    target: AxisType.UNROLL,
  }));
  if (along !== undefined) splits.push({ r: along, factor: copies(along)!, target: AxisType.UPCAST });
  // a split renumbers the axes after it: later axes first
  return splits
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r))
    .map(({ r, factor, target }) => ({ op: 'SPLIT', axis: ranges.indexOf(r), factor, target }));
}

/** Copies of an elementwise kernel's innermost axis (4 ran faster than 2 where both divide it). */
const ELEMENT_COPIES = [4, 2];

/**
 * Copies of an elementwise kernel's innermost output axis where no vector rule applied (lanes that would
 * gather, or values that are compares and selects): they run side by side, and index math that divides the axis
 * by a divisor of the copies' count (a max pool's gradient reads its pooled values at column / 2) becomes
 * constants. beautiful_mnist at batch 512 on one core: the gradient of its first pool 42.5 -> 6.6 ms, the
 * batch norm's input gradient 13.4 -> 8.7.
 */
function elementCopies(ast: UOp, _target: Target): Opt[] {
  if (ast.toposort().some((u) => u.op === Ops.REDUCE)) return [];
  const ranges = kernelRanges(ast);
  const inner = ranges.filter(isLoop).at(-1);
  const copies = inner && dividing(constSize(inner) ?? 1, ELEMENT_COPIES);
  return copies === undefined
    ? []
    : [{ op: 'SPLIT', axis: ranges.indexOf(inner!), factor: copies, target: AxisType.UPCAST }];
}

/** Vector lanes on the CPU: the first of these rules that applies. */
const VECTOR_RULES = [tile, reduceTile, outputLanes, unrollLanes, windowCopies, copyTile, elementCopies];

/** The CPU's opts: threads, then vector lanes (the first rule that applies), then unrolls. */
export function cpuOpts(ast: UOp, target: Target): Opt[] {
  const opts = [...threads(ast, target)];
  const threaded = applyOpts(ast, opts, target);
  if (target.vectors)
    for (const rule of VECTOR_RULES) {
      const lanes = rule(threaded, target);
      opts.push(...lanes);
      if (lanes.length) break;
    }
  const unrolled = opts.some((o) => o.op === 'SPLIT' && o.target === AxisType.UNROLL);
  return unrolled ? opts : [...opts, ...unrolls(applyOpts(ast, opts, target))];
}
