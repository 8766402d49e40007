// randLike, randnLike, randperm, multinomial and kaimingNormal: statistics under fixed seeds on JS and CPU, shapes, dtypes, errors.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { data } from './reference.ts';

const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const variance = (v: number[]) => mean(v.map((x) => (x - mean(v)) ** 2));
/** The share of each value 0..k-1 among xs. */
const shares = (xs: number[], k: number) =>
  Array.from({ length: k }, (_, c) => xs.filter((x) => x === c).length / xs.length);

function expectNear(got: number[], want: number[], tol: number): void {
  got.forEach((g, i) => {
    expect(Math.abs(g - want[i]!), `entry ${i}: ${g} vs ${want[i]}`).toBeLessThanOrEqual(tol);
  });
}

describe.each(DEVICES)('on %s', (device) => {
  it('randLike and randnLike take the shape, device and float dtype of t (float32 for an int t)', () => {
    Tensor.manualSeed(1);
    const t = Tensor.zeros([40, 15], { device, dtype: dtypes.float64 }).permute([1, 0]);
    const u = Tensor.randLike(t);
    expect([u.shape, u.device, u.dtype]).toEqual([[15, 40], device, dtypes.float64]);
    const us = data(u);
    expect(Math.min(...us)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...us)).toBeLessThan(1);
    // 600 uniforms: the mean's standard error is 0.012, the variance's about 0.003
    expect(Math.abs(mean(us) - 0.5)).toBeLessThan(0.05);
    expect(Math.abs(variance(us) - 1 / 12)).toBeLessThan(0.015);

    const n = Tensor.randnLike(Tensor.ones([600], { device, dtype: dtypes.int32 }));
    expect([n.shape, n.dtype]).toEqual([[600], dtypes.float32]);
    const ns = data(n);
    expect(Math.abs(mean(ns))).toBeLessThan(0.17);
    expect(Math.abs(variance(ns) - 1)).toBeLessThan(0.25);

    const h = Tensor.randLike(t, { dtype: 'float16', requiresGrad: true });
    expect([h.dtype, h.requiresGrad]).toEqual([dtypes.float16, true]);
    expect(Tensor.randnLike(Tensor.zeros([0, 3], { device })).shape).toEqual([0, 3]);
    // the same seed gives the same values
    Tensor.manualSeed(1);
    expect(data(Tensor.randLike(t))).toEqual(us);
  });

  it('randperm holds every value of 0..n-1 once, in an order that changes with each call', () => {
    Tensor.manualSeed(2);
    for (const n of [1, 7, 100]) {
      const p = Tensor.randperm(n, { device });
      expect([p.shape, p.dtype, p.device]).toEqual([[n], dtypes.int32, device]);
      expect([...data(p)].sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i));
    }
    const [a, b] = [data(Tensor.randperm(50, { device })), data(Tensor.randperm(50, { device }))];
    expect(a).not.toEqual(b);
    expect(a).not.toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(Tensor.randperm(0, { device }).shape).toEqual([0]);
    expect(Tensor.randperm(3, { device, dtype: 'int64' }).dtype).toBe(dtypes.int64);
  });

  it('randperm places each value at each position equally often', () => {
    Tensor.manualSeed(3);
    const draws = 200;
    const counts = Array.from({ length: 4 }, () => [0, 0, 0, 0]);
    for (let d = 0; d < draws; d++)
      data(Tensor.randperm(4, { device })).forEach((v, pos) => {
        counts[v]![pos]! += 1;
      });
    // 50 expected per cell, standard deviation 6.1
    for (const row of counts) for (const c of row) expect(Math.abs(c - 50)).toBeLessThan(22);
  });

  it('multinomial with replacement draws each category by its share of the row, never a zero weight', () => {
    Tensor.manualSeed(4);
    const w = new Tensor([1, 2, 0, 7], { device });
    const s = w.multinomial(2000, true);
    expect([s.shape, s.dtype]).toEqual([[2000], dtypes.int32]);
    // standard errors at most 0.011
    expectNear(shares(data(s), 4), [0.1, 0.2, 0, 0.7], 0.045);

    const rows = new Tensor(
      [
        [0.5, 0.5, 0],
        [0, 0, 3],
      ],
      { device },
    ).multinomial(400, true);
    expect(rows.shape).toEqual([2, 400]);
    const [r0, r1] = [data(rows).slice(0, 400), data(rows).slice(400)];
    expectNear(shares(r0, 3), [0.5, 0.5, 0], 0.1);
    expect(r1.every((v) => v === 2)).toBe(true);
    expect(w.multinomial().shape).toEqual([1]);
    expect(Tensor.zeros([0, 3], { device }).multinomial(2).shape).toEqual([0, 2]);
  });

  it('multinomial without replacement draws distinct categories with Efraimidis-Spirakis frequencies', () => {
    Tensor.manualSeed(5);
    // 1500 rows, a broadcast (non-contiguous) view of one row of weights
    const w = new Tensor([[0.1, 0.2, 0, 0.7]], { device }).expand([1500, 4]);
    const s = w.multinomial(2);
    expect(s.shape).toEqual([1500, 2]);
    const xs = data(s);
    const first = xs.filter((_, i) => i % 2 === 0);
    const second = xs.filter((_, i) => i % 2 === 1);
    expect(first.every((v, i) => v !== second[i])).toBe(true);
    expect(xs.includes(2)).toBe(false);
    // P(first = i) = p_i; P(second = j) = sum over i != j of p_i p_j / (1 - p_i); standard errors below 0.013
    expectNear(shares(first, 4), [0.1, 0.2, 0, 0.7], 0.05);
    const p = [0.1, 0.2, 0, 0.7];
    const secondWant = p.map((pj, j) => p.reduce((a, pi, i) => (i === j ? a : a + (pi * pj) / (1 - pi)), 0));
    expectNear(shares(second, 4), secondWant, 0.05);

    // all k categories: a permutation, the zero weight last
    const all = data(new Tensor([[3, 0, 1, 2]], { device }).multinomial(4));
    expect([...all].sort()).toEqual([0, 1, 2, 3]);
    expect(all[3]).toBe(1);
  });

  it('kaimingNormal has mean 0 and std sqrt(2 / ((1 + a^2) fanIn))', () => {
    Tensor.manualSeed(6);
    for (const a of [0.01, Math.sqrt(5)]) {
      const t = Tensor.kaimingNormal([64, 16, 3], a, { device });
      expect([t.shape, t.device, t.dtype]).toEqual([[64, 16, 3], device, dtypes.float32]);
      const xs = data(t);
      const std = Math.sqrt(2 / ((1 + a * a) * 48));
      expect(Math.abs(mean(xs))).toBeLessThan((4 * std) / Math.sqrt(xs.length));
      expect(Math.abs(Math.sqrt(variance(xs)) / std - 1)).toBeLessThan(0.06);
    }
    expect(Tensor.kaimingNormal([3, 2], undefined, { device, dtype: 'float64' }).dtype).toBe(dtypes.float64);
  });
});

describe('errors', () => {
  it('name the op, the bad value and what is valid', () => {
    expect(() => Tensor.randperm(-1)).toThrow('Tensor.randperm: n must be a non-negative integer, got -1');
    expect(() => Tensor.randperm(4, { dtype: 'float32' })).toThrow(
      'Tensor.randperm: dtype must be an integer type that holds 3, got float32',
    );
    expect(() => Tensor.randperm(300, { dtype: 'int8' })).toThrow(
      'Tensor.randperm: dtype must be an integer type that holds 299, got int8',
    );
    expect(() => Tensor.randLike(Tensor.zeros([2]), { dtype: 'int32' })).toThrow(
      'Tensor.rand: dtype must be a float',
    );
    expect(() => Tensor.kaimingNormal([5])).toThrow(
      'Tensor.kaimingNormal: needs a weight shape of 2 or more dims ([fanOut, fanIn, ...kernel]), got (5)',
    );
    const w = new Tensor([0.5, 0.5], { device: 'JS' });
    expect(() => w.reshape([1, 1, 2]).multinomial()).toThrow(
      'multinomial: weights (1, 1, 2) should be 1-D (k) or 2-D (rows, k)',
    );
    expect(() => w.multinomial(0)).toThrow('multinomial: numSamples must be a positive integer, got 0');
    expect(() => w.multinomial(3)).toThrow(
      'multinomial: 3 samples without replacement from 2 categories; ask for at most 2 or pass replacement = true',
    );
    expect(() => Tensor.zeros([2, 0]).multinomial(1, true)).toThrow(
      'multinomial: weights (2, 0) have no categories to draw from',
    );
  });
});
