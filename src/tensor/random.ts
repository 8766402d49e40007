// Random tensors: Threefry 2x32 bits computed in kernels, and the distributions, initializers and dropout built on them.
import { type DType, dtypes } from '../dtype.ts';
import { Device } from '../runtime/device.ts';
import type { UOp } from '../uop/uop.ts';
import { checkSizes } from './creation.ts';
import { dtypeOption, marksResult, Tensor, type TensorOptions } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** While Tensor.training is set: zeroes each element with probability p and scales the rest by 1/(1-p). */
    dropout(p?: number): Tensor;
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

const prod = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

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
  return rand(shape, opts)
    .mul(high - low)
    .add(low);
}

function normal(shape: readonly number[], mean = 0, std = 1, opts: TensorOptions = {}): Tensor {
  return randn(shape, opts).mul(std).add(mean);
}

/** fan in and fan out of a [out, in, ...kernel] weight, each counting the kernel's receptive field. */
function fans(op: string, shape: readonly number[]): [number, number] {
  if (shape.length < 2)
    throw new Error(
      `${op}: needs a weight shape of 2 or more dims ([fanOut, fanIn, ...kernel]), got (${shape.join(', ')})`,
    );
  const field = prod(shape.slice(2));
  return [shape[1]! * field, shape[0]! * field];
}

function kaimingUniform(shape: readonly number[], a = 0.01, opts: TensorOptions = {}): Tensor {
  const [fanIn] = fans('Tensor.kaimingUniform', shape);
  const bound = Math.sqrt(6 / ((1 + a * a) * fanIn));
  return uniform(shape, -bound, bound, opts);
}

function glorotUniform(shape: readonly number[], opts: TensorOptions = {}): Tensor {
  const [fanIn, fanOut] = fans('Tensor.glorotUniform', shape);
  const bound = Math.sqrt(6 / (fanIn + fanOut));
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
