// Losses (cross entropy, nll, binary cross entropy) and functional nn (linear, batchnorm, normalize, varMean).
import { checkIndex } from './index-check.ts';
import { guardIndices } from './nn.ts';
import { broadcastShape } from './op-nodes.ts';
import type { Axes } from './reduce.ts';
import { reducedAxes } from './reduce.ts';
import { Tensor } from './tensor.ts';

export type Reduction = 'mean' | 'sum' | 'none';

export interface LossOptions {
  /** 'mean' (the default) averages the per-element losses, 'sum' adds them, 'none' returns them. */
  reduction?: Reduction;
}

export interface CrossEntropyLossOptions extends LossOptions {
  /** Mixes the target with the uniform distribution over the classes by this weight, in [0, 1]. */
  labelSmoothing?: number;
  /** Class-index targets equal to this contribute no loss and are left out of the mean. */
  ignoreIndex?: number;
}

export interface NllLossOptions extends LossOptions {
  /** A weight per class (C): each element's loss is scaled by its class's weight, and 'mean' divides by their sum. */
  weight?: Tensor;
  /** Targets equal to this contribute no loss and are left out of the mean. */
  ignoreIndex?: number;
}

export interface BceLogitsOptions extends LossOptions {
  /** Weight of the positive term, broadcast against the logits (one per class on the last axis, say). */
  posWeight?: Tensor;
}

export interface NormalizeOptions {
  /** The norm's exponent: a positive number or Infinity. */
  p?: number;
  /** The axis (or axes) the norm runs over. */
  dim?: Axes;
  /** The smallest divisor, so that zero vectors stay zero. */
  eps?: number;
}

declare module './tensor.ts' {
  interface Tensor {
    /**
     * this @ weight + bias, tinygrad's layout: weight is (in, out), or 1-D to scale the last axis elementwise.
     */
    linear(weight: Tensor, bias?: Tensor): Tensor;
    /**
     * (this - mean) * weight * invstd + bias with each parameter laid along `axis` (the channels); any of
     * them may be undefined. An invstd of another rank than the axes' count broadcasts as it is (tinygrad's rule).
     */
    batchnorm(
      weight: Tensor | undefined,
      bias: Tensor | undefined,
      mean: Tensor | undefined,
      invstd: Tensor | undefined,
      axis?: Axes,
    ): Tensor;
    /**
     * Cross entropy of logits with classes on axis 1 (axis 0 for a 1-D input), PyTorch's layout: (C), (N, C)
     * or (N, C, d1, ...). An integer target holds class indices of shape (), (N) or (N, d1, ...); a float
     * target holds class probabilities of the logits' shape. 'mean' averages over the elements that are not
     * ignored. Class indices lie in `[0, C)` or equal `ignoreIndex`: out of range is an error where the host
     * holds them (made from JS data, or realized on CPU or JS), else only with CHECK_INDEX=1; a lazy one's
     * loss is NaN.
     */
    crossEntropy(target: Tensor, opts?: CrossEntropyLossOptions): Tensor;
    /**
     * Negative log likelihood of log-probabilities in crossEntropy's layout against class indices, checked
     * as crossEntropy's.
     */
    nllLoss(target: Tensor, opts?: NllLossOptions): Tensor;
    /** -(y log p + (1 - y) log(1 - p)) of probabilities p (this), each log clamped at -100 as PyTorch does. */
    binaryCrossentropy(y: Tensor, opts?: LossOptions): Tensor;
    /** binaryCrossentropy of sigmoid(this), computed from the logits with logsigmoid (finite for large |x|). */
    binaryCrossentropyLogits(y: Tensor, opts?: BceLogitsOptions): Tensor;
    /** [var, mean] along the axes; var as in `var` (correction 1: the sample variance). */
    varMean(axis?: Axes, keepdim?: boolean, correction?: number): [Tensor, Tensor];
    /** [std, mean] along the axes; std as in `std`. */
    stdMean(axis?: Axes, keepdim?: boolean, correction?: number): [Tensor, Tensor];
    /** this / max(norm_p(this along dim), eps) (torch.nn.functional.normalize). */
    normalize(opts?: NormalizeOptions): Tensor;
  }
}

const shapeStr = (t: Tensor) => `(${t.shape.join(', ')})`;
const sameShape = (a: Tensor, b: Tensor) => a.ndim === b.ndim && a.shape.every((d, i) => d === b.shape[i]);

/** The per-element losses reduced as asked (checked by checkReduction first). */
function reduce(loss: Tensor, reduction: Reduction): Tensor {
  if (reduction === 'none') return loss;
  return reduction === 'sum' ? loss.sum() : loss.mean();
}

function checkReduction(op: string, reduction: Reduction): void {
  if (reduction !== 'mean' && reduction !== 'sum' && reduction !== 'none')
    throw new Error(`${op}: reduction must be 'mean', 'sum' or 'none', got ${JSON.stringify(reduction)}`);
}

/** The class axis of logits in PyTorch's layout: 0 for (C), 1 for (N, C, ...). */
function classAxis(op: string, x: Tensor): number {
  if (x.ndim === 0)
    throw new Error(`${op}: input ${shapeStr(x)} needs a class axis: (C), (N, C) or (N, C, d1, ...)`);
  return x.ndim === 1 ? 0 : 1;
}

/**
 * Checks an index target against logits x: x's shape without the class axis, an integer dtype, values in
 * [0, C) or the ignored index.
 */
function checkIndexTarget(
  op: string,
  x: Tensor,
  target: Tensor,
  c: number,
  ignoreIndex: number | undefined,
): void {
  const want = x.shape.filter((_, i) => i !== c);
  if (!target.dtype.isInt)
    throw new Error(`${op}: class-index target needs an integer dtype, got ${target.dtype.name}`);
  if (target.ndim !== want.length || !target.shape.every((d, i) => d === want[i]))
    throw new Error(
      `${op}: input ${shapeStr(x)} and target ${shapeStr(target)}; class indices need the input's shape without axis ${c} (${want.join(', ')})`,
    );
  const n = x.shape[c]!;
  checkIndex(op, target, {
    lo: 0,
    hi: n,
    also: ignoreIndex,
    name: 'class index',
    of: `the ${n} classes on axis ${c} of the input ${shapeStr(x)}`,
  });
}

/** x with the class axis moved last (a view). */
const classesLast = (x: Tensor, c: number) =>
  c === x.ndim - 1 ? x : x.permute([...x.shape.keys()].filter((i) => i !== c).concat(c));

// --- losses -------------------------------------------------------------------------------------------

Tensor.prototype.crossEntropy = function (
  this: Tensor,
  target: Tensor,
  opts: CrossEntropyLossOptions = {},
): Tensor {
  const { reduction = 'mean', labelSmoothing = 0, ignoreIndex } = opts;
  checkReduction('crossEntropy', reduction);
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1))
    throw new Error(`crossEntropy: labelSmoothing must be in [0, 1], got ${labelSmoothing}`);
  const c = classAxis('crossEntropy', this);
  const n = this.shape[c]!;
  if (target.dtype.isFloat) {
    if (!sameShape(this, target))
      throw new Error(
        `crossEntropy: input ${shapeStr(this)} and probability target ${shapeStr(target)} need the same shape (class indices need an integer dtype)`,
      );
    if (ignoreIndex !== undefined)
      throw new Error('crossEntropy: ignoreIndex applies to class-index targets, not to probabilities');
    const p = labelSmoothing === 0 ? target : target.mul(1 - labelSmoothing).add(labelSmoothing / n);
    return reduce(this.logSoftmax(c).mul(p).sum(c).neg(), reduction);
  }
  checkIndexTarget('crossEntropy', this, target, c, ignoreIndex);
  // one layout for sparseCategoricalCrossentropy (which gives NaN for a bad lazy index): classes last;
  // per-element losses, reduced here
  const loss = classesLast(this, c).sparseCategoricalCrossentropy(target, {
    ignoreIndex,
    labelSmoothing,
    reduction: 'none',
  });
  if (reduction !== 'mean' || ignoreIndex === undefined) return reduce(loss, reduction);
  return loss.sum().div(target.ne(ignoreIndex).sum());
};

Tensor.prototype.nllLoss = function (this: Tensor, target: Tensor, opts: NllLossOptions = {}): Tensor {
  const { weight, ignoreIndex, reduction = 'mean' } = opts;
  checkReduction('nllLoss', reduction);
  const c = classAxis('nllLoss', this);
  const n = this.shape[c]!;
  checkIndexTarget('nllLoss', this, target, c, ignoreIndex);
  if (weight !== undefined && (weight.ndim !== 1 || weight.shape[0] !== n))
    throw new Error(`nllLoss: weight ${shapeStr(weight)} should have shape (${n}), one value per class`);
  // where, not a product with a one-hot: a log-probability of -inf in another class must not give NaN
  const hot = target.unsqueeze(-1).eq(Tensor.arange(n, undefined, 1, { device: this.device }));
  const picked = hot.where(classesLast(this, c).toFloat(), 0).sum(-1);
  let w = weight === undefined ? undefined : hot.where(weight.toFloat(), 0).sum(-1);
  let loss = w === undefined ? picked.neg() : picked.mul(w).neg();
  if (ignoreIndex !== undefined) {
    const keep = target.ne(ignoreIndex);
    loss = keep.where(loss, 0);
    w = keep.where(w ?? 1, 0);
  }
  loss = guardIndices(loss, target, n, ignoreIndex);
  if (reduction !== 'mean' || w === undefined) return reduce(loss, reduction);
  return loss.sum().div(w.sum());
};

function checkSameShape(op: string, x: Tensor, y: Tensor): void {
  if (!sameShape(x, y))
    throw new Error(`${op}: input ${shapeStr(x)} and target ${shapeStr(y)} need the same shape`);
}

Tensor.prototype.binaryCrossentropy = function (this: Tensor, y: Tensor, opts: LossOptions = {}): Tensor {
  const { reduction = 'mean' } = opts;
  checkReduction('binaryCrossentropy', reduction);
  checkSameShape('binaryCrossentropy', this, y);
  const p = this.toFloat();
  // PyTorch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss
  const logP = p.log().maximum(-100);
  const log1mP = p.neg().add(1).log().maximum(-100);
  const loss = y.mul(logP).add(y.neg().add(1).mul(log1mP)).neg();
  return reduce(loss, reduction);
};

Tensor.prototype.binaryCrossentropyLogits = function (
  this: Tensor,
  y: Tensor,
  opts: BceLogitsOptions = {},
): Tensor {
  const { reduction = 'mean', posWeight } = opts;
  checkReduction('binaryCrossentropyLogits', reduction);
  checkSameShape('binaryCrossentropyLogits', this, y);
  if (posWeight !== undefined) {
    const s = broadcastShape('binaryCrossentropyLogits: posWeight', y.shape, posWeight.shape);
    if (s.length !== y.ndim || !s.every((d, i) => d === y.shape[i]))
      throw new Error(
        `binaryCrossentropyLogits: posWeight ${shapeStr(posWeight)} must broadcast to the input's shape ${shapeStr(y)}`,
      );
  }
  const x = this.toFloat();
  const pos = y.mul(x.logsigmoid());
  const weighted = posWeight === undefined ? pos : pos.mul(posWeight);
  const loss = weighted.add(y.neg().add(1).mul(x.neg().logsigmoid())).neg();
  return reduce(loss, reduction);
};

// --- functional nn ------------------------------------------------------------------------------------

Tensor.prototype.linear = function (this: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  const k = this.shape[this.ndim - 1];
  if (this.ndim === 0 || weight.ndim < 1 || weight.ndim > 2 || weight.shape[0] !== k)
    throw new Error(
      `linear: input ${shapeStr(this)} and weight ${shapeStr(weight)}; weight needs shape (in, out) or (in) with in = the input's last axis`,
    );
  const out = weight.ndim === 1 ? this.mul(weight) : this.matmul(weight);
  if (bias === undefined) return out;
  broadcastShape('linear: bias', out.shape, bias.shape);
  return out.add(bias);
};

Tensor.prototype.batchnorm = function (
  this: Tensor,
  weight: Tensor | undefined,
  bias: Tensor | undefined,
  mean: Tensor | undefined,
  invstd: Tensor | undefined,
  axis: Axes = 1,
): Tensor {
  const axes = reducedAxes(this, axis);
  const shape = this.shape.map((d, i) => (axes.includes(i) ? d : 1));
  const channels = axes.map((a) => this.shape[a]!);
  // a parameter holds one value per channel: the channel axes' sizes, in order
  const laid = (name: string, p: Tensor) => {
    if (p.ndim !== axes.length || !p.shape.every((d, i) => d === channels[i]))
      throw new Error(
        `batchnorm: ${name} ${shapeStr(p)} should have shape (${channels.join(', ')}), one value per channel along axis ${JSON.stringify(axis)} of input ${shapeStr(this)}`,
      );
    return p.reshape(shape);
  };
  let x = mean === undefined ? this.toFloat() : this.sub(laid('mean', mean));
  if (weight !== undefined) x = x.mul(laid('weight', weight));
  if (invstd !== undefined) x = x.mul(invstd.ndim === axes.length ? laid('invstd', invstd) : invstd);
  return bias === undefined ? x : x.add(laid('bias', bias));
};

Tensor.prototype.varMean = function (
  this: Tensor,
  axis?: Axes,
  keepdim = false,
  correction = 1,
): [Tensor, Tensor] {
  return [this.var(axis, keepdim, correction), this.mean(axis, keepdim)];
};

Tensor.prototype.stdMean = function (
  this: Tensor,
  axis?: Axes,
  keepdim = false,
  correction = 1,
): [Tensor, Tensor] {
  return [this.std(axis, keepdim, correction), this.mean(axis, keepdim)];
};

Tensor.prototype.normalize = function (this: Tensor, opts: NormalizeOptions = {}): Tensor {
  const { p = 2, dim = 1, eps = 1e-12 } = opts;
  if (!(p > 0)) throw new Error(`normalize: p must be a positive number or Infinity, got ${p}`);
  const x = this.toFloat();
  const a = x.abs();
  const norm =
    p === Infinity
      ? a.max(dim, true)
      : p === 1
        ? a.sum(dim, true)
        : p === 2
          ? x.square().sum(dim, true).sqrt()
          : a
              .pow(p)
              .sum(dim, true)
              .pow(1 / p);
  return x.div(norm.maximum(eps));
};
