// The GPU's hand-coded opts: tensor cores, workgroups (LOCAL, GROUP_REDUCE), register tiles, STAGE.
import { AddrSpace } from '../../dtype.ts';
import { ContextVar } from '../../helpers.ts';
import { AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { stride } from '../vectors.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';
import { outputLanes } from './lanes.ts';
import { address, dividing, isLoad, isLoop, productLoads, productOperands, reads } from './operands.ts';
import { applyOpts, type Opt, type Target } from './opts.ts';
import { registerBlocks } from './register-blocks.ts';
import { unrolls } from './unrolls.ts';

/** TC=0 keeps the heuristics from tensor cores (as tinygrad's TC); TC_OPT=2 lets them pad axes to the tile. */
export const TC = new ContextVar('TC', 1);
export const TC_OPT = new ContextVar('TC_OPT', 0);
/** Tensor cores that read float32 as tf32 (10 bits of mantissa) are chosen for float32 matmuls only when asked. */
export const ALLOW_TF32 = new ContextVar('ALLOW_TF32', 0);

/**
 * TC on the innermost reduce axis where it is legal: the first of the target's tensor cores that takes the
 * kernel's dtypes (tinygrad's hand-coded optimizations also try TC first).
 */
function tensorCores(ast: UOp, target: Target): Opt[] {
  if (!TC.value) return [];
  const ranges = kernelRanges(ast);
  for (let axis = ranges.length - 1; axis >= 0; axis--) {
    if (rangeArg(ranges[axis]!).type !== AxisType.REDUCE) continue;
    for (const [tc, core] of target.tensorCores.entries()) {
      if (core.tf32 && !ALLOW_TF32.value) continue;
      const opt: Opt = { op: 'TC', axis, tc, opt: TC_OPT.value, mode: 1 };
      try {
        return [opt, ...tileUpcasts(applyOpts(ast, [opt], target))];
      } catch {
        // not this tensor core
      }
    }
  }
  return [];
}

/**
 * Output tiles a lane computes along each tile axis TC left: 4 where the axis has a multiple of 4 and at least
 * 8 tiles (tinygrad's hand-coded TC opts upcast M and N by 4 too), else 2 where it has an even count of at least
 * 4 (half stay workgroups). Each WMMA operand fragment a lane loads then feeds 4 (or 2) instructions: a 4 x 4
 * tile loads half the operand bytes per WMMA a 2 x 2 one does.
 */
function tileUpcasts(ast: UOp): Opt[] {
  const wmma = ast.toposort().find((u) => u.op === Ops.WMMA)!;
  // TC's tiles of M and N: the output axes one operand reads and the other does not
  const tiles = kernelRanges(ast).flatMap((r, axis) =>
    isLoop(r) &&
    (constSize(r) ?? 1) % 2 === 0 &&
    constSize(r)! >= 4 &&
    wmma.src[0]!.toposort().includes(r) !== wmma.src[1]!.toposort().includes(r)
      ? [axis]
      : [],
  );
  // a split adds an axis after the one split: later axes first keeps the numbers
  return tiles.reverse().map((axis) => {
    const n = constSize(kernelRanges(ast)[axis]!)!;
    return { op: 'SPLIT', axis, factor: n % 4 === 0 && n >= 8 ? 4 : 2, target: AxisType.UPCAST };
  });
}

/** Threads a GPU workgroup gets from the heuristics, at most, and the LOCAL factors they try, largest first. */
const LOCAL_THREADS = 128;
const LOCAL_FACTORS = [32, 16, 8, 4, 2];

/** A kernel with at most this many outputs shares its reduction among the threads of a group (GROUP_REDUCE). */
const GROUP_OUTPUTS = 2048;
const GROUP_FACTORS = [64, 32, 16, 8];

/**
 * GPU workgroups. Few outputs over a long reduction: the threads of a group share the reduction (GROUP_REDUCE
 * of the innermost reduce axis long enough). Then LOCAL splits of up to three output axes, innermost first (neighbouring threads
 * access neighbouring memory), within the threads left; an axis no LOCAL factor divides whole where it is nearby.
 */
function workgroups(ast: UOp, target: Target): Opt[] {
  const opts: Opt[] = [];
  let ranges = kernelRanges(ast);
  // a tensor core's warp and a coalescing GROUP_REDUCE (coalescedReduce) are threads of the group already
  const shared = ranges.filter((r) => SHARED_AXES.has(rangeArg(r).type));
  let threads = shared.reduce((n, r) => n * constSize(r)!, 1);
  const most = Math.min(LOCAL_THREADS, target.grid!.maxThreads);
  const budget = () => most / threads;
  const outputs = ranges.reduce(
    (n, r) => (rangeArg(r).type === AxisType.GLOBAL ? n * (constSize(r) ?? GROUP_OUTPUTS) : n),
    1,
  );
  // the innermost reduce axis long enough to share (each thread keeps at least 4 of its values)
  const groupOf = (r: UOp) => {
    const n = rangeArg(r).type === AxisType.REDUCE ? (constSize(r) ?? 0) : 0;
    return dividing(
      n,
      GROUP_FACTORS.filter((f) => f <= budget() && f * 4 <= n),
    );
  };
  let reduce = ranges.length - 1;
  while (reduce >= 0 && groupOf(ranges[reduce]!) === undefined) reduce--;
  const group = reduce < 0 ? undefined : groupOf(ranges[reduce]!);
  if (outputs <= GROUP_OUTPUTS && group !== undefined && shared.length === 0) {
    opts.push({ op: 'SPLIT', axis: reduce, factor: group, target: AxisType.GROUP_REDUCE });
    threads *= group;
    ranges = kernelRanges(applyOpts(ast, opts, target));
  }
  // a split adds a range after the one split, so going from the innermost axis outwards keeps axis numbers;
  // a second pass fills the group where the first left it small (one output axis: 32 threads, then 4 x 32).
  // An axis no LOCAL factor divides is taken whole where a warp along it stays near every load (nearby), but
  // not beside a GROUP_REDUCE: its threads are laid out for the reduce, and its tiles take a window whole after
  const loads = globalLoads(ast);
  const grouped = ranges.some((r) => rangeArg(r).type === AxisType.GROUP_REDUCE);
  let made = 0;
  for (let pass = 0; pass < 2 && threads < most; pass++)
    for (let axis = ranges.length - 1; axis >= 0 && made < 3; axis--) {
      const n = constSize(ranges[axis]!);
      if (rangeArg(ranges[axis]!).type !== AxisType.GLOBAL || n === undefined) continue;
      const factor =
        dividing(
          n,
          LOCAL_FACTORS.filter((f) => f <= budget()),
        ) ?? (!grouped && n > 1 && n <= budget() && nearby(loads, ranges[axis]!) ? n : undefined);
      if (factor === undefined) continue;
      opts.push({ op: 'SPLIT', axis, factor, target: AxisType.LOCAL });
      threads *= factor;
      made++;
      ranges = kernelRanges(applyOpts(ast, opts, target));
    }
  return opts;
}

/**
 * Whether a warp's threads along r stay within a line of every global load (a stride under 32 elements, or none).
 * A conv's columns and rows left beside its lanes (5 of 20 after float4, 3 of 6 after float2, 6 rows) are such
 * axes: threads along them read neighbouring inputs and share each weight, where threads along the output
 * channels read their own weights 576 floats apart (16 sectors a request). Taken whole as threads, on the H100:
 * beautiful_mnist's last conv 0.71 -> 0.29 ms, its second 1.10 -> 0.78 (bench/steps_gpu.ts, one call).
 */
const nearby = (loads: readonly UOp[], r: UOp) =>
  loads.every((l) => {
    const s = stride(address(l), r);
    return s !== undefined && Math.abs(s) < WARP_THREADS;
  });

const SHARED_AXES: ReadonlySet<AxisType> = new Set([AxisType.WARP, AxisType.GROUP_REDUCE]);

/**
 * A reduce axis at least this long may be shared by threads so that a warp reads along it; at most a warp's.
 * 6 takes a 3x3 conv's weight gradient on a 6 x 6 output (beautiful_mnist's last, on an H200: 4.05 ms a thread
 * per result, its warp reading 64 floats apart along ci; 0.24 ms split in 16 parts, x shared, sidedTiles' 4 x 4).
 */
const COALESCE_FROM = 6;
const WARP_THREADS = 32;

/** The global loads of a kernel (not accumulators or shared memory). */
const globalLoads = (ast: UOp) =>
  ast.toposort().filter((u) => u.op === Ops.LOAD && u.src[0]!.addrspace === AddrSpace.GLOBAL);

/**
 * Reads along a reduce axis on a GPU. LOCAL axes are output axes, so neighbouring threads read neighbouring
 * memory only where some output axis is contiguous in the loads. A conv's weight gradient reads
 * x[b, ci, y + ky, x + kx] into outputs (co, ci, ky, kx): contiguous only along the reduce axis x (and the
 * output kx, 5 long), so threads along ci were 576 floats apart, 32 sectors a warp's request. Where a load
 * reads the innermost reduce axis contiguously and none reads an output axis a LOCAL split could take so, the
 * threads of a group share that axis (GROUP_REDUCE by its largest divisor up to a warp): a warp then reads a
 * run of consecutive elements (other loads, a pooled gradient read at x / 2, are no farther apart than
 * along an output axis).
 */
function coalescedReduce(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  if (ranges.some((r) => rangeArg(r).type === AxisType.WARP)) return [];
  const r = ranges.filter((x) => rangeArg(x).type === AxisType.REDUCE).at(-1);
  const axis = r === undefined ? -1 : ranges.indexOf(r);
  const n = r === undefined ? undefined : constSize(r);
  if (r === undefined || n === undefined || n < COALESCE_FROM) return [];
  // loads in the reduce loops: one before them (a per-channel bias or scale, read contiguously along an
  // output axis) is read once a thread, however its threads are laid out
  const reduces = ranges.filter((x) => rangeArg(x).type === AxisType.REDUCE);
  const loads = globalLoads(ast).filter((l) => reduces.some((x) => reads(l, x)));
  if (!loads.some((l) => stride(address(l), r) === 1)) return [];
  const localAxis = (o: UOp) =>
    rangeArg(o).type === AxisType.GLOBAL && dividing(constSize(o) ?? 0, LOCAL_FACTORS) !== undefined;
  if (ranges.some((o) => localAxis(o) && loads.some((l) => stride(address(l), o) === 1))) return [];
  const most = Math.min(WARP_THREADS, LOCAL_THREADS, target.grid!.maxThreads);
  const factor = Array.from({ length: most }, (_, i) => most - i).find((f) => n % f === 0)!;
  return factor < COALESCE_FROM ? [] : [{ op: 'SPLIT', axis, factor, target: AxisType.GROUP_REDUCE }];
}

/** A GPU kernel keeps at least this many workgroups after its register tiles (132 SMs on an H100, several each). */
const TILE_MIN_GROUPS = 1024;
const GPU_TILE = 4;

/**
 * Register tiles on a GPU: each thread computes GPU_TILE outputs along the innermost workgroup axis (a scalar
 * elementwise kernel: each thread then moves 16 bytes of a float32 buffer, as a float4 lane does alone) or
 * GPU_TILE x GPU_TILE along the two innermost (a matmul or conv: each loaded value is used four times from a
 * register), where enough workgroups remain. The LOCAL axes stay innermost, so each step of a thread's tile is
 * still a coalesced row of the group. BEAM on an H100 chose such tiles (a 4096^3 float32 matmul: 5.4 TFLOP/s
 * with LOCAL axes alone, 27 with 8 x 4 tiles). An elementwise kernel with vector lanes gets none: one vector a
 * thread ran fastest (bench/bandwidth.ts, H200: x.neg() on 2^28 floats 4029 GB/s with 4 float4 a thread, 4233
 * with one; x*y+1 4289 and 4351; torch's copy 4196; beautiful_mnist's one such kernel 42 -> 32 us).
 */
function gpuTiles(ast: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  if (ranges.some((r) => rangeArg(r).type === AxisType.WARP)) return [];
  let groups = ranges.reduce(
    (n, r) => (rangeArg(r).type === AxisType.GLOBAL ? n * (constSize(r) ?? 1) : n),
    1,
  );
  if (ranges.some((r) => rangeArg(r).type === AxisType.GROUP_REDUCE)) return sidedTiles(ast, groups);
  const reduces = ranges.some((r) => rangeArg(r).type === AxisType.REDUCE);
  if (reduces && productLoads(ast) === undefined) return [];
  if (!reduces && ranges.some((r) => rangeArg(r).type === AxisType.UPCAST)) return [];
  const opts: Opt[] = [];
  // innermost first: a split adds its range after the one split, so outer axis numbers stay
  for (let axis = ranges.length - 1; axis >= 0 && opts.length < (reduces ? 2 : 1); axis--) {
    const n = constSize(ranges[axis]!);
    if (rangeArg(ranges[axis]!).type !== AxisType.GLOBAL || n === undefined || n % GPU_TILE !== 0) continue;
    if (groups / GPU_TILE < TILE_MIN_GROUPS) break;
    opts.push({ op: 'SPLIT', axis, factor: GPU_TILE, target: AxisType.UPCAST });
    groups /= GPU_TILE;
  }
  return reduces && opts.length < 2 ? [] : opts;
}

/** The longest output axis a tile takes whole: a conv's window (1, 3, 5, 7). */
const WINDOW_TILE = 7;
const quad = (n: number) => n % GPU_TILE === 0;
const window = (n: number) => n >= 2 && n <= WINDOW_TILE;

/** The innermost GLOBAL axis of a size that fits, not taken, that `side` reads and `other` does not; else -1. */
function onlyAxis(
  ranges: readonly UOp[],
  side: UOp,
  other: UOp,
  fits: (n: number) => boolean,
  taken: readonly number[] = [],
): number {
  for (let axis = ranges.length - 1; axis >= 0; axis--) {
    const r = ranges[axis]!;
    const n = constSize(r);
    if (rangeArg(r).type !== AxisType.GLOBAL || n === undefined || !fits(n) || taken.includes(axis)) continue;
    if (reads(side, r) && !reads(other, r)) return axis;
  }
  return -1;
}

/** UPCAST splits of (axis, factor) tiles: the later axis first, as a split adds its range after the one split. */
const upcasts = (tiles: readonly { axis: number; factor: number }[]): Opt[] =>
  [...tiles]
    .sort((a, b) => b.axis - a.axis)
    .map(({ axis, factor }) => ({ op: 'SPLIT', axis, factor, target: AxisType.UPCAST }));
/** A tile of the axis whole. */
const whole = (ranges: readonly UOp[], axis: number) => ({ axis, factor: constSize(ranges[axis]!)! });

/**
 * Register tiles of a sum of products whose threads share the reduce (coalescedReduce): GPU_TILE outputs along
 * an output axis that only one factor reads, for each factor, so that each value a thread computes is used
 * GPU_TILE times. A conv's weight gradient behind BatchNorm and relu recomputes both factors per product (the
 * gradient, 15 ops, for every ci, ky, kx; the activation for every co): 30 ops a multiply-add, instruction-bound
 * on an H100 (beautiful_mnist's 5x5 one: 6.3 ms, 2.6 ms with co x ci tiles of 4 x 4). Each value of a factor
 * serves every window position of the other too: the innermost window axis only the other reads is tiled whole
 * (that kernel's kx: 2.53 -> 1.88 ms on an H200 while its gradient was computed; now stored, see storeOperands).
 * Where one factor is computed (a relu'd activation) and the other loaded, the tile is 8 x 2 instead of 4 x 4
 * (8 along an axis only the load reads): beautiful_mnist's 5x5 one on the H100, 0.715 -> 0.69 ms.
 */
function sidedTiles(ast: UOp, groups: number): Opt[] {
  const sides = productOperands(ast);
  if (sides === undefined || groups / GPU_TILE ** 2 < TILE_MIN_GROUPS) return [];
  const ranges = kernelRanges(ast);
  const axes = [onlyAxis(ranges, sides[0], sides[1], quad), onlyAxis(ranges, sides[1], sides[0], quad)];
  if (axes.some((a) => a < 0)) return [];
  // a computed factor beside a loaded one: the same 16 outputs as 8 along an axis only the load reads and 2
  // along the computed one's, so that each computed value serves 8 products and a step loads 18 values, not 24
  const factors = [GPU_TILE, GPU_TILE];
  const computed = sides.findIndex((side) => !isLoad(side));
  const loaded = 1 - computed;
  const wide = (n: number) => n % (2 * GPU_TILE) === 0;
  const long =
    computed < 0 || !isLoad(sides[loaded]!) ? -1 : onlyAxis(ranges, sides[loaded]!, sides[computed]!, wide);
  if (long >= 0) {
    axes[loaded] = long;
    factors[loaded] = 2 * GPU_TILE;
    factors[computed] = GPU_TILE / 2;
  }
  // one window at most: two would hold GPU_TILE^2 x 49 sums a thread
  const windows = sides
    .map((side, i) => onlyAxis(ranges, sides[1 - i]!, side, window, axes))
    .filter((a) => a >= 0)
    .slice(0, 1);
  return upcasts([
    ...axes.map((axis, i) => ({ axis, factor: factors[i]! })),
    ...windows.map((a) => whole(ranges, a)),
  ]);
}

/**
 * The most sums a thread holds after computedTiles (its vector lanes' too). On an H200, 4 input channels x 3 of a window x 4 images of a 3x3
 * conv's input gradient: 0.35 -> 0.15 ms; 4 x 5 x 4 of a 5x5 one: 1.70 -> 2.20 ms (so 4 x 5 there).
 */
const THREAD_SUMS = 64;

/**
 * Register tiles for a computed factor, before the workgroups: where a factor of a sum of products is math on
 * loads (a relu'd activation, a BatchNorm gradient), threads along an axis only the other factor reads (a conv's
 * output channel, an input gradient's input channel and window) each compute it again; GPU_TILE outputs of that
 * axis and the innermost window axis whole in a thread compute it once for all (and, within THREAD_SUMS, GPU_TILE
 * of an axis only the computed factor reads share the other's loads, else 2 of an even one). Before the
 * workgroups, so that LOCAL splits do not take the whole axis. On an H200, beautiful_mnist's second conv (32
 * output channels as threads) 1.70 -> 1.43 ms, and 1.11 with 2 rows of y (its float4 lanes along x and 4 output
 * channels leave no room for 4); its last 0.77 -> 0.71, its last conv's input gradient by windows 0.89 -> 0.35.
 */
function computedTiles(ast: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  if (ranges.some((r) => SHARED_AXES.has(rangeArg(r).type))) return [];
  const sides = productOperands(ast);
  const i = sides?.findIndex((side) => !isLoad(side)) ?? -1;
  if (sides === undefined || i < 0) return [];
  const [computed, other] = [sides[i]!, sides[1 - i]!];
  const axis = onlyAxis(ranges, other, computed, quad);
  if (axis < 0) return [];
  const count = (type: AxisType) =>
    ranges.reduce((n, r) => (rangeArg(r).type === type ? n * (constSize(r) ?? 1) : n), 1);
  const [outputs, lanes] = [count(AxisType.GLOBAL), count(AxisType.UPCAST)];
  // n more outputs a thread, if its sums (its lanes' too) stay within THREAD_SUMS and TILE_MIN_GROUPS groups remain
  let tile = GPU_TILE;
  const room = (n: number) =>
    lanes * tile * n <= THREAD_SUMS && outputs / (tile * n) / LOCAL_THREADS >= TILE_MIN_GROUPS;
  if (!room(1)) return [];
  const win = onlyAxis(ranges, other, computed, (n) => window(n) && room(n), [axis]);
  if (win >= 0) tile *= constSize(ranges[win]!)!;
  const tiles = [{ axis, factor: GPU_TILE }, ...(win < 0 ? [] : [whole(ranges, win)])];
  // the loaded factor's values serve GPU_TILE (else 2) outputs of an axis only the computed one reads too
  for (const factor of [GPU_TILE, 2]) {
    const mine = onlyAxis(ranges, computed, other, (n) => n % factor === 0 && room(factor), [axis, win]);
    if (mine >= 0) return upcasts([...tiles, { axis: mine, factor }]);
  }
  return upcasts(tiles);
}

/** Tensor-core sums of products with at least this many multiply-adds stage their operands (256^3). */
const STAGE_FROM = 1 << 24;
/** K-tiles of a WMMA a staged tile holds: 32 elements of K between BARRIERs. */
const STAGE_TILES = 2;

/**
 * STAGE (src/codegen/opt/stage.ts) on the reduce axis of a big matmul after TC (one reduce axis), split by
 * UNROLL so that each tile holds STAGE_TILES WMMA steps of K (fewer BARRIERs), where the tiles fit the
 * target's local memory; else unsplit; else none. The workgroup then reads each operand element from global
 * memory once instead of once per warp that uses it: a 64 x 128 block (4 x 4 WMMAs a warp, 4 warps) moves
 * 0.023 bytes a flop from global memory where its warps alone moved 0.047. (Big float32 ones stage in
 * registerBlocks, src/codegen/opt/register-blocks.ts.)
 */
function stage(ast: UOp, work: number, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  // one reduce axis (a matmul's K): a conv's window loops would stage a small tile a step
  const reduces = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  if (work < STAGE_FROM || reduces.length !== 1) return [];
  const axis = ranges.indexOf(reduces[0]!);
  const staged: Opt = { op: 'STAGE', axis };
  const unroll: Opt = { op: 'SPLIT', axis, factor: STAGE_TILES, target: AxisType.UNROLL };
  for (const opts of [[unroll, staged], [staged]]) {
    try {
      applyOpts(ast, opts, target);
      return opts;
    } catch {
      // tiles too big for local memory, or not a multiple of the group's threads
    }
  }
  return [];
}

/** Iterations STAGE's asynchronous copies run ahead in big blocks: 3 tiles in flight beside the one read. */
const STAGE_DEPTH = 2;

/**
 * Workgroups a big block's grid keeps at least (two a multiprocessor of a 132-SM H100); fewer take the default.
 */
const BIG_GROUPS = 264;
/**
 * Rows of M tiles a band of a big block's grid takes (RASTER), where they divide M's and the grid's rows are at
 * least RASTER_FROM tiles long: the 264 blocks an H100 runs together are then 16 x 16.5 tiles, reading 33 panels
 * of A and B, where row by row at 8192^3 they read 69 (4.1 rows of 64): on the H100 (bench/gemm.ts, events, one
 * run each) fp16 382 -> 397 TFLOP/s, bf16 392 and 392; at 4096^3 (8.25 rows of 32, 41 panels; A and B nearly fit
 * the 50 MB L2) fp16 370 -> 358 and 362, so rows that short stay row by row.
 */
const RASTER_ROWS = 16;
const RASTER_FROM = 64;

/**
 * Big tensor-core matmuls on a GPU with asynchronous copies: 128 x 128 blocks of 4 warps, every warp 64 x 64
 * (4 x 8 WMMAs: 128 bytes of fragment loads a WMMA where 4 x 4 needs 192), after TC's axes (M tiles, N tiles,
 * K tiles, the warp); K by STAGE_TILES WMMA steps staged STAGE_DEPTH iterations ahead (K by one step where those
 * tiles do not fit the local memory), in swizzled tiles; where the grid keeps BIG_GROUPS workgroups. On an H200,
 * fp16 4096^3: 314 TFLOP/s against 225 for the 64 x 128 synchronous default; swizzled rather than padded tiles
 * 360 against 310. 128 x 256 blocks of 8 warps (one a multiprocessor: 230 registers a thread) wait at their
 * BARRIERs with no other block to run: on the H100, fp16 8192^3 333 TFLOP/s against 384 for 128 x 128, 4096^3
 * 314 against 365 (bench/gemm.ts, events; deeper pipelines or K by 64 gained nothing beyond noise).
 */
function bigBlocks(ast: UOp, tc: Opt, work: number, target: Target): Opt[] {
  if (work < STAGE_FROM || !target.grid?.asyncCopies) return [];
  const block: Opt[] = [
    tc,
    { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.UPCAST },
    { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
    { op: 'SPLIT', axis: 2, factor: 2, target: AxisType.LOCAL },
    { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL },
  ];
  const staged: Opt = { op: 'STAGE', axis: 6, depth: STAGE_DEPTH, swizzle: true };
  const unroll: Opt = { op: 'SPLIT', axis: 6, factor: STAGE_TILES, target: AxisType.UNROLL };
  const raster: Opt = { op: 'RASTER', rows: RASTER_ROWS };
  for (const opts of [
    [...block, unroll, staged],
    [...block, staged],
  ]) {
    try {
      const k = applyOpts(ast, opts, target);
      const global = kernelRanges(k).filter((r) => rangeArg(r).type === AxisType.GLOBAL);
      if (global.reduce((n, r) => n * (constSize(r) ?? 1), 1) < BIG_GROUPS) continue;
      const [rows, cols] = global.map((r) => constSize(r) ?? 0);
      const banded = global.length === 2 && rows! % RASTER_ROWS === 0 && cols! >= RASTER_FROM;
      return banded ? [...block, raster, ...opts.slice(block.length)] : opts;
    } catch {
      // a factor that does not divide its axis, or tiles too big for local memory
    }
  }
  return [];
}

/**
 * A block of warpgroups (Hopper's wgmma): `warpgroups` along M (a LOCAL axis), each `tiles` m64 tiles along M (an
 * UPCAST) of one m64 x `width` tensor core instruction; its outputs (64 warpgroups tiles) x width.
 */
export interface WarpgroupBlock {
  width: number;
  warpgroups: number;
  tiles: number;
}

/**
 * Warpgroup blocks, the widest first: the first that applies (N a multiple of its width) and whose grid keeps
 * `groups` workgroups. On the H100 (bench/gemm.ts, events, one run; fp16 / bf16 TFLOP/s):
 *
 * | block (warpgroups x m64nW tiles)  | 4096^3    | 8192^3    |
 * | --------------------------------- | --------- | --------- |
 * | 128 x 256 (2 x 1 m64n256)         | 554 / 542 | 590 / 608 |
 * | 256 x 128 (2 x 2 m64n128)         | 529 / 518 | 561 / 580 |
 * | 128 x 128 (1 x 2 m64n128)         | 502 / 497 | 521 / 528 |
 * | 128 x 128 (2 x 1 m64n128)         | 460 / 462 | 483 / 499 |
 * | 256 x 64 (1 x 4 m64n64)           | 417 / 416 | 462 / 471 |
 * | 128 x 64 (1 x 2 m64n64)           | 451 / 425 | 392 / 374 |
 *
 * (torch 633 / 696 and 750 / 781 in the same run; the hand-written bench/wgmma.ts 128 x 256 557 / 582 and 633 /
 * 628, or 509 / 509 and 574 / 570 where it too waits for each slab's wgmmas.) Narrower blocks remain for N that
 * only they divide.
 */
const WARPGROUP_BLOCKS: readonly (WarpgroupBlock & { groups: number })[] = [
  { width: 256, warpgroups: 2, tiles: 1, groups: BIG_GROUPS },
  { width: 128, warpgroups: 1, tiles: 2, groups: BIG_GROUPS },
  { width: 64, warpgroups: 1, tiles: 4, groups: 4096 },
  { width: 64, warpgroups: 1, tiles: 2, groups: BIG_GROUPS },
];

/**
 * A warpgroup block's opts with tensor core `tc` (one of the target's, `block.width` wide): TC, the warpgroups and
 * the tiles along M, then K in slabs of 64 (4 steps of 16) staged STAGE_DEPTH ahead in 128-byte-swizzled tiles
 * the cores read themselves. Throws where they do not apply (a factor that does not divide its axis, tiles too big
 * for local memory).
 */
export function warpgroupBlockOpts(ast: UOp, tc: number, block: WarpgroupBlock, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const reduces = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  if (reduces.length !== 1) throw new Error('a warpgroup block sums over one reduce axis');
  const along: Opt[] = [
    { op: 'TC', axis: ranges.indexOf(reduces[0]!), tc, opt: TC_OPT.value, mode: 1 },
    ...(block.warpgroups > 1
      ? [{ op: 'SPLIT', axis: 0, factor: block.warpgroups, target: AxisType.LOCAL } as const]
      : []),
    ...(block.tiles > 1
      ? [{ op: 'SPLIT', axis: 0, factor: block.tiles, target: AxisType.UPCAST } as const]
      : []),
  ];
  const k = kernelRanges(applyOpts(ast, along, target)).findIndex(
    (r) => rangeArg(r).type === AxisType.REDUCE,
  );
  return [
    ...along,
    { op: 'SPLIT', axis: k, factor: 4, target: AxisType.UNROLL },
    { op: 'STAGE', axis: k, depth: STAGE_DEPTH, swizzle: true },
  ];
}

/**
 * Big float16/bfloat16 matmuls where the GPU has warpgroup tensor cores (Hopper's wgmma, TensorCore.sharedOperands):
 * the first of WARPGROUP_BLOCKS that applies with a core of its width and keeps its workgroups. H100 (bench/gemm.ts,
 * events, one run, an earlier day) for 128 x 64: fp16 / bf16 4096^3 438 / 413 TFLOP/s against 372 / 367 for
 * bigBlocks' mma.sync blocks, 8192^3 380 / 391 against 393 / 390. lowerKernel falls back to the warps' cores where
 * the staged tiles cannot feed these.
 */
function warpgroupBlocks(ast: UOp, work: number, target: Target): Opt[] {
  if (!TC.value || work < STAGE_FROM || !target.grid?.asyncCopies) return [];
  for (const { groups, ...block } of WARPGROUP_BLOCKS)
    for (const [tc, core] of target.tensorCores.entries()) {
      if (!core.sharedOperands || core.n !== block.width) continue;
      try {
        const opts = warpgroupBlockOpts(ast, tc, block, target);
        const global = kernelRanges(applyOpts(ast, opts, target)).filter(
          (r) => rangeArg(r).type === AxisType.GLOBAL,
        );
        if (global.length === 2 && global.every((r) => (constSize(r) ?? 0) >= 2))
          if (global.reduce((n, r) => n * constSize(r)!, 1) >= groups) return opts;
      } catch {
        // not this core's dtypes, a factor that does not divide its axis, or tiles too big for local memory
      }
    }
  return [];
}

/**
 * The GPU's opts: tensor cores, else vector lanes (float4), else threads sharing a reduce that reads along it;
 * then tiles for a computed factor, workgroups, register tiles (not under tensor cores, which tile their own,
 * nor after tiles for a computed factor), unrolls, and STAGE for big tensor-core matmuls; big blocks instead
 * where the GPU copies asynchronously (bigBlocks), of warpgroups where it has wgmma (warpgroupBlocks); register
 * blocks for big float32 ones (registerBlocks).
 */
export function gpuOpts(ast: UOp, target: Target): Opt[] {
  const tc = tensorCores(ast, target);
  const work = kernelRanges(ast).reduce((n, r) => n * (constSize(r) ?? 1), 1);
  const warpgroups = tc.length ? warpgroupBlocks(ast, work, target) : [];
  if (warpgroups.length) return warpgroups;
  const big = tc.length ? bigBlocks(ast, tc[0]!, work, target) : [];
  if (big.length) return big;
  const blocks = tc.length ? [] : registerBlocks(ast, target);
  if (blocks.length) return blocks;
  const vectors = tc.length ? tc : target.vectors ? outputLanes(ast, target) : [];
  const shared = vectors.length ? vectors : coalescedReduce(ast, target);
  const computed = computedTiles(applyOpts(ast, shared, target));
  const lanes = [...shared, ...computed];
  const groups = [...lanes, ...workgroups(applyOpts(ast, lanes, target), target)];
  const grid =
    tc.length || computed.length ? groups : [...groups, ...gpuTiles(applyOpts(ast, groups, target))];
  const unrolled = [...grid, ...unrolls(applyOpts(ast, grid, target))];
  if (!tc.length) return unrolled;
  return [...unrolled, ...stage(applyOpts(ast, unrolled, target), work, target)];
}
