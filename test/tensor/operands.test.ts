// A binary op's operands are cast and broadcast as nodes: the graph is the one the tensor ops cast() and
// broadcastTo() build, node for node (hash-consing makes equal graphs the same object), inside noGrad too.
import { describe, expect, it } from 'vitest';
import { type ConstValue, dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { UOp } from '../../src/uop/uop.ts';

/** x + y as cast and broadcastTo build it, tensor by tensor. */
function composed(x: Tensor, y: Tensor | ConstValue, dtype = x.dtype): UOp {
  const other = y instanceof Tensor ? y : x.wrap(UOp.const(x.scalarDType(y), y));
  const shape = x.shape.length >= other.shape.length ? x.shape : other.shape;
  const a = x.cast(dtype).broadcastTo(shape).uop;
  const b = other.cast(dtype).broadcastTo(shape).uop;
  return x.wrap(a.add(b)).uop;
}

describe('binary operands', () => {
  const x = new Tensor([1, 2, 3, 4, 5, 6], { dtype: dtypes.float32, device: 'JS' }).reshape([2, 3]);
  const row = new Tensor([10, 20, 30], { dtype: dtypes.float32, device: 'JS' });
  const ints = new Tensor([1, 2, 3], { dtype: dtypes.int32, device: 'JS' });

  it('build the nodes cast and broadcastTo build', () => {
    expect(x.add(1).uop).toBe(composed(x, 1));
    expect(x.add(row).uop).toBe(composed(x, row));
    expect(ints.add(2.5).uop).toBe(composed(ints, 2.5, dtypes.float32));
    expect(ints.add(row).uop).toBe(composed(ints, row, dtypes.float32));
  });

  it('build them detached inside noGrad, as the tensor ops do', () => {
    Tensor.noGrad(() => {
      expect(x.add(1).uop).toBe(composed(x, 1));
      expect(ints.add(2.5).uop).toBe(composed(ints, 2.5, dtypes.float32));
      expect(ints.add(row).uop).toBe(composed(ints, row, dtypes.float32));
    });
  });
});
