// matmul and sum build their nodes without a tensor per step: the graph is the one the tensor ops (unsqueeze,
// mul, cast, reduce, reshape) build, node for node (hash-consing makes equal graphs the same object), inside
// noGrad too, and one tensor is made per call.
import { describe, expect, it } from 'vitest';
import { type DType, dtypes, narrowSumDType, promote, sumAccDType, sumDType } from '../../src/dtype.ts';
import { frames } from '../../src/tensor/frames.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';

/** x.sum(axes, keepdim, out) as casts, reduceOp and reshape build it, tensor by tensor. */
function composedSum(x: Tensor, axes: number[], keepdim: boolean, out: DType): Tensor {
  const acc = x.cast(out).cast(sumAccDType(out));
  const r = acc.wrap(acc.uop.reduce(Ops.ADD, axes));
  const kept = keepdim ? r : r.reshape(acc.shape.filter((_, i) => !axes.includes(i)));
  return kept.cast(out);
}

/** x @ w as unsqueeze, mul, sum and cast build it, tensor by tensor. */
function composedMatmul(x: Tensor, w: Tensor): Tensor {
  const a = x.ndim === 1 ? x.unsqueeze(0) : x;
  const b = w.ndim === 1 ? w.unsqueeze(-1) : w;
  const product = a.unsqueeze(-1).mul(b.unsqueeze(-3));
  const out = composedSum(product, [product.ndim - 2], false, narrowSumDType(product.dtype)).cast(
    promote(a.dtype, b.dtype),
  );
  const rowGone = x.ndim === 1 ? out.reshape([...out.shape.slice(0, -2), ...out.shape.slice(-1)]) : out;
  return w.ndim === 1 ? rowGone.reshape(rowGone.shape.slice(0, -1)) : rowGone;
}

/** How many tensors fn makes (Tensor.scope's record of them). */
function tensorsMade(fn: () => unknown): number {
  const frame = { made: new Set<object>(), assigned: new Set<object>() };
  frames.push(frame);
  try {
    fn();
  } finally {
    frames.pop();
  }
  return frame.made.size;
}

const device = 'JS';
const t = (shape: number[], dtype: DType) => Tensor.zeros(shape, { device, dtype }).contiguous();

describe('matmul and sum nodes', () => {
  const f32 = dtypes.float32;
  const pairs: [string, Tensor, Tensor][] = [
    ['matrices', t([3, 4], f32), t([4, 5], f32)],
    ['float16', t([3, 4], dtypes.float16), t([4, 5], dtypes.float16)],
    ['mixed dtypes', t([3, 4], dtypes.int32), t([4, 5], f32)],
    ['small ints', t([3, 4], dtypes.int8), t([4, 5], dtypes.int8)],
    ['vector @ matrix', t([4], f32), t([4, 5], f32)],
    ['matrix @ vector', t([3, 4], f32), t([4], f32)],
    ['vector @ vector', t([4], f32), t([4], f32)],
    ['batched', t([2, 3, 4], f32), t([2, 4, 5], f32)],
    ['broadcast batch', t([2, 1, 3, 4], f32), t([5, 4, 2], f32)],
    ['lazy operands', t([3, 4], f32).add(1), t([4, 5], f32).mul(2)],
  ];

  it.each(pairs)('matmul of %s builds the tensor ops’ nodes', (_, x, w) => {
    expect(x.matmul(w).uop).toBe(composedMatmul(x, w).uop);
    Tensor.noGrad(() => expect(x.matmul(w).uop).toBe(composedMatmul(x, w).uop));
  });

  it('sum builds the tensor ops’ nodes along any axes, with keepdim and a dtype', () => {
    const cases: [Tensor, number[], boolean, DType | undefined][] = [
      [t([6], f32), [0], false, undefined],
      [t([2, 3], dtypes.float16), [1], false, undefined],
      [t([2, 3, 4], f32), [0, 2], true, undefined],
      [t([2, 3], dtypes.bool), [0, 1], false, undefined],
      [t([2, 3], dtypes.int8), [1], false, dtypes.int64],
      [t([], f32), [], false, undefined],
    ];
    for (const [x, axes, keepdim, dtype] of cases) {
      const count = axes.reduce((n, a) => n * x.shape[a]!, 1);
      const out = dtype ?? sumDType(x.dtype, count);
      const axis = axes.length === x.ndim ? undefined : axes;
      expect(x.sum(axis, keepdim, dtype).uop).toBe(composedSum(x, axes, keepdim, out).uop);
      Tensor.noGrad(() =>
        expect(x.sum(axis, keepdim, dtype).uop).toBe(composedSum(x, axes, keepdim, out).uop),
      );
    }
  });

  it('make one tensor per call, the result', () => {
    const [x, w] = [t([3, 4], f32), t([4, 5], f32)];
    expect(tensorsMade(() => x.matmul(w))).toBe(1);
    expect(tensorsMade(() => x.sum())).toBe(1);
    expect(tensorsMade(() => x.sum(1, true))).toBe(1);
  });

  it('keep the errors of the ops they stand for', () => {
    expect(() => t([2, 3, 4], f32).matmul(t([3, 4, 5], f32))).toThrow(/mul: cannot broadcast shapes/);
    expect(() => t([3, 4], f32).matmul(new Tensor([[1], [2], [3], [4]], { device: 'CPU' }))).toThrow(
      /mul: operands are on JS and CPU/,
    );
  });
});
