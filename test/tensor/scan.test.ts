// Scans (cumprod, cummax, cummin, logcumsumexp) on JS and CPU against plain-JS references, and their gradients.
import { describe, expect, it } from 'vitest';
import { type DType, dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { blockedScan, SCANS } from '../../src/tensor/scan.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { close, data, mapRef, values } from './reference.ts';

// --- plain-JS references: one slice along the axis in, the scanned slice out ---------------------------

const cumprodRef = (v: number[]) => {
  let p = 1;
  return v.map((x) => (p *= x));
};
/** torch's rule: a value at least as large as the running maximum (or any NaN) takes over, with its index. */
function cumExtremeRef(v: number[], better: (x: number, best: number) => boolean): [number[], number[]] {
  const vals: number[] = [];
  const idx: number[] = [];
  let best = v[0]!;
  let at = 0;
  v.forEach((x, i) => {
    if (i === 0 || Number.isNaN(x) || (!Number.isNaN(best) && better(x, best))) [best, at] = [x, i];
    vals.push(best);
    idx.push(at);
  });
  return [vals, idx];
}
const cummaxRef = (v: number[]) => cumExtremeRef(v, (x, best) => x >= best);
const cumminRef = (v: number[]) => cumExtremeRef(v, (x, best) => x <= best);
/** In float64, each prefix shifted by its maximum. */
const logcumsumexpRef = (v: number[]) =>
  v.map((_, i) => {
    const pre = v.slice(0, i + 1);
    const m = Math.max(...pre);
    if (!Number.isFinite(m)) return m;
    return m + Math.log(pre.reduce((s, x) => s + Math.exp(x - m), 0));
  });

/** The reference over every slice of (xs, shape) along axis; a 0-d input is one element. */
const along = (xs: number[], shape: number[], axis: number, f: (v: number[]) => number[]) =>
  shape.length === 0 ? f(xs) : mapRef(xs, shape, axis, f);

// kernels compile on first use (gcc on CPU); a cold cache on a busy machine takes seconds
for (const device of DEVICES)
  describe(`scans on ${device}`, () => {
    const T = (xs: number[], shape: number[], dtype: DType = dtypes.float32) =>
      new Tensor(xs, { device, dtype }).reshape(shape);

    it('cumprod along every axis, negative axes, 0-d and size-1 axes', () => {
      const shape = [2, 3, 4];
      const xs = values(24, 1).map((v) => Math.fround(v / 2 + 0.5));
      const x = T(xs, shape);
      for (const axis of [0, 1, 2, -1, -3])
        close(data(x.cumprod(axis)), along(xs, shape, axis, cumprodRef), 1e-5);
      expect(x.cumprod().shape).toEqual(shape);
      close(data(T([2.5], []).cumprod()), [2.5]);
      expect(T([2.5], []).cumprod(-1).shape).toEqual([]);
      close(data(T(xs.slice(0, 4), [4, 1]).cumprod(1)), xs.slice(0, 4));
    });

    it('cumprod with zeros is exact: a zero in the prefix gives 0, never NaN', () => {
      const xs = [2, 0, 3, Infinity, 4, -1, 0.5, 0, 0, 3];
      const got = data(T(xs, [2, 5]).cumprod(1));
      // 0 * inf is NaN in IEEE and in torch too: only the row without an infinity after its zero is checked
      expect(got.slice(0, 3)).toEqual([2, 0, 0]);
      expect(got.slice(5)).toEqual([-1, -0.5, -0, -0, -0]);
      const big = Math.fround(1e30);
      expect(data(T([big, big, 0, 5], [4]).cumprod())).toEqual([big, Infinity, NaN, NaN]);
      expect(data(T([0, big, big, 5], [4]).cumprod())).toEqual([0, 0, 0, 0]);
    });

    it('cumprod of ints and bools stays exact in int32', () => {
      const xs = values(12, 2, true);
      const got = T(xs, [3, 4], dtypes.int32).cumprod(1);
      expect(got.dtype).toBe(dtypes.int32);
      expect(data(got)).toEqual(mapRef(xs, [3, 4], 1, cumprodRef));
      const b = new Tensor([true, true, false, true], { device }).cumprod();
      expect(b.dtype).toBe(dtypes.int32);
      expect(data(b)).toEqual([1, 1, 0, 0]);
    });

    it('cummax and cummin: values and the indices where the extreme was last reached', () => {
      const shape = [3, 5];
      const ints = values(15, 3, true); // repeats: ties
      for (const [dtype, xs] of [
        [dtypes.float32, values(15, 4)],
        [dtypes.float32, ints],
        [dtypes.int32, ints],
      ] as const)
        for (const axis of [0, 1, -1]) {
          const x = T(xs, shape, dtype);
          const [mv, mi] = x.cummax(axis);
          const [nv, ni] = x.cummin(axis);
          expect(mv.dtype).toBe(dtype);
          expect(mi.dtype).toBe(dtypes.int32);
          const pick = (f: (v: number[]) => [number[], number[]], k: 0 | 1) =>
            along(xs, shape, axis, (v) => f(v)[k]);
          expect(data(mv)).toEqual(pick(cummaxRef, 0));
          expect(data(mi)).toEqual(pick(cummaxRef, 1));
          expect(data(nv)).toEqual(pick(cumminRef, 0));
          expect(data(ni)).toEqual(pick(cumminRef, 1));
        }
    });

    it('cummax and cummin: ties move the index (as in PyTorch), NaN wins, infinities and narrow dtypes', () => {
      const [v, i] = T([1, 3, 3, 2, 3], [5]).cummax();
      expect([data(v), data(i)]).toEqual([
        [1, 3, 3, 3, 3],
        [0, 1, 2, 2, 4],
      ]);
      const nan = [1, NaN, 3, NaN, -Infinity];
      const [nv, ni] = T(nan, [5]).cummax();
      expect(data(ni)).toEqual([0, 1, 1, 3, 3]);
      close(data(nv), cummaxRef(nan)[0]);
      const [mv, mi] = T(nan, [5]).cummin();
      expect(data(mi)).toEqual([0, 1, 1, 3, 3]);
      close(data(mv), cumminRef(nan)[0]);
      const inf = [-Infinity, -Infinity, 2, Infinity];
      expect(data(T(inf, [4]).cummax()[0])).toEqual([-Infinity, -Infinity, 2, Infinity]);
      expect(data(T(inf, [4]).cummax()[1])).toEqual([0, 1, 2, 3]);
      // the extremes of the dtype: the window's padding must not win
      const u8 = [200, 0, 255, 7];
      expect(data(T(u8, [4], dtypes.uint8).cummin()[0])).toEqual([200, 0, 0, 0]);
      expect(data(T(u8, [4], dtypes.uint8).cummax()[0])).toEqual([200, 200, 255, 255]);
      const i8 = [-128, 5, -128, 127];
      expect(data(T(i8, [4], dtypes.int8).cummax()[1])).toEqual([0, 1, 1, 3]);
      expect(data(T(i8, [4], dtypes.int8).cummin()[1])).toEqual([0, 0, 2, 2]);
      const b = new Tensor([false, true, false, true], { device });
      expect(b.cummax()[0].tolist()).toEqual([false, true, true, true]);
      expect(data(b.cummax()[1])).toEqual([0, 1, 1, 3]);
      expect(b.cummin()[0].tolist()).toEqual([false, false, false, false]);
      expect(data(b.cummin()[1])).toEqual([0, 0, 2, 2]);
    });

    it('logcumsumexp is stable for large and widely spread inputs', () => {
      const shape = [2, 3, 4];
      const xs = values(24, 5);
      const x = T(xs, shape);
      for (const axis of [0, 1, 2, -2])
        close(data(x.logcumsumexp(axis)), along(xs, shape, axis, logcumsumexpRef));
      const big = [1000, 1000, -1000, 2000, -3000];
      close(data(T(big, [5]).logcumsumexp()), logcumsumexpRef(big));
      // shifting by the whole axis's maximum would make these -inf: exp(-1000 - 1000) underflows
      const spread = [-1000, -999, 1000];
      close(data(T(spread, [3]).logcumsumexp()), logcumsumexpRef(spread));
      expect(data(T(spread, [3]).logcumsumexp())[0]).toBe(-1000);
      expect(data(T([-Infinity, -Infinity, 0, Infinity], [4]).logcumsumexp())).toEqual([
        -Infinity,
        -Infinity,
        0,
        Infinity,
      ]);
      const ints = T([0, 1, 2], [3], dtypes.int32).logcumsumexp();
      expect(ints.dtype).toBe(dtypes.float32);
      close(data(ints), logcumsumexpRef([0, 1, 2]));
      close(data(T([0.5], []).logcumsumexp()), [0.5]);
    });

    it('non-contiguous inputs: permuted, flipped and strided', () => {
      const base = values(24, 6);
      const x = T(base, [2, 3, 4]).permute(2, 0, 1); // (4, 2, 3)
      const ref = Array.from({ length: 24 }, (_, f) => {
        const [i, j, k] = [Math.floor(f / 6), Math.floor(f / 3) % 2, f % 3];
        return base[j * 12 + k * 4 + i]!;
      });
      close(data(x.cumprod(0)), mapRef(ref, [4, 2, 3], 0, cumprodRef));
      expect(data(x.cummax(1)[1])).toEqual(mapRef(ref, [4, 2, 3], 1, (v) => cummaxRef(v)[1]));
      close(data(x.logcumsumexp(-1)), mapRef(ref, [4, 2, 3], 2, logcumsumexpRef));
      const row = values(10, 7);
      const strided = T(row, [10]).get([null, null, -3]); // 9, 6, 3, 0
      const picked = [9, 6, 3, 0].map((k) => row[k]!);
      expect(data(strided.cummin()[0])).toEqual(cumminRef(picked)[0]);
      close(data(strided.cumprod()), cumprodRef(picked));
    });

    it('empty axes come back as they are, others scan around them', () => {
      const empty = Tensor.zeros([2, 0, 3], { device });
      for (const axis of [0, 1, 2]) {
        expect(empty.cumprod(axis).shape).toEqual([2, 0, 3]);
        expect(empty.logcumsumexp(axis).shape).toEqual([2, 0, 3]);
        const [v, i] = empty.cummax(axis);
        expect([v.shape, i.shape, i.dtype]).toEqual([[2, 0, 3], [2, 0, 3], dtypes.int32]);
        expect(empty.cummin(axis)[0].shape).toEqual([2, 0, 3]);
      }
    });

    it('long axes scan in blocks: the public path past 512 and small blocks', () => {
      const n = 600;
      const xs = values(n, 8).map((v) => Math.fround(1 + v / 400));
      const x = T(xs, [n]);
      close(data(x.cumprod()), cumprodRef(xs), 1e-4);
      expect(data(x.cummax()[0])).toEqual(cummaxRef(xs)[0]);
      expect(data(x.cummin()[1])).toEqual(cumminRef(xs)[1]);
      close(data(x.logcumsumexp()), logcumsumexpRef(xs), 1e-5);
      // blocks of 4 over 2 x 13 (padded to 16), and a block count that itself needs blocks (50 of 2)
      const ys = values(26, 9);
      const y = T(ys, [2, 13]);
      close(data(blockedScan(y, SCANS.prod, 4)), mapRef(ys, [2, 13], 1, cumprodRef));
      expect(data(blockedScan(y, SCANS.max, 4))).toEqual(mapRef(ys, [2, 13], 1, (v) => cummaxRef(v)[0]));
      close(data(blockedScan(y, SCANS.logsumexp, 4)), mapRef(ys, [2, 13], 1, logcumsumexpRef));
      const zs = values(100, 10);
      close(data(blockedScan(T(zs, [100]), SCANS.logsumexp, 2)), logcumsumexpRef(zs));
      // a NaN in an earlier block reaches every later one
      const nan = [1, NaN, 3, 2, 5, 1, 7];
      close(data(blockedScan(T(nan, [7]), SCANS.max, 2)), cummaxRef(nan)[0]);
      const wide = values(n, 12).map((v, i) => (i === 300 ? NaN : v));
      expect(data(x.add(T(wide, [n])).cummax()[1])).toEqual(
        cummaxRef(xs.map((v, i) => Math.fround(v + wide[i]!)))[1],
      );
      const ints = values(13, 11, true);
      expect(data(blockedScan(T(ints, [13], dtypes.int32), SCANS.max, 4))).toEqual(cummaxRef(ints)[0]);
    });

    it('a bad axis names the op, the shape and the valid axes', () => {
      const x = T(values(6, 12), [2, 3]);
      expect(() => x.cumprod(2)).toThrow(
        'cumprod: dim 2 is out of range for shape (2, 3); valid dims are -2..1',
      );
      expect(() => x.cummax(-3)).toThrow(
        'cummax: dim -3 is out of range for shape (2, 3); valid dims are -2..1',
      );
      expect(() => x.cummin(1.5)).toThrow('cummin: dim 1.5 is out of range for shape (2, 3)');
      expect(() => x.logcumsumexp(5)).toThrow('logcumsumexp: dim 5 is out of range for shape (2, 3)');
      expect(() => T([1], []).cummax(1)).toThrow(
        'cummax: dim 1 is out of range for shape (); valid dims are -1..0',
      );
    });
  });

// --- gradients against central differences in float64 --------------------------------------------------

/** The shared central-difference check (gradcheck.ts) for one input, optionally with given values. */
const gradCheck = (
  name: string,
  shape: number[],
  f: (x: Tensor) => Tensor,
  inputs?: number[],
  device = 'JS',
) => checkGradient(name, [shape], f, device, inputs && [inputs]);

describe('scan gradients (central differences, float64)', () => {
  it('cumprod, with and without zeros', () => {
    gradCheck('cumprod', [3, 4], (x) => x.cumprod(1).add(x.cumprod(0)));
    // one zero and two zeros in a prefix: the product of the others, and 0
    gradCheck('cumprod with zeros', [2, 4], (x) => x.cumprod(-1), [1.5, 0, -0.7, 2, 0, 1.2, 0, -1.1]);
  });
  it('cummax and cummin values', () => {
    gradCheck('cummax', [3, 4], (x) => x.cummax(1)[0].add(x.cummax(0)[0].square()));
    gradCheck('cummin', [3, 4], (x) => x.cummin(-1)[0].mul(x.cummin(0)[0]));
  });
  it('logcumsumexp', () => {
    gradCheck('logcumsumexp', [3, 4], (x) => x.logcumsumexp(1).add(x.logcumsumexp(0)));
    gradCheck('logcumsumexp, large', [5], (x) => x.logcumsumexp(), [800, 801, -5, 799, 802]);
  });
  it('blocked scans', () => {
    gradCheck('blocked cumprod', [2, 7], (x) => blockedScan(x, SCANS.prod, 3));
    gradCheck('blocked cummax', [9], (x) => blockedScan(x, SCANS.max, 2));
    gradCheck('blocked logcumsumexp', [2, 7], (x) => blockedScan(x, SCANS.logsumexp, 3));
  });
  it('on the CPU device too', () => {
    gradCheck(
      'cumprod and logcumsumexp on CPU',
      [2, 3],
      (x) => x.cumprod(1).add(x.logcumsumexp(0)),
      undefined,
      'CPU',
    );
  });
});
