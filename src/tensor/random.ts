// Random tensors: Threefry 2x32 bits computed in kernels, and the distributions, initializers, permutations, sampling and dropout built on them.

import { type DType, dtypes } from '../dtype.ts';
import { prod } from '../helpers.ts';
import { Device } from '../runtime/device.ts';
import type { UOp } from '../uop/uop.ts';
import { checkTensor, dtypeOption, marksResult, Tensor, type TensorOptions } from './tensor.ts';
import { checkFinite, checkOptions, checkShape as checkSizes } from './validate.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** While Tensor.training is set: zeroes each element with probability p and scales the rest by 1/(1-p). */
    dropout(p?: number): Tensor;
    /**
     * numSamples category indices (int32) drawn from each row of this 1-D (k) or 2-D (rows, k) tensor of
     * weights (non-negative, a positive sum per row; not checked, that would read the data): shape
     * (numSamples) or (rows, numSamples). With replacement each draw inverts the row's cumulative sum;
     * without, the numSamples largest Efraimidis-Spirakis keys log(u) / w (u uniform in (0, 1]) are taken,
     * so a zero (or negative) weight comes only after every positive one.
     */
    multinomial(numSamples?: number, replacement?: boolean): Tensor;
  }
  namespace Tensor {
    /** Turns on training-only behaviour (dropout); off by default. */
    let training: boolean;
    /** Restarts the random stream: the same seed gives the same values, call after call, on every device. */
    function manualSeed(seed: number): void;
    /** Uniform in [0, 1), float32 unless opts.dtype is another float. */
    function rand(shape: readonly number[], opts?: TensorOptions): Tensor;
    /** Standard normal (Box-Muller). */
    function randn(shape: readonly number[], opts?: TensorOptions): Tensor;
    /** Integers uniform in [low, high), int32 unless opts.dtype is another integer type. */
    function randint(shape: readonly number[], low?: number, high?: number, opts?: TensorOptions): Tensor;
    /** Uniform in [low, high). */
    function uniform(shape: readonly number[], low?: number, high?: number, opts?: TensorOptions): Tensor;
    /** Normal with the given mean and standard deviation. */
    function normal(shape: readonly number[], mean?: number, std?: number, opts?: TensorOptions): Tensor;
    /** He initialization for a [fanOut, fanIn, ...kernel] weight: uniform in ±sqrt(6 / ((1 + a²) fanIn)). */
    function kaimingUniform(shape: readonly number[], a?: number, opts?: TensorOptions): Tensor;
    /** He initialization for a [fanOut, fanIn, ...kernel] weight: normal with std sqrt(2 / ((1 + a²) fanIn)). */
    function kaimingNormal(shape: readonly number[], a?: number, opts?: TensorOptions): Tensor;
    /** Uniform in [0, 1) of t's shape and device, in t's dtype where it is a float (float32 otherwise). */
    function randLike(t: Tensor, opts?: TensorOptions): Tensor;
    /** Standard normal of t's shape and device, in t's dtype where it is a float (float32 otherwise). */
    function randnLike(t: Tensor, opts?: TensorOptions): Tensor;
    /**
     * A random permutation of 0..n-1 (int32 unless opts.dtype is another integer type): the ranks of n
     * random 32-bit keys (ties by position), which compares every pair, so it costs n² work in one kernel.
     */
    function randperm(n: number, opts?: TensorOptions): Tensor;
    /** Xavier initialization for a [fanOut, fanIn, ...kernel] weight: uniform in ±sqrt(6 / (fanIn + fanOut)). */
    function glorotUniform(shape: readonly number[], opts?: TensorOptions): Tensor;
  }
}

// Random123's Threefry-2x32 rotation constants (the second row serves the odd groups of four rounds) and
// the key-schedule parity constant
const ROTATIONS = [
  [13, 15, 26, 6],
  [17, 29, 16, 24],
] as const;
const PARITY = 0x1bd11bda;

/** Threefry 2x32 with 20 rounds on uint32 values of one shape: counter (x0, x1) under key (k0, k1). */
export function threefry2x32(x0: UOp, x1: UOp, k0: UOp, k1: UOp): [UOp, UOp] {
  const ks = [k0, k1, k0.xor(k1).xor(PARITY)] as const;
  let a = x0.add(ks[0]);
  let b = x1.add(ks[1]);
  for (let s = 1; s <= 5; s++) {
    for (const r of ROTATIONS[(s - 1) % 2]!) {
      a = a.add(b);
      // b rotated left by r, mixed with a
      b = b
        .shl(r)
        .or(b.shr(32 - r))
        .xor(a);
    }
    // inject the key every four rounds, with the group number so the groups differ
    a = a.add(ks[s % 3]!);
    b = b.add(ks[(s + 1) % 3]!).add(s);
  }
  return [a, b];
}

// The stream: one key per seed (its low and high 32 bits) and a two-word counter per element, (its row-major
// index, the number of random calls made since the seed was set). Seed and call number reach the kernel
// as a small buffer rather than constants, so every call of a shape runs the same compiled kernel. The seed
// is 0 until manualSeed sets another, so a program draws the same values every run, as in PyTorch.
let seedWords = [0, 0];
let calls = 0;

function manualSeed(seed: number): void {
  if (!Number.isSafeInteger(seed)) throw new Error(`Tensor.manualSeed: seed must be an integer, got ${seed}`);
  const s = BigInt.asUintN(64, BigInt(seed));
  seedWords = [Number(s & 0xffffffffn), Number(s >> 32n)];
  calls = 0;
}

/** Both output words of Threefry for every element of shape, as uint32 tensors (numel below 2^31). */
function randomBits(shape: readonly number[], device: string): [Tensor, Tensor] {
  const state = new Tensor(new Uint32Array([seedWords[0]!, seedWords[1]!, calls++]), { device });
  const word = (i: number) =>
    state
      .shrink([[i, i + 1]])
      .reshape(shape.map(() => 1))
      .broadcastTo(shape).uop;
  const index = Tensor.arange(prod(shape), undefined, 1, { device, dtype: dtypes.int32 })
    .cast(dtypes.uint32)
    .reshape(shape).uop;
  const [a, b] = threefry2x32(index, word(2), word(0), word(1));
  return [state.wrap(a), state.wrap(b)];
}

/** Bits a float dtype holds exactly as k / 2^bits: its significand's width, at most the 32 we have. */
const UNIT_BITS = new Map<DType, number>([
  [dtypes.float16, 11],
  [dtypes.bfloat16, 8],
  [dtypes.float32, 24],
  [dtypes.float64, 32],
]);

/** Uniform in [0, 1): the top bits of a random word as k / 2^bits, exact in dtype so 1 is never reached. */
function unit(bits: Tensor, dtype: DType): Tensor {
  const n = UNIT_BITS.get(dtype)!;
  const top = n < 32 ? bits.wrap(bits.uop.shr(32 - n)) : bits;
  return top.cast(dtype).mul(2 ** -n);
}

interface Resolved {
  device: string;
  dtype: DType;
}

function floatOptions(op: string, shape: readonly number[], opts: TensorOptions): Resolved {
  checkShape(op, shape);
  const dtype = dtypeOption(op, opts) ?? dtypes.float32;
  if (!UNIT_BITS.has(dtype))
    throw new Error(
      `${op}: dtype must be a float (${[...UNIT_BITS.keys()].map((d) => d.name).join(', ')}), got ${dtype.name}${dtype.isInt ? '; use Tensor.randint for integers' : ''}`,
    );
  return { device: Device.canonicalize(opts.device ?? Device.default), dtype };
}

function checkShape(op: string, shape: readonly number[]): void {
  checkSizes(op, shape);
  if (prod(shape) >= 2 ** 31)
    throw new Error(
      `${op}: shape (${shape.join(', ')}) has 2^31 or more elements, more than the counter covers`,
    );
}

function rand(shape: readonly number[], opts: TensorOptions = {}): Tensor {
  const o = floatOptions('Tensor.rand', shape, opts);
  if (prod(shape) === 0) return Tensor.empty(shape, o);
  return unit(randomBits(shape, o.device)[0], o.dtype);
}

function randn(shape: readonly number[], opts: TensorOptions = {}): Tensor {
  const o = floatOptions('Tensor.randn', shape, opts);
  if (prod(shape) === 0) return Tensor.empty(shape, o);
  // Box-Muller on the two words of one counter, in float32: 1 - u1 lies in (0, 1], so the log is finite
  const [w0, w1] = randomBits(shape, o.device);
  const u1 = unit(w0, dtypes.float32);
  const u2 = unit(w1, dtypes.float32);
  const radius = u1.neg().add(1).log().mul(-2).sqrt();
  return radius.mul(u2.mul(2 * Math.PI).sin()).cast(o.dtype);
}

function randint(shape: readonly number[], low = 0, high = 10, opts: TensorOptions = {}): Tensor {
  const op = 'Tensor.randint';
  checkShape(op, shape);
  const dtype = dtypeOption(op, opts) ?? dtypes.int32;
  if (!dtype.isInt || dtype === dtypes.index)
    throw new Error(`${op}: dtype must be an integer type, got ${dtype.name}; use Tensor.uniform for floats`);
  if (!Number.isInteger(low) || !Number.isInteger(high) || low >= high)
    throw new Error(`${op}: needs integers low < high, got low=${low}, high=${high}`);
  const [min, max] = [Math.max(dtype.min, -(2 ** 31)), Math.min(dtype.max, 2 ** 31 - 1)];
  if (low < min || high - 1 > max)
    throw new Error(
      `${op}: [${low}, ${high}) does not fit ${dtype.name} (and int32): values must lie in [${min}, ${max}]`,
    );
  const device = Device.canonicalize(opts.device ?? Device.default);
  if (prod(shape) === 0) return Tensor.empty(shape, { dtype, device });
  // the remainder mod the range (bias below range / 2^32), offset by low with uint32 wrap-around; read as
  // int32 that is the value, which fits dtype
  const bits = randomBits(shape, device)[0];
  const range = high - low;
  const offset = range === 2 ** 32 ? bits.uop : bits.uop.mod(range);
  return bits
    .wrap(offset.add(low >>> 0))
    .cast(dtypes.int32)
    .cast(dtype);
}

function uniform(shape: readonly number[], low = 0, high = 1, opts: TensorOptions = {}): Tensor {
  checkFinite('Tensor.uniform', 'low', low);
  checkFinite('Tensor.uniform', 'high', high);
  return rand(shape, opts)
    .mul(high - low)
    .add(low);
}

function normal(shape: readonly number[], mean = 0, std = 1, opts: TensorOptions = {}): Tensor {
  checkFinite('Tensor.normal', 'mean', mean);
  checkFinite('Tensor.normal', 'std', std);
  return randn(shape, opts).mul(std).add(mean);
}

/** fan in and fan out of a [out, in, ...kernel] weight, each counting the kernel's receptive field. */
function fans(op: string, shape: readonly number[]): [number, number] {
  checkSizes(op, shape);
  if (shape.length < 2)
    throw new Error(
      `${op}: needs a weight shape of 2 or more dims ([fanOut, fanIn, ...kernel]), got (${shape.join(', ')})`,
    );
  const field = prod(shape.slice(2));
  return [shape[1]! * field, shape[0]! * field];
}

/** The square root of an initializer's variance; a zero fan (an empty weight, no values drawn) spreads by 0. */
const spread = (variance: number) => (Number.isFinite(variance) ? Math.sqrt(variance) : 0);

function kaimingUniform(shape: readonly number[], a = 0.01, opts: TensorOptions = {}): Tensor {
  const [fanIn] = fans('Tensor.kaimingUniform', shape);
  checkFinite('Tensor.kaimingUniform', 'a', a);
  const bound = spread(6 / ((1 + a * a) * fanIn));
  return uniform(shape, -bound, bound, opts);
}

function kaimingNormal(shape: readonly number[], a = 0.01, opts: TensorOptions = {}): Tensor {
  const [fanIn] = fans('Tensor.kaimingNormal', shape);
  checkFinite('Tensor.kaimingNormal', 'a', a);
  return normal(shape, 0, spread(2 / ((1 + a * a) * fanIn)), opts);
}

/** opts completed from t: its device, and its dtype where that is a float. */
function likeOptions(op: string, t: Tensor, opts: TensorOptions): TensorOptions {
  checkTensor(op, 't', t);
  checkOptions(op, opts);
  return {
    ...opts,
    device: opts.device ?? t.device,
    dtype: opts.dtype ?? (t.dtype.isFloat ? t.dtype : dtypes.float32),
  };
}

/**
 * Each element's rank among the keys along the last axis (int32): how many keys come before it in the
 * order `before` (a strict order), ties going by position, so every row's ranks are 0..k-1 once each.
 */
function ranks(keys: Tensor, before: (a: Tensor, b: Tensor) => Tensor): Tensor {
  const k = keys.shape[keys.ndim - 1]!;
  const mine = keys.unsqueeze(-1);
  const other = keys.unsqueeze(-2);
  const pos = Tensor.arange(k, undefined, 1, { device: keys.device, dtype: dtypes.int32 });
  const earlier = pos.unsqueeze(0).lt(pos.unsqueeze(1));
  const ahead = before(other, mine).where(true, other.eq(mine).where(earlier, false));
  return ahead.where(1, 0).sum(-1, false, dtypes.int32);
}

function randperm(n: number, opts: TensorOptions = {}): Tensor {
  const op = 'Tensor.randperm';
  if (!Number.isInteger(n) || n < 0) throw new Error(`${op}: n must be a non-negative integer, got ${n}`);
  checkShape(op, [n]);
  const dtype = dtypeOption(op, opts) ?? dtypes.int32;
  if (!dtype.isInt || dtype === dtypes.index || n - 1 > dtype.max)
    throw new Error(
      `${op}: dtype must be an integer type that holds ${Math.max(0, n - 1)}, got ${dtype.name}`,
    );
  const device = Device.canonicalize(opts.device ?? Device.default);
  if (n === 0) return Tensor.empty([0], { dtype, device });
  // the ranks of independent keys are a uniformly random permutation
  return ranks(randomBits([n], device)[0], (a, b) => a.lt(b)).cast(dtype);
}

function multinomial(w: Tensor, numSamples: number, replacement: boolean): Tensor {
  const op = 'multinomial';
  if (w.ndim !== 1 && w.ndim !== 2)
    throw new Error(`${op}: weights (${w.shape.join(', ')}) should be 1-D (k) or 2-D (rows, k)`);
  if (!Number.isInteger(numSamples) || numSamples < 1)
    throw new Error(`${op}: numSamples must be a positive integer, got ${numSamples}`);
  const rows = w.ndim === 2 ? w : w.unsqueeze(0);
  const [n, k] = rows.shape as [number, number];
  if (k === 0) throw new Error(`${op}: weights (${w.shape.join(', ')}) have no categories to draw from`);
  if (!replacement && numSamples > k)
    throw new Error(
      `${op}: ${numSamples} samples without replacement from ${k} categories; ask for at most ${k} or pass replacement = true`,
    );
  const device = w.device;
  let picked: Tensor;
  if (n === 0) picked = Tensor.empty([0, numSamples], { dtype: dtypes.int32, device });
  else if (replacement || numSamples === 1) {
    // the index of a draw is how many cumulative shares lie at or below it; a zero weight adds no share
    const sums = rows.toFloat().cumsum(1);
    const total = sums.shrink([
      [0, n],
      [k - 1, k],
    ]);
    const cdf = sums.div(total).unsqueeze(1);
    const u = Tensor.rand([n, numSamples, 1], { device });
    picked = u.ge(cdf).where(1, 0).sum(2, false, dtypes.int32);
  } else {
    const u = Tensor.rand([n, k], { device });
    const weights = rows.toFloat();
    const keys = weights.gt(0).where(u.neg().add(1).log().div(weights), -Infinity);
    const rank = ranks(keys, (a, b) => a.gt(b)).unsqueeze(1);
    const slot = Tensor.arange(numSamples, undefined, 1, { device, dtype: dtypes.int32 }).reshape([
      1,
      numSamples,
      1,
    ]);
    const index = Tensor.arange(k, undefined, 1, { device, dtype: dtypes.int32 });
    picked = rank.eq(slot).where(index, 0).sum(2, false, dtypes.int32);
  }
  return w.ndim === 1 ? picked.reshape([numSamples]) : picked;
}

function glorotUniform(shape: readonly number[], opts: TensorOptions = {}): Tensor {
  const [fanIn, fanOut] = fans('Tensor.glorotUniform', shape);
  const bound = spread(6 / (fanIn + fanOut));
  return uniform(shape, -bound, bound, opts);
}

const statics: Pick<
  typeof Tensor,
  | 'manualSeed'
  | 'rand'
  | 'randn'
  | 'randint'
  | 'uniform'
  | 'normal'
  | 'kaimingUniform'
  | 'glorotUniform'
  | 'kaimingNormal'
  | 'randLike'
  | 'randnLike'
  | 'randperm'
  | 'training'
> = {
  manualSeed,
  rand: marksResult(1, rand),
  randn: marksResult(1, randn),
  randint: marksResult(3, randint),
  uniform: marksResult(3, uniform),
  normal: marksResult(3, normal),
  kaimingUniform: marksResult(2, kaimingUniform),
  glorotUniform: marksResult(1, glorotUniform),
  kaimingNormal: marksResult(2, kaimingNormal),
  randLike: marksResult(1, (t: Tensor, opts: TensorOptions = {}) => {
    const o = likeOptions('Tensor.randLike', t, opts);
    return rand(t.shape, o);
  }),
  randnLike: marksResult(1, (t: Tensor, opts: TensorOptions = {}) => {
    const o = likeOptions('Tensor.randnLike', t, opts);
    return randn(t.shape, o);
  }),
  randperm: marksResult(1, randperm),
  training: false,
};
Object.assign(Tensor, statics);

Tensor.prototype.dropout = function (this: Tensor, p = 0.5): Tensor {
  if (!(p >= 0 && p <= 1)) throw new Error(`dropout: p must lie in [0, 1], got ${p}`);
  if (!Tensor.training || p === 0) return this;
  if (p === 1) return Tensor.zerosLike(this);
  const keep = Tensor.rand(this.shape, { device: this.device }).ge(p);
  return keep.where(this.mul(1 / (1 - p)), 0);
};

Tensor.prototype.multinomial = function (this: Tensor, numSamples = 1, replacement = false): Tensor {
  return multinomial(this, numSamples, replacement);
};
