// Memory planning and the schedule cache: intermediates share storage when their lifetimes allow, and a
// structurally identical graph reuses its schedule.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { cachedPlans } from '../../src/engine/realize.ts';
import { planMemory } from '../../src/schedule/memory.ts';
import { Tensor } from '../../src/tensor/index.ts';

const f32 = dtypes.float32;

describe('planMemory', () => {
  it('reuses a slot once its buffer is dead, only for the same size and dtype', () => {
    const { slotOf, slots } = planMemory([
      { size: 16, dtype: f32, first: 0, last: 1, output: false },
      { size: 16, dtype: f32, first: 1, last: 2, output: false }, // overlaps the first at step 1
      { size: 16, dtype: f32, first: 2, last: 3, output: false }, // the first is dead by now
      { size: 8, dtype: f32, first: 3, last: 4, output: false }, // another size
      { size: 16, dtype: dtypes.int32, first: 4, last: 5, output: false }, // another dtype
      { size: 16, dtype: f32, first: 5, last: 6, output: true }, // outputs never share
    ]);
    expect(slotOf[0]).not.toBe(slotOf[1]);
    expect(slotOf[2]).toBe(slotOf[0]);
    expect(new Set(slotOf).size).toBe(slots);
    expect(slots).toBe(5);
  });
});

describe('schedule cache', () => {
  it('a structurally identical graph on other data reuses the schedule and computes its own result', () => {
    const f = (x: Tensor) => x.sub(x.max(1, true)).exp().sum(1);
    const a = new Tensor(
      [
        [1, 2],
        [3, 5],
      ],
      { device: 'JS', dtype: f32 },
    );
    const b = new Tensor(
      [
        [0, 0],
        [1, -1],
      ],
      { device: 'JS', dtype: f32 },
    );
    const ra = f(a).realize();
    const before = cachedPlans();
    const rb = f(b).realize();
    expect(cachedPlans()).toBe(before);
    const near = (got: unknown, want: number[]) => {
      for (const [i, g] of (got as number[]).entries()) expect(g).toBeCloseTo(want[i]!, 5);
    };
    near(ra.tolist(), [1 + Math.exp(-1), 1 + Math.exp(-2)]);
    near(rb.tolist(), [2, 1 + Math.exp(-2)]);
  });
});
