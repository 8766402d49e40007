// Pooling (max, average and max-unpooling over 1 to 3 trailing axes) and interpolation, from movement ops and reduces.

import { dtypes } from '../dtype.ts';
import { prod } from '../helpers.ts';
import { checkIndex } from './index-check.ts';
import { type Padding, padPairs, perAxis, type Size, windows } from './nn.ts';
import { Tensor } from './tensor.ts';

export interface PoolOptions {
  /** Defaults to the kernel size. */
  stride?: Size;
  /** At most half the kernel on each side (PyTorch's limit, so that no window lies in the padding only). */
  padding?: Padding;
  dilation?: Size;
  /** Rounds the output size up (PyTorch's rule: the last window still starts inside the input or left padding). */
  ceilMode?: boolean;
}

export interface MaxPoolOptions extends PoolOptions {
  /** Also return, for each output, the flat int32 index of the maximum within its input plane (or volume). */
  returnIndices?: boolean;
}

export interface AvgPoolOptions extends PoolOptions {
  /** Count the zero padding in each window's divisor (PyTorch's default); false divides by the inputs only. */
  countIncludePad?: boolean;
}

export interface MaxUnpoolOptions {
  stride?: Size;
  padding?: Size;
  /** The output's spatial sizes (default: (in - 1) * stride - 2 * padding + kernel per axis). */
  outputSize?: readonly number[];
}

export type InterpolateMode = 'nearest' | 'nearest-exact' | 'linear' | 'bilinear' | 'trilinear';

export interface InterpolateOptions {
  /** Default 'linear' (tinygrad's); 'bilinear' and 'trilinear' are the same: linear along every resized axis. */
  mode?: InterpolateMode;
  /** Linear modes: map the corner pixels' centers onto each other instead of the corners' edges. */
  alignCorners?: boolean;
}

type MaxPool = {
  (kernel?: Size, opts?: MaxPoolOptions & { returnIndices?: false }): Tensor;
  (kernel: Size | undefined, opts: MaxPoolOptions & { returnIndices: true }): [Tensor, Tensor];
};

declare module './tensor.ts' {
  interface Tensor {
    /** Max over windows of the last axis (kernel default 2); padding never wins. */
    maxPool1d: MaxPool;
    /** Max over windows of the last two axes (kernel default 2 per axis); padding never wins. */
    maxPool2d: MaxPool;
    /** Max over windows of the last three axes (kernel default 2 per axis); padding never wins. */
    maxPool3d: MaxPool;
    /** Mean over windows of the last axis (kernel default 2). */
    avgPool1d(kernel?: Size, opts?: AvgPoolOptions): Tensor;
    /** Mean over windows of the last two axes (kernel default 2 per axis). */
    avgPool2d(kernel?: Size, opts?: AvgPoolOptions): Tensor;
    /** Mean over windows of the last three axes (kernel default 2 per axis). */
    avgPool3d(kernel?: Size, opts?: AvgPoolOptions): Tensor;
    /**
     * Puts each value at its index from maxPool1d's returnIndices, zeros elsewhere (the last axis). Indices
     * lie in `[0, output plane size)`: out of range is an error where the host holds them (made from JS data,
     * or realized on CPU or JS), else only with CHECK_INDEX=1; a lazy one's value is dropped.
     */
    maxUnpool1d(indices: Tensor, kernel?: Size, opts?: MaxUnpoolOptions): Tensor;
    /** Puts each value at its index from maxPool2d's returnIndices, zeros elsewhere (the last two axes), as maxUnpool1d. */
    maxUnpool2d(indices: Tensor, kernel?: Size, opts?: MaxUnpoolOptions): Tensor;
    /** Puts each value at its index from maxPool3d's returnIndices, zeros elsewhere (the last three axes), as maxUnpool1d. */
    maxUnpool3d(indices: Tensor, kernel?: Size, opts?: MaxUnpoolOptions): Tensor;
    /**
     * Resizes the last size.length axes to size, with PyTorch's coordinates: 'nearest' reads floor(dst *
     * in / out), 'nearest-exact' floor((dst + 0.5) * in / out); the linear modes blend the two neighbors
     * of (dst + 0.5) * in / out - 0.5 (or dst * (in - 1) / (out - 1) with alignCorners).
     */
    interpolate(size: readonly number[], opts?: InterpolateOptions): Tensor;
  }
}

const shapeStr = (s: readonly number[]) => `(${s.join(', ')})`;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
/** [0, 0] for each of n leading axes. */
const keep = (n: number) => range(n).map((): [number, number] => [0, 0]);

interface PoolPlan {
  kernel: number[];
  stride: number[];
  dilation: number[];
  pads: [number, number][];
  /** Padding after each axis beyond `pads`, for ceilMode's last window; it never counts. */
  extra: number[];
  out: number[];
}

/** Checks and resolves a pool's arguments over the last n axes of x. */
function poolPlan(op: string, x: Tensor, n: number, kernel: Size, opts: PoolOptions): PoolPlan {
  if (x.ndim < n)
    throw new Error(
      `${op}: input ${shapeStr(x.shape)} needs at least ${n} axes; it pools the last ${n === 1 ? 'one' : n === 2 ? 'two' : 'three'}`,
    );
  const k = perAxis(op, 'kernel', kernel, n);
  const p: PoolPlan = {
    kernel: k,
    stride: perAxis(op, 'stride', opts.stride ?? k, n),
    dilation: perAxis(op, 'dilation', opts.dilation ?? 1, n),
    pads: padPairs(op, opts.padding ?? 0, n),
    extra: [],
    out: [],
  };
  if (![...p.stride, ...p.dilation, ...k].every((v) => v >= 1))
    throw new Error(
      `${op}: kernel, stride and dilation must be at least 1, got ${k}, ${p.stride}, ${p.dilation}`,
    );
  const wide = p.pads.findIndex(([b, a], j) => Math.max(b, a) > Math.floor(k[j]! / 2));
  if (wide >= 0)
    throw new Error(
      `${op}: padding [${p.pads[wide]}] of spatial axis ${wide} should be at most half the kernel ${k[wide]} on each side`,
    );
  x.shape.slice(x.ndim - n).forEach((len, j) => {
    const [before, after] = p.pads[j]!;
    const padded = len + before + after;
    const span = p.dilation[j]! * (k[j]! - 1) + 1;
    if (padded < span)
      throw new Error(
        `${op}: input ${shapeStr(x.shape)} padded to ${padded} along spatial axis ${j} is smaller than the window span ${span} (kernel ${k[j]}, dilation ${p.dilation[j]})`,
      );
    const steps = (padded - span) / p.stride[j]!;
    let out = (opts.ceilMode ? Math.ceil(steps) : Math.floor(steps)) + 1;
    // the last window must start inside the input or the left padding
    if (opts.ceilMode && (out - 1) * p.stride[j]! >= len + before) out--;
    p.out.push(out);
    p.extra.push(Math.max(0, (out - 1) * p.stride[j]! + span - padded));
  });
  return p;
}

/** The windows (..., o..., k...) of x padded by the plan, pads with `fill` and the ceilMode extra with `extraFill`. */
function poolWindows(x: Tensor, p: PoolPlan, fill: number, extraFill = fill): Tensor {
  const lead = keep(x.ndim - p.kernel.length);
  const padded = x.pad([...lead, ...p.pads], fill);
  const extra = p.extra.map((e): [number, number] => [0, e]);
  const grown = p.extra.some((e) => e > 0) ? padded.pad([...lead, ...extra], extraFill) : padded;
  return windows(grown, p.kernel, p.stride, p.dilation);
}

/** The last n axes. */
const lastAxes = (t: Tensor, n: number) => range(n).map((j) => t.ndim - n + j);

function maxPool(n: number): MaxPool {
  const op = `maxPool${n}d`;
  return function (this: Tensor, kernel: Size = 2, opts: MaxPoolOptions = {}): Tensor | [Tensor, Tensor] {
    const p = poolPlan(op, this, n, kernel, opts);
    // padding takes the dtype's smallest value (-inf for floats), so it never wins the max. The input's
    // gradient compares the input with the max: one buffer, rather than recomputing the input in each reader
    const w = poolWindows(this.contiguousBackward(), p, this.dtype.min);
    const values = w.max(lastAxes(w, n));
    if (!opts.returnIndices) return values;
    // the flat input index of each window element, windowed like the values
    const spatial = this.shape.slice(this.ndim - n);
    const flat = Tensor.arange(prod(spatial), undefined, 1, { device: this.device }).reshape(spatial);
    const size = prod(p.kernel);
    const positions = poolWindows(flat, p, 0).reshape([...p.out, size]);
    const first = w
      .reshape([...values.shape, size])
      .argmax(-1)
      .unsqueeze(-1);
    const hit = Tensor.arange(size, undefined, 1, { device: this.device }).eq(first);
    return [values, hit.where(positions, 0).sum(-1, false, dtypes.int32)];
  } as MaxPool;
}

function avgPool(n: number) {
  const op = `avgPool${n}d`;
  return function (this: Tensor, kernel: Size = 2, opts: AvgPoolOptions = {}): Tensor {
    const p = poolPlan(op, this, n, kernel, opts);
    const { countIncludePad = true } = opts;
    const x = this.toFloat();
    const w = poolWindows(x, p, 0);
    if (countIncludePad && p.extra.every((e) => e === 0)) return w.mean(lastAxes(w, n));
    // the divisor counts the window's elements in the input, and in the padding if countIncludePad
    const spatial = this.shape.slice(this.ndim - n);
    const ones = Tensor.ones(spatial, { device: this.device, dtype: x.dtype });
    const count = poolWindows(ones, p, countIncludePad ? 1 : 0, 0);
    return w.sum(lastAxes(w, n)).div(count.sum(lastAxes(count, n)));
  };
}

function maxUnpool(n: number) {
  const op = `maxUnpool${n}d`;
  return function (this: Tensor, indices: Tensor, kernel: Size = 2, opts: MaxUnpoolOptions = {}): Tensor {
    if (this.ndim < n || indices.ndim !== this.ndim || indices.shape.some((d, i) => d !== this.shape[i]))
      throw new Error(
        `${op}: values ${shapeStr(this.shape)} and indices ${shapeStr(indices.shape)} need one shape with at least ${n} axes`,
      );
    if (!indices.dtype.isInt)
      throw new Error(
        `${op}: indices need an integer dtype (maxPool${n}d's returnIndices), got ${indices.dtype.name}`,
      );
    const k = perAxis(op, 'kernel', kernel, n);
    const stride = perAxis(op, 'stride', opts.stride ?? k, n);
    const pad = perAxis(op, 'padding', opts.padding ?? 0, n);
    const pooled = this.shape.slice(this.ndim - n);
    const size = opts.outputSize ?? pooled.map((d, j) => (d - 1) * stride[j]! - 2 * pad[j]! + k[j]!);
    if (size.length !== n || !size.every((d) => Number.isInteger(d) && d >= 0))
      throw new Error(`${op}: outputSize ${JSON.stringify(size)} should be ${n} non-negative integers`);
    checkIndex(op, indices, {
      lo: 0,
      hi: prod(size),
      name: 'index',
      of: `the output plane ${shapeStr(size)} of ${prod(size)} positions`,
    });
    const lead = this.shape.slice(0, this.ndim - n);
    const m = prod(pooled);
    const idx = indices.reshape([...lead, m, 1]);
    // each output position takes the largest value whose index names it (maxPool repeats an index where
    // windows overlap, always with the same value), and 0 where none does
    const hit = idx.eq(Tensor.arange(prod(size), undefined, 1, { device: this.device }));
    const picked = hit.where(this.reshape([...lead, m, 1]), this.dtype.min).max(-2);
    return hit
      .any(-2)
      .where(picked, 0)
      .cast(this.dtype)
      .reshape([...lead, ...size]);
  };
}

Tensor.prototype.maxPool1d = maxPool(1);
Tensor.prototype.maxPool2d = maxPool(2);
Tensor.prototype.maxPool3d = maxPool(3);
Tensor.prototype.avgPool1d = avgPool(1);
Tensor.prototype.avgPool2d = avgPool(2);
Tensor.prototype.avgPool3d = avgPool(3);
Tensor.prototype.maxUnpool1d = maxUnpool(1);
Tensor.prototype.maxUnpool2d = maxUnpool(2);
Tensor.prototype.maxUnpool3d = maxUnpool(3);

// --- interpolation ---------------------------------------------------------------------------------------

const INTERPOLATE_MODES: readonly string[] = ['nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear'];

/**
 * Axis `axis` of x resized from n to m: out[..., o, ...] = sum over i of x[..., i, ...] weighted by the
 * (m, n) selection of each output's neighbors. `where` rather than a product with zero weights, so an
 * infinity elsewhere in the row does not make NaN. Select, then weigh: gcc 12 with AVX512VL miscompiles a
 * vector times a scalar inside a lane-wise select (lanes 1-3 came out 0 on the CPU device).
 */
function resizeAxis(
  x: Tensor,
  axis: number,
  m: number,
  mode: InterpolateMode,
  alignCorners: boolean,
): Tensor {
  const n = x.shape[axis]!;
  if (n === m) return x;
  const f32 = { device: x.device, dtype: dtypes.float32 };
  const rest = x.shape.slice(axis + 1).map(() => 1);
  const dst = Tensor.arange(m, undefined, 1, f32).reshape([m, 1, ...rest]);
  const at = Tensor.arange(n, undefined, 1, { device: x.device }).reshape([n, ...rest]);
  const src = x.unsqueeze(axis);
  // PyTorch computes the scale in float32: in / out, or (in - 1) / (out - 1) for alignCorners
  const scale = Math.fround(alignCorners ? (m > 1 ? (n - 1) / (m - 1) : 0) : n / m);
  if (mode === 'nearest' || mode === 'nearest-exact') {
    const pos = (mode === 'nearest' ? dst : dst.add(0.5))
      .mul(scale)
      .floor()
      .minimum(n - 1)
      .cast(dtypes.int32);
    return at
      .eq(pos)
      .where(src, 0)
      .sum(axis + 1)
      .cast(x.dtype);
  }
  const pos = alignCorners ? dst.mul(scale) : dst.add(0.5).mul(scale).sub(0.5).maximum(0);
  const low = pos.floor();
  const frac = pos.sub(low);
  const i0 = low.cast(dtypes.int32);
  const i1 = i0.add(1).minimum(n - 1);
  const blend = at.eq(i0).where(src, 0).mul(frac.neg().add(1)).add(at.eq(i1).where(src, 0).mul(frac));
  return blend.sum(axis + 1).cast(x.dtype);
}

Tensor.prototype.interpolate = function (
  this: Tensor,
  size: readonly number[],
  opts: InterpolateOptions = {},
): Tensor {
  const { mode = 'linear', alignCorners = false } = opts;
  if (!INTERPOLATE_MODES.includes(mode))
    throw new Error(
      `interpolate: unknown mode '${mode}'; valid modes are ${INTERPOLATE_MODES.map((m) => `'${m}'`).join(', ')}`,
    );
  const nearest = mode === 'nearest' || mode === 'nearest-exact';
  if (nearest && alignCorners)
    throw new Error(`interpolate: alignCorners works with the linear modes only, not '${mode}'`);
  const base = this.ndim - (Array.isArray(size) ? size.length : Infinity);
  if (base < 0 || !size.every((d) => Number.isInteger(d) && d >= 1))
    throw new Error(
      `interpolate: size ${JSON.stringify(size)} for input ${shapeStr(this.shape)} should be positive integers, at most one per axis (the trailing axes)`,
    );
  const empty = this.shape.slice(base).indexOf(0);
  if (empty >= 0)
    throw new Error(
      `interpolate: input ${shapeStr(this.shape)} is empty along axis ${base + empty}; there is nothing to resize`,
    );
  // the linear modes blend in floats; nearest copies and keeps the dtype
  const x = nearest ? this : this.toFloat();
  return size.reduce<Tensor>((t, m, j) => resizeAxis(t, base + j, m, mode, alignCorners), x);
};
