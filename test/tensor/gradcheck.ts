// Gradient checks against central differences in float64 (the pattern of gradient.test.ts), for op-family tests.
import { expect } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data, numel } from './reference.ts';

const H = 1e-6;
const RTOL = 1e-5;
const ATOL = 1e-7;

/** Seeded distinct-looking values in [-2, -0.1] and [0.1, 2], away from kinks at 0. */
function draw(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const v = s / 2 ** 32;
    return v < 0.5 ? -2 + 3.8 * v : 0.1 + 3.8 * (v - 0.5);
  });
}

/**
 * Checks the gradient of sum(f(xs) * w), for fixed random weights w, with respect to every element of every
 * input (float64 tensors of the given shapes on `device`) against (L(x + h) - L(x - h)) / 2h.
 */
export function checkGradient(
  name: string,
  shapes: number[][],
  f: (...xs: Tensor[]) => Tensor,
  device = 'JS',
  inputs: number[][] = shapes.map((s, k) => draw(numel(s), 17 + 31 * k)),
): void {
  const opts = { dtype: dtypes.float64, device };
  const make = (vals: number[][]) =>
    vals.map((v, k) => new Tensor(new Float64Array(v), opts).reshape(shapes[k]!));
  const leaves = inputs.map((v) => new Tensor(new Float64Array(v), opts));
  const out = f(...leaves.map((l, k) => l.reshape(shapes[k]!)));
  const w = new Tensor(new Float64Array(draw(out.numel, 5)), opts).reshape(out.shape);
  const lossOf = (t: Tensor) => t.mul(w).sum();
  const grads = Tensor.gradient(lossOf(out), leaves).map(data);
  inputs.forEach((v, k) => {
    const at = (i: number, d: number) => {
      const moved = inputs.map((u) => u.slice());
      moved[k]![i]! += d;
      return Number(lossOf(f(...make(moved))).item());
    };
    v.forEach((_, i) => {
      const numeric = (at(i, H) - at(i, -H)) / (2 * H);
      const analytic = grads[k]![i]!;
      const tol = RTOL * Math.max(Math.abs(numeric), Math.abs(analytic)) + ATOL;
      expect(
        Math.abs(analytic - numeric),
        `${name}: d/d input ${k}[${i}]: analytic ${analytic}, numeric ${numeric}`,
      ).toBeLessThanOrEqual(tol);
    });
  });
}
