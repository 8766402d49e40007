// JIT: capture on the second call, replay after it without tracing, refuse other shapes, train in place.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { jit } from '../../src/engine/jit.ts';
import { Linear, SGD } from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

const f32 = dtypes.float32;

describe('jit', () => {
  for (const device of DEVICES)
    it(`replays the captured kernels on new inputs on ${device}`, () => {
      let traced = 0;
      // two kernels (contiguous realizes the product): a GPU replays them as one graph
      const f = jit(function affine(a: Tensor, b: Tensor) {
        traced++;
        return a.mul(b).contiguous().add(1).sum(1);
      });
      for (let step = 0; step < 5; step++) {
        const a = new Tensor(
          [
            [step, 1],
            [2, 3],
          ],
          { device, dtype: f32 },
        );
        const b = new Tensor(
          [
            [1, 2],
            [3, step],
          ],
          { device, dtype: f32 },
        );
        expect(f(a, b).tolist()).toEqual([step + 2 + 2, 6 + 3 * step + 2]); // a*b+1 summed over two columns
      }
      expect(traced).toBe(2); // run, capture; then replays
    });

  it('refuses an argument of another shape, dtype or device, naming it', () => {
    const f = jit(function double(x: Tensor) {
      return x.mul(2);
    });
    for (let i = 0; i < 3; i++) f(new Tensor([1, 2, 3], { device: 'JS', dtype: f32 }));
    expect(() => f(new Tensor([1, 2], { device: 'JS', dtype: f32 }))).toThrow(
      /jit double: argument 0 is \(2\) float32 on JS, but the call was captured with \(3\) float32 on JS/,
    );
    expect(() => f(new Tensor([1, 2, 3], { device: 'CPU', dtype: f32 }))).toThrow(
      /argument 0 is \(3\) float32 on CPU/,
    );
  });

  it('writes a deferred initial value once, before the capture, not on every replay', () => {
    const box: { t: Tensor } = { t: Tensor.zeros([2]).contiguous() };
    const bump = jit(function bump() {
      return box.t.assign(box.t.add(1));
    });
    bump();
    box.t = Tensor.deferredInit(Tensor.full([2], 10)); // first read inside the capturing call
    const seen = [1, 2, 3].map(() => (bump().tolist() as number[])[0]);
    expect(seen).toEqual([11, 12, 13]);
  });

  it('trains: a jitted SGD step updates the parameters in place and the loss falls', () => {
    Tensor.manualSeed(1);
    const model = new Linear(3, 1);
    const opt = new SGD([model.weight, ...(model.bias ? [model.bias] : [])], { lr: 0.1 });
    const x = new Tensor(
      [
        [1, 0, 0],
        [0, 1, 0],
        [0, 0, 1],
        [1, 1, 1],
      ],
      { dtype: f32 },
    );
    const y = new Tensor([[1], [2], [3], [6]], { dtype: f32 });
    const step = jit(function train(xb: Tensor, yb: Tensor) {
      opt.zeroGrad();
      const loss = model.forward(xb).sub(yb).square().mean();
      loss.backward();
      opt.step(loss);
      return loss;
    });
    const weight = model.weight.uop;
    const losses = Array.from({ length: 40 }, () => step(x, y).item() as number);
    expect(model.weight.uop).toBe(weight); // the same buffer all along
    expect(losses.at(-1)!).toBeLessThan(losses[0]! / 10);
    for (let i = 3; i < losses.length; i++) expect(losses[i]!).toBeLessThanOrEqual(losses[i - 1]! + 1e-6);
  });
});
