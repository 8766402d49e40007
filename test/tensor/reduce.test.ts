// Reductions and the softmax family on JS and CPU against plain-JS references; kernel counts of fused forms.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { close, data, mapRef, ravel, reduceRef, unravel, values } from './reference.ts';

const sum = (v: number[]) => v.reduce((p, q) => p + q, 0);
const mean = (v: number[]) => sum(v) / v.length;
const variance = (v: number[], correction: number) =>
  sum(v.map((x) => (x - mean(v)) ** 2)) / Math.max(0, v.length - correction);
const argOf = (v: number[], better: (a: number, b: number) => boolean) => {
  const nan = v.findIndex(Number.isNaN);
  if (nan >= 0) return nan;
  return v.reduce((best, x, i) => (better(x, v[best]!) ? i : best), 0);
};
const logsumexp = (v: number[]) => {
  const m = Math.max(...v);
  const shift = Number.isFinite(m) ? m : 0;
  return Math.log(sum(v.map((x) => Math.exp(x - shift)))) + shift;
};
const softmax = (v: number[]) => {
  const m = Math.max(...v);
  const e = v.map((x) => Math.exp(x - m));
  return e.map((x) => x / sum(e));
};

for (const device of DEVICES)
  describe(`reductions on ${device}`, () => {
    const T = (xs: number[], shape: number[]) => new Tensor(new Float32Array(xs), { device }).reshape(shape);
    const I = (xs: number[], shape: number[]) => new Tensor(new Int32Array(xs), { device }).reshape(shape);
    const shape = [2, 3, 4];
    const a = values(24, 1);

    it('sum, max and min propagate NaN as numpy; sum of bools counts', () => {
      const xs = [1, Number.NaN, 3, -Infinity, 2, 0];
      const t = T(xs, [2, 3]);
      close(data(t.max(1)), [Number.NaN, 2]);
      close(data(t.min(1)), [Number.NaN, -Infinity]);
      close(data(t.sum(1)), [Number.NaN, -Infinity]);
      const b = new Tensor([true, false, true], { device });
      expect(b.sum().tolist()).toBe(2);
      expect(b.sum().dtype).toBe(dtypes.int32);
    });

    it('any and all over axes, keepdim, ints, bools, zero-size', () => {
      const xs = [0, 1, 0, 0, 0, 0, 0, 0, 2, 3, 4, 1];
      const t = T(xs, [3, 4]);
      expect(t.any(1).tolist()).toEqual([true, false, true]);
      expect(t.all(-1).tolist()).toEqual([false, false, true]);
      expect(t.any(0, true).tolist()).toEqual([[true, true, true, true]]);
      expect(t.all(0).tolist()).toEqual([false, false, false, false]);
      expect(t.any().tolist()).toBe(true);
      expect(t.all([0, 1], true).shape).toEqual([1, 1]);
      expect(I([1, 2, 0, -1], [2, 2]).all(1).tolist()).toEqual([true, false]);
      expect(new Tensor([true, true, false], { device }).all().dtype).toBe(dtypes.bool);
      expect(T([Number.NaN, 0], [2]).any().tolist()).toBe(true);
      const empty = Tensor.zeros([0, 3], { device });
      expect(empty.any().tolist()).toBe(false);
      expect(empty.all(0).tolist()).toEqual([true, true, true]);
    });

    it('var and std with corrections, axes lists, keepdim and int input', () => {
      for (const [axes, corr] of [
        [undefined, 1],
        [[1], 0],
        [[-1], 1],
        [[0, 2], 2],
      ] as const) {
        const ax = axes === undefined ? undefined : [...axes];
        close(
          data(T(a, shape).var(ax, false, corr)),
          reduceRef(a, shape, ax, (v) => variance(v, corr)),
        );
        close(
          data(T(a, shape).std(ax, true, corr)),
          reduceRef(a, shape, ax, (v) => Math.sqrt(variance(v, corr))),
        );
      }
      expect(T(a, shape).var(-2, true).shape).toEqual([2, 1, 4]);
      const ints = values(12, 2, true);
      close(
        data(I(ints, [3, 4]).var(1)),
        reduceRef(ints, [3, 4], [1], (v) => variance(v, 1)),
      );
      // one element with correction 1 divides 0 by 0
      close(data(T([3, 4], [2, 1]).var(1)), [Number.NaN, Number.NaN]);
    });

    it('argmax and argmin: first index, NaN, ties, ints, bools, keepdim, flattened', () => {
      const xs = [1, 5, 3, 5, Number.NaN, 2, -1, -1, 0, 7, 7, -3];
      const t = T(xs, [4, 3]);
      const gt = (p: number, q: number) => p > q;
      const lt = (p: number, q: number) => p < q;
      expect(data(t.argmax(1))).toEqual(reduceRef(xs, [4, 3], [1], (v) => argOf(v, gt)));
      expect(data(t.argmin(-1))).toEqual(reduceRef(xs, [4, 3], [1], (v) => argOf(v, lt)));
      expect(data(t.argmax(0))).toEqual(reduceRef(xs, [4, 3], [0], (v) => argOf(v, gt)));
      expect(t.argmax(0, true).shape).toEqual([1, 3]);
      expect(t.argmax().tolist()).toBe(4);
      expect(t.argmin(undefined, true).tolist()).toEqual([[4]]);
      expect(t.argmax(1).dtype).toBe(dtypes.int32);
      const ints = values(24, 3, true);
      expect(data(I(ints, shape).argmin(1))).toEqual(reduceRef(ints, shape, [1], (v) => argOf(v, lt)));
      expect(data(I(ints, shape).argmax(-1))).toEqual(reduceRef(ints, shape, [2], (v) => argOf(v, gt)));
      expect(new Tensor([false, true, true], { device }).argmax().tolist()).toBe(1);
      expect(() => Tensor.zeros([2, 0], { device }).argmax(1)).toThrow(
        /argmax: axis 1 of shape \(2, 0\) is empty/,
      );
    });

    it('argmax of non-contiguous (permuted, flipped) inputs', () => {
      const t = T(a, shape).permute([2, 0, 1]).flip(0);
      const ref = Array.from({ length: 24 }, (_, flat) => {
        const [k, i, j] = unravel(flat, [4, 2, 3]);
        return a[ravel([i!, j!, 3 - k!], shape)]!;
      });
      expect(data(t.argmax(0))).toEqual(reduceRef(ref, [4, 2, 3], [0], (v) => argOf(v, (p, q) => p > q)));
    });

    it('logsumexp is stable for large and -inf inputs, over axes lists', () => {
      const big = a.map((x) => x * 500);
      close(data(T(big, shape).logsumexp(-1)), reduceRef(big, shape, [2], logsumexp));
      close(data(T(a, shape).logsumexp([0, 2], true)), reduceRef(a, shape, [0, 2], logsumexp));
      expect(T(a, shape).logsumexp([0, 2], true).shape).toEqual([1, 3, 1]);
      const inf = [-Infinity, -Infinity, 0, -Infinity, Infinity, 1];
      close(data(T(inf, [3, 2]).logsumexp(1)), [-Infinity, 0, Infinity]);
    });

    it('softmax and logSoftmax along any axis, large values, non-contiguous and zero-size inputs', () => {
      const big = a.map((x) => x * 100);
      close(data(T(big, shape).softmax()), mapRef(big, shape, -1, softmax));
      close(data(T(a, shape).softmax(1)), mapRef(a, shape, 1, softmax));
      close(
        data(T(big, shape).logSoftmax(0)),
        mapRef(big, shape, 0, (v) => v.map((x) => x - logsumexp(v))),
        1e-4,
      );
      const perm = T(a, shape).permute([2, 1, 0]);
      const permRef = Array.from({ length: 24 }, (_, flat) => {
        const [k, j, i] = unravel(flat, [4, 3, 2]);
        return a[ravel([i!, j!, k!], shape)]!;
      });
      close(data(perm.softmax(-1)), mapRef(permRef, [4, 3, 2], -1, softmax));
      close(data(I([1, 2, 3], [3]).softmax()), softmax([1, 2, 3]));
      expect(Tensor.zeros([0, 3], { device }).softmax().shape).toEqual([0, 3]);
      expect(data(Tensor.zeros([0, 3], { device }).logSoftmax(0))).toEqual([]);
    });
  });

describe('kernel counts', () => {
  const t = new Tensor(new Float32Array(24), { device: 'JS' }).reshape([2, 3, 4]);
  const m = t.reshape([6, 4]);
  const count = (x: Tensor) => scheduleOf([x]).kernels.length;
  it('fuses the elementwise inputs of a reduce, and a matmul, into one kernel', () => {
    expect(count(m.mul(m).add(m).relu().sum(1))).toBe(1);
    expect(count(m.matmul(m.transpose()))).toBe(1);
  });
  it('softmax and logSoftmax take 3 kernels, logsumexp and var 2, argmax 2 (its arange fuses)', () => {
    expect(count(t.softmax(-1))).toBe(3);
    expect(count(t.logSoftmax(1))).toBe(3);
    expect(count(t.logsumexp(-1))).toBe(2);
    expect(count(t.var(-1))).toBe(2);
    expect(count(t.any(1))).toBe(1);
    // the max, then the masked max of the weights (the arange fuses into it)
    expect(count(t.argmax(1))).toBe(2);
  });
});
