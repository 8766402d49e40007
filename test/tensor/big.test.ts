// Tensors past 2^31 elements and long float32 sums, on CPU and JS: counts and index arithmetic past int32 (lazy
// constants and expands, so no big buffer exists), sums within numpy's pairwise accuracy against exact sums,
// long cumsums, and buffers too big to allocate.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { hostMemory } from '../../src/runtime/allocator.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data } from './reference.ts';

/** float32's unit roundoff: one rounding moves a value by at most this much of it. */
const U = 2 ** -24;

/** Uniform float32 values in [lo, lo + width) from a fixed seed. */
function uniform(n: number, seed: number, lo = 0, width = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = lo + (s / 2 ** 32) * width;
  }
  return out;
}

/** The sum of the values with a compensated (Neumaier) double accumulator: exact to about 1e-16. */
function exactSum(xs: ArrayLike<number>, from = 0, to = xs.length, f = (x: number) => x): number {
  let sum = 0;
  let c = 0;
  for (let i = from; i < to; i++) {
    const x = f(xs[i]!);
    const t = sum + x;
    c += Math.abs(sum) >= Math.abs(x) ? sum - t + x : x - t + sum;
    sum = t;
  }
  return sum + c;
}

const relative = (got: number, want: number) => Math.abs(got - want) / Math.abs(want);

for (const device of ['CPU', 'JS'])
  describe(`past 2^31 elements on ${device}`, () => {
    const opts = { device };

    it('sums of ones and of a constant over 1e10 and 3e9 elements are counts, exact past int32', () => {
      expect(Tensor.ones([1e5, 1e5], opts).sum().item()).toBe(1e10);
      expect(Tensor.ones([3e9], opts).sum().item()).toBe(3e9);
      expect(
        Number(
          Tensor.ones([3e9], { ...opts, dtype: dtypes.int64 })
            .sum()
            .item(),
        ),
      ).toBe(3e9);
      // one rounding of the exact product
      expect(Tensor.full([1e5, 1e5], 0.1, opts).sum().item()).toBe(Math.fround(Math.fround(0.1) * 1e10));
      const ones = Tensor.ones([1e5, 1e5], opts);
      expect([ones.mean().item(), ones.var().item(), ones.std().item()]).toEqual([1, 0, 0]);
      expect(Tensor.ones([3e9], opts).sum(0, true).shape).toEqual([1]);
    });

    it('a small tensor expanded past 2^31 elements and reduced', () => {
      const x = new Tensor([1, 2, 3], { ...opts, dtype: dtypes.float32 }).reshape([3, 1]).expand([3, 1e9]);
      expect(data(x.sum(1))).toEqual([1e9, 2e9, 3e9]);
      expect(x.sum().item()).toBe(6e9);
      expect(x.mean().item()).toBe(2);
      const rows = Tensor.arange(1e5, undefined, 1, { ...opts, dtype: dtypes.float32 })
        .reshape([1e5, 1])
        .expand([1e5, 1e5]);
      // 1e5 * (0 + 1 + ... + 99999), within one float32 rounding
      expect(relative(rows.sum().item() as number, 1e5 * 4999950000)).toBeLessThanOrEqual(U);
    });

    it('index arithmetic past 2^31: a flat view of 1e10 elements, an int64 arange of 3e9', () => {
      const flat = (t: Tensor) => t.reshape([1, 1e5]).expand([1e5, 1e5]).reshape([1e10]);
      const cols = flat(Tensor.arange(1e5, undefined, 1, opts));
      expect(data(cols.shrink([[1e10 - 3, 1e10]]))).toEqual([99997, 99998, 99999]);
      expect(data(cols.shrink([[5e9 + 7, 5e9 + 9]]))).toEqual([7, 8]);
      const rowIds = Tensor.arange(1e5, undefined, 1, opts)
        .reshape([1e5, 1])
        .expand([1e5, 1e5])
        .reshape([1e10]);
      expect(data(rowIds.shrink([[5e9 + 7, 5e9 + 9]]))).toEqual([50000, 50000]);
      expect(data(rowIds.shrink([[1e10 - 1, 1e10]]))).toEqual([99999]);
      const big = Tensor.arange(3e9, undefined, 1, { ...opts, dtype: dtypes.int64 });
      expect(data(big.shrink([[2 ** 31 + 5, 2 ** 31 + 8]]))).toEqual([2 ** 31 + 5, 2 ** 31 + 6, 2 ** 31 + 7]);
      expect(data(big.shrink([[3e9 - 1, 3e9]]))).toEqual([3e9 - 1]);
    });
  });

for (const device of ['CPU', 'JS'])
  describe(`long float32 sums on ${device}`, () => {
    const T = (xs: Float32Array) => new Tensor(xs, { device });

    it('sum, mean, var and std of 1e6 uniform values are within two float32 roundings of exact', () => {
      const xs = uniform(1e6, 1);
      const x = T(xs).realize();
      const sum = exactSum(xs);
      const mean = sum / xs.length;
      const variance = exactSum(xs, 0, xs.length, (v) => (v - mean) ** 2) / (xs.length - 1);
      expect(relative(x.sum().item() as number, sum)).toBeLessThanOrEqual(2 * U);
      expect(relative(x.mean().item() as number, mean)).toBeLessThanOrEqual(2 * U);
      expect(relative(x.var().item() as number, variance)).toBeLessThanOrEqual(4 * U);
      expect(relative(x.std().item() as number, Math.sqrt(variance))).toBeLessThanOrEqual(4 * U);
    });

    it('rows of 25000 (too many results to split) and 0.1 added 2^18 times keep float32 accuracy', () => {
      const xs = uniform(40 * 25000, 2);
      const rows = data(T(xs).reshape([40, 25000]).sum(1));
      rows.forEach((got, i) => {
        expect(relative(got, exactSum(xs, i * 25000, (i + 1) * 25000)), `row ${i}`).toBeLessThanOrEqual(
          2 * U,
        );
      });
      // a float32 accumulator's roundings all go one way here: a sequential sum is off by about 1e-3, numpy's
      // pairwise sum by 2.5 roundings
      const tenths = Tensor.full([32, 1 << 18], 0.1, { device })
        .contiguous()
        .realize();
      for (const got of data(tenths.sum(1)))
        expect(relative(got, Math.fround(0.1) * 2 ** 18)).toBeLessThanOrEqual(4 * U);
    });

    it('at every length (odd, prime, powers of two): within numpy-class error of the exact sum', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 300_000 }), fc.integer({ min: 0, max: 3 }), (n, lo) => {
          const xs = uniform(n, n, lo - 1, 2);
          const got = T(xs).sum().item() as number;
          const magnitude = exactSum(xs, 0, n, Math.abs);
          // numpy's pairwise sum errs by about log2(n) roundings of the magnitude at worst; allow 16 and the
          // result's own rounding
          expect(Math.abs(got - exactSum(xs))).toBeLessThanOrEqual(16 * U * magnitude + U * Math.abs(got));
        }),
        { seed: 22, numRuns: device === 'CPU' ? 8 : 16 },
      );
    });

    it('cumsum along an axis of 1e5 goes in blocks, each prefix within float32 accuracy', () => {
      const xs = uniform(1e5, 3);
      const c = T(xs).cumsum();
      expect(scheduleOf([c]).kernels.length).toBe(3);
      const got = c.dataSync() as Float32Array;
      let sum = 0;
      let worst = 0;
      for (let i = 0; i < xs.length; i++) {
        sum += xs[i]!;
        worst = Math.max(worst, relative(got[i]!, sum));
      }
      expect(worst).toBeLessThanOrEqual(8 * U);
      const ones = Tensor.ones([1 << 20], { device })
        .cumsum()
        .dataSync() as Float32Array;
      expect(ones.every((v, i) => v === i + 1)).toBe(true);
    });
  });

describe('which sums accumulate in float64 (CPU kernels with 64-byte vectors)', () => {
  const target = { ...CPU_TARGET, vectors: true, vectorBytes: 64 };
  const wide = (t: Tensor) =>
    scheduleOf([t]).kernels.map(
      (k) => lowerKernel(k.ast, { target }).linear.src.filter((u) => u.dtype === dtypes.float64).length > 0,
    );
  const x = (shape: number[]) => Tensor.empty(shape, { device: 'CPU' });
  it('long streaming sums do, in float32 chunks; short vector chains and matmul keep float32', () => {
    expect(wide(x([4, 25000]).sum(1))).toEqual([true]);
    expect(wide(x([64, 1024]).sum(1))).toEqual([false]); // 16 lanes, 4 a step: 16 adds per accumulator
    expect(wide(x([256, 256]).matmul(x([256, 256]))).some(Boolean)).toBe(false);
    expect(
      wide(
        x([256, 256])
          .sum(1)
          .matmul(x([256, 4])),
      ),
    ).toEqual([false, false]);
  });
});

for (const device of ['CPU', 'JS'])
  describe(`buffers too big on ${device}`, () => {
    it('an allocation past the JS engine or the memory is an error naming the shape and its bytes', () => {
      expect(() => Tensor.ones([3e9], { device }).contiguous().realize()).toThrow(
        new RegExp(
          `realize: no memory for a float32 tensor of shape \\(3000000000\\) on ${device}, 12000000000 bytes: `,
        ),
      );
      const total = hostMemory.totalBytes;
      hostMemory.totalBytes = 1e6;
      try {
        expect(() => Tensor.ones([500, 1000], { device }).contiguous().realize()).toThrow(
          `realize: no memory for a float32 tensor of shape (500, 1000) on ${device}, 2000000 bytes: ${device}: 2000000 bytes (0.0 GB) is more than this machine's memory, 0.0 GB`,
        );
      } finally {
        hostMemory.totalBytes = total;
      }
      // and the device goes on working
      expect(Tensor.ones([500, 1000], { device }).contiguous().sum().item()).toBe(5e5);
    });
  });
