// Activations (hardswish, selu, mish, ...) and math (log10, inverse hyperbolics, lerp, logaddexp, isclose).
import { type DType, dtypes } from '../dtype.ts';
import { expm1, log1p, oddFrom, signbit } from './elementwise.ts';
import { broadcastShape } from './op-nodes.ts';
import { Tensor } from './tensor.ts';
import { checkFinite } from './validate.ts';

export interface IsCloseOptions {
  /** Relative tolerance, a multiple of |other|. */
  rtol?: number;
  /** Absolute tolerance. */
  atol?: number;
  /** Whether NaN is close to NaN. */
  equalNan?: boolean;
}

declare module './tensor.ts' {
  interface Tensor {
    /** x * relu6(x + 3) / 6. */
    hardswish(): Tensor;
    /** relu6-like ramp clamp(alpha x + beta, 0, 1); the defaults (1/6, 1/2) are PyTorch's relu6(x + 3) / 6. */
    hardsigmoid(alpha?: number, beta?: number): Tensor;
    /** min(max(x, 0), 6). */
    relu6(): Tensor;
    /** scale * (x > 0 ? x : alpha (exp(x) - 1)) with the self-normalizing constants of Klambauer et al. */
    selu(alpha?: number, scale?: number): Tensor;
    /** x * tanh(softplus(x)). */
    mish(): Tensor;
    /** silu's other name: x * sigmoid(x). */
    swish(): Tensor;
    /** max(0, x) + min(0, alpha (exp(x / alpha) - 1)). */
    celu(alpha?: number): Tensor;
    /** clamp(x, min, max). */
    hardtanh(min?: number, max?: number): Tensor;
    /** x * sigmoid(1.702 x), the fast gelu approximation. */
    quickGelu(): Tensor;
    /** log(sigmoid(x)) as -softplus(-x): finite for large |x|. */
    logsigmoid(): Tensor;
    /** x / (1 + |x|), ±1 at ±inf. */
    softsign(): Tensor;
    /** softmax(-x) along the axis. */
    softmin(axis?: number): Tensor;
    log10(): Tensor;
    asinh(): Tensor;
    /** NaN below 1. */
    acosh(): Tensor;
    /** ±inf at ±1, NaN outside [-1, 1]. */
    atanh(): Tensor;
    /** this + weight * (end - this), exact at weight 0 and 1 (PyTorch's two-sided form). */
    lerp(end: Tensor | number, weight: Tensor | number): Tensor;
    /** |this| with the sign bit of other (a float tensor; -0 counts as negative, NaN as positive). */
    copysign(other: Tensor | number): Tensor;
    /** log(exp(this) + exp(other)) without overflow. */
    logaddexp(other: Tensor | number): Tensor;
    /** Bool: |this - other| <= atol + rtol |other|, or equal (so inf is close to inf). */
    isclose(other: Tensor | number, opts?: IsCloseOptions): Tensor;
    /** Whether every element is close (isclose's test). Reads the data: it realizes both tensors. */
    allclose(other: Tensor | number, opts?: IsCloseOptions): boolean;
  }
}

const LOG10_2 = Math.log10(2);
const SELU_ALPHA = 1.6732632423543772;
const SELU_SCALE = 1.0507009873554805;

/** Machine epsilon of a float dtype. */
const EPS = new Map<DType, number>([
  [dtypes.float16, 2 ** -10],
  [dtypes.bfloat16, 2 ** -7],
  [dtypes.float32, 2 ** -23],
  [dtypes.float64, 2 ** -52],
]);

/**
 * Above this, log(2x) equals asinh(x) and acosh(x) to the dtype's precision (the dropped term is about
 * 1/(4x^2)), and below it x^2 cannot overflow.
 */
const large = (d: DType) => 1 / Math.sqrt(EPS.get(d) ?? 2 ** -23);

/** y as a tensor beside x (a number takes x's dtype), checked to broadcast with x so errors name the op. */
function operand(x: Tensor, op: string, y: Tensor | number): Tensor {
  const t = x.toTensor(op, y);
  broadcastShape(op, x.shape, t.shape);
  return t;
}

// --- activations --------------------------------------------------------------------------------------

// a clamp, not relu(x) - relu(x - 6) (tinygrad's), which is inf - inf = NaN at +inf
Tensor.prototype.relu6 = function (this: Tensor): Tensor {
  return this.clamp(0, 6);
};

Tensor.prototype.hardsigmoid = function (this: Tensor, alpha = 1 / 6, beta = 0.5): Tensor {
  return this.toFloat().mul(alpha).add(beta).clamp(0, 1);
};

// -inf * 0 would be NaN at -inf: the limit there is 0
Tensor.prototype.hardswish = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.eq(-Infinity).where(-0, x.mul(x.add(3).relu6()).div(6));
};

Tensor.prototype.selu = function (this: Tensor, alpha = SELU_ALPHA, scale = SELU_SCALE): Tensor {
  return this.elu(alpha).mul(scale);
};

// tanh(softplus(x)) for x -> -inf is 0 and x * 0 is NaN at -inf: the limit there is 0
Tensor.prototype.mish = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.eq(-Infinity).where(-0, x.mul(x.softplus().tanh()));
};

Tensor.prototype.swish = function (this: Tensor): Tensor {
  return this.silu();
};

// max(0, x) + min(0, alpha expm1(x / alpha)) is x for positive x and alpha expm1(x / alpha) otherwise, for
// either sign of alpha
Tensor.prototype.celu = function (this: Tensor, alpha = 1): Tensor {
  if (alpha === 0 || !Number.isFinite(alpha))
    throw new Error(`celu: alpha must be a finite nonzero number (x is divided by it), got ${alpha}`);
  const x = this.toFloat();
  return x.gt(0).where(x, expm1(x.minimum(0).div(alpha)).mul(alpha));
};

Tensor.prototype.hardtanh = function (this: Tensor, min = -1, max = 1): Tensor {
  checkFinite('hardtanh', 'min', min);
  checkFinite('hardtanh', 'max', max);
  if (!(min <= max)) throw new Error(`hardtanh: min ${min} must not exceed max ${max}`);
  return this.clamp(min, max);
};

Tensor.prototype.quickGelu = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.eq(-Infinity).where(-0, x.mul(x.mul(1.702).sigmoid()));
};

Tensor.prototype.logsigmoid = function (this: Tensor): Tensor {
  return this.toFloat().neg().softplus().neg();
};

// the limits ±1 at ±inf, where x / (1 + |x|) is inf / inf
Tensor.prototype.softsign = function (this: Tensor): Tensor {
  const x = this.toFloat();
  return x.isinf().where(x.sign(), x.div(x.abs().add(1)));
};

Tensor.prototype.softmin = function (this: Tensor, axis = -1): Tensor {
  return this.toFloat().neg().softmax(axis);
};

// --- math ---------------------------------------------------------------------------------------------

Tensor.prototype.log10 = function (this: Tensor): Tensor {
  return this.log2().mul(LOG10_2);
};

// log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x|: no cancellation near 0 and none for negative x;
// log(a) + log(2) for large a, where a^2 would overflow
Tensor.prototype.asinh = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const a = x.abs();
  const limit = large(x.dtype);
  const small = a.lt(limit);
  // each branch sees safe values where the other is taken (no overflow, no log(0))
  const s = small.where(a, 1);
  const near = log1p(s.add(s.square().div(s.square().add(1).sqrt().add(1))));
  return oddFrom(x, small.where(near, small.where(limit, a).log().add(Math.LN2)));
};

// log1p(t + sqrt(t (x + 1))) with t = x - 1 (exact): accurate near 1; log(x) + log(2) for large x
Tensor.prototype.acosh = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const limit = large(x.dtype);
  const small = x.lt(limit);
  const s = small.where(x, 1);
  const t = s.sub(1);
  const near = log1p(t.add(t.mul(s.add(1)).sqrt()));
  return x.lt(1).where(NaN, small.where(near, small.where(limit, x).log().add(Math.LN2)));
};

// log1p(2a / (1 - a)) / 2 for a = |x|: no cancellation near 0, inf at 1 (2/0), NaN beyond (log of < 0)
Tensor.prototype.atanh = function (this: Tensor): Tensor {
  const x = this.toFloat();
  const a = x.abs();
  return oddFrom(x, log1p(a.mul(2).div(a.neg().add(1))).mul(0.5));
};

// PyTorch's lerp: from the start for weight < 0.5, from the end otherwise, so both ends are exact
Tensor.prototype.lerp = function (this: Tensor, end: Tensor | number, weight: Tensor | number): Tensor {
  const x = this.toFloat();
  const e = operand(x, 'lerp', end);
  const w = operand(x, 'lerp', weight);
  broadcastShape('lerp', broadcastShape('lerp', x.shape, e.shape), w.shape);
  const diff = e.sub(x);
  return w.lt(0.5).where(x.add(w.mul(diff)), e.sub(diff.mul(w.neg().add(1))));
};

// zeros are chosen as constants so that the result's sign is exactly the other's sign bit
Tensor.prototype.copysign = function (this: Tensor, other: Tensor | number): Tensor {
  const x = this.toFloat();
  const o = operand(x, 'copysign', other);
  const a = x.abs();
  const zero = x.eq(0);
  return signbit(o).where(zero.where(-0, a.neg()), zero.where(0, a));
};

// max(x, y) + log1p(exp(-|x - y|)); equal operands (infinities included) take log(2) via d = 0
Tensor.prototype.logaddexp = function (this: Tensor, other: Tensor | number): Tensor {
  const x = this.toFloat();
  const y = operand(x, 'logaddexp', other);
  const d = x.eq(y).where(0, x.sub(y));
  return x.maximum(y).add(log1p(d.abs().neg().exp()));
};

function checkTolerances(op: string, rtol: number, atol: number): void {
  if (!(rtol >= 0 && atol >= 0))
    throw new Error(`${op}: rtol and atol must be non-negative numbers, got rtol=${rtol}, atol=${atol}`);
}

// integer and bool operands compare in float32 (like the tolerance itself); exact equality decides first
Tensor.prototype.isclose = function (
  this: Tensor,
  other: Tensor | number,
  opts: IsCloseOptions = {},
): Tensor {
  const { rtol = 1e-5, atol = 1e-8, equalNan = false } = opts;
  checkTolerances('isclose', rtol, atol);
  const y = operand(this, 'isclose', other);
  const equal = this.eq(y);
  const a = this.toFloat();
  const b = y.toFloat();
  // an infinite other is close only to itself (the tolerance would be infinite)
  const near = a.sub(b).abs().le(b.abs().mul(rtol).add(atol)).bitwiseAnd(b.isfinite());
  const close = equal.bitwiseOr(near);
  return equalNan ? close.bitwiseOr(a.isnan().bitwiseAnd(b.isnan())) : close;
};

Tensor.prototype.allclose = function (this: Tensor, other: Tensor | number, opts?: IsCloseOptions): boolean {
  return Boolean(this.isclose(other, opts).all().item());
};
