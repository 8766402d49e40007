// nn layers: Linear, convolutions, normalizations, Embedding, Dropout and LSTMCell, with tinygrad's default initialization.
import { dtypes, narrowSumDType } from '../dtype.ts';
import { prod } from '../helpers.ts';
import { type ConvOptions, checkIndex, type Size, Tensor } from '../tensor/index.ts';
import { assign } from './state-dict.ts';

/**
 * A layer: `forward(x)` computes it and `call(x)` is the same (tinygrad calls a layer; TypeScript objects
 * cannot be called, so both names exist). Its tensors are plain fields, so getStateDict finds them by
 * name; parameters have requiresGrad, buffers (BatchNorm's running statistics) do not.
 */
export abstract class Module {
  abstract forward(x: Tensor): Tensor;
  call(x: Tensor): Tensor {
    return this.forward(x);
  }
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

function checkCount(layer: string, what: string, n: number): void {
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`${layer}: ${what} must be a positive integer, got ${n}`);
}

function checkPositive(layer: string, what: string, x: number): void {
  if (!(x > 0)) throw new Error(`${layer}: ${what} must be positive, got ${x}`);
}

/** A per-axis list of n sizes from one size or n of them. */
function perAxis(layer: string, what: string, v: Size, n: number, min: number): number[] {
  const list = typeof v === 'number' ? new Array<number>(n).fill(v) : [...v];
  if (list.length !== n || !list.every((x) => Number.isInteger(x) && x >= min))
    throw new Error(`${layer}: ${what} ${JSON.stringify(v)} should be one integer >= ${min} or ${n} of them`);
  return list;
}

// Each tensor gets a buffer of its own, written when the model is first used, with all the others
// (Tensor.deferredInit): equal initial values (ones, zeros) are one hash-consed graph and would share one.
function parameter(t: Tensor): Tensor {
  const p = Tensor.deferredInit(t);
  p.requiresGrad = true;
  return p;
}
const buffer = (t: Tensor): Tensor => Tensor.deferredInit(t);

/** torch's and tinygrad's default for weights: kaiming uniform with a = sqrt(5), bound 1 / sqrt(fanIn). */
const weightInit = (shape: readonly number[]) => parameter(Tensor.kaimingUniform(shape, Math.sqrt(5)));
const biasInit = (n: number, fanIn: number) =>
  parameter(Tensor.uniform([n], -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn)));

/** Shape (1, C, 1, ...) for a per-channel vector beside an (N, C, ...) input. */
const channelShape = (x: Tensor) => x.shape.map((d, i) => (i === 1 ? d : 1));

function checkChannels(layer: string, x: Tensor, channels: number): void {
  if (x.ndim < 2 || x.shape[1] !== channels)
    throw new Error(`${layer}: input ${fmt(x.shape)} should be (N, ${channels}, ...), channels on axis 1`);
}

// --- linear and convolutions ------------------------------------------------------------------------------

export interface LinearOptions {
  bias?: boolean;
}

/** y = x W^T + b over the last axis. weight: (out, in); init as PyTorch and tinygrad (bound 1/sqrt(in)). */
export class Linear extends Module {
  weight: Tensor;
  bias: Tensor | undefined;

  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    opts: LinearOptions = {},
  ) {
    super();
    checkCount('Linear', 'inFeatures', inFeatures);
    checkCount('Linear', 'outFeatures', outFeatures);
    this.weight = weightInit([outFeatures, inFeatures]);
    this.bias = (opts.bias ?? true) ? biasInit(outFeatures, inFeatures) : undefined;
  }

  forward(x: Tensor): Tensor {
    if (x.ndim < 1 || x.shape[x.ndim - 1] !== this.inFeatures)
      throw new Error(
        `Linear(${this.inFeatures}, ${this.outFeatures}): input ${fmt(x.shape)} should have ${this.inFeatures} on its last axis`,
      );
    const y = x.matmul(this.weight.transpose());
    return this.bias === undefined ? y : y.add(this.bias);
  }
}

export interface Conv2dOptions extends ConvOptions {
  bias?: boolean;
}

/** A convolution layer's weight (kaiming uniform, as PyTorch) and bias over fanIn inputs per output. */
function convParameters(
  weightShape: readonly number[],
  outChannels: number,
  fanIn: number,
  bias: boolean,
): [Tensor, Tensor | undefined] {
  return [weightInit(weightShape), bias ? biasInit(outChannels, fanIn) : undefined];
}

/**
 * Convolution of (N, in, spatial...). A kernelSize given as a list sets the number of spatial axes ([3]
 * is 1-D, [3, 3, 3] is 3-D, as tinygrad); a number means 2-D. weight: (out, in / groups, ...kernel), kaiming
 * uniform over that shape's fan-in (in / groups * prod(kernel), as PyTorch; tinygrad leaves out the groups).
 */
export class Conv2d extends Module {
  weight: Tensor;
  bias: Tensor | undefined;
  readonly options: ConvOptions;

  constructor(inChannels: number, outChannels: number, kernelSize: Size, opts: Conv2dOptions = {}) {
    super();
    const { bias = true, ...options } = opts;
    const groups = options.groups ?? 1;
    const kernel = checkConvShape(new.target.name, inChannels, outChannels, kernelSize, groups);
    this.options = options;
    [this.weight, this.bias] = convParameters(
      [outChannels, inChannels / groups, ...kernel],
      outChannels,
      (inChannels / groups) * prod(kernel),
      bias,
    );
  }

  forward(x: Tensor): Tensor {
    return x.conv2d(this.weight, this.bias, this.options);
  }
}

/** 1-D convolution of (N, in, L): Conv2d with a kernel of one axis. weight: (out, in / groups, kernelSize). */
export class Conv1d extends Conv2d {
  constructor(inChannels: number, outChannels: number, kernelSize: number, opts: Conv2dOptions = {}) {
    super(inChannels, outChannels, [kernelSize], opts);
  }

  override forward(x: Tensor): Tensor {
    if (x.ndim !== 3)
      throw new Error(
        `Conv1d: input ${fmt(x.shape)} should be (N, ${this.weight.shape[1]! * (this.options.groups ?? 1)}, L)`,
      );
    return super.forward(x);
  }
}

/**
 * The kernel's sizes, after checking channels and groups: a list gives its own number of spatial axes, a
 * number stands for two.
 */
function checkConvShape(layer: string, cin: number, cout: number, kernel: Size, groups: number): number[] {
  checkCount(layer, 'inChannels', cin);
  checkCount(layer, 'outChannels', cout);
  checkCount(layer, 'groups', groups);
  if (cin % groups !== 0 || cout % groups !== 0)
    throw new Error(`${layer}: groups ${groups} must divide inChannels ${cin} and outChannels ${cout}`);
  if (typeof kernel !== 'number' && kernel.length === 0)
    throw new Error(
      `${layer}: kernelSize ${JSON.stringify(kernel)} should be a positive integer or a non-empty list of them (one per spatial axis)`,
    );
  return perAxis(layer, 'kernelSize', kernel, typeof kernel === 'number' ? 2 : kernel.length, 1);
}

export interface ConvTransposeOptions {
  stride?: Size;
  /** Removed from both sides of each spatial axis of the output (PyTorch's meaning). */
  padding?: Size;
  /** Added to the end of each spatial axis of the output; less than the stride or the dilation. */
  outputPadding?: Size;
  dilation?: Size;
  groups?: number;
}

/** x with s - 1 zeros between neighbours along axis a: unsqueeze, pad the new axis, merge, trim the tail. */
function spread(x: Tensor, a: number, s: number): Tensor {
  if (s === 1) return x;
  const len = x.shape[a]!;
  const pads = x.shape.map(() => [0, 0] as [number, number]);
  pads.splice(a + 1, 0, [0, s - 1]);
  const merged = x
    .unsqueeze(a + 1)
    .pad(pads)
    .reshape(x.shape.map((d, i) => (i === a ? d * s : d)));
  return merged.shrink(merged.shape.map((d, i) => [0, i === a ? (len - 1) * s + 1 : d]));
}

/**
 * Transposed convolution of (N, Cin, spatial...) by a (Cin, Cout / groups, kernel...) weight, the gradient
 * of conv2d with respect to its input: a stride-1 convolution of the input spread out by the stride, padded
 * by dilation * (kernel - 1) - padding (plus outputPadding at the end; a negative amount trims), by the
 * flipped kernel with input and output channels swapped within each group.
 */
export function convTranspose2d(
  x: Tensor,
  weight: Tensor,
  bias?: Tensor,
  opts: ConvTransposeOptions = {},
): Tensor {
  const op = 'convTranspose2d';
  const { groups = 1 } = opts;
  const nd = weight.ndim - 2;
  const [cin, cg, ...kernel] = weight.shape as [number, number, ...number[]];
  if (nd < 1 || x.ndim !== weight.ndim || x.shape[1] !== cin)
    throw new Error(
      `${op}: input ${fmt(x.shape)} and weight ${fmt(weight.shape)} need (N, Cin, spatial...) and (Cin, Cout / groups, kernel...) of the same rank and Cin`,
    );
  checkCount(op, 'groups', groups);
  if (cin % groups !== 0)
    throw new Error(
      `${op}: groups ${groups} must divide the ${cin} input channels of weight ${fmt(weight.shape)}`,
    );
  const stride = perAxis(op, 'stride', opts.stride ?? 1, nd, 1);
  const dilation = perAxis(op, 'dilation', opts.dilation ?? 1, nd, 1);
  const padding = perAxis(op, 'padding', opts.padding ?? 0, nd, 0);
  const outPad = perAxis(op, 'outputPadding', opts.outputPadding ?? 0, nd, 0);
  const spatial = x.shape.slice(2);
  const pads = range(nd).map((j) => {
    if (outPad[j]! >= Math.max(stride[j]!, dilation[j]!))
      throw new Error(
        `${op}: outputPadding ${outPad[j]} on spatial axis ${j} must be less than the stride ${stride[j]} or the dilation ${dilation[j]}`,
      );
    const edge = dilation[j]! * (kernel[j]! - 1) - padding[j]!;
    const out = (spatial[j]! - 1) * stride[j]! + edge - padding[j]! + outPad[j]! + 1;
    if (spatial[j]! < 1 || out < 1)
      throw new Error(
        `${op}: input ${fmt(x.shape)} gives no output along spatial axis ${j} (kernel ${kernel[j]}, stride ${stride[j]}, padding ${padding[j]}, dilation ${dilation[j]}); lower the padding`,
      );
    return [edge, edge + outPad[j]!] as const;
  });
  let t = x;
  range(nd).forEach((j) => {
    t = spread(t, 2 + j, stride[j]!);
  });
  // a negative amount trims the spread input instead
  const trim = pads.map(([a, b]) => [Math.max(0, -a), Math.max(0, -b)] as const);
  t = t.shrink(t.shape.map((d, i) => (i < 2 ? [0, d] : [trim[i - 2]![0], d - trim[i - 2]![1]])));
  t = t.pad(
    t.shape.map((_, i) => (i < 2 ? [0, 0] : [Math.max(0, pads[i - 2]![0]), Math.max(0, pads[i - 2]![1])])),
  );
  const w = weight
    .reshape([groups, cin / groups, cg, ...kernel])
    .transpose(1, 2)
    .reshape([groups * cg, cin / groups, ...kernel])
    .flip(range(nd).map((j) => 2 + j));
  return t.conv2d(w, bias, { dilation, groups });
}

/**
 * Transposed convolution of (N, in, spatial...); kernelSize as Conv2d's (a list sets the spatial rank, a
 * number means 2-D). weight: (in, out / groups, ...kernel), kaiming uniform over that shape's fan-in
 * (out / groups * prod(kernel), as PyTorch; tinygrad uses in * prod(kernel)).
 */
export class ConvTranspose2d extends Module {
  weight: Tensor;
  bias: Tensor | undefined;
  readonly options: ConvTransposeOptions;

  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: Size,
    opts: ConvTransposeOptions & { bias?: boolean } = {},
  ) {
    super();
    const { bias = true, ...options } = opts;
    const groups = options.groups ?? 1;
    const kernel = checkConvShape(new.target.name, inChannels, outChannels, kernelSize, groups);
    this.options = options;
    [this.weight, this.bias] = convParameters(
      [inChannels, outChannels / groups, ...kernel],
      outChannels,
      (outChannels / groups) * prod(kernel),
      bias,
    );
  }

  forward(x: Tensor): Tensor {
    return convTranspose2d(x, this.weight, this.bias, this.options);
  }
}

/** Transposed 1-D convolution of (N, in, L): ConvTranspose2d with a kernel of one axis. */
export class ConvTranspose1d extends ConvTranspose2d {
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: number,
    opts: ConvTransposeOptions & { bias?: boolean } = {},
  ) {
    super(inChannels, outChannels, [kernelSize], opts);
  }

  override forward(x: Tensor): Tensor {
    if (x.ndim !== 3)
      throw new Error(`ConvTranspose1d: input ${fmt(x.shape)} should be (N, ${this.weight.shape[0]}, L)`);
    return super.forward(x);
  }
}

// --- normalization ------------------------------------------------------------------------------------------

export interface BatchNormOptions {
  eps?: number;
  /** Weight of the newest batch in the running statistics. */
  momentum?: number;
  /** Learnable per-channel scale (ones) and shift (zeros). */
  affine?: boolean;
  /** Keep running mean and variance for eval mode; without them eval mode uses batch statistics too. */
  trackRunningStats?: boolean;
}

/**
 * Batch normalization over axis 1 of (N, C, ...) (BatchNorm1d, 2d and 3d in one). While Tensor.training is
 * set it normalizes by the batch's mean and (biased) variance and updates the running statistics lazily
 * (running = (1 - momentum) running + momentum batch, with the unbiased variance, as PyTorch); realize them
 * with the optimizer's step (getBuffers). Otherwise it normalizes by the running statistics.
 */
export class BatchNorm extends Module {
  weight: Tensor | undefined;
  bias: Tensor | undefined;
  runningMean: Tensor | undefined;
  runningVar: Tensor | undefined;
  /** How many training batches updated the running statistics (int64, as PyTorch). */
  numBatchesTracked: Tensor | undefined;
  readonly eps: number;
  readonly momentum: number;

  constructor(
    readonly numFeatures: number,
    opts: BatchNormOptions = {},
  ) {
    super();
    const { eps = 1e-5, momentum = 0.1, affine = true, trackRunningStats = true } = opts;
    checkCount('BatchNorm', 'numFeatures', numFeatures);
    checkPositive('BatchNorm', 'eps', eps);
    if (!(momentum >= 0 && momentum <= 1))
      throw new Error(`BatchNorm: momentum must lie in [0, 1], got ${momentum}`);
    [this.eps, this.momentum] = [eps, momentum];
    this.weight = affine ? parameter(Tensor.ones([numFeatures])) : undefined;
    this.bias = affine ? parameter(Tensor.zeros([numFeatures])) : undefined;
    this.runningMean = trackRunningStats ? buffer(Tensor.zeros([numFeatures])) : undefined;
    this.runningVar = trackRunningStats ? buffer(Tensor.ones([numFeatures])) : undefined;
    this.numBatchesTracked = trackRunningStats
      ? buffer(Tensor.zeros([], { dtype: dtypes.int64 }))
      : undefined;
  }

  forward(x: Tensor): Tensor {
    checkChannels(`BatchNorm(${this.numFeatures})`, x, this.numFeatures);
    const shape = channelShape(x);
    const { runningMean, runningVar, numBatchesTracked } = this;
    let mean: Tensor;
    let variance: Tensor;
    if (!Tensor.training && runningMean !== undefined && runningVar !== undefined) {
      [mean, variance] = [runningMean, runningVar];
    } else {
      const axes = range(x.ndim).filter((a) => a !== 1);
      const n = x.numel / this.numFeatures;
      if (n < 2)
        throw new Error(
          `BatchNorm(${this.numFeatures}): input ${fmt(x.shape)} has ${n} value(s) per channel; batch statistics need at least 2`,
        );
      mean = x.mean(axes);
      // the variance's gradient through the mean is zero (the deviations sum to zero), so it needs none
      variance = x.sub(mean.detach().reshape(shape)).square().mean(axes);
      if (Tensor.training && runningMean !== undefined && runningVar !== undefined) {
        const m = this.momentum;
        const blend = (run: Tensor, batch: Tensor) =>
          run
            .mul(1 - m)
            .add(batch.detach().mul(m))
            .cast(run.dtype);
        assign(runningMean, blend(runningMean, mean));
        assign(runningVar, blend(runningVar, variance.mul(n / (n - 1))));
        assign(numBatchesTracked!, numBatchesTracked!.add(1));
      }
    }
    const y = x.sub(mean.reshape(shape)).mul(variance.add(this.eps).rsqrt().reshape(shape));
    return this.weight === undefined || this.bias === undefined
      ? y
      : y.mul(this.weight.reshape(shape)).add(this.bias.reshape(shape));
  }
}
export { BatchNorm as BatchNorm1d, BatchNorm as BatchNorm2d };

export interface LayerNormOptions {
  eps?: number;
  /** Learnable scale (ones) and shift (zeros) of the normalized shape. */
  elementwiseAffine?: boolean;
}

/** Normalizes over the last axes (normalizedShape) by their mean and population variance. */
export class LayerNorm extends Module {
  weight: Tensor | undefined;
  bias: Tensor | undefined;
  readonly normalizedShape: readonly number[];
  readonly eps: number;

  constructor(normalizedShape: number | readonly number[], opts: LayerNormOptions = {}) {
    super();
    const { eps = 1e-5, elementwiseAffine = true } = opts;
    const shape = typeof normalizedShape === 'number' ? [normalizedShape] : [...normalizedShape];
    if (shape.length === 0) throw new Error('LayerNorm: normalizedShape needs at least one axis');
    for (const d of shape) checkCount('LayerNorm', 'each size of normalizedShape', d);
    checkPositive('LayerNorm', 'eps', eps);
    [this.normalizedShape, this.eps] = [shape, eps];
    this.weight = elementwiseAffine ? parameter(Tensor.ones(shape)) : undefined;
    this.bias = elementwiseAffine ? parameter(Tensor.zeros(shape)) : undefined;
  }

  forward(x: Tensor): Tensor {
    const k = this.normalizedShape.length;
    if (x.ndim < k || fmt(x.shape.slice(x.ndim - k)) !== fmt(this.normalizedShape))
      throw new Error(
        `LayerNorm${fmt(this.normalizedShape)}: input ${fmt(x.shape)} should end in ${fmt(this.normalizedShape)}`,
      );
    const y = x.layernorm(
      range(k).map((i) => i - k),
      this.eps,
    );
    return this.weight === undefined || this.bias === undefined ? y : y.mul(this.weight).add(this.bias);
  }
}

export interface RMSNormOptions {
  eps?: number;
  /** Learnable scale (ones). */
  elementwiseAffine?: boolean;
}

/** x / sqrt(mean(x^2) + eps) over the last axis (of size dim), times a learnable scale. */
export class RMSNorm extends Module {
  weight: Tensor | undefined;
  readonly eps: number;

  constructor(
    readonly dim: number,
    opts: RMSNormOptions = {},
  ) {
    super();
    const { eps = 1e-6, elementwiseAffine = true } = opts;
    checkCount('RMSNorm', 'dim', dim);
    checkPositive('RMSNorm', 'eps', eps);
    this.eps = eps;
    this.weight = elementwiseAffine ? parameter(Tensor.ones([dim])) : undefined;
  }

  forward(x: Tensor): Tensor {
    if (x.ndim < 1 || x.shape[x.ndim - 1] !== this.dim)
      throw new Error(`RMSNorm(${this.dim}): input ${fmt(x.shape)} should have ${this.dim} on its last axis`);
    const xf = x.toFloat();
    const y = xf.mul(xf.square().mean(-1, true).add(this.eps).rsqrt()).cast(x.dtype);
    return this.weight === undefined ? y : y.mul(this.weight);
  }
}

export interface GroupNormOptions {
  eps?: number;
  /** Learnable per-channel scale (ones) and shift (zeros). */
  affine?: boolean;
}

/** Normalizes each group of numChannels / numGroups channels of (N, C, ...) over the group and the spatial axes. */
export class GroupNorm extends Module {
  weight: Tensor | undefined;
  bias: Tensor | undefined;
  readonly eps: number;

  constructor(
    readonly numGroups: number,
    readonly numChannels: number,
    opts: GroupNormOptions = {},
  ) {
    super();
    const { eps = 1e-5, affine = true } = opts;
    checkCount('GroupNorm', 'numGroups', numGroups);
    checkCount('GroupNorm', 'numChannels', numChannels);
    if (numChannels % numGroups !== 0)
      throw new Error(`GroupNorm: numGroups ${numGroups} must divide numChannels ${numChannels}`);
    checkPositive('GroupNorm', 'eps', eps);
    this.eps = eps;
    this.weight = affine ? parameter(Tensor.ones([numChannels])) : undefined;
    this.bias = affine ? parameter(Tensor.zeros([numChannels])) : undefined;
  }

  forward(x: Tensor): Tensor {
    checkChannels(`GroupNorm(${this.numGroups}, ${this.numChannels})`, x, this.numChannels);
    const [n] = x.shape as [number];
    const y = x
      .reshape([n, this.numGroups, x.numel / Math.max(1, n * this.numGroups)])
      .layernorm(-1, this.eps)
      .reshape(x.shape);
    if (this.weight === undefined || this.bias === undefined) return y;
    const shape = channelShape(x);
    return y.mul(this.weight.reshape(shape)).add(this.bias.reshape(shape));
  }
}

export interface InstanceNormOptions {
  eps?: number;
  /** Learnable per-channel scale (ones) and shift (zeros); on by default, as tinygrad (PyTorch: off). */
  affine?: boolean;
}

/** Normalizes each channel of each sample of (N, C, ...) over its spatial axes (mean, population variance). */
export class InstanceNorm extends Module {
  weight: Tensor | undefined;
  bias: Tensor | undefined;
  readonly eps: number;

  constructor(
    readonly numFeatures: number,
    opts: InstanceNormOptions = {},
  ) {
    super();
    const { eps = 1e-5, affine = true } = opts;
    checkCount('InstanceNorm', 'numFeatures', numFeatures);
    checkPositive('InstanceNorm', 'eps', eps);
    this.eps = eps;
    this.weight = affine ? parameter(Tensor.ones([numFeatures])) : undefined;
    this.bias = affine ? parameter(Tensor.zeros([numFeatures])) : undefined;
  }

  forward(x: Tensor): Tensor {
    checkChannels(`InstanceNorm(${this.numFeatures})`, x, this.numFeatures);
    const [n] = x.shape as [number];
    const y = x
      .reshape([n, this.numFeatures, x.numel / Math.max(1, n * this.numFeatures)])
      .layernorm(-1, this.eps)
      .reshape(x.shape);
    if (this.weight === undefined || this.bias === undefined) return y;
    const shape = channelShape(x);
    return y.mul(this.weight.reshape(shape)).add(this.bias.reshape(shape));
  }
}

/** LayerNorm over the channels of (N, C, H, W) at each position, as tinygrad's (ConvNeXt's channels-first norm). */
export class LayerNorm2d extends LayerNorm {
  constructor(channels: number, opts: LayerNormOptions = {}) {
    super(channels, opts);
  }

  override forward(x: Tensor): Tensor {
    const c = this.normalizedShape[0]!;
    if (x.ndim !== 4 || x.shape[1] !== c)
      throw new Error(`LayerNorm2d(${c}): input ${fmt(x.shape)} should be (N, ${c}, H, W)`);
    return super.forward(x.permute([0, 2, 3, 1])).permute([0, 3, 1, 2]);
  }
}

// --- lookup and regularization ------------------------------------------------------------------------------

/**
 * A table of vocabSize vectors of embedSize (glorot uniform, as tinygrad). forward(idx) maps integer indices
 * (...) to (..., embedSize) by a one-hot selection (compare with an arange, select, sum), so it runs in
 * kernels and has a gradient. Indices lie in [0, vocabSize), negative ones included (PyTorch's rule): out of
 * range is an error where the host holds them (made from JS data, or realized on CPU or JS), else only with
 * CHECK_INDEX=1; a lazy one's vector is zeros.
 */
export class Embedding extends Module {
  weight: Tensor;

  constructor(
    readonly vocabSize: number,
    readonly embedSize: number,
  ) {
    super();
    checkCount('Embedding', 'vocabSize', vocabSize);
    checkCount('Embedding', 'embedSize', embedSize);
    this.weight = parameter(Tensor.glorotUniform([vocabSize, embedSize]));
  }

  forward(idx: Tensor): Tensor {
    if (!idx.dtype.isInt)
      throw new Error(
        `Embedding(${this.vocabSize}, ${this.embedSize}): indices need an integer dtype, got ${idx.dtype.name}`,
      );
    checkIndex(`Embedding(${this.vocabSize}, ${this.embedSize})`, idx, {
      lo: 0,
      hi: this.vocabSize,
      name: 'index',
      of: `a vocabulary of ${this.vocabSize}`,
    });
    const hit = idx
      .unsqueeze(-1)
      .eq(Tensor.arange(this.vocabSize, undefined, 1, { device: idx.device }))
      .unsqueeze(-1);
    const picked = hit.where(this.weight, 0);
    return picked.sum(-2, false, narrowSumDType(picked.dtype));
  }
}

/** While Tensor.training is set, zeroes each element with probability p and scales the rest by 1 / (1 - p). */
export class Dropout extends Module {
  constructor(readonly p = 0.5) {
    super();
    if (!(p >= 0 && p <= 1)) throw new Error(`Dropout: p must lie in [0, 1], got ${p}`);
  }

  forward(x: Tensor): Tensor {
    return x.dropout(this.p);
  }
}

// --- recurrent ----------------------------------------------------------------------------------------------

export interface LSTMCellOptions {
  bias?: boolean;
}

/**
 * One step of an LSTM, PyTorch's layout: weightIh (4 hidden, input), weightHh (4 hidden, hidden), biases
 * (4 hidden) each, gates in the order input, forget, cell, output; all uniform in ±1 / sqrt(hidden) (as
 * PyTorch; tinygrad starts the biases at zero). forward(x, [h, c]) takes x (N, input) or (input) and the
 * state (N, hidden) each (zeros when left out) and returns the new [h, c]. It is no Module: its forward
 * takes and returns a state beside x.
 */
export class LSTMCell {
  weightIh: Tensor;
  weightHh: Tensor;
  biasIh: Tensor | undefined;
  biasHh: Tensor | undefined;

  constructor(
    readonly inputSize: number,
    readonly hiddenSize: number,
    opts: LSTMCellOptions = {},
  ) {
    checkCount('LSTMCell', 'inputSize', inputSize);
    checkCount('LSTMCell', 'hiddenSize', hiddenSize);
    const bound = 1 / Math.sqrt(hiddenSize);
    const init = (shape: number[]) => parameter(Tensor.uniform(shape, -bound, bound));
    this.weightIh = init([4 * hiddenSize, inputSize]);
    this.weightHh = init([4 * hiddenSize, hiddenSize]);
    const bias = opts.bias ?? true;
    this.biasIh = bias ? init([4 * hiddenSize]) : undefined;
    this.biasHh = bias ? init([4 * hiddenSize]) : undefined;
  }

  forward(x: Tensor, state?: readonly [Tensor, Tensor]): [Tensor, Tensor] {
    const name = `LSTMCell(${this.inputSize}, ${this.hiddenSize})`;
    if ((x.ndim !== 1 && x.ndim !== 2) || x.shape[x.ndim - 1] !== this.inputSize)
      throw new Error(
        `${name}: input ${fmt(x.shape)} should be (N, ${this.inputSize}) or (${this.inputSize})`,
      );
    const batched = x.ndim === 2;
    const xs = batched ? x : x.unsqueeze(0);
    const want = [xs.shape[0]!, this.hiddenSize];
    const [h, c] = (state ?? [0, 0].map(() => Tensor.zeros(want, { dtype: x.dtype, device: x.device }))).map(
      (s, i) => {
        const given = batched ? s : s.ndim === 1 ? s.unsqueeze(0) : s;
        if (fmt(given.shape) !== fmt(want))
          throw new Error(
            `${name}: ${i === 0 ? 'h' : 'c'} ${fmt(s.shape)} should be ${batched ? fmt(want) : `(${this.hiddenSize})`} beside input ${fmt(x.shape)}`,
          );
        return given;
      },
    ) as [Tensor, Tensor];
    const affine = (t: Tensor, w: Tensor, b: Tensor | undefined) => {
      const y = t.matmul(w.transpose());
      return b === undefined ? y : y.add(b);
    };
    const gates = affine(xs, this.weightIh, this.biasIh).add(affine(h, this.weightHh, this.biasHh));
    const [i, f, g, o] = gates.chunk(4, 1) as [Tensor, Tensor, Tensor, Tensor];
    const cNew = f.sigmoid().mul(c).add(i.sigmoid().mul(g.tanh()));
    const hNew = o.sigmoid().mul(cNew.tanh());
    return batched ? [hNew, cNew] : [hNew.squeeze(0), cNew.squeeze(0)];
  }

  call(x: Tensor, state?: readonly [Tensor, Tensor]): [Tensor, Tensor] {
    return this.forward(x, state);
  }
}
