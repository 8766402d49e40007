// Random tensors on JS and CPU: Threefry against a plain-JS reference and known answers, the stream's
// determinism, distribution statistics, integer ranges, initializer bounds and dropout.
import { afterEach, describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { threefry2x32 } from '../../src/tensor/random.ts';
import { UOp } from '../../src/uop/uop.ts';
import { DEVICES } from '../devices.ts';

/** Threefry-2x32, 20 rounds, as Random123 specifies it, on JS numbers. */
function threefryRef(k0: number, k1: number, c0: number, c1: number): [number, number] {
  const rot = [13, 15, 26, 6, 17, 29, 16, 24];
  const ks = [k0 >>> 0, k1 >>> 0, (k0 ^ k1 ^ 0x1bd11bda) >>> 0];
  let x0 = (c0 + ks[0]!) >>> 0;
  let x1 = (c1 + ks[1]!) >>> 0;
  for (let r = 0; r < 20; r++) {
    const n = rot[r % 8]!;
    x0 = (x0 + x1) >>> 0;
    x1 = (((x1 << n) | (x1 >>> (32 - n))) ^ x0) >>> 0;
    if (r % 4 === 3) {
      const s = (r + 1) / 4;
      x0 = (x0 + ks[s % 3]!) >>> 0;
      x1 = (x1 + ks[(s + 1) % 3]! + s) >>> 0;
    }
  }
  return [x0, x1];
}

/** The stream's words for element i of the call-th random call after manualSeed(seed) (seed below 2^32). */
const words = (seed: number, call: number, i: number) => threefryRef(seed, 0, i, call);
const unitRef = (w: number) => (w >>> 8) / 2 ** 24;

const data = (t: Tensor) => Array.from(t.dataSync(), Number);
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const variance = (xs: number[]) => {
  const m = mean(xs);
  return xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1);
};

afterEach(() => {
  Tensor.training = false;
});

describe('Threefry 2x32 reference', () => {
  it('matches the known answers (JAX, Random123)', () => {
    expect(threefryRef(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3)).toEqual([0xc4923a9c, 0x483df7a0]);
    expect(threefryRef(0, 0, 0, 0)).toEqual([0x6b200159, 0x99ba4efe]);
    expect(threefryRef(-1, -1, -1, -1)).toEqual([0x1cb996fc, 0xbb002be7]);
  });
  it('the UOp graph folds to the same words on constants', () => {
    const c = (v: number) => UOp.const(dtypes.uint32, v);
    const out = threefry2x32(c(0x243f6a88), c(0x85a308d3), c(0x13198a2e), c(0x03707344));
    expect(out.map((u) => u.simplify().constValue)).toEqual([0xc4923a9c, 0x483df7a0]);
  });
});

for (const device of DEVICES)
  describe(`random on ${device}`, () => {
    it('a kernel computes the known-answer vector', () => {
      const word = (v: number) => new Tensor(new Uint32Array([v, v ^ 1]), { device }).uop;
      const [a, b] = threefry2x32(word(0x243f6a88), word(0x85a308d3), word(0x13198a2e), word(0x03707344));
      const got = [Tensor.fromUOp(a, device), Tensor.fromUOp(b, device)].map(data);
      const other = threefryRef(0x13198a2e ^ 1, 0x03707344 ^ 1, 0x243f6a88 ^ 1, 0x85a308d3 ^ 1);
      expect(got).toEqual([
        [0xc4923a9c, other[0]],
        [0x483df7a0, other[1]],
      ]);
    });

    it('rand: the stream of the reference, key = seed, counter = (element, call)', () => {
      Tensor.manualSeed(1234);
      const a = Tensor.rand([3, 5], { device });
      const b = Tensor.rand([4], { device });
      expect([a.shape, a.dtype, a.device]).toEqual([[3, 5], dtypes.float32, device]);
      expect(data(a)).toEqual(Array.from({ length: 15 }, (_, i) => unitRef(words(1234, 0, i)[0])));
      expect(data(b)).toEqual(Array.from({ length: 4 }, (_, i) => unitRef(words(1234, 1, i)[0])));
      // seeds past 2^32 use the key's second word
      Tensor.manualSeed(2 ** 32 + 5);
      expect(data(Tensor.rand([2], { device }))).toEqual(
        [0, 1].map((i) => unitRef(threefryRef(5, 1, i, 0)[0])),
      );
    });

    it('rand: same seed same values, another call other values, every call one compiled kernel', () => {
      Tensor.manualSeed(7);
      const a = Tensor.rand([64], { device });
      const b = Tensor.rand([64], { device });
      Tensor.manualSeed(7);
      const c = Tensor.rand([64], { device });
      expect(scheduleOf([a])!.kernels.map((k) => k.ast.key)).toEqual(
        scheduleOf([b]).kernels.map((k) => k.ast.key),
      );
      const [da, db, dc] = [data(a), data(b), data(c)];
      expect(dc).toEqual(da);
      expect(db.filter((x, i) => x === da[i]).length).toBeLessThan(3);
      expect(new Set(da).size).toBeGreaterThan(60);
    });

    it('rand in float64 uses all 32 bits of a word', () => {
      Tensor.manualSeed(3);
      const t = Tensor.rand([8], { device, dtype: dtypes.float64 });
      expect(t.dtype).toBe(dtypes.float64);
      expect(data(t)).toEqual(Array.from({ length: 8 }, (_, i) => words(3, 0, i)[0] / 2 ** 32));
    });

    it('rand, randn: statistics of 10k samples', () => {
      Tensor.manualSeed(42);
      const u = data(Tensor.rand([100, 100], { device }));
      expect(Math.min(...u)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...u)).toBeLessThan(1);
      expect(Math.abs(mean(u) - 0.5)).toBeLessThan(0.015);
      expect(Math.abs(variance(u) - 1 / 12)).toBeLessThan(0.004);
      // each tenth of [0, 1) holds about a tenth of the samples
      for (let k = 0; k < 10; k++)
        expect(Math.abs(u.filter((x) => Math.floor(x * 10) === k).length - 1000)).toBeLessThan(150);
      const z = data(Tensor.randn([10000], { device }));
      expect(Math.abs(mean(z))).toBeLessThan(0.05);
      expect(Math.abs(variance(z) - 1)).toBeLessThan(0.06);
      expect(z.filter((x) => Math.abs(x) < 1).length / z.length).toBeCloseTo(0.6827, 1);
      expect(z.every(Number.isFinite)).toBe(true);
    });

    it('randn: Box-Muller on the two words of each counter', () => {
      Tensor.manualSeed(9);
      const got = data(Tensor.randn([32], { device }));
      got.forEach((g, i) => {
        const [w0, w1] = words(9, 0, i);
        const want = Math.sqrt(-2 * Math.log(1 - unitRef(w0))) * Math.sin(2 * Math.PI * unitRef(w1));
        expect(Math.abs(g - want)).toBeLessThan(2e-5 * Math.max(1, Math.abs(want)));
      });
    });

    it('randint: values in [low, high), each hit, in the asked dtype', () => {
      Tensor.manualSeed(11);
      const t = Tensor.randint([2000], -3, 4, { device });
      expect(t.dtype).toBe(dtypes.int32);
      const xs = data(t);
      expect(new Set(xs)).toEqual(new Set([-3, -2, -1, 0, 1, 2, 3]));
      expect(Math.abs(mean(xs))).toBeLessThan(0.15);
      expect(xs.slice(0, 5)).toEqual([0, 1, 2, 3, 4].map((i) => (words(11, 0, i)[0] % 7) - 3));
      const small = Tensor.randint([50], -128, 128, { device, dtype: dtypes.int8 });
      expect(small.dtype).toBe(dtypes.int8);
      expect(data(small).every((x) => x >= -128 && x < 128)).toBe(true);
      // the full int32 range: low plus the word itself
      const full = data(Tensor.randint([4], -(2 ** 31), 2 ** 31, { device }));
      expect(full).toEqual([0, 1, 2, 3].map((i) => words(11, 2, i)[0] - 2 ** 31));
      expect(data(Tensor.randint([20], 5, 6, { device }))).toEqual(new Array(20).fill(5));
    });

    it('uniform and normal: ranges, mean and spread', () => {
      Tensor.manualSeed(5);
      const u = data(Tensor.uniform([4000], -2, 6, { device }));
      expect(Math.min(...u)).toBeGreaterThanOrEqual(-2);
      expect(Math.max(...u)).toBeLessThan(6);
      expect(Math.abs(mean(u) - 2)).toBeLessThan(0.15);
      const n = data(Tensor.normal([4000], 3, 0.5, { device }));
      expect(Math.abs(mean(n) - 3)).toBeLessThan(0.03);
      expect(Math.abs(Math.sqrt(variance(n)) - 0.5)).toBeLessThan(0.03);
    });

    it('kaimingUniform and glorotUniform stay within their bounds and reach them', () => {
      Tensor.manualSeed(8);
      const k = data(Tensor.kaimingUniform([64, 32, 3], undefined, { device }));
      const kb = Math.sqrt(6 / ((1 + 0.01 ** 2) * 96));
      expect(Math.max(...k.map(Math.abs))).toBeLessThanOrEqual(kb);
      expect(Math.max(...k.map(Math.abs))).toBeGreaterThan(0.99 * kb);
      const a5 = data(Tensor.kaimingUniform([16, 8], Math.sqrt(5), { device }));
      expect(Math.max(...a5.map(Math.abs))).toBeLessThanOrEqual(1 / Math.sqrt(8));
      const g = data(Tensor.glorotUniform([50, 30], { device }));
      const gb = Math.sqrt(6 / 80);
      expect(Math.max(...g.map(Math.abs))).toBeLessThanOrEqual(gb);
      expect(Math.max(...g.map(Math.abs))).toBeGreaterThan(0.98 * gb);
      expect(Math.abs(mean(g))).toBeLessThan(0.02);
    });

    it('dropout: identity unless training; keeps 1 - p of the values, scaled by 1 / (1 - p)', () => {
      const x = Tensor.full([100, 100], 3, { device });
      expect(x.dropout(0.5)).toBe(x);
      Tensor.training = true;
      Tensor.manualSeed(21);
      const y = data(x.dropout(0.3));
      const kept = y.filter((v) => v !== 0);
      expect(kept.every((v) => Math.abs(v - 3 / 0.7) < 1e-6)).toBe(true);
      expect(Math.abs(kept.length / y.length - 0.7)).toBeLessThan(0.015);
      // which elements it keeps is rand's stream: element i survives when its uniform is at least p
      expect(y.slice(0, 50).map((v) => v !== 0)).toEqual(
        Array.from({ length: 50 }, (_, i) => unitRef(words(21, 0, i)[0]) >= 0.3),
      );
      expect(x.dropout(0)).toBe(x);
      expect(data(x.dropout(1)).every((v) => v === 0)).toBe(true);
      expect(x.dropout()).not.toBe(x);
    });

    it('zero-size and scalar shapes', () => {
      Tensor.training = true;
      for (const t of [
        Tensor.rand([0, 3], { device }),
        Tensor.randn([2, 0], { device }),
        Tensor.randint([0], 0, 5, { device }),
        Tensor.kaimingUniform([4, 0], undefined, { device }),
        Tensor.zeros([3, 0], { device }).dropout(0.5),
      ]) {
        expect(t.numel).toBe(0);
        expect(t.dataSync().length).toBe(0);
      }
      const s = Tensor.rand([], { device });
      expect(s.shape).toEqual([]);
      const v = s.item() as number;
      expect(v >= 0 && v < 1).toBe(true);
    });
  });

describe('random stream across devices and errors', () => {
  it('the same seed gives the same values on JS and CPU', () => {
    const draw = (device: string) => {
      Tensor.manualSeed(99);
      return [
        Tensor.rand([40], { device }),
        Tensor.randint([40], 0, 1000, { device }),
        Tensor.randn([40], { device }),
      ].map(data);
    };
    const [js, cpu] = [draw('JS'), draw('CPU')];
    expect(cpu.slice(0, 2)).toEqual(js.slice(0, 2));
    cpu[2]!.forEach((x, i) => {
      expect(Math.abs(x - js[2]![i]!)).toBeLessThan(1e-5);
    });
  });

  it('errors name the op and what is valid', () => {
    expect(() => Tensor.manualSeed(1.5)).toThrow(/manualSeed: seed must be an integer/);
    expect(() => Tensor.rand([2], { dtype: dtypes.int32 })).toThrow(
      /Tensor.rand: dtype must be a float.*randint/,
    );
    expect(() => Tensor.rand([-1])).toThrow(/Tensor.rand: shape \(-1\)/);
    expect(() => Tensor.randint([2], 3, 3)).toThrow(/randint: needs integers low < high/);
    expect(() => Tensor.randint([2], 0, 300, { dtype: dtypes.uint8 })).toThrow(/does not fit uint8/);
    expect(() => Tensor.randint([2], 0, 2, { dtype: dtypes.float32 })).toThrow(/integer type/);
    expect(() => Tensor.glorotUniform([5])).toThrow(/glorotUniform: needs a weight shape of 2 or more dims/);
    expect(() => Tensor.zeros([2], { device: 'JS' }).dropout(1.5)).toThrow(/dropout: p must lie in \[0, 1\]/);
  });
});
