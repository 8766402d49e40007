// Indexed assignment (set) against a plain-JS reference: every index form, buffers kept, lazy graphs, errors.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { type Index, Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { close, data, numel, ravel, unravel, values } from './reference.ts';

/** A basic index as the reference reads it. */
type Ix = number | (number | null)[] | null | '...';

/** Python's range(*slice.indices(size)) as a list of positions. */
function slicePositions(s: readonly (number | null | undefined)[], size: number): number[] {
  const step = s[2] ?? 1;
  const [lo, hi] = step > 0 ? [0, size] : [-1, size - 1];
  const norm = (v: number | null | undefined, dflt: number) =>
    v == null ? dflt : Math.min(hi, Math.max(lo, v < 0 ? v + size : v));
  const start = norm(s[0], step > 0 ? 0 : size - 1);
  const stop = norm(s[1], step > 0 ? size : -1);
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/**
 * numpy's `x[indices] = value` for basic indices (integers, slices, null, '...'), over plain arrays: the
 * indexed view's elements in row-major order, each written with the value broadcast to the view's shape.
 */
function setRef(
  xs: number[],
  shape: number[],
  indices: Ix[],
  value: { shape: number[]; data: number[] },
): number[] {
  const used = indices.filter((i) => i !== null && i !== '...').length;
  const fill: Ix[] = new Array(shape.length - used).fill([]);
  const full = indices.includes('...')
    ? indices.flatMap((i) => (i === '...' ? fill : [i]))
    : [...indices, ...fill];
  // per entry: the positions it selects on its axis (undefined for a new axis) and whether it keeps an axis
  const entries: { axis?: number; positions: number[]; keeps: boolean }[] = [];
  let axis = 0;
  for (const idx of full) {
    if (idx === null) entries.push({ positions: [0], keeps: true });
    else {
      const size = shape[axis]!;
      if (typeof idx === 'number')
        entries.push({ axis, positions: [idx < 0 ? idx + size : idx], keeps: false });
      else entries.push({ axis, positions: slicePositions(idx as (number | null)[], size), keeps: true });
      axis++;
    }
  }
  const view = entries.filter((e) => e.keeps).map((e) => e.positions.length);
  const out = xs.slice();
  for (let flat = 0; flat < numel(view); flat++) {
    const at = unravel(flat, view);
    const pos = new Array<number>(shape.length);
    let k = 0;
    for (const e of entries) {
      const p = e.positions[e.keeps ? at[k++]! : 0]!;
      if (e.axis !== undefined) pos[e.axis] = p;
    }
    const lead = view.length - value.shape.length;
    const v =
      value.data[
        ravel(
          value.shape.map((d, i) => (d === 1 ? 0 : at[lead + i]!)),
          value.shape,
        )
      ]!;
    out[ravel(pos, shape)] = v;
  }
  return out;
}

for (const device of DEVICES)
  describe(`set on ${device}`, { timeout: 120_000 }, () => {
    const F = (shape: number[], seed: number) =>
      new Tensor(new Float32Array(values(numel(shape), seed)), { device }).reshape(shape);
    const realized = (shape: number[], seed: number) => F(shape, seed).contiguous().realize();

    it('each basic index form on a realized tensor, which keeps its buffer', () => {
      const cases: [Ix[], number[]][] = [
        [[1], [4, 5]],
        [[-1, 2], [5]],
        [[[1, 3]], [1, 5]],
        [[[], [null, null, 2]], [1]],
        [[[null, null, -1], 0, [1, 4]], [3]],
        [
          [
            [2, 0, -2],
            [3, null, -2],
          ],
          [5],
        ],
        [
          ['...', -1],
          [3, 4],
        ],
        [[0, '...', [1, 5, 3]], [2]],
        [
          [null, 1, null, [], 2],
          [1, 1, 4],
        ],
        [
          [[], [], []],
          [3, 4, 5],
        ],
        [[[4, 9]], []],
      ];
      cases.forEach(([indices, vshape], c) => {
        const t = realized([3, 4, 5], c);
        const buffer = t.uop;
        expect(buffer.op).toBe(Ops.BUFFER);
        const before = data(t);
        const v = F(vshape, 100 + c);
        expect(t.set(...(indices as Index[]), v)).toBe(t);
        close(data(t), setRef(before, [3, 4, 5], indices, { shape: vshape, data: data(v) }));
        expect(t.uop, `case ${c}: the tensor keeps its buffer`).toBe(buffer);
      });
    });

    it('scalars, casts, a lazy tensor and a non-contiguous view', () => {
      const t = realized([2, 3], 1);
      const before = data(t);
      t.set(1, [null, null, 2], 7.5);
      close(data(t), setRef(before, [2, 3], [1, [null, null, 2]], { shape: [], data: [7.5] }));
      const ints = new Tensor(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        { device },
      );
      ints.set([], 1, new Tensor([9.75, -2.5], { device }));
      expect([ints.dtype, ints.tolist()]).toEqual([
        dtypes.int32,
        [
          [1, 9, 3],
          [4, -2, 6],
        ],
      ]);
      const flags = new Tensor([true, false, true], { device });
      flags.set([1], false);
      expect(flags.tolist()).toEqual([true, false, false]);
      // a lazy tensor gets the new graph
      const lazy = Tensor.arange(12, undefined, 1, { device }).reshape([3, 4]);
      lazy.set([null, null, -1], [0, 2], 0);
      expect(lazy.tolist()).toEqual([
        [0, 0, 2, 3],
        [0, 0, 6, 7],
        [0, 0, 10, 11],
      ]);
      // a permuted view is written, its base is not
      const base = realized([3, 2], 2);
      const baseData = data(base);
      const view = base.permute([1, 0]); // (2, 3)
      const viewData = data(view);
      view.set(0, [], -1);
      close(data(view), setRef(viewData, [2, 3], [0, []], { shape: [], data: [-1] }));
      close(data(base), baseData);
      // a value read from the tensor itself is read before the write (a shift by one)
      const shift = new Tensor([1, 2, 3, 4, 5], { device });
      shift.set([1], shift.get([0, 4]));
      expect(shift.tolist()).toEqual([1, 1, 2, 3, 4]);
      // successive writes before anything runs all land in the same buffer
      const chain = new Tensor([1, 2, 3, 4], { device });
      const buffer = chain.uop;
      chain
        .set(0, 9)
        .set(1, 8)
        .set([2], new Tensor([7, 6], { device }));
      expect([chain.tolist(), chain.uop === buffer]).toEqual([[9, 8, 7, 6], true]);
      // nothing selected writes nothing
      const same = realized([2, 2], 3);
      const s = data(same);
      same.set([1, 1], 5);
      close(data(same), s);
    });

    it('index tensors: rows, mixed with slices, negative, duplicates (last wins), out of range', () => {
      const I = (xs: number[]) => new Tensor(xs, { device });
      const t = realized([3, 4], 4);
      const buffer = t.uop;
      const x = data(t);
      t.set(I([2, -3]), F([4], 5));
      const v5 = data(F([4], 5));
      const want1 = x.slice();
      for (let j = 0; j < 4; j++) [want1[8 + j], want1[j]] = [v5[j]!, v5[j]!];
      close(data(t), want1);
      expect(t.uop).toBe(buffer);
      // t[[1, 1], :, [0, 3]] = v: the index tensors are apart, so their axis goes first: (2, 3)
      const u = Tensor.arange(24, undefined, 1, { device }).reshape([2, 3, 4]).float();
      u.set(I([1, 1]), [], I([0, 3]), new Tensor([[5, 6, 7]], { device }));
      const want2 = Array.from({ length: 24 }, (_, i) => i);
      for (let r = 0; r < 3; r++) [want2[12 + r * 4], want2[12 + r * 4 + 3]] = [5 + r, 5 + r];
      expect(data(u)).toEqual(want2);
      // adjacent index tensors select elements; a repeated position takes the last value
      const m = Tensor.zeros([2, 3], { device });
      m.set(I([0, 1, 0]), I([2, 0, 2]), new Tensor([1, 2, 3], { device }).float());
      expect(m.tolist()).toEqual([
        [0, 0, 3],
        [2, 0, 0],
      ]);
      // index-tensor values out of range are an error where the host holds them; unchecked (lazy,
      // CHECK_INDEX=0) they write nothing
      const z = Tensor.zeros([4], { device });
      expect(() => z.set(I([1, 7, -9]), 1)).toThrow(
        'set: index 7 at position [1] of the index tensor (3) is out of range for axis 0 of shape (4); valid values are -4..3',
      );
      z.set(I([1, 7, -9]).contiguous(), 1);
      expect(z.tolist()).toEqual([0, 1, 0, 0]);
      // with an integer and a slice too
      const w = Tensor.zeros([3, 4], { device });
      w.set(1, I([3, 0]), new Tensor([8, 9], { device }).float());
      w.set([0, 3, 2], I([1]), 4);
      expect(w.tolist()).toEqual([
        [0, 4, 0, 0],
        [9, 0, 0, 8],
        [0, 4, 0, 0],
      ]);
    });

    it('errors: the value shape, integers out of range, bad indices', () => {
      const t = realized([3, 4], 6);
      expect(() => t.set(0, F([3], 1))).toThrow(
        'set: the value of shape (3) does not broadcast to the indexed shape (4) of the tensor (3, 4)',
      );
      expect(() => t.set([0, 2], F([2, 2, 4], 1))).toThrow(
        'set: the value of shape (2, 2, 4) does not broadcast to the indexed shape (2, 4) of the tensor (3, 4)',
      );
      expect(() => t.set(3, 0)).toThrow(
        'set: index 3 is out of range for axis 0 of shape (3, 4); valid indices are the integers -3..2',
      );
      expect(() => t.set(0, -5, 1)).toThrow('set: index -5 is out of range for axis 1 of shape (3, 4)');
      expect(() => t.set(0, 0, 0, 1)).toThrow('set: 3 indices for shape (3, 4), which has 2 dims');
      expect(() => t.set(new Tensor([0.5], { device }), 1)).toThrow(
        'set: index tensors must have an integer dtype',
      );
      expect(() => (t.set as (...a: unknown[]) => Tensor)()).toThrow('set: needs a value to write');
      expect(() => t.set(0, [1, 2, 3] as unknown as Tensor)).toThrow(
        'set: an operand must be a Tensor or a number',
      );
    });
  });

describe('set gradients (float64, central differences)', { timeout: 120_000 }, () => {
  it('flow to the value and to the elements not written', () => {
    checkGradient('set with slices', [[3, 4], [2]], (x, v) => x.mul(1).set([0, 3, 2], 1, v));
    checkGradient('set with a step and a scalar', [[3, 4]], (x) => x.mul(1).set([], [null, null, -2], 0.5));
    checkGradient('set with an index tensor', [[3, 4], [4]], (x, v) =>
      x.mul(1).set(new Tensor([2, 0], { device: 'JS' }), v),
    );
  });
});
