// dtype conveniences: long/double/short/bfloat16 casts, isFloatingPoint, elementSize, nbytes, emptyLike.
import { describe, expect, it } from 'vitest';
import { type DType, dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

const VALUE_DTYPES: DType[] = Object.values(dtypes).filter((d) => d !== dtypes.void && d !== dtypes.index);

/** int16 wrap-around of an integer, by arithmetic: the reference for short() of ints. */
const wrap16 = (x: number) => ((((x + 32768) % 65536) + 65536) % 65536) - 32768;

/** bfloat16 of a float32 by its bits: round to nearest even on the low 16 bits. */
function bf16Ref(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  const bits = u[0]!;
  u[0] = ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) << 16;
  return f[0]!;
}

const F32 = [-2.75, -1.5, -0.5, 0, 0.25, 1.9999, 3.5, 1234.567, -65504.5, 1e-3];

for (const device of DEVICES)
  describe(`dtype casts on ${device}`, () => {
    it('long() truncates floats toward zero into int64, keeps ints and bools', () => {
      const x = new Tensor(F32, { device });
      const l = x.long();
      expect(l.dtype).toBe(dtypes.int64);
      expect(l.tolist()).toEqual(F32.map((v) => Math.trunc(Math.fround(v)) || 0));
      const big = new Tensor([4294967295, 0, 7], { device, dtype: dtypes.uint32 }).long();
      expect(big.tolist()).toEqual([4294967295, 0, 7]);
      expect(new Tensor([true, false], { device }).long().tolist()).toEqual([1, 0]);
    });

    it('double() is exact from float32 and int32', () => {
      const d = new Tensor(F32, { device }).double();
      expect(d.dtype).toBe(dtypes.float64);
      expect(d.tolist()).toEqual(F32.map(Math.fround));
      const ints = [-2147483648, -1, 0, 2147483647];
      expect(new Tensor(ints, { device, dtype: dtypes.int32 }).double().tolist()).toEqual(ints);
    });

    it('short() wraps ints into int16 and truncates in-range floats', () => {
      const ints = [-40000, -32769, -32768, -1, 0, 32767, 32768, 40000, 100000];
      const s = new Tensor(ints, { device, dtype: dtypes.int32 }).short();
      expect(s.dtype).toBe(dtypes.int16);
      expect(s.tolist()).toEqual(ints.map(wrap16));
      const f = [-3.7, -0.2, 0, 2.9, 32767.5];
      expect(new Tensor(f, { device }).short().tolist()).toEqual(f.map((v) => Math.trunc(v) || 0));
    });

    it('bfloat16() rounds float32 to nearest even, on a non-contiguous input', () => {
      // odd bit patterns, ties included: 1 + 2^-8 is halfway between two bfloat16 values
      const vals = [...F32, 1 + 2 ** -8, 1 + 3 * 2 ** -8, Math.PI, -1e30, 2 ** -130];
      const x = new Tensor(vals, { device }).reshape([3, 5]).permute([1, 0]); // a transposed view
      const b = x.bfloat16();
      expect(b.dtype).toBe(dtypes.bfloat16);
      const want = Array.from({ length: 15 }, (_, i) => bf16Ref(vals[(i % 3) * 5 + Math.floor(i / 3)]!));
      expect((b.float().tolist() as number[][]).flat()).toEqual(want);
    });

    it('casts keep the shape of size-1 and zero-size tensors', () => {
      for (const f of ['long', 'double', 'short', 'bfloat16'] as const) {
        expect(Tensor.zeros([0, 3], { device })[f]().shape).toEqual([0, 3]);
        expect(new Tensor([[2.5]], { device })[f]().shape).toEqual([1, 1]);
      }
    });

    it('a cast to the dtype a tensor already has is the tensor itself', () => {
      const l = new Tensor([1, 2], { device, dtype: dtypes.int64 });
      expect(l.long()).toBe(l);
      const d = new Tensor([1, 2], { device, dtype: dtypes.float64 });
      expect(d.double()).toBe(d);
    });
  });

describe('dtype cast gradients', () => {
  it('double() passes the gradient back in the input dtype', () => {
    const x = new Tensor([0.5, -1.25, 3], { device: 'JS', requiresGrad: true });
    const w = new Tensor([0.1, 2, -3], { device: 'JS', dtype: dtypes.float64 });
    const [g] = Tensor.gradient(x.double().mul(w).sum(), [x]);
    expect(g!.dtype).toBe(dtypes.float32);
    expect(g!.tolist()).toEqual([0.1, 2, -3].map(Math.fround));
  });

  it('bfloat16() passes the gradient back, rounded through bfloat16', () => {
    const x = new Tensor([0.5, -1.25, 3], { device: 'JS', requiresGrad: true });
    const w = new Tensor([0.1, 2, -3], { device: 'JS', dtype: dtypes.bfloat16 });
    const [g] = Tensor.gradient(x.bfloat16().mul(w).sum(), [x]);
    expect(g!.dtype).toBe(dtypes.float32);
    expect(g!.tolist()).toEqual([0.1, 2, -3].map(bf16Ref));
  });

  it('double() of x * x matches central differences in float64', () => {
    const xs = [0.3, -1.7, 2.2];
    const x = new Tensor(new Float64Array(xs), { device: 'JS', requiresGrad: true });
    const loss = (t: Tensor) => t.mul(t).double().sum();
    const [g] = Tensor.gradient(loss(x), [x]);
    const h = 1e-6;
    const numeric = xs.map((_, i) => {
      const at = (d: number) =>
        Number(
          loss(
            new Tensor(new Float64Array(xs.map((v, j) => (j === i ? v + d : v))), { device: 'JS' }),
          ).item(),
        );
      return (at(h) - at(-h)) / (2 * h);
    });
    (g!.tolist() as number[]).forEach((v, i) => {
      expect(Math.abs(v - numeric[i]!)).toBeLessThan(1e-6);
    });
  });
});

describe('dtype queries', () => {
  it('isFloatingPoint and elementSize for every dtype', () => {
    const sizes: Record<string, number> = {
      bool: 1,
      int8: 1,
      uint8: 1,
      int16: 2,
      uint16: 2,
      float16: 2,
      bfloat16: 2,
      int32: 4,
      uint32: 4,
      float32: 4,
      int64: 8,
      uint64: 8,
      float64: 8,
    };
    const floats = ['float16', 'bfloat16', 'float32', 'float64'];
    expect(VALUE_DTYPES.map((d) => d.name).sort()).toEqual(Object.keys(sizes).sort());
    for (const d of VALUE_DTYPES) {
      const t = Tensor.zeros([2], { dtype: d, device: 'JS' });
      expect(t.isFloatingPoint(), d.name).toBe(floats.includes(d.name));
      expect(t.elementSize(), d.name).toBe(sizes[d.name]);
    }
  });

  it('nbytes is a property: numel * elementSize, 0 for a zero-size tensor, the same for a view', () => {
    const t = Tensor.zeros([2, 3], { dtype: dtypes.int64, device: 'JS' });
    expect(t.nbytes).toBe(48);
    expect(t.permute([1, 0]).nbytes).toBe(48);
    expect(t.get([0, 1]).nbytes).toBe(24);
    expect(Tensor.zeros([0, 4], { dtype: dtypes.float16 }).nbytes).toBe(0);
    expect(new Tensor(true).nbytes).toBe(1);
    expect(Tensor.zeros([5], { dtype: 'bfloat16' }).nbytes).toBe(10);
    expect(typeof t.nbytes).toBe('number');
  });
});

for (const device of DEVICES)
  describe(`emptyLike on ${device}`, () => {
    it("takes t's shape, dtype and device without a kernel, and runs", () => {
      const t = new Tensor([1, 2, 3, 4, 5, 6], { device, dtype: dtypes.int16 })
        .reshape([2, 3])
        .permute([1, 0]);
      const e = Tensor.emptyLike(t);
      expect([e.shape, e.dtype, e.device]).toEqual([[3, 2], dtypes.int16, device]);
      expect(scheduleOf([e]).kernels.length).toBe(0);
      expect(e.mul(0).tolist()).toEqual([
        [0, 0],
        [0, 0],
        [0, 0],
      ]);
      expect(Tensor.emptyLike(Tensor.zeros([0, 2], { device })).shape).toEqual([0, 2]);
      expect(Tensor.emptyLike(new Tensor(2.5, { device })).shape).toEqual([]);
    });

    it('options override dtype (also by name) and device, and may ask for gradients', () => {
      const t = Tensor.zeros([2], { device });
      expect(Tensor.emptyLike(t, { dtype: 'uint8' }).dtype).toBe(dtypes.uint8);
      expect(Tensor.emptyLike(t, { dtype: dtypes.float64 }).dtype).toBe(dtypes.float64);
      expect(Tensor.emptyLike(t, { device: 'JS' }).device).toBe('JS');
      expect(Tensor.emptyLike(t, { dtype: undefined }).dtype).toBe(dtypes.float32);
      expect(Tensor.emptyLike(t, { requiresGrad: true }).requiresGrad).toBe(true);
    });
  });

describe('dtype method errors', () => {
  it('emptyLike names an unknown dtype and the valid ones', () => {
    const t = Tensor.zeros([2]);
    expect(() => Tensor.emptyLike(t, { dtype: 'float8' as 'float32' })).toThrow(
      /Tensor\.emptyLike: unknown dtype 'float8'; give a DType or one of bool, int8/,
    );
  });
  it('emptyLike needs a tensor', () => {
    expect(() => Tensor.emptyLike([1, 2] as unknown as Tensor)).toThrow(
      /Tensor\.emptyLike: needs a Tensor to take the shape of, got object/,
    );
  });
  it('emptyLike with gradients needs a float dtype', () => {
    expect(() => Tensor.emptyLike(Tensor.zeros([2]), { dtype: 'int32', requiresGrad: true })).toThrow(
      /requiresGrad: gradients need a float tensor, this one is int32/,
    );
  });
});

// --- type promotion beside tensors: JS scalars, sums ---------------------------------------------------

describe('promotion of JS scalars beside a tensor (pinned table)', () => {
  // row: the tensor's dtype; columns: + true, + 3, + 2.5, + 2 ** 40, + 5n. tinygrad's weak scalars, stored,
  // except that an integer the tensor's dtype cannot hold is an error (numpy 2, PyTorch), not a wrap
  const table: [string, string, string, string, string, string][] = [
    ['bool', 'bool', 'int32', 'float32', 'int64', 'int32'],
    ['int8', 'int8', 'int8', 'float32', 'error', 'int8'],
    ['int16', 'int16', 'int16', 'float32', 'error', 'int16'],
    ['int32', 'int32', 'int32', 'float32', 'error', 'int32'],
    ['int64', 'int64', 'int64', 'float32', 'int64', 'int64'],
    ['uint8', 'uint8', 'uint8', 'float32', 'error', 'uint8'],
    ['uint16', 'uint16', 'uint16', 'float32', 'error', 'uint16'],
    ['uint32', 'uint32', 'uint32', 'float32', 'error', 'uint32'],
    ['uint64', 'uint64', 'uint64', 'float32', 'uint64', 'uint64'],
    ['float16', 'float16', 'float16', 'float16', 'float16', 'float16'],
    ['bfloat16', 'bfloat16', 'bfloat16', 'bfloat16', 'bfloat16', 'bfloat16'],
    ['float32', 'float32', 'float32', 'float32', 'float32', 'float32'],
    ['float64', 'float64', 'float64', 'float64', 'float64', 'float64'],
  ];
  const scalars = [true, 3, 2.5, 2 ** 40, 5n] as const;
  it('add, in either order, and where', () => {
    expect(table.map((r) => r[0]).sort()).toEqual(VALUE_DTYPES.map((d) => d.name).sort());
    const dtypeOf = (f: () => Tensor) => {
      try {
        return f().dtype.name;
      } catch (e) {
        expect((e as Error).message).toMatch(/does not fit the tensor's dtype/);
        return 'error';
      }
    };
    const got = table.map(([name]) => {
      const t = Tensor.zeros([2], { dtype: name as 'int8', device: 'JS' });
      return [name, ...scalars.map((s) => dtypeOf(() => t.add(s)))];
    });
    expect(got).toEqual(table);
    for (const [name, ...want] of table) {
      const t = Tensor.zeros([2], { dtype: name as 'int8', device: 'JS' });
      const cond = new Tensor([true, false], { device: 'JS' });
      scalars.forEach((s, i) => {
        expect(
          dtypeOf(() => cond.where(t, s)),
          `${name} where ${s}`,
        ).toBe(want[i]);
        expect(
          dtypeOf(() => cond.where(s, t)),
          `${s} where ${name}`,
        ).toBe(want[i]);
      });
    }
  });

  it("two scalars in where take the JS values' default dtype", () => {
    const cond = new Tensor([true, false], { device: 'JS' });
    expect(cond.where(3.5, 3).dtype).toBe(dtypes.float32);
    expect(cond.where(3, true).dtype).toBe(dtypes.int32);
    expect(cond.where(false, true).dtype).toBe(dtypes.bool);
  });

  for (const device of DEVICES)
    it(`values on ${device}: bool + a big integer widens, ints + 2.5 go to float, small ints wrap`, () => {
      const b = new Tensor([true, false], { device });
      expect(b.add(2 ** 40).tolist()).toEqual([2 ** 40 + 1, 2 ** 40]);
      expect(b.add(3).tolist()).toEqual([4, 3]);
      expect(new Tensor([1, -2], { device, dtype: 'int64' }).add(2.5).tolist()).toEqual([3.5, 0.5]);
      expect(new Tensor([100, -100], { device, dtype: 'int8' }).add(100).tolist()).toEqual([-56, 0]);
      const s = new Tensor([-1, 2], { device, dtype: 'int64' }).add(
        new Tensor([3, 2 ** 40], { device, dtype: 'uint64' }),
      );
      expect([s.dtype, s.tolist()]).toEqual([dtypes.float32, [2, Math.fround(2 ** 40 + 2)]]);
    });
});

for (const device of DEVICES)
  describe(`sum accumulates as tinygrad's sum_acc_dtype on ${device}`, () => {
    it('small ints widen to int32/uint32 and do not overflow', () => {
      const i8 = new Tensor([100, 100, 100, -50], { device, dtype: 'int8' });
      expect([i8.sum().dtype, i8.sum().item()]).toEqual([dtypes.int32, 250]);
      const u8 = new Tensor([200, 200, 255], { device, dtype: 'uint8' });
      expect([u8.sum().dtype, u8.sum().item()]).toEqual([dtypes.uint32, 655]);
      const i16 = new Tensor([30000, 30000], { device, dtype: 'int16' });
      expect([i16.sum().dtype, i16.sum().item()]).toEqual([dtypes.int32, 60000]);
      const u16 = new Tensor([60000, 60000], { device, dtype: 'uint16' });
      expect([u16.sum().dtype, u16.sum().item()]).toEqual([dtypes.uint32, 120000]);
      const b = new Tensor([true, true, false], { device });
      expect([b.sum().dtype, b.sum().item()]).toEqual([dtypes.int32, 2]);
      expect(new Tensor([1, 2], { device, dtype: 'int64' }).sum().dtype).toBe(dtypes.int64);
      expect(new Tensor([1, 2], { device, dtype: 'uint64' }).sum().dtype).toBe(dtypes.uint64);
    });

    it('over axes of a non-contiguous int8 tensor, with keepdim, negative axes and zero-size axes', () => {
      const vals = [120, 120, -120, 7, 100, 27];
      const x = new Tensor(vals, { device, dtype: 'int8' }).reshape([2, 3]).permute([1, 0]); // (3, 2)
      expect(x.sum(-1).tolist()).toEqual([120 + 7, 120 + 100, -120 + 27]);
      expect(x.sum(0, true).tolist()).toEqual([[120 + 120 - 120, 7 + 100 + 27]]);
      const empty = Tensor.zeros([0, 3], { device, dtype: 'int8' }).sum(0);
      expect([empty.dtype, empty.tolist()]).toEqual([dtypes.int32, [0, 0, 0]]);
    });

    it('float16 and bfloat16 add up in float32 and come back in their dtype', () => {
      // in float16, 2048 + 1 rounds back to 2048; in float32 the eight ones all count
      const h = new Tensor([2048, 1, 1, 1, 1, 1, 1, 1, 1], { device, dtype: 'float16' });
      expect([h.sum().dtype, h.sum().item()]).toEqual([dtypes.float16, 2056]);
      const b = new Tensor([256, 1, 1, 1, 1], { device, dtype: 'bfloat16' });
      expect([b.sum().dtype, b.sum().item()]).toEqual([dtypes.bfloat16, 260]);
    });

    it("cumsum follows sum; mean gives float32 for ints; prod gives int64; matmul keeps its operands'", () => {
      const c = new Tensor([100, 100, 100], { device, dtype: 'int8' }).cumsum();
      expect([c.dtype, c.tolist()]).toEqual([dtypes.int32, [100, 200, 300]]);
      expect(new Tensor([1, 2], { device, dtype: 'int8' }).mean().dtype).toBe(dtypes.float32);
      const p = new Tensor([3, 4], { device, dtype: 'int8' }).prod();
      expect([p.dtype, p.item()]).toEqual([dtypes.int64, 12]);
      const m = new Tensor([[100, 100]], { device, dtype: 'int8' }).matmul(
        new Tensor([[1], [1]], { device, dtype: 'int8' }),
      );
      expect([m.dtype, m.tolist()]).toEqual([dtypes.int8, [[-56]]]); // (200 wraps in int8, as tinygrad)
      const a = Tensor.arange(4, undefined, 1, { device, dtype: 'int8' });
      expect([a.dtype, a.tolist()]).toEqual([dtypes.int8, [0, 1, 2, 3]]);
    });
  });

describe('sum gradient keeps the input dtype', () => {
  it('float16 sum: the gradient is float16 ones', () => {
    const x = new Tensor([1, 2, 3], { device: 'JS', dtype: 'float16', requiresGrad: true });
    const [g] = Tensor.gradient(x.sum().float(), [x]);
    expect([g!.dtype, g!.tolist()]).toEqual([dtypes.float16, [1, 1, 1]]);
  });
});
