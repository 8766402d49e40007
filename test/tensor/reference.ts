// Plain-JS references and comparison helpers shared by the op-family tests.
import { expect } from 'vitest';
import type { Tensor } from '../../src/tensor/index.ts';

/** Deterministic pseudo-random float32 values in [-2, 2), or ints in [-5, 5]. */
export function values(n: number, seed: number, ints = false): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ints ? (s % 11) - 5 : Math.fround((s / 2 ** 32) * 4 - 2);
  });
}
export const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
export const data = (t: Tensor) => Array.from(t.dataSync() as ArrayLike<number>, Number);
export function close(got: number[], want: number[], tol = 1e-5): void {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    const w = want[i]!;
    if (Number.isNaN(w)) expect(g, `element ${i}`).toBeNaN();
    else if (!Number.isFinite(w)) expect(g, `element ${i}`).toBe(w);
    else
      expect(Math.abs(g - w), `element ${i}: ${g} vs ${w}`).toBeLessThanOrEqual(
        tol * Math.max(1, Math.abs(w)),
      );
  });
}

/** The row-major multi-index of a flat offset. */
export function unravel(flat: number, shape: readonly number[]): number[] {
  const idx: number[] = [];
  for (let k = shape.length - 1; k >= 0; k--) {
    idx[k] = flat % shape[k]!;
    flat = Math.floor(flat / shape[k]!);
  }
  return idx;
}
export const ravel = (idx: readonly number[], shape: readonly number[]) =>
  idx.reduce((flat, i, k) => flat * shape[k]! + i, 0);

/** f over the values of each slice along `axes` (undefined: all), in row-major order of the kept axes. */
export function reduceRef(
  xs: number[],
  shape: number[],
  axes: number[] | undefined,
  f: (v: number[]) => number,
): number[] {
  const ax = (axes ?? shape.map((_, i) => i)).map((a) => (a < 0 ? a + shape.length : a));
  const outShape = shape.map((d, i) => (ax.includes(i) ? 1 : d));
  const groups: number[][] = Array.from({ length: numel(outShape) }, () => []);
  xs.forEach((x, flat) => {
    const idx = unravel(flat, shape).map((i, k) => (ax.includes(k) ? 0 : i));
    groups[ravel(idx, outShape)]!.push(x);
  });
  return groups.map(f);
}

/** f over each slice along one axis, written back in place (for softmax-like ops). */
export function mapRef(xs: number[], shape: number[], axis: number, f: (v: number[]) => number[]): number[] {
  const a = axis < 0 ? axis + shape.length : axis;
  const out = new Array<number>(xs.length);
  const outer = shape.map((d, i) => (i === a ? 1 : d));
  for (let o = 0; o < numel(outer); o++) {
    const base = unravel(o, outer);
    const flats = Array.from({ length: shape[a]! }, (_, i) =>
      ravel(
        base.map((b, k) => (k === a ? i : b)),
        shape,
      ),
    );
    f(flats.map((fl) => xs[fl]!)).forEach((v, i) => {
      out[flats[i]!] = v;
    });
  }
  return out;
}
