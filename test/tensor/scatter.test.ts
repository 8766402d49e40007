// Masked and scatter ops (maskedFill, scatter, scatterReduce, maskedSelect, nonzero) against plain-JS references.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { close, data, numel, ravel, unravel, values } from './reference.ts';

/** A tensor's shape and row-major values: the reference's view of it. */
interface Nd {
  shape: number[];
  data: number[];
}
const nd = (t: Tensor): Nd => ({ shape: t.shape, data: data(t) });

/** Seeded integers in [lo, hi). */
function ints(n: number, seed: number, lo: number, hi: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return lo + (s % (hi - lo));
  });
}

type Reduce = 'sum' | 'prod' | 'mean' | 'amax' | 'amin';
const REF: Record<Reduce, (v: number[], isInt: boolean) => number> = {
  sum: (v) => v.reduce((a, b) => a + b, 0),
  prod: (v) => v.reduce((a, b) => a * b, 1),
  mean: (v, isInt) => (isInt ? Math.floor : (x: number) => x)(v.reduce((a, b) => a + b, 0) / v.length),
  amax: (v) => Math.max(...v),
  amin: (v) => Math.min(...v),
};

/**
 * torch's scatter / scatter_reduce over plain arrays: each index entry (row-major) sends its src value to the
 * position it names along d; without reduce the last one wins. Out-of-range entries are skipped.
 */
function scatterRef(
  self: Nd,
  d: number,
  index: Nd,
  src: Nd | number,
  reduce?: Reduce,
  includeSelf = true,
  isInt = false,
): number[] {
  const lists = new Map<number, number[]>();
  index.data.forEach((p, flat) => {
    const at = unravel(flat, index.shape);
    if (p < 0 || p >= self.shape[d]!) return;
    const target = ravel(
      at.map((v, k) => (k === d ? p : v)),
      self.shape,
    );
    const v = typeof src === 'number' ? src : src.data[ravel(at, src.shape)]!;
    if (!lists.has(target)) lists.set(target, []);
    lists.get(target)!.push(v);
  });
  const out = self.data.slice();
  for (const [t, vs] of lists)
    out[t] =
      reduce === undefined ? vs.at(-1)! : REF[reduce](includeSelf ? [self.data[t]!, ...vs] : vs, isInt);
  return out;
}

for (const device of DEVICES)
  describe(`scatter ops on ${device}`, { timeout: 120_000 }, () => {
    const F = (shape: number[], seed: number) =>
      new Tensor(new Float32Array(values(numel(shape), seed)), { device }).reshape(shape);
    const I = (shape: number[], seed: number, lo: number, hi: number) =>
      new Tensor(new Int32Array(ints(numel(shape), seed, lo, hi)), { device }).reshape(shape);
    const B = (shape: number[], seed: number) => I(shape, seed, 0, 2).cast(dtypes.bool);

    it('maskedFill with broadcast masks and values, ints and non-contiguous inputs', () => {
      const x = F([3, 2], 1).permute([1, 0]); // (2, 3), non-contiguous
      const mask = B([3], 2);
      const m = data(mask);
      const xs = data(x);
      close(
        data(x.maskedFill(mask, -7.5)),
        xs.map((v, i) => (m[i % 3] ? -7.5 : v)),
      );
      const col = F([2, 1], 3);
      const c = data(col);
      close(
        data(x.maskedFill(mask, col)),
        xs.map((v, i) => (m[i % 3] ? c[Math.floor(i / 3)]! : v)),
      );
      const n = I([2, 3], 4, -5, 5);
      const full = B([2, 3], 5);
      const f = data(full);
      const r = n.maskedFill(full, 9);
      expect(r.dtype).toBe(dtypes.int32);
      expect(data(r)).toEqual(data(n).map((v, i) => (f[i] ? 9 : v)));
      // a float value into an int tensor takes the tensor's dtype (truncated)
      expect(data(n.maskedFill(full, new Tensor(2.75, { device })))).toEqual(
        data(n).map((v, i) => (f[i] ? 2 : v)),
      );
      expect(Tensor.zeros([0, 3], { device }).maskedFill(mask, 1).shape).toEqual([0, 3]);
    });

    it('maskedFill errors', () => {
      const x = F([2, 3], 1);
      expect(() => x.maskedFill(I([3], 1, 0, 2), 0)).toThrow(
        'maskedFill: the mask must have dtype bool, got int32',
      );
      expect(() => F([3], 1).maskedFill(B([2, 3], 1), 0)).toThrow(
        "maskedFill: the mask of shape (2, 3) does not broadcast to the tensor's shape (3)",
      );
      expect(() => x.maskedFill(B([2], 1), 0)).toThrow('maskedFill: cannot broadcast shapes (2, 3) and (2)');
      expect(() => x.maskedFill(B([3], 1), F([2, 2, 3], 1))).toThrow(
        "maskedFill: the value of shape (2, 2, 3) does not broadcast to the tensor's shape (2, 3)",
      );
    });

    it('scatter along each dim: smaller index, larger src, scalars, ints, bools, non-contiguous', () => {
      const self = F([4, 5], 10);
      const cases: [Tensor, number, Tensor, Tensor | number][] = [
        [self, 0, I([3, 4], 11, 0, 4), F([3, 5], 12)],
        [self, -1, I([2, 3], 13, 0, 5), F([4, 6], 14)],
        [F([5, 4], 16).transpose(), 1, I([2, 3], 17, 0, 5).flip(0), F([3, 2], 18).transpose()],
        [I([3, 4], 19, -5, 5), 1, I([3, 4], 20, 0, 4), I([3, 4], 21, 100, 110)],
        [F([2, 3, 4], 22), 1, I([2, 5, 4], 23, 0, 3), F([2, 5, 4], 24)],
      ];
      for (const [t, d, index, src] of cases) {
        const out = t.scatter(d, index, src);
        expect(out.shape).toEqual(t.shape);
        expect(out.dtype).toBe(t.dtype);
        const want = scatterRef(
          nd(t),
          d < 0 ? d + t.ndim : d,
          nd(index),
          src instanceof Tensor ? nd(src) : src,
        );
        close(data(out), want);
      }
      const flags = B([2, 3], 25);
      const bools = flags.scatter(1, new Tensor([[2], [0]], { device }), true);
      expect(bools.dtype).toBe(dtypes.bool);
      expect(data(bools)).toEqual(scatterRef(nd(flags), 1, { shape: [2, 1], data: [2, 0] }, 1));
    });

    // gcc 12.2's loop vectorizer dropped the unhit elements of self here (test/runtime/cc.test.ts)
    it('scatter of a scalar into a few positions per row', () => {
      const self = F([4, 5], 10);
      const index = I([4, 2], 15, 0, 5);
      close(data(self.scatter(1, index, 2.5)), scatterRef(nd(self), 1, nd(index), 2.5));
    });

    it('scatter: duplicate indices, the last along dim wins; lazy out-of-range indices write nothing', () => {
      const z = Tensor.zeros([3], { device });
      const src = new Tensor([1, 2, 3, 4, 5], { device }).float();
      expect(data(z.scatter(0, new Tensor([1, 1, 0, 1, 2], { device }), src))).toEqual([3, 4, 5]);
      // unchecked (lazy, CHECK_INDEX=0): out of range writes nothing; the host's data is checked instead
      const bad = new Tensor([3, -1, 0, 7, -3], { device });
      expect(data(z.scatter(0, bad.contiguous(), src))).toEqual([3, 0, 0]);
      expect(() => z.scatter(0, bad, src)).toThrow('scatter: index 3 at position [0]');
      const m = Tensor.zeros([2, 2], { device });
      const idx = new Tensor(
        [
          [1, 1],
          [1, 0],
          [1, 1],
        ],
        { device },
      );
      const vals = new Tensor(
        [
          [1, 2],
          [3, 4],
          [5, 6],
        ],
        { device },
      ).float();
      expect(m.scatter(0, idx, vals).tolist()).toEqual([
        [0, 4],
        [5, 6],
      ]);
      // a float scalar into ints takes the tensor's dtype (truncated)
      const n = new Tensor([1, 2, 3], { device }).scatter(0, new Tensor([2], { device }), 2.7);
      expect([n.dtype, n.tolist()]).toEqual([dtypes.int32, [1, 2, 2]]);
      // an empty index writes nothing
      expect(data(z.scatter(0, new Tensor(new Int32Array(0), { device }), src))).toEqual([0, 0, 0]);
    });

    it('scatterReduce: every reduce, with and without self, floats and ints', () => {
      const reduces: Reduce[] = ['sum', 'prod', 'mean', 'amax', 'amin'];
      for (const reduce of reduces)
        for (const includeSelf of [true, false]) {
          const self = F([3, 4], 30);
          const index = I([5, 3], 31, 0, 3);
          const src = F([5, 4], 32);
          const out = self.scatterReduce(0, index, src, reduce, { includeSelf });
          close(data(out), scatterRef(nd(self), 0, nd(index), nd(src), reduce, includeSelf), 1e-5);
          const si = I([4, 3], 33, -9, 9);
          const ii = I([4, 5], 34, 0, 3).flip(1); // non-contiguous index; some positions stay unhit
          const srci = I([4, 5], 35, -9, 9);
          const outi = si.scatterReduce(-1, ii.get([], [0, 3]), srci, reduce, { includeSelf });
          expect(outi.dtype, reduce).toBe(dtypes.int32);
          expect(data(outi), `${reduce} includeSelf=${includeSelf}`).toEqual(
            scatterRef(nd(si), 1, nd(ii.get([], [0, 3])), nd(srci), reduce, includeSelf, true),
          );
        }
      // positions no index hits keep self, whichever reduce
      const ones = Tensor.ones([4], { device });
      const hit = new Tensor([2, 2], { device });
      const two = new Tensor([3, 5], { device }).float();
      expect(data(ones.scatterReduce(0, hit, two, 'mean', { includeSelf: false }))).toEqual([1, 1, 4, 1]);
      expect(data(ones.scatterReduce(0, hit, two, 'mean'))).toEqual([1, 1, 3, 1]);
      expect(data(ones.scatterReduce(0, hit, two, 'prod', { includeSelf: false }))).toEqual([1, 1, 15, 1]);
      expect(data(ones.scatterReduce(0, hit, 2, 'sum'))).toEqual([1, 1, 5, 1]);
    });

    it('scatter and scatterReduce errors', () => {
      const x = F([3, 4], 1);
      const idx = I([2, 4], 2, 0, 3);
      expect(() => x.scatter(2, idx, 0)).toThrow(
        'scatter: dim 2 is out of range for shape (3, 4); valid dims are -2..1',
      );
      expect(() => x.scatter(0, F([2, 4], 1), 0)).toThrow(
        'scatter: the index must have an integer dtype, got float32',
      );
      expect(() => x.scatter(0, I([2], 1, 0, 3), 0)).toThrow(
        'scatter: index shape (2) needs the 2 dims of the tensor (3, 4), each no larger except along dim 0',
      );
      expect(() => x.scatter(0, I([2, 5], 1, 0, 3), 0)).toThrow(
        'scatter: index shape (2, 5) needs the 2 dims',
      );
      expect(() => x.scatter(0, idx, F([1, 4], 3))).toThrow(
        'scatter: src shape (1, 4) must have the 2 dims of the index (2, 4), each at least as large',
      );
      expect(() => x.scatterReduce(0, idx, x, 'max' as 'amax')).toThrow(
        "scatterReduce: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got 'max'",
      );
    });

    it('maskedSelect: broadcasting, all false, non-contiguous', () => {
      const x = F([4, 3], 40).transpose(); // (3, 4)
      const mask = B([4], 41);
      const m = data(mask);
      const out = x.maskedSelect(mask);
      expect(out.ndim).toBe(1);
      close(
        data(out),
        data(x).filter((_, i) => m[i % 4]),
      );
      // the mask broadcasts against the tensor: a (2, 1, 4) mask over (3, 4) selects from (2, 3, 4)
      const big = B([2, 1, 4], 42);
      const b = data(big);
      const xs = data(x);
      const want: number[] = [];
      for (let i = 0; i < 2; i++) for (let j = 0; j < 12; j++) if (b[i * 4 + (j % 4)]) want.push(xs[j]!);
      close(data(x.maskedSelect(big)), want);
      const none = x.maskedSelect(Tensor.zeros([3, 4], { device }).cast(dtypes.bool));
      expect([none.shape, none.dtype]).toEqual([[0], dtypes.float32]);
      const n = I([5], 43, -5, 5);
      expect(data(n.maskedSelect(n.gt(0)))).toEqual(data(n).filter((v) => v > 0));
      expect(() => x.maskedSelect(x)).toThrow('maskedSelect: the mask must have dtype bool, got float32');
    });

    it('nonzero: (count, ndim) int32 indices in row-major order', () => {
      const t = I([3, 4], 50, -1, 2);
      const v = data(t);
      const out = t.nonzero();
      expect(out.dtype).toBe(dtypes.int32);
      expect(out.tolist()).toEqual(v.flatMap((x, i) => (x ? [unravel(i, [3, 4])] : [])));
      expect(new Tensor([0, Number.NaN, -0, 2], { device }).nonzero().tolist()).toEqual([[1], [3]]);
      expect(
        new Tensor(
          [
            [true, false],
            [false, true],
          ],
          { device },
        )
          .permute([1, 0])
          .nonzero()
          .tolist(),
      ).toEqual([
        [0, 0],
        [1, 1],
      ]);
      expect(Tensor.zeros([2, 3], { device }).nonzero().shape).toEqual([0, 2]);
      expect(new Tensor(5, { device }).nonzero().shape).toEqual([1, 0]);
      expect(Tensor.zeros([0, 3], { device }).nonzero().shape).toEqual([0, 2]);
    });
  });

describe('scatter op gradients (float64, central differences)', { timeout: 120_000 }, () => {
  const idx = new Tensor(
    [
      [2, 0, 1, 0],
      [1, 1, 2, 2],
      [0, 2, 2, 1],
    ],
    { device: 'JS' },
  );
  it('maskedFill, scatter and maskedSelect', () => {
    const mask = new Tensor([true, false, true, false], { device: 'JS' });
    checkGradient('maskedFill', [[3, 4]], (x) => x.maskedFill(mask, 2));
    checkGradient(
      'scatter (self and src)',
      [
        [3, 4],
        [3, 5],
      ],
      (x, s) => x.scatter(0, idx, s),
    );
    checkGradient('scatter of a scalar', [[3, 4]], (x) => x.scatter(1, idx.get([0, 2]), 1.5));
    checkGradient('maskedSelect', [[3, 4]], (x) => x.maskedSelect(mask));
  });
  it('scatterReduce, every reduce, with and without self', () => {
    for (const reduce of ['sum', 'mean', 'prod', 'amax', 'amin'] as const)
      for (const includeSelf of [true, false])
        checkGradient(
          `scatterReduce ${reduce} includeSelf=${includeSelf}`,
          [
            [3, 4],
            [3, 4],
          ],
          (x, s) => x.scatterReduce(0, idx, s, reduce, { includeSelf }),
        );
  });
});
