// Tensors end to end on every backend CI has (JS always, CPU when a C compiler works): results against plain-JS references.
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { blockedCumsum } from '../../src/tensor/tensor.ts';
import { type ArgOf, AxisType, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { DEVICES } from '../devices.ts';

/** A deterministic pseudo-random array of n floats in [-2, 2), or ints in [-5, 5]. */
function values(n: number, seed: number, ints = false): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ints ? (s % 11) - 5 : (s / 2 ** 32) * 4 - 2;
  });
}
const f32 = (xs: number[]) => xs.map(Math.fround);
const close = (got: number[], want: number[], tol = 1e-5) => {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    if (Number.isNaN(want[i]!)) expect(g).toBeNaN();
    else expect(Math.abs(g - want[i]!)).toBeLessThanOrEqual(tol * Math.max(1, Math.abs(want[i]!)));
  });
};
const data = (t: Tensor) => Array.from(t.dataSync() as Float32Array, Number);

for (const device of DEVICES)
  describe(`Tensor on ${device}`, () => {
    const T = (xs: number[], shape?: number[]) => {
      const t = new Tensor(new Float32Array(xs), { device });
      return shape ? t.reshape(shape) : t;
    };
    it('builds from nested arrays and reads back', () => {
      const t = new Tensor(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        { device },
      );
      expect(t.shape).toEqual([2, 3]);
      expect(t.dtype).toBe(dtypes.int32);
      expect(t.tolist()).toEqual([
        [1, 2, 3],
        [4, 5, 6],
      ]);
      expect(new Tensor([true, false], { device }).tolist()).toEqual([true, false]);
    });
    it('elementwise ops with broadcasting', () => {
      const a = values(12, 1);
      const b = values(4, 2);
      const out = T(a, [3, 4])
        .mul(T(b, [4]))
        .add(1)
        .relu();
      close(
        data(out),
        f32(a.map((x, i) => Math.max(0, Math.fround(Math.fround(x) * Math.fround(b[i % 4]!)) + 1))),
      );
    });
    it('reduces along axes, keepdim, and all axes', () => {
      const a = values(24, 3);
      const t = T(a, [2, 3, 4]);
      const want1 = [0, 1].flatMap((i) =>
        [0, 1, 2, 3].map((k) => [0, 1, 2].reduce((s, j) => s + Math.fround(a[i * 12 + j * 4 + k]!), 0)),
      );
      close(data(t.sum(1)), want1);
      expect(t.sum(1, true).shape).toEqual([2, 1, 4]);
      close(
        data(t.max(-1)),
        [0, 1, 2, 3, 4, 5].map((r) => Math.max(...f32(a.slice(r * 4, r * 4 + 4)))),
      );
      close(data(t.sum()), [f32(a).reduce((s, x) => s + x, 0)]);
    });
    it('movement ops: permute, flip, pad, shrink, expand', () => {
      const a = f32(values(6, 4));
      const t = T(a, [2, 3]);
      close(data(t.permute([1, 0])), [a[0]!, a[3]!, a[1]!, a[4]!, a[2]!, a[5]!]);
      close(data(t.flip(1)), [a[2]!, a[1]!, a[0]!, a[5]!, a[4]!, a[3]!]);
      close(
        data(
          t.pad([
            [1, 0],
            [0, 1],
          ]),
        ),
        [0, 0, 0, 0, a[0]!, a[1]!, a[2]!, 0, a[3]!, a[4]!, a[5]!, 0],
      );
      close(
        data(
          t.shrink([
            [1, 2],
            [1, 3],
          ]),
        ),
        [a[4]!, a[5]!],
      );
      close(data(T(a.slice(0, 3), [3, 1]).expand([3, 2])), [a[0]!, a[0]!, a[1]!, a[1]!, a[2]!, a[2]!]);
    });
    it('matmul matches a naive product', () => {
      const [m, k, n] = [5, 7, 3];
      const a = f32(values(m * k, 5));
      const b = f32(values(k * n, 6));
      const want = Array.from({ length: m * n }, (_, idx) => {
        const [i, j] = [Math.floor(idx / n), idx % n];
        let s = 0;
        for (let x = 0; x < k; x++) s += a[i * k + x]! * b[x * n + j]!;
        return s;
      });
      close(data(T(a, [m, k]).matmul(T(b, [k, n]))), want, 1e-5);
    });
    it('arange is the prefix sum of ones, and cumsum works along any axis', () => {
      expect(Tensor.arange(5, undefined, 1, { device }).tolist()).toEqual([0, 1, 2, 3, 4]);
      expect(Tensor.arange(2, 11, 3, { device }).tolist()).toEqual([2, 5, 8]);
      const t = new Tensor(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        { device },
      );
      expect(t.cumsum(1).tolist()).toEqual([
        [1, 3, 6],
        [4, 9, 15],
      ]);
      expect(t.cumsum(0).tolist()).toEqual([
        [1, 2, 3],
        [5, 7, 9],
      ]);
    });
    it('softmax-style graphs: a reduce broadcast back gets its own kernel', () => {
      const a = f32(values(12, 7));
      const t = T(a, [3, 4]);
      const e = t.sub(t.max(1, true)).exp();
      const s = e.div(e.sum(1, true));
      const want = [0, 1, 2].flatMap((r) => {
        const row = a.slice(r * 4, r * 4 + 4);
        const m = Math.max(...row);
        const ex = row.map((x) => Math.exp(x - m));
        const sum = ex.reduce((p, q) => p + q, 0);
        return ex.map((x) => x / sum);
      });
      close(data(s), want, 1e-5);
      expect(scheduleOf([s]).kernels.length).toBeLessThanOrEqual(3);
    });
    it('integer floor division and modulo take the divisor sign', () => {
      const a = new Tensor([-7, -1, 0, 5, 7], { device });
      expect(a.uop.dtype).toBe(dtypes.int32);
    });
  });

describe('fusion', () => {
  it('(a*b+c).relu().sum(1) is one kernel, and a matmul is one kernel', () => {
    const a = new Tensor(new Float32Array(12), { device: 'JS' }).reshape([3, 4]);
    expect(scheduleOf([a.mul(a).add(a).relu().sum(1)]).kernels.length).toBe(1);
    expect(scheduleOf([a.matmul(a.transpose())]).kernels.length).toBe(1);
  });
});

describe('devices', () => {
  it('to() copies between devices, clone() copies into a new buffer, and an unknown device is refused', () => {
    const a = new Tensor([1.5, -2, 3], { device: 'JS' });
    const b = a.to('CPU');
    expect(b.device).toBe('CPU');
    expect(b.mul(2).tolist()).toEqual([3, -4, 6]);
    const c = a.clone().realize();
    expect(c.uop).not.toBe(a.realize().uop);
    expect(c.tolist()).toEqual([1.5, -2, 3]);
    expect(() => a.to('TPU')).toThrow(/TPU/);
    expect(() => new Tensor([1, 2], { device: 'NULL' }).add(1).tolist()).toThrow(/NULL/);
  });
});

describe('reduce collapse', () => {
  it('arange and a one-hot count collapse to loop-free kernels', () => {
    const t = Tensor.arange(20000, undefined, 1, { device: 'JS' });
    expect(t.sum().item()).toBe((19999 * 20000) / 2);
    const k = scheduleOf([Tensor.arange(64, undefined, 1, { device: 'JS' })]).kernels[0]!;
    const loops = (u: UOp) => u.toposort().filter((x) => x.op === Ops.RANGE).length;
    expect(loops(k.ast)).toBe(2); // the prefix sum: output and window
    expect(loops(lowerKernel(k.ast).linear)).toBe(1); // collapsed: the output loop only
    const counts = new Tensor([3, 0, 3, 1], { device: 'CPU' });
    const onehot = Tensor.arange(4, undefined, 1, { device: 'CPU' })
      .reshape([4, 1])
      .eq(counts.reshape([1, 4]));
    expect(onehot.sum(1).tolist()).toEqual([1, 1, 0, 2]);
  });
  // From 2^26 one window view of the prefix sum would have more than 2^53 elements, past exact offsets:
  // the loops stayed (arange(2^26) was a 2^26 x 2^26 kernel that never finished). Lowered, never run.
  it('arange and the random tensors past 2^26 elements collapse too: no reduce loop, O(n) work', () => {
    const big: [string, Tensor][] = [
      ['arange(2^26)', Tensor.arange(1 << 26, undefined, 1, { device: 'JS' })],
      ['arange(3 * 2^25)', Tensor.arange(3 << 25, undefined, 1, { device: 'JS' })],
      ['arange(2^27 + 5) by 3', Tensor.arange(7, 7 + 3 * ((1 << 27) + 5), 3, { device: 'JS' })],
      ['rand(2^27)', Tensor.rand([1 << 27], { device: 'JS' })],
      ['randn(2^26)', Tensor.randn([1 << 26], { device: 'JS' })],
      ['randint(2^13, 2^13, 2^2)', Tensor.randint([1 << 13, 1 << 13, 4], 0, 100, { device: 'JS' })],
    ];
    for (const [what, t] of big) {
      for (const { ast } of scheduleOf([t]).kernels) {
        const { name, linear, flops } = lowerKernel(ast);
        const reduceLoops = linear.src.filter(
          (u) => u.op === Ops.RANGE && (u.arg as ArgOf<Ops.RANGE>).type === AxisType.REDUCE,
        );
        expect({ what, name, reduceLoops: reduceLoops.length }).toEqual({ what, name, reduceLoops: 0 });
        expect(flops / t.numel, `${what}: ${name}`).toBeLessThan(500);
      }
    }
  });
  it('a running sum in blocks equals the one-window running sum', () => {
    for (const device of DEVICES) {
      const x = new Tensor(values(3 * 1000, 3, true), { device, dtype: dtypes.int32 }).reshape([3, 1000]);
      expect(blockedCumsum(x, 64).tolist()).toEqual(x.cumsum(1).tolist());
      expect(blockedCumsum(x, 8).tolist()).toEqual(x.cumsum(1).tolist()); // 125 blocks of 8: no padding
      const ones = Tensor.full([4096], 2, { device, dtype: dtypes.int32 });
      expect(blockedCumsum(ones, 64).tolist()).toEqual(Array.from({ length: 4096 }, (_, i) => 2 * (i + 1)));
    }
  });
});

describe('edge cases', () => {
  for (const device of DEVICES)
    it(`NaN survives comparisons and integer min works at the dtype's edges on ${device}`, () => {
      expect(new Tensor([Number.NaN, 1], { device }).relu().ge(0).tolist()).toEqual([false, true]);
      expect(new Tensor([0, 5], { device, dtype: dtypes.uint8 }).min().item()).toBe(0);
      expect(new Tensor([-(2 ** 31), 0], { device, dtype: dtypes.int32 }).min().item()).toBe(-(2 ** 31));
      expect(new Tensor([true, false], { device }).min().item()).toBe(false);
    });
});

describe('store or recompute', () => {
  it('a costly value an expand repeats is stored once; a cheap one is recomputed', () => {
    const x = new Tensor(new Float32Array(8).fill(0.5), { device: 'JS' }).reshape([8, 1]);
    const costly = x.exp().expand([8, 64]).sum(0);
    const cheap = x.add(1).expand([8, 64]).sum(0);
    expect(scheduleOf([costly]).kernels.length).toBe(2);
    expect(scheduleOf([cheap]).kernels.length).toBe(1);
    expect((costly.tolist() as number[])[0]).toBeCloseTo(8 * Math.exp(0.5), 4);
  });
  it('costly math a sum of products reads many times is stored, on GPUs too; a relu stays fused', () => {
    const data = values(8 * 16, 1);
    const f = (v: number) => (((v * 2 + 1) * v - 3) * v + 0.5) * v - 1;
    const rows = Array.from(
      { length: 8 },
      (_, i) => 0.5 * data.slice(16 * i, 16 * i + 16).reduce((n, v) => n + f(v), 0),
    );
    for (const device of ['JS', 'SIMT']) {
      const x = new Tensor(data, { device }).reshape([8, 16]);
      const w = Tensor.full([16, 32], 0.5, { device });
      // each element of the operand is multiplied into 32 outputs: 8 ops computed 32 times, or stored once
      const costly = x.mul(2).add(1).mul(x).sub(3).mul(x).add(0.5).mul(x).sub(1).matmul(w);
      expect(scheduleOf([costly]).kernels.length, device).toBe(2);
      expect(scheduleOf([x.relu().matmul(w)]).kernels.length, device).toBe(1);
      for (const [i, row] of (costly.tolist() as number[][]).entries())
        for (const v of row) expect(v, device).toBeCloseTo(rows[i]!, 3);
    }
  });
});

describe('store or recompute, layouts', () => {
  it('a stored operand is read through a copy with the axis the sum takes vectors from innermost', () => {
    // out[c, k] = sum over n, l of g[n, c, l] * h[n, k, l]: no output axis reads either side contiguously,
    // so the sum reads g (8 ops, 8 reads an element) with c innermost
    const [gData, hData] = [values(4 * 16 * 6, 2), values(4 * 8 * 6, 3)];
    const f = (v: number) => (((v * 2 + 1) * v - 3) * v + 0.5) * v - 1;
    const want: number[][] = Array.from({ length: 16 }, (_, c) =>
      Array.from({ length: 8 }, (_, k) => {
        let sum = 0;
        for (let n = 0; n < 4; n++)
          for (let l = 0; l < 6; l++) sum += f(gData[(n * 16 + c) * 6 + l]!) * hData[(n * 8 + k) * 6 + l]!;
        return sum;
      }),
    );
    // on a GPU the sum reads the stored math as it is: its threads coalesce along other axes
    for (const [device, kernels] of [
      ['JS', 3], // g's math, its copy with c innermost, the sum
      ['SIMT', 2],
    ] as const) {
      const g = new Tensor(gData, { device }).reshape([4, 16, 6]);
      const h = new Tensor(hData, { device }).reshape([4, 8, 6]);
      const out = g
        .mul(2)
        .add(1)
        .mul(g)
        .sub(3)
        .mul(g)
        .add(0.5)
        .mul(g)
        .sub(1)
        .reshape([4, 16, 1, 6])
        .mul(h.reshape([4, 1, 8, 6]))
        .sum([0, 3]);
      expect(scheduleOf([out]).kernels.length, device).toBe(kernels);
      for (const [c, row] of (out.tolist() as number[][]).entries())
        for (const [k, v] of row.entries()) expect(v, device).toBeCloseTo(want[c]![k]!, 3);
    }
  });
  it('the layout probe reads what rangeify realizes from buffers, as the kernel does', () => {
    // x's pooled values are realized (a max under a sum), so the sum reads x and w with k innermost and takes
    // vectors there: w needs no copy. Lowered through the pooling, x's address stepped k by 2
    const [xData, wData] = [values(16 * 8 * 10 * 10, 4), values(10 * 200, 5)];
    const x = new Tensor(xData, { device: 'JS' }).reshape([16, 8, 10, 10]);
    const w = new Tensor(wData, { device: 'JS' }).reshape([10, 200]).realize();
    const out = x.maxPool2d(2).reshape([16, 200]).matmul(w.transpose());
    expect(scheduleOf([out]).kernels.length).toBe(2); // the pooling, the sum
    const pooled = (b: number, k: number) => {
      const [c, h, v] = [Math.floor(k / 25), Math.floor(k / 5) % 5, k % 5];
      const at = (i: number, j: number) => xData[((b * 8 + c) * 10 + 2 * h + i) * 10 + 2 * v + j]!;
      return Math.max(at(0, 0), at(0, 1), at(1, 0), at(1, 1));
    };
    for (const [b, row] of (out.tolist() as number[][]).entries())
      for (const [n, got] of row.entries()) {
        let sum = 0;
        for (let k = 0; k < 200; k++) sum += pooled(b, k) * wData[n * 200 + k]!;
        expect(got).toBeCloseTo(sum, 3);
      }
  });

  it('a cheap operand is read through such a copy too, which computes it once', () => {
    // the same sum of relu(g) (1 op, not worth a store of its own): the copy with c innermost computes it
    const [gData, hData] = [values(4 * 16 * 6, 4), values(4 * 8 * 6, 5)];
    const g = new Tensor(gData, { device: 'JS' }).reshape([4, 16, 6]);
    const h = new Tensor(hData, { device: 'JS' }).reshape([4, 8, 6]);
    const out = g
      .relu()
      .reshape([4, 16, 1, 6])
      .mul(h.reshape([4, 1, 8, 6]))
      .sum([0, 3]);
    expect(scheduleOf([out]).kernels.length).toBe(2); // relu(g) with c innermost, the sum
    for (const [c, row] of (out.tolist() as number[][]).entries())
      for (const [k, v] of row.entries()) {
        let sum = 0;
        for (let n = 0; n < 4; n++)
          for (let l = 0; l < 6; l++)
            sum += Math.max(0, gData[(n * 16 + c) * 6 + l]!) * hData[(n * 8 + k) * 6 + l]!;
        expect(v).toBeCloseTo(sum, 3);
      }
  });
});

describe('assign', () => {
  for (const device of DEVICES)
    it(`writes in place on ${device}, safely when the value reads other elements of the buffer`, () => {
      const t = new Tensor([1, 2, 3, 4], { device, dtype: dtypes.float32 });
      const buffer = t.uop;
      t.assign(t.mul(2).add(1));
      expect(t.tolist()).toEqual([3, 5, 7, 9]);
      expect(t.uop).toBe(buffer);
      t.assign(t.flip(0)); // reads element 3 - i while writing element i: computed aside first
      expect(t.tolist()).toEqual([9, 7, 5, 3]);
      expect(t.uop).toBe(buffer);
      // a lazy graph reads the buffer as it is when realized: after the next assign here (as in tinygrad)
      const before = t.add(0);
      t.assign(t.sub(3)).realize();
      expect(before.tolist()).toEqual([6, 4, 2, 0]);
      expect(() => t.assign(new Tensor([1, 2], { device, dtype: dtypes.float32 }))).toThrow(
        /assign: the value is \(2\)/,
      );
    });
  for (const device of DEVICES)
    it(`writes once on ${device}, whenever the graphs that read the assigned tensor are realized`, () => {
      const m = new Tensor([10, 20], { device, dtype: dtypes.float32 });
      const p = new Tensor([1, 2], { device, dtype: dtypes.float32 });
      m.assign(m.add(1));
      p.assign(p.add(m));
      const twice = m.mul(2);
      const alias = new Tensor(m.uop, { device });
      m.realize();
      expect(m.tolist()).toEqual([11, 21]);
      // graphs built before m was realized read its buffer as the assign left it, and do not assign again
      expect(p.tolist()).toEqual([12, 23]);
      expect(twice.tolist()).toEqual([22, 42]);
      expect(alias.tolist()).toEqual([11, 21]);
      expect(m.tolist()).toEqual([11, 21]);
      // the same assign made again (an equal graph) writes again
      m.assign(m.add(1)).realize();
      expect(m.tolist()).toEqual([12, 22]);
    });
});
