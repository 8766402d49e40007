// sort, argsort and topk against a stable plain-JS sort: ties, NaN and infinities, ints and bools, edge shapes.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { data, mapRef, numel, values } from './reference.ts';

/** a before b ascending (NaN the largest); ties are left to the stable sort. */
function compare(a: number, b: number, descending: boolean): number {
  const [x, y] = descending ? [b, a] : [a, b];
  if (Number.isNaN(x) || Number.isNaN(y)) return Number(Number.isNaN(x)) - Number(Number.isNaN(y));
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The positions of each slice along `axis` in stable sorted order. */
function order(v: number[], descending: boolean): number[] {
  return v.map((_, i) => i).sort((i, j) => compare(v[i]!, v[j]!, descending) || i - j);
}

/** [values, indices] of a stable sort along `axis`, the first k of each slice, in the input's layout. */
function sortRef(xs: number[], shape: number[], axis: number, descending: boolean, k?: number): [Nd, Nd] {
  const a = axis < 0 ? axis + shape.length : axis;
  const n = shape[a]!;
  const vals = mapRef(xs, shape, a, (v) => order(v, descending).map((i) => v[i]!));
  const idx = mapRef(xs, shape, a, (v) => order(v, descending));
  if (k === undefined || k === n)
    return [
      { shape, data: vals },
      { shape, data: idx },
    ];
  // keep the first k along the axis
  const outShape = shape.map((d, i) => (i === a ? k : d));
  const inner = numel(shape.slice(a + 1));
  const keep = (arr: number[]) => arr.filter((_, flat) => Math.floor(flat / inner) % n < k);
  return [
    { shape: outShape, data: keep(vals) },
    { shape: outShape, data: keep(idx) },
  ];
}
interface Nd {
  shape: number[];
  data: number[];
}

/** Equal with NaN equal to NaN (toEqual's rule), and -0 equal to 0. */
const same = (got: number[], want: number[]) => expect(got.map((v) => v + 0)).toEqual(want.map((v) => v + 0));

for (const device of DEVICES)
  describe(`sorting on ${device}`, { timeout: 120_000 }, () => {
    const T = (xs: number[], shape: number[], dtype = dtypes.float32) =>
      new Tensor(xs, { device, dtype }).reshape(shape);
    /** Checks sort, argsort and topk of t along dim against the reference. */
    function checkSort(t: Tensor, dim: number, descending: boolean, k?: number) {
      const xs = data(t);
      const [want, wantIdx] = sortRef(xs, t.shape, dim, descending, k);
      const [v, i] = k === undefined ? t.sort(dim, descending) : t.topk(k, dim, descending);
      expect(v.shape).toEqual(want.shape);
      expect(v.dtype).toBe(t.dtype);
      expect(i.dtype).toBe(dtypes.int32);
      same(data(v), want.data);
      expect(data(i)).toEqual(wantIdx.data);
      if (k === undefined) expect(data(t.argsort(dim, descending))).toEqual(wantIdx.data);
    }

    it('floats with ties, NaN and infinities, both directions, every axis', () => {
      const xs = [
        3,
        1,
        Number.NaN,
        2,
        1,
        -0,
        Number.POSITIVE_INFINITY,
        0,
        Number.NaN,
        Number.NEGATIVE_INFINITY,
        2,
        3,
      ];
      const t = T(xs, [2, 3, 2]);
      for (const dim of [0, 1, 2, -1, -2])
        for (const descending of [false, true]) checkSort(t, dim, descending);
      expect(t.sort()[0].get(0, 1).tolist()).toEqual([2, Number.NaN]);
      expect(t.sort(-1, true)[0].get(0, 1).tolist()).toEqual([Number.NaN, 2]);
    });

    it('random floats along a longer axis, and non-contiguous inputs', () => {
      checkSort(T(values(300, 1), [300]), 0, false);
      checkSort(T(values(2 * 40, 2), [2, 40]), -1, true);
      const permuted = T(values(24, 3), [4, 3, 2]).permute([2, 0, 1]); // (2, 4, 3)
      checkSort(permuted, 1, false);
      checkSort(T(values(30, 4), [5, 6]).get([null, null, -1], [1, 5]), 0, true); // flipped and sliced
    });

    it('ints (ties keep their order), bools, and other dtypes', () => {
      const ints = T(values(24, 5, true), [4, 6], dtypes.int32);
      checkSort(ints, -1, false);
      checkSort(ints, 0, true);
      checkSort(T(values(10, 6, true), [10], dtypes.int8), 0, false);
      checkSort(T(values(12, 7), [3, 4], dtypes.float64), 1, true);
      const flags = new Tensor([true, false, true, false, false], { device });
      const [v, i] = flags.sort();
      expect([v.dtype, v.tolist(), i.tolist()]).toEqual([
        dtypes.bool,
        [false, false, false, true, true],
        [1, 3, 4, 0, 2],
      ]);
    });

    it('topk: largest and smallest, k = 0 and k = n, ties to the lower index, NaN largest', () => {
      const t = T([4, 1, 4, Number.NaN, 2, 1, 3, 4], [2, 4]);
      for (const k of [0, 1, 2, 4]) {
        checkSort(t, -1, true, k);
        checkSort(t, -1, false, k);
      }
      checkSort(t, 0, true, 1);
      const [v, i] = new Tensor([5, 7, 7, 1, 7], { device }).topk(2);
      expect([v.tolist(), i.tolist()]).toEqual([
        [7, 7],
        [1, 2],
      ]);
      const [s, si] = new Tensor([5, 1, 7, 1], { device }).topk(3, 0, false);
      expect([s.tolist(), si.tolist()]).toEqual([
        [1, 1, 5],
        [1, 3, 0],
      ]);
      expect(new Tensor([1, Number.NaN, 3], { device }).topk(1)[0].tolist()).toEqual([Number.NaN]);
    });

    it('size-1 and zero-size axes, 0-d tensors', () => {
      checkSort(T([3, 1, 2], [3, 1]), -1, false);
      const empty = Tensor.zeros([2, 0], { device });
      const [v, i] = empty.sort();
      expect([v.shape, i.shape, i.dtype]).toEqual([[2, 0], [2, 0], dtypes.int32]);
      expect(empty.sort(0)[1].shape).toEqual([2, 0]);
      expect(empty.topk(0)[0].shape).toEqual([2, 0]);
      const [s, si] = new Tensor(2.5, { device }).sort();
      expect([s.shape, s.item(), si.item()]).toEqual([[], 2.5, 0]);
      expect(T([1, 2, 3], [1, 3]).sort(0)[1].tolist()).toEqual([[0, 0, 0]]);
    });

    it('errors name the op, the shape and the valid range', () => {
      const t = T([1, 2, 3, 4, 5, 6], [2, 3]);
      expect(() => t.sort(2)).toThrow('sort: dim 2 is out of range for shape (2, 3); valid dims are -2..1');
      expect(() => t.argsort(-3)).toThrow(
        'argsort: dim -3 is out of range for shape (2, 3); valid dims are -2..1',
      );
      expect(() => t.topk(4)).toThrow(
        'topk: k 4 is out of range for dim -1 of shape (2, 3); valid k are 0..3',
      );
      expect(() => t.topk(-1, 0)).toThrow(
        'topk: k -1 is out of range for dim 0 of shape (2, 3); valid k are 0..2',
      );
      expect(() => t.topk(1.5)).toThrow('topk: k 1.5 is out of range');
    });
  });

describe('sorting gradients (float64, central differences)', { timeout: 120_000 }, () => {
  it('sort and topk values pass the gradient through the selection', () => {
    checkGradient('sort', [[3, 4]], (x) => x.sort(-1)[0]);
    checkGradient('sort descending along dim 0', [[3, 4]], (x) => x.sort(0, true)[0]);
    checkGradient('topk', [[3, 5]], (x) => x.topk(2)[0]);
    checkGradient('topk smallest along dim 0', [[4, 3]], (x) => x.topk(2, 0, false)[0]);
  });
});
