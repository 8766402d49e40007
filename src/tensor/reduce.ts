// Reductions composed from the core sum/max: any/all, variance, arg-extremes and the stable softmax family.
import { dtypes } from '../dtype.ts';
import { Tensor } from './tensor.ts';
import { checkAxes } from './validate.ts';

/** One axis or several; negative axes count from the end. */
export type Axes = number | readonly number[];

declare module './tensor.ts' {
  interface Tensor {
    /** Whether some element along the axes is nonzero (bool). */
    any(axis?: Axes, keepdim?: boolean): Tensor;
    /** Whether every element along the axes is nonzero (bool). */
    all(axis?: Axes, keepdim?: boolean): Tensor;
    /** Variance along the axes over (count - correction): 1 gives the sample variance, 0 the population's. */
    var(axis?: Axes, keepdim?: boolean, correction?: number): Tensor;
    /** Standard deviation: the square root of `var` with the same arguments. */
    std(axis?: Axes, keepdim?: boolean, correction?: number): Tensor;
    /** Index (int32) of the first largest element along the axis (or of all); NaN counts as largest. */
    argmax(axis?: number, keepdim?: boolean): Tensor;
    /** Index (int32) of the first smallest element along the axis (or of all); NaN counts as smallest. */
    argmin(axis?: number, keepdim?: boolean): Tensor;
    /** log(sum(exp(x))) along the axes, shifted by the maximum so that large inputs do not overflow. */
    logsumexp(axis: Axes, keepdim?: boolean): Tensor;
    /** exp(x) / sum(exp(x)) along the axis, shifted by the maximum. */
    softmax(axis?: number): Tensor;
    /** log(softmax(x)) along the axis, computed as x - logsumexp(x). */
    logSoftmax(axis?: number): Tensor;
  }
}

/** The axes a reduction over `axis` covers, as indices in [0, ndim). */
export function reducedAxes(t: Tensor, axis: Axes | undefined): number[] {
  if (axis === undefined) return t.shape.map((_, i) => i);
  checkAxes('the axis', axis);
  return (typeof axis === 'number' ? [axis] : axis).map((a) => t.axis(a));
}

const not = (t: Tensor) => t.wrap(t.uop.logicalNot());

Tensor.prototype.any = function (this: Tensor, axis?: Axes, keepdim = false): Tensor {
  return this.cast(dtypes.bool).max(axis, keepdim);
};

Tensor.prototype.all = function (this: Tensor, axis?: Axes, keepdim = false): Tensor {
  return not(not(this.cast(dtypes.bool)).any(axis, keepdim));
};

Tensor.prototype.var = function (this: Tensor, axis?: Axes, keepdim = false, correction = 1): Tensor {
  const x = this.toFloat();
  const count = reducedAxes(this, axis).reduce((n, a) => n * this.shape[a]!, 1);
  const squares = x.sub(x.mean(axis, true)).square().sum(axis, keepdim);
  // torch's choice: a count at or below the correction divides by zero (inf or NaN), it does not throw
  return squares.div(Math.max(0, count - correction));
};

Tensor.prototype.std = function (this: Tensor, axis?: Axes, keepdim = false, correction = 1): Tensor {
  return this.var(axis, keepdim, correction).sqrt();
};

/**
 * The first index where x equals its extreme along the axis: mark matches (and NaNs, which numpy
 * treats as the extreme), weight them by a descending arange so the first match weighs most, take the max.
 */
function argExtreme(x: Tensor, name: string, extreme: Tensor, axis: number, keepdim: boolean): Tensor {
  const a = x.axis(axis);
  const n = x.shape[a]!;
  if (n === 0)
    throw new Error(`${name}: axis ${axis} of shape (${x.shape.join(', ')}) is empty; it has no ${name}`);
  let hit = x.binary(name, extreme, (u, m) => u.eq(m));
  if (x.dtype.isFloat) hit = hit.binary(name, x.wrap(x.uop.ne(x.uop)), (h, isNan) => h.or(isNan));
  const weight = Tensor.arange(n, 0, -1, { device: x.device }).reshape([
    n,
    ...x.shape.slice(a + 1).map(() => 1),
  ]);
  return hit.where(weight, 0).max(a, keepdim).neg().add(n);
}

function argReduce(x: Tensor, name: string, axis: number | undefined, keepdim: boolean): Tensor {
  const pick = (t: Tensor, a: number) => (name === 'argmax' ? t.max(a, true) : t.min(a, true));
  if (axis !== undefined) return argExtreme(x, name, pick(x, axis), axis, keepdim);
  const flat = x.reshape([x.numel]);
  const r = argExtreme(flat, name, pick(flat, 0), 0, false);
  return keepdim ? r.reshape(x.shape.map(() => 1)) : r;
}

Tensor.prototype.argmax = function (this: Tensor, axis?: number, keepdim = false): Tensor {
  return argReduce(this, 'argmax', axis, keepdim);
};

Tensor.prototype.argmin = function (this: Tensor, axis?: number, keepdim = false): Tensor {
  return argReduce(this, 'argmin', axis, keepdim);
};

Tensor.prototype.logsumexp = function (this: Tensor, axis: Axes, keepdim = false): Tensor {
  const x = this.toFloat();
  const m = x.max(axis, true);
  // shift by the max only where it is finite: an all -inf slice then gives log(0) = -inf, not NaN
  const shift = m.sub(m).eq(0).where(m, 0);
  const s = x.sub(shift).exp().sum(axis, keepdim).log();
  return s.add(shift.reshape(s.shape));
};

Tensor.prototype.softmax = function (this: Tensor, axis = -1): Tensor {
  const x = this.toFloat();
  const e = x.sub(x.max(axis, true)).exp();
  return e.div(e.sum(axis, true));
};

Tensor.prototype.logSoftmax = function (this: Tensor, axis = -1): Tensor {
  const x = this.toFloat();
  return x.sub(x.logsumexp(axis, true));
};
