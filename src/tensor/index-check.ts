// Range checks of index tensors (gather, get, scatter, Embedding, oneHot, losses): at once where the host holds
// the data, on the device only with CHECK_INDEX=1.
import type { StorageArray } from '../dtype.ts';
import { hostData } from '../engine/buffers.ts';
import { CHECK_INDEX } from '../helpers.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { writeCount } from './origins.ts';
import type { Tensor } from './tensor.ts';

/** The values an op takes as indices: the integers lo..hi-1, and `also` (a loss's ignoreIndex). */
export interface IndexRange {
  lo: number;
  hi: number;
  also?: number;
  /** What the values are called in the message ('index', 'label'). */
  name: string;
  /** What they index, for the message: 'dim 1 of the input (2, 3)'. */
  of: string;
}

/** A buffer's checked extremes, valid while its write count is unchanged. */
interface Extremes {
  writes: number;
  min: number;
  max: number;
  /** The last range with an `also` value the whole buffer passed (its extremes alone cannot say). */
  passed: string | undefined;
}
const extremes = new WeakMap<UOp, Extremes>();

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;
const isBuffer = (u: UOp) => u.op === Ops.BUFFER;
// the movement ops readThrough maps back
const VIEW_OPS: ReadonlySet<Ops> = new Set([
  Ops.RESHAPE,
  Ops.PERMUTE,
  Ops.EXPAND,
  Ops.FLIP,
  Ops.SHRINK,
  Ops.PAD,
]);
const valid = (v: number, r: IndexRange) => (v >= r.lo && v < r.hi) || v === r.also;
const rangeKey = (r: IndexRange) => `${r.lo},${r.hi},${r.also}`;

/**
 * Checks that every value of `index` is in `range`, throwing an error that names `op`, the first bad value,
 * its position and the valid range. Only data the host holds is read: a tensor made from JS data, a realized
 * tensor on a host device (CPU, JS) and movement-op views of one; a buffer's extremes are kept, so checking
 * it again costs nothing until it is written. A lazy index tensor is checked only with CHECK_INDEX=1, which
 * realizes it here (a sync) and reads it.
 */
export function checkIndex(op: string, index: Tensor, range: IndexRange): void {
  if (index.numel === 0) return;
  const u = index.uop;
  if (isBuffer(u)) {
    const data = hostData(u);
    if (data !== undefined) {
      checkBuffer(op, index, u, data, range);
      return;
    }
  } else {
    const chain: UOp[] = [];
    let base = u;
    for (; VIEW_OPS.has(base.op); base = base.src[0]!) chain.push(base);
    const data = isBuffer(base) ? hostData(base) : undefined;
    if (data !== undefined) {
      checkView(op, index, chain, base, data, range);
      return;
    }
  }
  if (CHECK_INDEX.value === 0) return;
  // the interval analysis may prove the range without running anything (a clamp, a constant)
  if (u.vmin >= range.lo && u.vmax < range.hi) return;
  index.realize();
  const buf = index.uop;
  const host = isBuffer(buf) ? hostData(buf) : undefined;
  if (host !== undefined) {
    checkBuffer(op, index, buf, host, range);
    return;
  }
  // a device the host cannot address: its data comes over (a copy)
  const data = index.dataSync();
  const at = firstBad(data, range);
  if (at >= 0) throw outOfRange(op, index, data[at]!, unravel(at, index.shape), range);
}

/** A whole buffer: its extremes (scanned once per write) settle most checks; else a scan finds the culprit. */
function checkBuffer(op: string, index: Tensor, buf: UOp, data: StorageArray, range: IndexRange): void {
  if (bufferPasses(buf, data, range)) return;
  const at = firstBad(data, range);
  throw outOfRange(op, index, data[at]!, unravel(at, index.shape), range);
}

/** Whether every value of a buffer is in range: its extremes say, or a scan whose success is kept. */
function bufferPasses(buf: UOp, data: StorageArray, range: IndexRange): boolean {
  const e = extremesOf(buf, data);
  if (e.min >= range.lo && e.max < range.hi) return true;
  if (range.also === undefined) return false;
  const key = rangeKey(range);
  if (e.passed === key) return true;
  if (firstBad(data, range) >= 0) return false;
  e.passed = key;
  return true;
}

/** A view (movement ops) of a host buffer: the buffer passing speaks for the view; else each element is read. */
function checkView(
  op: string,
  index: Tensor,
  chain: readonly UOp[],
  base: UOp,
  data: StorageArray,
  range: IndexRange,
): void {
  // padding reads 0, which must be valid for the buffer to speak for the view
  const padded = chain.some((m) => m.op === Ops.PAD);
  if ((!padded || valid(0, range)) && bufferPasses(base, data, range)) return;
  const shape = index.shape;
  for (let i = 0; i < index.numel; i++) {
    const at = unravel(i, shape);
    const from = readThrough(chain, at);
    const v = from === undefined ? 0 : data[ravel(from, base.shape as number[])]!;
    if (!valid(Number(v), range)) throw outOfRange(op, index, v, at, range);
  }
}

function extremesOf(buf: UOp, data: StorageArray): Extremes {
  const writes = writeCount(buf);
  let e = extremes.get(buf);
  if (e === undefined || e.writes !== writes) {
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    if (data instanceof BigInt64Array || data instanceof BigUint64Array)
      for (const b of data) {
        const v = Number(b);
        if (v < min) min = v;
        if (v > max) max = v;
      }
    else
      for (let i = 0; i < data.length; i++) {
        const v = data[i] as number;
        if (v < min) min = v;
        if (v > max) max = v;
      }
    e = { writes, min, max, passed: undefined };
    extremes.set(buf, e);
  }
  return e;
}

/** The flat offset of the first value outside the range, or -1. */
function firstBad(data: StorageArray, range: IndexRange): number {
  for (let i = 0; i < data.length; i++) if (!valid(Number(data[i]), range)) return i;
  return -1;
}

/** The buffer coordinates a view's element reads (undefined: padding), back through its movement ops. */
function readThrough(chain: readonly UOp[], coords: number[]): number[] | undefined {
  let c = coords;
  for (const m of chain) {
    const from = m.src[0]!.shape as number[];
    switch (m.op) {
      case Ops.RESHAPE:
        c = unravel(ravel(c, m.shape as number[]), from);
        break;
      case Ops.PERMUTE: {
        const back: number[] = [];
        m.argOf(Ops.PERMUTE).forEach((a, i) => {
          back[a] = c[i]!;
        });
        c = back;
        break;
      }
      case Ops.EXPAND:
        c = c.map((x, i) => (from[i] === 1 ? 0 : x));
        break;
      case Ops.FLIP: {
        const flipped = m.argOf(Ops.FLIP);
        c = c.map((x, i) => (flipped[i] ? from[i]! - 1 - x : x));
        break;
      }
      case Ops.SHRINK:
      case Ops.PAD: {
        const sign = m.op === Ops.SHRINK ? 1 : -1;
        const starts = m.src[1]!.sizes as number[];
        c = c.map((x, i) => x + sign * starts[i]!);
        if (c.some((x, i) => x < 0 || x >= from[i]!)) return undefined;
        break;
      }
    }
  }
  return c;
}

function ravel(coords: readonly number[], shape: readonly number[]): number {
  let flat = 0;
  for (let i = 0; i < shape.length; i++) flat = flat * shape[i]! + coords[i]!;
  return flat;
}

function unravel(flat: number, shape: readonly number[]): number[] {
  const out = new Array<number>(shape.length);
  for (let i = shape.length - 1; i >= 0; i--) {
    out[i] = flat % shape[i]!;
    flat = Math.floor(flat / shape[i]!);
  }
  return out;
}

function outOfRange(
  op: string,
  index: Tensor,
  value: number | bigint,
  at: readonly number[],
  r: IndexRange,
): Error {
  const where =
    index.ndim === 0 ? '' : ` at position [${at.join(', ')}] of the ${r.name} tensor ${fmt(index.shape)}`;
  const ok =
    r.hi > r.lo
      ? `valid values are ${r.lo}..${r.hi - 1}${r.also === undefined ? '' : ` and the ignoreIndex ${r.also}`}`
      : `no value is valid${r.also === undefined ? '' : ` but the ignoreIndex ${r.also}`}`;
  const negative =
    Number(value) < 0 && r.lo >= 0 ? ' (negative values do not count from the end here, as in PyTorch)' : '';
  return new Error(`${op}: ${r.name} ${value}${where} is out of range for ${r.of}; ${ok}${negative}`);
}
