// nn layers against plain-JS references on the JS device: forward passes, BatchNorm's modes and statistics, init bounds.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import {
  assign,
  BatchNorm,
  BatchNorm2d,
  Conv2d,
  ConvTranspose2d,
  Dropout,
  Embedding,
  GroupNorm,
  getStateDict,
  LayerNorm,
  Linear,
  loadStateDict,
  RMSNorm,
} from '../../src/nn/index.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { useDefaultDevice } from '../default-device.ts';
import { close, data, numel, ravel, unravel, values } from '../tensor/reference.ts';

useDefaultDevice('JS');
afterEach(() => {
  Tensor.training = false;
});

/** A seeded float32 input of a shape, as a tensor and as plain numbers. */
function input(shape: number[], seed: number): [Tensor, number[]] {
  const xs = values(numel(shape), seed);
  return [new Tensor(new Float32Array(xs)).reshape(shape), xs];
}

/** Sets a layer tensor to seeded values (so affine parameters are not the trivial ones and zeros). */
function fill(t: Tensor, seed: number): number[] {
  const xs = values(t.numel, seed);
  assign(t, new Tensor(new Float32Array(xs)).reshape(t.shape).realize());
  return xs;
}

const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const variance = (v: number[]) => mean(v.map((x) => (x - mean(v)) ** 2));

/** f over each channel's values of an (N, C, ...) array, as one number per channel. */
function perChannel(xs: number[], shape: number[], f: (v: number[]) => number): number[] {
  const groups: number[][] = Array.from({ length: shape[1]! }, () => []);
  xs.forEach((x, flat) => {
    groups[unravel(flat, shape)[1]!]!.push(x);
  });
  return groups.map(f);
}

interface ConvCase {
  n: number;
  cin: number;
  cout: number;
  size: [number, number];
  k: [number, number];
  stride: [number, number];
  padding: [number, number];
  dilation: [number, number];
  groups: number;
}

/** Direct convolution: out[n, o, y, x] = b[o] + sum over the group's channels and the window. */
function convRef(c: ConvCase, xs: number[], w: number[], b: number[]): { shape: number[]; out: number[] } {
  const cg = c.cin / c.groups;
  const og = c.cout / c.groups;
  const outHW = [0, 1].map(
    (j) =>
      Math.floor((c.size[j]! + 2 * c.padding[j]! - c.dilation[j]! * (c.k[j]! - 1) - 1) / c.stride[j]!) + 1,
  );
  const shape = [c.n, c.cout, outHW[0]!, outHW[1]!];
  const out = new Array<number>(numel(shape)).fill(0);
  out.forEach((_, flat) => {
    const [n, o, y, x] = unravel(flat, shape) as [number, number, number, number];
    const g = Math.floor(o / og);
    let s = b[o] ?? 0;
    for (let ci = 0; ci < cg; ci++)
      for (let ky = 0; ky < c.k[0]; ky++)
        for (let kx = 0; kx < c.k[1]; kx++) {
          const iy = y * c.stride[0] - c.padding[0] + ky * c.dilation[0];
          const ix = x * c.stride[1] - c.padding[1] + kx * c.dilation[1];
          if (iy < 0 || ix < 0 || iy >= c.size[0] || ix >= c.size[1]) continue;
          s +=
            xs[ravel([n, g * cg + ci, iy, ix], [c.n, c.cin, ...c.size])]! *
            w[ravel([o, ci, ky, kx], [c.cout, cg, ...c.k])]!;
        }
    out[flat] = s;
  });
  return { shape, out };
}

/** Transposed convolution by scattering: each input element adds x * w[ci, o] to the outputs its window covers. */
function convTransposeRef(
  c: ConvCase & { outputPadding: [number, number] },
  xs: number[],
  w: number[],
  b: number[],
): { shape: number[]; out: number[] } {
  const cg = c.cin / c.groups;
  const og = c.cout / c.groups;
  const outHW = [0, 1].map(
    (j) =>
      (c.size[j]! - 1) * c.stride[j]! -
      2 * c.padding[j]! +
      c.dilation[j]! * (c.k[j]! - 1) +
      c.outputPadding[j]! +
      1,
  ) as [number, number];
  const shape = [c.n, c.cout, ...outHW];
  const out = new Array<number>(numel(shape)).fill(0);
  out.forEach((_, flat) => {
    out[flat] = b[unravel(flat, shape)[1]!] ?? 0;
  });
  xs.forEach((x, flat) => {
    const [n, ci, iy, ix] = unravel(flat, [c.n, c.cin, ...c.size]) as [number, number, number, number];
    const g = Math.floor(ci / cg);
    for (let o = 0; o < og; o++)
      for (let ky = 0; ky < c.k[0]; ky++)
        for (let kx = 0; kx < c.k[1]; kx++) {
          const y = iy * c.stride[0] - c.padding[0] + ky * c.dilation[0];
          const xx = ix * c.stride[1] - c.padding[1] + kx * c.dilation[1];
          if (y < 0 || xx < 0 || y >= outHW[0] || xx >= outHW[1]) continue;
          out[ravel([n, g * og + o, y, xx], shape)]! += x * w[ravel([ci, o, ky, kx], [c.cin, og, ...c.k])]!;
        }
  });
  return { shape, out };
}

/** Checks that a tensor's values lie in [-bound, bound] and reach past 80% of it (a uniform fills its range). */
function expectUniform(t: Tensor, bound: number): void {
  const v = data(t);
  const top = Math.max(...v.map(Math.abs));
  expect(top).toBeLessThanOrEqual(bound);
  expect(top).toBeGreaterThan(0.8 * bound);
  expect(Math.abs(mean(v))).toBeLessThan(0.25 * bound);
}

describe('Linear', () => {
  it('computes x W^T + b over the last axis, with and without bias', () => {
    const lin = new Linear(3, 4);
    const w = data(lin.weight);
    const b = data(lin.bias!);
    const [x, xs] = input([2, 5, 3], 1);
    const want = Array.from({ length: 10 * 4 }, (_, flat) => {
      const [r, o] = [Math.floor(flat / 4), flat % 4];
      return b[o]! + [0, 1, 2].reduce((s, i) => s + xs[r * 3 + i]! * w[o * 3 + i]!, 0);
    });
    const y = lin.call(x);
    expect(y.shape).toEqual([2, 5, 4]);
    close(data(y), want);
    const plain = new Linear(3, 2, { bias: false });
    expect(plain.bias).toBeUndefined();
    const pw = data(plain.weight);
    close(
      data(plain.forward(new Tensor([[1, 2, 3]]))),
      [0, 1].map((o) => pw[o * 3]! + 2 * pw[o * 3 + 1]! + 3 * pw[o * 3 + 2]!),
    );
  });

  it('initializes uniform within 1/sqrt(in), trainable, each tensor its own buffer', () => {
    const lin = new Linear(64, 32);
    expect(lin.weight.shape).toEqual([32, 64]);
    expectUniform(lin.weight, 1 / 8);
    expect(Math.max(...data(lin.bias!).map(Math.abs))).toBeLessThanOrEqual(1 / 8);
    expect(lin.weight.requiresGrad && lin.bias!.requiresGrad).toBe(true);
    expect(lin.weight.uop.op).toBe(Ops.BUFFER);
  });

  it('names the layer and the expected size when the input does not fit', () => {
    expect(() => new Linear(3, 4).call(Tensor.ones([2, 5]))).toThrow(
      /Linear\(3, 4\): input \(2, 5\) should have 3/,
    );
    expect(() => new Linear(0, 4)).toThrow(/inFeatures must be a positive integer, got 0/);
  });
});

describe('Conv2d and ConvTranspose2d', () => {
  const base = { n: 2, cin: 4, cout: 6, size: [5, 6] as [number, number], k: [3, 2] as [number, number] };
  const cases: ConvCase[] = [
    { ...base, stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 },
    { ...base, stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 2 },
  ];

  it.each(cases)('Conv2d matches a direct convolution (stride $stride, groups $groups)', (c) => {
    const conv = new Conv2d(c.cin, c.cout, c.k, {
      stride: c.stride,
      padding: c.padding,
      dilation: c.dilation,
      groups: c.groups,
    });
    expect(conv.weight.shape).toEqual([c.cout, c.cin / c.groups, ...c.k]);
    const [x, xs] = input([c.n, c.cin, ...c.size], 2);
    const ref = convRef(c, xs, data(conv.weight), data(conv.bias!));
    const y = conv.call(x);
    expect(y.shape).toEqual(ref.shape);
    close(data(y), ref.out, 1e-5);
  });

  const tcases: (ConvCase & { outputPadding: [number, number] })[] = [
    { ...base, stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1, outputPadding: [0, 0] },
    { ...base, stride: [2, 3], padding: [1, 0], dilation: [1, 1], groups: 2, outputPadding: [1, 2] },
    // padding beyond dilation * (kernel - 1) trims the spread input instead of padding it
    { ...base, stride: [2, 2], padding: [3, 2], dilation: [2, 1], groups: 1, outputPadding: [1, 0] },
  ];

  it.each(tcases)(
    'ConvTranspose2d matches a scattering reference (stride $stride, padding $padding, groups $groups)',
    (c) => {
      const conv = new ConvTranspose2d(c.cin, c.cout, c.k, {
        stride: c.stride,
        padding: c.padding,
        dilation: c.dilation,
        groups: c.groups,
        outputPadding: c.outputPadding,
      });
      expect(conv.weight.shape).toEqual([c.cin, c.cout / c.groups, ...c.k]);
      const [x, xs] = input([c.n, c.cin, ...c.size], 3);
      const ref = convTransposeRef(c, xs, data(conv.weight), data(conv.bias!));
      const y = conv.call(x);
      expect(y.shape).toEqual(ref.shape);
      close(data(y), ref.out, 1e-5);
    },
  );

  it('initializes weights and biases within 1/sqrt(fanIn) of the weight shape', () => {
    const conv = new Conv2d(8, 16, 3, { groups: 2 });
    expectUniform(conv.weight, 1 / Math.sqrt(4 * 9));
    expect(Math.max(...data(conv.bias!).map(Math.abs))).toBeLessThanOrEqual(1 / 6);
    const t = new ConvTranspose2d(8, 12, 3, { groups: 2 });
    expectUniform(t.weight, 1 / Math.sqrt(6 * 9));
    expect(new Conv2d(2, 4, 3, { bias: false }).bias).toBeUndefined();
  });

  it('rejects groups that do not divide the channels and outputPadding at or above the stride', () => {
    expect(() => new Conv2d(4, 6, 3, { groups: 4 })).toThrow(
      /groups 4 must divide inChannels 4 and outChannels 6/,
    );
    const t = new ConvTranspose2d(2, 2, 3, { stride: 2, outputPadding: 2 });
    expect(() => t.call(Tensor.ones([1, 2, 4, 4]))).toThrow(
      /outputPadding 2 on spatial axis 0 must be less than the stride 2/,
    );
  });
});

describe('BatchNorm', () => {
  const shape = [4, 3, 2];

  it('normalizes by batch statistics in training and updates the running statistics (unbiased variance)', () => {
    const bn = new BatchNorm(3);
    const w = fill(bn.weight!, 5);
    const b = fill(bn.bias!, 6);
    Tensor.training = true;
    const [x, xs] = input(shape, 7);
    const mu = perChannel(xs, shape, mean);
    const sigma2 = perChannel(xs, shape, variance);
    const n = 8;
    const want = xs.map((v, flat) => {
      const c = unravel(flat, shape)[1]!;
      return ((v - mu[c]!) / Math.sqrt(sigma2[c]! + 1e-5)) * w[c]! + b[c]!;
    });
    close(data(bn.call(x)), want, 1e-4);
    close(
      data(bn.runningMean!),
      mu.map((m) => 0.1 * m),
    );
    close(
      data(bn.runningVar!),
      sigma2.map((v) => 0.9 + (0.1 * v * n) / (n - 1)),
    );
    expect(bn.numBatchesTracked!.dtype).toBe(dtypes.int64);
    expect(data(bn.numBatchesTracked!)).toEqual([1]);
    // a second batch blends in again
    const [x2, xs2] = input(shape, 8);
    bn.call(x2);
    const mu2 = perChannel(xs2, shape, mean);
    const var2 = perChannel(xs2, shape, variance);
    close(
      data(bn.runningMean!),
      mu.map((m, c) => 0.9 * 0.1 * m + 0.1 * mu2[c]!),
    );
    close(
      data(bn.runningVar!),
      sigma2.map((v, c) => 0.9 * (0.9 + (0.1 * v * n) / (n - 1)) + (0.1 * var2[c]! * n) / (n - 1)),
    );
    expect(data(bn.numBatchesTracked!)).toEqual([2]);
  });

  it('normalizes by the running statistics in eval mode and leaves them alone', () => {
    const bn = new BatchNorm2d(3, { momentum: 0.5 });
    const rm = fill(bn.runningMean!, 9);
    const rv = fill(bn.runningVar!, 10).map((v) => v + 3);
    assign(bn.runningVar!, new Tensor(new Float32Array(rv)).realize());
    const [x, xs] = input([2, 3, 2, 2], 11);
    const want = xs.map((v, flat) => {
      const c = unravel(flat, [2, 3, 2, 2])[1]!;
      return (v - rm[c]!) / Math.sqrt(rv[c]! + 1e-5);
    });
    close(data(bn.call(x)), want, 1e-5);
    close(data(bn.runningMean!), rm);
    expect(data(bn.numBatchesTracked!)).toEqual([0]);
  });

  it('without running statistics or affine parameters normalizes by the batch in both modes', () => {
    const bn = new BatchNorm(3, { trackRunningStats: false, affine: false });
    expect(Object.keys(getStateDict(bn))).toEqual([]);
    const [x, xs] = input([5, 3], 12);
    const mu = perChannel(xs, [5, 3], mean);
    const sigma2 = perChannel(xs, [5, 3], variance);
    close(
      data(bn.call(x)),
      xs.map((v, flat) => (v - mu[flat % 3]!) / Math.sqrt(sigma2[flat % 3]! + 1e-5)),
      1e-4,
    );
  });

  it('initializes ones and zeros in buffers of their own; names the channel axis on a bad input', () => {
    const bn = new BatchNorm(4);
    expect(data(bn.weight!)).toEqual([1, 1, 1, 1]);
    expect(data(bn.runningVar!)).toEqual([1, 1, 1, 1]);
    expect(data(bn.bias!)).toEqual([0, 0, 0, 0]);
    expect(bn.bias!.uop).not.toBe(bn.runningMean!.uop);
    expect(bn.runningMean!.requiresGrad).toBe(false);
    expect(() => bn.call(Tensor.ones([2, 3]))).toThrow(
      /BatchNorm\(4\): input \(2, 3\) should be \(N, 4, \.\.\.\)/,
    );
    Tensor.training = true;
    expect(() => bn.call(Tensor.ones([1, 4]))).toThrow(/1 value\(s\) per channel/);
  });
});

describe('deferred initial values', () => {
  /** The realize calls DEBUG=1 reports while fn runs. */
  function realizeCalls(fn: () => void): number {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      Context.with({ DEBUG: 1 }, fn);
      return log.mock.calls.filter(([line]) => String(line).startsWith('realize:')).length;
    } finally {
      log.mockRestore();
    }
  }

  it("computes a model's parameters and buffers together at the first read, as each init alone would", () => {
    Tensor.manualSeed(7);
    const conv = new Conv2d(2, 3, 3);
    const bn = new BatchNorm(3);
    const lin = new Linear(5, 3);
    const tensors = [conv.weight, conv.bias!, bn.weight!, bn.bias!, bn.runningMean!, bn.runningVar!];
    tensors.push(bn.numBatchesTracked!, lin.weight, lin.bias!);
    // reading one computes all, in one realize, not one each
    expect(realizeCalls(() => lin.bias!.realize())).toBe(1);
    expect(tensors.every((t) => t.uop.op === Ops.BUFFER)).toBe(true);
    // the same draws, in the same order, realized one by one
    Tensor.manualSeed(7);
    const alone = [
      Tensor.kaimingUniform([3, 2, 3, 3], Math.sqrt(5)),
      Tensor.uniform([3], -1 / Math.sqrt(18), 1 / Math.sqrt(18)),
      Tensor.ones([3]),
      Tensor.zeros([3]),
      Tensor.zeros([3]),
      Tensor.ones([3]),
      Tensor.zeros([], { dtype: dtypes.int64 }),
      Tensor.kaimingUniform([3, 5], Math.sqrt(5)),
      Tensor.uniform([3], -1 / Math.sqrt(5), 1 / Math.sqrt(5)),
    ].map((t) => data(t.realize()));
    expect(tensors.map((t) => data(t))).toEqual(alone);
    // equal values stay in buffers of their own
    expect(new Set(tensors.map((t) => t.uop)).size).toBe(tensors.length);
  });

  it('builds graphs on the written buffer: a forward pass does not carry the init', () => {
    const lin = new Linear(4, 2);
    const y = lin.call(Tensor.ones([1, 4]));
    expect(lin.weight.uop.op).toBe(Ops.BUFFER);
    expect(y.uop.toposort().some((u) => u.op === Ops.STORE)).toBe(false);
  });

  it('drops a disposed deferred tensor from the pending ones: computing the rest does not touch it', () => {
    const t = Tensor.deferredInit(Tensor.ones([2]));
    t.dispose();
    expect(() => Tensor.realizeDeferred()).not.toThrow();
    expect(t.disposed).toBe(true);
  });
});

describe('LayerNorm, RMSNorm, GroupNorm', () => {
  it('LayerNorm normalizes over the trailing shape, then scales and shifts', () => {
    const ln = new LayerNorm([2, 3]);
    const w = fill(ln.weight!, 13);
    const b = fill(ln.bias!, 14);
    const [x, xs] = input([4, 2, 3], 15);
    const want = xs.map((v, flat) => {
      const row = xs.slice(Math.floor(flat / 6) * 6, Math.floor(flat / 6) * 6 + 6);
      return ((v - mean(row)) / Math.sqrt(variance(row) + 1e-5)) * w[flat % 6]! + b[flat % 6]!;
    });
    close(data(ln.call(x)), want, 1e-4);
    expect(new LayerNorm(3, { elementwiseAffine: false }).weight).toBeUndefined();
    expect(() => ln.call(Tensor.ones([4, 3, 2]))).toThrow(
      /LayerNorm\(2, 3\): input \(4, 3, 2\) should end in \(2, 3\)/,
    );
  });

  it('RMSNorm divides by the root mean square of the last axis', () => {
    const norm = new RMSNorm(4, { eps: 1e-6 });
    const w = fill(norm.weight!, 16);
    const [x, xs] = input([3, 4], 17);
    const want = xs.map((v, flat) => {
      const row = xs.slice(Math.floor(flat / 4) * 4, Math.floor(flat / 4) * 4 + 4);
      return (v / Math.sqrt(mean(row.map((r) => r * r)) + 1e-6)) * w[flat % 4]!;
    });
    close(data(norm.call(x)), want, 1e-4);
  });

  it('GroupNorm normalizes each group of channels with the spatial axes', () => {
    const gn = new GroupNorm(2, 4);
    const w = fill(gn.weight!, 18);
    const b = fill(gn.bias!, 19);
    const shape = [2, 4, 3];
    const [x, xs] = input(shape, 20);
    const want = xs.map((v, flat) => {
      const [n, c] = unravel(flat, shape) as [number, number];
      const start = n * 12 + Math.floor(c / 2) * 6;
      const group = xs.slice(start, start + 6);
      return ((v - mean(group)) / Math.sqrt(variance(group) + 1e-5)) * w[c]! + b[c]!;
    });
    close(data(gn.call(x)), want, 1e-4);
    expect(() => new GroupNorm(3, 4)).toThrow(/numGroups 3 must divide numChannels 4/);
  });
});

describe('Embedding and Dropout', () => {
  it('Embedding looks up rows (unchecked out-of-range indices give zeros) and is glorot uniform', () => {
    const emb = new Embedding(50, 20);
    expectUniform(emb.weight, Math.sqrt(6 / 70));
    const w = data(emb.weight);
    const idx = new Tensor([
      [3, 0, 49],
      [7, 7, 50],
    ]);
    expect(() => emb.call(idx)).toThrow(
      'Embedding(50, 20): index 50 at position [1, 2] of the index tensor (2, 3) is out of range for a vocabulary of 50; valid values are 0..49',
    );
    const y = emb.call(idx.contiguous()); // lazy: not checked (CHECK_INDEX=0)
    expect(y.shape).toEqual([2, 3, 20]);
    const want = [3, 0, 49, 7, 7, 50].flatMap((i) =>
      i < 50 ? w.slice(i * 20, i * 20 + 20) : new Array<number>(20).fill(0),
    );
    expect(data(y)).toEqual(want);
    expect(() => emb.call(new Tensor([1.5]))).toThrow(
      /Embedding\(50, 20\): indices need an integer dtype, got float32/,
    );
  });

  it('Dropout is the identity in eval mode and drops and rescales in training', () => {
    const drop = new Dropout(0.25);
    const x = Tensor.ones([64, 32]);
    expect(data(drop.call(x)).every((v) => v === 1)).toBe(true);
    Tensor.training = true;
    const y = data(drop.call(x));
    expect(y.every((v) => v === 0 || Math.abs(v - 4 / 3) < 1e-6)).toBe(true);
    const kept = y.filter((v) => v !== 0).length / y.length;
    expect(kept).toBeGreaterThan(0.7);
    expect(kept).toBeLessThan(0.8);
    expect(() => new Dropout(1.5)).toThrow(/p must lie in \[0, 1\], got 1.5/);
  });
});

describe('CPU', () => {
  it('a conv, batch norm and linear stack gives the JS device result', () => {
    const build = () => ({
      conv: new Conv2d(2, 3, 3, { padding: 1, stride: 2 }),
      bn: new BatchNorm(3),
      lin: new Linear(12, 5),
    });
    const run = (m: ReturnType<typeof build>, x: Tensor) =>
      m.lin.call(m.bn.call(m.conv.call(x)).relu().flatten(1));
    const js = build();
    Device.default = 'CPU';
    const cpu = build();
    loadStateDict(cpu, getStateDict(js));
    expect(cpu.lin.weight.device).toBe('CPU');
    Tensor.training = true;
    const xs = values(2 * 2 * 4 * 4, 21);
    const got = data(run(cpu, new Tensor(new Float32Array(xs)).reshape([2, 2, 4, 4])));
    Device.default = 'JS';
    const want = data(run(js, new Tensor(new Float32Array(xs)).reshape([2, 2, 4, 4])));
    close(got, want, 1e-5);
    close(data(cpu.bn.runningVar!), data(js.bn.runningVar!), 1e-5);
  });
});
