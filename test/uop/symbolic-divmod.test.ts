// (sum // c1) % c2 simplified in one step (divideThenMod): the unflattened index case, and a property test.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dtypes, Ops, UOp } from '../../src/index.ts';
import { evaluate } from './evaluate.ts';

const size = (u: UOp) => u.toposort().length;

describe('divideThenMod', () => {
  it('((n + m*1024) // 16) % 64 over ranges of 1024 is n // 16', () => {
    const m = UOp.range(1024, 0);
    const n = UOp.range(1024, 1);
    const e = n.add(m.mul(1024)).idiv(16).mod(64);
    expect(e.simplify()).toBe(n.idiv(16));
    // the division alone keeps m (m*64 is a new term): only the remainder that follows removes it
    expect(n.add(m.mul(1024)).idiv(16).simplify().toposort()).toContain(m);
  });

  it('the same over variables, with the term order and a constant', () => {
    const m = UOp.variable('m', 0, 1023);
    const n = UOp.variable('n', 0, 1023);
    expect(m.mul(1024).add(n).idiv(16).mod(64).simplify()).toBe(n.idiv(16));
    // + 32: n//16 + 2 can reach 65, so a remainder stays, but m does not
    const kept = n.add(m.mul(1024)).add(32).idiv(16).mod(64).simplify();
    expect(kept.toposort()).not.toContain(m);
    expect(kept.op).toBe(Ops.MOD);
    // 64 does not divide 1024/16 * 3: m stays
    expect(n.add(m.mul(1024)).idiv(16).mod(48).simplify().toposort()).toContain(m);
  });

  it('drops the remainder when the quotient stays within one period', () => {
    const a = UOp.variable('a', 0, 15);
    const b = UOp.variable('b', 0, 7);
    // (a + 16b) // 16 = b, and b % 8 = b
    expect(a.add(b.mul(16)).idiv(16).mod(8).simplify()).toBe(b);
    // (a + 16b + 128) // 16 = b + 8: one period up, minus 8
    expect(a.add(b.mul(16)).add(128).idiv(16).mod(8).simplify()).toBe(b);
  });
});

describe('property: ((a*k1 + b*k2 + k3) // c1) % c2', () => {
  it('keeps the value on sampled assignments, stays in its bounds and never adds nodes', () => {
    const term = fc.record({
      max: fc.integer({ min: 0, max: 2048 }),
      k: fc.oneof(fc.integer({ min: -8, max: 8 }), fc.constantFrom(16, 64, 256, 1024, -1024)),
    });
    fc.assert(
      fc.property(
        term,
        term,
        fc.integer({ min: -64, max: 64 }),
        fc.constantFrom(1, 2, 3, 4, 8, 16, 24, 64),
        fc.constantFrom(1, 2, 3, 4, 8, 16, 48, 64),
        fc.array(
          fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })),
          {
            minLength: 6,
            maxLength: 6,
          },
        ),
        (ta, tb, k3, c1, c2, samples) => {
          const a = UOp.variable('a', 0, ta.max);
          const b = UOp.variable('b', 0, tb.max);
          const e = a.mul(ta.k).add(b.mul(tb.k)).add(k3).idiv(c1).mod(c2);
          const s = e.simplify();
          expect(size(s)).toBeLessThanOrEqual(size(e));
          const points = [...samples, [0, 0] as const, [1, 1] as const].map(([u, v]) => ({
            a: Math.floor(u * ta.max),
            b: Math.floor(v * tb.max),
          }));
          for (const env of points) {
            const got = Number(evaluate(s, env));
            expect(got, JSON.stringify(env)).toBe(Number(evaluate(e, env)));
            expect(got).toBeGreaterThanOrEqual(s.vmin);
            expect(got).toBeLessThanOrEqual(s.vmax);
          }
        },
      ),
      { numRuns: 600, seed: 20261122 },
    );
  });

  it('int32 sums that can wrap are left alone', () => {
    const v = UOp.variable('v', 0, 2 ** 31 - 1, dtypes.int32);
    const w = UOp.variable('w', 0, 15, dtypes.int32);
    // v*16 wraps, so ((w + v*16) // 16) % 4 is not (v % 4)
    const s = w.add(v.mul(16)).idiv(16).mod(4).simplify();
    for (const env of [
      { v: 2 ** 28, w: 3 },
      { v: 2 ** 27 + 5, w: 15 },
      { v: 12345, w: 7 },
    ])
      expect(evaluate(s, env)).toBe(evaluate(w.add(v.mul(16)).idiv(16).mod(4), env));
  });
});
