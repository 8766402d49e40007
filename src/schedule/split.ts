// Split reduces: a big sum into a few results runs in two steps (as tinygrad's split_reduceop). A single
// result has no loop for threads to share and no lanes for vectors; the first step has both. On a CPU each
// part is a contiguous run (a thread streams its own); on a GPU the parts interleave, so that neighbouring
// threads read neighbouring elements in each step of their loops.
import { ContextVar, prod } from '../helpers.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { UOp } from '../uop/uop.ts';

/** Reductions of at least this many elements into fewer than SPLIT_OUTPUTS results go in two steps. */
const SPLIT_FROM = 1 << 16;
const SPLIT_OUTPUTS = 32;
/** At most this many parts: each becomes a partial result per lane, which the second step reduces. */
const MAX_PARTS = 256;
/** Each part reduces at least this many elements. */
const MIN_PART = 256;
/** Each part keeps this many interleaved partial results: the lanes of a vector over contiguous elements. */
const SPLIT_LANES = 16;
/**
 * A GPU's first step has at most 2^SPLIT_PARTS partial results, a thread each (float4 lanes: a quarter as many
 * threads). Enough to keep its memory busy: an H100 needs megabytes of loads in flight, and 2^18 partials (65,536
 * threads of four float4 loads in flight, a quarter of its thread slots) summed 2^28 floats at 74-83% of copy.
 */
export const SPLIT_PARTS = new ContextVar('SPLIT_PARTS', 20);
/**
 * On a GPU, reductions into fewer results than this split too: each result is a thread, and a few thousand
 * threads each summing a long run leave most of the GPU idle (a conv's weight gradient: 25,600 results of
 * 204,800 products each, 30 ms on an H100 in one step).
 */
const GPU_SPLIT_OUTPUTS = 1 << 16;
/**
 * On a GPU, sums of products (a matmul's, a conv's terms) of at least this many elements split too: a conv's
 * weight gradient of 36,864 results of 18,432 products each (beautiful_mnist's last 3x3 conv) has a thread per
 * result, a seventh of an H100's thread slots, each summing serially. Other sums keep SPLIT_FROM: counting sums
 * (arange's) and one-hot selections collapse to O(1) per result only while they stay one reduce.
 */
export const GPU_SPLIT_FROM = new ContextVar('GPU_SPLIT_FROM', 1 << 12);

/** The most parts, at most MAX_PARTS, that n runs of `lanes` elements split into evenly, each at least MIN_PART. */
function partsOf(n: number, lanes: number): number | undefined {
  for (let p = Math.min(MAX_PARTS, Math.floor((n * lanes) / MIN_PART)); p >= 2; p--)
    if (n % p === 0) return p;
  return undefined;
}

/**
 * The most parts that n (the largest reduced axis, of `count` reduced elements) splits into evenly, so that
 * the outputs' parts together are at most 2^SPLIT_PARTS threads and each part reduces at least MIN_PART elements.
 */
function gpuPartsOf(n: number, count: number, outputs: number): number | undefined {
  const most = Math.min(Math.floor(2 ** SPLIT_PARTS.value / outputs), Math.floor(count / MIN_PART), n);
  for (let p = most; p >= 2; p--) if (n % p === 0) return p;
  return undefined;
}

const readsMemory = (u: UOp) => u.toposort().some((x) => x.op === Ops.PARAM || x.op === Ops.BUFFER);
/** Whether a reduced value is a product of two values that read memory (through casts). */
function isProduct(x: UOp): boolean {
  while (x.op === Ops.CAST) x = x.src[0]!;
  return x.op === Ops.MUL && x.src.every(readsMemory);
}

/**
 * The reduce in two steps, or undefined: its largest reduced axis is split into parts, each reduced to
 * SPLIT_LANES interleaved partial results, which the second step reduces. Sums only: max shares its gradient
 * evenly among tied maxima, and in two steps it would share per step.
 */
function splitReduce(r: UOp, gpu: boolean): UOp | undefined {
  const { op, axes } = r.argOf(Ops.REDUCE);
  const x = r.src[0]!;
  const shape = x.shape as number[];
  if (op !== Ops.ADD || r.src.length !== 1 || !shape.every((d) => typeof d === 'number')) return undefined;
  const count = axes.reduce((n, a) => n * shape[a]!, 1);
  const outputs = prod(shape) / count;
  const least = gpu && isProduct(x) ? Math.min(GPU_SPLIT_FROM.value, SPLIT_FROM) : SPLIT_FROM;
  if (count < least || outputs >= (gpu ? GPU_SPLIT_OUTPUTS : SPLIT_OUTPUTS)) return undefined;
  const a = axes.reduce((best, i) => (shape[i]! > shape[best]! ? i : best), axes[0]!);
  const n = shape[a]!;
  if (gpu) {
    const parts = gpuPartsOf(n, count, outputs);
    if (parts === undefined) return undefined;
    // (..., n / parts, parts, ...): part p sums elements p, p + parts, ...
    const split = x.reshape([...shape.slice(0, a), n / parts, parts, ...shape.slice(a + 1)]);
    const partial = split.reduce(
      op,
      axes.map((i) => (i > a ? i + 1 : i)),
    ); // (..., 1, parts, ...)
    return partial.reduce(op, [a + 1]).reshape(r.shape as number[]);
  }
  // vector lanes where the axis has them, then as many parts as divide what is left
  const lanes =
    n % SPLIT_LANES === 0 && partsOf(n / SPLIT_LANES, SPLIT_LANES) !== undefined ? SPLIT_LANES : 1;
  const parts = partsOf(n / lanes, lanes);
  if (parts === undefined) return undefined;
  const split = x.reshape([...shape.slice(0, a), parts, n / parts / lanes, lanes, ...shape.slice(a + 1)]);
  // the other reduced axes after a move by two; a's middle part is a + 1
  const partial = split.reduce(
    op,
    axes.map((i) => (i > a ? i + 2 : i === a ? a + 1 : i)),
  ); // (..., parts, 1, lanes, ...)
  return partial.reduce(op, [a, a + 2]).reshape(r.shape as number[]);
}

/**
 * A CPU's register tile sweeps the whole sum once per tile, reading a block of both operands each step: past
 * this many steps its blocks leave the core's cache (L2). A conv's weight gradient (25,600 results of B x 400
 * products, 32 -> 32 channels, 5x5 onto 20x20) ran at 160-180 GFLOP/s at batch 8 and 40 at batch 32.
 */
const SWEEP = 4096;
/**
 * Split only sums of at least this many runs: in two or three the thread split moves onto the runs and the tile
 * takes other shapes (a 3x3 gradient 64 -> 64 onto 6x6 at batch 128, through a relu's mask: 2.8 -> 5.2 ms).
 */
const MIN_RUNS = 4;
/** ... into at least this many results: fewer fill one register tile (16 vectors of 16), which sweeps once. */
const SWEEP_OUTPUTS = 512;

/**
 * A long sum of products into many results (a conv's weight gradient, over the batch and the image) on a CPU,
 * in runs of its outermost reduced axis (images) of at most SWEEP products: each run's tiles read operands that
 * stay in cache, and the runs' partial results are summed after.
 */
function splitSweep(r: UOp): UOp | undefined {
  const { op, axes } = r.argOf(Ops.REDUCE);
  const x = r.src[0]!;
  const shape = x.shape as number[];
  if (op !== Ops.ADD || !isProduct(x) || !shape.every((d) => typeof d === 'number')) return undefined;
  const count = axes.reduce((n, a) => n * shape[a]!, 1);
  const a = Math.min(...axes);
  const n = shape[a]!;
  const run = count / n;
  if (count < MIN_RUNS * SWEEP || run > SWEEP / 2 || prod(shape) / count < SWEEP_OUTPUTS) return undefined;
  // the fewest runs that fit
  let parts = 2;
  while (parts < n && (n % parts !== 0 || (n / parts) * run > SWEEP)) parts++;
  const split = x.reshape([...shape.slice(0, a), parts, n / parts, ...shape.slice(a + 1)]);
  const partial = split.reduce(
    op,
    axes.map((i) => (i === a ? a + 1 : i > a ? i + 1 : i)),
  ); // (..., parts, 1, ...)
  return partial.reduce(op, [a]).reshape(r.shape as number[]);
}

const rules = (gpu: boolean) =>
  new PatternMatcher([[new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }) => splitReduce(r!, gpu)]]);
const SWEEP_RULES = new PatternMatcher([
  [new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }) => splitSweep(r!)],
]);
const CPU_RULES = rules(false);
const GPU_RULES = rules(true);

/** The tensor graph with its big sums into few results split in two steps (parts interleaved on a GPU). */
export const splitReduces = (sink: UOp, gpu = false): UOp =>
  graphRewrite(sink, gpu ? GPU_RULES : CPU_RULES, { name: 'split reduces' });

/** The tensor graph with its long sums of products into many results in runs that fit a CPU's cache. */
export const splitSweeps = (sink: UOp): UOp => graphRewrite(sink, SWEEP_RULES, { name: 'split sweeps' });
