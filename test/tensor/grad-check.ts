// Central-difference gradient checks in float64 for the pad, pool and interpolate tests.
import { expect } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data, numel } from './reference.ts';

const H = 1e-6;
const RTOL = 1e-5;
const ATOL = 1e-7;

/** Seeded numbers in [-2, 2), distinct enough that a max has no ties. */
function draw(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 4 - 2;
  });
}

/**
 * Checks the gradient of sum(f(x) * w), for fixed random weights w, with respect to every element of x
 * against (L(x + h) - L(x - h)) / 2h.
 */
export function gradCheck(name: string, shape: number[], f: (x: Tensor) => Tensor, device = 'JS'): void {
  const opts = { dtype: dtypes.float64, device };
  const input = draw(numel(shape), 17);
  const make = (v: number[]) => new Tensor(new Float64Array(v), opts).reshape(shape);
  const leaf = new Tensor(new Float64Array(input), opts);
  const out = f(leaf.reshape(shape));
  const w = new Tensor(new Float64Array(draw(out.numel, 5)), opts).reshape(out.shape);
  const lossOf = (t: Tensor) => t.mul(w).sum();
  const [grad] = Tensor.gradient(lossOf(out), [leaf]).map(data);
  const at = (i: number, d: number) => {
    const moved = input.slice();
    moved[i]! += d;
    return Number(lossOf(f(make(moved))).item());
  };
  input.forEach((_, i) => {
    const numeric = (at(i, H) - at(i, -H)) / (2 * H);
    const analytic = grad![i]!;
    const tol = RTOL * Math.max(Math.abs(numeric), Math.abs(analytic)) + ATOL;
    expect(
      Math.abs(analytic - numeric),
      `${name}: d/dx[${i}]: analytic ${analytic}, numeric ${numeric}`,
    ).toBeLessThanOrEqual(tol);
  });
}
