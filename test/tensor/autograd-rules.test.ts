// The derivative rules of ops the Tensor front end does not build itself (graphs made from UOps directly).
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { UOp } from '../../src/uop/uop.ts';
import { gradCheckAll } from './gradcheck.ts';

const op =
  (o: Ops) =>
  (...xs: Tensor[]) =>
    Tensor.fromUOp(
      UOp.make(
        o,
        xs.map((x) => x.uop),
      ),
      xs[0]!.device,
    );

describe('derivative rules of decomposed ops', () => {
  it('match central differences', () =>
    gradCheckAll({
      sub: {
        shapes: [
          [3, 4],
          [3, 4],
        ],
        f: op(Ops.SUB),
      },
      neg: { shapes: [[5]], f: op(Ops.NEG) },
      div: { shapes: [[6], [6]], f: op(Ops.DIV) },
      mulacc: {
        shapes: [
          [2, 3],
          [2, 3],
          [2, 3],
        ],
        f: op(Ops.MULACC),
      },
      pow: { shapes: [[6], [6]], f: op(Ops.POW), domain: ['positive', 'unit'] },
    }));
});

describe('ops without a derivative rule', () => {
  it('indexing a UOp between the loss and a target is named', () => {
    const x = new Tensor([1, 2, 3], { dtype: dtypes.float32, requiresGrad: true });
    const picked = Tensor.fromUOp(x.uop.mul(2).index(UOp.const(dtypes.index, 1)), 'JS');
    expect(() => picked.backward()).toThrow('gradient: INDEX (shape ()) lies between the loss and a target');
  });
});
