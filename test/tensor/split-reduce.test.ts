// Big reductions into few results go in two kernels (parts x 16 interleaved lanes): values on CPU and JS against
// plain-JS loops; which reductions split. Small-integer data, so float sums are exact in any order.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data, values } from './reference.ts';

const N = 1 << 17;
const kernelCount = (t: Tensor) => scheduleOf([t]).kernels.length;
function sum(v: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]!;
  return s;
}
function max(v: ArrayLike<number>): number {
  let m = -Infinity;
  for (let i = 0; i < v.length; i++) m = Math.max(m, v[i]!);
  return m;
}
/** Integers in [-5, 5] plus shift. */
const floats = (n: number, seed: number, shift = 0) =>
  new Float32Array(values(n, seed, true).map((v) => v + shift));

/** Sums of each row (along: 1) or column (along: 0) of a row-major rows x cols matrix. */
function sums(v: ArrayLike<number>, rows: number, cols: number, along: 0 | 1): number[] {
  const out = new Array<number>(along === 1 ? rows : cols).fill(0);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[along === 1 ? i : j]! += v[i * cols + j]!;
  return out;
}

describe('which reductions split', () => {
  const t = (shape: number[]) =>
    new Tensor(new Float32Array(shape.reduce((a, d) => a * d, 1)), { device: 'JS' }).reshape(shape);
  it('at least 2^16 elements into fewer than 32 results', () => {
    expect(kernelCount(t([N]).sum())).toBe(2);
    expect(kernelCount(t([1 << 16]).sum())).toBe(2);
    expect(kernelCount(t([(1 << 16) - 16]).sum())).toBe(1); // too few elements
    expect(kernelCount(t([4, 1 << 16]).sum(1))).toBe(2);
    expect(kernelCount(t([31, 1 << 16]).sum(1))).toBe(2);
    expect(kernelCount(t([32, 1 << 16]).sum(1))).toBe(1); // 32 results: enough to share out
    expect(kernelCount(t([1 << 16, 4]).sum(0))).toBe(2);
    // max stays one step (its gradient shares ties over the whole reduction)
    expect(kernelCount(t([256, 512]).max())).toBe(1);
  });
  it('only when a part of the largest axis still reduces 256 or more', () => {
    expect(kernelCount(t([65537]).sum())).toBe(1); // prime: no parts
    expect(kernelCount(t([256 * 257]).sum())).toBe(2); // 256 parts of 257, one lane each
  });
});

describe('which reductions split on a GPU (SIMT)', () => {
  const t = (shape: number[]) => Tensor.empty(shape, { device: 'SIMT' });
  it('sums of products from 4,096 elements into fewer than 65,536 results; other sums from 65,536', () => {
    // 256 results of 4,096 products: a thread each would leave a GPU idle
    expect(
      kernelCount(
        t([16, 1, 4096])
          .mul(t([1, 16, 4096]))
          .sum(2),
      ),
    ).toBe(2);
    expect(
      kernelCount(
        t([16, 1, 2048])
          .mul(t([1, 16, 2048]))
          .sum(2),
      ),
    ).toBe(1); // too short
    expect(kernelCount(t([256, 4096]).sum(1))).toBe(1); // not products
    expect(kernelCount(t([16, 65536]).sum(1))).toBe(2);
  });
  it('counting sums (arange) and one-hot selections stay one reduce, which collapses to O(1) a result', () => {
    expect(kernelCount(Tensor.arange(8192, undefined, 1, { device: 'SIMT' }))).toBe(1);
    const index = new Tensor(
      Int32Array.from({ length: 64 }, (_, i) => (i * 97) % 8192),
      { device: 'SIMT' },
    );
    expect(kernelCount(t([8192, 16]).indexSelect(0, index))).toBe(1);
  });
});

for (const device of ['CPU', 'JS'])
  describe(`split reductions on ${device}`, () => {
    const T = (xs: Float32Array | Int32Array, shape: number[]) => new Tensor(xs, { device }).reshape(shape);

    it('sum, max (all negative: partial maxima must not start at 0), mean of 2^17 floats', () => {
      const xs = floats(N, 1, -6);
      const x = T(xs, [N]);
      expect(x.sum().item()).toBe(sum(xs));
      expect(x.max().item()).toBe(max(xs));
      expect(max(xs)).toBeLessThan(0);
      expect(x.mean().item()).toBe(sum(xs) / N); // a power of two: exact
    });

    it('a NaN anywhere propagates through both steps of sum and max', () => {
      const xs = floats(N, 2, -6);
      xs[77777] = Number.NaN;
      expect(T(xs, [N]).sum().item()).toBeNaN();
      expect(T(xs, [N]).max().item()).toBeNaN();
    });

    it('[4, 65536].sum(1) and [65536, 4].sum(0) (the split axis strided), keepdim', () => {
      const xs = floats(4 * 65536, 3);
      expect(data(T(xs, [4, 65536]).sum(1))).toEqual(sums(xs, 4, 65536, 1));
      expect(T(xs, [4, 65536]).sum(1, true).shape).toEqual([4, 1]);
      expect(data(T(xs, [65536, 4]).sum(0))).toEqual(sums(xs, 65536, 4, 0));
    });

    it('several reduced axes: [2, 512, 128].sum([1, 2]), in either order', () => {
      const xs = floats(N, 4);
      expect(data(T(xs, [2, 512, 128]).sum([1, 2]))).toEqual(sums(xs, 2, N / 2, 1));
      expect(data(T(xs, [2, 512, 128]).sum([2, 1]))).toEqual(sums(xs, 2, N / 2, 1));
      expect(T(xs, [256, 512]).sum(undefined, true).shape).toEqual([1, 1]);
    });

    it('parts without lanes: the sum of 256 x 257 floats', () => {
      const xs = floats(256 * 257, 5);
      expect(
        T(xs, [256 * 257])
          .sum()
          .item(),
      ).toBe(sum(xs));
    });

    it('int32 sums are exact beyond float32 precision, in int64 (sumDType)', () => {
      const mixed = Int32Array.from({ length: N }, (_, i) => ((i * 7919) % 20001) - 5000);
      const s = T(mixed, [N]).sum();
      expect(s.dtype).toBe(dtypes.int64);
      expect(Number(s.item())).toBe(sum(mixed));
      const big = Int32Array.from({ length: N }, (_, i) => 16_000 + (i % 3));
      expect(sum(big)).toBeGreaterThan(2 ** 24); // float32 could not hold it exactly
      expect(sum(big) % 2).toBe(1);
      expect(Number(T(big, [N]).sum().item())).toBe(sum(big));
    });

    it('the gradient of max through the split goes to the one maximum', () => {
      const xs = floats(N, 6);
      xs[12345] = 100;
      const x = T(xs, [N]).realize();
      x.requiresGrad = true;
      const g = data(Tensor.gradient(x.max(), [x])[0]!);
      expect(g[12345]).toBe(1);
      expect(sum(g)).toBe(1);
    });
  });

describe('gradients through the split (JS)', () => {
  it('sum: ones; mean: 1/n', () => {
    const x = new Tensor(floats(N, 8), { device: 'JS' }).realize();
    x.requiresGrad = true;
    const [gs, gm] = [x.sum(), x.mean()].map((l) => data(Tensor.gradient(l, [x])[0]!));
    expect(gs!.every((g) => g === 1)).toBe(true);
    expect(gm!.every((g) => g === 1 / N)).toBe(true);
  });

  // a split max would share its gradient per step (lane by lane, then within a lane): max is not split
  it('max shares evenly among all tied maxima, as the one-step max does', () => {
    const xs = floats(N, 7);
    for (const i of [0, 16, 1]) xs[i] = 100; // 0 and 16: one lane of part 0; 1: the next lane
    const x = new Tensor(xs, { device: 'JS' }).realize();
    x.requiresGrad = true;
    const g = data(Tensor.gradient(x.max(), [x])[0]!);
    expect([g[0], g[16], g[1]]).toEqual([1 / 3, 1 / 3, 1 / 3].map(Math.fround));
  });
});
