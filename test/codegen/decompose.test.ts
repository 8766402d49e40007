// Decomposed EXP2, LOG2, SIN, SQRT and POW: errors in ulps over dense sweeps through the real pipeline on the
// JS and CPU devices, special values exact, and the rewrite itself (only lacked ops go, only primitives come).
import { describe, expect, it } from 'vitest';
import { decompose, decompositions } from '../../src/codegen/decompose.ts';
import { lowerKernel } from '../../src/codegen/index.ts';
import { AddrSpace, type DType, dtypes, readElement, storageView, writeElement } from '../../src/dtype.ts';
import { renderC } from '../../src/renderer/c.ts';
import { renderJS } from '../../src/renderer/js.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { ALU, Ops } from '../../src/uop/ops.ts';
import { graphRewrite } from '../../src/uop/pattern.ts';
import { UOp } from '../../src/uop/uop.ts';
import { evaluate } from '../uop/evaluate.ts';

const { float16, float32, float64 } = dtypes;
const LACKS: ReadonlySet<Ops> = new Set([Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW]);
// the spec's primitive elementwise ops
const PRIMITIVES: ReadonlySet<Ops> = new Set([
  ...[Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.CAST, Ops.BITCAST, Ops.IDIV],
  ...[Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.RECIP, Ops.TRUNC],
]);

// --- inputs: deterministic sweeps and the special values ----------------------------------------------------

/** A reproducible uniform [0, 1) sequence (mulberry32). */
function uniform(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const N = 1 << 15;
const linear = (lo: number, hi: number, n = N) =>
  Array.from({ length: n }, (_, i) => lo + ((hi - lo) * i) / (n - 1));
/** 2^u for u uniform in [lo, hi): every magnitude in between. */
function magnitudes(lo: number, hi: number, seed: number, n = N): number[] {
  const r = uniform(seed);
  return Array.from({ length: n }, () => 2 ** (lo + (hi - lo) * r()));
}

const MAX32 = 3.4028234663852886e38;
function specials(d: DType): number[] {
  const [tiny, minNormal, max] =
    d === float64 ? [2 ** -1074, 2 ** -1022, Number.MAX_VALUE] : [2 ** -149, 2 ** -126, MAX32];
  const pos = [0, tiny, 3 * tiny, minNormal * 0.75, minNormal, 0.5, 1, 2, 3, Math.PI, 1e5, max, Infinity];
  return [Number.NaN, ...pos, ...pos.map((x) => -x)];
}

// --- references and ulps -----------------------------------------------------------------------------------

/** C99 pow (Annex F), where Math.pow differs: 1^y = 1 and (-1)^+-inf = 1 even for NaN and infinite y. */
function cPow(a: number, b: number): number {
  if (b === 0 || a === 1 || (a === -1 && Math.abs(b) === Infinity)) return 1;
  return a ** b;
}

interface Case {
  op: Ops;
  ref: (a: number, b: number) => number;
  /** The sweep for a dtype: first operands, and second ones for POW (both get rounded to the dtype). */
  sweep: (d: DType) => [number[], number[]];
  /** The bound asserted, in ulps of the exact result (float64: against V8's Math, itself within 1 ulp). */
  bound: { float32: number; float64: number };
}

const CASES: readonly Case[] = [
  {
    op: Ops.EXP2,
    ref: (a) => 2 ** a,
    sweep: (d) => [d === float64 ? linear(-1080, 1030) : linear(-152, 130), []],
    bound: { float32: 1.25, float64: 1 },
  },
  {
    op: Ops.LOG2,
    ref: Math.log2,
    sweep: (d) => [
      [...magnitudes(d === float64 ? -1074 : -149, d === float64 ? 1024 : 128, 1), ...linear(0.7, 1.5)],
      [],
    ],
    bound: { float32: 0.6, float64: 1 },
  },
  {
    op: Ops.SIN,
    ref: Math.sin,
    // the accurate range (2^16*pi/2 for float32, 2^27*pi/2 for float64), small arguments, and arguments
    // within 1e-3 of multiples of pi/2, where the reduction cancels most digits
    sweep: (d) => {
      const r = uniform(2);
      const near = Array.from(
        { length: N },
        () => Math.round(r() * 65000) * (Math.PI / 2) + (r() - 0.5) * 1e-3,
      );
      const far = d === float64 ? linear(-2e8, 2e8) : [];
      return [[...linear(-1e5, 1e5), ...linear(-10, 10), ...magnitudes(-40, 0, 3), ...near, ...far], []];
    },
    bound: { float32: 1, float64: 1 },
  },
  {
    op: Ops.SQRT,
    ref: Math.sqrt,
    sweep: (d) => [magnitudes(d === float64 ? -1074 : -149, d === float64 ? 1024 : 128, 4), []],
    bound: { float32: 0.50001, float64: 1 },
  },
  {
    op: Ops.POW,
    ref: cPow,
    sweep: () => {
      const r = uniform(5);
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < N; i++) {
        // bases of many magnitudes (some negative, with integer exponents), and bases near 1 with exponents
        // that make |y log2 a| large, where log2 needs its extra precision; results up to over/underflow
        const x = i % 2 ? 2 ** (40 * r() - 20) * (r() < 0.2 ? -1 : 1) : 0.7 + 0.7 * r();
        a.push(x);
        b.push(
          x < 0 ? Math.round(40 * r() - 20) : (280 * r() - 150) / Math.max(0.01, Math.abs(Math.log2(x))),
        );
      }
      return [a, b];
    },
    bound: { float32: 1.75, float64: 2 },
  },
];

const PRECISION = new Map([
  [float16, { p: 11, emin: -14, max: 65504 }],
  [float32, { p: 24, emin: -126, max: MAX32 }],
  [float64, { p: 53, emin: -1022, max: Number.MAX_VALUE }],
]);

function ulpOf(x: number, d: DType): number {
  const { p, emin } = PRECISION.get(d)!;
  const a = Math.abs(x);
  let e = a === 0 ? emin : Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  return 2 ** (Math.max(e, emin) - p + 1);
}

/** The error of `got` in ulps of the exact `ref`; NaN, infinite, overflowing and zero refs must match exactly. */
function ulpError(got: number, ref: number, d: DType): number {
  const { max } = PRECISION.get(d)!;
  if (Number.isNaN(ref)) return Number.isNaN(got) ? 0 : Infinity;
  if (Math.abs(ref) >= max + ulpOf(max, d) / 2) return got === Math.sign(ref) * Infinity ? 0 : Infinity;
  if (ref === 0) return Object.is(got, ref) ? 0 : Infinity;
  return Math.abs(got - ref) / ulpOf(ref, d);
}

/** The worst error over the inputs, and where it happens. */
function worst(c: Case, d: DType, a: readonly number[], b: readonly number[], got: readonly number[]) {
  let w = { err: 0, a: 0, b: 0, got: 0, ref: 0 };
  for (let j = 0; j < a.length; j++) {
    const ref = c.ref(a[j]!, b[j]!);
    const err = ulpError(got[j]!, ref, d);
    if (err > w.err) w = { err, a: a[j]!, b: b[j]!, got: got[j]!, ref };
  }
  return w;
}

// --- the real pipeline: a one-op kernel lowered with the op lacking, rendered, compiled and run ----------------

function kernelOf(op: Ops, d: DType, n: number): UOp {
  const i = UOp.range(n, 0);
  const buf = (slot: number) =>
    UOp.make(Ops.PARAM, [UOp.shapeVec([n])], { slot, dtype: d, addrspace: AddrSpace.GLOBAL });
  const args = (op === Ops.POW ? [1, 2] : [1]).map((s) => UOp.make(Ops.LOAD, [buf(s).index(i)]));
  const store = UOp.make(Ops.STORE, [buf(0).index(i), UOp.make(op, args)]);
  return UOp.sink(UOp.make(Ops.END, [store, i]));
}

/** xs in a dtype's storage (rounded to it). */
function storage(d: DType, xs: readonly number[]) {
  const data = storageView(d, new ArrayBuffer(xs.length * d.itemsize));
  for (const [j, x] of xs.entries()) writeElement(d, data, j, x);
  return data;
}
/** xs rounded to a dtype. */
function round(d: DType, xs: readonly number[]): number[] {
  const data = storage(d, xs);
  return xs.map((_, j) => Number(readElement(d, data, j)));
}

const RENDER = { JS: renderJS, CPU: renderC };
type DeviceName = keyof typeof RENDER;
const DEVICES = Object.keys(RENDER) as DeviceName[];

function run(device: DeviceName, op: Ops, d: DType, inputs: readonly number[][]): number[] {
  const n = inputs[0]!.length;
  const { name, linear } = lowerKernel(kernelOf(op, d, n), { lacks: LACKS });
  const backend = Device.get(device);
  const out = new DeviceBuffer(backend, n, d);
  const ins = inputs.map((xs) => new DeviceBuffer(backend, n, d).copyin(storage(d, xs)));
  backend.compile(name, RENDER[device](name, linear)).run([out, ...ins]);
  const data = out.copyout();
  return Array.from({ length: n }, (_, j) => Number(readElement(d, data, j)));
}

// --- tests -----------------------------------------------------------------------------------------------------

describe('decompose', () => {
  it('leaves a kernel alone when the target lacks none of its ops', () => {
    const k = kernelOf(Ops.SIN, float32, 4);
    expect(decompose(k, new Set())).toBe(k);
    expect(decompose(k, new Set([Ops.EXP2, Ops.THREEFRY]))).toBe(k);
    expect(renderJS('k', lowerKernel(k).linear)).toContain('Math.sin');
    // vectors are devectorized before this pass
    const v = UOp.make(Ops.PARAM, [UOp.shapeVec([])], { slot: 'v', dtype: float32.vec(4) }).alu(Ops.EXP2);
    expect(graphRewrite(v, decompositions(LACKS))).toBe(v);
  });

  it('rewrites only the lacked ops, into primitives only', () => {
    for (const d of [float16, dtypes.bfloat16, float32, float64])
      for (const { op } of CASES) {
        const ops = new Set(
          decompose(kernelOf(op, d, 4), new Set([op]))
            .toposort()
            .map((u) => u.op),
        );
        const notPrimitive = [...ops].filter((o) => (ALU.has(o) || o === Ops.BITCAST) && !PRIMITIVES.has(o));
        expect(
          notPrimitive.map((o) => Ops[o]),
          `${Ops[op]} on ${d.name}`,
        ).toEqual([]);
      }
    const both = UOp.make(Ops.ADD, [UOp.const(float32, 2).alu(Ops.SQRT), UOp.const(float32, 3).alu(Ops.SIN)]);
    const ops = graphRewrite(both, decompositions(new Set([Ops.SIN])))
      .toposort()
      .map((u) => u.op);
    expect([ops.includes(Ops.SQRT), ops.includes(Ops.SIN)]).toEqual([true, false]);
  });

  for (const device of DEVICES)
    for (const d of [float32, float64])
      describe(`${device} ${d.name}`, () => {
        for (const c of CASES) {
          const bound = c.bound[d.name as 'float32' | 'float64'];
          it(`${Ops[c.op]}: within ${bound} ulp over the sweep, special values exact`, () => {
            const [a, b] = c.sweep(d);
            // SIN's specials within its accurate range (past it: the next test)
            const s = specials(d).filter(
              (x) => c.op !== Ops.SIN || !(Math.abs(x) > 1e5 && Number.isFinite(x)),
            );
            // POW: every special value against every one
            const sa = c.op === Ops.POW ? s.flatMap((x) => s.map(() => x)) : s;
            const sb = c.op === Ops.POW ? s.flatMap(() => s) : s.map(() => 0);
            const xa = round(d, [...a, ...sa]);
            const xb = round(d, [...(b.length ? b : a.map(() => 0)), ...sb]);
            const got = run(device, c.op, d, c.op === Ops.POW ? [xa, xb] : [xa]);
            const w = worst(c, d, xa, xb, got);
            expect(w.err, JSON.stringify(w)).toBeLessThanOrEqual(bound);
          });
        }
      });

  it('SIN past its accurate range stays within [-1, 1]; infinities give NaN', () => {
    for (const device of DEVICES)
      for (const d of [float32, float64]) {
        const xs = round(d, [
          ...magnitudes(17, 127, 6, 1000),
          ...magnitudes(17, 127, 7, 1000).map((x) => -x),
        ]);
        const got = run(device, Ops.SIN, d, [[...xs, Infinity, -Infinity]]);
        expect(got.slice(0, -2).every((v) => v >= -1 && v <= 1)).toBe(true);
        expect(got.slice(-2)).toEqual([Number.NaN, Number.NaN]);
      }
  });

  it('float16 computes in float32: within one float16 ulp', () => {
    const r = linear(-10, 10, 4096);
    const inputs = new Map([
      [Ops.EXP2, r],
      [Ops.LOG2, r.map((x) => Math.abs(x) * 1000)],
      [Ops.SIN, r],
      [Ops.SQRT, r.map((x) => Math.abs(x) * 1000)],
      [Ops.POW, magnitudes(-3, 3, 8, 4096)],
    ]);
    for (const device of DEVICES)
      for (const c of CASES) {
        const a = round(float16, inputs.get(c.op)!);
        const b = round(float16, linear(-4, 4, 4096));
        const got = run(device, c.op, float16, c.op === Ops.POW ? [a, b] : [a]);
        expect(worst(c, float16, a, b, got).err, `${device} ${Ops[c.op]}`).toBeLessThanOrEqual(1);
      }
  });

  it('the JS kernel computes what the decomposed ops mean (execAlu), bit for bit', () => {
    for (const d of [float32, float64])
      for (const c of CASES) {
        const s = specials(d);
        const [a, b] = [round(d, s.slice(0, 20)), round(d, s.slice(6, 26))];
        const got = run('JS', c.op, d, c.op === Ops.POW ? [a, b] : [a]);
        const x = UOp.make(Ops.PARAM, [UOp.shapeVec([])], { slot: 'a', dtype: d });
        const y = UOp.make(Ops.PARAM, [UOp.shapeVec([])], { slot: 'b', dtype: d });
        const g = graphRewrite(UOp.make(c.op, c.op === Ops.POW ? [x, y] : [x]), decompositions(LACKS));
        const meant = a.map((av, j) => evaluate(g, { a: av, b: b[j]! }));
        expect(got, Ops[c.op]).toEqual(meant);
      }
  });
});
