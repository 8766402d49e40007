// Small defects found by trying programs as a new user would (issue #11): each fixed, each tested.
import { describe, expect, it } from 'vitest';
import { fn, Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

for (const device of DEVICES) {
  describe(`everyday programs on ${device}`, () => {
    it('a dot or matmul of two vectors is a scalar, as numpy, PyTorch and tinygrad give', () => {
      const a = new Tensor([1, 2, 3], { device });
      const b = new Tensor([4, 5, 6], { device });
      for (const r of [a.dot(b), a.matmul(b)]) {
        expect(r.shape).toEqual([]);
        expect(r.item()).toBe(32);
      }
      expect(a.matmul(new Tensor([[1], [1], [1]], { device })).shape).toEqual([1]);
    });

    it('a reduce over a zero-size axis is its identity', () => {
      const empty = new Tensor(new Float32Array(0), { device }).reshape([3, 0]);
      expect(empty.sum(1).tolist()).toEqual([0, 0, 0]);
      expect(empty.prod(1).tolist()).toEqual([1, 1, 1]);
      expect(empty.max(1).tolist()).toEqual([-Infinity, -Infinity, -Infinity]);
      expect(Tensor.empty([2, 0], { device }).sum(1).tolist()).toEqual([0, 0]);
      expect(new Tensor(new Int32Array(0), { device }).sum().item()).toBe(0);
    });

    it('a compiled fn runs on arguments made of constants alone (their device is the caller’s)', () => {
      const f = fn((t: Tensor) => t.add(1), { compiled: true });
      expect(f(Tensor.ones([3], { device })).tolist()).toEqual([2, 2, 2]);
    });
  });
}

describe('cumsum at the edges', () => {
  it('scans a zero-size axis to an empty result and a scalar as one element', () => {
    const empty = Tensor.zeros([2, 0], { device: 'JS' });
    expect(empty.cumsum(1).shape).toEqual([2, 0]);
    expect(empty.cumsum(0).shape).toEqual([2, 0]);
    expect(new Tensor(5, { device: 'JS' }).cumsum().item()).toBe(5);
    expect(new Tensor(5, { device: 'JS' }).cumsum(-1).item()).toBe(5);
    expect(() => new Tensor(5, { device: 'JS' }).cumsum(1)).toThrow(
      'axis 1 is out of range for shape (): valid axes are -1..0',
    );
  });
});

// d/dx at -inf-ward and +inf-ward inputs: every activation saturates there to a finite slope. A branch
// that where() does not take must stay finite, or its 0 gradient times an infinite derivative gives NaN.
const SLOPES: Record<string, [number, number]> = {
  sigmoid: [0, 0],
  tanh: [0, 0],
  erf: [0, 0],
  gelu: [0, 1],
  silu: [0, 1],
  swish: [0, 1],
  quickGelu: [0, 1],
  mish: [0, 1],
  softplus: [0, 1],
  elu: [0, 1],
  celu: [0, 1],
  selu: [0, 1.0507009873554805],
  logsigmoid: [1, 0],
  hardswish: [0, 1],
};

for (const device of DEVICES)
  describe(`gradients at saturated inputs on ${device}`, () => {
    it('are the finite limits, not NaN', () => {
      for (const [op, [low, high]] of Object.entries(SLOPES)) {
        const x = new Tensor([-1e5, -100, 100, 1e5], { device, dtype: 'float32', requiresGrad: true });
        (x[op as 'sigmoid']() as Tensor).sum().backward();
        const g = x.grad!.tolist() as number[];
        g.forEach((v, i) => {
          expect(v, `${op}'(${[-1e5, -100, 100, 1e5][i]})`).toBeCloseTo(i < 2 ? low : high, 6);
        });
      }
    });
  });
