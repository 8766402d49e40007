// pad: the pair and flat (PyTorch) forms, constant/reflect/replicate/circular modes, against a JS reference.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { type PadMode, Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { checkGradient } from './gradcheck.ts';
import { close, data, numel, ravel, unravel, values } from './reference.ts';

/** Where output position o of an axis of size n padded by [b, a] reads from, or -1 for the fill value. */
function source(o: number, n: number, [b, a]: [number, number], mode: PadMode): number {
  if (mode === 'constant') return o - b >= 0 && o - b < n ? o - b : -1;
  // other modes remove first, then pad what is left
  const lo = Math.max(-b, 0);
  const m = n - lo - Math.max(-a, 0);
  const j = o - Math.max(b, 0);
  const inside =
    mode === 'reflect'
      ? j < 0
        ? -j
        : j >= m
          ? 2 * (m - 1) - j
          : j
      : mode === 'replicate'
        ? Math.min(Math.max(j, 0), m - 1)
        : ((j % m) + m) % m;
  return inside + lo;
}

function padRef(
  xs: number[],
  shape: number[],
  pairs: [number, number][],
  mode: PadMode = 'constant',
  value = 0,
): { shape: number[]; data: number[] } {
  const out = shape.map((d, i) => d + pairs[i]![0] + pairs[i]![1]);
  const res = Array.from({ length: numel(out) }, (_, flat) => {
    const idx = unravel(flat, out).map((o, i) => source(o, shape[i]!, pairs[i]!, mode));
    return idx.includes(-1) ? value : xs[ravel(idx, shape)]!;
  });
  return { shape: out, data: res };
}

/** PyTorch's flat form as pairs per axis. */
const fromFlat = (flat: number[], ndim: number): [number, number][] =>
  Array.from({ length: ndim }, (_, i) => {
    const j = ndim - 1 - i;
    return 2 * j < flat.length ? [flat[2 * j]!, flat[2 * j + 1]!] : [0, 0];
  });

describe.each(DEVICES)('pad on %s', (device) => {
  const shape = [2, 3, 4];
  const xs = values(numel(shape), 3);
  const x = () => new Tensor(xs, { device }).reshape(shape);

  it('takes one pair per axis or the flat form from the last axis backward', () => {
    const cases: number[][] = [[1, 2], [0, 1, 2, 0], [1, 0, 0, 1, 2, 1], [-1, 2, 1, -2], []];
    for (const flat of cases) {
      const want = padRef(xs, shape, fromFlat(flat, 3));
      const got = x().pad(flat);
      expect(got.shape).toEqual(want.shape);
      close(data(got), want.data);
      close(data(x().pad(fromFlat(flat, 3))), want.data);
    }
    // a 1-d tensor in both forms
    expect(new Tensor([1, 2, 3], { device }).pad([1, 1]).tolist()).toEqual([0, 1, 2, 3, 0]);
    expect(new Tensor([1, 2, 3], { device }).pad([[2, 0]], 7).tolist()).toEqual([7, 7, 1, 2, 3]);
  });

  it('fills with a value given as a number or in the options', () => {
    const pairs: [number, number][] = [
      [0, 1],
      [2, 0],
      [1, 1],
    ];
    close(data(x().pad(pairs, 5)), padRef(xs, shape, pairs, 'constant', 5).data);
    close(data(x().pad(pairs, { value: -2.5 })), padRef(xs, shape, pairs, 'constant', -2.5).data);
    close(
      data(x().pad([1, 1], { mode: 'constant', value: Number.NaN })),
      padRef(xs, shape, fromFlat([1, 1], 3), 'constant', Number.NaN).data,
    );
    const ints = new Tensor([1, 2], { device, dtype: dtypes.int32 });
    expect(ints.pad([1, 2], -4).tolist()).toEqual([-4, 1, 2, -4, -4]);
  });

  it.each(['reflect', 'replicate', 'circular'] as const)('mode %s matches the reference', (mode) => {
    const big = mode === 'reflect' ? 2 : mode === 'circular' ? 3 : 5;
    const cases: number[][] = [
      [1, 2],
      [big, 1, 0, big],
      [1, 0, 2, 1, 0, 1],
      [-1, big, 0, -1],
      [0, 0],
    ];
    for (const flat of cases) {
      const want = padRef(xs, shape, fromFlat(flat, 3), mode);
      const got = x().pad(flat, { mode });
      expect(got.shape, JSON.stringify(flat)).toEqual(want.shape);
      close(data(got), want.data);
    }
  });

  it('pads non-contiguous inputs, size-1 and zero-size axes', () => {
    // a permuted and a sliced view
    const perm = x().permute([2, 0, 1]);
    const permData = data(perm.contiguous());
    for (const mode of ['constant', 'reflect', 'replicate', 'circular'] as const) {
      const pairs: [number, number][] = [
        [1, 2],
        [0, 1],
        [2, 1],
      ];
      close(data(perm.pad(pairs, { mode })), padRef(permData, [4, 2, 3], pairs, mode).data);
    }
    const sliced = x().shrink([
      [0, 2],
      [1, 3],
      [1, 4],
    ]);
    close(
      data(sliced.pad([1, 1, 1, 0], { mode: 'reflect' })),
      padRef(data(sliced.contiguous()), [2, 2, 3], fromFlat([1, 1, 1, 0], 3), 'reflect').data,
    );
    // size 1: replicate and circular repeat the one element; reflect cannot pad it
    const one = new Tensor([[4]], { device });
    expect(one.pad([2, 1], { mode: 'replicate' }).tolist()).toEqual([[4, 4, 4, 4]]);
    expect(one.pad([1, 1, 1, 0], { mode: 'circular' }).tolist()).toEqual([
      [4, 4, 4],
      [4, 4, 4],
    ]);
    // zero-size axis: constant padding makes elements, circular by 0 keeps it empty
    const empty = Tensor.zeros([2, 0], { device });
    expect(empty.pad([1, 1], 3).tolist()).toEqual([
      [3, 3],
      [3, 3],
    ]);
    expect(empty.pad([0, 0, 1, 0], { mode: 'replicate' }).shape).toEqual([3, 0]);
    // bools keep their dtype and fill with false
    const b = new Tensor([true, true], { device }).pad([1, 0], { mode: 'constant' });
    expect(b.dtype).toBe(dtypes.bool);
    expect(b.tolist()).toEqual([false, true, true]);
    const ib = new Tensor([3, 7, 9], { device, dtype: dtypes.int32 }).pad([2, 2], { mode: 'reflect' });
    expect(ib.dtype).toBe(dtypes.int32);
    expect(ib.tolist()).toEqual([9, 7, 3, 7, 9, 7, 3]);
  });
});

describe('pad gradients (float64, central differences)', () => {
  for (const mode of ['constant', 'reflect', 'replicate', 'circular'] as const)
    it(`mode ${mode}`, () => {
      checkGradient(mode, [[2, 3, 3]], (t) => t.pad([2, 1, -1, 1], { mode }));
    });
});

describe('pad errors', () => {
  const x = Tensor.zeros([2, 3], { device: 'JS' });
  it('names the shape and what would be valid', () => {
    expect(() => x.pad([1, 2, 3])).toThrow(
      'pad: [1,2,3] for shape (2, 3) should be 2 [before, after] pairs, or a flat list of at most 2 pairs from the last axis backward',
    );
    expect(() => x.pad([1, 1, 1, 1, 1, 1])).toThrow(/should be 2 \[before, after\] pairs/);
    expect(() => x.pad([[1, 1]])).toThrow(
      /pad: \[\[1,1\]\] for shape \(2, 3\) should be 2 \[before, after\] pairs/,
    );
    expect(() => x.pad([1.5, 1])).toThrow('pad: [1.5,1] for shape (2, 3) should hold integer counts');
    expect(() => x.pad([[1, 1], [1, 1, 1] as unknown as [number, number]])).toThrow(
      /should hold integer counts/,
    );
    expect(() => x.pad([1, 1], { mode: 'wrap' as PadMode })).toThrow(
      "pad: unknown mode 'wrap'; valid modes are 'constant', 'reflect', 'replicate', 'circular'",
    );
    expect(() => x.pad([1, 1], { mode: 'reflect', value: 2 })).toThrow(
      "pad: mode 'reflect' takes no value (got 2); only 'constant' fills with one",
    );
    expect(() => x.pad([3, 0], { mode: 'reflect' })).toThrow(
      "pad: mode 'reflect' pads axis 1 of shape (2, 3) by [3, 0]; each count must be below its size 3",
    );
    expect(() => x.pad([0, 0, 0, 3], { mode: 'circular' })).toThrow(
      "pad: mode 'circular' pads axis 0 of shape (2, 3) by [0, 3]; each count must be at most its size 2",
    );
    expect(() => Tensor.zeros([0], { device: 'JS' }).pad([1, 0], { mode: 'replicate' })).toThrow(
      "pad: mode 'replicate' pads axis 0 of shape (0) by [1, 0]; an empty axis has no edge to repeat",
    );
    expect(() => x.pad([-4, 0])).toThrow(
      'pad: [-4, 0] removes more than the 3 elements of axis 1 of shape (2, 3)',
    );
  });
});
