// Pools (max, avg, unpool over 1-3 axes) and interpolate on JS and CPU against PyTorch's loops written in JS.
import { describe, expect, it } from 'vitest';
import { optimizable } from '../../src/codegen/index.ts';
import { productOperands } from '../../src/codegen/opt/operands.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import {
  type AvgPoolOptions,
  type InterpolateMode,
  type PoolOptions,
  Tensor,
} from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { close, data, numel, ravel, unravel, values } from './reference.ts';

interface Nd {
  shape: number[];
  data: number[];
}

interface PoolCase {
  shape: number[];
  kernel: number[];
  stride?: number[];
  pads?: [number, number][];
  dilation?: number[];
  ceilMode?: boolean;
}

/** Output size by PyTorch's formula (pooling_output_shape), with the ceilMode adjustment. */
function outSize(
  len: number,
  k: number,
  s: number,
  [b, a]: [number, number],
  d: number,
  ceil: boolean,
): number {
  const steps = (len + b + a - d * (k - 1) - 1) / s;
  const o = (ceil ? Math.ceil(steps) : Math.floor(steps)) + 1;
  return ceil && (o - 1) * s >= len + b ? o - 1 : o;
}

/** Max (first largest, as PyTorch's loop), its flat index in the plane, and both averages of each window. */
function poolRef(x: Nd, c: PoolCase) {
  const n = c.kernel.length;
  const lead = x.shape.slice(0, -n);
  const spatial = x.shape.slice(-n);
  const stride = c.stride ?? c.kernel;
  const pads = c.pads ?? c.kernel.map((): [number, number] => [0, 0]);
  const dil = c.dilation ?? c.kernel.map(() => 1);
  const out = spatial.map((l, j) =>
    outSize(l, c.kernel[j]!, stride[j]!, pads[j]!, dil[j]!, c.ceilMode ?? false),
  );
  const max: number[] = [];
  const idx: number[] = [];
  const avg: number[] = [];
  const avgIn: number[] = [];
  for (let flat = 0; flat < numel([...lead, ...out]); flat++) {
    const at = unravel(flat, [...lead, ...out]);
    const l = at.slice(0, lead.length);
    const o = at.slice(lead.length);
    let [m, mi, sum, counted, inside] = [-Infinity, -1, 0, 0, 0];
    for (let t = 0; t < numel(c.kernel); t++) {
      const tap = unravel(t, c.kernel);
      const pos = tap.map((ti, j) => o[j]! * stride[j]! - pads[j]![0] + ti * dil[j]!);
      if (pos.every((p, j) => p >= -pads[j]![0] && p < spatial[j]! + pads[j]![1])) counted++;
      if (!pos.every((p, j) => p >= 0 && p < spatial[j]!)) continue;
      const v = x.data[ravel([...l, ...pos], x.shape)]!;
      inside++;
      sum += v;
      if (v > m || Number.isNaN(v)) [m, mi] = [v, ravel(pos, spatial)];
    }
    max.push(m);
    idx.push(mi);
    avg.push(sum / counted);
    avgIn.push(sum / inside);
  }
  return { shape: [...lead, ...out], max, idx, avg, avgIn };
}

const rand = (shape: number[], seed: number): Nd => ({ shape, data: values(numel(shape), seed) });

const CASES: PoolCase[] = [
  { shape: [2, 7], kernel: [2] },
  { shape: [2, 5], kernel: [2], stride: [3] },
  { shape: [1, 2, 9], kernel: [3], stride: [2], pads: [[1, 1]], ceilMode: true },
  { shape: [2, 8], kernel: [3], stride: [3], pads: [[1, 0]], dilation: [2], ceilMode: true },
  { shape: [1, 10], kernel: [4], stride: [3], pads: [[2, 2]], ceilMode: true },
  { shape: [2, 5, 5], kernel: [2, 2], ceilMode: true },
  {
    shape: [1, 2, 7, 6],
    kernel: [3, 2],
    stride: [2, 3],
    pads: [
      [1, 1],
      [0, 1],
    ],
    ceilMode: true,
  },
  {
    shape: [1, 1, 6, 7],
    kernel: [3, 3],
    stride: [2, 2],
    pads: [
      [1, 1],
      [1, 1],
    ],
    dilation: [2, 1],
  },
  {
    shape: [1, 1, 8, 5],
    kernel: [2, 3],
    stride: [3, 1],
    pads: [
      [1, 0],
      [1, 1],
    ],
    dilation: [1, 2],
    ceilMode: true,
  },
  {
    shape: [1, 5, 4, 6],
    kernel: [2, 2, 3],
    stride: [2, 1, 2],
    pads: [
      [1, 1],
      [0, 0],
      [1, 1],
    ],
    ceilMode: true,
  },
  { shape: [2, 3, 3, 3], kernel: [2, 2, 2], stride: [1, 2, 1] },
];

describe.each(DEVICES)('pools on %s', (device) => {
  const T = (x: Nd) => new Tensor(x.data, { device }).reshape(x.shape);
  const opts = (c: PoolCase) => ({
    stride: c.stride,
    padding: c.pads,
    dilation: c.dilation,
    ceilMode: c.ceilMode,
  });
  const maxOf = (t: Tensor, n: number, k: number[], o: PoolOptions) =>
    n === 1 ? t.maxPool1d(k, o) : n === 2 ? t.maxPool2d(k, o) : t.maxPool3d(k, o);
  const argmaxOf = (t: Tensor, n: number, k: number[], o: PoolOptions) => {
    const r = { ...o, returnIndices: true as const };
    return n === 1 ? t.maxPool1d(k, r) : n === 2 ? t.maxPool2d(k, r) : t.maxPool3d(k, r);
  };
  const avgOf = (t: Tensor, n: number, k: number[], o: AvgPoolOptions) =>
    n === 1 ? t.avgPool1d(k, o) : n === 2 ? t.avgPool2d(k, o) : t.avgPool3d(k, o);

  it('max and avg pools match the reference: strides, padding, dilation, ceilMode, countIncludePad', () => {
    CASES.forEach((c, i) => {
      const x = rand(c.shape, 10 + i);
      const want = poolRef(x, c);
      const [t, n] = [T(x), c.kernel.length];
      const max = maxOf(t, n, c.kernel, opts(c));
      expect(max.shape, `case ${i}`).toEqual(want.shape);
      close(data(max), want.max);
      const [values, indices] = argmaxOf(t, n, c.kernel, opts(c));
      close(data(values), want.max);
      expect(indices.dtype).toBe(dtypes.int32);
      expect(data(indices), `case ${i} indices`).toEqual(want.idx);
      close(data(avgOf(t, n, c.kernel, opts(c))), want.avg);
      close(data(avgOf(t, n, c.kernel, { ...opts(c), countIncludePad: false })), want.avgIn);
    });
  });

  it('defaults to a window of 2 per axis with stride 2', () => {
    const x = rand([1, 2, 5, 4], 30);
    const want = poolRef(x, { shape: x.shape, kernel: [2, 2] });
    close(data(T(x).maxPool2d()), want.max);
    close(data(T(x).avgPool2d()), want.avg);
    const y = rand([3, 5], 31);
    close(data(T(y).maxPool1d()), poolRef(y, { shape: y.shape, kernel: [2] }).max);
    const z = rand([4, 4, 5], 32);
    close(data(T(z).avgPool3d()), poolRef(z, { shape: z.shape, kernel: [2, 2, 2] }).avg);
  });

  it('pools non-contiguous inputs, ints, size-1 and zero-size axes', () => {
    const x = rand([1, 5, 6], 40);
    const xt: Nd = { shape: [1, 6, 5], data: data(T(x).transpose(-1, -2).contiguous()) };
    const c: PoolCase = {
      shape: xt.shape,
      kernel: [3, 2],
      stride: [2, 2],
      pads: [
        [1, 1],
        [1, 0],
      ],
      ceilMode: true,
    };
    close(data(T(x).transpose(-1, -2).maxPool2d([3, 2], opts(c))), poolRef(xt, c).max);
    close(
      data(
        T(x)
          .transpose(-1, -2)
          .avgPool2d([3, 2], { ...opts(c), countIncludePad: false }),
      ),
      poolRef(xt, c).avgIn,
    );
    const sliced = T(rand([4, 9], 41)).shrink([
      [1, 3],
      [2, 9],
    ]);
    const s: Nd = { shape: [2, 7], data: data(sliced.contiguous()) };
    close(
      data(sliced.maxPool1d(3, { stride: 2, ceilMode: true })),
      poolRef(s, { shape: s.shape, kernel: [3], stride: [2], ceilMode: true }).max,
    );
    // ints: max keeps the dtype and pads never win; avg divides in floats
    const ints = new Tensor([-5, -2, -7, -1, -3], { device, dtype: dtypes.int32 });
    const imax = ints.maxPool1d(2, { padding: 1, ceilMode: true });
    expect(imax.dtype).toBe(dtypes.int32);
    expect(imax.tolist()).toEqual([-5, -2, -1]);
    expect(ints.avgPool1d(2, { padding: 1 }).tolist()).toEqual([-2.5, -4.5, -2]);
    expect(ints.avgPool1d(2, { padding: 1, ceilMode: true, countIncludePad: false }).tolist()).toEqual([
      -5, -4.5, -2,
    ]);
    // a size-1 axis with a kernel of 1; an empty leading axis
    const one = rand([2, 1, 3], 42);
    close(
      data(T(one).maxPool2d([1, 2], { stride: 1 })),
      poolRef(one, { shape: one.shape, kernel: [1, 2], stride: [1, 1] }).max,
    );
    const empty = Tensor.zeros([0, 3, 4], { device });
    expect(empty.maxPool2d().shape).toEqual([0, 1, 2]);
    expect(empty.avgPool2d(2, { ceilMode: true }).shape).toEqual([0, 2, 2]);
  });

  it('maxUnpool puts the maxima back at their indices', () => {
    const x = rand([2, 1, 5, 6], 50);
    const [v, i] = T(x).maxPool2d(2, { returnIndices: true });
    const up = v.maxUnpool2d(i, 2);
    expect(up.shape).toEqual([2, 1, 4, 6]);
    const want = new Array<number>(2 * 24).fill(0);
    const vs = data(v);
    data(i).forEach((ix, k) => {
      want[Math.floor(k / 6) * 24 + ix] = vs[k]!;
    });
    close(data(up), want);
    // outputSize restores the odd size; 1-d and 3-d alike
    expect(v.maxUnpool2d(i, 2, { outputSize: [5, 6] }).shape).toEqual([2, 1, 5, 6]);
    const y = new Tensor([3, 1, 4, 1, 5, 9, 2], { device });
    const [yv, yi] = y.maxPool1d(3, { stride: 2, padding: 1, returnIndices: true });
    expect(yv.maxUnpool1d(yi, 3, { stride: 2, padding: 1, outputSize: [7] }).tolist()).toEqual([
      3, 0, 4, 0, 0, 9, 0,
    ]);
    const z = rand([1, 2, 4, 4], 51);
    const [zv, zi] = T(z).maxPool3d(2, { returnIndices: true });
    close(data(zv.maxUnpool3d(zi).max([-3, -2, -1])), data(T(z).max([-3, -2, -1])));
  });
});

// --- interpolate -----------------------------------------------------------------------------------------

/** Where output o of an axis resized from n to m reads: [i0, i1, weight of i1], in PyTorch's float32 math. */
function taps(
  o: number,
  n: number,
  m: number,
  mode: InterpolateMode,
  align: boolean,
): [number, number, number] {
  const f = Math.fround;
  const scale = f(align ? (m > 1 ? (n - 1) / (m - 1) : 0) : n / m);
  if (mode === 'nearest' || mode === 'nearest-exact') {
    const i = Math.min(Math.floor(f((mode === 'nearest' ? o : o + 0.5) * scale)), n - 1);
    return [i, i, 0];
  }
  const src = align ? f(scale * o) : Math.max(f(f(scale * (o + 0.5)) - 0.5), 0);
  const i0 = Math.floor(src);
  return [i0, Math.min(i0 + 1, n - 1), src - i0];
}

/** Resizes the trailing axes one at a time (separable, as PyTorch's linear modes are). */
function interpolateRef(x: Nd, size: number[], mode: InterpolateMode, align = false): Nd {
  let cur = x;
  size.forEach((m, j) => {
    const axis = cur.shape.length - size.length + j;
    const n = cur.shape[axis]!;
    const shape = cur.shape.map((d, i) => (i === axis ? m : d));
    const out = Array.from({ length: numel(shape) }, (_, flat) => {
      const at = unravel(flat, shape);
      const [i0, i1, w] = taps(at[axis]!, n, m, mode, align);
      const read = (i: number) =>
        cur.data[
          ravel(
            at.map((v, k) => (k === axis ? i : v)),
            cur.shape,
          )
        ]!;
      return w === 0 ? read(i0) : (1 - w) * read(i0) + w * read(i1);
    });
    cur = { shape, data: out };
  });
  return cur;
}

describe.each(DEVICES)('interpolate on %s', (device) => {
  const T = (x: Nd) => new Tensor(x.data, { device }).reshape(x.shape);
  const cases: [number[], number[]][] = [
    [[2, 5], [9]],
    [[1, 7], [3]],
    [
      [1, 2, 4, 5],
      [7, 3],
    ],
    [
      [1, 3, 3],
      [6, 6],
    ],
    [
      [2, 3, 2, 4],
      [5, 3, 1],
    ],
    [
      [1, 4, 4],
      [4, 2],
    ],
  ];

  it.each(['nearest', 'nearest-exact', 'linear'] as const)('mode %s up and down, odd sizes', (mode) => {
    cases.forEach(([shape, size], i) => {
      const x = rand(shape, 60 + i);
      const got = T(x).interpolate(size, { mode });
      const want = interpolateRef(x, size, mode);
      expect(got.shape).toEqual(want.shape);
      close(data(got), want.data);
      if (mode === 'linear')
        close(
          data(T(x).interpolate(size, { mode, alignCorners: true })),
          interpolateRef(x, size, mode, true).data,
        );
    });
  });

  it('bilinear and trilinear are linear over the given axes; nearest keeps ints, linear makes floats', () => {
    const x = rand([1, 2, 3, 4], 70);
    close(
      data(T(x).interpolate([5, 7], { mode: 'bilinear', alignCorners: true })),
      interpolateRef(x, [5, 7], 'linear', true).data,
    );
    close(
      data(T(x).interpolate([3, 2, 6], { mode: 'trilinear' })),
      interpolateRef(x, [3, 2, 6], 'linear').data,
    );
    // default mode is linear (tinygrad's)
    close(data(T(x).interpolate([2, 5])), interpolateRef(x, [2, 5], 'linear').data);
    const ints = new Tensor([[1, 2, 3]], { device, dtype: dtypes.int32 });
    const near = ints.interpolate([5], { mode: 'nearest' });
    expect(near.dtype).toBe(dtypes.int32);
    expect(near.tolist()).toEqual([[1, 1, 2, 2, 3]]);
    const lin = ints.interpolate([5], { alignCorners: true });
    expect(lin.dtype).toBe(dtypes.float32);
    expect(lin.tolist()).toEqual([[1, 1.5, 2, 2.5, 3]]);
    // non-contiguous input; an infinity does not spread to its non-neighbors
    const y = rand([3, 5], 71);
    const yt: Nd = { shape: [5, 3], data: data(T(y).transpose().contiguous()) };
    close(
      data(T(y).transpose().interpolate([7], { mode: 'nearest-exact' })),
      interpolateRef(yt, [7], 'nearest-exact').data,
    );
    const inf = new Tensor([0, 1, Infinity, 3, 4, 5], { device });
    const down = data(inf.interpolate([3]));
    expect(down[0]).toBe(0.5);
    expect(down[1]).toBe(Infinity);
    expect(down[2]).toBe(4.5);
  });
});

describe('pool and interpolate gradients (float64, central differences)', () => {
  it('max pools with padding, dilation and ceilMode', () => {
    checkGradient('maxPool1d', [[2, 7]], (t) => t.maxPool1d(3, { stride: 2, padding: 1, ceilMode: true }));
    checkGradient('maxPool2d', [[1, 5, 4]], (t) =>
      t.maxPool2d([2, 3], { stride: [2, 1], padding: [1, 1], dilation: [2, 1], ceilMode: true }),
    );
    checkGradient('maxPool3d', [[3, 3, 4]], (t) => t.maxPool3d(2, { stride: [1, 2, 2], ceilMode: true }));
    checkGradient(
      'maxPool2d values',
      [[1, 4, 4]],
      (t) => t.maxPool2d(3, { stride: 2, padding: 1, returnIndices: true })[0],
    );
  });
  it('max pools with windows apart (kernel <= stride) split the gradient of tied maxima by their count', () => {
    for (const device of DEVICES) {
      const x = new Tensor([1, 3, 3, 0, 2, 2, 3, 0, 1, 1, 2, 2], {
        device,
        dtype: dtypes.float32,
        requiresGrad: true,
      }).reshape([1, 1, 2, 6]);
      const g = new Tensor([1, 2, 4], { device, dtype: dtypes.float32 }).reshape([1, 1, 1, 3]);
      expect(data(Tensor.gradient(x.maxPool2d(), [x], g)[0]!)).toEqual([
        0, 0.5, 2, 0, 1, 1, 0.5, 0, 0, 0, 1, 1,
      ]);
      // windows [0, 2) and [3, 5) of 5: the last element lies in none
      const y = new Tensor([5, 5, 1, 2, 7], { device, dtype: dtypes.float32, requiresGrad: true });
      const h = new Tensor([2, 3], { device, dtype: dtypes.float32 });
      expect(data(Tensor.gradient(y.maxPool1d(2, { stride: 3 }), [y], h)[0]!)).toEqual([1, 1, 0, 0, 3]);
    }
  });
  it('avg pools, with and without the padding in the divisor', () => {
    checkGradient('avgPool1d', [[2, 7]], (t) => t.avgPool1d(3, { stride: 2, padding: 1, ceilMode: true }));
    checkGradient('avgPool2d', [[1, 5, 4]], (t) =>
      t.avgPool2d([3, 2], { stride: 2, padding: [1, 1], ceilMode: true, countIncludePad: false }),
    );
    checkGradient('avgPool3d', [[2, 3, 3]], (t) => t.avgPool3d(2, { stride: 1, padding: 1 }));
  });
  it('interpolate and maxUnpool', () => {
    checkGradient('linear', [[2, 3, 4]], (t) => t.interpolate([5, 3]));
    checkGradient('bilinear alignCorners', [[1, 3, 4]], (t) =>
      t.interpolate([4, 7], { mode: 'bilinear', alignCorners: true }),
    );
    checkGradient('nearest', [[2, 5]], (t) => t.interpolate([7], { mode: 'nearest' }));
    checkGradient('maxUnpool2d', [[1, 2, 2]], (t) =>
      t.maxUnpool2d(Tensor.arange(4, undefined, 1, { device: 'JS' }).mul(3).reshape([1, 2, 2]), 2, {
        outputSize: [3, 4],
      }),
    );
  });
});

describe('pool and interpolate errors', () => {
  const t = (shape: number[]) => Tensor.zeros(shape, { device: 'JS' });
  it('name the op, the shapes and what would be valid', () => {
    expect(() => t([4]).maxPool2d()).toThrow(
      'maxPool2d: input (4) needs at least 2 axes; it pools the last two',
    );
    expect(() => t([2, 4]).avgPool3d()).toThrow(
      'avgPool3d: input (2, 4) needs at least 3 axes; it pools the last three',
    );
    expect(() => t([2, 4]).maxPool1d([2, 2])).toThrow(
      'maxPool1d: kernel [2,2] should be one non-negative integer or 1 of them',
    );
    expect(() => t([2, 4]).maxPool1d(0)).toThrow(
      'maxPool1d: kernel, stride and dilation must be at least 1, got 0, 0, 1',
    );
    expect(() => t([1, 6, 6]).avgPool2d(3, { padding: 2 })).toThrow(
      'avgPool2d: padding [2,2] of spatial axis 0 should be at most half the kernel 3 on each side',
    );
    expect(() => t([1, 2]).maxPool1d(3)).toThrow(
      'maxPool1d: input (1, 2) padded to 2 along spatial axis 0 is smaller than the window span 3 (kernel 3, dilation 1)',
    );
    const [v, i] = t([1, 4, 4]).maxPool2d(2, { returnIndices: true });
    expect(() => v.maxUnpool2d(i.reshape([2, 2]))).toThrow(
      'maxUnpool2d: values (1, 2, 2) and indices (2, 2) need one shape with at least 2 axes',
    );
    expect(() => v.maxUnpool2d(v)).toThrow(
      "maxUnpool2d: indices need an integer dtype (maxPool2d's returnIndices), got float32",
    );
    expect(() => v.maxUnpool2d(i, 2, { outputSize: [4] })).toThrow(
      'maxUnpool2d: outputSize [4] should be 2 non-negative integers',
    );
    expect(() => t([2, 3]).interpolate([4], { mode: 'cubic' as InterpolateMode })).toThrow(
      "interpolate: unknown mode 'cubic'; valid modes are 'nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear'",
    );
    expect(() => t([2, 3]).interpolate([4], { mode: 'nearest', alignCorners: true })).toThrow(
      "interpolate: alignCorners works with the linear modes only, not 'nearest'",
    );
    expect(() => t([2, 3]).interpolate([4, 4, 4])).toThrow(
      'interpolate: size [4,4,4] for input (2, 3) should be positive integers, at most one per axis (the trailing axes)',
    );
    expect(() => t([2, 3]).interpolate([0])).toThrow(
      /size \[0\] for input \(2, 3\) should be positive integers/,
    );
    expect(() => t([2, 0]).interpolate([3])).toThrow(
      'interpolate: input (2, 0) is empty along axis 1; there is nothing to resize',
    );
  });
});

describe('pool, pad and interpolate kernel counts', () => {
  const x = new Tensor(new Float32Array(2 * 3 * 8 * 8), { device: 'JS' }).reshape([2, 3, 8, 8]);
  const count = (t: Tensor) => scheduleOf([t]).kernels.length;
  it('fuse: a pool in one kernel (ceilMode and the divisor too), a padding mode in one, interpolate one per axis', () => {
    expect(count(x.maxPool2d(3, { stride: 2, padding: 1, ceilMode: true }))).toBe(1);
    expect(count(x.avgPool2d(3, { stride: 2, padding: 1, ceilMode: true }))).toBe(1);
    expect(count(x.avgPool2d(3, { stride: 2, padding: 1, countIncludePad: false }))).toBe(1);
    expect(count(x.maxPool3d())).toBe(1);
    for (const mode of ['reflect', 'replicate', 'circular'] as const)
      expect(count(x.pad([1, 2, 2, 1], { mode }))).toBe(1);
    expect(count(x.interpolate([5, 11]))).toBe(2);
    expect(count(x.interpolate([5, 11], { mode: 'nearest' }))).toBe(2);
  });

  it("a max pool's gradient: the max, the count of maxima and the input's gradient, elementwise (windows apart are views of the input, so no sum over overlaps)", () => {
    const t = x.detach().requiresGrad_();
    const kernels = scheduleOf([Tensor.gradient(t.maxPool2d().sum(), [t])[0]!]).kernels;
    expect(kernels.map((k) => k.ast.toposort().some((u) => u.op === Ops.REDUCE))).toEqual([
      true,
      true,
      false,
    ]);
  });

  it("a max pool's input gradient is a buffer: a normalization before the pool reads it in its sums, not the pooled values", () => {
    const a = Tensor.rand([2, 3, 8, 8], { device: 'CPU', requiresGrad: true });
    const normed = a.sub(a.mean([0, 2, 3], true)).div(a.square().mean([0, 2, 3], true).add(1).sqrt());
    const grad = Tensor.gradient(normed.maxPool2d().sum(), [a])[0]!;
    // the pooled max and the count of maxima: [2, 3, 4, 4] with the window axes kept
    const readPooled = scheduleOf([grad]).kernels.filter((k) =>
      k.bufs.slice(1).some((b) => b.shape!.join() === '2,3,4,4,1,1'),
    );
    expect(readPooled).toHaveLength(2);
  });

  it('the product a max pool passes its gradient back through is a kernel of its own, apart from the window reads', () => {
    // a linear layer after the pool: its input gradient dy @ W (a sum of products) and the count of maxima
    // (a sum over the windows of the pool's input) each read what the other does not
    const input = Tensor.rand([2, 3, 8, 8], { device: 'CPU' }).realize();
    const t = input.detach().requiresGrad_();
    const w = Tensor.rand([5, 48], { device: 'CPU' }).realize();
    const dy = Tensor.rand([2, 5], { device: 'CPU' }).realize();
    const grad = Tensor.gradient(t.maxPool2d().flatten(1).matmul(w.T), [t], dy)[0]!;
    const products = scheduleOf([grad]).kernels.filter(
      (k) => productOperands(optimizable(k.ast)) !== undefined,
    );
    expect(products.map((k) => k.bufs.slice(1).map((b) => b.shape))).toEqual([
      [
        [2, 5],
        [5, 48],
      ],
    ]);
  });
});
