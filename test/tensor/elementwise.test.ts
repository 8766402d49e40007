// The elementwise op family against plain-JS references on JS and CPU, over every dtype and edge value.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import {
  type ConstValue,
  type DType,
  dtypes,
  fromStorage,
  storageView,
  toStorage,
  truncate,
} from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderC } from '../../src/renderer/c.ts';
import { findCompiler, UnitBuilds } from '../../src/runtime/cc.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

const f32 = Math.fround;

/** Deterministic pseudo-random float32 values in [lo, hi). */
function randoms(n: number, lo: number, hi: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return f32(lo + (s / 2 ** 32) * (hi - lo));
  });
}
/** Deterministic pseudo-random integers in [lo, hi]. */
const ints = (n: number, lo: number, hi: number, seed: number) =>
  randoms(n, 0, 1, seed).map((u) => lo + Math.floor(u * (hi - lo + 1)));

/** Values where float ops go wrong: NaN, infinities, signed zeros, halves, tiny, near-overflow and huge. */
const EDGES = [
  NaN,
  Infinity,
  -Infinity,
  0,
  -0,
  0.5,
  -0.5,
  1,
  -1,
  1.5,
  -2.5,
  2.5,
  -3.5,
  1e-7,
  -1e-7,
  0.49999997,
  89,
  -89,
  1e30,
  -1e30,
].map(f32);

/** A check of one op's result: the reference values and how close they must be. */
interface Case {
  name: string;
  got: Tensor;
  want: readonly number[];
  /** Absolute and relative tolerance; absent: exact, with -0 distinct from 0. */
  tol?: readonly [number, number];
}

/** Every result in one kernel: each flattened, cast to `dtype` and padded into its place of one vector. */
function concat(ts: readonly Tensor[], dtype: DType = dtypes.float64): Tensor {
  const total = ts.reduce((n, t) => n + t.numel, 0);
  let out: Tensor | undefined;
  let offset = 0;
  for (const t of ts) {
    const place: [number, number][] = [[offset, total - offset - t.numel]];
    const padded = t.reshape([t.numel]).cast(dtype).pad(place);
    const mask = Tensor.full([t.numel], true, { dtype: dtypes.bool, device: t.device }).pad(place);
    out = out === undefined ? padded : mask.where(padded, out);
    offset += t.numel;
  }
  return out!;
}

function mismatch(g: number, w: number, tol: Case['tol']): boolean {
  if (Number.isNaN(w)) return !Number.isNaN(g);
  if (tol === undefined || !Number.isFinite(w)) return !Object.is(g, w);
  return !(Math.abs(g - w) <= tol[0] + tol[1] * Math.abs(w));
}

/** Runs every case in one kernel and reports each wrong element with its op and input position. */
function check(cases: readonly Case[]): void {
  const got = Array.from(concat(cases.map((c) => c.got)).dataSync() as Float64Array);
  const bad: string[] = [];
  let offset = 0;
  for (const c of cases) {
    expect(c.got.numel, c.name).toBe(c.want.length);
    c.want.forEach((w, i) => {
      const g = got[offset + i]!;
      if (mismatch(g, w, c.tol)) bad.push(`${c.name}[${i}]: got ${Object.is(g, -0) ? '-0' : g}, want ${w}`);
    });
    offset += c.want.length;
  }
  expect(bad).toEqual([]);
}

// --- references (numpy semantics, computed in float64 on the float32 inputs) --------------------------

/** erf by its Maclaurin series (enough below |x| = 4 in float64); beyond, erf is ±1 in float32. */
function erfRef(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (Math.abs(x) >= 4) return Math.sign(x);
  let term = x;
  let sum = x;
  for (let n = 1; n < 80; n++) {
    term *= (-x * x) / n;
    sum += term / (2 * n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}
function roundHalfEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const r = Math.round(x); // ties toward +inf
  const tie = Math.abs(x - Math.trunc(x)) === 0.5;
  const v = tie && r % 2 !== 0 ? r - 1 : r;
  return v === 0 && (x < 0 || Object.is(x, -0)) ? -0 : v;
}
const signRef = (x: number) => (Number.isNaN(x) ? NaN : x > 0 ? 1 : x < 0 ? -1 : 0);
const geluRef = (x: number) =>
  x === -Infinity ? -0 : 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
const siluRef = (x: number) => (x === -Infinity ? -0 : x / (1 + Math.exp(-x)));
const softplusRef = (x: number, beta: number) =>
  (Math.max(beta * x, 0) + Math.log1p(Math.exp(-Math.abs(beta * x)))) / beta;
/** Python's % on floats: the remainder takes the divisor's sign. */
function modRef(a: number, b: number): number {
  const r = a % b;
  return r !== 0 && r < 0 !== b < 0 ? r + b : r;
}
/** C's pow, except that a negative base with a finite non-integer exponent is NaN even at -inf (as numpy). */
function powRef(a: number, b: number): number {
  if (b === 0 || a === 1 || (Math.abs(a) === 1 && !Number.isFinite(b) && !Number.isNaN(b))) return 1;
  if (a < 0 && Number.isFinite(b) && !Number.isInteger(b)) return NaN;
  return a ** b;
}

const R = (abs: number, rel: number) => [abs, rel] as const;

/** Whether the scheduler lowers BITCAST yet (the renderers do); the bitcast test waits for it. */

for (const device of DEVICES)
  describe(`elementwise on ${device}`, () => {
    const F = (xs: readonly number[], dtype: DType = dtypes.float32) =>
      new Tensor(xs as number[], { dtype, device });

    it('unary float ops on a permuted view, with NaN, infinities and signed zeros', () => {
      const base = [...EDGES, ...randoms(28, -4, 4, 1)]; // 48 values, stored as (8, 6)
      const x = F(base).reshape([8, 6]).permute([1, 0]);
      const xs = Array.from({ length: 48 }, (_, k) => base[(k % 8) * 6 + Math.floor(k / 8)]!);
      const unit = [NaN, Infinity, -Infinity, 0, -0, 1, -1, 0.99999994, -0.99999994, 1.0000001, -1.0000001];
      const us = [...unit, ...randoms(13, -1, 1, 2)].map(f32);
      const u = F(us);
      const cases: Case[] = [];
      const add = (
        name: string,
        f: (t: Tensor) => Tensor,
        ref: (v: number) => number,
        tol?: readonly [number, number],
        inputs: [Tensor, number[]] = [x, xs],
      ) => cases.push({ name, got: f(inputs[0]), want: inputs[1].map((v) => f32(ref(v))), tol });
      add(
        'rsqrt',
        (t) => t.rsqrt(),
        (v) => 1 / Math.sqrt(v),
        R(0, 1e-6),
      );
      add('cos', (t) => t.cos(), Math.cos, R(1e-6, 1e-6));
      add('tan', (t) => t.tan(), Math.tan, R(1e-6, 1e-5), [
        x.clamp(-1.5, 1.5),
        xs.map((v) => Math.min(Math.max(v, -1.5), 1.5)),
      ]);
      add('atan', (t) => t.atan(), Math.atan, R(2e-7, 1e-6));
      add('asin', (t) => t.asin(), Math.asin, R(2e-7, 1e-6), [u, us]);
      add('acos', (t) => t.acos(), Math.acos, R(2e-7, 1e-6), [u, us]);
      add('sinh', (t) => t.sinh(), Math.sinh, R(1e-7, 1e-5));
      add('cosh', (t) => t.cosh(), Math.cosh, R(1e-7, 1e-5));
      add('tanh', (t) => t.tanh(), Math.tanh, R(1e-7, 1e-6));
      add('erf', (t) => t.erf(), erfRef, R(1e-7, 1e-6));
      add('gelu', (t) => t.gelu(), geluRef, R(1e-6, 1e-5));
      add('silu', (t) => t.silu(), siluRef, R(1e-6, 1e-5));
      add(
        'softplus',
        (t) => t.softplus(),
        (v) => softplusRef(v, 1),
        R(1e-7, 1e-6),
      );
      add(
        'softplus(2)',
        (t) => t.softplus(2),
        (v) => softplusRef(v, 2),
        R(1e-7, 1e-6),
      );
      add(
        'elu',
        (t) => t.elu(),
        (v) => (v > 0 ? v : Math.expm1(v)),
        R(1e-7, 1e-6),
      );
      add(
        'elu(0.5)',
        (t) => t.elu(0.5),
        (v) => (v > 0 ? v : 0.5 * Math.expm1(v)),
        R(1e-7, 1e-6),
      );
      add(
        'leakyRelu',
        (t) => t.leakyRelu(),
        (v) => (v > 0 ? v : v * 0.01),
        R(0, 1e-6),
      );
      add(
        'leakyRelu(0.2)',
        (t) => t.leakyRelu(0.2),
        (v) => (v > 0 ? v : v * 0.2),
        R(0, 1e-6),
      );
      add('sign', (t) => t.sign(), signRef);
      add('floor', (t) => t.floor(), Math.floor);
      add('ceil', (t) => t.ceil(), Math.ceil);
      add('trunc', (t) => t.trunc(), Math.trunc);
      add('round', (t) => t.round(), roundHalfEven);
      add(
        'isnan',
        (t) => t.isnan(),
        (v) => Number(Number.isNaN(v)),
      );
      add(
        'isinf',
        (t) => t.isinf(),
        (v) => Number(Math.abs(v) === Infinity),
      );
      add(
        'isfinite',
        (t) => t.isfinite(),
        (v) => Number(Number.isFinite(v)),
      );
      add(
        'logicalNot',
        (t) => t.logicalNot(),
        (v) => Number(v === 0),
      );
      add(
        'bitwiseNot(isnan)',
        (t) => t.isnan().bitwiseNot(),
        (v) => Number(!Number.isNaN(v)),
      );
      check(cases);
      const boolOps = new Set(['isnan', 'isinf', 'isfinite', 'logicalNot', 'bitwiseNot(isnan)']);
      for (const c of cases)
        expect(c.got.dtype, c.name).toBe(boolOps.has(c.name) ? dtypes.bool : dtypes.float32);
    });

    it('rounding picks the even neighbour at exact halves, also in float16 and float64', () => {
      const halves = [-4.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 2 ** 23 + 1, -(2 ** 23) - 1];
      const cases: Case[] = [dtypes.float16, dtypes.float64].map((d) => ({
        name: `round ${d.name}`,
        got: F(halves.slice(0, 10), d).round(),
        want: halves.slice(0, 10).map(roundHalfEven),
      }));
      cases.push({
        name: 'round large',
        got: F(halves).round(),
        want: halves.map((v) => roundHalfEven(f32(v))),
      });
      check(cases);
      expect(F([1.5], dtypes.float16).round().dtype).toBe(dtypes.float16);
    });

    it('binary float ops broadcast with another shape and with a scalar', () => {
      // multiples of 1/8 keep every quotient's floor exact, so remainders are exact too
      const as = ints(24, -40, 40, 3).map((k) => k / 8);
      const bs = [-3, -1.25, -0.5, 0.375, 1, 2.5];
      const a = F(as).reshape([4, 6]);
      const b = F(bs);
      const bAt = (i: number) => bs[i % 6]!;
      const cases: Case[] = [
        // tolerance 0: equal values, either sign of zero
        { name: 'mod', got: a.mod(b), want: as.map((v, i) => modRef(v, bAt(i))), tol: R(0, 0) },
        { name: 'fmod', got: a.fmod(b), want: as.map((v, i) => v % bAt(i)), tol: R(0, 0) },
        { name: 'mod scalar', got: a.mod(0.75), want: as.map((v) => modRef(v, 0.75)), tol: R(0, 0) },
        { name: 'fmod scalar', got: a.fmod(-0.75), want: as.map((v) => v % -0.75), tol: R(0, 0) },
        {
          name: 'div floor',
          got: a.div(b, { roundingMode: 'floor' }),
          want: as.map((v, i) => Math.floor(v / bAt(i))),
          tol: R(0, 0),
        },
        {
          name: 'div trunc',
          got: a.div(b, { roundingMode: 'trunc' }),
          want: as.map((v, i) => Math.trunc(v / bAt(i))),
          tol: R(0, 0),
        },
        { name: 'div true', got: a.div(b), want: as.map((v, i) => f32(v / bAt(i))), tol: R(0, 1e-7) },
        {
          name: 'div floor scalar',
          got: a.div(3, { roundingMode: 'floor' }),
          want: as.map((v) => Math.floor(v / 3)),
          tol: R(0, 0),
        },
        {
          name: 'pow',
          got: a.pow(F([-2, -1, 0, 0.5, 2, 3])),
          want: as.map((v, i) => f32(powRef(v, [-2, -1, 0, 0.5, 2, 3][i % 6]!))),
          tol: R(1e-6, 2e-6),
        },
        { name: 'pow 2', got: a.pow(2), want: as.map((v) => f32(v * v)) },
        { name: 'pow 3', got: a.pow(3), want: as.map((v) => f32(v ** 3)) },
        { name: 'pow -2', got: a.pow(-2), want: as.map((v) => f32(v ** -2)), tol: R(0, 2e-7) },
        { name: 'pow 0', got: a.pow(0), want: as.map(() => 1) },
        { name: 'pow 0.5', got: a.pow(0.5), want: as.map((v) => f32(powRef(v, 0.5))), tol: R(0, 2e-7) },
        {
          name: 'clamp',
          got: a.clamp(-2, 1.5),
          want: as.map((v) => Math.min(Math.max(v, -2), 1.5)),
        },
        { name: 'clamp min', got: a.clamp(0), want: as.map((v) => Math.max(v, 0)) },
        { name: 'clamp max', got: a.clamp(undefined, 0), want: as.map((v) => Math.min(v, 0)) },
        {
          name: 'clamp tensors',
          got: a.clamp(b, b.add(1)),
          want: as.map((v, i) => Math.min(Math.max(v, bAt(i)), bAt(i) + 1)),
        },
      ];
      check(cases);
    });

    it('maximum and minimum: NaN in either operand gives NaN, in scalar kernels (7) and vector ones (16)', () => {
      const pairs = [
        [NaN, 2],
        [5, NaN],
        [NaN, NaN],
        [-1, 0],
        [3, -Infinity],
        [-0.5, -0.25],
        [2, 1],
        [0.5, NaN],
        [NaN, -4],
        [-Infinity, Infinity],
        [1, 1],
        [-3, 3],
        [7, -7],
        [NaN, 0],
        [0.25, 0.125],
        [-8, -9],
      ];
      const nan = (a: number, b: number, f: (a: number, b: number) => number) =>
        Number.isNaN(a) || Number.isNaN(b) ? NaN : f(a, b);
      for (const n of [7, 16]) {
        const as = pairs.slice(0, n).map((p) => p[0]!);
        const bs = pairs.slice(0, n).map((p) => p[1]!);
        check([
          {
            name: `maximum ${n}`,
            got: F(as).maximum(F(bs)),
            want: as.map((a, i) => nan(a, bs[i]!, Math.max)),
          },
          {
            name: `minimum ${n}`,
            got: F(as).minimum(F(bs)),
            want: as.map((a, i) => nan(a, bs[i]!, Math.min)),
          },
          { name: `relu ${n}`, got: F(as).relu(), want: as.map((a) => nan(a, 0, Math.max)) },
        ]);
      }
    });

    it('binary float ops at zeros, infinities and NaN, as numpy', () => {
      const pairs: [number, number][] = [
        [3, Infinity],
        [-3, Infinity],
        [3, -Infinity],
        [-0, Infinity],
        [Infinity, 2],
        [-Infinity, 2],
        [NaN, 2],
        [5, NaN],
        [3, 0],
        [-3, 0],
        [0, 0],
        [-0, 3],
        [2.5, -0],
        [7, 0.1],
        [-7, 0.1],
        [1e-8, -1],
      ];
      const as = pairs.map((p) => f32(p[0]));
      const bs = pairs.map((p) => f32(p[1]));
      const a = F(as);
      const b = F(bs);
      // computed where they are exact, remainders are the float32 roundings of the exact values
      check([
        { name: 'mod', got: a.mod(b), want: as.map((v, i) => f32(modRef(v, bs[i]!))), tol: R(0, 0) },
        { name: 'fmod', got: a.fmod(b), want: as.map((v, i) => f32(v % bs[i]!)), tol: R(0, 0) },
        {
          name: 'div floor',
          got: a.div(b, { roundingMode: 'floor' }),
          want: as.map((v, i) => Math.floor(v / bs[i]!)),
        },
        {
          name: 'div trunc',
          got: a.div(b, { roundingMode: 'trunc' }),
          want: as.map((v, i) => Math.trunc(v / bs[i]!)),
        },
      ]);
      const pa = [0, 0, -0, -0, -0, 1, NaN, -1, -1, -8, 2, 0.5, 2, 0, -2, -2, -Infinity, -Infinity, Infinity];
      const pb = [
        0,
        -1,
        -1,
        3,
        0.5,
        NaN,
        0,
        Infinity,
        -Infinity,
        1 / 3,
        Infinity,
        Infinity,
        -Infinity,
        -Infinity,
        3,
        -3,
        3,
        0.5,
        -2,
      ];
      check([
        {
          name: 'pow edges',
          got: F(pa).pow(F(pb)),
          want: pa.map((v, i) => f32(powRef(v, f32(pb[i]!)))),
          tol: R(0, 2e-7),
        },
      ]);
    });

    it('integer ops over int8, uint8, int32, uint32 and int64, on a flipped view, with broadcasting', () => {
      for (const dtype of [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64]) {
        const bits = dtype.itemsize * 8;
        const lo = dtype.isUnsigned ? 0 : -20;
        const wrap = (v: number | bigint) => Number(truncate(dtype, BigInt(v)));
        const as = [dtype.min, dtype.max, -1, 0, 1, ...ints(19, lo, 20, 4)].map((v) => wrap(Math.trunc(v)));
        const a = F([...as].reverse(), dtype).flip(0);
        const bs = [0, 1, -1, 3, -7, 5].map(wrap);
        const b = F(bs, dtype);
        const a2 = a.reshape([4, 6]);
        const bAt = (i: number) => bs[i % 6]!;
        const floorDiv = (x: number, y: number) => (y === 0 ? 0 : wrap(BigInt(Math.floor(x / y))));
        const truncDiv = (x: number, y: number) => (y === 0 ? 0 : wrap(BigInt(Math.trunc(x / y))));
        const mod = (x: number, y: number) => (y === 0 ? 0 : wrap(modRef(x, y)));
        const fmod = (x: number, y: number) => (y === 0 ? 0 : wrap(x % y));
        const bitop = (f: (x: bigint, y: bigint) => bigint) => (x: number, y: number) =>
          wrap(f(BigInt(x), BigInt(y)));
        const shl = (x: number, n: number) => (n < 0 || n >= bits ? 0 : wrap(BigInt(x) << BigInt(n)));
        const shr = (x: number, n: number) =>
          n < 0 || n >= bits ? (x < 0 ? -1 : 0) : wrap(BigInt(x) >> BigInt(n));
        const counts = [0, 1, bits - 1, bits, bits + 3, -1].map(wrap);
        const c = F(counts, dtype);
        const cAt = (i: number) => counts[i % 6]!;
        const pows = [0, 1, 2, 3, 5, -1].map(wrap);
        const powAt = (i: number) => pows[i % 6]!;
        const powInt = (x: number, n: number) => {
          // by repeated squaring, wrapping as it goes (uint32 exponents reach 2^32 - 1)
          if (n >= 0) {
            let [r, sq] = [1n, BigInt(x)];
            for (let k = BigInt(n); k > 0n; k >>= 1n, sq = BigInt.asIntN(64, sq * sq))
              if (k & 1n) r = BigInt.asIntN(64, r * sq);
            return wrap(r);
          }
          return x === 1 ? 1 : x === -1 ? (n % 2 ? -1 : 1) : 0;
        };
        const bin = (
          name: string,
          got: Tensor,
          f: (x: number, y: number) => number,
          at: (i: number) => number,
        ) => ({
          name: `${dtype.name} ${name}`,
          got,
          want: as.map((v, i) => f(v, at(i))),
        });
        const s = (name: string, got: Tensor, f: (x: number) => number) => ({
          name: `${dtype.name} ${name}`,
          got,
          want: as.map(f),
        });
        check([
          bin('div floor', a2.div(b, { roundingMode: 'floor' }), floorDiv, bAt),
          bin('div trunc', a2.div(b, { roundingMode: 'trunc' }), truncDiv, bAt),
          bin('mod', a2.mod(b), mod, bAt),
          bin('fmod', a2.fmod(b), fmod, bAt),
          bin(
            'and',
            a2.bitwiseAnd(b),
            bitop((x, y) => x & y),
            bAt,
          ),
          bin(
            'or',
            a2.bitwiseOr(b),
            bitop((x, y) => x | y),
            bAt,
          ),
          bin(
            'xor',
            a2.bitwiseXor(b),
            bitop((x, y) => x ^ y),
            bAt,
          ),
          bin('lshift', a2.lshift(c), shl, cAt),
          bin('rshift', a2.rshift(c), shr, cAt),
          bin('pow', a2.pow(F(pows, dtype)), powInt, powAt),
          s('mod scalar', a.mod(7), (v) => mod(v, 7)),
          s('div floor scalar', a.div(dtype.isUnsigned ? 3 : -3, { roundingMode: 'floor' }), (v) =>
            floorDiv(v, dtype.isUnsigned ? 3 : -3),
          ),
          s('and scalar', a.bitwiseAnd(6), (v) => wrap(BigInt(v) & 6n)),
          s('lshift scalar', a.lshift(3), (v) => shl(v, 3)),
          s('rshift scalar', a.rshift(2), (v) => shr(v, 2)),
          s('not', a.bitwiseNot(), (v) => wrap(~BigInt(v))),
          s('pow scalar', a.pow(3), (v) => powInt(v, 3)),
          s('pow -1 scalar', a.pow(-1), (v) => powInt(v, -1)),
          s('sign', a.sign(), (v) => Math.sign(v) + 0),
          s('floor', a.floor(), (v) => v),
          s('round', a.round(), (v) => v),
          s('isnan', a.isnan(), () => 0),
          s('isinf', a.isinf(), () => 0),
          s('isfinite', a.isfinite(), () => 1),
          s('logicalNot', a.logicalNot(), (v) => Number(v === 0)),
          s('clamp', a.clamp(2, 9), (v) => Math.min(Math.max(v, 2), 9)),
        ]);
        expect(a2.mod(b).dtype).toBe(dtype);
        expect(a2.div(b, { roundingMode: 'trunc' }).dtype).toBe(dtype);
        expect(a.lshift(1).dtype).toBe(dtype);
      }
    });

    it('int64 and uint64 keep all 64 bits', () => {
      const i64 = (v: bigint) => BigInt(truncate(dtypes.int64, v));
      const as = [1n, -5n, 3n];
      const a = new Tensor(as, { dtype: dtypes.int64, device });
      const m = a.lshift(40).mul(a.lshift(20).add(7));
      const prods = as.map((v) => i64((v << 40n) * ((v << 20n) + 7n)));
      const d = -(2n ** 33n);
      const floorDiv = (x: bigint) => (x % d !== 0n && x < 0n !== d < 0n ? x / d - 1n : x / d);
      const signed = concat(
        [
          a.lshift(62),
          m,
          m.div(Number(d), { roundingMode: 'floor' }),
          m.mod(Number(d)),
          new Tensor([2.5, -3.9, 1e18], { device }).cast(dtypes.int64),
        ],
        dtypes.int64,
      );
      const want = [
        ...as.map((v) => v << 62n),
        ...prods,
        ...prods.map(floorDiv),
        ...prods.map((x) => x - d * floorDiv(x)),
        2n,
        -3n,
        BigInt(f32(1e18)),
      ];
      expect(signed.tolist()).toEqual(want.map((v) => truncate(dtypes.int64, v)));
      const u = new Tensor([1n, 3n], { dtype: dtypes.uint64, device });
      const unsigned = concat([u.lshift(63), u.bitwiseNot().rshift(1), u.sub(2)], dtypes.uint64);
      expect(unsigned.tolist()).toEqual([
        2n ** 63n,
        2n ** 63n,
        2n ** 63n - 1n,
        2n ** 63n - 2n,
        2n ** 64n - 1n,
        1,
      ]);
      expect(a.lshift(61).cast(dtypes.float32).tolist()).toEqual(as.map((v) => f32(Number(i64(v << 61n)))));
    });

    it('bitcast reinterprets the bits of dtypes of one size', () => {
      const cases: [DType, DType, ConstValue[]][] = [
        [dtypes.float32, dtypes.int32, [1, -2.5, 0, -0, Infinity]],
        [dtypes.int32, dtypes.float32, [1065353216, -1069547520]],
        [dtypes.float16, dtypes.uint16, [1, -2.5, 65504]],
        [dtypes.int16, dtypes.bfloat16, [16256, -16352]],
        [dtypes.float64, dtypes.int64, [1, -2.5]],
        [dtypes.uint64, dtypes.int64, [2n ** 64n - 1n, 5n]],
        [dtypes.int8, dtypes.uint8, [-1, 5]],
      ];
      for (const [from, to, xs] of cases) {
        const bits = toStorage(from, xs);
        const want = fromStorage(to, storageView(to, bits.buffer));
        expect(
          new Tensor(xs as number[], { dtype: from, device }).bitcast(to).tolist(),
          `${from.name} as ${to.name}`,
        ).toEqual(want);
      }
    });

    it('bool ops: bitwise, logical and sign', () => {
      const ps = [true, true, false, false];
      const qs = [true, false, true, false];
      const p = new Tensor(ps, { device });
      const q = new Tensor(qs, { device });
      const n = (xs: boolean[]) => xs.map(Number);
      check([
        { name: 'and', got: p.bitwiseAnd(q), want: n(ps.map((v, i) => v && qs[i]!)) },
        { name: 'or', got: p.bitwiseOr(q), want: n(ps.map((v, i) => v || qs[i]!)) },
        { name: 'xor', got: p.bitwiseXor(q), want: n(ps.map((v, i) => v !== qs[i]!)) },
        { name: 'xor scalar', got: p.bitwiseXor(true), want: n(ps.map((v) => !v)) },
        { name: 'not', got: p.bitwiseNot(), want: n(ps.map((v) => !v)) },
        { name: 'logicalNot', got: q.logicalNot(), want: n(qs.map((v) => !v)) },
        { name: 'sign', got: p.sign(), want: n(ps) },
        { name: 'isnan', got: p.isnan(), want: [0, 0, 0, 0] },
      ]);
      expect(p.bitwiseAnd(q).dtype).toBe(dtypes.bool);
      expect(p.div(q, { roundingMode: 'floor' }).dtype).toBe(dtypes.int32);
    });

    it('every dtype round-trips through a kernel and adds', () => {
      const all: [DType, ConstValue[]][] = [
        [dtypes.bool, [true, false, true]],
        [dtypes.int8, [-128, 100, 7]],
        [dtypes.int16, [-32768, 30000, -7]],
        [dtypes.int32, [-(2 ** 31), 2 ** 30 + 5, -7]],
        [dtypes.int64, [-(2n ** 63n), 2n ** 62n + 5n, -7]],
        [dtypes.uint8, [255, 130, 7]],
        [dtypes.uint16, [65535, 40000, 7]],
        [dtypes.uint32, [2 ** 32 - 1, 2 ** 31 + 5, 7]],
        [dtypes.uint64, [2n ** 64n - 1n, 2n ** 63n + 5n, 7]],
        [dtypes.float16, [65504, -0.1, 3.25]],
        [dtypes.bfloat16, [3e38, -0.1, 3.25]],
        [dtypes.float32, [3e38, -0.1, 3.25]],
        [dtypes.float64, [1e300, -0.1, 3.25]],
      ];
      for (const [dtype, xs] of all) {
        const t = new Tensor(xs as number[], { dtype, device });
        const stored = xs.map((v) => truncate(dtype, v));
        // both results in one kernel, written at two places of one buffer
        const both = t
          .flip(0)
          .pad([[0, 3]])
          .add(t.add(t).pad([[3, 0]]));
        const sum = stored.map((v) =>
          dtype === dtypes.bool
            ? Boolean(v)
            : truncate(dtype, dtype.isFloat ? Number(v) * 2 : BigInt(v) * 2n),
        );
        expect(both.dtype).toBe(dtype);
        expect(both.tolist(), dtype.name).toEqual([...[...stored].reverse(), ...sum]);
      }
    });

    it('float16 and bfloat16 round after every op, matching exact references', () => {
      const xs = [0.1, 1 / 3, 2.5, 1000.7, 6e-5, 2e-7].map(f32);
      for (const [dtype, round] of [
        [dtypes.float16, (v: number) => truncate(dtypes.float16, v) as number],
        [dtypes.bfloat16, (v: number) => truncate(dtypes.bfloat16, v) as number],
      ] as const) {
        const stored = xs.map(round);
        const t = new Tensor(xs, { dtype, device });
        check([
          { name: `${dtype.name} sqrt`, got: t.sqrt(), want: stored.map((v) => round(Math.sqrt(v))) },
          {
            name: `${dtype.name} x*3+1`,
            got: t.mul(3).add(1),
            want: stored.map((v) => round(round(v * 3) + 1)),
          },
          { name: `${dtype.name} to float32`, got: t.cast(dtypes.float32), want: stored },
          {
            name: `${dtype.name} from float32`,
            got: t.cast(dtypes.float32).mul(1.001).cast(dtype),
            want: stored.map((v) => round(f32(v * f32(1.001)))),
          },
          {
            name: `${dtype.name} to int32`,
            got: t.mul(10).cast(dtypes.int32),
            want: stored.map((v) => Math.trunc(round(v * 10))),
          },
        ]);
      }
    });

    it('errors name the op, the dtypes and what is valid', () => {
      const x = F([1, 2]);
      expect(() => x.bitwiseAnd(1)).toThrow(/bitwiseAnd: needs integer or bool operands, got float32/);
      expect(() => x.lshift(1)).toThrow(/lshift: needs integer operands, got float32/);
      expect(() => new Tensor([1], { device }).rshift(1.5)).toThrow(
        /rshift: needs integer operands, got float32/,
      );
      expect(() => x.bitwiseNot()).toThrow(/bitwiseNot: needs integer or bool operands, got float32/);
      expect(() => x.bitcast(dtypes.int16)).toThrow(
        /bitcast: cannot reinterpret float32 \(4 bytes\) as int16 \(2 bytes\)/,
      );
      expect(() => x.clamp()).toThrow(/clamp: give min, max or both/);
      expect(() => x.div(2, { roundingMode: 'round' as 'floor' })).toThrow(/div: roundingMode must be/);
      expect(x.bitcast(dtypes.float32)).toBe(x);
    });
  });

describe('generated C', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsgrad-elementwise-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // compiled here rather than through the device, whose disk cache would skip the compiler on a warm run
  it('compiles without warnings under -Wall for every op and dtype', () => {
    const x = new Tensor([1, 2], { device: 'CPU' });
    const f = x.float();
    const graphs = [
      f.rsqrt().add(f.cos()).add(f.tan()).add(f.asin()).add(f.acos()).add(f.atan()).add(f.sinh()),
      f.cosh().add(f.tanh()).add(f.erf()).add(f.gelu()).add(f.silu()).add(f.softplus()).add(f.elu()),
      f.leakyRelu().add(f.sign()).add(f.round()).add(f.ceil()).add(f.mod(f)).add(f.fmod(f)).add(f.pow(f)),
      f.div(f, { roundingMode: 'floor' }).add(f.clamp(0, 1)),
      f.isinf().bitwiseOr(f.isnan()).bitwiseXor(f.isfinite()).logicalNot(),
    ];
    const intTypes = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32];
    for (const d of [...intTypes, dtypes.int64, dtypes.uint64]) {
      const i = x.cast(d);
      graphs.push(
        i.div(i, { roundingMode: 'trunc' }).add(i.mod(i)).add(i.fmod(i)).add(i.pow(i)).add(i.lshift(i)),
        i.rshift(i).bitwiseXor(i.bitwiseNot()).bitwiseAnd(i.sign()).bitwiseOr(i.clamp(0, 3)),
      );
    }
    const b = x.cast(dtypes.bool);
    graphs.push(b.add(b).mul(b).bitwiseXor(b));
    for (const d of [dtypes.float16, dtypes.bfloat16, dtypes.float64]) {
      const t = x.cast(d);
      graphs.push(t.mul(t).add(t.sqrt()).mod(t).cast(dtypes.float32).cast(d));
    }
    // one translation unit of every kernel, as the CPU device batches them (shared definitions are guarded)
    const kernels = graphs.flatMap((g, i) =>
      scheduleOf([g]).kernels.map((k, n) => {
        const name = `k${i}_${n}`;
        return { name, source: renderC(name, lowerKernel(k.ast).linear), symbol: name };
      }),
    );
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const unit = new UnitBuilds(findCompiler(), kernels.length, () => join(dir, 'all.so'), kernels.length);
      for (const k of kernels) unit.add(k);
      expect(unit.finish().map((u) => u.error)).toEqual([undefined]);
      expect(warn.mock.calls).toEqual([]);
    } finally {
      warn.mockRestore();
    }
  }, 30_000);
});
