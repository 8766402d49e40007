// Long sums of products on the CPU in runs of images (src/schedule/split.ts splitSweeps): a conv's weight gradient
// sums partial results of runs that fit the cache, and computes what a plain loop over the images computes.
import { describe, expect, it } from 'vitest';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const values = (shape: number[], k: number) =>
  Float32Array.from({ length: shape.reduce((a, d) => a * d, 1) }, (_, i) => ((i * k) % 11) / 11 - 0.45);
const tensor = (data: Float32Array, shape: number[]) => new Tensor(data, { device: 'CPU' }).reshape(shape);
const reduces = (ast: UOp) => ast.toposort().filter((u) => u.op === Ops.REDUCE);

/** dw[co, ci, ky, kx] = sum over n, y, x of x[n, ci, y + ky, x + kx] * g[n, co, y, x], in float64. */
function weightGradient(x: Float32Array, g: Float32Array, [n, ci, co, k, h]: number[]): Float64Array {
  const o = h! - k! + 1;
  const dw = new Float64Array(co! * ci! * k! * k!);
  for (let b = 0; b < n!; b++)
    for (let c = 0; c < co!; c++)
      for (let i = 0; i < ci!; i++)
        for (let ky = 0; ky < k!; ky++)
          for (let kx = 0; kx < k!; kx++) {
            let s = 0;
            for (let y = 0; y < o; y++)
              for (let xx = 0; xx < o; xx++)
                s += x[((b * ci! + i) * h! + y + ky) * h! + xx + kx]! * g[((b * co! + c) * o + y) * o + xx]!;
            dw[((c * ci! + i) * k! + ky) * k! + kx]! += s;
          }
  return dw;
}

describe("a conv's weight gradient over more products than a tile's sweep keeps in cache", () => {
  // 3x3, 4 -> 16 channels onto 16 x 16, batch 64: 576 results of 16,384 products, 256 an image: 4 runs of 16
  const dims = [64, 4, 16, 3, 18];
  const [n, ci, co, k, h] = dims as [number, number, number, number, number];
  const x = values([n, ci, h, h], 3);
  const g = values([n, co, h - k + 1, h - k + 1], 7);
  const gradient = () => {
    const w = tensor(values([co, ci, k, k], 5), [co, ci, k, k]).requiresGrad_();
    tensor(x, [n, ci, h, h])
      .conv2d(w)
      .mul(tensor(g, [n, co, h - k + 1, h - k + 1]))
      .sum()
      .backward();
    return w.grad!;
  };

  it('sums 4 runs of 16 images: a product kernel of partial results, then their sum', () => {
    const sums = scheduleOf([gradient()]).kernels.filter((kn) => reduces(kn.ast).length);
    expect(sums).toHaveLength(2);
    // the product kernel stores a partial result of each run: a buffer of 4 weight gradients
    const store = sums[0]!.ast.toposort().find((u) => u.op === Ops.STORE)!;
    const buffer = store.src[0]!.src[0]!;
    expect(buffer.shape).toEqual([4 * co * ci * k * k]);
  });

  it('computes what a loop over the images computes', () => {
    const want = weightGradient(x, g, dims);
    const got = gradient().reshape([-1]).tolist() as number[];
    const worst = Math.max(...got.map((v, i) => Math.abs(v - want[i]!) / Math.max(1, Math.abs(want[i]!))));
    expect(worst).toBeLessThan(1e-5);
  });

  it('leaves a sum of fewer than 4 runs in one kernel (batch 32: 2 runs)', () => {
    const w = tensor(values([co, ci, k, k], 5), [co, ci, k, k]).requiresGrad_();
    tensor(values([32, ci, h, h], 3), [32, ci, h, h])
      .conv2d(w)
      .sum()
      .backward();
    const sums = scheduleOf([w.grad!]).kernels.filter((kn) => reduces(kn.ast).length);
    expect(sums).toHaveLength(1);
  });
});
