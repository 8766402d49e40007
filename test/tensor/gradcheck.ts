// Gradient checks against central differences in float64 (gradient.test.ts's method), shared by op-family tests.
import { expect } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { data, numel } from './reference.ts';

const H = 1e-6;
const RTOL = 1e-5;
const ATOL = 1e-7;

/** Seeded uniform numbers in [0, 1). */
function uniform(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  });
}

/** How inputs are drawn: the default is [-2, -0.1] and [0.1, 2], away from the kinks at 0. */
export type Domain = 'default' | 'positive' | 'unit' | [number, number];
function draw(n: number, seed: number, domain: Domain): number[] {
  const u = uniform(n, seed);
  if (domain === 'default') return u.map((v) => (v < 0.5 ? -2 + 3.8 * v : 0.1 + 3.8 * (v - 0.5)));
  const [lo, hi] = domain === 'positive' ? [0.2, 2] : domain === 'unit' ? [-0.9, 0.9] : domain;
  return u.map((v) => lo + (hi - lo) * v);
}

export interface Case {
  shapes: number[][];
  f: (...xs: Tensor[]) => Tensor;
  /** One domain for every input, or one per input. */
  domain?: Domain | Domain[];
  /** The device (JS by default). */
  device?: string;
  /** The inputs' values, instead of drawing them. */
  inputs?: number[][];
}

/**
 * Checks the gradient of sum(f(xs) * w), for fixed random weights w, with respect to every input element
 * against (L(x + h) - L(x - h)) / 2h, in float64.
 */
export function gradCheck(
  name: string,
  { shapes, f, domain = 'default', device = 'JS', ...given }: Case,
): void {
  const opts = { dtype: dtypes.float64, device };
  const domains = Array.isArray(domain) && typeof domain[0] !== 'number' ? (domain as Domain[]) : undefined;
  const inputs =
    given.inputs ?? shapes.map((s, k) => draw(numel(s), 17 + 31 * k, domains?.[k] ?? (domain as Domain)));
  const make = (vals: number[][]) =>
    vals.map((v, k) => new Tensor(new Float64Array(v), opts).reshape(shapes[k]!));
  const leaves = inputs.map((v) => new Tensor(new Float64Array(v), opts));
  const out = f(...leaves.map((l, k) => l.reshape(shapes[k]!)));
  const w = new Tensor(new Float64Array(draw(out.numel, 5, [-1, 1])), opts).reshape(out.shape);
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

export const gradCheckAll = (cases: Record<string, Case>) => {
  for (const [name, c] of Object.entries(cases)) gradCheck(name, c);
};

/** gradCheck with positional arguments. */
export const checkGradient = (
  name: string,
  shapes: number[][],
  f: (...xs: Tensor[]) => Tensor,
  device = 'JS',
  inputs?: number[][],
) => gradCheck(name, { shapes, f, device, inputs });
