// Index values out of range: an error where the host holds them, quiet (0, nothing, NaN) when lazy unless CHECK_INDEX=1.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { jit } from '../../src/engine/jit.ts';
import { Context } from '../../src/helpers.ts';
import { Embedding } from '../../src/nn/index.ts';
import { HostAllocator } from '../../src/runtime/allocator.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { useDefaultDevice } from '../default-device.ts';
import { DEVICES } from '../devices.ts';
import { close, data, ravel, unravel } from './reference.ts';

const checked = <R>(f: () => R): R => Context.with({ CHECK_INDEX: 1 }, f);

for (const device of DEVICES)
  describe(`index checks on ${device}`, () => {
    useDefaultDevice(device); // for Embedding's weight
    const I = (xs: number[] | number[][], dtype = dtypes.int32) => new Tensor(xs, { device, dtype });
    const x = Tensor.arange(6, undefined, 1, { device }).reshape([2, 3]).float(); // [[0, 1, 2], [3, 4, 5]]

    it('gather: a bad host index names the op, the value, its position and the range; good ones gather', () => {
      expect(() =>
        x.gather(
          1,
          I([
            [0, 3],
            [1, 2],
          ]),
        ),
      ).toThrow(
        'gather: index 3 at position [0, 1] of the index tensor (2, 2) is out of range for dim 1 of the input (2, 3); valid values are 0..2',
      );
      // PyTorch's gather takes no negative index
      expect(() => x.gather(0, I([[0, -1, 1]]))).toThrow(
        'gather: index -1 at position [0, 1] of the index tensor (1, 3) is out of range for dim 0 of the input (2, 3); valid values are 0..1 (negative values do not count from the end here, as in PyTorch)',
      );
      expect(
        x
          .gather(
            1,
            I([
              [2, 0],
              [1, 1],
            ]),
          )
          .tolist(),
      ).toEqual([
        [2, 0],
        [4, 4],
      ]);
    });

    it('get: negative indices count from the end, out of range is an error; set reports as set', () => {
      expect(x.get(I([-1, 0])).tolist()).toEqual([
        [3, 4, 5],
        [0, 1, 2],
      ]);
      expect(x.get([], I([-3, 2])).tolist()).toEqual([
        [0, 2],
        [3, 5],
      ]);
      expect(() => x.get([], I([1, -4]))).toThrow(
        'get: index -4 at position [1] of the index tensor (2) is out of range for axis 1 of shape (2, 3); valid values are -3..2',
      );
      expect(() => x.get(I([0]), I([[3]]))).toThrow(
        'get: index 3 at position [0, 0] of the index tensor (1, 1)',
      );
      const t = Tensor.zeros([2, 3], { device });
      expect(() => t.set([], I([5]), 1)).toThrow(
        'set: index 5 at position [0] of the index tensor (1) is out of range for axis 1 of shape (2, 3); valid values are -3..2',
      );
      t.set([], I([-1]), 7);
      expect(t.tolist()).toEqual([
        [0, 0, 7],
        [0, 0, 7],
      ]);
    });

    it('scatter and scatterReduce: negatives and values past the size are errors; good ones write', () => {
      const z = Tensor.zeros([2, 3], { device });
      expect(() => z.scatter(1, I([[0, 3]]), 1)).toThrow(
        'scatter: index 3 at position [0, 1] of the index tensor (1, 2) is out of range for dim 1 of the tensor (2, 3); valid values are 0..2',
      );
      expect(() => z.scatterReduce(0, I([[-2]]), 1, 'sum')).toThrow(
        'scatterReduce: index -2 at position [0, 0] of the index tensor (1, 1) is out of range for dim 0 of the tensor (2, 3); valid values are 0..1 (negative',
      );
      expect(z.scatter(1, I([[2, 0]]), 1).tolist()).toEqual([
        [1, 0, 1],
        [0, 0, 0],
      ]);
      expect(z.scatterReduce(0, I([[1, 1, 0]]), 2, 'sum').tolist()).toEqual([
        [0, 0, 2],
        [2, 2, 0],
      ]);
    });

    it('Embedding, oneHot and maxUnpool name themselves and their range', () => {
      const emb = new Embedding(4, 2);
      expect(() => emb.call(I([[1, -1]]))).toThrow(
        'Embedding(4, 2): index -1 at position [0, 1] of the index tensor (1, 2) is out of range for a vocabulary of 4; valid values are 0..3 (negative',
      );
      const w = data(emb.weight);
      close(data(emb.call(I([3, 0]))), [...w.slice(6, 8), ...w.slice(0, 2)]);
      expect(() => I([0, 3]).oneHot(3)).toThrow(
        'oneHot: label 3 at position [1] of the label tensor (2) is out of range for 3 classes; valid values are 0..2',
      );
      expect(I([2, 0]).oneHot(3).tolist()).toEqual([
        [0, 0, 1],
        [1, 0, 0],
      ]);
      const v = new Tensor([[5, 6]], { device }).float();
      expect(() => v.maxUnpool1d(I([[1, 4]]), 2)).toThrow(
        'maxUnpool1d: index 4 at position [0, 1] of the index tensor (1, 2) is out of range for the output plane (4) of 4 positions; valid values are 0..3',
      );
      expect(v.maxUnpool1d(I([[1, 3]]), 2).tolist()).toEqual([[0, 5, 0, 6]]);
    });

    it('losses: a label out of [0, C) is an error, the ignoreIndex is not', () => {
      const logits = new Tensor(
        [
          [1, 2, 3],
          [0, 0, 5],
        ],
        { device },
      );
      expect(() => logits.sparseCategoricalCrossentropy(I([1, 3]))).toThrow(
        'sparseCategoricalCrossentropy: label 3 at position [1] of the label tensor (2) is out of range for the 3 classes of the logits (2, 3); valid values are 0..2',
      );
      expect(() => logits.crossEntropy(I([-1, 0]), { ignoreIndex: -100 })).toThrow(
        'crossEntropy: class index -1 at position [0] of the class index tensor (2) is out of range for the 3 classes on axis 1 of the input (2, 3); valid values are 0..2 and the ignoreIndex -100',
      );
      expect(() => logits.nllLoss(I([0, 9]))).toThrow('nllLoss: class index 9 at position [1]');
      // the ignoreIndex keeps working, outside [0, C) too, and the labels pass as often as they are checked
      const labels = I([-100, 2]);
      const want = -(5 - Math.log(2 + Math.exp(5)));
      for (let k = 0; k < 2; k++) {
        close(data(logits.sparseCategoricalCrossentropy(labels, { ignoreIndex: -100 })), [want], 1e-4);
        close(data(logits.crossEntropy(labels, { ignoreIndex: -100 })), [want], 1e-4);
        close(
          data(logits.log().nllLoss(labels, { ignoreIndex: -100, reduction: 'sum' })),
          [-Math.log(5)],
          1e-5,
        );
      }
      expect(() => logits.sparseCategoricalCrossentropy(labels)).toThrow(
        'sparseCategoricalCrossentropy: label -100 at position [0]',
      );
    });

    it('realized tensors, views of them, int64 and uint8 indices are checked; a rewritten buffer again', () => {
      const idx = I([0, 1, 2, 3]).sub(1).realize(); // [-1, 0, 1, 2], computed on the device
      expect(idx.uop.op).toBe(Ops.BUFFER);
      if (!(Device.get(device).allocator instanceof HostAllocator)) {
        // a GPU's results are not on the host: reading them would wait for the GPU, so CHECK_INDEX checks there
        expect(() => x.gather(1, idx.reshape([1, 4]))).not.toThrow();
        expect(() => checked(() => x.gather(1, idx.reshape([1, 4])))).toThrow('gather: index -1');
        return;
      }
      expect(() => x.gather(1, idx.reshape([1, 4]))).toThrow('gather: index -1 at position [0, 0]');
      // a view: positions are the view's; the view's own values decide
      expect(() => x.gather(1, idx.flip(0).reshape([2, 2]))).toThrow('gather: index -1 at position [1, 1]');
      expect(x.gather(1, idx.shrink([[1, 4]]).reshape([1, 3])).tolist()).toEqual([[0, 1, 2]]);
      expect(() =>
        x.gather(
          1,
          idx
            .shrink([[1, 4]])
            .pad([[0, 1]], -5)
            .reshape([1, 4]),
        ),
      ).not.toThrow();
      expect(() =>
        x.gather(
          1,
          I([[2], [1]])
            .expand([2, 3])
            .permute([1, 0])
            .shrink([
              [0, 2],
              [0, 2],
            ]),
        ),
      ).not.toThrow();
      const wide = I([1, 2 ** 40], dtypes.int64);
      expect(() => x.get([], wide)).toThrow(`get: index ${2 ** 40} at position [1]`);
      expect(() => x.get(I([2], dtypes.uint8))).toThrow('get: index 2 at position [0]');
      // a view of labels that hold the ignoreIndex passes through its buffer's check
      const labels = I([-100, 1, 2, -100]);
      const logits = Tensor.zeros([2, 3], { device });
      close(data(logits.sparseCategoricalCrossentropy(labels.shrink([[0, 2]]), { ignoreIndex: -100 })), [
        Math.log(3),
      ]);
      expect(() => logits.sparseCategoricalCrossentropy(labels.shrink([[2, 4]]))).toThrow(
        'sparseCategoricalCrossentropy: label -100 at position [1]',
      );
      // a buffer that passed is checked again once written
      const ok = I([0, 1]);
      expect(x.get(ok).shape).toEqual([2, 3]);
      ok.assign(I([1, 2])).realize();
      expect(() => x.get(ok)).toThrow('get: index 2 at position [1]');
    });

    it('lazy indices are not checked by default: gather and get select 0, scatter writes nothing, losses give NaN', () => {
      const lazy = (xs: number[] | number[][]) => I(xs).contiguous();
      expect(
        x
          .gather(
            1,
            lazy([
              [0, 3],
              [-1, 2],
            ]),
          )
          .tolist(),
      ).toEqual([
        [0, 0],
        [0, 5],
      ]);
      expect(x.get([], lazy([-1, 5])).tolist()).toEqual([
        [2, 0],
        [5, 0],
      ]);
      expect(
        Tensor.zeros([3], { device })
          .scatter(0, lazy([1, 3]), 1)
          .tolist(),
      ).toEqual([0, 1, 0]);
      expect(lazy([1, 4]).oneHot(3).tolist()).toEqual([
        [0, 1, 0],
        [0, 0, 0],
      ]);
      expect(data(new Embedding(2, 2).call(lazy([2])))).toEqual([0, 0]);
      const logits = Tensor.zeros([2, 3], { device });
      expect(
        data(logits.sparseCategoricalCrossentropy(lazy([0, 3]), { reduction: 'none' })).map(Number.isNaN),
      ).toEqual([false, true]);
      expect(Number.isNaN(logits.sparseCategoricalCrossentropy(lazy([0, 3])).item())).toBe(true);
      expect(Number.isNaN(logits.crossEntropy(lazy([-1, 0])).item())).toBe(true);
      expect(Number.isNaN(logits.nllLoss(lazy([0, 5])).item())).toBe(true);
      close(data(logits.sparseCategoricalCrossentropy(lazy([-100, 1]), { ignoreIndex: -100 })), [
        Math.log(3),
      ]);
    });

    it('a jit checks on the calls that trace; its replays run no JS, and a bad label gives NaN', () => {
      const logits = new Tensor([[1, 2, 3]], { device });
      const step = jit((y: Tensor) => logits.sparseCategoricalCrossentropy(y));
      expect(() => step(I([3]))).toThrow('sparseCategoricalCrossentropy: label 3 at position [0]');
      for (let i = 0; i < 2; i++) close(data(step(I([2]))), [Math.log(1 + Math.exp(-1) + Math.exp(-2))]);
      expect(Number.isNaN(step(I([3])).item())).toBe(true);
    });

    it('CHECK_INDEX=1 realizes a lazy index (a sync) and reports its first bad value', () => {
      const lazy = I([0, 1, 2, 1]).add(1).reshape([2, 2]); // [[1, 2], [3, 2]]
      expect(() => checked(() => x.gather(1, lazy))).toThrow(
        'gather: index 3 at position [1, 0] of the index tensor (2, 2) is out of range for dim 1 of the input (2, 3); valid values are 0..2',
      );
      expect(lazy.uop.op).toBe(Ops.BUFFER);
      const logits = Tensor.zeros([2, 3], { device });
      expect(() => checked(() => logits.crossEntropy(I([0, 1]).mul(3)))).toThrow(
        'crossEntropy: class index 3 at position [1]',
      );
      expect(() => checked(() => new Embedding(3, 2).call(I([1]).neg()))).toThrow(
        'Embedding(3, 2): index -1 at position [0]',
      );
      expect(() => checked(() => Tensor.zeros([3], { device }).set(I([1]).add(2), 1))).toThrow(
        'set: index 3 at position [0]',
      );
      // an index its interval analysis proves in range stays lazy
      const clamped = I([7, -7]).add(0).clamp(0, 2);
      expect(checked(() => x.gather(1, clamped.reshape([1, 2]))).tolist()).toEqual([[2, 0]]);
      expect(clamped.uop.op).not.toBe(Ops.BUFFER);
      // the ignoreIndex passes
      close(
        data(checked(() => logits.sparseCategoricalCrossentropy(I([-100, 1]).add(0), { ignoreIndex: -100 }))),
        [Math.log(3)],
      );
    });
  });

/** torch.gather along dim 1 of a (rows, cols) matrix over plain arrays, or the first bad index. */
function gatherRef(
  xs: number[],
  cols: number,
  index: number[],
  shape: [number, number],
): { out: number[] } | { bad: number; at: number[] } {
  const at = index.findIndex((v) => v < 0 || v >= cols);
  if (at >= 0) return { bad: index[at]!, at: unravel(at, shape) };
  return { out: index.map((v, i) => xs[ravel([unravel(i, shape)[0]!, v], [xs.length / cols, cols])]!) };
}

describe('index checks against a reference (fast-check)', () => {
  for (const device of DEVICES)
    it(`gather on ${device}: random indices (host, or lazy under CHECK_INDEX) gather or name the first bad one`, () => {
      const rows = 3;
      const cols = 4;
      const xs = Array.from({ length: rows * cols }, (_, i) => i * 10);
      const x = new Tensor(xs, { device }).reshape([rows, cols]);
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 3 }),
          fc.array(fc.integer({ min: 0, max: cols - 1 }), { minLength: rows * 3, maxLength: rows * 3 }),
          fc.option(fc.record({ at: fc.nat(rows * 3 - 1), v: fc.integer({ min: -6, max: 7 }) })),
          fc.boolean(),
          (k, vals, change, lazy) => {
            const index = vals.slice(0, rows * k);
            if (change !== null && change.at < index.length) index[change.at] = change.v;
            const shape: [number, number] = [rows, k];
            const want = gatherRef(xs, cols, index, shape);
            const host = new Tensor(index, { device }).reshape(shape);
            const got = () => (lazy ? checked(() => x.gather(1, host.contiguous())) : x.gather(1, host));
            if ('out' in want) expect(data(got())).toEqual(want.out);
            else
              expect(got).toThrow(
                `gather: index ${want.bad} at position [${want.at.join(', ')}] of the index tensor (${rows}, ${k})`,
              );
          },
        ),
        { numRuns: device === 'CPU' ? 25 : 60, seed: 22 },
      );
    });

  it('get: negative values wrap, the rest of [-n, n) selects, others name the first bad one', () => {
    const n = 5;
    const x = new Tensor([10, 11, 12, 13, 14], { device: 'JS' });
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -n, max: n - 1 }), { minLength: 1, maxLength: 6 }),
        fc.option(fc.record({ at: fc.nat(5), v: fc.integer({ min: -8, max: 8 }) })),
        (vals, change) => {
          if (change !== null && change.at < vals.length) vals[change.at] = change.v;
          const at = vals.findIndex((v) => v < -n || v >= n);
          const got = () => x.get(new Tensor(vals, { device: 'JS' }));
          if (at < 0) expect(data(got())).toEqual(vals.map((v) => 10 + ((v + n) % n)));
          else expect(got).toThrow(`get: index ${vals[at]} at position [${at}]`);
        },
      ),
      { numRuns: 60, seed: 4 },
    );
  });
});
