// Creation ops (empty, linspace, eye, *Like) on JS and CPU against plain-JS references.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

const data = (t: Tensor) => Array.from(t.dataSync(), Number);

/** numpy's linspace in float64, the value float32 should round near to. */
const linspaceRef = (start: number, stop: number, n: number) =>
  Array.from({ length: n }, (_, i) => (n === 1 ? start : start + ((stop - start) * i) / (n - 1)));

const eyeRef = (n: number, m: number) =>
  Array.from({ length: n }, (_, i) => Array.from({ length: m }, (_, j) => (i === j ? 1 : 0)));

for (const device of DEVICES)
  describe(`creation on ${device}`, () => {
    it('empty allocates without a kernel, in any dtype and shape', () => {
      const t = Tensor.empty([2, 3], { device, dtype: dtypes.int32 });
      expect([t.shape, t.dtype, t.device]).toEqual([[2, 3], dtypes.int32, device]);
      expect(scheduleOf([t]).kernels.length).toBe(0);
      expect(t.dataSync().length).toBe(6);
      expect(Tensor.empty([4], { device }).dtype).toBe(dtypes.float32);
      const z = Tensor.empty([0, 5], { device });
      expect([z.shape, z.dataSync().length]).toEqual([[0, 5], 0]);
      // contents are unspecified but usable: ops on an empty tensor run
      expect(Tensor.empty([3], { device }).mul(0).tolist()).toEqual([0, 0, 0]);
    });

    it('linspace: evenly spaced, both endpoints exact, either direction', () => {
      for (const [start, stop, n] of [
        [0, 1, 5],
        [-3, 7.5, 11],
        [2, -2, 4],
        [0.1, 0.7, 7],
        [0, 1, 1001],
      ] as const) {
        const got = data(Tensor.linspace(start, stop, n, { device }));
        const want = linspaceRef(start, stop, n);
        expect(got.length).toBe(n);
        got.forEach((g, i) => {
          expect(Math.abs(g - want[i]!)).toBeLessThanOrEqual(2e-7 * Math.max(1, Math.abs(want[i]!)));
        });
        expect([got[0], got[n - 1]]).toEqual([Math.fround(start), Math.fround(stop)]);
      }
    });

    it('linspace: one and zero steps, integer and float64 dtypes', () => {
      expect(Tensor.linspace(3, 9, 1, { device }).tolist()).toEqual([3]);
      const none = Tensor.linspace(3, 9, 0, { device });
      expect([none.shape, none.dtype]).toEqual([[0], dtypes.float32]);
      const ints = Tensor.linspace(0, 10, 6, { device, dtype: dtypes.int32 });
      expect([ints.dtype, ints.tolist()]).toEqual([dtypes.int32, [0, 2, 4, 6, 8, 10]]);
      const wide = Tensor.linspace(0, 1, 4, { device, dtype: dtypes.float64 });
      // the second half counts back from stop
      expect(data(wide)).toEqual([0, 1 / 3, 1 - 1 / 3, 1]);
    });

    it('eye: square and rectangular, any dtype', () => {
      expect(Tensor.eye(3, undefined, { device }).tolist()).toEqual(eyeRef(3, 3));
      expect(Tensor.eye(2, 4, { device }).tolist()).toEqual(eyeRef(2, 4));
      expect(Tensor.eye(4, 2, { device }).tolist()).toEqual(eyeRef(4, 2));
      expect(Tensor.eye(1, undefined, { device }).tolist()).toEqual([[1]]);
      const b = Tensor.eye(3, 3, { device, dtype: dtypes.bool });
      expect([b.dtype, b.tolist()]).toEqual([dtypes.bool, eyeRef(3, 3).map((r) => r.map(Boolean))]);
      expect(Tensor.eye(2, 2, { device, dtype: dtypes.int32 }).dtype).toBe(dtypes.int32);
      // movement ops only: one kernel, and it fuses into a consumer
      expect(scheduleOf([Tensor.eye(5, 3, { device }).mul(2)]).kernels.length).toBe(1);
    });

    it('eye: zero sizes', () => {
      expect(Tensor.eye(0, undefined, { device }).shape).toEqual([0, 0]);
      const t = Tensor.eye(0, 3, { device });
      expect([t.shape, t.dataSync().length]).toEqual([[0, 3], 0]);
      expect(Tensor.eye(2, 0, { device }).shape).toEqual([2, 0]);
    });

    it('zerosLike, onesLike, fullLike take shape, dtype and device from the tensor', () => {
      const x = new Tensor(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        { device },
      );
      const z = Tensor.zerosLike(x);
      expect([z.shape, z.dtype, z.device, z.tolist()]).toEqual([
        [2, 3],
        dtypes.int32,
        device,
        [
          [0, 0, 0],
          [0, 0, 0],
        ],
      ]);
      expect(Tensor.onesLike(x).tolist()).toEqual([
        [1, 1, 1],
        [1, 1, 1],
      ]);
      expect(Tensor.fullLike(x, 7).tolist()).toEqual([
        [7, 7, 7],
        [7, 7, 7],
      ]);
      const f = Tensor.fullLike(x, 2.5, { dtype: dtypes.float32 });
      expect([f.dtype, data(f)]).toEqual([dtypes.float32, [2.5, 2.5, 2.5, 2.5, 2.5, 2.5]]);
      expect(Tensor.onesLike(Tensor.empty([0, 2], { device })).shape).toEqual([0, 2]);
    });
  });

describe('creation errors', () => {
  it('name the op and what is valid', () => {
    expect(() => Tensor.empty([2, -1])).toThrow(/Tensor.empty: shape \(2, -1\)/);
    expect(() => Tensor.linspace(0, 1, 2.5)).toThrow(/Tensor.linspace: steps must be a non-negative integer/);
    expect(() => Tensor.eye(-1)).toThrow(/Tensor.eye: n must be a non-negative integer/);
    expect(() => Tensor.eye(2, 1.5)).toThrow(/Tensor.eye: m must be/);
  });
});

describe('dtypes by name', () => {
  it('every op that takes a dtype takes its name too', () => {
    const device = 'JS';
    expect(new Tensor([1, 2], { device, dtype: 'int64' }).dtype).toBe(dtypes.int64);
    expect(Tensor.zeros([2], { device, dtype: 'float16' }).dtype).toBe(dtypes.float16);
    // an explicit undefined is no dtype given: zeros and ones stay float32
    expect(Tensor.ones([2], { device, dtype: undefined }).dtype).toBe(dtypes.float32);
    expect(Tensor.zerosLike(Tensor.ones([2], { device, dtype: 'int8' }), { dtype: undefined }).dtype).toBe(
      dtypes.int8,
    );
    expect(Tensor.full([2], 3, { device, dtype: 'uint8' }).tolist()).toEqual([3, 3]);
    expect(Tensor.arange(3, undefined, 1, { device, dtype: 'float64' }).dtype).toBe(dtypes.float64);
    expect(Tensor.empty([2], { device, dtype: 'int16' }).dtype).toBe(dtypes.int16);
    expect(Tensor.linspace(0, 1, 3, { device, dtype: 'float64' }).tolist()).toEqual([0, 0.5, 1]);
    expect(Tensor.eye(2, 2, { device, dtype: 'bool' }).dtype).toBe(dtypes.bool);
    expect(Tensor.rand([2], { device, dtype: 'float64' }).dtype).toBe(dtypes.float64);
    expect(Tensor.randint([2], 0, 5, { device, dtype: 'int8' }).dtype).toBe(dtypes.int8);
    const x = new Tensor([1.5, -2], { device });
    expect(x.cast('int32').tolist()).toEqual([1, -2]);
    expect(x.bitcast('uint32').tolist()).toEqual([0x3fc00000, 0xc0000000]);
  });

  it('an unknown name throws, naming the op and the valid names', () => {
    const x = new Tensor([1], { device: 'JS' });
    expect(() => x.cast('flaot32' as 'float32')).toThrow(
      /^cast: unknown dtype 'flaot32'; give a DType or one of bool, int8, .*float32, float64$/,
    );
    // index and void are the compiler's, not values a tensor holds
    expect(() => new Tensor([1], { dtype: 'index' as 'int64' })).toThrow(/^Tensor: unknown dtype 'index'/);
    expect(() => x.bitcast(7 as unknown as 'int32')).toThrow(/^bitcast: unknown dtype 7;/);
  });
});
