// PyTorch's names: noGrad (function and `using` forms), requiresGrad_, Tensor.where, unbind, expandAs, typeAs,
// nanToNum, indexSelect; against plain-JS references on JS and CPU, gradients by central differences.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';

for (const device of DEVICES)
  describe(`PyTorch's names on ${device}`, () => {
    const m = () =>
      new Tensor(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        { device, dtype: 'float32' },
      );

    it('unbind gives the slices along dim without that axis', () => {
      expect(
        m()
          .unbind(0)
          .map((t) => t.tolist()),
      ).toEqual([
        [1, 2, 3],
        [4, 5, 6],
      ]);
      expect(
        m()
          .unbind(-1)
          .map((t) => t.tolist()),
      ).toEqual([
        [1, 4],
        [2, 5],
        [3, 6],
      ]);
      expect(Tensor.zeros([0, 2], { device }).unbind(0)).toEqual([]);
      expect(() => m().unbind(2)).toThrow(/^unbind: dim 2 is out of range for shape \(2, 3\)/);
    });

    it("expandAs and typeAs take the other tensor's shape and dtype", () => {
      const row = new Tensor([[1, 2, 3]], { device, dtype: 'float32' });
      expect(row.expandAs(m()).tolist()).toEqual([
        [1, 2, 3],
        [1, 2, 3],
      ]);
      expect(() => m().expandAs(Tensor.zeros([3, 3], { device }))).toThrow(/^expandAs: /);
      const t = m().typeAs(new Tensor([1], { device, dtype: 'int32' }));
      expect([t.dtype, t.tolist()]).toEqual([
        dtypes.int32,
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
      ]);
      expect(() => m().typeAs(5 as unknown as Tensor)).toThrow('typeAs: other must be a Tensor, got 5');
    });

    it("nanToNum replaces NaN and the infinities (defaults: 0 and the dtype's finite extremes)", () => {
      const x = new Tensor([Number.NaN, Infinity, -Infinity, 1.5], { device, dtype: 'float32' });
      expect(x.nanToNum().tolist()).toEqual([0, 3.4028234663852886e38, -3.4028234663852886e38, 1.5]);
      expect(x.nanToNum({ nan: 7, posinf: 8, neginf: -8 }).tolist()).toEqual([7, 8, -8, 1.5]);
      const h = new Tensor([Infinity], { device, dtype: 'float16' });
      expect(h.nanToNum().tolist()).toEqual([65504]);
      const ints = new Tensor([1, 2], { device });
      expect(ints.nanToNum()).toBe(ints);
      expect(() => x.nanToNum({ nan: Number.NaN })).toThrow('nanToNum: nan must be a finite number, got NaN');
    });

    it("indexSelect picks entries along dim in the index's order", () => {
      const idx = new Tensor([2, 0, 2], { device });
      expect(m().indexSelect(1, idx).tolist()).toEqual([
        [3, 1, 3],
        [6, 4, 6],
      ]);
      expect(m().indexSelect(0, new Tensor(1, { device })).tolist()).toEqual([[4, 5, 6]]);
      expect(() => m().indexSelect(0, new Tensor([[0]], { device }))).toThrow(
        'indexSelect: the index must be a 0-D or 1-D integer tensor, got (1, 1) int32',
      );
    });

    it('Tensor.where is cond.where', () => {
      const cond = new Tensor(
        [
          [true, false, true],
          [false, true, false],
        ],
        { device },
      );
      expect(Tensor.where(cond, m(), 0).tolist()).toEqual([
        [1, 0, 3],
        [0, 5, 0],
      ]);
      expect(() => Tensor.where(1 as unknown as Tensor, m(), 0)).toThrow(
        'Tensor.where: the condition must be a Tensor, got 1',
      );
    });

    it('requiresGrad_ sets the flag in place and returns the tensor', () => {
      const w = m();
      expect(w.requiresGrad_()).toBe(w);
      expect(w.requiresGrad).toBe(true);
      expect(w.requiresGrad_(false).requiresGrad).toBe(false);
    });

    it('inside noGrad, results carry no gradient graph; outside, gradients flow again', () => {
      const w = m().requiresGrad_();
      const y = Tensor.noGrad(() => w.mul(2).add(1));
      expect(y.requiresGrad).toBe(false);
      expect(y.tolist()).toEqual([
        [3, 5, 7],
        [9, 11, 13],
      ]);
      expect(() => y.sum().backward()).toThrow(/depends on no tensor with requiresGrad/);
      // mixed: only the part built outside noGrad gives a gradient
      w.mul(3).add(y).sum().backward();
      expect(w.grad!.tolist()).toEqual([
        [3, 3, 3],
        [3, 3, 3],
      ]);
    });

    it('the using form turns gradients off until the end of the block, and regions nest', () => {
      const w = m().requiresGrad_();
      {
        using _ = Tensor.noGrad();
        Tensor.noGrad(() => w.mul(2));
        expect(() => w.mul(2).sum().backward()).toThrow(/depends on no tensor/);
      }
      w.mul(2).sum().backward();
      expect(w.grad!.tolist()).toEqual([
        [2, 2, 2],
        [2, 2, 2],
      ]);
    });

    it('an update written through a view inside noGrad lands (an optimizer step)', () => {
      const w = m().requiresGrad_().realize();
      Tensor.noGrad(() => {
        w.get(0).assign(w.get(0).mul(10));
        w.set(1, 0, -1);
      });
      expect(w.tolist()).toEqual([
        [10, 20, 30],
        [-1, 5, 6],
      ]);
    });

    it('noGrad refuses a Promise and a non-function', () => {
      expect(() => Tensor.noGrad(async () => 1)).toThrow(/returned a Promise/);
      expect(() => Tensor.noGrad(5 as unknown as () => void)).toThrow(/needs a function/);
      // the failed calls left gradients on
      const w = m().requiresGrad_();
      w.sum().backward();
      expect(w.grad).toBeDefined();
    });
  });

describe('gradients of the new ops by central differences', () => {
  it('unbind, expandAs, indexSelect, nanToNum', () => {
    checkGradient('unbind', [[2, 3]], (x) => x.unbind(1)[1]!.mul(x.unbind(1)[0]!));
    checkGradient('expandAs', [[2, 3]], (x) =>
      x.expandAs(Tensor.zeros([4, 2, 3], { dtype: x.dtype, device: x.device })),
    );
    checkGradient('indexSelect', [[2, 3]], (x) =>
      x.indexSelect(1, new Tensor([2, 0, 2], { device: x.device })),
    );
    checkGradient('nanToNum', [[2, 3]], (x) => x.nanToNum().mul(x));
  });
});
