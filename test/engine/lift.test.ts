// Run-time constants: a JS number that changes every step compiles a kernel's program at most twice (baked, then
// lifted), gives the values the baked kernel gives bit for bit, replays in a JIT as before, and caches stay bounded.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DType, dtypes } from '../../src/dtype.ts';
import { programStats } from '../../src/engine/compile.ts';
import { jit } from '../../src/engine/jit.ts';
import { cachedPlans, scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { settle } from '../settle.ts';

const DEVICES = ['JS', 'CPU'];

/** Programs built while fn runs. */
function compilesIn(fn: () => void): number {
  const before = programStats().built;
  fn();
  return programStats().built - before;
}

/** The bytes of a tensor's value, for bit-for-bit comparisons (NaN payloads and -0 included). */
const bytesOf = (t: Tensor) => {
  const d = t.dataSync();
  return [...new Uint8Array(d.buffer, d.byteOffset, d.byteLength)];
};

/** Every constant baked into its kernel: the reference the lifted kernels must match. */
const baked = (fn: () => Tensor) => Context.with({ LIFT: 0 }, () => bytesOf(fn()));

describe('changing JS numbers', () => {
  for (const device of DEVICES) {
    const xs = [1, -2.5, 3.25, 1e-3, 7e8, -0.75, 0, 11].map(Math.fround);
    const x = new Tensor(xs, { device });
    const f32 = (v: number) => Math.fround(v);

    it(`x.mul(i) over 1000 steps compiles at most twice and is right every time on ${device}`, () => {
      const n = compilesIn(() => {
        for (let i = 0; i < 1000; i++) {
          const got = [...x.mul(i).dataSync()];
          expect(got).toEqual(xs.map((v) => f32(v * i)));
        }
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`a constant back at its first value runs the baked program, -0 told from 0, on ${device}`, () => {
      const text = (v: number | bigint) => (Object.is(v, -0) ? '-0' : String(v));
      const n = compilesIn(() => {
        for (const k of [0, 2, 0, -0, 0, 2, -0, 0])
          expect([...x.mul(k).dataSync()].map(text)).toEqual(xs.map((v) => text(f32(v * k))));
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`x.add(i * 0.1) over 1000 steps compiles at most twice on ${device}`, () => {
      const n = compilesIn(() => {
        for (let i = 0; i < 1000; i++) {
          const c = f32(i * 0.1);
          expect([...x.add(i * 0.1).dataSync()]).toEqual(xs.map((v) => f32(v + c)));
        }
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`a where with a changing fill value over 1000 steps compiles at most twice on ${device}`, () => {
      const mask = x.gt(0);
      const n = compilesIn(() => {
        for (let i = 0; i < 1000; i++) {
          const fill = f32(-i / 3);
          expect([...mask.where(x, -i / 3).dataSync()]).toEqual(xs.map((v) => (v > 0 ? v : fill)));
        }
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`an int32 tensor times a changing int over 1000 steps compiles at most twice on ${device}`, () => {
      const ints = [1, -7, 123456, 0, 2147483647, -2147483648];
      const t = new Tensor(ints, { device, dtype: dtypes.int32 });
      const n = compilesIn(() => {
        for (let i = 0; i < 1000; i++) {
          const k = i * 7919 - 3000000;
          expect([...t.mul(k).dataSync()]).toEqual(ints.map((v) => Math.imul(v, k)));
        }
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`a constant that keeps its value stays baked beside one that changes on ${device}`, () => {
      // (x * 3 + i): the 3 never differs, so only i is read at run time; both versions are right
      const n = compilesIn(() => {
        for (let i = 0; i < 50; i++)
          expect([
            ...x
              .mul(3)
              .add(i + 0.5)
              .dataSync(),
          ]).toEqual(xs.map((v) => f32(f32(v * 3) + (i + 0.5))));
      });
      expect(n).toBeLessThanOrEqual(2);
    });

    it(`a value equal to another constant of the graph costs one more compile at most on ${device}`, () => {
      // at i = 0 the broadcast 0 is relu's own: the graph has one constant fewer, a schedule and a program of its own
      const n = compilesIn(() => {
        for (let i = 0; i < 100; i++)
          expect([...x.sub(i).relu().dataSync()]).toEqual(xs.map((v) => Math.max(f32(v - i), 0)));
      });
      expect(n).toBeLessThanOrEqual(3);
    });

    it(`lifted kernels give the baked kernels' bits (div, sub, pow, exp, reduce, int64, float16) on ${device}`, () => {
      const h = x.cast(dtypes.float16);
      const l = new Tensor([3n, -5n, 1n << 40n], { device, dtype: dtypes.int64 });
      const programs: ((c: number) => Tensor)[] = [
        (c) => x.div(c),
        (c) => x.sub(c).abs(),
        (c) => x.abs().pow(c + 0.25), // (an integer exponent multiplies: another graph per exponent)
        (c) => x.mul(c).exp(),
        (c) => x.mul(c).sum(),
        (c) => x.maximum(c).mul(c).sub(x.div(c)),
        (c) => h.mul(c).add(c),
        (c) => l.mul(Math.round(c * 1000)).add(Math.round(c) + 7),
        (c) => x.lt(c).where(x.mul(c), c),
        (c) => x.reshape([2, 4]).mul(c).max(1),
      ];
      const cs = [0.3, 2, -1.7, 0, 1e-3, 3];
      for (const p of programs) {
        const want = cs.map((c) => baked(() => p(c)));
        // the first constant is baked, the others are read at run time: two programs a kernel at most
        const n = compilesIn(() => {
          cs.forEach((c, i) => {
            expect(bytesOf(p(c))).toEqual(want[i]);
          });
        });
        expect(n).toBeLessThanOrEqual(2 * scheduleOf([p(1)]).kernels.length);
      }
    });

    it(`random elementwise chains with changing constants match the baked kernels on ${device}`, () => {
      type Step = { op: 'add' | 'mul' | 'sub' | 'div' | 'max' | 'where'; c: number };
      const run = (steps: Step[], cs: number[]) =>
        steps.reduce((t, s, i) => {
          const c = cs[i]!;
          if (s.op === 'max') return t.maximum(c);
          if (s.op === 'where') return t.lt(c).where(t, -c);
          return t[s.op](c);
        }, x);
      const value = fc.double({ min: -100, max: 100, noNaN: true });
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              op: fc.constantFrom('add', 'mul', 'sub', 'div', 'max', 'where') as fc.Arbitrary<Step['op']>,
              c: value,
            }),
            { minLength: 1, maxLength: 4 },
          ),
          fc.array(value, { minLength: 4, maxLength: 4 }),
          (steps, others) => {
            run(
              steps,
              steps.map((s) => s.c),
            ).realize(); // the first constants: baked
            const cs = steps.map((_, i) => others[i]!); // other constants: lifted
            expect(bytesOf(run(steps, cs))).toEqual(baked(() => run(steps, cs)));
          },
        ),
        { numRuns: device === 'CPU' ? 8 : 25, seed: 22 },
      );
    });

    it(`a kernel reading more changing constants than a CPU call takes arguments runs on ${device}`, () => {
      // 100 constants read at run time travel in one buffer (a CPU kernel call takes at most 64 arguments)
      const sum = (k: number) => {
        let s = x.mul(k);
        for (let i = 1; i < 100; i++) s = s.add(x.mul(i + k));
        return s;
      };
      const n = compilesIn(() => {
        for (const k of [0, 1, 2])
          expect([...sum(k).dataSync()]).toEqual(
            xs.map((v) =>
              Array.from({ length: 99 }, (_, i) => i + 1).reduce(
                (s, i) => f32(s + f32(v * (i + k))),
                f32(v * k),
              ),
            ),
          );
      });
      expect(n).toBeLessThanOrEqual(2 * scheduleOf([sum(0)]).kernels.length);
    });

    it(`kernels of one plan that differ only in their constants share a program on ${device}`, () => {
      // cat joins 256 pieces in 8 groups of 32: 8 kernels alike but for the values they scale by, and the join
      const w = new Tensor([1, 2], { device });
      const pieces = (k: number) => Tensor.cat(Array.from({ length: 256 }, (_, i) => w.mul(i + k)));
      const n = compilesIn(() => {
        for (const k of [0.25, 0.5, 1.5])
          expect([...pieces(k).dataSync()]).toEqual(
            Array.from({ length: 512 }, (_, j) => ((j >> 1) + k) * (1 + (j & 1))),
          );
      });
      expect(scheduleOf([pieces(0.25)]).kernels.length).toBe(9);
      expect(n).toBe(2); // (a program per kernel before)
    });

    it(`a JIT replays captured values as before, with lifted kernels too, on ${device}`, () => {
      for (const warm of [false, true]) {
        if (warm) for (const c of [5, 6]) x.mul(c).add(1).realize(); // the shape is lifted before the capture
        let scale = 2;
        const f = jit((t: Tensor) => t.mul(scale).add(1));
        const results: number[][] = [];
        for (scale = 2; scale < 6; scale++) {
          results.push([...f(x).dataSync()].map(Number));
          x.mul(9).add(1).realize(); // the same plan outside the JIT, with another value, between its calls
        }
        // calls 1 and 2 run f; later calls replay the capture, JS values read at the capture
        expect(results).toEqual([2, 3, 3, 3].map((s) => xs.map((v) => f32(f32(v * s) + 1))));
      }
    });
  }

  it('bounds the program and plan caches (CACHE_ENTRIES) and recompiles what it dropped', () => {
    const x = new Tensor([1, 2, 3], { device: 'JS' });
    Context.with({ CACHE_ENTRIES: 4 }, () => {
      for (let i = 0; i < 40; i++) {
        // a new kernel shape every step: a chain of i+1 additions
        let t = x;
        for (let k = 0; k <= i % 10; k++) t = t.add(k + 1);
        const total = ((i % 10) + 1) * ((i % 10) + 2) * 0.5;
        expect([...t.dataSync()]).toEqual([1, 2, 3].map((v) => v + total));
        expect(cachedPlans()).toBeLessThanOrEqual(4);
        expect(programStats().cached).toBeLessThanOrEqual(4);
      }
    });
  });

  it('CPU programs dropped from every cache unload, load again when needed, and live on in a JIT that holds them', async () => {
    const x = new Tensor([1, 2, 3], { device: 'CPU' });
    const chain = (n: number) => {
      let t = x;
      for (let k = 0; k < n; k++) t = t.mul(k + 2);
      return t;
    };
    const product = (n: number) => Array.from({ length: n }, (_, k) => k + 2).reduce((a, b) => a * b, 1);
    const f = jit((t: Tensor) => t.mul(t).add(0.5));
    for (let i = 0; i < 3; i++) f(x);
    Context.with({ CACHE_ENTRIES: 2 }, () => {
      for (let n = 1; n < 8; n++) chain(n).realize();
    });
    await settle(); // collects what no cache holds: its libraries unload
    Context.with({ CACHE_ENTRIES: 2 }, () => {
      for (let n = 1; n < 8; n++)
        expect([...chain(n).dataSync()]).toEqual([1, 2, 3].map((v) => v * product(n)));
    });
    expect([...f(new Tensor([4, 5, 6], { device: 'CPU' })).dataSync()]).toEqual([16.5, 25.5, 36.5]);
  });
});

describe('which constants lift', () => {
  it('keeps index arithmetic baked: a changing pad value and shifted slices stay right', () => {
    const x = new Tensor([1, 2, 3, 4], { device: 'JS' });
    for (let i = 0; i < 20; i++) {
      const padded = x.pad([[1, 2]], i).mul(i + 1);
      expect([...padded.dataSync()]).toEqual([i, 1, 2, 3, 4, i, i].map((v) => v * (i + 1)));
    }
  });

  it('keeps dtypes: an int8 value read at run time wraps as the baked one does', () => {
    const t = new Tensor([100, -100, 7], { device: 'CPU', dtype: dtypes.int8 as DType });
    for (const k of [3, 5, 120]) expect(bytesOf(t.mul(k).add(k))).toEqual(baked(() => t.mul(k).add(k)));
  });
});

describe('slices of an input', () => {
  for (const device of [...DEVICES, 'SIMT']) {
    it(`a loop over batches of a stored input runs one schedule, compiled once, right at every start, on ${device}`, () => {
      const rows = Array.from({ length: 30 }, (_, i) => i * 0.5 - 3);
      const data = new Tensor(new Float32Array(rows), { device }).reshape([10, 3]);
      const batch = (i: number) =>
        data
          .shrink([
            [i, i + 2],
            [0, 3],
          ])
          .mul(2)
          .sum(1);
      const want = (i: number) =>
        [0, 1].map((r) => 2 * (rows[(i + r) * 3]! + rows[(i + r) * 3 + 1]! + rows[(i + r) * 3 + 2]!));
      expect([...batch(0).dataSync()]).toEqual(want(0));
      const plans = cachedPlans();
      const n = compilesIn(() => {
        for (const i of [2, 4, 8, 1, 0]) expect([...batch(i).dataSync()]).toEqual(want(i));
      });
      expect(n).toBe(0);
      expect(cachedPlans()).toBe(plans);
      // a slice of the slice, and every constant baked, give the same values
      const inner = (i: number) =>
        data
          .shrink([
            [i, i + 4],
            [0, 3],
          ])
          .shrink([
            [1, 3],
            [1, 2],
          ])
          .reshape([2]);
      for (const i of [0, 6]) {
        expect([...inner(i).dataSync()]).toEqual([rows[(i + 1) * 3 + 1], rows[(i + 2) * 3 + 1]]);
        expect(bytesOf(batch(i))).toEqual(baked(() => batch(i)));
      }
    });
  }
});
