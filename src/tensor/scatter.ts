// Masked and scatter ops on Tensor: maskedFill, scatter, scatterReduce, maskedSelect, nonzero.
import { type ConstValue, dtypes, narrowSumDType } from '../dtype.ts';
import { checkIndex } from './index-check.ts';
import { broadcastShape } from './op-nodes.ts';
import { Tensor } from './tensor.ts';

/** How scatterReduce combines the values that land on one position. */
export type ScatterReduce = 'sum' | 'prod' | 'mean' | 'amax' | 'amin';

export interface ScatterReduceOptions {
  /** Whether the tensor's own value takes part in the reduction (default true, as in PyTorch). */
  includeSelf?: boolean;
}

declare module './tensor.ts' {
  interface Tensor {
    /** `value` where the bool `mask` (broadcast to this tensor's shape) is true, this tensor elsewhere. */
    maskedFill(mask: Tensor, value: Tensor | ConstValue): Tensor;
    /**
     * torch.Tensor.scatter: a copy with `out[..., index[i, j, k], ...] = src[i, j, k]` along `dim` (src a
     * tensor, read over index's extent, or a scalar). When several entries of index name one position, the
     * last one along `dim` wins (deterministic, unlike PyTorch's unspecified order). Index values lie in
     * `[0, size)`, negative ones included (PyTorch's rule). An index the host holds (made from JS data, or
     * realized on CPU or JS) out of range is an error naming it; a lazy one is checked only with
     * CHECK_INDEX=1, and otherwise writes nothing there.
     */
    scatter(dim: number, index: Tensor, src: Tensor | ConstValue): Tensor;
    /**
     * torch.Tensor.scatter_reduce: every src value is combined into the position index names along `dim` by
     * `reduce`; with `includeSelf` (default) the tensor's own value takes part, without it a position that
     * some index hits starts from its first value. Positions no index hits keep the tensor's value. 'mean'
     * of integers rounds down. Index values are checked as in `scatter`.
     */
    scatterReduce(
      dim: number,
      index: Tensor,
      src: Tensor | ConstValue,
      reduce: ScatterReduce,
      opts?: ScatterReduceOptions,
    ): Tensor;
    /**
     * The elements where the bool `mask` is true (mask and tensor broadcast together), as a 1-D tensor in
     * row-major order. The result's length depends on the mask's data, so the mask is realized and read
     * here; the selection itself stays lazy (a one-hot gather, numel x count work) so gradients flow.
     */
    maskedSelect(mask: Tensor): Tensor;
    /**
     * The int32 (count, ndim) indices of the nonzero elements in row-major order (PyTorch's layout). The
     * result's shape depends on the data, so the tensor is realized and read here.
     */
    nonzero(): Tensor;
  }
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;
const shapesEqual = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/** A possibly negative dim of t, or an error naming op and the valid range. */
function dimOf(op: string, t: Tensor, dim: number): number {
  const n = t.ndim;
  if (Number.isInteger(dim) && dim >= -n && dim < n) return dim < 0 ? dim + n : dim;
  throw new Error(
    `${op}: dim ${dim} is out of range for shape ${fmt(t.shape)}; ${n ? `valid dims are ${-n}..${n - 1}` : 'it has no dims'}`,
  );
}

/** A bool mask checked to be on t's device. */
function boolMask(op: string, t: Tensor, mask: Tensor): Tensor {
  if (!(mask instanceof Tensor)) throw new Error(`${op}: the mask must be a bool Tensor, got ${typeof mask}`);
  t.toTensor(op, mask);
  if (mask.dtype !== dtypes.bool)
    throw new Error(
      `${op}: the mask must have dtype bool, got ${mask.dtype.name}; compare to make one (x.gt(0))`,
    );
  return mask;
}

/** `[0, n)` as int32 along axis `at` of an otherwise size-1 shape of `ndim` axes. */
function positions(t: Tensor, n: number, at: number, ndim: number): Tensor {
  const shape = new Array<number>(ndim).fill(1);
  shape[at] = n;
  return Tensor.arange(n, undefined, 1, { device: t.device }).reshape(shape);
}

/**
 * The one-hot form of a scatter along axis d. With E the index's shape where axis d has this tensor's size n
 * and m the index's size along d: `hits` (E[<d], n, m, E[>d]) says which index entry lands on which position,
 * `src` (E[<d], 1, m, E[>d]) holds the values in this tensor's dtype, `self` is this tensor over E.
 */
interface Spread {
  d: number;
  extent: number[];
  hits: Tensor;
  src: Tensor;
  self: Tensor;
}

/** The checks and the one-hot form of a scatter; `checked` says whether the index values are checked too. */
function spread(
  op: string,
  t: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | ConstValue,
  checked: boolean,
): Spread {
  const d = dimOf(op, t, dim);
  if (!(index instanceof Tensor)) throw new Error(`${op}: the index must be an integer Tensor`);
  t.toTensor(op, index);
  if (!index.dtype.isInt)
    throw new Error(`${op}: the index must have an integer dtype, got ${index.dtype.name}`);
  if (index.ndim !== t.ndim || index.shape.some((s, i) => i !== d && s > t.shape[i]!))
    throw new Error(
      `${op}: index shape ${fmt(index.shape)} needs the ${t.ndim} dims of the tensor ${fmt(t.shape)}, each no larger except along dim ${dim}`,
    );
  const values = src instanceof Tensor ? src : Tensor.full(index.shape, src, { device: t.device }); // cast below
  t.toTensor(op, values);
  if (values.ndim !== index.ndim || index.shape.some((s, i) => s > values.shape[i]!))
    throw new Error(
      `${op}: src shape ${fmt(values.shape)} must have the ${index.ndim} dims of the index ${fmt(index.shape)}, each at least as large`,
    );
  const n = t.shape[d]!;
  if (checked)
    checkIndex(op, index, { lo: 0, hi: n, name: 'index', of: `dim ${dim} of the tensor ${fmt(t.shape)}` });
  const extent = index.shape.map((s, i) => (i === d ? n : s));
  const within = (x: Tensor, shape: readonly number[]) =>
    shapesEqual(x.shape, shape) ? x : x.shrink(shape.map((s) => [0, s] as [number, number]));
  return {
    d,
    extent,
    hits: index.unsqueeze(d).eq(positions(t, n, d, t.ndim + 1)),
    src: within(values, index.shape).cast(t.dtype).unsqueeze(d),
    self: within(t, extent),
  };
}

/** `value` where `hit` (both over the extent) is true, t elsewhere; the extent padded out to t's shape. */
function place(t: Tensor, extent: readonly number[], hit: Tensor, value: Tensor): Tensor {
  if (shapesEqual(extent, t.shape)) return hit.where(value, t);
  const pad = extent.map((s, i) => [0, t.shape[i]! - s] as [number, number]);
  return hit.pad(pad).where(value.pad(pad), t);
}

const zeroOf = (t: Tensor): ConstValue => (t.dtype === dtypes.bool ? false : 0);

/** The value below every other of t's dtype: what amax starts from. */
const lowest = (t: Tensor): ConstValue =>
  t.dtype === dtypes.bool ? false : t.dtype.isFloat ? Number.NEGATIVE_INFINITY : t.dtype.min;
const highest = (t: Tensor): ConstValue =>
  t.dtype === dtypes.bool ? true : t.dtype.isFloat ? Number.POSITIVE_INFINITY : t.dtype.max;

Tensor.prototype.maskedFill = function (this: Tensor, mask: Tensor, value: Tensor | ConstValue): Tensor {
  const m = boolMask('maskedFill', this, mask);
  const v = this.toTensor('maskedFill', value);
  for (const [what, s] of [
    ['mask', m.shape],
    ['value', v.shape],
  ] as const)
    if (!shapesEqual(broadcastShape('maskedFill', this.shape, s), this.shape))
      throw new Error(
        `maskedFill: the ${what} of shape ${fmt(s)} does not broadcast to the tensor's shape ${fmt(this.shape)}`,
      );
  return m.where(v.cast(this.dtype), this);
};

Tensor.prototype.scatter = function (
  this: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | ConstValue,
): Tensor {
  return scatterLast(this, dim, index, src, true);
};

/**
 * @internal scatter, with the index values checked or not (an index computed to be in range, or to write
 * nothing where it is -1, as set's).
 */
export function scatterLast(
  t: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | ConstValue,
  checked: boolean,
): Tensor {
  const { d, extent, hits, src: values, self } = spread('scatter', t, dim, index, src, checked);
  if (t.numel === 0 || index.numel === 0) return t;
  // the last entry along dim that lands on a position wins: its slot is the largest hitting one (-1: none)
  const slot = positions(t, index.shape[d]!, d + 1, t.ndim + 1);
  const last = hits.where(slot, -1).max(d + 1, true);
  const chosen = slot
    .eq(last)
    .where(values, zeroOf(self))
    .sum(d + 1, false, narrowSumDType(values.dtype))
    .cast(t.dtype);
  return place(t, extent, last.ge(0).squeeze(d + 1), chosen);
}

const REDUCES: readonly ScatterReduce[] = ['sum', 'prod', 'mean', 'amax', 'amin'];

Tensor.prototype.scatterReduce = function (
  this: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | ConstValue,
  reduce: ScatterReduce,
  opts: ScatterReduceOptions = {},
): Tensor {
  if (!REDUCES.includes(reduce))
    throw new Error(
      `scatterReduce: reduce must be one of ${REDUCES.map((r) => `'${r}'`).join(', ')}, got '${reduce}'`,
    );
  const { d, extent, hits, src: values, self } = spread('scatterReduce', this, dim, index, src, true);
  if (this.numel === 0 || index.numel === 0) return this;
  const a = d + 1;
  // with includeSelf, the tensor's own value is one more entry landing on each position (so that, as in
  // PyTorch, amax and amin share the gradient evenly among all tied entries, self included)
  const includeSelf = opts.includeSelf ?? true;
  const all = hits.shape;
  const entries = includeSelf ? Tensor.cat([values.expand(all), self.unsqueeze(a)], a) : values.expand(all);
  const mask = includeSelf
    ? Tensor.cat([hits, Tensor.full(self.unsqueeze(a).shape, true, { device: this.device })], a)
    : hits;
  const fill = (v: ConstValue) => mask.where(entries, v);
  let out: Tensor;
  if (reduce === 'sum' || reduce === 'mean') {
    out = fill(zeroOf(this)).sum(a, false, narrowSumDType(entries.dtype)).cast(this.dtype);
    if (reduce === 'mean') {
      // a position nothing lands on keeps self below; max(count, 1) keeps its 0/0 out of the gradient
      const count = mask.sum(a).maximum(1);
      out = this.dtype.isFloat
        ? out.div(count).cast(this.dtype)
        : out.div(count, { roundingMode: 'floor' }).cast(this.dtype);
    }
  } else if (reduce === 'prod') out = fill(this.dtype === dtypes.bool ? true : 1).prod(a, false, this.dtype);
  else out = reduce === 'amax' ? fill(lowest(this)).max(a) : fill(highest(this)).min(a);
  const hit = includeSelf ? Tensor.full(extent, true, { device: this.device }) : hits.any(a);
  return place(this, extent, hit, out);
};

/** The flat row-major offsets where t (cast to bool) is true: reads t. */
function truePositions(t: Tensor): number[] {
  const flags = t.cast(dtypes.bool).dataSync();
  const out: number[] = [];
  for (let i = 0; i < flags.length; i++) if (flags[i]) out.push(i);
  return out;
}

Tensor.prototype.maskedSelect = function (this: Tensor, mask: Tensor): Tensor {
  const m = boolMask('maskedSelect', this, mask);
  const shape = broadcastShape('maskedSelect', this.shape, m.shape);
  const picked = truePositions(m.broadcastTo(shape));
  if (picked.length === 0) return new Tensor([], { dtype: this.dtype, device: this.device });
  const flat = this.broadcastTo(shape).reshape([-1]);
  return flat.get(new Tensor(new Int32Array(picked), { device: this.device }));
};

Tensor.prototype.nonzero = function (this: Tensor): Tensor {
  const shape = this.shape;
  const picked = truePositions(this);
  const out = new Int32Array(picked.length * shape.length);
  picked.forEach((flat, row) => {
    for (let k = shape.length - 1; k >= 0; k--) {
      out[row * shape.length + k] = flat % shape[k]!;
      flat = Math.floor(flat / shape[k]!);
    }
  });
  return new Tensor(out, { device: this.device }).reshape([picked.length, shape.length]);
};
