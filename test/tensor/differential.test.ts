// Differential test: random small tensor programs give the same result on every backend CI has.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Tensor } from '../../src/tensor/index.ts';

type Step = { op: string; k: number };

const stepArb = fc.record({
  op: fc.constantFrom(
    'add',
    'mul',
    'relu',
    'exp',
    'sum',
    'max',
    'permute',
    'flip',
    'pad',
    'shrink',
    'expand',
    'neg',
    'where',
  ),
  k: fc.integer({ min: 0, max: 7 }),
});

/** Applies steps to x (shape [a, b] or reduced), keeping values in a range where float32 stays exact enough. */
function program(x: Tensor, steps: readonly Step[]): Tensor {
  let t = x;
  for (const { op, k } of steps) {
    const axis = t.ndim ? k % t.ndim : 0;
    switch (op) {
      case 'add':
        t = t.add(t.flip(axis).mul(0.5));
        break;
      case 'mul':
        t = t.mul((k % 3) - 1.5);
        break;
      case 'relu':
        t = t.relu();
        break;
      case 'exp':
        t = t.mul(0.1).exp();
        break;
      case 'sum':
        if (t.ndim > 1) t = t.sum(axis, k % 2 === 0);
        break;
      case 'max':
        if (t.ndim > 1) t = t.sub(t.max(axis, true));
        break;
      case 'permute':
        if (t.ndim > 1) t = t.transpose(0, -1);
        break;
      case 'flip':
        t = t.flip(axis);
        break;
      case 'pad':
        t = t.pad(t.shape.map((_, i) => (i === axis ? [k % 2, 1] : [0, 0])) as [number, number][]);
        break;
      case 'shrink':
        if (t.shape[axis]! > 1)
          t = t.shrink(t.shape.map((d, i) => (i === axis ? [1, d] : [0, d])) as [number, number][]);
        break;
      case 'expand':
        t = t
          .unsqueeze(0)
          .expand([2, ...t.shape])
          .sum(0);
        break;
      case 'neg':
        t = t.neg();
        break;
      default:
        t = t.gt(0).where(t, t.mul(0.25));
    }
  }
  return t;
}

describe('differential: JS, CPU and SIMT agree', () => {
  it('on random programs', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(stepArb, { minLength: 1, maxLength: 6 }),
        (a, b, steps) => {
          const data = Float32Array.from({ length: a * b }, (_, i) => Math.sin(i * 1.7 + a) * 2);
          const run = (device: string) =>
            Array.from(
              program(new Tensor(data, { device }).reshape([a, b]), steps).dataSync() as Float32Array,
            );
          const js = run('JS');
          for (const other of [run('CPU'), run('SIMT')]) {
            expect(other.length).toBe(js.length);
            for (const [i, v] of other.entries())
              expect(Math.abs(v - js[i]!)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(js[i]!)));
          }
        },
      ),
      { numRuns: 25, seed: 42 },
    );
  }, 120_000);
});
