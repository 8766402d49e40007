// Elementwise ops beyond the core (trig, activations, rounding, bitwise, remainders, pow), built from primitives.
import { type ConstValue, type DType, type DTypeLike, dtypes, toDType } from '../dtype.ts';
import { Device } from '../runtime/device.ts';
import type { UOp } from '../uop/uop.ts';
import { checkTensor, Tensor } from './tensor.ts';
import { checkFinite, checkFinites, checkOptions, checkScalar } from './validate.ts';

export interface NanToNumOptions {
  /** What NaN becomes (default 0). */
  nan?: number;
  /** What +Infinity becomes (default the dtype's largest finite value). */
  posinf?: number;
  /** What -Infinity becomes (default the dtype's smallest finite value). */
  neginf?: number;
}

export interface DivOptions {
  /** Round the quotient toward zero ('trunc') or toward -infinity ('floor'); absent: true division. */
  roundingMode?: 'trunc' | 'floor';
}

declare module './tensor.ts' {
  interface Tensor {
    rsqrt(): Tensor;
    cos(): Tensor;
    tan(): Tensor;
    asin(): Tensor;
    acos(): Tensor;
    atan(): Tensor;
    sinh(): Tensor;
    cosh(): Tensor;
    tanh(): Tensor;
    erf(): Tensor;
    leakyRelu(slope?: number): Tensor;
    elu(alpha?: number): Tensor;
    /** The tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). */
    gelu(): Tensor;
    silu(): Tensor;
    softplus(beta?: number): Tensor;
    sign(): Tensor;
    floor(): Tensor;
    ceil(): Tensor;
    /** Rounds half to even, as numpy does. */
    round(): Tensor;
    trunc(): Tensor;
    isnan(): Tensor;
    isinf(): Tensor;
    isfinite(): Tensor;
    logicalNot(): Tensor;
    bitwiseAnd(y: Tensor | ConstValue): Tensor;
    bitwiseOr(y: Tensor | ConstValue): Tensor;
    bitwiseXor(y: Tensor | ConstValue): Tensor;
    bitwiseNot(): Tensor;
    /** Shifts left; a count outside [0, bits) shifts every bit out, as in numpy. */
    lshift(y: Tensor | ConstValue): Tensor;
    /** Shifts right (arithmetic for signed dtypes); a count outside [0, bits) shifts every bit out. */
    rshift(y: Tensor | ConstValue): Tensor;
    div(y: Tensor | ConstValue, opts?: DivOptions): Tensor;
    /** Remainder of floor division: it takes the divisor's sign, as Python's % does. */
    mod(y: Tensor | ConstValue): Tensor;
    /** Remainder of truncating division: it takes the dividend's sign, as C's fmod does. */
    fmod(y: Tensor | ConstValue): Tensor;
    pow(y: Tensor | ConstValue): Tensor;
    clamp(min?: Tensor | ConstValue, max?: Tensor | ConstValue): Tensor;
    /** clamp's other name. */
    clip(min?: Tensor | ConstValue, max?: Tensor | ConstValue): Tensor;
    /** Reinterprets the bits of each element as another dtype of the same size. */
    bitcast(dtype: DTypeLike): Tensor;
    /** NaN and the infinities replaced by finite numbers (torch.nan_to_num); integer tensors stay as they are. */
    nanToNum(opts?: NanToNumOptions): Tensor;
  }
  namespace Tensor {
    /** x where cond is true, else y, elementwise and broadcast (torch.where): `cond.where(x, y)`. */
    function where(cond: Tensor, x: Tensor | ConstValue, y: Tensor | ConstValue): Tensor;
  }
}

const LOG2_E = Math.LOG2E;
const HALF_PI = Math.PI / 2;
const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

type Operand = Tensor | ConstValue;

/** Both operands broadcast and promoted, as tensors. */
function pair(x: Tensor, op: string, y: Operand): [Tensor, Tensor] {
  const [a, b] = x.operands(op, y);
  return [x.wrap(a), x.wrap(b)];
}

/** c0 x^n + c1 x^(n-1) + ... + cn by Horner's rule (coefficients highest power first). */
function poly(x: Tensor, coefs: readonly number[]): Tensor {
  let acc = x.mul(coefs[0]!).add(coefs[1]!);
  for (const c of coefs.slice(2)) acc = acc.mul(x).add(c);
  return acc;
}

// Helpers shared with the other elementwise families (activations.ts). A branch that where() does not take
// must stay finite: its gradient is 0 times its derivative there, and 0 * inf is NaN.

/** @internal An odd function's value from r = f(|x|): -r for negative x, and x itself at ±0 (keeping -0). */
export const oddFrom = (x: Tensor, r: Tensor) => x.eq(0).where(x, x.lt(0).where(r.neg(), r));

/** @internal Whether the sign bit is set: x < 0, or x is -0 (1/-0 is -inf). */
export const signbit = (x: Tensor) => x.lt(0).bitwiseOr(x.eq(0).bitwiseAnd(x.reciprocal().lt(0)));

/** @internal exp(x) - 1 without cancellation near 0: a Taylor series there (|x| < 0.5), exp(x) - 1 elsewhere. */
export function expm1(x: Tensor): Tensor {
  const coefs = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1].map((n) => 1 / factorial(n));
  const near = x.abs().lt(0.5);
  const s = near.where(x, 0); // the series overflows for large |x|, where it is not used
  return near.where(s.mul(poly(s, coefs)), x.exp().sub(1));
}
const factorial = (n: number): number => (n <= 1 ? 1 : n * factorial(n - 1));

/**
 * @internal log(1 + y) for y >= -1: log(w) * y / (w - 1) with w = 1 + y cancels the rounding of w
 * (Goldberg); y where w rounds to 1, and log(w) where w overflows.
 */
export function log1p(y: Tensor): Tensor {
  const w = y.add(1);
  const one = w.eq(1);
  const corrected = w.log().mul(y.div(one.where(1, w.sub(1))));
  return one.where(y, w.eq(Infinity).where(w, corrected));
}

/** atan of x in [-1, 1]: the odd polynomial of Abramowitz & Stegun 4.4.49 (error below 2e-8). */
function atanUnit(x: Tensor): Tensor {
  const coefs = [
    0.0028662257, -0.0161657367, 0.0429096138, -0.07528964, 0.1065626393, -0.1420889944, 0.1999355085,
    -0.3333314528, 1,
  ];
  return x.mul(poly(x.mul(x), coefs));
}

function requireInts(op: string, dtype: DType, orBool: boolean): void {
  if (dtype.isFloat || (!orBool && dtype === dtypes.bool))
    throw new Error(`${op}: needs integer${orBool ? ' or bool' : ''} operands, got ${dtype.name}`);
}

// --- transcendental -----------------------------------------------------------------------------------

Tensor.prototype.rsqrt = function (this: Tensor): Tensor {
  return this.sqrt().reciprocal();
};

// 1 - 2 sin^2(x/2): exact halving keeps large arguments accurate, where sin(x + pi/2) would round x + pi/2
Tensor.prototype.cos = function (this: Tensor): Tensor {
  const s = this.toFloat().mul(0.5).sin();
  return s.mul(s).mul(-2).add(1);
};

Tensor.prototype.tan = function (this: Tensor): Tensor {
  return this.sin().div(this.cos());
};

// atan reduced to [0, 1] by atan|x| = pi/2 - atan(1/|x|)
Tensor.prototype.atan = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const a = x.abs();
  const outside = a.gt(1);
  const p = atanUnit(outside.where(a.reciprocal(), a));
  return oddFrom(x, outside.where(p.neg().add(HALF_PI), p));
};

// atan(x / sqrt(1 - x^2)), with 1 - x^2 as (1 - x)(1 + x): exact near |x| = 1, NaN outside [-1, 1]
Tensor.prototype.asin = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.div(x.neg().add(1).mul(x.add(1)).sqrt()).atan();
};

// 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near x = 1, where pi/2 - asin(x) would lose digits
Tensor.prototype.acos = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.neg().add(1).div(x.add(1)).sqrt().atan().mul(2);
};

// exp(x)/2 as exp2(x log2(e) - 1), which stays finite up to sinh's own overflow; a series near 0
Tensor.prototype.sinh = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const series = x.mul(poly(x.mul(x), [1 / 362880, 1 / 5040, 1 / 120, 1 / 6, 1]));
  const e = x.mul(LOG2_E);
  const big = e.sub(1).exp2().sub(e.neg().sub(1).exp2());
  return x.abs().lt(0.5).where(series, big);
};

Tensor.prototype.cosh = function (this: Tensor): Tensor {
  const e = this.toFloat().mul(LOG2_E);
  return e.sub(1).exp2().add(e.neg().sub(1).exp2());
};

// tanh|x| = -m / (2 + m) with m = expm1(-2|x|) in [-1, 0]: no overflow, no cancellation near 0
Tensor.prototype.tanh = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const m = expm1(x.abs().mul(-2));
  return oddFrom(x, m.neg().div(m.add(2)));
};

// The Maclaurin series below 0.5, else 1 - erfc(|x|) with Numerical Recipes' erfcc (relative error 1.2e-7)
Tensor.prototype.erf = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const a = x.abs();
  const near = a.lt(0.5);
  const s = near.where(x, 0); // the series overflows for large |x|, where it is not used
  const series = s
    .mul(poly(s.mul(s), [1 / 9360, -1 / 1320, 1 / 216, -1 / 42, 1 / 10, -1 / 3, 1]))
    .mul(TWO_OVER_SQRT_PI);
  const t = a.mul(0.5).add(1).reciprocal();
  const exponent = poly(
    t,
    [
      0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
      1.00002368, -1.26551223,
    ],
  ).sub(a.mul(a));
  const r = t.mul(exponent.exp()).neg().add(1);
  return near.where(series, x.lt(0).where(r.neg(), r));
};

// --- activations --------------------------------------------------------------------------------------

Tensor.prototype.leakyRelu = function (this: Tensor, slope = 0.01): Tensor {
  checkFinite('leakyRelu', 'slope', slope);
  return this.gt(0).where(this, this.mul(slope));
};

Tensor.prototype.elu = function (this: Tensor, alpha = 1): Tensor {
  checkFinite('elu', 'alpha', alpha);
  const x = this.toFloat();
  return x.gt(0).where(x, expm1(x.minimum(0)).mul(alpha));
};

// x * sigmoid(2u) equals x/2 * (1 + tanh(u)) without 1 + tanh(u) cancelling for negative x; at -inf the
// limit 0 (-inf * 0 would be NaN)
Tensor.prototype.gelu = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const u = x
    .mul(x)
    .mul(x)
    .mul(0.044715)
    .add(x)
    .mul(2 * SQRT_2_OVER_PI);
  return x.eq(-Infinity).where(-0, x.mul(u.sigmoid()));
};

Tensor.prototype.silu = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.eq(-Infinity).where(-0, x.mul(x.sigmoid()));
};

// max(bx, 0) + log1p(exp(-|bx|)), over b: neither overflows for large |x| nor loses exp(bx) for very negative x
Tensor.prototype.softplus = function (this: Tensor, beta = 1): Tensor {
  checkFinite('softplus', 'beta', beta);
  const bx = this.toFloat().mul(beta);
  return bx.relu().add(log1p(bx.abs().neg().exp())).div(beta);
};

// --- sign and rounding --------------------------------------------------------------------------------

// -1, 0 or 1 in the input's dtype; NaN stays NaN and -0 gives 0, as numpy does
Tensor.prototype.sign = function (this: Tensor): Tensor {
  if (this.dtype === dtypes.bool) return this;
  if (this.dtype.isUnsigned) return this.ne(0).cast(this.dtype);
  const rest = this.dtype.isFloat ? this.isnan().where(this, 0) : this.mul(0);
  return this.gt(0).where(1, this.lt(0).where(-1, rest));
};

Tensor.prototype.trunc = function (this: Tensor): Tensor {
  return this.dtype.isFloat ? this.wrap(this.uop.trunc()) : this;
};

Tensor.prototype.floor = function (this: Tensor): Tensor {
  if (!this.dtype.isFloat) return this;
  const t = this.trunc();
  return this.lt(t).where(t.sub(1), t);
};

Tensor.prototype.ceil = function (this: Tensor): Tensor {
  if (!this.dtype.isFloat) return this;
  const t = this.trunc();
  return this.gt(t).where(t.add(1), t);
};

// x - trunc(x) is exact, so the halfway case is decided exactly; ties go to the even neighbour
Tensor.prototype.round = function (this: Tensor): Tensor {
  if (!this.dtype.isFloat) return this;
  const t = this.trunc();
  const f = this.sub(t).abs();
  const half = t.mul(0.5);
  const odd = half.trunc().ne(half);
  const away = f.gt(0.5).bitwiseOr(f.eq(0.5).bitwiseAnd(odd));
  return away.where(t.add(this.lt(0).where(-1, 1)), t);
};

// --- tests of values ----------------------------------------------------------------------------------

// x != x is false for every integer: the same graph gives all-false tensors for them
Tensor.prototype.isnan = function (this: Tensor): Tensor {
  return this.ne(this);
};

Tensor.prototype.isinf = function (this: Tensor): Tensor {
  return this.dtype.isFloat ? this.abs().eq(Infinity) : this.ne(this);
};

// x - x is 0 for finite x, NaN for infinities and NaN
Tensor.prototype.isfinite = function (this: Tensor): Tensor {
  return this.dtype.isFloat ? this.sub(this).eq(0) : this.eq(this);
};

Tensor.prototype.logicalNot = function (this: Tensor): Tensor {
  return this.dtype === dtypes.bool ? this.wrap(this.uop.logicalNot()) : this.eq(0);
};

// --- bitwise ------------------------------------------------------------------------------------------

function bitwise(x: Tensor, op: string, y: Operand, f: (a: UOp, b: UOp) => UOp): Tensor {
  return x.binary(op, y, (a, b) => {
    requireInts(op, a.dtype, true);
    return f(a, b);
  });
}

Tensor.prototype.bitwiseAnd = function (this: Tensor, y: Operand): Tensor {
  return bitwise(this, 'bitwiseAnd', y, (a, b) => a.and(b));
};
Tensor.prototype.bitwiseOr = function (this: Tensor, y: Operand): Tensor {
  return bitwise(this, 'bitwiseOr', y, (a, b) => a.or(b));
};
Tensor.prototype.bitwiseXor = function (this: Tensor, y: Operand): Tensor {
  return bitwise(this, 'bitwiseXor', y, (a, b) => a.xor(b));
};

// x ^ -1 flips every bit (-1 wraps to the all-ones value of unsigned dtypes)
Tensor.prototype.bitwiseNot = function (this: Tensor): Tensor {
  requireInts('bitwiseNot', this.dtype, true);
  return this.dtype === dtypes.bool ? this.logicalNot() : this.wrap(this.uop.xor(-1));
};

// C leaves a count outside [0, bits) undefined and JS takes it modulo 32: clamp it, then give numpy's
// result (0, or the sign for a signed right shift) for such counts
function shift(x: Tensor, op: 'lshift' | 'rshift', y: Operand): Tensor {
  return x.binary(op, y, (a, b) => {
    requireInts(op, a.dtype, false);
    const bits = a.dtype.itemsize * 8;
    const out = b.lt(0).or(b.ge(bits));
    const n = out.where(bits - 1, b);
    if (op === 'lshift') return out.where(0, a.shl(n));
    return a.dtype.isUnsigned ? out.where(0, a.shr(n)) : a.shr(n);
  });
}

Tensor.prototype.lshift = function (this: Tensor, y: Operand): Tensor {
  return shift(this, 'lshift', y);
};
Tensor.prototype.rshift = function (this: Tensor, y: Operand): Tensor {
  return shift(this, 'rshift', y);
};

// --- division, remainders and powers ------------------------------------------------------------------

/** Operands for division-like ops: bools compute as int32. */
function divOperands(x: Tensor, op: string, y: Operand): [Tensor, Tensor] {
  const [a, b] = pair(x, op, y);
  return a.dtype === dtypes.bool ? [a.cast(dtypes.int32), b.cast(dtypes.int32)] : [a, b];
}

/**
 * The float dtype in which a quotient of two floats of dtype d has an exact floor and a - b*q is exact
 * (twice the mantissa bits, plus the exponent range): float32 for the 16-bit floats, float64 for float32.
 */
const wider = (d: DType) => (d === dtypes.float16 || d === dtypes.bfloat16 ? dtypes.float32 : dtypes.float64);

/** Whether the operands' signs differ (NaN counts as positive). */
const signsDiffer = (a: Tensor, b: Tensor) => a.lt(0).ne(b.lt(0));

const trueDiv = Tensor.prototype.div;

/** The quotient a/b of floats rounded by `mode`, computed wider so that 1 // 0.1 is 9 (as numpy gives). */
function roundedQuotient(a: Tensor, b: Tensor, mode: 'trunc' | 'floor'): Tensor {
  const q = trueDiv.call(a.cast(wider(a.dtype)), b.cast(wider(a.dtype)));
  return mode === 'trunc' ? q.trunc() : q.floor();
}

Tensor.prototype.div = function (this: Tensor, y: Operand, opts: DivOptions = {}): Tensor {
  const mode = opts.roundingMode;
  if (mode === undefined) return trueDiv.call(this, y);
  if (mode !== 'trunc' && mode !== 'floor')
    throw new Error(`div: roundingMode must be 'trunc', 'floor' or absent, got ${String(mode)}`);
  const [a, b] = divOperands(this, 'div', y);
  if (a.dtype.isFloat) return roundedQuotient(a, b, mode).cast(a.dtype);
  const q = a.wrap(a.uop.idiv(b.uop));
  if (mode === 'floor') return q;
  // floor and truncation differ when the division is inexact and the operands' signs differ
  const r = a.wrap(a.uop.mod(b.uop));
  return r.ne(0).bitwiseAnd(signsDiffer(a, b)).where(q.add(1), q);
};

/**
 * a - b*q for floats, computed wider where it is exact, then moved by b where rounding put it on the wrong
 * side of 0; a finite a over an infinite b keeps a (fmod, and mod when the signs agree or a is 0).
 */
function floatRemainder(a: Tensor, b: Tensor, mode: 'trunc' | 'floor'): Tensor {
  const [wa, wb] = [a.cast(wider(a.dtype)), b.cast(wider(a.dtype))];
  const r = wa.sub(wb.mul(roundedQuotient(a, b, mode)));
  const side = mode === 'floor' ? wb : wa;
  const step = mode === 'floor' ? wb : wa.lt(0).where(wb.abs().neg(), wb.abs());
  const fixed = r.ne(0).bitwiseAnd(signsDiffer(r, side)).where(r.add(step), r).cast(a.dtype);
  const keep = mode === 'trunc' ? a : a.eq(0).bitwiseOr(signsDiffer(a, b).logicalNot()).where(a, b);
  return b.isinf().bitwiseAnd(a.isfinite()).where(keep, fixed);
}

Tensor.prototype.mod = function (this: Tensor, y: Operand): Tensor {
  const [a, b] = divOperands(this, 'mod', y);
  return a.dtype.isFloat ? floatRemainder(a, b, 'floor') : a.wrap(a.uop.mod(b.uop));
};

Tensor.prototype.fmod = function (this: Tensor, y: Operand): Tensor {
  const [a, b] = divOperands(this, 'fmod', y);
  if (a.dtype.isFloat) return floatRemainder(a, b, 'trunc');
  const r = a.wrap(a.uop.mod(b.uop));
  return r.ne(0).bitwiseAnd(signsDiffer(a, b)).where(r.sub(b), r);
};

/** x^n for an integer n >= 0 by repeated squaring: exact (wrapping) for integers, one rounding per step for floats. */
function powInt(x: Tensor, n: number): Tensor {
  let result: Tensor | undefined;
  let square = x;
  for (let k = n; k > 0; k = Math.floor(k / 2)) {
    if (k % 2 === 1) result = result === undefined ? square : result.mul(square);
    if (k > 1) square = square.mul(square);
  }
  return result ?? Tensor.full(x.shape, 1, { dtype: x.dtype, device: x.device });
}

/** 1/a^n truncated toward 0, for integer a and n > 0 (odd or not): 1 at a = 1, (-1)^n at a = -1, else 0. */
function truncatedInverse(a: Tensor, odd: Tensor | boolean): Tensor {
  const atMinusOne = a.dtype.isUnsigned ? 0 : typeof odd === 'boolean' ? (odd ? -1 : 1) : odd.where(-1, 1);
  return a
    .eq(1)
    .where(1, a.dtype.isUnsigned ? 0 : a.eq(-1).where(atMinusOne, 0))
    .cast(a.dtype);
}

/** Integer a^b for integer tensors: repeated squaring over every bit of b. */
function powIntTensor(a: Tensor, b: Tensor): Tensor {
  const bits = b.dtype.itemsize * 8 - (b.dtype.isUnsigned ? 0 : 1);
  let result = a.mul(0).add(1);
  let square = a;
  for (let i = 0; i < bits; i++) {
    const bit = b.rshift(i).bitwiseAnd(1).ne(0);
    result = bit.where(result.mul(square), result);
    if (i < bits - 1) square = square.mul(square);
  }
  return b.dtype.isUnsigned ? result : b.lt(0).where(truncatedInverse(a, b.bitwiseAnd(1).ne(0)), result);
}

// exp2(b log2|a|) with the sign of a negative a for odd integer b, NaN for a negative a and non-integer b;
// 1 where b is 0, a is 1, or |a| is 1 and b infinite (as C's pow)
function powFloat(a: Tensor, b: Tensor): Tensor {
  const mag = b.mul(a.abs().log2()).exp2();
  const half = b.mul(0.5);
  const integral = b.trunc().eq(b);
  const odd = half.trunc().ne(half);
  const value = integral.where(odd.bitwiseAnd(signbit(a)).where(mag.neg(), mag), a.lt(0).where(NaN, mag));
  const one = b.eq(0).bitwiseOr(a.eq(1)).bitwiseOr(a.abs().eq(1).bitwiseAnd(b.isinf()));
  return one.where(1, value);
}

// Integer dtypes stay integers (a negative exponent truncates 1/a^|b|), as tinygrad and numpy's dtypes do
Tensor.prototype.pow = function (this: Tensor, y: Operand): Tensor {
  if (!(y instanceof Tensor)) {
    checkScalar('pow', 'the exponent', y);
    const e = Number(y);
    // integer exponents multiply: exact for integers, and correct signs and zeros for every float
    if (Number.isInteger(e) && Math.abs(e) < 2 ** 31) {
      const x = this.dtype === dtypes.bool ? this.cast(dtypes.int32) : this;
      if (e >= 0) return powInt(x, e);
      return x.dtype.isFloat ? powInt(x, -e).reciprocal() : truncatedInverse(x, e % 2 !== 0);
    }
  }
  const [a, b] = divOperands(this, 'pow', y);
  return a.dtype.isFloat ? powFloat(a, b) : powIntTensor(a, b);
};

// --- clamp and bitcast --------------------------------------------------------------------------------

Tensor.prototype.clamp = function (this: Tensor, min?: Operand, max?: Operand): Tensor {
  if (min === undefined && max === undefined) throw new Error('clamp: give min, max or both');
  const low = min === undefined ? this : this.maximum(min);
  return max === undefined ? low : low.minimum(max);
};
Tensor.prototype.clip = Tensor.prototype.clamp;

Tensor.prototype.bitcast = function (this: Tensor, like: DTypeLike): Tensor {
  const dtype = toDType('bitcast', like);
  if (dtype === this.dtype) return this;
  // a DISK tensor's bytes are reinterpreted as they are copied out (safetensors' uint8 file as float32)
  const onDisk = Device.get(this.device).language() === undefined;
  if (
    !onDisk &&
    (dtype.itemsize !== this.dtype.itemsize || dtype === dtypes.bool || this.dtype === dtypes.bool)
  )
    throw new Error(
      `bitcast: cannot reinterpret ${this.dtype.name} (${this.dtype.itemsize} bytes) as ${dtype.name} (${dtype.itemsize} bytes); the target needs the same size and neither may be bool (e.g. float32 <-> int32/uint32, float16 <-> int16); only a DISK tensor (Tensor.fromFile) changes size`,
    );
  // a size change rescales the last axis, which must hold whole elements of the new dtype
  const bytes = (this.shape.at(-1) ?? 0) * this.dtype.itemsize;
  if (dtype.itemsize !== this.dtype.itemsize && (this.ndim === 0 || bytes % dtype.itemsize !== 0))
    throw new Error(
      `bitcast: cannot reinterpret (${this.shape.join(', ')}) ${this.dtype.name} as ${dtype.name}: ${this.ndim === 0 ? 'a scalar has no last axis to rescale; reshape it to (1) first' : `the last axis holds ${bytes} bytes, not a whole number of ${dtype.name} (${dtype.itemsize} bytes)`}`,
    );
  return this.wrap(this.uop.bitcast(dtype));
};

// --- PyTorch's names ------------------------------------------------------------------------------------

/** The largest finite value of each float dtype (nanToNum's defaults). */
const LARGEST_FINITE: Readonly<Record<string, number>> = {
  float16: 65504,
  bfloat16: 3.3895313892515355e38,
  float32: 3.4028234663852886e38,
  float64: Number.MAX_VALUE,
};

Tensor.prototype.nanToNum = function (this: Tensor, opts: NanToNumOptions = {}): Tensor {
  checkOptions('nanToNum', opts);
  const largest = LARGEST_FINITE[this.dtype.name] ?? 0;
  const { nan = 0, posinf = largest, neginf = -largest } = opts;
  checkFinites('nanToNum', { nan, posinf, neginf });
  if (!this.dtype.isFloat) return this;
  return this.isnan().where(nan, this.eq(Infinity).where(posinf, this.eq(-Infinity).where(neginf, this)));
};

Tensor.where = (cond: Tensor, x: Operand, y: Operand): Tensor => {
  checkTensor('Tensor.where', 'the condition', cond);
  return cond.where(x, y);
};
