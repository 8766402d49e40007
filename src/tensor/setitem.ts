// Indexed assignment on Tensor: set, numpy's `t[...] = value` (tinygrad's __setitem__).
import type { ConstValue } from '../dtype.ts';
import { type Index, type Slice, sliceAxis } from './movement.ts';
import { scatterLast } from './scatter.ts';
import { Tensor } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /**
     * Indexed assignment: `t.set(...indices, value)` is numpy's `t[...indices] = value`, with the index forms
     * of `get` (integers, `[start, stop, step]` slices, null or 'newaxis', '...', integer tensors). The value,
     * a tensor or a scalar, broadcasts to the indexed shape and is cast to this tensor's dtype. A realized
     * tensor keeps its buffer (the write goes through `assign`, so every holder of the tensor sees it); a
     * lazy one gets the new graph. Returns this tensor.
     *
     * Without index tensors the write is movement ops (pad, flip, reshape) and one `where`. With them it is a
     * scatter over the flat positions: a position named twice takes the last value. Index tensors are checked
     * as `get` checks them: out of range is an error where the host holds them (else with CHECK_INDEX=1); a
     * lazy one's out-of-range values otherwise write nothing.
     */
    set(...args: [...indices: Index[], value: Tensor | ConstValue]): this;
  }
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;

/** Where one axis of the tensor was indexed: count positions from start, step apart (steps may be negative). */
interface Placement {
  size: number;
  start: number;
  step: number;
  count: number;
}

/**
 * t (its axis `a` holding the `count` indexed elements) spread out to the axis' full size, each element at
 * its position and `fill` (PAD's zero or false) between and around: the inverse of get's view of one axis.
 */
function placeAxis(t: Tensor, a: number, { size, start, step, count }: Placement): Tensor {
  const keep = t.shape.map(() => [0, 0] as [number, number]);
  const around = (before: number, after: number) =>
    keep.map((p, i) => (i === a ? [before, after] : p)) as [number, number][];
  // a backward run is a forward one from its last element, read in reverse
  let x = step < 0 && count > 1 ? t.flip(a) : t;
  const first = step < 0 ? start + (count - 1) * step : start;
  const stride = Math.abs(step);
  if (stride > 1 && count > 1) {
    // each element followed by stride - 1 gaps, then the trailing gaps cut off
    const lead = x.shape.slice(0, a + 1);
    const rest = x.shape.slice(a + 1);
    const spaced = x.unsqueeze(a + 1).pad([...keep.slice(0, a + 1), [0, stride - 1], ...keep.slice(a + 1)]);
    const span = (count - 1) * stride + 1;
    x = spaced
      .reshape([...lead.slice(0, -1), count * stride, ...rest])
      .shrink(x.shape.map((s, i) => (i === a ? [0, span] : [0, s])));
  }
  const span = x.shape[a]!;
  return x.pad(around(first, size - first - span));
}

/** The index list with '...' (or the missing trailing axes) filled by full slices, as get reads it. */
function fullIndices(t: Tensor, indices: readonly Index[]): Index[] {
  const isAxis = (i: Index) => i !== null && i !== 'newaxis' && i !== '...';
  const fill: Index[] = new Array(t.ndim - indices.filter(isAxis).length).fill([]);
  return indices.includes('...') ? indices.flatMap((i) => (i === '...' ? fill : [i])) : [...indices, ...fill];
}

/** The new value of t with v (already of the indexed shape) written at basic (movement-only) indices. */
function basicWrite(t: Tensor, indices: readonly Index[], v: Tensor): Tensor {
  const places: Placement[] = [];
  for (const idx of fullIndices(t, indices)) {
    if (idx === null || idx === 'newaxis') continue;
    const size = t.shape[places.length]!;
    if (typeof idx === 'number') places.push({ size, start: idx < 0 ? idx + size : idx, step: 1, count: 1 });
    else places.push({ size, ...sliceAxis(idx as Slice, size, places.length) });
  }
  // dropping new axes and restoring integer-indexed ones keeps the row-major order of the elements
  let value = v.reshape(places.map((p) => p.count));
  let mask = Tensor.full(value.shape, true, { device: t.device });
  places.forEach((p, a) => {
    if (p.count === p.size && p.step === 1) return;
    value = placeAxis(value, a, p);
    mask = placeAxis(mask, a, p);
  });
  return mask.where(value, t);
}

/** The new value of t with v written through index tensors: a scatter at the flat positions get selects. */
function advancedWrite(t: Tensor, indices: readonly Index[], v: Tensor): Tensor {
  // positions count from 1 so that an out-of-range index (which get reads as 0) becomes -1 and writes nothing
  const flat = Tensor.arange(1, t.numel + 1, 1, { device: t.device })
    .reshape(t.shape)
    .get(...indices);
  return scatterLast(
    t.reshape([t.numel]),
    0,
    flat.sub(1).reshape([flat.numel]),
    v.reshape([v.numel]),
    false,
  ).reshape(t.shape);
}

Tensor.prototype.set = function <T extends Tensor>(this: T, ...args: [...Index[], Tensor | ConstValue]): T {
  if (args.length === 0)
    throw new Error('set: needs a value to write, as the last argument: t.set(...indices, value)');
  const value = args.at(-1) as Tensor | ConstValue;
  const indices = args.slice(0, -1) as Index[];
  let target: Tensor;
  try {
    target = this.get(...indices);
  } catch (e) {
    throw new Error((e as Error).message.replace(/^get:/, 'set:'));
  }
  const v = this.toTensor('set', value);
  const lead = target.ndim - v.ndim;
  if (lead < 0 || v.shape.some((d, i) => d !== 1 && d !== target.shape[lead + i]))
    throw new Error(
      `set: the value of shape ${fmt(v.shape)} does not broadcast to the indexed shape ${fmt(target.shape)} of the tensor ${fmt(this.shape)}`,
    );
  if (target.numel === 0) return this;
  const placed = v.cast(this.dtype).broadcastTo(target.shape);
  const written = indices.some((i) => i instanceof Tensor)
    ? advancedWrite(this, indices, placed)
    : basicWrite(this, indices, placed);
  return this.assign(written.cast(this.dtype));
};
