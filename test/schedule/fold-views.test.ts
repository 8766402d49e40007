// Fold views (src/schedule/fold-views.ts): runs of movement ops fold into one or two ops without changing a
// value (random chains against the same chain made contiguous after every step), and chains of 100,000 views
// (reshapes, pads and shrinks, flips and permutes) realize in one small kernel.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scheduleOf } from '../../src/engine/realize.ts';
import { foldViews } from '../../src/schedule/fold-views.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { GroupOp } from '../../src/uop/ops.ts';
import { useDefaultDevice } from '../default-device.ts';

const N = 100_000;
const TIMEOUT = 120_000;

const movementOps = (t: Tensor) =>
  foldViews(t.uop)
    .toposort()
    .filter((u) => GroupOp.Movement.has(u.op)).length;

/** One movement op on x, chosen by the numbers in `pick`, valid for x's shape. */
type Step = { op: number; a: number; b: number; c: number };
function move(x: Tensor, { op, a, b, c }: Step): Tensor {
  const s = x.shape;
  const axis = s.length ? a % s.length : 0;
  switch (op) {
    case 0:
      return x.reshape(b % 2 ? [x.numel] : [...s].reverse());
    case 1:
      return x.permute(s.map((_, i) => (i + a) % s.length));
    case 2:
      return x.flip(axis);
    case 3:
      return x.pad(s.map((_, i) => (i === axis ? [b % 3, c % 3] : [0, 0])));
    case 4: {
      const d = s[axis]!;
      const start = b % (d + 1);
      return x.shrink(s.map((n, i) => (i === axis ? [start, start + (c % (d - start + 1))] : [0, n])));
    }
    default:
      return x.numel > 200 ? x : x.unsqueeze(0).expand([2, ...s]);
  }
}

const step = fc.record({ op: fc.nat(5), a: fc.nat(7), b: fc.nat(7), c: fc.nat(7) });

describe.each(['JS', 'CPU'])('%s: folded views keep their values', (device) => {
  useDefaultDevice(device);

  it('random chains of reshape, permute, flip, pad, shrink and expand', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 10 }), (steps) => {
        const x = Tensor.arange(6).reshape([2, 3]).add(1).contiguous().realize();
        let folded = x;
        let stepwise = x;
        for (const s of steps) {
          folded = move(folded, s);
          stepwise = move(stepwise, s).contiguous();
        }
        expect(folded.add(0).tolist()).toEqual(stepwise.tolist());
      }),
      { numRuns: device === 'JS' ? 60 : 5 },
    );
  });
});

describe('JS: chains of 100,000 views', () => {
  useDefaultDevice('JS');

  it('fold into a permute and a flip, or into nothing', () => {
    let x = Tensor.arange(24).reshape([2, 3, 4]).contiguous().realize();
    for (let i = 0; i < 1000; i++)
      x = i % 3 === 0 ? x.permute([2, 0, 1]) : i % 3 === 1 ? x.flip(1) : x.flip([0, 2]);
    expect(movementOps(x)).toBeLessThanOrEqual(3); // the realized buffer's own reshape, a permute, a flip
    const base = Tensor.arange(6).contiguous().realize();
    let y = base;
    for (let i = 0; i < 1000; i++) y = i % 2 ? y.shrink([[1, 7]]) : y.pad([[1, 1]]);
    expect(movementOps(y)).toBe(movementOps(base)); // pad and shrink cancel
  });

  it(
    '100,000 reshapes, of a realized and of a lazy tensor',
    () => {
      const shapes = [[6], [2, 3], [3, 2]];
      let x = Tensor.arange(6).contiguous().realize();
      let lazy = Tensor.arange(6).float();
      for (let i = 0; i < N; i++) {
        x = x.reshape(shapes[i % 3]!);
        lazy = lazy.reshape(shapes[i % 3]!);
      }
      const y = x.add(1);
      expect(scheduleOf([y]).kernels.length).toBe(1);
      // the last of them (i = 99,999) is to (6)
      expect(y.tolist()).toEqual([1, 2, 3, 4, 5, 6]);
      expect(lazy.mul(2).tolist()).toEqual([0, 2, 4, 6, 8, 10]);
    },
    TIMEOUT,
  );

  it(
    '100,000 alternating pads and shrinks that shift the values',
    () => {
      let x = Tensor.arange(4).add(1).contiguous().realize();
      // pad, keep the left four (shift right), pad, keep the right four (shift left)
      for (let i = 0; i < N; i++)
        x = i % 2 === 0 ? x.pad([[1, 1]]) : x.shrink([i % 4 === 1 ? [0, 4] : [2, 6]]);
      expect(x.add(0).tolist()).toEqual([1, 2, 3, 0]);
    },
    TIMEOUT,
  );

  it(
    '100,000 flips and permutes',
    () => {
      let x = Tensor.arange(6).reshape([2, 3]).contiguous().realize();
      for (let i = 0; i < N; i++) x = i % 2 ? x.permute([1, 0]) : x.flip(0);
      const y = x.add(0);
      expect(scheduleOf([y]).kernels.length).toBe(1);
      // 25,000 rounds of flip(0), T, flip(0), T: a half turn each, an even number of them
      expect(y.tolist()).toEqual([
        [0, 1, 2],
        [3, 4, 5],
      ]);
    },
    TIMEOUT,
  );
});
