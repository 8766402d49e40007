// Conv1d, ConvTranspose1d, N-d Conv2d kernels, InstanceNorm, LayerNorm2d and LSTMCell against plain-JS references on JS and CPU, with gradients.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import {
  assign,
  Conv1d,
  Conv2d,
  ConvTranspose1d,
  ConvTranspose2d,
  getParameters,
  InstanceNorm,
  LayerNorm2d,
  LSTMCell,
} from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { useDefaultDevice } from '../default-device.ts';
import { DEVICES } from '../devices.ts';
import { close, data, numel, ravel, unravel, values } from '../tensor/reference.ts';

/** A seeded float32 input of a shape, as a tensor and as plain numbers. */
function input(shape: number[], seed: number): [Tensor, number[]] {
  const xs = values(numel(shape), seed);
  return [new Tensor(new Float32Array(xs)).reshape(shape), xs];
}

/** Sets a layer tensor to seeded values (so affine parameters are not the trivial ones and zeros). */
function fill(t: Tensor, seed: number): number[] {
  const xs = values(t.numel, seed);
  assign(t, new Tensor(new Float32Array(xs), { device: t.device }).reshape(t.shape).realize());
  return xs;
}

interface Conv {
  stride: number[];
  padding: number[];
  dilation: number[];
  groups: number;
}

/** Direct N-d convolution of x (N, Cin, ...size) by w (Cout, Cin / groups, ...k), plus b. */
function convRef(
  xs: number[],
  xShape: number[],
  w: number[],
  wShape: number[],
  b: number[],
  c: Conv,
): { shape: number[]; out: number[] } {
  const [n, cin, ...size] = xShape as [number, number, ...number[]];
  const [cout, cg, ...k] = wShape as [number, number, ...number[]];
  const og = cout / c.groups;
  const outSize = size.map(
    (s, j) => Math.floor((s + 2 * c.padding[j]! - c.dilation[j]! * (k[j]! - 1) - 1) / c.stride[j]!) + 1,
  );
  const shape = [n, cout, ...outSize];
  const out = Array.from({ length: numel(shape) }, (_, flat) => {
    const [bi, o, ...pos] = unravel(flat, shape) as [number, number, ...number[]];
    const g = Math.floor(o / og);
    let s = b[o] ?? 0;
    for (let ci = 0; ci < cg; ci++)
      for (let kf = 0; kf < numel(k); kf++) {
        const kk = unravel(kf, k);
        const at = pos.map((p, j) => p * c.stride[j]! - c.padding[j]! + kk[j]! * c.dilation[j]!);
        if (at.some((a, j) => a < 0 || a >= size[j]!)) continue;
        s += xs[ravel([bi, g * cg + ci, ...at], [n, cin, ...size])]! * w[ravel([o, ci, ...kk], wShape)]!;
      }
    return s;
  });
  return { shape, out };
}

/** 1-D transposed convolution by scattering x[n, ci, i] w[ci, o, k] to output i stride - padding + k dilation. */
function convTranspose1dRef(
  xs: number[],
  xShape: number[],
  w: number[],
  wShape: number[],
  b: number[],
  c: { stride: number; padding: number; dilation: number; outputPadding: number; groups: number },
): { shape: number[]; out: number[] } {
  const [n, cin, len] = xShape as [number, number, number];
  const [, og, k] = wShape as [number, number, number];
  const cg = cin / c.groups;
  const outLen = (len - 1) * c.stride - 2 * c.padding + c.dilation * (k - 1) + c.outputPadding + 1;
  const shape = [n, og * c.groups, outLen];
  const out = Array.from({ length: numel(shape) }, (_, flat) => b[unravel(flat, shape)[1]!] ?? 0);
  xs.forEach((x, flat) => {
    const [bi, ci, i] = unravel(flat, xShape) as [number, number, number];
    const g = Math.floor(ci / cg);
    for (let o = 0; o < og; o++)
      for (let kk = 0; kk < k; kk++) {
        const at = i * c.stride - c.padding + kk * c.dilation;
        if (at >= 0 && at < outLen)
          out[ravel([bi, g * og + o, at], shape)]! += x * w[ravel([ci, o, kk], wShape)]!;
      }
  });
  return { shape, out };
}

const sigmoid = (v: number) => 1 / (1 + Math.exp(-v));

/** One LSTM step in plain JS: gates = W_ih x + b_ih + W_hh h + b_hh, split i, f, g, o. */
function lstmRef(
  x: number[][],
  h: number[][],
  c: number[][],
  wih: number[],
  whh: number[],
  bih: number[] | undefined,
  bhh: number[] | undefined,
  hidden: number,
): [number[][], number[][]] {
  const hs: number[][] = [];
  const cs: number[][] = [];
  x.forEach((xr, r) => {
    const gate = (row: number) => {
      let s = (bih?.[row] ?? 0) + (bhh?.[row] ?? 0);
      xr.forEach((v, j) => {
        s += wih[row * xr.length + j]! * v;
      });
      h[r]!.forEach((v, j) => {
        s += whh[row * hidden + j]! * v;
      });
      return s;
    };
    const cNew = Array.from({ length: hidden }, (_, u) => {
      const [i, f, g] = [sigmoid(gate(u)), sigmoid(gate(hidden + u)), Math.tanh(gate(2 * hidden + u))];
      return f * c[r]![u]! + i * g;
    });
    hs.push(cNew.map((cv, u) => sigmoid(gate(3 * hidden + u)) * Math.tanh(cv)));
    cs.push(cNew);
  });
  return [hs, cs];
}

/** Rows of a flat (rows, cols) array. */
const rowsOf = (xs: number[], cols: number) =>
  Array.from({ length: xs.length / cols }, (_, r) => xs.slice(r * cols, (r + 1) * cols));

/**
 * Checks d sum(f(x) w) / dx for fixed random weights w against central differences, in float64 on JS.
 */
function gradCheck(shape: number[], f: (x: Tensor) => Tensor): void {
  const opts = { dtype: dtypes.float64, device: 'JS' };
  const xs = values(numel(shape), 77).map((v) => v * 0.7);
  const leaf = new Tensor(new Float64Array(xs), opts);
  const out = f(leaf.reshape(shape));
  const w = new Tensor(new Float64Array(values(out.numel, 5)), opts).reshape(out.shape);
  const [grad] = Tensor.gradient(out.mul(w).sum(), [leaf]);
  const at = (i: number, d: number) => {
    const moved = xs.slice();
    moved[i]! += d;
    return Number(
      f(new Tensor(new Float64Array(moved), opts).reshape(shape))
        .mul(w)
        .sum()
        .item(),
    );
  };
  const h = 1e-6;
  close(
    data(grad!),
    xs.map((_, i) => (at(i, h) - at(i, -h)) / (2 * h)),
    1e-5,
  );
}

// CPU kernels compile with gcc on first use; the cache makes later runs fast
describe.each(DEVICES)('on %s', (device) => {
  useDefaultDevice(device);

  describe('convolutions with a kernel of any rank', () => {
    it.each([
      { stride: [1], padding: [0], dilation: [1], groups: 1 },
      { stride: [2], padding: [2], dilation: [2], groups: 2 },
    ])('Conv1d matches a direct convolution (stride $stride, groups $groups)', (c) => {
      const conv = new Conv1d(4, 6, 3, {
        stride: c.stride[0],
        padding: c.padding[0],
        dilation: c.dilation[0],
        groups: c.groups,
      });
      expect(conv.weight.shape).toEqual([6, 4 / c.groups, 3]);
      const [x, xs] = input([2, 4, 7], 2);
      const ref = convRef(xs, [2, 4, 7], data(conv.weight), conv.weight.shape, data(conv.bias!), c);
      const y = conv.call(x);
      expect(y.shape).toEqual(ref.shape);
      close(data(y), ref.out, 1e-5);
    });

    it('Conv2d with a kernel list sets the spatial rank: [3] is 1-D, [2, 2, 2] 3-D; a number is 2-D', () => {
      const c1 = new Conv2d(2, 3, [3]);
      expect(c1.weight.shape).toEqual([3, 2, 3]);
      const [x1, xs1] = input([1, 2, 5], 4);
      const c = { stride: [1], padding: [0], dilation: [1], groups: 1 };
      const ref1 = convRef(xs1, [1, 2, 5], data(c1.weight), c1.weight.shape, data(c1.bias!), c);
      close(data(c1.call(x1)), ref1.out, 1e-5);

      const c3 = new Conv2d(2, 2, [2, 2, 2], { padding: 1, bias: false });
      expect(c3.weight.shape).toEqual([2, 2, 2, 2, 2]);
      expect(c3.bias).toBeUndefined();
      const [x3, xs3] = input([1, 2, 3, 2, 3], 5);
      const c3opts = { stride: [1, 1, 1], padding: [1, 1, 1], dilation: [1, 1, 1], groups: 1 };
      const ref3 = convRef(xs3, x3.shape, data(c3.weight), c3.weight.shape, [], c3opts);
      const y3 = c3.call(x3);
      expect(y3.shape).toEqual(ref3.shape);
      close(data(y3), ref3.out, 1e-5);

      expect(new Conv2d(2, 3, 3).weight.shape).toEqual([3, 2, 3, 3]);
      expect(new ConvTranspose2d(2, 3, [4]).weight.shape).toEqual([2, 3, 4]);
    });

    it.each([
      { stride: 1, padding: 0, dilation: 1, outputPadding: 0, groups: 1 },
      { stride: 3, padding: 1, dilation: 2, outputPadding: 1, groups: 2 },
    ])('ConvTranspose1d matches a scattering reference (stride $stride, groups $groups)', (c) => {
      const conv = new ConvTranspose1d(4, 6, 3, c);
      expect(conv.weight.shape).toEqual([4, 6 / c.groups, 3]);
      const [x, xs] = input([2, 4, 5], 3);
      const ref = convTranspose1dRef(
        xs,
        [2, 4, 5],
        data(conv.weight),
        conv.weight.shape,
        data(conv.bias!),
        c,
      );
      const y = conv.call(x);
      expect(y.shape).toEqual(ref.shape);
      close(data(y), ref.out, 1e-5);
    });

    it('Conv1d and ConvTranspose1d take a non-contiguous (permuted) input', () => {
      const [x, xs] = input([2, 5, 4], 6);
      const conv = new Conv1d(4, 3, 2);
      const xt = rowsOf(xs, 4);
      // (N, L, C) permuted to (N, C, L)
      const perm = Array.from({ length: 2 * 4 * 5 }, (_, flat) => {
        const [n, ch, l] = unravel(flat, [2, 4, 5]) as [number, number, number];
        return xt[n * 5 + l]![ch]!;
      });
      const c = { stride: [1], padding: [0], dilation: [1], groups: 1 };
      const ref = convRef(perm, [2, 4, 5], data(conv.weight), conv.weight.shape, data(conv.bias!), c);
      close(data(conv.call(x.permute([0, 2, 1]))), ref.out, 1e-5);
      const tconv = new ConvTranspose1d(4, 2, 2, { stride: 2 });
      const tc = { stride: 2, padding: 0, dilation: 1, outputPadding: 0, groups: 1 };
      const tref = convTranspose1dRef(
        perm,
        [2, 4, 5],
        data(tconv.weight),
        tconv.weight.shape,
        data(tconv.bias!),
        tc,
      );
      close(data(tconv.call(x.permute([0, 2, 1]))), tref.out, 1e-5);
    });
  });

  describe('InstanceNorm and LayerNorm2d', () => {
    it('InstanceNorm normalizes each (sample, channel) over its spatial axes, then scales and shifts', () => {
      const norm = new InstanceNorm(3);
      const w = fill(norm.weight!, 8);
      const b = fill(norm.bias!, 9);
      const shape = [2, 3, 2, 4];
      const [x, xs] = input(shape, 10);
      const want = xs.map((v, flat) => {
        const [n, ch] = unravel(flat, shape) as [number, number];
        const group = xs.filter((_, f) => {
          const [m, d] = unravel(f, shape);
          return m === n && d === ch;
        });
        const mean = group.reduce((a, g) => a + g, 0) / group.length;
        const variance = group.reduce((a, g) => a + (g - mean) ** 2, 0) / group.length;
        return ((v - mean) / Math.sqrt(variance + 1e-5)) * w[ch]! + b[ch]!;
      });
      close(data(norm.call(x)), want, 1e-4);
      // non-contiguous: the same values reached through a permute of a (2, 2, 4, 3) tensor
      const xp = x.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2]);
      close(data(norm.call(xp)), want, 1e-4);
    });

    it('InstanceNorm without affine has no parameters; size-1 spatial axes give zeros', () => {
      const norm = new InstanceNorm(2, { affine: false, eps: 1e-3 });
      expect(norm.weight).toBeUndefined();
      expect(getParameters(norm)).toHaveLength(0);
      const [x, xs] = input([1, 2, 3], 11);
      const want = [0, 1].flatMap((ch) => {
        const g = xs.slice(ch * 3, ch * 3 + 3);
        const mean = (g[0]! + g[1]! + g[2]!) / 3;
        const variance = g.reduce((a, v) => a + (v - mean) ** 2, 0) / 3;
        return g.map((v) => (v - mean) / Math.sqrt(variance + 1e-3));
      });
      close(data(norm.call(x)), want, 1e-4);
      close(data(new InstanceNorm(2).call(input([2, 2, 1], 12)[0])), [0, 0, 0, 0]);
      expect(new InstanceNorm(5, { affine: true }).weight!.shape).toEqual([5]);
    });

    it('LayerNorm2d normalizes over the channels at each position of NCHW', () => {
      const norm = new LayerNorm2d(3);
      const w = fill(norm.weight!, 13);
      const b = fill(norm.bias!, 14);
      const shape = [2, 3, 2, 2];
      const [x, xs] = input(shape, 15);
      const want = xs.map((v, flat) => {
        const [n, ch, y, xx] = unravel(flat, shape) as [number, number, number, number];
        const col = [0, 1, 2].map((d) => xs[ravel([n, d, y, xx], shape)]!);
        const mean = col.reduce((a, g) => a + g, 0) / 3;
        const variance = col.reduce((a, g) => a + (g - mean) ** 2, 0) / 3;
        return ((v - mean) / Math.sqrt(variance + 1e-5)) * w[ch]! + b[ch]!;
      });
      const y = norm.call(x);
      expect(y.shape).toEqual(shape);
      close(data(y), want, 1e-4);
      close(data(norm.call(x.flip([2]).flip([2]))), want, 1e-4);
    });
  });

  describe('LSTMCell', () => {
    it('matches PyTorch gates (i, f, g, o) with a given state, batched', () => {
      const cell = new LSTMCell(3, 2);
      expect(cell.weightIh.shape).toEqual([8, 3]);
      expect(cell.weightHh.shape).toEqual([8, 2]);
      expect(cell.biasIh!.shape).toEqual([8]);
      const wih = fill(cell.weightIh, 20);
      const whh = fill(cell.weightHh, 21);
      const bih = fill(cell.biasIh!, 22);
      const bhh = fill(cell.biasHh!, 23);
      const [x, xs] = input([4, 3], 24);
      const [h0, hs] = input([4, 2], 25);
      const [c0, cs] = input([4, 2], 26);
      const [h, c] = cell.call(x, [h0, c0]);
      const [hw, cw] = lstmRef(rowsOf(xs, 3), rowsOf(hs, 2), rowsOf(cs, 2), wih, whh, bih, bhh, 2);
      expect(h.shape).toEqual([4, 2]);
      close(data(h), hw.flat(), 1e-5);
      close(data(c), cw.flat(), 1e-5);
      // a second step from the returned state
      const [h2, c2] = cell.call(x, [h, c]);
      const [hw2, cw2] = lstmRef(rowsOf(xs, 3), hw, cw, wih, whh, bih, bhh, 2);
      close(data(h2), hw2.flat(), 1e-5);
      close(data(c2), cw2.flat(), 1e-5);
    });

    it('starts from zeros without a state, takes an unbatched input, and works without biases', () => {
      const cell = new LSTMCell(2, 3, { bias: false });
      expect(cell.biasIh).toBeUndefined();
      expect(getParameters(cell)).toHaveLength(2);
      const wih = fill(cell.weightIh, 30);
      const whh = fill(cell.weightHh, 31);
      const [x, xs] = input([2], 32);
      const zeros = [[0, 0, 0]];
      const [hw, cw] = lstmRef([xs], zeros, zeros, wih, whh, undefined, undefined, 3);
      const [h, c] = cell.call(x);
      expect(h.shape).toEqual([3]);
      close(data(h), hw[0]!, 1e-5);
      close(data(c), cw[0]!, 1e-5);
      const [hb] = cell.call(x.unsqueeze(0).expand([2, 2]));
      close(data(hb), [...hw[0]!, ...hw[0]!], 1e-5);
    });

    it('initializes weights and biases uniform in ±1/sqrt(hidden)', () => {
      const cell = new LSTMCell(30, 16);
      for (const t of [cell.weightIh, cell.weightHh, cell.biasIh!, cell.biasHh!]) {
        const v = data(t);
        expect(Math.max(...v.map(Math.abs))).toBeLessThanOrEqual(0.25);
        expect(Math.max(...v.map(Math.abs))).toBeGreaterThan(0.2);
        expect(t.requiresGrad).toBe(true);
      }
    });
  });
});

describe('gradients against central differences (float64)', () => {
  useDefaultDevice('JS');

  it('Conv1d and ConvTranspose1d', () => {
    const conv = new Conv1d(2, 3, 2, { stride: 2, padding: 1 });
    gradCheck([2, 2, 5], (x) => conv.call(x));
    const tconv = new ConvTranspose1d(2, 2, 3, { stride: 2, padding: 1, outputPadding: 1 });
    gradCheck([1, 2, 4], (x) => tconv.call(x));
  });

  it('InstanceNorm and LayerNorm2d', () => {
    const inorm = new InstanceNorm(2);
    fill(inorm.weight!, 40);
    gradCheck([2, 2, 3], (x) => inorm.call(x));
    const lnorm = new LayerNorm2d(3);
    fill(lnorm.bias!, 41);
    gradCheck([1, 3, 2, 2], (x) => lnorm.call(x));
  });

  it('LSTMCell through h and c, with respect to x and the state', () => {
    const cell = new LSTMCell(3, 2);
    gradCheck([2, 3], (x) => {
      const [h, c] = cell.call(x);
      return h.add(c.mul(0.5));
    });
    const x = new Tensor(new Float64Array(values(6, 50)), { device: 'JS' }).reshape([2, 3]);
    gradCheck([2, 2], (h0) => cell.call(x, [h0, h0.mul(2)])[0]);
  });
});

describe('errors', () => {
  it('names the layer, the bad value and what would be valid', () => {
    expect(() => new Conv2d(2, 3, [])).toThrow(
      'Conv2d: kernelSize [] should be a positive integer or a non-empty list of them (one per spatial axis)',
    );
    expect(() => new Conv2d(2, 3, [3, 0])).toThrow(
      'Conv2d: kernelSize [3,0] should be one integer >= 1 or 2 of them',
    );
    expect(() => new Conv1d(2, 3, [3] as unknown as number)).toThrow(
      'Conv1d: kernelSize [[3]] should be one integer >= 1 or 1 of them',
    );
    expect(() => new Conv1d(3, 4, 2, { groups: 2 })).toThrow(
      'Conv1d: groups 2 must divide inChannels 3 and outChannels 4',
    );
    expect(() => new ConvTranspose1d(2, 2, 2.5)).toThrow(
      'ConvTranspose1d: kernelSize [2.5] should be one integer >= 1 or 1 of them',
    );
    expect(() => new Conv1d(2, 3, 2).call(Tensor.ones([1, 2, 3, 3], { device: 'JS' }))).toThrow(
      'Conv1d: input (1, 2, 3, 3) should be (N, 2, L)',
    );
    expect(() => new ConvTranspose1d(2, 3, 2).call(Tensor.ones([2, 5], { device: 'JS' }))).toThrow(
      'ConvTranspose1d: input (2, 5) should be (N, 2, L)',
    );
    expect(() => new InstanceNorm(3).call(Tensor.ones([2, 4, 5], { device: 'JS' }))).toThrow(
      'InstanceNorm(3): input (2, 4, 5) should be (N, 3, ...), channels on axis 1',
    );
    expect(() => new InstanceNorm(0)).toThrow('InstanceNorm: numFeatures must be a positive integer, got 0');
    expect(() => new InstanceNorm(2, { eps: 0 })).toThrow('InstanceNorm: eps must be positive, got 0');
    expect(() => new LayerNorm2d(3).call(Tensor.ones([2, 3, 4], { device: 'JS' }))).toThrow(
      'LayerNorm2d(3): input (2, 3, 4) should be (N, 3, H, W)',
    );
    expect(() => new LSTMCell(3, 0)).toThrow('LSTMCell: hiddenSize must be a positive integer, got 0');
    const cell = new LSTMCell(3, 2);
    expect(() => cell.call(Tensor.ones([2, 4], { device: 'JS' }))).toThrow(
      'LSTMCell(3, 2): input (2, 4) should be (N, 3) or (3)',
    );
    const x = Tensor.ones([2, 3], { device: 'JS' });
    expect(() => cell.call(x, [Tensor.zeros([2, 2]), Tensor.zeros([1, 2])])).toThrow(
      'LSTMCell(3, 2): c (1, 2) should be (2, 2) beside input (2, 3)',
    );
  });
});
