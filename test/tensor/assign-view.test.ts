// Writes through views: assigning into a view of a realized tensor writes its buffer (tinygrad's setitem
// semantics); a view that cannot be written is an error naming it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jit } from '../../src/engine/jit.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

for (const device of DEVICES)
  describe(`assign into views on ${device}`, () => {
    const base = (n = 6) => Tensor.arange(n, undefined, 1, { device }).contiguous().realize();
    const T = (data: number[] | number[][]) => new Tensor(data, { device });

    it('writes through a slice, a permute, a reshape, a flip and a padded-then-shrunk view', () => {
      const s = base().reshape([2, 3]).contiguous().realize();
      s.get([1, 2]).assign(T([[7, 8, 9]]));
      expect(s.tolist()).toEqual([
        [0, 1, 2],
        [7, 8, 9],
      ]);
      const p = base().reshape([2, 3]).contiguous().realize();
      p.T.assign(
        T([
          [10, 40],
          [20, 50],
          [30, 60],
        ]),
      );
      expect(p.tolist()).toEqual([
        [10, 20, 30],
        [40, 50, 60],
      ]);
      const r = base();
      r.reshape([3, 2])
        .get(1)
        .assign(T([-1, -2]));
      expect(r.tolist()).toEqual([0, 1, -1, -2, 4, 5]);
      const f = base();
      f.flip(0)
        .get([0, 2])
        .assign(T([10, 20]));
      expect(f.tolist()).toEqual([0, 1, 2, 3, 20, 10]);
      const q = base(4);
      q.pad([[1, 1]])
        .shrink([[1, 3]])
        .assign(T([5, 6]));
      expect(q.tolist()).toEqual([5, 6, 2, 3]);
      // a strided slice (pad + reshape + shrink) and a scalar value
      const g = base();
      g.get([null, null, 2]).assign(0);
      expect(g.tolist()).toEqual([0, 1, 0, 3, 0, 5]);
    });

    it('lets every tensor over the buffer, and a lazy graph realized later, see the write', () => {
      const t = base();
      const doubled = t.mul(2);
      t.get([0, 2]).assign(T([9, 9]));
      expect(doubled.tolist()).toEqual([18, 18, 4, 6, 8, 10]);
      expect(t.sum().item()).toBe(9 + 9 + 2 + 3 + 4 + 5);
    });

    it('writes on every call of a JIT', () => {
      const t = base(4);
      const write = jit((x: Tensor) => {
        t.get([1, 3]).assign(x);
        return t.sum();
      });
      for (let i = 1; i <= 4; i++) expect(write(T([i, i])).item()).toBe(0 + i + i + 3);
      expect(t.tolist()).toEqual([0, 4, 4, 3]);
    });

    it('refuses a broadcast view and a view over padding, naming them', () => {
      const t = new Tensor([1, 2], { device }).realize();
      expect(() =>
        t
          .reshape([2, 1])
          .expand([2, 3])
          .assign(Tensor.zeros([2, 3], { device, dtype: 'int32' })),
      ).toThrow(
        'assign: cannot write through an expanded (broadcast) view (2, 3): its elements share memory',
      );
      expect(() => t.pad([[1, 1]]).assign(T([5, 6, 7, 8]))).toThrow(
        'assign: the view (4) reaches into padding outside the buffer it views',
      );
      expect(t.tolist()).toEqual([1, 2]);
    });
  });

for (const device of DEVICES)
  describe(`assign into views of lazy tensors on ${device}`, () => {
    it('gives the lazy tensor the new graph, and the view shows the write', () => {
      const t = Tensor.arange(6, undefined, 1, { device }).reshape([2, 3]);
      const row = t.get(1);
      row.assign(new Tensor([7, 8, 9], { device }));
      expect(t.tolist()).toEqual([
        [0, 1, 2],
        [7, 8, 9],
      ]);
      expect(row.tolist()).toEqual([7, 8, 9]);
      t.T.get(0).assign(new Tensor([-1, -2], { device }));
      expect(t.tolist()).toEqual([
        [-1, 1, 2],
        [-2, 8, 9],
      ]);
    });

    it('refuses a view whose lazy tensor was realized since, instead of losing the write', () => {
      const t = Tensor.arange(4, undefined, 1, { device });
      const head = t.get([0, 2]);
      t.realize();
      expect(() => head.assign(new Tensor([5, 6], { device }))).toThrow(
        'assign: the tensor this view (2) was made from has been realized or assigned since',
      );
      expect(t.tolist()).toEqual([0, 1, 2, 3]);
    });
  });

// Random chains of writable movement ops: the write lands where the view's elements sit in the base. The places
// come from the same chain applied to the base's flat positions (movement ops are tested on their own).
describe('assign through random views (property)', () => {
  type Step = (t: Tensor) => Tensor;
  const step = fc.oneof(
    fc.constant<Step>((t) => t.flip(0)),
    fc.constant<Step>((t) => (t.ndim > 1 ? t.T : t)),
    fc.constant<Step>((t) => t.reshape(-1)),
    fc.constant<Step>((t) =>
      t.shape[0]! > 1 ? t.shrink(t.shape.map((d, i) => (i === 0 ? [1, d] : [0, d]))) : t,
    ),
    fc.constant<Step>((t) => (t.ndim === 1 && t.shape[0]! % 2 === 0 ? t.reshape([2, -1]) : t)),
    fc.constant<Step>((t) =>
      t.pad(t.shape.map(() => [1, 1] as [number, number])).shrink(t.shape.map((d) => [1, d + 1])),
    ),
  );
  it('writes each element of the value where the view reads it', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 4 }), (steps) => {
        const base = Tensor.arange(12, undefined, 1, { device: 'JS' }).reshape([3, 4]).contiguous().realize();
        const places = steps.reduce(
          (t, f) => f(t),
          Tensor.arange(12, undefined, 1, { device: 'JS' }).reshape([3, 4]),
        );
        const view = steps.reduce((t, f) => f(t), base);
        const value = Tensor.arange(view.numel, undefined, 1, { device: 'JS' }).add(100).reshape(view.shape);
        const want = Array.from({ length: 12 }, (_, i) => i);
        const at = places.flatten().tolist() as number[];
        at.forEach((p, i) => {
          want[p] = 100 + i;
        });
        view.assign(value);
        expect(base.flatten().tolist()).toEqual(want);
      }),
      { numRuns: 40 },
    );
  });
});
