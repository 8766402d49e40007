// Matmul through 16-column panels (CPU, m*n*k >= 2^21) against the JS device (plain product) and plain-JS loops;
// small-integer data, so every summation order gives the same float32.
import { describe, expect, it } from 'vitest';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data, values } from './reference.ts';

/** Small integers in [-5, 5] on device, of this shape (a leaf: it can require gradients). */
function ints(shape: number[], seed: number, device: string, requiresGrad = false): Tensor {
  const flat = new Float32Array(
    values(
      shape.reduce((a, d) => a * d, 1),
      seed,
      true,
    ),
  );
  const t = new Tensor(flat, { device }).reshape(shape).realize();
  t.requiresGrad = requiresGrad;
  return t;
}

/** Plain-JS (batch of) a[m, k] @ b[k, n]: row-major arrays, b's batch broadcast when it has one matrix. */
function matmulRef(a: number[], b: number[], batch: number, m: number, k: number, n: number): number[] {
  const out = new Array<number>(batch * m * n).fill(0);
  const bStride = b.length === k * n ? 0 : k * n;
  for (let z = 0; z < batch; z++)
    for (let i = 0; i < m; i++)
      for (let p = 0; p < k; p++) {
        const x = a[z * m * k + i * k + p]!;
        for (let j = 0; j < n; j++) out[z * m * n + i * n + j]! += x * b[z * bStride + p * n + j]!;
      }
  return out;
}

const kernelCount = (t: Tensor) => scheduleOf([t]).kernels.length;

describe('panel matmul on the CPU', () => {
  it('128x256 @ 256x64: a pack and a product on the CPU, one kernel on JS, the same exact values', () => {
    const [x, w] = [ints([128, 256], 1, 'CPU'), ints([256, 64], 2, 'CPU')];
    expect(kernelCount(x.matmul(w))).toBe(2);
    expect(kernelCount(x.to('JS').matmul(w.to('JS')))).toBe(1);
    const want = matmulRef(data(x), data(w), 1, 128, 256, 64);
    expect(data(x.matmul(w))).toEqual(want);
    expect(data(x.to('JS').matmul(w.to('JS')))).toEqual(want);
    expect(x.matmul(w).shape).toEqual([128, 64]);
  });

  it('reads w directly below 2^21 multiply-adds, with n not a multiple of 16, or with fewer than 16 rows', () => {
    const z = (shape: number[]) =>
      new Tensor(new Float32Array(shape.reduce((p, d) => p * d, 1)), { device: 'CPU' }).reshape(shape);
    expect(kernelCount(z([128, 256]).matmul(z([256, 64])))).toBe(2); // 2^21: panels
    expect(kernelCount(z([64, 256]).matmul(z([256, 64])))).toBe(1); // 2^20
    expect(kernelCount(z([128, 256]).matmul(z([256, 72])))).toBe(1);
    expect(kernelCount(z([8, 2048]).matmul(z([2048, 256])))).toBe(1);
    expect(kernelCount(z([2048]).matmul(z([2048, 1024])))).toBe(1);
    expect(kernelCount(z([16, 2048]).matmul(z([2048, 64])))).toBe(2);
  });

  it('batched: [2,128,128] @ [2,128,128], and [2,128,128] @ [128,128] (broadcast panels)', () => {
    const x = ints([2, 128, 128], 5, 'CPU');
    const w3 = ints([2, 128, 128], 6, 'CPU');
    const w2 = ints([128, 128], 7, 'CPU');
    expect(kernelCount(x.matmul(w3))).toBe(2);
    expect(data(x.matmul(w3))).toEqual(matmulRef(data(x), data(w3), 2, 128, 128, 128));
    const out = x.matmul(w2);
    expect(out.shape).toEqual([2, 128, 128]);
    expect(data(out)).toEqual(matmulRef(data(x), data(w2), 2, 128, 128, 128));
  });

  it('a transposed right operand: x @ w.T, with w [64, 256]', () => {
    const x = ints([128, 256], 8, 'CPU');
    const w = ints([64, 256], 9, 'CPU');
    const wT = data(w.transpose().contiguous());
    expect(kernelCount(x.matmul(w.transpose()))).toBe(2);
    expect(data(x.matmul(w.transpose()))).toEqual(matmulRef(data(x), wT, 1, 128, 256, 64));
  });

  it('a lazy left operand fuses into the product', () => {
    const x = ints([128, 256], 12, 'CPU');
    const w = ints([256, 64], 2, 'CPU');
    const y = x.add(1).relu().matmul(w);
    expect(kernelCount(y)).toBe(2);
    expect(data(y)).toEqual(matmulRef(data(x.to('JS').add(1).relu()), data(w), 1, 128, 256, 64));
  });

  it('gradients through the panels equal the JS device (plain product) and the reference', () => {
    const grads = (device: string) => {
      const x = ints([128, 256], 13, device, true);
      const w = ints([256, 64], 14, device, true);
      const g = ints([128, 64], 15, device);
      x.matmul(w).mul(g).sum().backward();
      return { x: data(x.grad!), w: data(w.grad!), xs: data(x), ws: data(w), gs: data(g) };
    };
    const cpu = grads('CPU');
    const js = grads('JS');
    expect(cpu.x).toEqual(js.x);
    expect(cpu.w).toEqual(js.w);
    // dx = g @ w.T (128x64 @ 64x256), dw = x.T @ g (256x128 @ 128x64): both big enough for panels
    const t = (a: number[], r: number, c: number) =>
      Array.from({ length: r * c }, (_, i) => a[(i % r) * c + Math.floor(i / r)]!);
    expect(cpu.x).toEqual(matmulRef(cpu.gs, t(cpu.ws, 256, 64), 1, 128, 64, 256));
    expect(cpu.w).toEqual(matmulRef(t(cpu.xs, 128, 256), cpu.gs, 1, 256, 128, 64));
  });
});
