// dtypes: names, ranges and kinds, vec/ptr interning, the promotion lattice, exact float16/bfloat16 rounding, truncate, storage.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AddrSpace,
  allocStorage,
  bfloat16Bits,
  bfloat16FromBits,
  type ConstValue,
  type DType,
  dtypeByName,
  dtypeOfArray,
  dtypes,
  float16Bits,
  float16FromBits,
  fromStorage,
  PtrDType,
  promote,
  promoteAll,
  readElement,
  roundBFloat16,
  roundFloat16,
  scalarDTypes,
  storageView,
  sumAccDType,
  toStorage,
  truncate,
  writeElement,
} from '../src/dtype.ts';

const {
  bool,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  index,
} = dtypes;

/** Every scalar dtype that promotes (all but void). */
const promotable = scalarDTypes.filter((d) => d !== dtypes.void);

describe('scalar dtypes', () => {
  const table: [DType, string, number, number, number, 'float' | 'signed' | 'unsigned' | 'bool'][] = [
    [bool, 'bool', 1, 0, 1, 'bool'],
    [int8, 'int8', 1, -128, 127, 'signed'],
    [int16, 'int16', 2, -32768, 32767, 'signed'],
    [int32, 'int32', 4, -2147483648, 2147483647, 'signed'],
    [int64, 'int64', 8, -(2 ** 63), 2 ** 63, 'signed'],
    [uint8, 'uint8', 1, 0, 255, 'unsigned'],
    [uint16, 'uint16', 2, 0, 65535, 'unsigned'],
    [uint32, 'uint32', 4, 0, 4294967295, 'unsigned'],
    [uint64, 'uint64', 8, 0, 2 ** 64, 'unsigned'],
    [float16, 'float16', 2, -Infinity, Infinity, 'float'],
    [bfloat16, 'bfloat16', 2, -Infinity, Infinity, 'float'],
    [float32, 'float32', 4, -Infinity, Infinity, 'float'],
    [float64, 'float64', 8, -Infinity, Infinity, 'float'],
    [index, 'index', 8, -(2 ** 63), 2 ** 63, 'signed'],
  ];
  it.each(table)('%s: name, itemsize, range and kind', (d, name, itemsize, min, max, kind) => {
    expect(d.name).toBe(name);
    expect(String(d)).toBe(name);
    expect(dtypeByName(name)).toBe(d);
    expect(d.itemsize).toBe(itemsize);
    expect(d.count).toBe(1);
    expect(d.base).toBe(d);
    expect(d.min).toBe(min);
    expect(d.max).toBe(max);
    expect(d.isFloat).toBe(kind === 'float');
    expect(d.isUnsigned).toBe(kind === 'unsigned');
    expect(d.isSigned).toBe(kind === 'signed' || kind === 'float');
    expect(d.isInt).toBe(kind === 'signed' || kind === 'unsigned');
    expect(d.isBool).toBe(kind === 'bool');
    expect(d.isVector).toBe(false);
    expect(d.isPtr).toBe(false);
  });

  it('covers every scalar once, plus void', () => {
    expect(new Set(scalarDTypes.map((d) => d.name))).toEqual(new Set([...table.map((r) => r[1]), 'void']));
    expect(dtypes.void.itemsize).toBe(0);
    expect(() => dtypes.void.min).toThrow(/void has no value range/);
  });

  it('rejects an unknown name and lists the valid ones', () => {
    expect(() => dtypeByName('float8')).toThrow(/unknown dtype 'float8'.*float32/);
  });

  it('the 64-bit ranges are the nearest doubles to the true bounds', () => {
    expect(BigInt(int64.min)).toBe(-(2n ** 63n));
    expect(BigInt(uint64.max)).toBe(2n ** 64n); // 2^64-1 rounds up to 2^64
  });
});

describe('vector and pointer dtypes', () => {
  it('vec is interned and knows its element', () => {
    const v = float32.vec(4);
    expect(v).toBe(float32.vec(4));
    expect(v).not.toBe(float32.vec(8));
    expect(v.name).toBe('float32x4');
    expect(v.itemsize).toBe(16);
    expect(v.count).toBe(4);
    expect(v.scalar).toBe(float32);
    expect(v.base).toBe(float32);
    expect(v.isVector).toBe(true);
    expect(v.isFloat).toBe(true);
    expect(v.min).toBe(-Infinity);
    expect(int8.vec(3).max).toBe(127);
    expect(float32.vec(1)).toBe(float32);
    expect(bool.vec(2).name).toBe('boolx2');
  });

  it('vec rejects bad counts, vectors of vectors and void', () => {
    expect(() => float32.vec(0)).toThrow(/positive integer, got 0/);
    expect(() => float32.vec(2.5)).toThrow(/positive integer/);
    expect(() => float32.vec(4).vec(2)).toThrow(/cannot vectorize float32x4/);
    expect(() => dtypes.void.vec(2)).toThrow(/cannot vectorize void/);
  });

  it('ptr is interned per (size, addrspace)', () => {
    const p = float32.ptr();
    expect(p).toBeInstanceOf(PtrDType);
    expect(p).toBe(float32.ptr(-1, AddrSpace.GLOBAL));
    expect(p.name).toBe('float32*');
    expect(p.isPtr).toBe(true);
    expect(p.itemsize).toBe(8);
    expect(p.pointee).toBe(float32);
    expect(p.size).toBe(-1);
    expect(p.addrspace).toBe(AddrSpace.GLOBAL);
    const l = float32.ptr(16, AddrSpace.LOCAL);
    expect(l).toBe(float32.ptr(16, AddrSpace.LOCAL));
    expect(l).not.toBe(float32.ptr(16, AddrSpace.REG));
    expect(l).not.toBe(float32.ptr(16));
    expect(l.name).toBe('float32*[16] local');
    expect(float32.ptr(16, AddrSpace.REG).name).toBe('float32*[16] reg');
    const vp = float32.vec(4).ptr(8);
    expect(vp.pointee).toBe(float32.vec(4));
    expect(vp).toBe(float32.vec(4).ptr(8));
    expect(vp.name).toBe('float32x4*[8]');
  });
});

describe('promotion lattice', () => {
  const cases: [DType, DType, DType][] = [
    // bool < ints < floats
    [bool, int8, int8],
    [bool, uint8, uint8],
    [bool, int32, int32],
    [bool, float16, float16],
    [bool, float64, float64],
    // mixed widths give the wider
    [int8, int16, int16],
    [int8, int64, int64],
    [int16, int32, int32],
    [uint8, uint16, uint16],
    [uint16, uint64, uint64],
    [float16, float32, float32],
    [bfloat16, float64, float64],
    [float32, float64, float64],
    // signed meets unsigned: the next signed type that holds both
    [uint8, int8, int16],
    [uint16, int16, int32],
    [uint32, int32, int64],
    [uint8, int32, int32],
    [uint32, int8, int64],
    // no integer holds a signed one and uint64: the default float (tinygrad's weakfloat, stored)
    [uint64, int64, float32],
    [uint64, int8, float32],
    [uint64, uint32, uint64],
    [uint64, bool, uint64],
    // int + float gives the float, whatever the widths
    [int64, float16, float16],
    [uint64, bfloat16, bfloat16],
    [int8, float32, float32],
    [int32, float64, float64],
    [uint32, float16, float16],
    // the two 16-bit floats meet at float32
    [float16, bfloat16, float32],
    // index absorbs bool and integers and yields to floats
    [index, bool, index],
    [index, int8, index],
    [index, int64, index],
    [index, uint32, index],
    [index, uint64, index],
    [index, float16, float16],
    [index, bfloat16, bfloat16],
    [index, float32, float32],
    [index, float64, float64],
    [index, index, index],
  ];
  it.each(cases)('%s + %s = %s', (a, b, want) => {
    expect(promote(a, b)).toBe(want);
    expect(promote(b, a)).toBe(want);
  });

  it('is idempotent and commutative, and associative but for a signed int, uint64 and a 16-bit float or index (exhaustive)', () => {
    const bad: string[] = [];
    const sints = [int8, int16, int32, int64];
    // the one documented exception: a + b resolves to float32 before a 16-bit float (or index) joins
    const mixed = (ds: DType[]) =>
      ds.some((d) => sints.includes(d)) &&
      ds.includes(uint64) &&
      ds.some((d) => d === float16 || d === bfloat16 || d === index);
    let exempt = 0;
    for (const a of promotable) {
      if (promote(a, a) !== a) bad.push(`${a} + ${a}`);
      for (const b of promotable) {
        const ab = promote(a, b);
        if (ab !== promote(b, a)) bad.push(`${a} + ${b} is not commutative`);
        for (const c of promotable) {
          const l = promote(ab, c);
          const r = promote(a, promote(b, c));
          if (l !== r && mixed([a, b, c])) exempt++;
          else if (l !== r) bad.push(`(${a} + ${b}) + ${c} = ${l} but ${a} + (${b} + ${c}) = ${r}`);
          // promoteAll takes the bound of the set, whatever the order
          if (promoteAll(a, b, c) !== promoteAll(c, a, b) || promoteAll(a, b, c) !== promoteAll(b, c, a))
            bad.push(`promoteAll(${a}, ${b}, ${c}) depends on the order`);
        }
      }
    }
    expect(bad).toEqual([]);
    expect(exempt).toBeGreaterThan(0); // the exception exists: the check above can see it
  });

  // The whole table over the storable dtypes, row + column. `f32*` marks where tinygrad gives its weakfloat
  // (float32 once stored): a signed integer with uint64. Everything else is tinygrad's least_upper_dtype.
  const order = [
    bool,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    float16,
    bfloat16,
    float32,
    float64,
  ];
  const short: Record<string, string> = {
    bool: 'b',
    int8: 'i8',
    int16: 'i16',
    int32: 'i32',
    int64: 'i64',
    uint8: 'u8',
    uint16: 'u16',
    uint32: 'u32',
    uint64: 'u64',
    float16: 'f16',
    bfloat16: 'bf16',
    float32: 'f32',
    float64: 'f64',
  };
  const table = `
         b    i8   i16  i32  i64  u8   u16  u32  u64  f16  bf16 f32  f64
    b    b    i8   i16  i32  i64  u8   u16  u32  u64  f16  bf16 f32  f64
    i8   i8   i8   i16  i32  i64  i16  i32  i64  f32* f16  bf16 f32  f64
    i16  i16  i16  i16  i32  i64  i16  i32  i64  f32* f16  bf16 f32  f64
    i32  i32  i32  i32  i32  i64  i32  i32  i64  f32* f16  bf16 f32  f64
    i64  i64  i64  i64  i64  i64  i64  i64  i64  f32* f16  bf16 f32  f64
    u8   u8   i16  i16  i32  i64  u8   u16  u32  u64  f16  bf16 f32  f64
    u16  u16  i32  i32  i32  i64  u16  u16  u32  u64  f16  bf16 f32  f64
    u32  u32  i64  i64  i64  i64  u32  u32  u32  u64  f16  bf16 f32  f64
    u64  u64  f32* f32* f32* f32* u64  u64  u64  u64  f16  bf16 f32  f64
    f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f32  f64
    bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 f32  bf16 f32  f64
    f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
    f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64`;

  it("pins the whole table over the storable dtypes (tinygrad's, weakfloat stored as float32)", () => {
    const rows = table
      .trim()
      .split('\n')
      .slice(1)
      .map((r) => r.trim().split(/\s+/));
    const got = order.map((a) => [short[a.name], ...order.map((b) => short[promote(a, b).name])]);
    const want = rows.map((r) => r.map((x) => x.replace('*', '')));
    expect(got).toEqual(want);
  });

  it('gives an upper bound: the result is never narrower than an operand of the same family', () => {
    for (const a of promotable)
      for (const b of promotable) {
        const p = promote(a, b);
        // promoting again with either operand changes nothing: p is above both
        expect(promote(p, a)).toBe(p);
        expect(promote(p, b)).toBe(p);
        if (a.isFloat || b.isFloat) expect(p.isFloat).toBe(true);
        if (a.isFloat && b.isFloat)
          expect(p.itemsize).toBeGreaterThanOrEqual(Math.max(a.itemsize, b.itemsize));
      }
  });

  it('promoteAll folds over any number of dtypes', () => {
    expect(promoteAll(bool)).toBe(bool);
    expect(promoteAll(int8, uint8, bool)).toBe(int16);
    expect(promoteAll(int8, uint64, float16)).toBe(float16);
    expect(promoteAll(int8, uint64)).toBe(float32);
    expect(promoteAll(uint64, float16, int64)).toBe(float16); // the set's bound, not pairwise float32
    expect(promoteAll(int64, index, uint64)).toBe(index);
    expect(promoteAll(float16, int32, bfloat16)).toBe(float32);
    expect(() => promoteAll()).toThrow(/at least one/);
  });

  it("sumAccDType: tinygrad's sum_acc_dtype for every dtype", () => {
    const want: [DType, DType][] = [
      [bool, int32],
      [int8, int32],
      [int16, int32],
      [int32, int32],
      [int64, int64],
      [uint8, uint32],
      [uint16, uint32],
      [uint32, uint32],
      [uint64, uint64],
      [float16, float32],
      [bfloat16, float32],
      [float32, float32],
      [float64, float64],
      [index, index],
    ];
    expect(want.map(([d]) => d).sort()).toEqual(promotable.slice().sort());
    for (const [d, acc] of want) expect(sumAccDType(d), d.name).toBe(acc);
  });

  it('rejects void, vectors and pointers, naming both dtypes', () => {
    expect(() => promote(dtypes.void, int8)).toThrow(/no common dtype for void and int8/);
    expect(() => promote(float32.vec(4), float32)).toThrow(/float32x4 and float32.*only scalar/);
    expect(() => promote(float32.ptr(), int32)).toThrow(/float32\* and int32/);
    expect(() => promoteAll(int8, float16, dtypes.void)).toThrow(
      /promoteAll: no common dtype for int8 and float16 and void; only scalar dtypes promote/,
    );
    expect(() => sumAccDType(float32.vec(2))).toThrow(/no common dtype for float32x2 and float32/);
  });
});

// --- exact narrow floats: an independent reference --------------------------------------------------

/** float16 value of a bit pattern, written out from the IEEE 754 binary16 definition. */
function refHalfValue(h: number): number {
  const e = (h >>> 10) & 31;
  const m = h & 1023;
  const mag = e === 0 ? m / 2 ** 24 : e === 31 ? (m ? Number.NaN : Infinity) : (1024 + m) * 2 ** (e - 25);
  return h & 0x8000 ? -mag : mag;
}
const bfView = new DataView(new ArrayBuffer(4));
/** bfloat16 value of a bit pattern: the top half of a float32. */
function refBFloatValue(b: number): number {
  bfView.setUint32(0, b * 65536);
  return bfView.getFloat32(0);
}

/**
 * Round x to the format whose positive finite bit patterns 0..maxFinite increase with their value: find the
 * neighbours by bisection over bit patterns and take the nearer, ties to the even pattern. The pattern
 * after maxFinite (infinity) counts as the next power of two, so the overflow threshold falls out.
 */
function refRoundBits(
  x: number,
  value: (bits: number) => number,
  maxFinite: number,
  infValue: number,
): number {
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  const val = (b: number) => (b > maxFinite ? infValue : value(b));
  if (a >= infValue) return sign | (maxFinite + 1);
  let lo = 0;
  let hi = maxFinite + 1; // val(lo) <= a < val(hi)
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (val(mid) <= a) lo = mid;
    else hi = mid;
  }
  // both differences are exact (Sterbenz), or the comparison is decided by a margin
  const dl = a - val(lo);
  const dh = val(hi) - a;
  const bits = dl < dh ? lo : dh < dl ? hi : lo % 2 === 0 ? lo : hi;
  return sign | bits;
}
const refFloat16Bits = (x: number) => refRoundBits(x, refHalfValue, 0x7bff, 65536);
const refBFloat16Bits = (x: number) => refRoundBits(x, refBFloatValue, 0x7f7f, 2 ** 128);

/** Deterministic xorshift for reproducible random doubles. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}
const f64 = new Float64Array(1);
const u32s = new Uint32Array(f64.buffer);
/** A double with random mantissa bits and an exponent (unbiased) in [emin, emax], of either sign. */
function randomDouble(r: () => number, emin: number, emax: number): number {
  u32s[0] = Math.floor(r() * 2 ** 32);
  const e = emin + Math.floor(r() * (emax - emin + 1));
  u32s[1] = ((r() < 0.5 ? 0x80000000 : 0) | ((e + 1023) << 20) | Math.floor(r() * 2 ** 20)) >>> 0;
  return f64[0]!;
}
/** The next double away from zero / toward zero. */
function nudge(x: number, up: boolean): number {
  f64[0] = x;
  const big = new BigUint64Array(f64.buffer);
  big[0] = up ? big[0]! + 1n : big[0]! - 1n;
  return f64[0]!;
}

/** Edge values for a format with the given value decoder and positive finite patterns 1..maxFinite. */
function edgeValues(value: (b: number) => number, maxFinite: number, infValue: number): number[] {
  const out = [0, -0, Infinity, -Infinity, Number.MIN_VALUE, -Number.MIN_VALUE, 1e300, -1e300];
  const picks = [0, 1, 2, 3, 0x3ff, 0x400, 0x401, 0x3c00, 0x3bff, maxFinite - 1, maxFinite];
  for (let i = 0; i < 64; i++) picks.push(Math.floor((maxFinite * i) / 64));
  for (const b of picks) {
    const v = value(b);
    const next = b + 1 > maxFinite ? infValue : value(b + 1);
    const mid = (v + next) / 2; // exact in double: the formats have far fewer bits
    for (const x of [v, mid, next])
      if (x > 0) out.push(x, -x, nudge(x, true), nudge(x, false), -nudge(x, true), -nudge(x, false));
  }
  return out;
}

describe('float16', () => {
  it('every bit pattern decodes and re-encodes to itself (NaN to the canonical NaN)', () => {
    const bad: number[] = [];
    for (let h = 0; h < 65536; h++) {
      const v = float16FromBits(h);
      const ref = refHalfValue(h);
      const nan = Number.isNaN(ref);
      if (nan ? !Number.isNaN(v) : !Object.is(v, ref)) bad.push(h);
      if (float16Bits(v) !== (nan ? 0x7e00 : h)) bad.push(h);
      if (!nan && !Object.is(roundFloat16(v), v)) bad.push(h);
    }
    expect(bad).toEqual([]);
  });

  it('rounds edge values as the reference does: halfway cases, subnormals, overflow, -0', () => {
    const xs = edgeValues(refHalfValue, 0x7bff, 65536);
    xs.push(
      65504,
      65519.99999,
      65520,
      65536,
      2 ** -24,
      2 ** -25,
      nudge(2 ** -25, true),
      2 ** -14,
      1 / 3,
      0.1,
    );
    const bad = xs.filter((x) => float16Bits(x) !== refFloat16Bits(x));
    expect(bad).toEqual([]);
    for (const x of xs) expect(Object.is(roundFloat16(x), refHalfValue(refFloat16Bits(x)))).toBe(true);
  });

  it('pins the documented thresholds', () => {
    expect(roundFloat16(65519.99999)).toBe(65504);
    expect(roundFloat16(65520)).toBe(Infinity); // the halfway point to 65536 rounds to even: infinity
    expect(roundFloat16(-65520)).toBe(-Infinity);
    expect(roundFloat16(2 ** -25)).toBe(0); // half the smallest subnormal: ties to even (zero)
    expect(roundFloat16(nudge(2 ** -25, true))).toBe(2 ** -24);
    expect(roundFloat16(3 * 2 ** -25)).toBe(2 ** -23); // 1.5 subnormal steps: ties to even (2)
    expect(Object.is(roundFloat16(-1e-10), -0)).toBe(true);
    expect(float16Bits(-0)).toBe(0x8000);
    expect(float16Bits(1)).toBe(0x3c00);
    expect(float16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie: to even
    expect(float16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie: to even (up)
    expect(float16Bits(Number.NaN)).toBe(0x7e00);
    expect(float16Bits(-Infinity)).toBe(0xfc00);
  });

  it('rounds random doubles as the reference does (seeded)', () => {
    const r = rng(0x5eed);
    const bad: number[] = [];
    for (let i = 0; i < 20000; i++) {
      const x = randomDouble(r, -27, 17);
      if (float16Bits(x) !== refFloat16Bits(x)) bad.push(x);
    }
    expect(bad).toEqual([]);
  });

  it('rounds any double as the reference does (fast-check)', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true }), (x) => float16Bits(x) === refFloat16Bits(x)),
      { numRuns: 5000 },
    );
  });
});

describe('bfloat16', () => {
  it('every bit pattern decodes and re-encodes to itself (NaN to the canonical NaN)', () => {
    const bad: number[] = [];
    for (let b = 0; b < 65536; b++) {
      const v = bfloat16FromBits(b);
      const ref = refBFloatValue(b);
      const nan = Number.isNaN(ref);
      if (nan ? !Number.isNaN(v) : !Object.is(v, ref)) bad.push(b);
      if (bfloat16Bits(v) !== (nan ? 0x7fc0 : b)) bad.push(b);
      if (!nan && !Object.is(roundBFloat16(v), v)) bad.push(b);
    }
    expect(bad).toEqual([]);
  });

  it('rounds edge values as the reference does, straight from the double (no double rounding)', () => {
    const xs = edgeValues(refBFloatValue, 0x7f7f, 2 ** 128);
    // 1 + 2^-8 + 2^-30 is above the bfloat16 halfway point 1 + 2^-8, but float32 rounds it onto the
    // halfway point, and ties-to-even from there would give 1: a direct rounding must give 1 + 2^-7
    xs.push(1 + 2 ** -8 + 2 ** -30, (2 - 2 ** -7) * 2 ** 127, (2 - 2 ** -8) * 2 ** 127, 2 ** -133, 2 ** -134);
    const bad = xs.filter((x) => bfloat16Bits(x) !== refBFloat16Bits(x));
    expect(bad).toEqual([]);
    expect(roundBFloat16(1 + 2 ** -8 + 2 ** -30)).toBe(1 + 2 ** -7);
    expect(roundBFloat16(1 + 2 ** -8)).toBe(1);
    expect(bfloat16Bits(Number.NaN)).toBe(0x7fc0);
    expect(bfloat16Bits(-0)).toBe(0x8000);
    expect(roundBFloat16(2 ** 128)).toBe(Infinity);
  });

  it('rounds random doubles as the reference does (seeded)', () => {
    const r = rng(0xbf16);
    const bad: number[] = [];
    for (let i = 0; i < 20000; i++) {
      const x = randomDouble(r, -136, 130);
      if (bfloat16Bits(x) !== refBFloat16Bits(x)) bad.push(x);
    }
    expect(bad).toEqual([]);
  });

  it('rounds any double as the reference does (fast-check)', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true }), (x) => bfloat16Bits(x) === refBFloat16Bits(x)),
      { numRuns: 5000 },
    );
  });
});

describe('truncate', () => {
  it('wraps integers', () => {
    expect(truncate(int8, 130)).toBe(-126);
    expect(truncate(int8, -129)).toBe(127);
    expect(truncate(uint8, 256)).toBe(0);
    expect(truncate(uint8, -1)).toBe(255);
    expect(truncate(int16, 40000)).toBe(-25536);
    expect(truncate(uint16, -1)).toBe(65535);
    expect(truncate(int32, 2 ** 31)).toBe(-(2 ** 31));
    expect(truncate(uint32, -1)).toBe(4294967295);
    expect(truncate(uint32, 2 ** 32 + 7)).toBe(7);
    expect(truncate(int32, 2 ** 53 + 2)).toBe(2);
  });

  it('wraps bigints into narrow integers too, giving numbers', () => {
    expect(truncate(int8, 130n)).toBe(-126);
    expect(truncate(uint8, -1n)).toBe(255);
    expect(truncate(int32, 2n ** 40n + 5n)).toBe(5);
    expect(truncate(uint32, -1n)).toBe(4294967295);
    expect(truncate(int16, 7n)).toBe(7);
  });

  it('keeps 64-bit integers exact: numbers while safe, bigints beyond 2^53', () => {
    expect(truncate(int64, 2n ** 53n + 1n)).toBe(2n ** 53n + 1n);
    expect(truncate(int64, 2 ** 60)).toBe(2n ** 60n);
    expect(truncate(int64, 2 ** 63)).toBe(-(2n ** 63n));
    expect(truncate(int64, 2n ** 64n + 5n)).toBe(5);
    expect(truncate(int64, -5)).toBe(-5);
    expect(truncate(uint64, -1)).toBe(2n ** 64n - 1n);
    expect(truncate(uint64, -1n)).toBe(2n ** 64n - 1n);
    expect(truncate(uint64, 2 ** 64)).toBe(0);
    expect(truncate(index, 2n ** 63n)).toBe(-(2n ** 63n));
    expect(truncate(index, 12)).toBe(12);
  });

  it('truncates non-integers toward zero and normalizes -0', () => {
    expect(truncate(int32, 3.7)).toBe(3);
    expect(truncate(int32, -3.7)).toBe(-3);
    expect(Object.is(truncate(int32, -0.5), 0)).toBe(true);
    expect(Object.is(truncate(int64, -0.5), 0)).toBe(true);
    expect(Object.is(truncate(uint8, -0), 0)).toBe(true);
    expect(truncate(uint8, true)).toBe(1);
  });

  it('rejects NaN and infinities for integers', () => {
    expect(() => truncate(int32, Number.NaN)).toThrow(/cannot store NaN in int32/);
    expect(() => truncate(uint8, Infinity)).toThrow(/cannot store Infinity in uint8/);
  });

  it('makes booleans and rounds floats', () => {
    expect(truncate(bool, 2)).toBe(true);
    expect(truncate(bool, 0)).toBe(false);
    expect(truncate(bool, 0n)).toBe(false);
    expect(truncate(bool, 3n)).toBe(true);
    // nonzero, as C's cast and numpy's astype(bool) make it (the kernels compute it so)
    expect(truncate(bool, Number.NaN)).toBe(true);
    expect(truncate(float32, 0.1)).toBe(Math.fround(0.1));
    expect(truncate(float64, 0.1)).toBe(0.1);
    expect(truncate(float16, 0.1)).toBe(refHalfValue(refFloat16Bits(0.1)));
    expect(truncate(bfloat16, 0.1)).toBe(refBFloatValue(refBFloat16Bits(0.1)));
    expect(truncate(float16, 65520)).toBe(Infinity);
    expect(truncate(float32, 2n ** 70n)).toBe(2 ** 70);
    expect(truncate(float32, true)).toBe(1);
    expect(truncate(float32.vec(4), 0.1)).toBe(Math.fround(0.1));
    expect(() => truncate(dtypes.void, 1)).toThrow(/cannot make a constant of dtype void/);
  });

  it('agrees with TypedArray stores for random integers', () => {
    fc.assert(
      fc.property(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), (x) => {
        expect(truncate(int8, x)).toBe(new Int8Array([x])[0]);
        expect(truncate(uint8, x)).toBe(new Uint8Array([x])[0]);
        expect(truncate(int16, x)).toBe(new Int16Array([x])[0]);
        expect(truncate(uint16, x)).toBe(new Uint16Array([x])[0]);
        expect(truncate(int32, x)).toBe(new Int32Array([x])[0]);
        expect(truncate(uint32, x)).toBe(new Uint32Array([x])[0]);
        expect(truncate(int8, BigInt(x))).toBe(new Int8Array([x])[0]);
        expect(BigInt(truncate(uint64, x))).toBe(new BigUint64Array([BigInt(x)])[0]);
        expect(BigInt(truncate(int64, BigInt(x) * 2n ** 30n))).toBe(
          new BigInt64Array([BigInt(x) * 2n ** 30n])[0],
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('storage', () => {
  const samples: [DType, ConstValue[]][] = [
    [bool, [true, false, 1, 0, 5]],
    [int8, [0, 1, -1, 127, -128, 130, 3.9]],
    [int16, [0, -32768, 32767, 40000]],
    [int32, [0, -(2 ** 31), 2 ** 31 - 1, 2 ** 31, -7]],
    [int64, [0, -1, 2 ** 53 - 1, 2n ** 62n, -(2n ** 63n), 2n ** 63n, 2 ** 60, -3]],
    [uint8, [0, 255, 256, -1]],
    [uint16, [0, 65535, -1]],
    [uint32, [0, 4294967295, -1]],
    [uint64, [0, 2n ** 64n - 1n, -1, 2n ** 63n, 12345]],
    [float16, [0, -0, 1, 0.1, 65504, 65520, -(2 ** -24), 1e-9, Infinity, Number.NaN]],
    [bfloat16, [0, -0, 1, 0.1, 3.4e38, 1e39, 2 ** -133, Infinity, Number.NaN]],
    [float32, [0, -0, 0.1, 1e39, -1e-46, Infinity, Number.NaN]],
    [float64, [0, -0, 0.1, 1e300, Number.MIN_VALUE, -Infinity, Number.NaN]],
  ];
  it.each(samples)('%s: toStorage then fromStorage gives the truncated values', (d, values) => {
    const arr = toStorage(d, values);
    expect(arr.length).toBe(values.length);
    expect(arr.BYTES_PER_ELEMENT).toBe(d.itemsize);
    const back = fromStorage(d, arr);
    back.forEach((v, i) => {
      expect(Object.is(v, truncate(d, values[i]!))).toBe(true);
    });
    // and the decoded values store to the same bits
    expect(toStorage(d, back)).toEqual(arr);
  });

  it('uses the native arrays: BigInt arrays for 64-bit ints, bits in Uint16Array for 16-bit floats', () => {
    expect(allocStorage(int64, 2)).toBeInstanceOf(BigInt64Array);
    expect(allocStorage(uint64, 2)).toBeInstanceOf(BigUint64Array);
    expect(allocStorage(bool, 2)).toBeInstanceOf(Uint8Array);
    expect(allocStorage(float32, 2)).toBeInstanceOf(Float32Array);
    const h = toStorage(float16, [1, -2, 0.1]);
    expect(h).toBeInstanceOf(Uint16Array);
    expect([...h]).toEqual([0x3c00, 0xc000, refFloat16Bits(0.1)]);
    const b = toStorage(bfloat16, [1, -2]);
    expect([...b]).toEqual([0x3f80, 0xc000]);
    expect([...toStorage(bool, [true, false, 2])]).toEqual([1, 0, 1]);
    expect(fromStorage(int64, toStorage(int64, [2n ** 62n]))[0]).toBe(2n ** 62n);
    expect(fromStorage(int64, toStorage(int64, [5n]))[0]).toBe(5);
  });

  it('reads and writes single elements, and views raw bytes little-endian', () => {
    const arr = allocStorage(int32, 3);
    writeElement(int32, arr, 1, 2 ** 32 + 9);
    expect(readElement(int32, arr, 1)).toBe(9);
    const bytes = new Uint8Array([1, 0, 0, 0, 0, 1, 0, 0]);
    const v = storageView(int32, bytes.buffer);
    expect([...v]).toEqual([1, 256]);
    expect([...storageView(int16, bytes.buffer, 4, 1)]).toEqual([0x100]);
    expect(fromStorage(float16, storageView(float16, new Uint8Array([0x00, 0x3c]).buffer))).toEqual([1]);
  });

  it('refuses dtypes without storage, listing the storable ones', () => {
    expect(() => allocStorage(index, 1)).toThrow(/index has no TypedArray storage.*float32/);
    expect(() => allocStorage(float32.vec(4), 1)).toThrow(/float32x4 has no TypedArray storage/);
  });

  it('dtypeOfArray names the dtype a TypedArray holds natively', () => {
    const cases: [ArrayBufferView, DType][] = [
      [new Int8Array(1), int8],
      [new Int16Array(1), int16],
      [new Int32Array(1), int32],
      [new BigInt64Array(1), int64],
      [new Uint8Array(1), uint8],
      [new Uint16Array(1), uint16],
      [new Uint32Array(1), uint32],
      [new BigUint64Array(1), uint64],
      [new Float32Array(1), float32],
      [new Float64Array(1), float64],
    ];
    for (const [arr, d] of cases) expect(dtypeOfArray(arr)).toBe(d);
    expect(() => dtypeOfArray(new DataView(new ArrayBuffer(4)))).toThrow(/no dtype holds a DataView/);
  });
});
