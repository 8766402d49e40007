// Movement and indexing ops on JS and CPU against plain-JS references, zero-size and non-contiguous inputs.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { type Index, Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

/** An n-d array in plain JS: a shape and its row-major data. */
interface Nd {
  shape: number[];
  data: number[];
}

const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);
/** The array of the given shape whose element at each multi-index is f(index). */
function nd(shape: number[], f: (i: number[]) => number): Nd {
  const data: number[] = [];
  for (let flat = 0; flat < numel(shape); flat++) {
    const idx: number[] = [];
    let r = flat;
    for (let k = shape.length - 1; k >= 0; k--) {
      idx[k] = r % shape[k]!;
      r = Math.floor(r / shape[k]!);
    }
    data.push(f(idx));
  }
  return { shape, data };
}
function at(a: Nd, idx: readonly number[]): number {
  let flat = 0;
  a.shape.forEach((s, k) => {
    flat = flat * s + idx[k]!;
  });
  return a.data[flat]!;
}
/** Distinct float32 values, so that any misplaced element shows. */
let counter = 0;
const distinct = (shape: number[]): Nd => nd(shape, () => Math.fround(++counter * 0.25 - 7));
const data = (t: Tensor) => Array.from(t.dataSync() as ArrayLike<number>, Number);

for (const device of DEVICES)
  describe(`movement on ${device}`, () => {
    const T = (a: Nd) => new Tensor(new Float32Array(a.data), { device }).reshape(a.shape);
    const I = (a: Nd) => new Tensor(new Int32Array(a.data), { device }).reshape(a.shape);
    const check = (t: Tensor, want: Nd) => {
      expect(t.shape).toEqual(want.shape);
      expect(data(t)).toEqual(want.data);
    };
    const checkAll = (pairs: [Tensor, Nd][]) => {
      pairs[0]![0].realize(...pairs.slice(1).map((p) => p[0]));
      for (const [t, want] of pairs) check(t, want);
    };
    // Non-contiguous inputs with their references: permuted, flipped, padded.
    const permuted = (shape: [number, number, number]) => {
      const a = distinct([shape[2], shape[0], shape[1]]);
      return { t: T(a).permute([1, 2, 0]), ref: nd(shape, ([i, j, k]) => at(a, [k!, i!, j!])) };
    };
    const flipped = (shape: [number, number]) => {
      const a = distinct(shape);
      return { t: T(a).flip(-1), ref: nd(shape, ([i, j]) => at(a, [i!, shape[1] - 1 - j!])) };
    };
    const padded = (shape: [number, number]) => {
      const a = distinct([shape[0] - 1, shape[1]]);
      return {
        t: T(a).pad([
          [1, 0],
          [0, 0],
        ]),
        ref: nd(shape, ([i, j]) => (i === 0 ? 0 : at(a, [i! - 1, j!]))),
      };
    };

    it('squeeze and repeat', () => {
      const p = permuted([1, 3, 2]);
      const f = flipped([2, 3]);
      expect(p.t.reshape([1, 3, 1, 2]).squeeze().shape).toEqual([3, 2]);
      expect(p.t.reshape([1, 3, 1, 2]).squeeze(-2).shape).toEqual([1, 3, 2]);
      expect(p.t.reshape([1, 3, 1, 2]).squeeze([0, -2, 1]).shape).toEqual([3, 2]);
      expect(Tensor.full([], 2, { device }).squeeze(0).shape).toEqual([]);
      checkAll([
        [p.t.squeeze(0), { shape: [3, 2], data: p.ref.data }],
        [f.t.repeat([2, 1, 2]), nd([2, 2, 6], ([, i, j]) => at(f.ref, [i!, j! % 3]))],
        [f.t.repeat([2, 0]), { shape: [4, 0], data: [] }],
      ]);
      expect(() => p.t.squeeze(3)).toThrow(
        'squeeze: dim 3 is out of range for shape (1, 3, 2); valid dims are -3..2',
      );
      expect(() => f.t.repeat([2])).toThrow(
        'repeat: needs at least 2 non-negative integer counts for shape (2, 3), got [2]',
      );
      expect(() => f.t.repeat([1, -1])).toThrow('repeat: needs at least 2 non-negative integer counts');
    });

    it('cat and stack', () => {
      const p = permuted([2, 3, 2]);
      const f = flipped([2, 3]);
      const q = padded([3, 3]);
      const empty = T({ shape: [0, 3], data: [] });
      const ints = I(nd([1, 3], ([, j]) => j! - 1));
      const catRows = nd([6, 3], ([i, j]) =>
        i! < 2 ? at(f.ref, [i!, j!]) : i! < 5 ? at(q.ref, [i! - 2, j!]) : j! - 1,
      );
      const pf = p.t.reshape([2, 6]).shrink([
        [0, 2],
        [0, 3],
      ]);
      const pfRef = nd([2, 3], ([i, j]) => at(p.ref, [i!, Math.floor(j! / 2), j! % 2]));
      checkAll([
        [Tensor.cat([f.t, empty, q.t, ints]), catRows],
        [
          Tensor.cat([pf, f.t], -1),
          nd([2, 6], ([i, j]) => (j! < 3 ? at(pfRef, [i!, j!]) : at(f.ref, [i!, j! - 3]))),
        ],
        [Tensor.cat([empty, empty]), { shape: [0, 3], data: [] }],
        [Tensor.stack([f.t, pf]), nd([2, 2, 3], ([s, i, j]) => at(s ? pfRef : f.ref, [i!, j!]))],
        [Tensor.stack([f.t, pf], -1), nd([2, 3, 2], ([i, j, s]) => at(s ? pfRef : f.ref, [i!, j!]))],
      ]);
      expect(Tensor.cat([f.t, ints]).dtype).toBe(dtypes.float32);
      const b = new Tensor([true, false], { device });
      expect(Tensor.cat([b, b.flip(0), b]).tolist()).toEqual([true, false, false, true, true, false]);
      expect(() => Tensor.cat([f.t, p.t])).toThrow(
        'cat: shapes (2, 3), (2, 3, 2) must match except along dim 0',
      );
      expect(() => Tensor.cat([f.t, pf.transpose()], 1)).toThrow(
        'cat: shapes (2, 3), (3, 2) must match except along dim 1',
      );
      expect(() => Tensor.cat([f.t], 2)).toThrow(
        'cat: dim 2 is out of range for shape (2, 3); valid dims are -2..1',
      );
      expect(() => Tensor.cat([])).toThrow('cat: needs at least one tensor');
      expect(() => Tensor.stack([f.t, q.t])).toThrow(
        'stack: all tensors need the same shape, got (2, 3), (3, 3)',
      );
      expect(() => Tensor.stack([f.t], 3)).toThrow(
        'stack: dim 3 is out of range for shape (2, 3); valid dims are -3..2',
      );
      const other = device === 'JS' ? 'CPU' : 'JS';
      expect(() => Tensor.cat([f.t, new Tensor([[1, 2, 3]], { device: other })])).toThrow(
        `cat: operands are on ${device} and ${other}`,
      );
    });

    it('split and chunk', () => {
      const p = permuted([3, 5, 1]);
      const x = p.t.squeeze(-1);
      const ref = { shape: [3, 5], data: p.ref.data };
      const piece = (from: number, to: number) => nd([3, to - from], ([i, j]) => at(ref, [i!, from + j!]));
      const a = x.split(2, -1);
      const b = x.split([1, 0, 4], 1);
      const c = x.chunk(2);
      expect(a.map((t) => t.shape)).toEqual([
        [3, 2],
        [3, 2],
        [3, 1],
      ]);
      expect(c.map((t) => t.shape)).toEqual([
        [2, 5],
        [1, 5],
      ]);
      expect(x.chunk(9, 1).length).toBe(5);
      expect(
        x
          .shrink([
            [0, 0],
            [0, 5],
          ])
          .chunk(3)
          .map((t) => t.shape),
      ).toEqual([[0, 5]]);
      checkAll([
        [a[0]!, piece(0, 2)],
        [a[2]!, piece(4, 5)],
        [b[1]!, piece(1, 1)],
        [b[2]!, piece(1, 5)],
        [c[1]!, nd([1, 5], ([, j]) => at(ref, [2, j!]))],
      ]);
      expect(() => x.split(0)).toThrow('split: the piece size must be a positive integer, got 0');
      expect(() => x.split([2, 2], 1)).toThrow(
        'split: sizes [2, 2] must be non-negative integers summing to 5, the size of dim 1 of shape (3, 5)',
      );
      expect(() => x.split(1, -3)).toThrow(
        'split: dim -3 is out of range for shape (3, 5); valid dims are -2..1',
      );
      expect(() => x.chunk(0)).toThrow('chunk: the number of chunks must be a positive integer, got 0');
    });

    it('triu and tril by an arange mask', () => {
      const p = permuted([2, 3, 4]);
      const tri = (k: number, upper: boolean) =>
        nd([2, 3, 4], ([b, i, j]) => ((upper ? j! - i! >= k : j! - i! <= k) ? at(p.ref, [b!, i!, j!]) : 0));
      checkAll([
        [p.t.triu(), tri(0, true)],
        [p.t.triu(1), tri(1, true)],
        [p.t.tril(), tri(0, false)],
        [p.t.tril(-1), tri(-1, false)],
      ]);
      const b = Tensor.full([2, 2], true, { device });
      expect(b.tril().tolist()).toEqual([
        [true, false],
        [true, true],
      ]);
      expect(Tensor.zeros([0, 3], { device }).triu().shape).toEqual([0, 3]);
      expect(() => b.sum(0).triu()).toThrow('triu: needs at least 2 dims, got shape (2)');
      expect(() => b.tril(0.5)).toThrow('tril: the diagonal offset must be an integer, got 0.5');
    });

    it('gather as a one-hot reduce', () => {
      const p = permuted([3, 4, 1]);
      const x = p.t.squeeze(-1).transpose(); // (4, 3), non-contiguous
      const ref = nd([4, 3], ([i, j]) => at(p.ref, [j!, i!, 0]));
      const i0 = nd([2, 3], ([i, j]) => (i! * 3 + j! * 2) % 4);
      const i1 = nd([3, 2], ([i, j]) => (i! + 2 * j!) % 3);
      const withNaN = new Tensor([Number.NaN, 1, Number.POSITIVE_INFINITY, 2], { device }).reshape([2, 2]);
      const ints = I(nd([2, 3], ([i, j]) => i! * 3 + j!));
      checkAll([
        [x.gather(0, I(i0)), nd([2, 3], ([i, j]) => at(ref, [at(i0, [i!, j!]), j!]))],
        [x.gather(-1, I(i1)), nd([3, 2], ([i, j]) => at(ref, [i!, at(i1, [i!, j!])]))],
        [x.gather(1, I({ shape: [4, 0], data: [] })), { shape: [4, 0], data: [] }],
        [withNaN.gather(1, I({ shape: [2, 1], data: [1, 1] })), { shape: [2, 1], data: [1, 2] }],
        [ints.gather(1, I({ shape: [2, 1], data: [2, 0] })), { shape: [2, 1], data: [2, 3] }],
      ]);
      expect(ints.gather(0, I({ shape: [1, 1], data: [0] })).dtype).toBe(dtypes.int32);
      expect(() => x.gather(0, T(i0))).toThrow('gather: the index must have an integer dtype, got float32');
      expect(() => x.gather(0, I({ shape: [6], data: [0, 0, 0, 0, 0, 0] }))).toThrow(
        'gather: index shape (6) needs the 2 dims of the input (4, 3), each no larger except along dim 0',
      );
      expect(() => x.gather(0, I({ shape: [2, 4], data: new Array(8).fill(0) }))).toThrow(
        'gather: index shape (2, 4) needs the 2 dims of the input (4, 3)',
      );
      const other = device === 'JS' ? 'CPU' : 'JS';
      expect(() => x.gather(0, new Tensor([[0]], { device: other }))).toThrow(
        `gather: operands are on ${device} and ${other}`,
      );
      expect(() => x.gather(2, I(i0))).toThrow(
        'gather: dim 2 is out of range for shape (4, 3); valid dims are -2..1',
      );
    });

    it('get: integers, slices with steps, new axes and ellipsis are views', () => {
      const p = permuted([4, 5, 3]);
      const x = p.t;
      const r = p.ref;
      /** positions a slice keeps, by Python's rules, written out longhand */
      const range = (size: number, start: number | null, stop: number | null, step: number) => {
        const out: number[] = [];
        if (step > 0) {
          let s = start === null ? 0 : start < 0 ? Math.max(0, start + size) : Math.min(start, size);
          const e = stop === null ? size : stop < 0 ? Math.max(0, stop + size) : Math.min(stop, size);
          for (; s < e; s += step) out.push(s);
        } else {
          let s = start === null ? size - 1 : start < 0 ? start + size : Math.min(start, size - 1);
          const e = stop === null ? -1 : stop < 0 ? Math.max(-1, stop + size) : stop;
          for (; s > e; s += step) out.push(s);
        }
        return out;
      };
      const rows = range(4, null, null, -1);
      const cols = range(5, 1, null, 2);
      const back = range(3, -1, 0, -2);
      const viewCases: [Tensor, Nd][] = [
        [x.get(1, -1), nd([3], ([k]) => at(r, [1, 4, k!]))],
        [
          x.get([null, null, -1], [1, null, 2], [-1, 0, -2]),
          nd([4, 2, 1], ([i, j, k]) => at(r, [rows[i!]!, cols[j!]!, back[k!]!])),
        ],
        [x.get(null, '...', 2), nd([1, 4, 5], ([, i, j]) => at(r, [i!, j!, 2]))],
        [x.get('...', 'newaxis', [], -2), nd([4, 1, 5], ([i, , j]) => at(r, [i!, j!, 1]))],
        [x.get([1, 3], [], [10, 20]), { shape: [2, 5, 0], data: [] }],
        [x.get([-100, 100, 3], 0, [null, null, 3]), nd([2, 1], ([i]) => at(r, [i! * 3, 0, 0]))],
        [x.get(), r],
      ];
      checkAll(viewCases);
      const pd = padded([3, 4]);
      const fl = flipped([3, 4]);
      checkAll([
        [pd.t.get([null, null, -2], [1, 4, 2]), nd([2, 2], ([i, j]) => at(pd.ref, [2 - 2 * i!, 1 + 2 * j!]))],
        [fl.t.get(-1, [null, -1]), nd([3], ([j]) => at(fl.ref, [2, j!]))],
      ]);
      expect(x.get(0, 0, 0).shape).toEqual([]);
      expect(() => x.get(4)).toThrow(
        'get: index 4 is out of range for axis 0 of shape (4, 5, 3); valid indices are the integers -4..3',
      );
      expect(() => x.get([], -6)).toThrow(
        'get: index -6 is out of range for axis 1 of shape (4, 5, 3); valid indices are the integers -5..4',
      );
      expect(() => x.get(0, 0, 0, 0)).toThrow('get: 4 indices for shape (4, 5, 3), which has 3 dims');
      expect(() => x.get('...', 0, '...')).toThrow("get: at most one '...' is allowed, got 2");
      expect(() => x.get([0, 4, 0])).toThrow(
        'get: slice [0, 4, 0] on axis 0 needs integer bounds and a non-zero integer step',
      );
      expect(() => x.get(0.5)).toThrow(
        'get: index 0.5 is out of range for axis 0 of shape (4, 5, 3); valid indices are the integers -4..3',
      );
      expect(() => x.get('x' as unknown as Index)).toThrow(
        "get: cannot index with x; use an integer, a [start, stop, step] slice, null, '...' or an integer Tensor",
      );
    });

    it('get: integer tensors broadcast together and select by a one-hot reduce', () => {
      const p = permuted([4, 5, 3]);
      const x = p.t;
      const r = p.ref;
      const i = I({ shape: [2, 1], data: [3, -4] }); // negative indices count from the end
      const j = I({ shape: [3], data: [4, 0, -1] });
      const iv = [3, 0];
      const jv = [4, 0, 4];
      checkAll([
        // adjacent index tensors keep their place: (2, 3) replaces axes 0 and 1
        [x.get(i, j), nd([2, 3, 3], ([a, b, k]) => at(r, [iv[a!]!, jv[b!]!, k!]))],
        // separated by a slice: the broadcast axes go first (numpy's rule)
        [
          x.get(i, [], I({ shape: [3], data: [2, 1, 0] })),
          nd([2, 3, 5], ([a, b, c]) => at(r, [iv[a!]!, c!, 2 - b!])),
        ],
        // an integer removes its axis first, so the one tensor stays in place (as in PyTorch)
        [
          x.get(1, [], I({ shape: [3], data: [-1, 0, 1] })),
          nd([5, 3], ([a, b]) => at(r, [1, a!, [2, 0, 1][b!]!])),
        ],
        [x.get([], j, [null, null, -1]), nd([4, 3, 3], ([a, b, c]) => at(r, [a!, jv[b!]!, 2 - c!]))],
        [x.get('...', I({ shape: [], data: [2] })), nd([4, 5], ([a, b]) => at(r, [a!, b!, 2]))],
        [x.get(I({ shape: [0], data: [] })), { shape: [0, 5, 3], data: [] }],
      ]);
      const b = new Tensor([true, false, true], { device });
      expect(b.get(new Tensor([-1, 1, 0], { device, dtype: dtypes.int8 })).tolist()).toEqual([
        true,
        false,
        true,
      ]);
      const other = device === 'JS' ? 'CPU' : 'JS';
      expect(() => x.get(T({ shape: [1], data: [0] }))).toThrow(
        'get: index tensors must have an integer dtype, got float32 for axis 0',
      );
      expect(() => x.get(i, I({ shape: [3, 3], data: new Array(9).fill(0) }))).toThrow(
        'get: cannot broadcast shapes (2, 1) and (3, 3)',
      );
      expect(() => x.get(new Tensor([0], { device: other }))).toThrow(
        `get: operands are on ${device} and ${other}`,
      );
    });
  });

describe('movement fusion', () => {
  it('views, cat, stack, repeat and gather are one kernel each', () => {
    const x = new Tensor(new Float32Array(12), { device: 'JS' }).reshape([3, 4]);
    const idx = new Tensor(new Int32Array([0, 2, 1]), { device: 'JS' });
    const kernels = (t: Tensor) => scheduleOf([t]).kernels.length;
    expect(kernels(x.get([null, null, -1], [1, null, 2]).add(1))).toBe(1);
    expect(kernels(Tensor.cat([x, x.flip(0), x], 1))).toBe(1);
    expect(kernels(Tensor.stack([x, x.transpose().reshape([3, 4])], -1))).toBe(1);
    expect(kernels(x.repeat([2, 1, 3]))).toBe(1);
    // the one-hot compare against an arange fuses into the gather's reduce (the arange's loop collapses)
    expect(kernels(x.gather(1, idx.reshape([3, 1])))).toBe(1);
    expect(kernels(x.get([], idx))).toBe(1);
  });
});

describe('tinygrad and PyTorch spellings', () => {
  const x = Tensor.arange(6, undefined, 1, { device: 'JS' });

  it('reshape, permute and expand take sizes as an array or as arguments', () => {
    expect(x.reshape(2, 3).tolist()).toEqual(x.reshape([2, 3]).tolist());
    expect(x.reshape(3, -1).shape).toEqual([3, 2]);
    expect(x.reshape(2, 3).permute(1, 0).tolist()).toEqual([
      [0, 3],
      [1, 4],
      [2, 5],
    ]);
    expect(x.reshape(1, 6).expand(2, -1).shape).toEqual([2, 6]);
    expect(() => x.reshape(2, [3] as unknown as number)).toThrow(
      /^reshape: give sizes as one array or as numbers, e\.g\. reshape\(\[2, 3\]\) or reshape\(2, 3\), got /,
    );
    expect(() => x.reshape(2, 3).permute(0)).toThrow(/^permute: needs an order of all 2 axes, got \(0\)$/);
  });

  it('T is the transpose; float, half, int and bool cast', () => {
    expect(x.reshape(2, 3).T.tolist()).toEqual(x.reshape(2, 3).transpose().tolist());
    expect([x.float(), x.half(), x.float().int(), x.bool()].map((t) => t.dtype)).toEqual([
      dtypes.float32,
      dtypes.float16,
      dtypes.int32,
      dtypes.bool,
    ]);
    // float() is float32 even from another float
    expect(x.cast(dtypes.float64).float().dtype).toBe(dtypes.float32);
  });

  it('a negative pad removes elements, as in tinygrad and PyTorch', () => {
    expect(x.pad([[-1, 2]], 9).tolist()).toEqual([1, 2, 3, 4, 5, 9, 9]);
    expect(
      x
        .reshape(2, 3)
        .pad([
          [1, -1],
          [0, -2],
        ])
        .tolist(),
    ).toEqual([[0], [0]]);
    expect(() => x.pad([[-7, 0]])).toThrow(
      /^pad: \[-7, 0\] removes more than the 6 elements of axis 0 of shape \(6\)$/,
    );
  });

  it('clip is clamp', () => {
    expect(x.clip(1, 3).tolist()).toEqual([1, 1, 2, 3, 3, 3]);
  });

  it('an operand that is neither a tensor nor a scalar throws, naming the op', () => {
    expect(() => x.add([1, 2] as unknown as number)).toThrow(
      /^add: an operand must be a Tensor or a number, boolean or bigint, got an array \(make it a tensor/,
    );
    expect(() => x.mul('2' as unknown as number)).toThrow(/^mul: .* got string$/);
  });
});
