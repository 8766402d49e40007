// Linear algebra and nn functions composed from movement ops, mul and reduces: einsum, conv, losses (pools: pool.ts).
import { dtypes, narrowSumDType } from '../dtype.ts';
import { defineGradient } from './autograd.ts';
import { gradMode } from './grad-mode.ts';
import { checkIndex } from './index-check.ts';
import type { Axes } from './reduce.ts';
import { checkTensor, Tensor } from './tensor.ts';
import { checkFinite, shown } from './validate.ts';

/** One size for every spatial axis, or one per axis. */
export type Size = number | readonly number[];
/** Padding: one amount everywhere, one per spatial axis (both sides), or [before, after] per spatial axis. */
export type Padding = Size | readonly (readonly [number, number])[];

export interface ConvOptions {
  stride?: Size;
  padding?: Padding;
  dilation?: Size;
  groups?: number;
}

export interface CrossEntropyOptions {
  /** Labels equal to this contribute no loss and are left out of the mean. */
  ignoreIndex?: number;
  /** Mixes the one-hot target with the uniform distribution by this weight. */
  labelSmoothing?: number;
  reduction?: 'mean' | 'sum' | 'none';
}

export interface AttentionOptions {
  /** Bool: false masks the position out. Float: added to the scores. Broadcasts to (..., L, S). */
  attnMask?: Tensor;
  /** Each query attends to keys at its own position and before (the top-left aligned lower triangle). */
  isCausal?: boolean;
}

declare module './tensor.ts' {
  interface Tensor {
    /** The same product as matmul (tinygrad's dot: batched and broadcasting, 1-D operands as vectors). */
    dot(w: Tensor): Tensor;
    /** Convolution of (N, Cin, H, W) by (Cout, Cin / groups, kH, kW); other spatial ranks work alike. */
    conv2d(weight: Tensor, bias?: Tensor, opts?: ConvOptions): Tensor;
    /** (x - mean) / sqrt(var + eps) along the axes, with the population variance. */
    layernorm(axis?: Axes, eps?: number): Tensor;
    /**
     * An int32 tensor with a new last axis of size n, 1 at each label's index and 0 elsewhere. Labels lie in
     * `[0, n)`, negative ones included (PyTorch's rule): out of range is an error where the host holds them
     * (made from JS data, or realized on CPU or JS), else only with CHECK_INDEX=1; a lazy one's row is all 0.
     */
    oneHot(n: number): Tensor;
    /**
     * Cross entropy of logits (..., C) against int labels (...), mean over the labels by default. Labels lie
     * in `[0, C)` or equal `ignoreIndex`: out of range is an error where the host holds them (made from JS
     * data, or realized on CPU or JS), else only with CHECK_INDEX=1; a lazy one's loss is NaN.
     */
    sparseCategoricalCrossentropy(labels: Tensor, opts?: CrossEntropyOptions): Tensor;
    /** softmax(q k^T / sqrt(E)) v for this query (..., L, E), key (..., S, E) and value (..., S, Ev). */
    scaledDotProductAttention(key: Tensor, value: Tensor, opts?: AttentionOptions): Tensor;
  }
  namespace Tensor {
    /**
     * Einstein summation: `'ij,jk->ik'` (explicit output) or `'ij,jk'` (implicit: the letters used once, in
     * alphabetical order). A letter repeated in one operand takes its diagonal; `...` stands for
     * broadcast axes.
     */
    let einsum: (formula: string, ...operands: Tensor[]) => Tensor;
  }
}

const shapeStr = (t: Tensor) => `(${t.shape.join(', ')})`;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const keepAll = (shape: readonly number[]) => shape.map((d) => [0, d] as [number, number]);

Tensor.prototype.dot = function (this: Tensor, w: Tensor): Tensor {
  return this.matmul(w);
};

// --- einsum --------------------------------------------------------------------------------------------

/** An operand's axes as labels: letters, and `...0`, `...1`, ... for the broadcast axes, right-aligned. */
function labelsOf(term: string, ndim: number, ellipsisDims: number, formula: string): string[] {
  const [head, tail, extra] = term.split('...');
  if (extra !== undefined) throw new Error(`einsum: '${formula}' has more than one '...' in one operand`);
  const letters = [...(head ?? ''), ...(tail ?? '')];
  const bad = letters.find((c) => !/[a-zA-Z]/.test(c));
  if (bad !== undefined)
    throw new Error(`einsum: '${formula}' has '${bad}'; use letters, ',', '->' and '...'`);
  const e = ndim - letters.length;
  if (tail === undefined ? e !== 0 : e < 0)
    throw new Error(
      `einsum: operand '${term}' of '${formula}' names ${letters.length} axes but has ${ndim}${tail === undefined ? "; use '...' for the rest" : ''}`,
    );
  const dots = range(e).map((i) => `...${ellipsisDims - e + i}`);
  return [...(head ?? '')].concat(dots, [...(tail ?? '')]);
}

/** The first position of a label that occurs earlier too, or -1. */
const repeated = (labels: readonly string[]) => labels.findIndex((l, i) => labels.indexOf(l) !== i);

/** The diagonal of axes p and q (both of size n) as a new last axis: flatten them, read every (n+1)-th. */
function diagonal(t: Tensor, p: number, q: number): Tensor {
  const n = t.shape[p]!;
  const rest = range(t.ndim).filter((a) => a !== p && a !== q);
  const lead = rest.map((a) => t.shape[a]!);
  return t
    .permute([...rest, p, q])
    .reshape([...lead, n * n])
    .pad([...lead.map(() => [0, 0] as [number, number]), [0, n]])
    .reshape([...lead, n, n + 1])
    .shrink([...keepAll(lead), [0, n], [0, 1]])
    .reshape([...lead, n]);
}

Tensor.einsum = (formula: string, ...operands: Tensor[]): Tensor => {
  if (typeof formula !== 'string')
    throw new Error(`einsum: the formula must be a string such as 'ij,jk->ik', got ${shown(formula)}`);
  for (const [i, t] of operands.entries()) checkTensor('einsum', `operand ${i}`, t, operands[0]);
  const spec = formula.replace(/\s/g, '');
  const [lhs, rhs, extra] = spec.split('->');
  const terms = lhs!.split(',');
  if (extra !== undefined || terms.length !== operands.length)
    throw new Error(
      `einsum: '${formula}' names ${terms.length} operand(s) but got ${operands.length}; write 'ij,jk->ik' with one term per operand`,
    );
  const dots = terms.map((term, i) =>
    term.includes('...') ? operands[i]!.ndim - term.replace('...', '').length : 0,
  );
  const ellipsisDims = Math.max(0, ...dots);
  const labels = terms.map((term, i) => labelsOf(term, operands[i]!.ndim, ellipsisDims, formula));
  const broadcast = range(ellipsisDims).map((i) => `...${i}`);
  const counts = new Map<string, number>();
  for (const l of labels.flat()) counts.set(l, (counts.get(l) ?? 0) + 1);
  let out: string[];
  if (rhs === undefined) {
    out = [
      ...broadcast,
      ...[...counts.keys()].filter((l) => !l.startsWith('...') && counts.get(l) === 1).sort(),
    ];
  } else {
    out = labelsOf(
      rhs,
      rhs.replace('...', '').length + (rhs.includes('...') ? ellipsisDims : 0),
      ellipsisDims,
      formula,
    );
    const missing = out.find((l, i) => !counts.has(l) || out.indexOf(l) !== i);
    if (missing !== undefined)
      throw new Error(
        `einsum: output '${rhs}' of '${formula}' repeats '${missing}' or does not name it in an input; name each input axis at most once`,
      );
  }
  const order = [...out, ...[...counts.keys()].filter((l) => !out.includes(l))];
  const sizes = new Map<string, number>();
  const aligned = operands.map((t, i) => {
    let x = t;
    const ls = [...labels[i]!];
    // a repeated label reads the diagonal of its axes
    for (let q = repeated(ls); q >= 0; q = repeated(ls)) {
      const l = ls[q]!;
      const p = ls.indexOf(l);
      if (x.shape[p] !== x.shape[q])
        throw new Error(
          `einsum: '${formula}' repeats '${l}' in operand ${i} of shape ${shapeStr(t)}, over axes of sizes ${x.shape[p]} and ${x.shape[q]}; a diagonal needs equal sizes`,
        );
      x = diagonal(x, p, q);
      ls.splice(q, 1);
      ls.splice(p, 1);
      ls.push(l);
    }
    ls.forEach((l, a) => {
      const n = x.shape[a]!;
      const seen = sizes.get(l) ?? 1;
      if (seen !== n && seen !== 1 && n !== 1)
        throw new Error(
          `einsum: '${formula}' gives '${l.startsWith('...') ? '...' : l}' sizes ${seen} and ${n} (operand ${i} has shape ${shapeStr(t)}); sizes of one label must be equal or 1`,
        );
      if (n !== 1) sizes.set(l, n);
    });
    const present = order.filter((l) => ls.includes(l));
    return x
      .permute(present.map((l) => ls.indexOf(l)))
      .reshape(order.map((l) => (ls.includes(l) ? x.shape[ls.indexOf(l)]! : 1)));
  });
  // labels not in the output are the trailing axes of the product
  const product = aligned.reduce((acc, x) => acc.mul(x));
  const summed = range(order.length).slice(out.length);
  return summed.length ? product.sum(summed, false, narrowSumDType(product.dtype)) : product;
};

// --- convolution ---------------------------------------------------------------------------------------

/** @internal A per-axis size list from a scalar or a list of n (pool.ts shares it). */
export function perAxis(op: string, what: string, v: Size, n: number): number[] {
  if (typeof v !== 'number' && !Array.isArray(v))
    throw new Error(`${op}: ${what} should be one non-negative integer or ${n} of them, got ${shown(v)}`);
  const list = typeof v === 'number' ? new Array<number>(n).fill(v) : [...v];
  if (list.length !== n || !list.every((x) => Number.isInteger(x) && x >= 0))
    throw new Error(`${op}: ${what} ${JSON.stringify(v)} should be one non-negative integer or ${n} of them`);
  return list;
}

/** @internal Padding as one [before, after] pair per spatial axis. */
export function padPairs(op: string, padding: Padding, n: number): [number, number][] {
  if (typeof padding !== 'number' && padding.length > 0 && typeof padding[0] !== 'number') {
    const pairs = padding as readonly (readonly [number, number])[];
    if (pairs.length !== n || !pairs.flat().every((x) => Number.isInteger(x) && x >= 0))
      throw new Error(
        `${op}: padding ${JSON.stringify(padding)} should be ${n} [before, after] pairs of non-negative integers`,
      );
    return pairs.map(([a, b]) => [a, b]);
  }
  return perAxis(op, 'padding', padding as Size, n).map((p) => [p, p]);
}

/**
 * Sliding windows over the last axis: (..., L) to (..., o, k), [..., t, i] = x[..., t*stride + i*dilation].
 * Movement ops only: tile x, read the tiles back in rows of L + dilation (so row i starts at x[i*dilation]),
 * and keep every stride-th column.
 */
function windows1d(x: Tensor, k: number, stride: number, dilation: number): Tensor {
  const lead = x.shape.slice(0, -1);
  const len = x.shape[x.ndim - 1]!;
  const o = Math.floor((len - dilation * (k - 1) - 1) / stride) + 1;
  // windows that do not overlap are rows of x: no tiling, so the gradient is a pad rather than a sum over tiles
  if (dilation === 1 && k <= stride) {
    const rows =
      o * stride <= len
        ? x.shrink([...keepAll(lead), [0, o * stride]])
        : x.pad([...lead.map(() => [0, 0] as [number, number]), [0, o * stride - len]]);
    return rows.reshape([...lead, o, stride]).shrink([...keepAll(lead), [0, o], [0, k]]);
  }
  const row = len + dilation;
  const tiles = Math.ceil((k * row) / len);
  const rows = x
    .unsqueeze(-2)
    .expand([...lead, tiles, len])
    .reshape([...lead, tiles * len])
    .shrink([...keepAll(lead), [0, k * row]])
    .reshape([...lead, k, row]);
  const cols =
    o * stride <= row
      ? rows.shrink([...keepAll(lead), [0, k], [0, o * stride]])
      : rows.pad([...lead.map(() => [0, 0] as [number, number]), [0, 0], [0, o * stride - row]]);
  return cols
    .reshape([...lead, k, o, stride])
    .shrink([...keepAll(lead), [0, k], [0, o], [0, 1]])
    .reshape([...lead, k, o])
    .transpose(-1, -2);
}

/** @internal Windows over the last kernel.length axes: (..., L0, L1, ...) to (..., o0, o1, ..., k0, k1, ...). */
export function windows(x: Tensor, kernel: number[], stride: number[], dilation: number[]): Tensor {
  let t = x;
  const base = x.ndim - kernel.length;
  kernel.forEach((k, j) => {
    const p = base + j;
    const w = windows1d(t.permute([...range(t.ndim).filter((a) => a !== p), p]), k, stride[j]!, dilation[j]!);
    // (others..., o, k): o goes back to axis p, k joins the window axes at the end
    const m = w.ndim;
    t = w.permute([...range(p), m - 2, ...range(m - 2).slice(p), m - 1]);
  });
  return t;
}

interface WindowPlan {
  kernel: number[];
  stride: number[];
  dilation: number[];
  pads: [number, number][];
  /** Output size along each spatial axis. */
  out: number[];
}

/** Checks and resolves the window arguments for the last kernel.length axes of x. */
function plan(
  op: string,
  x: Tensor,
  kernel: number[],
  stride: Size,
  padding: Padding,
  dilation: Size,
): WindowPlan {
  const n = kernel.length;
  const p: WindowPlan = {
    kernel,
    stride: perAxis(op, 'stride', stride, n),
    dilation: perAxis(op, 'dilation', dilation, n),
    pads: padPairs(op, padding, n),
    out: [],
  };
  if (![...p.stride, ...p.dilation, ...kernel].every((v) => v >= 1))
    throw new Error(
      `${op}: kernel, stride and dilation must be at least 1, got ${kernel}, ${p.stride}, ${p.dilation}`,
    );
  const spatial = x.shape.slice(x.ndim - n);
  p.out = spatial.map((len, j) => {
    const padded = len + p.pads[j]![0] + p.pads[j]![1];
    const span = p.dilation[j]! * (kernel[j]! - 1) + 1;
    if (padded < span)
      throw new Error(
        `${op}: input ${shapeStr(x)} padded to ${padded} along spatial axis ${j} is smaller than the window span ${span} (kernel ${kernel[j]}, dilation ${p.dilation[j]})`,
      );
    return Math.floor((padded - span) / p.stride[j]!) + 1;
  });
  return p;
}

/** The windows of x's last axes under a plan, padded with value. */
function planWindows(x: Tensor, p: WindowPlan, value: number): Tensor {
  const lead = x.shape.slice(0, x.ndim - p.kernel.length).map(() => [0, 0] as [number, number]);
  return windows(x.pad([...lead, ...p.pads], value), p.kernel, p.stride, p.dilation);
}

Tensor.prototype.conv2d = function (
  this: Tensor,
  weight: Tensor,
  bias?: Tensor,
  opts: ConvOptions = {},
): Tensor {
  const { stride = 1, padding = 0, dilation = 1, groups = 1 } = opts;
  const nd = weight.ndim - 2;
  const [batch, cin] = this.shape as [number, number];
  const [cout, cg, ...kernel] = weight.shape as [number, number, ...number[]];
  if (nd < 1 || this.ndim !== weight.ndim)
    throw new Error(
      `conv2d: input ${shapeStr(this)} and weight ${shapeStr(weight)} need (N, Cin, spatial...) and (Cout, Cin / groups, kernel...) of the same rank, at least 3`,
    );
  if (!Number.isInteger(groups) || groups < 1 || cin !== cg * groups || cout % groups !== 0)
    throw new Error(
      `conv2d: input ${shapeStr(this)} has ${cin} channels and weight ${shapeStr(weight)} takes ${cg} per group with ${groups} group(s); needs Cin = ${cg} * groups and Cout divisible by groups`,
    );
  if (bias !== undefined && (bias.ndim !== 1 || bias.shape[0] !== cout))
    throw new Error(
      `conv2d: bias ${shapeStr(bias)} should have shape (${cout}), one value per output channel`,
    );
  const p = plan('conv2d', this, kernel, stride, padding, dilation);
  const ones = p.out.map(() => 1);
  // the window axes before the output's: the input gradient's windows (a sum over the output channels,
  // realized, then added up over overlapping windows) are then stored with neighbouring outputs adjacent, so
  // that a GPU warp's threads along the output read consecutive elements (25 floats apart for a 5x5 kernel else)
  const x = planWindows(this, p, 0)
    .reshape([batch, groups, 1, cg, ...p.out, ...kernel])
    .permute([0, 1, 2, 3, ...range(nd).map((j) => 4 + nd + j), ...range(nd).map((j) => 4 + j)]);
  const w = weight.reshape([1, groups, cout / groups, cg, ...kernel, ...ones]);
  // one reduce over the input channels of a group and the kernel window
  const product = x.mul(w);
  const out = product
    .sum([3, ...range(nd).map((j) => 4 + j)], false, narrowSumDType(product.dtype))
    .reshape([batch, cout, ...p.out]);
  if (gradMode.offDepth === 0)
    defineGradient(out.uop, {
      inputs: [this.uop, weight.uop],
      rule: (g, [toInput, toWeight]) => {
        const dy = out.wrap(g);
        return [
          toInput ? convInputGrad(dy, weight, this.shape, p, groups).cast(this.dtype).uop : undefined,
          // the reduce over the batch and the output positions that the walk through the product would build
          toWeight
            ? dy
                .reshape([batch, groups, cout / groups, 1, ...ones, ...p.out])
                .mul(x)
                .sum([0, ...range(nd).map((j) => 4 + nd + j)])
                .reshape(weight.shape)
                .cast(weight.dtype).uop
            : undefined,
        ];
      },
    });
  return bias === undefined ? out : out.add(bias.reshape([1, cout, ...ones]));
};

/**
 * The gradient of a conv's input as a transposed conv: the output gradient dy spread back by the stride (zeros
 * between), padded so that each input position sees every output whose window holds it, then convolved with
 * the weight flipped and its channel axes swapped (per group). Without it the gradient flows back through the
 * windows: every window's gradient is stored, then summed where windows overlap (a gather, 1 GFLOP/s on CPU).
 */
function convInputGrad(
  dy: Tensor,
  weight: Tensor,
  inShape: readonly number[],
  p: WindowPlan,
  groups: number,
): Tensor {
  const nd = p.kernel.length;
  const [batch, cout, ...outs] = dy.shape as [number, number, ...number[]];
  const [, cg] = weight.shape as [number, number];
  const lead: [number, number][] = [
    [0, 0],
    [0, 0],
  ];
  // dy[o] moves to o * stride: a unit axis per spatial axis, padded to stride, flattened, the tail cut
  const spread = p.stride.every((s) => s === 1)
    ? dy
    : dy
        .reshape([batch, cout, ...outs.flatMap((o) => [o, 1])])
        .pad([
          ...lead,
          ...outs.flatMap((_, j): [number, number][] => [
            [0, 0],
            [0, p.stride[j]! - 1],
          ]),
        ])
        .reshape([batch, cout, ...outs.map((o, j) => o * p.stride[j]!)])
        .shrink([
          [0, batch],
          [0, cout],
          ...outs.map((o, j): [number, number] => [0, (o - 1) * p.stride[j]! + 1]),
        ]);
  // input position y (after the conv's padding pb) gets dy at y + pb - k * dilation for every window offset k:
  // pad by span - 1 - pb before, and after up to the input's length plus span - 1 (negative pads cut)
  const padded = spread.pad([
    ...lead,
    ...p.kernel.map((k, j): [number, number] => {
      const reach = p.dilation[j]! * (k - 1);
      const before = reach - p.pads[j]![0];
      return [before, inShape[2 + j]! + reach - before - spread.shape[2 + j]!];
    }),
  ]);
  const flipped = weight
    .reshape([groups, cout / groups, cg, ...p.kernel])
    .permute([0, 2, 1, ...range(nd).map((j) => 3 + j)])
    .reshape([groups * cg, cout / groups, ...p.kernel])
    .flip(range(nd).map((j) => 2 + j));
  return padded.conv2d(flipped, undefined, { groups, dilation: p.dilation });
}

// --- normalization, losses, attention --------------------------------------------------------------------

Tensor.prototype.layernorm = function (this: Tensor, axis: Axes = -1, eps = 1e-5): Tensor {
  checkFinite('layernorm', 'eps', eps);
  const x = this.toFloat();
  const centered = x.sub(x.mean(axis, true));
  return centered.mul(centered.square().mean(axis, true).add(eps).sqrt().reciprocal());
};

Tensor.prototype.oneHot = function (this: Tensor, n: number): Tensor {
  if (!this.dtype.isInt) throw new Error(`oneHot: labels need an integer dtype, got ${this.dtype.name}`);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`oneHot: the class count must be a positive integer, got ${n}`);
  checkIndex('oneHot', this, { lo: 0, hi: n, name: 'label', of: `${n} classes` });
  return hot(this, n).where(1, 0);
};

/**
 * @internal NaN where a class index lies outside [0, n) and is not the ignored index: a label nothing checked
 * (a lazy one) cannot pass silently.
 */
export function guardIndices(
  loss: Tensor,
  labels: Tensor,
  n: number,
  ignoreIndex: number | undefined,
): Tensor {
  let valid = labels.ge(0).bitwiseAnd(labels.lt(n));
  if (ignoreIndex !== undefined) valid = valid.bitwiseOr(labels.eq(ignoreIndex));
  return valid.where(loss, Number.NaN);
}

/** Bool (..., n): whether each label is each class (unchecked: a label out of range is all false). */
const hot = (labels: Tensor, n: number) =>
  labels.unsqueeze(-1).eq(Tensor.arange(n, undefined, 1, { device: labels.device }));

Tensor.prototype.sparseCategoricalCrossentropy = function (
  this: Tensor,
  labels: Tensor,
  opts: CrossEntropyOptions = {},
): Tensor {
  const { ignoreIndex, labelSmoothing = 0, reduction = 'mean' } = opts;
  const lead = this.shape.slice(0, -1);
  if (this.ndim < 1 || labels.ndim !== lead.length || !labels.shape.every((d, i) => d === lead[i]))
    throw new Error(
      `sparseCategoricalCrossentropy: logits ${shapeStr(this)} and labels ${shapeStr(labels)}; labels need the logits' shape without its last (class) axis`,
    );
  if (!labels.dtype.isInt)
    throw new Error(`sparseCategoricalCrossentropy: labels need an integer dtype, got ${labels.dtype.name}`);
  const n = this.shape[this.ndim - 1]!;
  checkIndex('sparseCategoricalCrossentropy', labels, {
    lo: 0,
    hi: n,
    also: ignoreIndex,
    name: 'label',
    of: `the ${n} classes of the logits ${shapeStr(this)}`,
  });
  const logp = this.logSoftmax(-1);
  const picked = logp.mul(hot(labels, n).where(1, 0)).sum(-1);
  const target =
    labelSmoothing === 0 ? picked : picked.mul(1 - labelSmoothing).add(logp.mean(-1).mul(labelSmoothing));
  const keep = ignoreIndex === undefined ? undefined : labels.ne(ignoreIndex);
  const loss = guardIndices(
    keep === undefined ? target.neg() : keep.where(target.neg(), 0),
    labels,
    n,
    ignoreIndex,
  );
  if (reduction === 'none') return loss;
  if (reduction === 'sum') return loss.sum();
  return keep === undefined ? loss.mean() : loss.sum().div(keep.sum());
};

Tensor.prototype.scaledDotProductAttention = function (
  this: Tensor,
  key: Tensor,
  value: Tensor,
  opts: AttentionOptions = {},
): Tensor {
  const { attnMask, isCausal = false } = opts;
  if (this.ndim < 2 || key.ndim < 2 || value.ndim < 2)
    throw new Error(
      `scaledDotProductAttention: query ${shapeStr(this)}, key ${shapeStr(key)} and value ${shapeStr(value)} need (..., L, E), (..., S, E) and (..., S, Ev)`,
    );
  if (isCausal && attnMask !== undefined)
    throw new Error('scaledDotProductAttention: give attnMask or isCausal, not both');
  const [len, dim] = this.shape.slice(-2) as [number, number];
  const src = key.shape[key.ndim - 2]!;
  let scores = this.matmul(key.transpose(-2, -1)).mul(1 / Math.sqrt(dim));
  if (isCausal) {
    const opt = { device: this.device };
    const allowed = Tensor.arange(src, undefined, 1, opt).le(
      Tensor.arange(len, undefined, 1, opt).unsqueeze(-1),
    );
    scores = allowed.where(scores, -Infinity);
  } else if (attnMask !== undefined) {
    scores = attnMask.dtype === dtypes.bool ? attnMask.where(scores, -Infinity) : scores.add(attnMask);
  }
  return scores.softmax(-1).matmul(value);
};
