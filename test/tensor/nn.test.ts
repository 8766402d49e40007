// einsum, conv, pools, norms, losses and attention on JS and CPU against naive JS loops; kernel counts.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { close, data, mapRef, numel, ravel, unravel, values } from './reference.ts';

/** An n-d array in plain JS. */
interface Nd {
  shape: number[];
  data: number[];
}
const rand = (shape: number[], seed: number): Nd => ({ shape, data: values(numel(shape), seed) });

/** Einstein summation by brute force over every assignment of the letters (explicit output, letters only). */
function einsumRef(formula: string, ...xs: Nd[]): number[] {
  const [lhs, out] = formula.split('->') as [string, string];
  const terms = lhs.split(',');
  const sizes = new Map<string, number>();
  terms.forEach((t, i) => {
    [...t].forEach((l, k) => {
      sizes.set(l, Math.max(sizes.get(l) ?? 1, xs[i]!.shape[k]!));
    });
  });
  const letters = [...sizes.keys()];
  const outShape = [...out].map((l) => sizes.get(l)!);
  const res = new Array<number>(numel(outShape)).fill(0);
  for (let flat = 0; flat < numel(letters.map((l) => sizes.get(l)!)); flat++) {
    const idx = unravel(
      flat,
      letters.map((l) => sizes.get(l)!),
    );
    const val = (l: string) => idx[letters.indexOf(l)]!;
    const term = terms.reduce((p, t, i) => {
      const at = [...t].map((l, k) => (xs[i]!.shape[k] === 1 ? 0 : val(l)));
      return p * xs[i]!.data[ravel(at, xs[i]!.shape)]!;
    }, 1);
    res[ravel([...out].map(val), outShape)]! += term;
  }
  return res;
}

interface Window {
  stride: [number, number];
  pad: [[number, number], [number, number]];
  dilation: [number, number];
}

/** The output size of a window along one axis. */
const outSize = (len: number, k: number, s: number, [a, b]: [number, number], d: number) =>
  Math.floor((len + a + b - d * (k - 1) - 1) / s) + 1;

/** Naive NCHW convolution with groups and bias. */
function convRef(x: Nd, w: Nd, bias: number[] | undefined, groups: number, win: Window): Nd {
  const [n, , h, wd] = x.shape as [number, number, number, number];
  const [co, cg, kh, kw] = w.shape as [number, number, number, number];
  const oh = outSize(h, kh, win.stride[0], win.pad[0], win.dilation[0]);
  const ow = outSize(wd, kw, win.stride[1], win.pad[1], win.dilation[1]);
  const shape = [n, co, oh, ow];
  const out = new Array<number>(numel(shape)).fill(0).map((_, flat) => {
    const [b, o, i, j] = unravel(flat, shape) as [number, number, number, number];
    const g = Math.floor(o / (co / groups));
    let s = bias?.[o] ?? 0;
    for (let c = 0; c < cg; c++)
      for (let p = 0; p < kh; p++)
        for (let q = 0; q < kw; q++) {
          const y = i * win.stride[0] + p * win.dilation[0] - win.pad[0][0];
          const z = j * win.stride[1] + q * win.dilation[1] - win.pad[1][0];
          if (y < 0 || y >= h || z < 0 || z >= wd) continue;
          s += x.data[ravel([b, g * cg + c, y, z], x.shape)]! * w.data[ravel([o, c, p, q], w.shape)]!;
        }
    return s;
  });
  return { shape, data: out };
}

/** The gradients of sum(conv(x, w) * gy) by the naive loops: every product's share goes back to x and w. */
function convGradRef(x: Nd, w: Nd, gy: Nd, groups: number, win: Window): { dx: number[]; dw: number[] } {
  const [, , h, wd] = x.shape as [number, number, number, number];
  const [co, cg, kh, kw] = w.shape as [number, number, number, number];
  const dx = new Array<number>(numel(x.shape)).fill(0);
  const dw = new Array<number>(numel(w.shape)).fill(0);
  gy.data.forEach((g, flat) => {
    const [b, o, i, j] = unravel(flat, gy.shape) as [number, number, number, number];
    const c0 = Math.floor(o / (co / groups)) * cg;
    for (let c = 0; c < cg; c++)
      for (let p = 0; p < kh; p++)
        for (let q = 0; q < kw; q++) {
          const y = i * win.stride[0] + p * win.dilation[0] - win.pad[0][0];
          const z = j * win.stride[1] + q * win.dilation[1] - win.pad[1][0];
          if (y < 0 || y >= h || z < 0 || z >= wd) continue;
          const xi = ravel([b, c0 + c, y, z], x.shape);
          const wi = ravel([o, c, p, q], w.shape);
          dx[xi]! += g * w.data[wi]!;
          dw[wi]! += g * x.data[xi]!;
        }
  });
  return { dx, dw };
}

/** Naive pooling over the last two axes; padding takes `padValue`, the mean divides by the whole window. */
function poolRef(x: Nd, k: [number, number], win: Window, kind: 'max' | 'avg'): Nd {
  const lead = x.shape.slice(0, -2);
  const [h, wd] = x.shape.slice(-2) as [number, number];
  const oh = outSize(h, k[0], win.stride[0], win.pad[0], win.dilation[0]);
  const ow = outSize(wd, k[1], win.stride[1], win.pad[1], win.dilation[1]);
  const shape = [...lead, oh, ow];
  const out = new Array<number>(numel(shape)).fill(0).map((_, flat) => {
    const idx = unravel(flat, shape);
    const [i, j] = idx.slice(-2) as [number, number];
    const seen: number[] = [];
    for (let p = 0; p < k[0]; p++)
      for (let q = 0; q < k[1]; q++) {
        const y = i * win.stride[0] + p * win.dilation[0] - win.pad[0][0];
        const z = j * win.stride[1] + q * win.dilation[1] - win.pad[1][0];
        const inside = y >= 0 && y < h && z >= 0 && z < wd;
        seen.push(
          inside ? x.data[ravel([...idx.slice(0, -2), y, z], x.shape)]! : kind === 'max' ? -Infinity : 0,
        );
      }
    return kind === 'max' ? Math.max(...seen) : seen.reduce((a, b) => a + b, 0) / seen.length;
  });
  return { shape, data: out };
}

const win = (s: [number, number], p: [[number, number], [number, number]], d: [number, number]): Window => ({
  stride: s,
  pad: p,
  dilation: d,
});

for (const device of DEVICES)
  describe(`nn functions on ${device}`, () => {
    const T = (x: Nd) => new Tensor(new Float32Array(x.data), { device }).reshape(x.shape);

    it('einsum: explicit and implicit output, traces, diagonals, batches, outer products, 3 operands', () => {
      const a = rand([3, 4], 1);
      const b = rand([4, 5], 2);
      const sq = rand([4, 4], 3);
      const v = rand([4], 4);
      const bat = rand([2, 3, 4], 5);
      const cases: [string, Nd[], string][] = [
        ['ij,jk->ik', [a, b], 'ij,jk->ik'],
        ['ij,jk', [a, b], 'ij,jk->ik'],
        ['ij->ji', [a], 'ij->ji'],
        ['ba', [a], 'ba->ab'],
        ['ii', [sq], 'ii->'],
        ['ii->i', [sq], 'ii->i'],
        ['i,i', [v, v], 'i,i->'],
        ['i,j->ij', [v, v], 'i,j->ij'],
        ['bij,bjk->bik', [bat, rand([2, 4, 3], 6)], 'bij,bjk->bik'],
        ['ij,jk,kl->il', [a, b, rand([5, 2], 7)], 'ij,jk,kl->il'],
        ['iji->j', [rand([3, 2, 3], 8)], 'iji->j'],
        ['ij,ij->i', [a, rand([1, 4], 9)], 'ij,ij->i'],
      ];
      for (const [formula, xs, ref] of cases)
        close(data(Tensor.einsum(formula, ...xs.map(T))), einsumRef(ref, ...xs), 1e-5);
      // '...' stands for (broadcast) leading axes
      close(
        data(Tensor.einsum('...ij,...jk', T(bat), T(rand([2, 4, 3], 6)))),
        einsumRef('bij,bjk->bik', bat, rand([2, 4, 3], 6)),
      );
      close(data(Tensor.einsum('...ij,jk->...ik', T(bat), T(b))), einsumRef('bij,jk->bik', bat, b));
      close(data(Tensor.einsum('i...->...', T(bat))), einsumRef('bij->ij', bat));
      // non-contiguous operands
      const flipped = T(a).flip(1).transpose();
      const fa: Nd = {
        shape: [4, 3],
        data: Array.from({ length: 12 }, (_, f) => a.data[(f % 3) * 4 + (3 - Math.floor(f / 3))]!),
      };
      close(
        data(Tensor.einsum('ji,jk->ik', flipped, T(rand([4, 2], 10)))),
        einsumRef('ji,jk->ik', fa, rand([4, 2], 10)),
      );
    });

    it('dot is the matmul product, for vectors too', () => {
      const a = rand([3, 4], 11);
      const v = rand([4], 12);
      close(data(T(a).dot(T(v))), einsumRef('ij,j->i', a, v));
      close(data(T(v).dot(T(v))), einsumRef('i,i->', v, v));
    });

    it('conv2d matches a naive convolution over stride, padding, dilation, groups and bias', () => {
      const cases: [number[], number[], number, Window, boolean][] = [
        [
          [2, 3, 5, 5],
          [4, 3, 3, 3],
          1,
          win(
            [1, 1],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
          false,
        ],
        [
          [1, 2, 6, 7],
          [3, 2, 3, 2],
          1,
          win(
            [2, 2],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 1],
          ),
          true,
        ],
        [
          [1, 2, 7, 7],
          [2, 2, 3, 3],
          1,
          win(
            [1, 2],
            [
              [2, 2],
              [2, 2],
            ],
            [2, 2],
          ),
          true,
        ],
        [
          [2, 4, 5, 6],
          [6, 2, 2, 3],
          2,
          win(
            [1, 2],
            [
              [1, 0],
              [0, 2],
            ],
            [1, 1],
          ),
          true,
        ],
        [
          [1, 3, 4, 4],
          [3, 1, 3, 3],
          3,
          win(
            [3, 1],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 2],
          ),
          false,
        ],
        [
          [1, 1, 3, 3],
          [2, 1, 1, 1],
          1,
          win(
            [2, 2],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
          true,
        ],
      ];
      cases.forEach(([xs, ws, groups, w, withBias], i) => {
        const x = rand(xs, 20 + i);
        const wt = rand(ws, 30 + i);
        const bias = withBias ? values(ws[0]!, 40 + i) : undefined;
        const got = T(x).conv2d(T(wt), bias && new Tensor(new Float32Array(bias), { device }), {
          stride: w.stride,
          padding: w.pad,
          dilation: w.dilation,
          groups,
        });
        const want = convRef(x, wt, bias, groups, w);
        expect(got.shape).toEqual(want.shape);
        close(data(got), want.data, 1e-5);
      });
    });

    it('conv2d gradients match the naive ones over windows 1, 3, 5, 7, strides, padding, dilation and groups', () => {
      // x shape, weight shape, groups, window; the strided cases leave input rows no window reads
      const cases: [number[], number[], number, Window][] = [
        [
          [1, 2, 4, 5],
          [3, 2, 1, 1],
          1,
          win(
            [1, 1],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
        ],
        [
          [2, 3, 6, 6],
          [4, 3, 3, 3],
          1,
          win(
            [1, 1],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 1],
          ),
        ],
        [
          [1, 1, 9, 8],
          [2, 1, 5, 5],
          1,
          win(
            [1, 1],
            [
              [0, 0],
              [2, 1],
            ],
            [1, 1],
          ),
        ],
        [
          [1, 2, 9, 9],
          [2, 2, 7, 7],
          1,
          win(
            [1, 1],
            [
              [3, 3],
              [0, 0],
            ],
            [1, 1],
          ),
        ],
        [
          [1, 2, 8, 9],
          [2, 2, 3, 2],
          1,
          win(
            [2, 3],
            [
              [1, 0],
              [0, 1],
            ],
            [1, 1],
          ),
        ],
        [
          [2, 4, 7, 6],
          [4, 2, 3, 2],
          2,
          win(
            [2, 1],
            [
              [1, 1],
              [0, 0],
            ],
            [2, 1],
          ),
        ],
      ];
      cases.forEach(([xs, ws, groups, w], i) => {
        const x = rand(xs, 50 + i);
        const wt = rand(ws, 60 + i);
        const [xt, wtt] = [T(x), T(wt)];
        const y = xt.conv2d(wtt, undefined, {
          stride: w.stride,
          padding: w.pad,
          dilation: w.dilation,
          groups,
        });
        const gy = rand(y.shape, 70 + i);
        const [dx, dw] = Tensor.gradient(y.mul(T(gy)).sum(), [xt, wtt]);
        const want = convGradRef(x, wt, gy, groups, w);
        close(data(dx!), want.dx, 1e-4);
        close(data(dw!), want.dw, 1e-4);
      });
    });

    it('conv2d: symmetric padding shorthand, non-contiguous input, zero batch, 1-d and int input', () => {
      const nhwc = rand([1, 5, 5, 2], 50);
      const x = T(nhwc).permute([0, 3, 1, 2]);
      const xRef: Nd = {
        shape: [1, 2, 5, 5],
        data: Array.from({ length: 50 }, (_, f) => {
          const [, c, h, w] = unravel(f, [1, 2, 5, 5]) as [number, number, number, number];
          return nhwc.data[ravel([0, h, w, c], nhwc.shape)]!;
        }),
      };
      const wt = rand([3, 2, 3, 3], 51);
      close(
        data(x.conv2d(T(wt), undefined, { padding: 1 })),
        convRef(
          xRef,
          wt,
          undefined,
          1,
          win(
            [1, 1],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 1],
          ),
        ).data,
      );
      close(
        data(x.conv2d(T(wt), undefined, { padding: [0, 2], stride: 2 })),
        convRef(
          xRef,
          wt,
          undefined,
          1,
          win(
            [2, 2],
            [
              [0, 0],
              [2, 2],
            ],
            [1, 1],
          ),
        ).data,
      );
      expect(Tensor.zeros([0, 2, 5, 5], { device }).conv2d(T(wt)).shape).toEqual([0, 3, 3, 3]);
      // 1-d: a (N, C, L) input as (N, C, 1, L)
      const x1 = rand([2, 2, 6], 52);
      const w1 = rand([3, 2, 2], 53);
      const ref1 = convRef(
        { shape: [2, 2, 1, 6], data: x1.data },
        { shape: [3, 2, 1, 2], data: w1.data },
        undefined,
        1,
        win(
          [1, 2],
          [
            [0, 0],
            [1, 1],
          ],
          [1, 2],
        ),
      );
      close(data(T(x1).conv2d(T(w1), undefined, { stride: 2, padding: 1, dilation: 2 })), ref1.data);
      const xi = new Tensor(new Int32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]), { device }).reshape([1, 1, 3, 3]);
      const wi = new Tensor(new Int32Array([1, -1, 2, 0]), { device }).reshape([1, 1, 2, 2]);
      const ci = xi.conv2d(wi);
      expect(ci.dtype).toBe(dtypes.int32);
      expect(ci.tolist()).toEqual([
        [
          [
            [1 - 2 + 8, 2 - 3 + 10],
            [4 - 5 + 14, 5 - 6 + 16],
          ],
        ],
      ]);
    });

    it('maxPool2d and avgPool2d match naive pooling, padding with -inf and counting pads in the mean', () => {
      const cases: [number[], [number, number], Window][] = [
        [
          [2, 3, 4, 6],
          [2, 2],
          win(
            [2, 2],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
        ],
        [
          [1, 2, 5, 5],
          [3, 3],
          win(
            [1, 1],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 1],
          ),
        ],
        [
          [1, 1, 7, 6],
          [3, 2],
          win(
            [2, 3],
            [
              [1, 0],
              [0, 1],
            ],
            [2, 1],
          ),
        ],
        [
          [3, 5, 5],
          [2, 3],
          win(
            [3, 1],
            [
              [1, 1],
              [0, 0],
            ],
            [1, 1],
          ),
        ],
      ];
      cases.forEach(([xs, k, w], i) => {
        const x = rand(xs, 60 + i);
        const opts = { stride: w.stride, padding: w.pad, dilation: w.dilation };
        close(data(T(x).maxPool2d(k, opts)), poolRef(x, k, w, 'max').data);
        close(data(T(x).avgPool2d(k, opts)), poolRef(x, k, w, 'avg').data);
      });
      // defaults: stride = kernel; all-negative input so a zero pad would show
      const neg = { shape: [1, 1, 4, 4], data: values(16, 70).map((v) => -3 - Math.abs(v)) };
      close(
        data(T(neg).maxPool2d(2)),
        poolRef(
          neg,
          [2, 2],
          win(
            [2, 2],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
          'max',
        ).data,
      );
      close(
        data(T(neg).maxPool2d(3, { stride: 2, padding: 1 })),
        poolRef(
          neg,
          [3, 3],
          win(
            [2, 2],
            [
              [1, 1],
              [1, 1],
            ],
            [1, 1],
          ),
          'max',
        ).data,
      );
      const ints = new Tensor(new Int32Array([-5, -2, -7, -1]), { device }).reshape([1, 2, 2]);
      expect(ints.maxPool2d(2, { stride: 1, padding: 1 }).tolist()).toEqual([
        [
          [-5, -2, -2],
          [-5, -1, -1],
          [-7, -1, -1],
        ],
      ]);
      // non-contiguous: pooled after a transpose of the spatial axes
      const x = rand([1, 4, 6], 71);
      const xt = {
        shape: [1, 6, 4],
        data: Array.from({ length: 24 }, (_, f) => x.data[(f % 4) * 6 + Math.floor(f / 4)]!),
      };
      close(
        data(T(x).transpose(-1, -2).avgPool2d([2, 3], { stride: 1 })),
        poolRef(
          xt,
          [2, 3],
          win(
            [1, 1],
            [
              [0, 0],
              [0, 0],
            ],
            [1, 1],
          ),
          'avg',
        ).data,
      );
    });

    it('layernorm over the last axis and over several axes', () => {
      const x = rand([2, 3, 4], 80);
      const norm = (v: number[]) => {
        const m = v.reduce((p, q) => p + q, 0) / v.length;
        const s = v.reduce((p, q) => p + (q - m) ** 2, 0) / v.length;
        return v.map((q) => (q - m) / Math.sqrt(s + 1e-5));
      };
      close(data(T(x).layernorm()), mapRef(x.data, x.shape, -1, norm), 1e-4);
      // over axes 1 and 2: each batch row is one group
      const flat = mapRef(x.data, [2, 12], -1, norm);
      close(data(T(x).layernorm([1, -1])), flat, 1e-4);
      close(
        data(T(x).layernorm(0, 0.5)),
        mapRef(x.data, x.shape, 0, (v) => {
          const m = (v[0]! + v[1]!) / 2;
          const s = ((v[0]! - m) ** 2 + (v[1]! - m) ** 2) / 2;
          return v.map((q) => (q - m) / Math.sqrt(s + 0.5));
        }),
        1e-4,
      );
    });

    it('oneHot and sparseCategoricalCrossentropy with ignoreIndex, label smoothing and reductions', () => {
      const labels = new Tensor(new Int32Array([2, 0, 3, 1, 3, 0]), { device }).reshape([2, 3]);
      const oh = labels.oneHot(4);
      expect(oh.dtype).toBe(dtypes.int32);
      expect(oh.shape).toEqual([2, 3, 4]);
      expect(data(oh)).toEqual([2, 0, 3, 1, 3, 0].flatMap((l) => [0, 1, 2, 3].map((c) => (c === l ? 1 : 0))));
      const logits = rand([2, 3, 4], 90);
      const lab = [2, 0, 3, 1, 3, 0];
      const logp = mapRef(logits.data, logits.shape, -1, (v) => {
        const m = Math.max(...v);
        const lse = Math.log(v.reduce((p, q) => p + Math.exp(q - m), 0)) + m;
        return v.map((q) => q - lse);
      });
      const nll = lab.map((l, i) => -logp[i * 4 + l]!);
      const smooth = (eps: number) =>
        lab.map(
          (l, i) =>
            -(
              (1 - eps) * logp[i * 4 + l]! +
              (eps / 4) * [0, 1, 2, 3].reduce((p, c) => p + logp[i * 4 + c]!, 0)
            ),
        );
      const mean = (v: number[]) => v.reduce((p, q) => p + q, 0) / v.length;
      const l = T(logits);
      close(data(l.sparseCategoricalCrossentropy(labels)), [mean(nll)]);
      expect(l.sparseCategoricalCrossentropy(labels).shape).toEqual([]);
      close(data(l.sparseCategoricalCrossentropy(labels, { reduction: 'none' })), nll);
      close(
        data(l.sparseCategoricalCrossentropy(labels, { reduction: 'sum' })),
        [nll.reduce((p, q) => p + q, 0)],
        1e-5,
      );
      close(data(l.sparseCategoricalCrossentropy(labels, { labelSmoothing: 0.1 })), [mean(smooth(0.1))]);
      // label 3 ignored: left out of the sum and of the count
      const kept = nll.filter((_, i) => lab[i] !== 3);
      close(data(l.sparseCategoricalCrossentropy(labels, { ignoreIndex: 3 })), [mean(kept)]);
      expect(() => l.sparseCategoricalCrossentropy(labels.reshape([6]))).toThrow(
        /labels need the logits' shape/,
      );
    });

    it('scaledDotProductAttention with no mask, a causal mask, a bool mask and an additive mask', () => {
      const [b, len, src, e, ev] = [2, 3, 4, 5, 2];
      const q = rand([b, len, e], 100);
      const k = rand([b, src, e], 101);
      const v = rand([b, src, ev], 102);
      const ref = (allowed: (i: number, j: number) => boolean, add: (i: number, j: number) => number) => {
        const out: number[] = [];
        for (let n = 0; n < b; n++)
          for (let i = 0; i < len; i++) {
            const s = Array.from({ length: src }, (_, j) => {
              let dot = 0;
              for (let c = 0; c < e; c++)
                dot += q.data[(n * len + i) * e + c]! * k.data[(n * src + j) * e + c]!;
              return allowed(i, j) ? dot / Math.sqrt(e) + add(i, j) : -Infinity;
            });
            const m = Math.max(...s);
            const w = s.map((x) => Math.exp(x - m));
            const z = w.reduce((p, x) => p + x, 0);
            for (let c = 0; c < ev; c++)
              out.push(w.reduce((p, x, j) => p + (x / z) * v.data[(n * src + j) * ev + c]!, 0));
          }
        return out;
      };
      const [tq, tk, tv] = [T(q), T(k), T(v)];
      close(
        data(tq.scaledDotProductAttention(tk, tv)),
        ref(
          () => true,
          () => 0,
        ),
      );
      close(
        data(tq.scaledDotProductAttention(tk, tv, { isCausal: true })),
        ref(
          (i, j) => j <= i,
          () => 0,
        ),
      );
      const maskBits = [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0];
      const mask = new Tensor(maskBits.map(Boolean), { device }).reshape([len, src]);
      close(
        data(tq.scaledDotProductAttention(tk, tv, { attnMask: mask })),
        ref(
          (i, j) => maskBits[i * src + j] === 1,
          () => 0,
        ),
      );
      const bias = values(len * src, 103);
      const add = new Tensor(new Float32Array(bias), { device }).reshape([len, src]);
      close(
        data(tq.scaledDotProductAttention(tk, tv, { attnMask: add })),
        ref(
          () => true,
          (i, j) => bias[i * src + j]!,
        ),
      );
    });
  });

describe('nn errors', () => {
  const t = (shape: number[]) => Tensor.zeros(shape, { device: 'JS' });
  it('name the op, the shapes and what would be valid', () => {
    expect(() => Tensor.einsum('ij,jk->ik', t([2, 3]))).toThrow(
      /einsum: 'ij,jk->ik' names 2 operand\(s\) but got 1/,
    );
    expect(() => Tensor.einsum('ij,jk', t([2, 3]), t([4, 5]))).toThrow(/sizes 3 and 4/);
    expect(() => Tensor.einsum('ijk', t([2, 3]))).toThrow(/names 3 axes but has 2/);
    expect(() => Tensor.einsum('ii', t([2, 3]))).toThrow(/a diagonal needs equal sizes/);
    expect(() => Tensor.einsum('ij->iz', t([2, 3]))).toThrow(/does not name it in an input/);
    expect(() => t([1, 4, 5, 5]).conv2d(t([2, 3, 3, 3]))).toThrow(
      /conv2d: input \(1, 4, 5, 5\) has 4 channels/,
    );
    expect(() => t([1, 3, 2, 2]).conv2d(t([2, 3, 3, 3]))).toThrow(/smaller than the window span 3/);
    expect(() => t([1, 3, 5, 5]).conv2d(t([2, 3, 3, 3]), t([3]))).toThrow(
      /bias \(3\) should have shape \(2\)/,
    );
    expect(() => t([4]).maxPool2d(2)).toThrow(/maxPool2d: input \(4\) needs at least 2 axes/);
    expect(() => t([1, 4, 4]).avgPool2d([2, 2, 2])).toThrow(
      /kernel \[2,2,2\] should be one non-negative integer or 2/,
    );
    expect(() => t([3]).oneHot(2)).toThrow(/oneHot: labels need an integer dtype, got float32/);
  });
});

describe('nn kernel counts', () => {
  const x = new Tensor(new Float32Array(2 * 3 * 8 * 8), { device: 'JS' }).reshape([2, 3, 8, 8]);
  const w = new Tensor(new Float32Array(4 * 3 * 3 * 3), { device: 'JS' }).reshape([4, 3, 3, 3]);
  const bias = new Tensor(new Float32Array(4), { device: 'JS' });
  const count = (t: Tensor) => scheduleOf([t]).kernels.length;
  it('conv2d (with bias, strided, dilated, grouped) and the pools are one kernel each', () => {
    // off GPUs a padded input the conv reads 8 times an element or more is stored padded first: plain loads
    expect(count(x.conv2d(w, bias, { padding: 1 }))).toBe(2);
    expect(count(x.conv2d(w, undefined, { stride: 2, dilation: 2, padding: [1, 2] }))).toBe(1);
    expect(
      count(
        x.conv2d(
          w
            .reshape([4, 3, 9])
            .shrink([
              [0, 3],
              [0, 1],
              [0, 9],
            ])
            .reshape([3, 1, 3, 3]),
          bias.shrink([[0, 3]]),
          { groups: 3 },
        ),
      ),
    ).toBe(1);
    expect(count(x.conv2d(w, bias).relu())).toBe(1);
    // the input gradient is a transposed conv of the stored padded output gradient, not a sum over windows
    const xg = new Tensor(new Float32Array(2 * 3 * 8 * 8), { device: 'JS', requiresGrad: true });
    const y = xg.reshape([2, 3, 8, 8]).conv2d(w);
    // (2 kernels: 2 y stored padded, the transposed conv; the sum over windows took 4)
    expect(count(Tensor.gradient(y.mul(y).sum(), [xg])[0]!)).toBe(2);
    expect(count(x.maxPool2d(2))).toBe(1);
    expect(count(x.avgPool2d(3, { stride: 1, padding: 1 }))).toBe(1);
  });
  it('einsum contractions are one kernel; layernorm 3; attention 5', () => {
    const m = x.reshape([6, 8, 8]);
    expect(count(Tensor.einsum('bij,bjk->bik', m, m))).toBe(1);
    expect(count(Tensor.einsum('bii->b', m))).toBe(1);
    expect(count(x.layernorm(-1))).toBe(3);
    // the softmax is stored once rather than recomputed for every column of the product with value
    expect(count(m.scaledDotProductAttention(m, m))).toBe(5);
  });
});
