// Small defects found by trying programs as a new user would (issue #11): each fixed, each tested.
import { describe, expect, it } from 'vitest';
import { fn, Tensor } from '../../src/tensor/index.ts';

for (const device of ['JS', 'CPU']) {
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
