// view, size, roll, unfold, unflatten, repeatInterleave, meshgrid, diag and diagonal on JS and CPU against
// plain-JS references (negative dims, size-1 and empty axes, non-contiguous inputs), gradients and errors.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { data, numel, ravel, unravel } from './reference.ts';

/** An n-d array in plain JS: a shape and its row-major data. */
interface Nd {
  shape: number[];
  data: number[];
}

/** The array of `shape` whose element at each multi-index is f(index). */
const nd = (shape: number[], f: (i: number[]) => number): Nd => ({
  shape,
  data: Array.from({ length: numel(shape) }, (_, flat) => f(unravel(flat, shape))),
});
const at = (a: Nd, idx: readonly number[]) => a.data[ravel(idx, a.shape)]!;
/** Distinct values, so that any misplaced element shows. */
const distinct = (shape: number[], seed = 1): Nd => nd(shape, (i) => ravel(i, shape) * 0.5 + seed);
const mod = (a: number, n: number) => ((a % n) + n) % n;

// kernels compile on first use (gcc on CPU); a cold cache on a busy machine takes seconds
for (const device of DEVICES)
  describe(`movement extras on ${device}`, () => {
    const T = (a: Nd) => new Tensor(new Float32Array(a.data), { device }).reshape(a.shape);
    const check = (t: Tensor, want: Nd) => {
      expect(t.shape).toEqual(want.shape);
      expect(data(t)).toEqual(want.data);
    };
    /** A (2, 3, 4) input stored as (4, 2, 3) and permuted, with its reference. */
    const permuted = () => {
      const a = distinct([4, 2, 3], 3);
      return { t: T(a).permute(1, 2, 0), ref: nd([2, 3, 4], ([i, j, k]) => at(a, [k!, i!, j!])) };
    };

    it('view is reshape; size is the shape or one size', () => {
      const p = permuted();
      check(p.t.view(6, 4), { shape: [6, 4], data: p.ref.data });
      check(p.t.view([-1, 2]), { shape: [12, 2], data: p.ref.data });
      expect(p.t.view(24).shape).toEqual([24]);
      expect(() => p.t.view(5, -1)).toThrow('reshape: cannot infer -1 in (5, -1) for 24 elements');
      expect(p.t.size()).toEqual([2, 3, 4]);
      expect([p.t.size(0), p.t.size(-1), p.t.size(-3)]).toEqual([2, 4, 2]);
      expect(() => p.t.size(3)).toThrow(
        'size: dim 3 is out of range for shape (2, 3, 4); valid dims are -3..2',
      );
      expect(() => Tensor.full([], 1, { device }).size(0)).toThrow(
        'size: dim 0 is out of range for shape (); it has no dims',
      );
    });

    it('roll along dims, repeated dims, flattened, and empty', () => {
      const p = permuted();
      const rolled = (shifts: number[], dims: number[]) =>
        nd([2, 3, 4], (i) => {
          const src = [...i];
          dims.forEach((d, k) => {
            const a = d < 0 ? d + 3 : d;
            src[a] = mod(src[a]! - shifts[k]!, [2, 3, 4][a]!);
          });
          return at(p.ref, src);
        });
      check(p.t.roll(1, 2), rolled([1], [2]));
      check(p.t.roll(-1, -1), rolled([-1], [-1]));
      check(p.t.roll([7, -2], [1, 0]), rolled([7, -2], [1, 0]));
      check(p.t.roll([1, 2], [2, 2]), rolled([3], [2]));
      check(p.t.roll(3, 0), rolled([1], [0]));
      check(p.t.roll(0, 1), p.ref);
      // flattened: the element at flat i moves to flat i + shift
      check(
        p.t.roll(5),
        nd([2, 3, 4], (i) => p.ref.data[mod(ravel(i, [2, 3, 4]) - 5, 24)]!),
      );
      check(
        p.t.roll([-30]),
        nd([2, 3, 4], (i) => p.ref.data[mod(ravel(i, [2, 3, 4]) + 30, 24)]!),
      );
      check(T(distinct([2, 0])).roll(1, 1), { shape: [2, 0], data: [] });
      check(T(distinct([2, 0])).roll(3), { shape: [2, 0], data: [] });
      check(
        T(distinct([1, 3])).roll([1, 1], [0, 1]),
        nd([1, 3], ([, j]) => at(distinct([1, 3]), [0, mod(j! - 1, 3)])),
      );
      check(Tensor.full([], 4, { device }).roll(2), { shape: [], data: [4] });
      const ints = new Tensor([1, 2, 3], { device }).roll(1);
      expect([ints.dtype, data(ints)]).toEqual([dtypes.int32, [3, 1, 2]]);
      expect(() => p.t.roll([1, 2], [0])).toThrow(
        'roll: needs one shift per dim, got shifts [1, 2] and dims [0]',
      );
      expect(() => p.t.roll([1, 2])).toThrow(
        'roll: without dims, give one shift (the tensor rolls flattened), got [1, 2]',
      );
      expect(() => p.t.roll(1, 3)).toThrow(
        'roll: dim 3 is out of range for shape (2, 3, 4); valid dims are -3..2',
      );
      expect(() => p.t.roll(1.5, 0)).toThrow('roll: a shift must be an integer, got 1.5');
    });

    it('unfold: windows as a new last axis, overlapping or strided', () => {
      const p = permuted();
      const unfolded = (dim: number, size: number, step: number) => {
        const s = [2, 3, 4];
        const count = Math.floor((s[dim]! - size) / step) + 1;
        const shape = s.map((n, i) => (i === dim ? count : n)).concat(size);
        return nd(shape, (i) => {
          const src = i.slice(0, 3);
          src[dim] = i[dim]! * step + i[3]!;
          return at(p.ref, src);
        });
      };
      for (const [dim, size, step] of [
        [2, 2, 1],
        [2, 2, 2],
        [2, 3, 2],
        [2, 1, 3],
        [2, 4, 1],
        [1, 2, 1],
        [0, 1, 1],
        [0, 2, 5],
        [1, 0, 1],
      ] as const)
        check(p.t.unfold(dim, size, step), unfolded(dim, size, step));
      check(p.t.unfold(-2, 2, 1), unfolded(1, 2, 1));
      const row = distinct([8]);
      check(
        T(row).unfold(0, 2, 2),
        nd([4, 2], ([w, k]) => at(row, [2 * w! + k!])),
      );
      check(
        T(row).unfold(0, 3, 3),
        nd([2, 3], ([w, k]) => at(row, [3 * w! + k!])),
      );
      expect(T(distinct([0, 3])).unfold(0, 0, 2).shape).toEqual([1, 3, 0]);
      expect(T(distinct([2, 0])).unfold(1, 0, 1).shape).toEqual([2, 1, 0]);
      expect(T(distinct([0, 3])).unfold(1, 2, 1).shape).toEqual([0, 2, 2]);
      expect(() => p.t.unfold(2, 5, 1)).toThrow(
        'unfold: the window size 5 is larger than dim 2 of shape (2, 3, 4), which has 4 elements',
      );
      expect(() => p.t.unfold(2, 2, 0)).toThrow('unfold: the step must be an integer >= 1, got 0');
      expect(() => p.t.unfold(2, -1, 1)).toThrow(
        'unfold: the window size must be a non-negative integer, got -1',
      );
      expect(() => p.t.unfold(-4, 1, 1)).toThrow('unfold: dim -4 is out of range for shape (2, 3, 4)');
    });

    it('unflatten, with one size inferred', () => {
      const p = permuted();
      check(p.t.unflatten(2, [2, 2]), { shape: [2, 3, 2, 2], data: p.ref.data });
      check(p.t.unflatten(-1, [-1, 1, 2]), { shape: [2, 3, 2, 1, 2], data: p.ref.data });
      check(p.t.unflatten(0, [2]), p.ref);
      expect(T(distinct([0, 6])).unflatten(1, [3, -1]).shape).toEqual([0, 3, 2]);
      expect(T(distinct([0, 6])).unflatten(0, [0, 5]).shape).toEqual([0, 5, 6]);
      const msg = 'unflatten: sizes [3, 3] must be non-negative integers (one may be -1) whose product is 4';
      expect(() => p.t.unflatten(2, [3, 3])).toThrow(`${msg}, the size of dim 2 of shape (2, 3, 4)`);
      expect(() => p.t.unflatten(2, [3, -1])).toThrow('unflatten: sizes [3, -1] must be');
      expect(() => p.t.unflatten(2, [-1, -1])).toThrow('unflatten: sizes [-1, -1] must be');
      expect(() => p.t.unflatten(2, [])).toThrow('unflatten: sizes [] must be');
      expect(() => T(distinct([0, 6])).unflatten(0, [0, -1])).toThrow('unflatten: sizes [0, -1] must be');
      expect(() => p.t.unflatten(3, [1])).toThrow('unflatten: dim 3 is out of range');
    });

    it('repeatInterleave along a dim or flattened', () => {
      const p = permuted();
      check(
        p.t.repeatInterleave(2, 1),
        nd([2, 6, 4], ([i, j, k]) => at(p.ref, [i!, Math.floor(j! / 2), k!])),
      );
      check(
        p.t.repeatInterleave(3, -1),
        nd([2, 3, 12], ([i, j, k]) => at(p.ref, [i!, j!, Math.floor(k! / 3)])),
      );
      check(
        p.t.repeatInterleave(2),
        nd([48], ([f]) => p.ref.data[Math.floor(f! / 2)]!),
      );
      check(p.t.repeatInterleave(1, 0), p.ref);
      expect(p.t.repeatInterleave(0, 1).shape).toEqual([2, 0, 4]);
      expect(T(distinct([0, 2])).repeatInterleave(3).shape).toEqual([0]);
      check(Tensor.full([], 7, { device }).repeatInterleave(2), { shape: [2], data: [7, 7] });
      expect(() => p.t.repeatInterleave(-1, 0)).toThrow(
        'repeatInterleave: repeats must be a non-negative integer, got -1',
      );
      expect(() => p.t.repeatInterleave(1.5)).toThrow(
        'repeatInterleave: repeats must be a non-negative integer, got 1.5',
      );
      expect(() => p.t.repeatInterleave(2, 3)).toThrow(
        'repeatInterleave: dim 3 is out of range for shape (2, 3, 4)',
      );
    });

    it('meshgrid with ij and xy indexing', () => {
      const [a, b, c] = [distinct([2], 1), distinct([3], 10), distinct([4], 20)];
      const [ga, gb, gc] = Tensor.meshgrid(T(a), T(b).flip(0), T(c));
      check(
        ga!,
        nd([2, 3, 4], ([i]) => at(a, [i!])),
      );
      check(
        gb!,
        nd([2, 3, 4], ([, j]) => at(b, [2 - j!])),
      );
      check(
        gc!,
        nd([2, 3, 4], ([, , k]) => at(c, [k!])),
      );
      const [xa, xb, xc] = Tensor.meshgrid(T(a), T(b), T(c), { indexing: 'xy' });
      check(
        xa!,
        nd([3, 2, 4], ([, i]) => at(a, [i!])),
      );
      check(
        xb!,
        nd([3, 2, 4], ([j]) => at(b, [j!])),
      );
      check(
        xc!,
        nd([3, 2, 4], ([, , k]) => at(c, [k!])),
      );
      const [ia, ib] = Tensor.meshgrid(T(a), T(b), { indexing: 'ij' });
      check(
        ia!,
        nd([2, 3], ([i]) => at(a, [i!])),
      );
      check(
        ib!,
        nd([2, 3], ([, j]) => at(b, [j!])),
      );
      // a 0-d tensor counts as one element; one tensor comes back 1-D
      const [s, v] = Tensor.meshgrid(Tensor.full([], 5, { device }), T(b), { indexing: 'xy' });
      check(
        s!,
        nd([3, 1], () => 5),
      );
      check(
        v!,
        nd([3, 1], ([j]) => at(b, [j!])),
      );
      const only = Tensor.meshgrid(T(a), { indexing: 'xy' });
      expect(only.length).toBe(1);
      check(only[0]!, a);
      const [e0, e1] = Tensor.meshgrid(T(a), T({ shape: [0], data: [] }));
      expect([e0!.shape, e1!.shape]).toEqual([
        [2, 0],
        [2, 0],
      ]);
      const [i0, f1] = Tensor.meshgrid(new Tensor([1, 2], { device }), T(b));
      expect([i0!.dtype, f1!.dtype]).toEqual([dtypes.int32, dtypes.float32]);
      expect(() => Tensor.meshgrid()).toThrow('meshgrid: needs at least one tensor');
      expect(() => Tensor.meshgrid(T(a), T(distinct([2, 2])))).toThrow(
        'meshgrid: needs 0-D or 1-D tensors, got shapes (2), (2, 2)',
      );
      expect(() => Tensor.meshgrid(T(a), { indexing: 'yx' as 'xy' })).toThrow(
        "meshgrid: indexing must be 'ij' or 'xy', got 'yx'",
      );
    });

    it('diag: a vector on a diagonal, or a diagonal of a matrix', () => {
      const v = distinct([3]);
      for (const k of [0, 1, 2, -1, -4]) {
        const n = 3 + Math.abs(k);
        check(
          T(v).diag(k),
          nd([n, n], ([i, j]) => (j! - i! === k ? at(v, [k >= 0 ? i! : j!]) : 0)),
        );
      }
      check(
        T(v).flip(0).diag(),
        nd([3, 3], ([i, j]) => (i === j ? at(v, [2 - i!]) : 0)),
      );
      const m = distinct([3, 4]);
      for (const k of [0, 1, 3, -1, -2, 4, -3]) {
        const count = Math.max(0, Math.min(3 - Math.max(0, -k), 4 - Math.max(0, k)));
        check(
          T(m).diag(k),
          nd([count], ([i]) => at(m, [i! + Math.max(0, -k), i! + Math.max(0, k)])),
        );
      }
      check(
        T(m).T.diag(1),
        nd([2], ([i]) => at(m, [i! + 1, i!])),
      );
      check(T({ shape: [0], data: [] }).diag(), { shape: [0, 0], data: [] });
      check(
        T({ shape: [0], data: [] }).diag(2),
        nd([2, 2], () => 0),
      );
      const b = new Tensor([true, true], { device }).diag();
      expect(b.tolist()).toEqual([
        [true, false],
        [false, true],
      ]);
      expect(() => T(distinct([2, 2, 2])).diag()).toThrow(
        'diag: needs a 1-D tensor (to make a matrix) or a 2-D one (to read), got shape (2, 2, 2)',
      );
      expect(() => T(v).diag(0.5)).toThrow('diag: the diagonal must be an integer, got 0.5');
    });

    it('diagonal of any two axes, as a new last axis', () => {
      const p = permuted(); // (2, 3, 4)
      const diag = (offset: number, d1: number, d2: number) => {
        const rest = [0, 1, 2].filter((i) => i !== d1 && i !== d2);
        const [r, c] = [[2, 3, 4][d1]!, [2, 3, 4][d2]!];
        const count = Math.max(0, Math.min(r - Math.max(0, -offset), c - Math.max(0, offset)));
        return nd([...rest.map((i) => [2, 3, 4][i]!), count], (idx) => {
          const src = [0, 0, 0];
          rest.forEach((a, k) => {
            src[a] = idx[k]!;
          });
          src[d1] = idx.at(-1)! + Math.max(0, -offset);
          src[d2] = idx.at(-1)! + Math.max(0, offset);
          return at(p.ref, src);
        });
      };
      check(p.t.diagonal(), diag(0, 0, 1));
      check(p.t.diagonal(1), diag(1, 0, 1));
      check(p.t.diagonal({ offset: -1, dim1: 1, dim2: 2 }), diag(-1, 1, 2));
      check(p.t.diagonal({ offset: 2, dim1: -1, dim2: 0 }), diag(2, 2, 0));
      check(p.t.diagonal({ dim1: 2, dim2: 1 }), diag(0, 2, 1));
      check(p.t.diagonal({ offset: -1, dim1: 0, dim2: 2 }), diag(-1, 0, 2));
      check(p.t.diagonal({ offset: 5, dim1: 1, dim2: 2 }), diag(5, 1, 2));
      check(p.t.diagonal({ offset: -7 }), diag(-7, 0, 1));
      const four = distinct([2, 1, 3, 3]);
      check(
        T(four).diagonal({ dim1: -2, dim2: -1 }),
        nd([2, 1, 3], ([a, b, i]) => at(four, [a!, b!, i!, i!])),
      );
      expect(T(distinct([0, 3, 3])).diagonal({ dim1: 1, dim2: 2 }).shape).toEqual([0, 3]);
      expect(() => p.t.diagonal({ dim1: 1, dim2: -2 })).toThrow(
        'diagonal: dim1 1 and dim2 -2 are the same axis of shape (2, 3, 4)',
      );
      expect(() => p.t.diagonal({ dim2: 3 })).toThrow('diagonal: dim 3 is out of range for shape (2, 3, 4)');
      expect(() => T(distinct([3])).diagonal()).toThrow('diagonal: needs at least 2 dims, got shape (3)');
      expect(() => p.t.diagonal(1.5)).toThrow('diagonal: the offset must be an integer, got 1.5');
    });

    it('sliced and flipped inputs stay views', () => {
      const a = distinct([4, 6]);
      const sliced = T(a).get([1, 4], [null, null, -2]); // rows 1..3, columns 5, 3, 1
      const ref = nd([3, 3], ([i, j]) => at(a, [i! + 1, 5 - 2 * j!]));
      check(
        sliced.roll(1, 1),
        nd([3, 3], ([i, j]) => at(ref, [i!, mod(j! - 1, 3)])),
      );
      check(
        sliced.unfold(0, 2, 1),
        nd([2, 3, 2], ([w, j, k]) => at(ref, [w! + k!, j!])),
      );
      check(
        sliced.diagonal(),
        nd([3], ([i]) => at(ref, [i!, i!])),
      );
      check(
        sliced.repeatInterleave(2, 0),
        nd([6, 3], ([i, j]) => at(ref, [Math.floor(i! / 2), j!])),
      );
    });
  });

// --- gradients against central differences in float64 --------------------------------------------------

/** The shared central-difference check (gradcheck.ts) for one input. */
const gradCheck = (name: string, shape: number[], f: (x: Tensor) => Tensor, device = 'JS') =>
  checkGradient(name, [shape], f, device);

describe('movement extras: gradients (central differences, float64)', () => {
  it('roll, unfold, repeatInterleave, unflatten and view', () => {
    gradCheck('roll', [2, 3], (x) => x.roll([1, -2], [0, 1]).square());
    gradCheck('roll flattened', [2, 3], (x) => x.roll(4).mul(x));
    gradCheck('unfold', [2, 5], (x) =>
      x
        .unfold(1, 2, 1)
        .square()
        .sum(-1)
        .add(x.unfold(-1, 3, 2).sum([1, 2]).unsqueeze(-1)),
    );
    gradCheck('repeatInterleave', [2, 3], (x) => x.repeatInterleave(2, 1).square());
    gradCheck('unflatten, view', [2, 6], (x) => x.unflatten(1, [3, -1]).square().view(-1));
  });
  it('diag, diagonal and meshgrid', () => {
    gradCheck('diag of a vector', [3], (x) => x.diag(1).square());
    gradCheck('diag of a matrix', [3, 4], (x) => x.diag(-1).square());
    gradCheck('diagonal', [2, 3, 3], (x) => x.diagonal({ offset: 1, dim1: 2, dim2: 1 }).square());
    gradCheck('meshgrid', [4], (x) => {
      const [a, b] = Tensor.meshgrid(x.get([0, 2]), x.get([1, 4]).square(), { indexing: 'xy' });
      return a!.mul(b!);
    });
  });
  it('on the CPU device too', () => {
    gradCheck('roll and unfold on CPU', [2, 4], (x) => x.roll(1, 1).unfold(1, 2, 2).square(), 'CPU');
  });
});
