// Sorting on Tensor: sort, argsort and topk, by counting for each element the elements that go before it.
import { dtypes, narrowSumDType } from '../dtype.ts';
import { Tensor } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /**
     * `[values, indices]` sorted along `dim`, ascending unless `descending`. Stable: equal values keep their
     * order, so indices (int32) are deterministic. NaN sorts as the largest value (last ascending, first
     * descending), as in PyTorch. Gradients flow to the values through the selection.
     */
    sort(dim?: number, descending?: boolean): [Tensor, Tensor];
    /** The int32 indices that sort the tensor along `dim` (sort's second result). */
    argsort(dim?: number, descending?: boolean): Tensor;
    /**
     * `[values, indices]` of the k largest (or, with `largest` false, smallest) elements along `dim`, in
     * sorted order; ties go to the lower index, NaN counts as the largest. `sorted` is accepted for
     * PyTorch's signature: the result is always sorted.
     */
    topk(k: number, dim?: number, largest?: boolean, sorted?: boolean): [Tensor, Tensor];
  }
}

/*
 * Why counting rather than a sorting network: the rank of element i is the number of elements that go before
 * it, one fused compare-and-sum over an (n, n) view that is never stored, and the sorted values are a
 * one-hot selection by rank, another fused (n, n) sum. That is O(n^2) work in two or three kernels whatever n
 * is: for axes up to a few thousand (16M compares per row at 4096) it is cheaper than a bitonic network,
 * which pads to a power of two and needs log2(n)(log2(n) + 1)/2 dependent stages (78 at 4096), each a kernel
 * to compile and a pass over memory. Axes of hundreds of thousands would want the network instead.
 */

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;

/** Whether a goes strictly before b in the order (NaN the largest value, equal NaNs tied). */
function before(a: Tensor, b: Tensor, descending: boolean): Tensor {
  const strict = descending ? a.gt(b) : a.lt(b);
  if (!a.dtype.isFloat) return strict;
  const nanOrder = descending
    ? a.isnan().bitwiseAnd(b.isnan().logicalNot())
    : b.isnan().bitwiseAnd(a.isnan().logicalNot());
  return strict.bitwiseOr(nanOrder);
}

/** Whether a and b are tied (NaNs tie with each other). */
function tied(a: Tensor, b: Tensor): Tensor {
  const same = a.eq(b);
  return a.dtype.isFloat ? same.bitwiseOr(a.isnan().bitwiseAnd(b.isnan())) : same;
}

/** `[0, n)` as int32 beside t. */
const positions = (t: Tensor, n: number) => Tensor.arange(n, undefined, 1, { device: t.device });

/**
 * Where each element of x (sorted along its last axis, of size n) goes: the number of elements before it in
 * the order, ties broken by position. int32, x's shape.
 */
function ranks(x: Tensor, descending: boolean): Tensor {
  const n = x.shape[x.ndim - 1]!;
  const keys = x.dtype === dtypes.bool ? x.cast(dtypes.int32) : x;
  const mine = keys.unsqueeze(-1); // element i along axis -2
  const other = keys.unsqueeze(-2); // element j along axis -1
  const pos = positions(x, n);
  const earlier = pos.lt(pos.unsqueeze(-1)); // [i, j]: j < i
  return before(other, mine, descending).bitwiseOr(tied(other, mine).bitwiseAnd(earlier)).sum(-1);
}

/** The first k of x in the order along its last axis, as [values, indices] with k along the last axis. */
function ranked(x: Tensor, k: number, descending: boolean): [Tensor, Tensor] {
  const n = x.shape[x.ndim - 1]!;
  // [..., r, i]: element i has rank r
  const pick = ranks(x, descending).unsqueeze(-2).eq(positions(x, k).unsqueeze(-1));
  const zero = x.dtype === dtypes.bool ? false : 0;
  const picked = pick.where(x.unsqueeze(-2), zero);
  const values = picked.sum(-1, false, narrowSumDType(picked.dtype)).cast(x.dtype);
  const indices = pick.where(positions(x, n), 0).sum(-1, false, dtypes.int32);
  return [values, indices];
}

/** sort and topk along dim: moves dim last, ranks, and moves it back. */
function sortAlong(
  op: string,
  t: Tensor,
  dim: number,
  k: number | undefined,
  descending: boolean,
): [Tensor, Tensor] {
  const n = Math.max(t.ndim, 1);
  if (!(Number.isInteger(dim) && dim >= -n && dim < n))
    throw new Error(
      `${op}: dim ${dim} is out of range for shape ${fmt(t.shape)}; valid dims are ${-n}..${n - 1}`,
    );
  if (t.ndim === 0) {
    const [v, i] = sortAlong(op, t.reshape([1]), 0, k, descending);
    return [v.reshape([]), i.reshape([])];
  }
  const d = dim < 0 ? dim + t.ndim : dim;
  const size = t.shape[d]!;
  const count = k ?? size;
  if (!(Number.isInteger(count) && count >= 0 && count <= size))
    throw new Error(
      `${op}: k ${k} is out of range for dim ${dim} of shape ${fmt(t.shape)}; valid k are 0..${size}`,
    );
  const shape = t.shape.map((s, i) => (i === d ? count : s));
  if (count === 0 || t.numel === 0)
    return [
      t.shrink(shape.map((s) => [0, s])),
      Tensor.zeros(shape, { dtype: dtypes.int32, device: t.device }),
    ];
  const [values, indices] = ranked(t.transpose(d, -1), count, descending);
  return [values.transpose(d, -1), indices.transpose(d, -1)];
}

Tensor.prototype.sort = function (this: Tensor, dim = -1, descending = false): [Tensor, Tensor] {
  return sortAlong('sort', this, dim, undefined, descending);
};

Tensor.prototype.argsort = function (this: Tensor, dim = -1, descending = false): Tensor {
  return sortAlong('argsort', this, dim, undefined, descending)[1];
};

Tensor.prototype.topk = function (
  this: Tensor,
  k: number,
  dim = -1,
  largest = true,
  _sorted = true,
): [Tensor, Tensor] {
  return sortAlong('topk', this, dim, k, largest);
};
