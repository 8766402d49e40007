// Losses and functional nn (linear, batchnorm, varMean/stdMean, normalize) against plain-JS references.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { gradCheckAll } from './gradcheck.ts';
import { close, data, numel, ravel, reduceRef, unravel, values } from './reference.ts';

const f32 = (xs: number[], device: string, shape = [xs.length]) =>
  new Tensor(new Float32Array(xs), { device }).reshape(shape);
const i32 = (xs: number[], device: string, shape = [xs.length]) =>
  new Tensor(new Int32Array(xs), { device }).reshape(shape);
const sum = (v: number[]) => v.reduce((a, b) => a + b, 0);
const mean = (v: number[]) => sum(v) / v.length;
const setAt = (v: number[], i: number, x: number) => v.map((a, k) => (k === i ? x : a));

/** log-softmax along the class axis (1, or 0 for 1-D) of x, as a function of a flat index. */
function logSoftmaxRef(xs: number[], shape: number[]): number[] {
  const c = shape.length === 1 ? 0 : 1;
  return xs.map((v, flat) => {
    const idx = unravel(flat, shape);
    const row = Array.from({ length: shape[c]! }, (_, k) => xs[ravel(setAt(idx, c, k), shape)]!);
    const m = Math.max(...row);
    return v - m - Math.log(sum(row.map((r) => Math.exp(r - m))));
  });
}

/** The per-element cross entropy (and whether it counts) for class-index targets, PyTorch's definition. */
function ceIndexRef(xs: number[], shape: number[], ys: number[], ls = 0, ignore?: number) {
  const c = shape.length === 1 ? 0 : 1;
  const n = shape[c]!;
  const logp = logSoftmaxRef(xs, shape);
  const outShape = shape.filter((_, i) => i !== c);
  return ys.map((y, flat) => {
    const idx = unravel(flat, outShape);
    const at = (k: number) => logp[ravel([...idx.slice(0, c), k, ...idx.slice(c)], shape)]!;
    if (y === ignore) return { loss: 0, counts: false };
    const row = Array.from({ length: n }, (_, k) => at(k));
    return { loss: -((1 - ls) * at(y) + ls * mean(row)), counts: true };
  });
}

const reduceLoss = (losses: number[], reduction: string, count = losses.length) =>
  reduction === 'none' ? losses : reduction === 'sum' ? [sum(losses)] : [sum(losses) / count];

describe.each(DEVICES)('losses on %s', (device) => {
  it('crossEntropy with class indices: (N, C), (N, C, d) and (C) layouts, smoothing, ignoreIndex, reductions', () => {
    for (const [shape, ls, ignore] of [
      [[4, 3], 0, undefined],
      [[4, 3], 0.2, undefined],
      [[2, 3, 5], 0, 1],
      [[2, 3, 5], 0.1, 2],
      [[5], 0.3, undefined],
    ] as [number[], number, number | undefined][]) {
      const c = shape.length === 1 ? 0 : 1;
      const outShape = shape.filter((_, i) => i !== c);
      const xs = values(numel(shape), 7).map((v) => v * 3);
      const ys = values(numel(outShape), 8, true).map((v) => (v + 5) % shape[c]!);
      const logits = f32(xs, device, shape);
      const target = i32(ys, device, outShape);
      const ref = ceIndexRef(xs, shape, ys, ls, ignore);
      const kept = ref.filter((r) => r.counts).length;
      for (const reduction of ['none', 'sum', 'mean'] as const) {
        const got = logits.crossEntropy(target, { labelSmoothing: ls, ignoreIndex: ignore, reduction });
        expect(got.shape).toEqual(reduction === 'none' ? outShape : []);
        close(
          data(got),
          reduceLoss(
            ref.map((r) => r.loss),
            reduction,
            kept,
          ),
        );
      }
    }
  });

  it('crossEntropy: int64 targets, a permuted input, large logits, an unchecked out-of-range label gives NaN', () => {
    const xs = values(12, 3);
    const logits = f32(xs, device, [3, 4]).T; // (4, 3), not contiguous
    const perm = [0, 1, 2, 3].flatMap((i) => [0, 1, 2].map((j) => xs[j * 4 + i]!));
    const ys = [2, 0, 1, 1];
    const want = mean(ceIndexRef(perm, [4, 3], ys).map((r) => r.loss));
    close(data(logits.crossEntropy(new Tensor(ys, { device, dtype: dtypes.int64 }))), [want]);
    const big = f32([1000, -1000, 0, -1000, 1000, 0], device, [2, 3]);
    close(data(big.crossEntropy(i32([0, 0], device), { reduction: 'none' })), [0, 2000]);
    // a lazy target is not checked (CHECK_INDEX=0): NaN marks the bad labels; the host's data is checked
    const bad = big.crossEntropy(i32([3, -1], device).contiguous(), { reduction: 'none' });
    expect(data(bad).map(Number.isNaN)).toEqual([true, true]);
    expect(() => big.crossEntropy(i32([3, -1], device))).toThrow(
      'crossEntropy: class index 3 at position [0]',
    );
    // the ignored index may lie outside [0, C): PyTorch's default -100
    close(data(big.crossEntropy(i32([-100, 0], device), { ignoreIndex: -100 })), [2000]);
  });

  it('crossEntropy with class probabilities, smoothing and reductions', () => {
    const shape = [3, 4, 2];
    const xs = values(24, 12);
    const ps = values(24, 13).map((v) => Math.abs(v) / 2);
    const logp = logSoftmaxRef(xs, shape);
    for (const ls of [0, 0.25]) {
      const ref = reduceRef(
        xs.map((_, i) => i),
        shape,
        [1],
        (is) => -sum(is.map((i) => logp[i]! * (ps[i]! * (1 - ls) + ls / 4))),
      );
      for (const reduction of ['none', 'sum', 'mean'] as const) {
        const got = f32(xs, device, shape).crossEntropy(f32(ps, device, shape), {
          labelSmoothing: ls,
          reduction,
        });
        close(data(got), reduceLoss(ref, reduction));
      }
    }
  });

  it('nllLoss: weights, ignoreIndex, reductions, -inf log-probabilities in other classes', () => {
    const shape = [4, 3];
    const xs = logSoftmaxRef(values(12, 21), shape);
    const ys = [0, 2, 1, 2];
    const ws = [0.5, 2, 1.5];
    const pick = (n: number) => xs[n * 3 + ys[n]!]!;
    const logp = f32(xs, device, shape);
    const t = i32(ys, device);
    const w = f32(ws, device);
    close(data(logp.nllLoss(t)), [-mean(ys.map((_, n) => pick(n)))]);
    close(data(logp.nllLoss(t, { reduction: 'sum' })), [-sum(ys.map((_, n) => pick(n)))]);
    const weighted = ys.map((y, n) => -ws[y]! * pick(n));
    close(data(logp.nllLoss(t, { weight: w, reduction: 'none' })), weighted);
    close(data(logp.nllLoss(t, { weight: w })), [sum(weighted) / sum(ys.map((y) => ws[y]!))]);
    // ignoring class 2 drops elements 1 and 3 from the sum and from the weights' total
    close(data(logp.nllLoss(t, { weight: w, ignoreIndex: 2 })), [
      (weighted[0]! + weighted[2]!) / (ws[0]! + ws[1]!),
    ]);
    close(data(logp.nllLoss(t, { ignoreIndex: 2, reduction: 'none' })), [-pick(0), 0, -pick(2), 0]);
    close(data(logp.nllLoss(t, { ignoreIndex: 2 })), [-(pick(0) + pick(2)) / 2]);
    const withInf = f32([-Infinity, Math.log(0.5), Math.log(0.5)], device, [1, 3]);
    close(data(withInf.nllLoss(i32([1], device))), [Math.log(2)]);
    // (N, C, d) and (C) layouts
    const x3 = values(12, 5);
    const y3 = [1, 0, 1, 1];
    const ref3 = y3.map((y, f) => -x3[Math.floor(f / 2) * 4 + y * 2 + (f % 2)]!);
    close(
      data(f32(x3.slice(0, 8), device, [2, 2, 2]).nllLoss(i32(y3, device, [2, 2]), { reduction: 'none' })),
      ref3,
    );
    close(data(f32([-1, -2, -3], device).nllLoss(i32([2], device, []))), [3]);
    const bad = i32([0, 3, 1, -1], device);
    expect(data(logp.nllLoss(bad.contiguous(), { reduction: 'none' })).map(Number.isNaN)).toEqual([
      false,
      true,
      false,
      true,
    ]);
    expect(() => logp.nllLoss(bad)).toThrow('nllLoss: class index 3 at position [1]');
  });

  it('binaryCrossentropy on probabilities: clamped logs at 0 and 1, reductions', () => {
    const ps = values(10, 31).map((v) => (v + 2) / 4);
    const ys = values(10, 32).map((v) => (v > 0 ? 1 : 0.3));
    const ref = ps.map((p, i) => -(ys[i]! * Math.log(p) + (1 - ys[i]!) * Math.log(1 - p)));
    const p = f32(ps, device, [2, 5]);
    const y = f32(ys, device, [2, 5]);
    close(data(p.binaryCrossentropy(y)), [mean(ref)]);
    close(data(p.binaryCrossentropy(y, { reduction: 'sum' })), [sum(ref)]);
    close(data(p.binaryCrossentropy(y, { reduction: 'none' })), ref);
    close(
      data(f32([0, 1, 0, 1], device).binaryCrossentropy(f32([1, 0, 0, 1], device), { reduction: 'none' })),
      [100, 100, 0, 0],
    );
  });

  it('binaryCrossentropyLogits: stable for large logits, posWeight per class', () => {
    const xs = [...values(6, 41).map((v) => v * 4), 100, -100, 1000, -1000];
    const ys = [1, 0, 0.5, 1, 0, 0.2, 1, 1, 0, 1];
    const logsig = (x: number) => -(Math.max(-x, 0) + Math.log1p(Math.exp(-Math.abs(x))));
    const ref = (pw: (i: number) => number) =>
      xs.map((x, i) => -(pw(i) * ys[i]! * logsig(x) + (1 - ys[i]!) * logsig(-x)));
    const x = f32(xs, device, [5, 2]);
    const y = f32(ys, device, [5, 2]);
    close(
      data(x.binaryCrossentropyLogits(y, { reduction: 'none' })),
      ref(() => 1),
    );
    close(data(x.binaryCrossentropyLogits(y)), [mean(ref(() => 1))]);
    const pw = [2, 0.5];
    close(data(x.binaryCrossentropyLogits(y, { posWeight: f32(pw, device), reduction: 'sum' })), [
      sum(ref((i) => pw[i % 2]!)),
    ]);
  });
});

describe.each(DEVICES)('functional nn on %s', (device) => {
  it('linear: (in, out) weight with bias, 1-D weight, batched input', () => {
    const xs = values(12, 51);
    const ws = values(6, 52);
    const bs = [0.5, -1];
    const x = f32(xs, device, [2, 2, 3]);
    const ref = Array.from({ length: 8 }, (_, f) => {
      const [r, o] = [Math.floor(f / 2), f % 2];
      return sum([0, 1, 2].map((k) => xs[r * 3 + k]! * ws[k * 2 + o]!)) + bs[o]!;
    });
    close(data(x.linear(f32(ws, device, [3, 2]), f32(bs, device))), ref);
    close(
      data(x.linear(f32(ws.slice(0, 3), device))),
      xs.map((v, i) => v * ws[i % 3]!),
    );
    close(
      data(x.T.linear(f32([1, 2], device, [2, 1]))),
      [0, 1].flatMap((a) => [0, 1, 2].map((k) => xs[a * 6 + k]! + 2 * xs[a * 6 + 3 + k]!)),
    );
  });

  it('batchnorm: every parameter optional, axis 1, a negative axis, several axes, a full-rank invstd', () => {
    const shape = [2, 3, 2];
    const xs = values(12, 61);
    const [w, b, m, s] = [
      [1.5, -1, 2],
      [0.1, 0.2, 0.3],
      [0.5, -0.5, 0],
      [2, 0.5, 1],
    ];
    const ch = (i: number) => unravel(i, shape)[1]!;
    const x = f32(xs, device, shape);
    const t = (v: number[]) => f32(v, device);
    close(
      data(x.batchnorm(t(w), t(b), t(m), t(s))),
      xs.map((v, i) => (v - m[ch(i)]!) * w[ch(i)]! * s[ch(i)]! + b[ch(i)]!),
    );
    close(
      data(x.batchnorm(undefined, undefined, t(m), t(s))),
      xs.map((v, i) => (v - m[ch(i)]!) * s[ch(i)]!),
    );
    close(
      data(x.batchnorm(t(w), t(b), undefined, undefined)),
      xs.map((v, i) => v * w[ch(i)]! + b[ch(i)]!),
    );
    expect(data(x.batchnorm(undefined, undefined, undefined, undefined))).toEqual(xs);
    const last = (i: number) => i % 2;
    close(
      data(x.batchnorm(undefined, t([1, 2]), t([1, -1]), undefined, -1)),
      xs.map((v, i) => v - [1, -1][last(i)]! + [1, 2][last(i)]!),
    );
    const m2 = values(6, 62);
    close(
      data(x.batchnorm(undefined, undefined, f32(m2, device, [3, 2]), undefined, [1, 2])),
      xs.map((v, i) => v - m2[i % 6]!),
    );
    const full = values(12, 63);
    close(
      data(x.batchnorm(undefined, undefined, t(m), f32(full, device, shape))),
      xs.map((v, i) => (v - m[ch(i)]!) * full[i]!),
    );
  });

  it('varMean and stdMean: axes, keepdim, correction, ints', () => {
    const shape = [3, 4];
    const xs = values(12, 71);
    const varRef = (v: number[], c: number) => sum(v.map((a) => (a - mean(v)) ** 2)) / (v.length - c);
    const x = f32(xs, device, shape);
    for (const [axis, keepdim, correction] of [
      [1, false, 1],
      [0, true, 0],
      [-1, true, 2],
      [undefined, false, 1],
    ] as [number | undefined, boolean, number][]) {
      const [v, m] = x.varMean(axis, keepdim, correction);
      const [s, m2] = x.stdMean(axis, keepdim, correction);
      const axes = axis === undefined ? undefined : [axis];
      const vr = reduceRef(xs, shape, axes, (g) => varRef(g, correction));
      close(data(v), vr);
      close(data(s), vr.map(Math.sqrt));
      close(data(m), reduceRef(xs, shape, axes, mean));
      close(data(m2), data(m));
      expect(v.shape).toEqual(m.shape);
      expect(v.shape).toEqual(x.var(axis, keepdim).shape);
    }
    const [iv, im] = i32([1, 2, 3, 4], device).varMean();
    close(data(iv), [5 / 3]);
    close(data(im), [2.5]);
  });

  it('normalize: p = 2, 1, 3 and Infinity, dim, eps for zero vectors, a permuted input', () => {
    const shape = [2, 3, 2];
    const xs = values(12, 81);
    const x = f32(xs, device, shape);
    const normRef = (p: number, dim: number) => {
      const norms = reduceRef(xs, shape, [dim], (v) =>
        p === Infinity ? Math.max(...v.map(Math.abs)) : sum(v.map((a) => Math.abs(a) ** p)) ** (1 / p),
      );
      const outShape = shape.map((d, i) => (i === dim ? 1 : d));
      return xs.map((v, f) => v / Math.max(norms[ravel(setAt(unravel(f, shape), dim, 0), outShape)]!, 1e-12));
    };
    close(data(x.normalize()), normRef(2, 1));
    close(data(x.normalize({ p: 1, dim: -1 })), normRef(1, 2));
    close(data(x.normalize({ p: 3, dim: 0 })), normRef(3, 0));
    close(data(x.normalize({ p: Infinity })), normRef(Infinity, 1));
    close(data(f32([0, 0, 3, 4], device, [2, 2]).normalize()), [0, 0, 0.6, 0.8]);
    close(data(f32([1e-13, 0], device, [1, 2]).normalize({ eps: 1e-12 })), [0.1, 0]);
    close(data(x.permute(2, 0, 1).normalize({ dim: 2 })), data(x.normalize().permute(2, 0, 1).contiguous()));
  });
});

describe('errors name the op, the shapes and what is valid', () => {
  const t = (shape: number[]) => f32(new Array(numel(shape)).fill(0.5), 'JS', shape);
  const ints = (shape: number[]) => i32(new Array(numel(shape)).fill(0), 'JS', shape);
  it('crossEntropy', () => {
    expect(() => t([]).crossEntropy(ints([]))).toThrow(
      /^crossEntropy: input \(\) needs a class axis: \(C\), \(N, C\) or \(N, C, d1, \.\.\.\)$/,
    );
    expect(() => t([4, 3]).crossEntropy(ints([3]))).toThrow(
      /^crossEntropy: input \(4, 3\) and target \(3\); class indices need the input's shape without axis 1 \(4\)$/,
    );
    expect(() => t([2, 3, 5]).crossEntropy(ints([2, 3]))).toThrow(/without axis 1 \(2, 5\)$/);
    expect(() => t([4, 3]).crossEntropy(t([4]))).toThrow(
      /^crossEntropy: input \(4, 3\) and probability target \(4\) need the same shape \(class indices need an integer dtype\)$/,
    );
    expect(() => t([4, 3]).crossEntropy(t([4, 3]), { ignoreIndex: 1 })).toThrow(
      /^crossEntropy: ignoreIndex applies to class-index targets/,
    );
    expect(() => t([4, 3]).crossEntropy(ints([4]), { labelSmoothing: 1.5 })).toThrow(
      /^crossEntropy: labelSmoothing must be in \[0, 1\], got 1\.5$/,
    );
    expect(() => t([4, 3]).crossEntropy(ints([4]), { reduction: 'avg' as 'mean' })).toThrow(
      /^crossEntropy: reduction must be 'mean', 'sum' or 'none', got "avg"$/,
    );
  });
  it('nllLoss', () => {
    expect(() => t([4, 3]).nllLoss(t([4]))).toThrow(
      /^nllLoss: class-index target needs an integer dtype, got float32$/,
    );
    expect(() => t([4, 3]).nllLoss(ints([4]), { weight: t([4]) })).toThrow(
      /^nllLoss: weight \(4\) should have shape \(3\), one value per class$/,
    );
    expect(() => t([4, 3]).nllLoss(ints([4, 1]))).toThrow(/^nllLoss: input \(4, 3\) and target \(4, 1\)/);
    expect(() => t([4, 3]).nllLoss(ints([4]), { reduction: 'max' as 'sum' })).toThrow(
      /^nllLoss: reduction must be/,
    );
  });
  it('binary cross entropy', () => {
    expect(() => t([4]).binaryCrossentropy(t([4, 1]))).toThrow(
      /^binaryCrossentropy: input \(4\) and target \(4, 1\) need the same shape$/,
    );
    expect(() => t([4]).binaryCrossentropy(t([4]), { reduction: 'x' as 'sum' })).toThrow(
      /^binaryCrossentropy: reduction must be/,
    );
    expect(() => t([2, 3]).binaryCrossentropyLogits(t([3]))).toThrow(
      /^binaryCrossentropyLogits: input \(2, 3\) and target \(3\) need the same shape$/,
    );
    expect(() => t([2, 3]).binaryCrossentropyLogits(t([2, 3]), { posWeight: t([2]) })).toThrow(
      /^binaryCrossentropyLogits: posWeight: cannot broadcast shapes \(2, 3\) and \(2\)/,
    );
    expect(() => t([2, 3]).binaryCrossentropyLogits(t([2, 3]), { posWeight: t([4, 1, 1]) })).toThrow(
      /^binaryCrossentropyLogits: posWeight \(4, 1, 1\) must broadcast to the input's shape \(2, 3\)$/,
    );
  });
  it('functional nn', () => {
    expect(() => t([2, 3]).linear(t([4, 2]))).toThrow(
      /^linear: input \(2, 3\) and weight \(4, 2\); weight needs shape \(in, out\) or \(in\) with in = the input's last axis$/,
    );
    expect(() => t([2, 3]).linear(t([3, 2, 1]))).toThrow(/^linear: input \(2, 3\) and weight \(3, 2, 1\)/);
    expect(() => t([2, 3]).linear(t([3, 2]), t([3]))).toThrow(
      /^linear: bias: cannot broadcast shapes \(2, 2\) and \(3\)/,
    );
    expect(() => t([2, 3, 4]).batchnorm(t([4]), undefined, undefined, undefined)).toThrow(
      /^batchnorm: weight \(4\) should have shape \(3\), one value per channel along axis 1 of input \(2, 3, 4\)$/,
    );
    expect(() => t([2, 3, 4]).batchnorm(undefined, undefined, t([3]), undefined, 3)).toThrow(
      /axis 3 is out of range for shape \(2, 3, 4\)/,
    );
    expect(() => t([2, 3]).normalize({ p: 0 })).toThrow(
      /^normalize: p must be a positive number or Infinity, got 0$/,
    );
    expect(() => t([2, 3]).normalize({ dim: 2 })).toThrow(/axis 2 is out of range for shape \(2, 3\)/);
  });
});

describe('gradients against central differences (float64)', () => {
  const labels = (ys: number[], shape = [ys.length]) =>
    new Tensor(new Int32Array(ys), { device: 'JS' }).reshape(shape);
  it('losses', () => {
    gradCheckAll({
      'crossEntropy (indices)': { shapes: [[4, 3]], f: (x) => x.crossEntropy(labels([0, 2, 1, 2])) },
      'crossEntropy (N, C, d), smoothing, ignoreIndex': {
        shapes: [[2, 3, 2]],
        f: (x) => x.crossEntropy(labels([0, 2, 1, 1], [2, 2]), { labelSmoothing: 0.2, ignoreIndex: 1 }),
      },
      'crossEntropy (probabilities)': {
        shapes: [
          [3, 4],
          [3, 4],
        ],
        f: (x, p) => x!.crossEntropy(p!, { labelSmoothing: 0.1, reduction: 'sum' }),
        domain: ['default', [0, 1]],
      },
      nllLoss: {
        shapes: [[4, 3], [3]],
        f: (x, w) => x!.nllLoss(labels([0, 2, 1, 2]), { weight: w!, ignoreIndex: 1 }),
        domain: ['default', 'positive'],
      },
      binaryCrossentropy: {
        shapes: [
          [2, 3],
          [2, 3],
        ],
        f: (p, y) => p!.binaryCrossentropy(y!),
        domain: [
          [0.05, 0.95],
          [0, 1],
        ],
      },
      binaryCrossentropyLogits: {
        shapes: [[2, 3], [2, 3], [3]],
        f: (x, y, pw) => x!.mul(5).binaryCrossentropyLogits(y!, { posWeight: pw!, reduction: 'none' }),
        domain: ['default', [0, 1], 'positive'],
      },
    });
  });
  it('functional nn', () => {
    gradCheckAll({
      linear: { shapes: [[2, 3], [3, 4], [4]], f: (x, w, b) => x!.linear(w!, b!) },
      'linear, 1-D weight': { shapes: [[2, 3], [3]], f: (x, w) => x!.linear(w!) },
      batchnorm: {
        shapes: [[2, 3, 2], [3], [3], [3], [3]],
        f: (x, w, b, m, s) => x!.batchnorm(w!, b!, m!, s!),
      },
      varMean: {
        shapes: [[3, 4]],
        f: (x) => {
          const [v, m] = x!.varMean(1);
          return v.add(m.mul(3));
        },
      },
      stdMean: {
        shapes: [[3, 4]],
        f: (x) => {
          const [s, m] = x!.stdMean(0, true, 0);
          return s.mul(m);
        },
      },
      normalize: { shapes: [[2, 3, 2]], f: (x) => x!.normalize() },
      'normalize p = 1, 3': {
        shapes: [[3, 2]],
        f: (x) => x!.normalize({ p: 1, dim: 0 }).add(x!.normalize({ p: 3, dim: 1 })),
      },
    });
  });
});
