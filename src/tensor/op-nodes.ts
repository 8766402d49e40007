// The nodes tensor ops build, built without a Tensor for each step: a binary op's operands, a sum's casts and
// reduce, a matmul's whole product. Each builds exactly the nodes the tensor ops it stands for build
// (test/tensor/op-nodes.test.ts compares them node for node), so kernels, caches and autograd see the same graph;
// an eager call then makes one Tensor, its result, instead of one per step.
import { type DType, promote, sumAccDType } from '../dtype.ts';
import { GroupOp, Ops, type ReduceOp } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';
import { gradMode } from './grad-mode.ts';
import { checkDType } from './validate.ts';

/**
 * u as a tensor's op leaves it: inside Tensor.noGrad a result builds no gradient graph; views stay views, so
 * writes through them land.
 */
export function gradModeOf(u: UOp): UOp {
  return gradMode.offDepth > 0 && u.op !== Ops.DETACH && !GroupOp.Movement.has(u.op)
    ? UOp.make(Ops.DETACH, [u])
    : u;
}

/** Tensor.cast's node. */
export const castUOp = (u: UOp, dtype: DType): UOp => (dtype === u.dtype ? u : gradModeOf(u.cast(dtype)));

export function shapesEqual(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Tensor.broadcastTo's nodes for a shape it accepts: reshaped to its rank (new axes in front), expanded. */
export function broadcastUOp(u: UOp, shape: readonly number[]): UOp {
  const own = u.shape as readonly number[];
  if (shapesEqual(shape, own)) return u;
  const padded = own.length < shape.length ? [...new Array(shape.length - own.length).fill(1), ...own] : own;
  const x = shapesEqual(padded, own) ? u : u.reshape(padded);
  return shapesEqual(shape, padded) ? x : x.expand(shape);
}

/** Tensor.reduceOp's nodes along checked axes: the reduce, then (without keepdim) the reshape dropping them. */
export function reduceUOp(u: UOp, op: ReduceOp, axes: readonly number[], keepdim: boolean): UOp {
  const r = gradModeOf(u.reduce(op, axes));
  if (keepdim) return r;
  const kept = (u.shape as readonly number[]).filter((_, i) => !axes.includes(i));
  return shapesEqual(kept, r.shape as readonly number[]) ? r : r.reshape(kept);
}

/**
 * Tensor.sum's nodes on `device` along checked axes, `out` the dtype it returns: cast to out, added up in its
 * accumulating dtype, cast back. Each dtype is checked against the device, as a tensor of it would be.
 */
export function sumUOp(u: UOp, axes: readonly number[], keepdim: boolean, out: DType, device: string): UOp {
  const acc = sumAccDType(out);
  for (const d of [out, acc]) if (d !== u.dtype) checkDType(undefined, d, device);
  return castUOp(reduceUOp(castUOp(castUOp(u, out), acc), Ops.ADD, axes, keepdim), out);
}

/** Tensor.unsqueeze's node (axis already in [0, ndim]). */
function unsqueezeUOp(u: UOp, axis: number): UOp {
  const shape = u.shape as readonly number[];
  return u.reshape([...shape.slice(0, axis), 1, ...shape.slice(axis)]);
}

/**
 * The nodes of x @ y as the spec's gemm (x at least 2-D, y at least 2-D, inner sizes checked), on `device`:
 * x (..., m, k, 1) times y (..., 1, k, n) broadcast, summed over k in `sumDType` (the narrow sum's dtype of
 * the product), cast to the operands' promoted dtype. Batch sizes that do not broadcast throw as the product
 * (mul) does.
 */
export function productSumUOp(x: UOp, y: UOp, sumDType: (d: DType) => DType, device: string): UOp {
  const a = unsqueezeUOp(x, x.shape!.length);
  const b = unsqueezeUOp(y, y.shape!.length - 2);
  const dtype = promote(a.dtype, b.dtype);
  if (dtype !== a.dtype || dtype !== b.dtype) checkDType(undefined, dtype, device);
  const shape = broadcastShape('mul', a.shape as number[], b.shape as number[]);
  const product = gradModeOf(
    broadcastUOp(castUOp(a, dtype), shape).mul(broadcastUOp(castUOp(b, dtype), shape)),
  );
  const sum = sumUOp(product, [shape.length - 2], false, sumDType(dtype), device);
  return castUOp(sum, promote(x.dtype, y.dtype));
}

export function broadcastShape(op: string, a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1)
      throw new Error(
        `${op}: cannot broadcast shapes (${a.join(', ')}) and (${b.join(', ')}): axis ${i - n} has sizes ${x} and ${y}`,
      );
    out.push(x === 1 ? y : x);
  }
  return out;
}
