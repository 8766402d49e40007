// Decompose what a target lacks: EXP2, LOG2, SIN, SQRT and POW rebuilt from the spec's primitive ops.
//
// The results use ADD, MUL, CMPLT, CMPNE, WHERE, CAST, BITCAST, AND, SHL, SHR, RECIP and TRUNC, in float32
// or float64 (float16 and bfloat16 compute in float32). Errors measured by test/codegen/decompose.test.ts
// over 2^20-point sweeps, float32 in ulps of the exact result, float64 against V8's Math (itself < 1 ulp):
// - exp2 (float32 <= 1.1 ulp, float64 <= 1): x = k + f with |f| <= 1/2, Taylor series of 2^f, times 2^k
//   built from exponent bits in two factors (subnormal results round once; k = 128 does not overflow).
// - log2 (float32 <= 0.51 ulp, float64 <= 1): x = m * 2^e with m in [sqrt(1/2), sqrt(2)) from the bits
//   (subnormals scaled first), log2 m = log2 b + 2/ln2 * atanh((m-b)/(m+b)) with b in {0.75, 1, 1.5}; the
//   quotient, 2/ln2 and the sum are carried in two parts, to about 2^-30 resp. 2^-59 relative, for POW.
// - sin (float32 <= 0.83 ulp, float64 <= 1): Cody-Waite reduction r = x - j*pi/2 with Fast2Sum, exact for
//   |x| < 2^16*pi/2 ~ 1.0e5 (float32) and 2^27*pi/2 ~ 2.1e8 (float64); Taylor series of sin and cos on
//   |r| <= pi/4. Past that range the reduction loses accuracy and results are only kept within [-1, 1].
// - sqrt (float32 <= 0.5 ulp, float64 <= 1): not the spec's EXP2(LOG2(x)/2), which is several ulps off,
//   but 1/sqrt from the bits (Lomont's and Robertson's constants), Newton steps, and a last step on the
//   residual x - s^2 computed exactly: correctly rounded but for rare near-ties.
// - pow (float32 <= 1.7 ulp, float64 <= 2): exp2(y * log2|x|) with the product in two parts; signs and
//   special values as C99 pow (Annex F): pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf)
//   = 1, a negative x takes the sign of an odd integer y and gives NaN for a finite non-integer y.
// Values are split into halves by bit masks, not by Dekker's product trick, so compilers that contract
// a*b+c into FMAs (gcc does by default) only make the results more exact.
import { type DType, dtypes } from '../dtype.ts';
import { execAlu } from '../uop/alu.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

// --- constants to more than double precision, as fixed-point BigInts ----------------------------------

const FRAC = 256n;
/** A decimal as a fixed-point BigInt with FRAC fraction bits (truncated). */
function fixed(decimal: string): bigint {
  const [int, frac = ''] = decimal.split('.');
  return (BigInt(int! + frac) << FRAC) / 10n ** BigInt(frac.length);
}
// pi (OEIS A000796), log2(e) = 1/ln 2 (OEIS A007525) and log2(3) (OEIS A020857)
const PI = fixed('3.14159265358979323846264338327950288419716939937510582097494459230781640628620899');
const LOG2E = fixed('1.44269504088896340735992468100189213742664595415298593413544940693110921918118');
const LOG2_3 = fixed('1.58496250072115618145373894394781650875981440769248106045575265454109822779435856');
const ONE = 1n << FRAC;

/** The nearest double (then rounded again to the dtype that uses it). */
const toDouble = (v: bigint) => Number(v) / 2 ** Number(FRAC);

/**
 * A constant as a sum of pieces: each but the last holds the next `widths[i]` significant bits (truncated),
 * the last is the rest, rounded.
 */
function pieces(v: bigint, widths: readonly number[]): number[] {
  if (v < 0n) return pieces(-v, widths).map((x) => -x);
  const out: number[] = [];
  for (const w of widths) {
    const drop = BigInt(Math.max(0, v.toString(2).length - w));
    const top = (v >> drop) << drop;
    out.push(toDouble(top));
    v -= top;
  }
  out.push(toDouble(v));
  return out;
}

type Pair = readonly [number, number];
/** A constant as hi (its top `bits` significant bits) + lo (the rest, rounded). */
function hiLo(v: bigint, bits: number): Pair {
  const [hi, lo] = pieces(v, [bits]);
  return [hi!, lo!];
}

// --- series coefficients, lowest power first ----------------------------------------------------------

const factorial = (n: number): number => (n <= 1 ? 1 : n * factorial(n - 1));
/** 2^f = sum (f ln2)^n / n!, n = 0..degree. */
export const exp2Series = (degree: number) =>
  Array.from({ length: degree + 1 }, (_, n) => Math.LN2 ** n / factorial(n));
/** sin r = r + r^3 * S(r^2): S's coefficients (-1)^k / (2k+1)!, k = 1..terms. */
const sinSeries = (terms: number) =>
  Array.from({ length: terms }, (_, k) => (-1) ** (k + 1) / factorial(2 * k + 3));
/** cos r = 1 - r^2/2 + r^4 * C(r^2): C's coefficients (-1)^k / (2k)!, k = 2..terms+1. */
const cosSeries = (terms: number) =>
  Array.from({ length: terms }, (_, k) => (-1) ** k / factorial(2 * k + 4));
/** log2 m = 2/ln2 * (s + s^3/3 + s^5/5 + ...): the tail's coefficients 2/ln2 / (2k+1), k = 1..terms. */
const atanhTail = (terms: number) =>
  Array.from({ length: terms }, (_, k) => (2 * toDouble(LOG2E)) / (2 * k + 3));

// --- float formats -------------------------------------------------------------------------------------

interface Format {
  float: DType;
  /** The signed integer of the same width, for the bits. */
  int: DType;
  mantissa: number;
  bias: number;
  /** Significant bits kept by `high`: the product of two such values is exact. */
  half: number;
  exp2: readonly number[];
  /** Coefficients of the atanh series tail in z = s^2. */
  log: readonly number[];
  /** log2(1.5) and log2(0.75), each as hi + lo. */
  logBases: readonly [Pair, Pair];
  sin: readonly number[];
  cos: readonly number[];
  /**
   * pi/2 in Cody-Waite pieces: j times each but the last is exact for the j of the documented range, and
   * so are x - j*C1 - j*C2; the rest is subtracted keeping each rounding error (Fast2Sum).
   */
  halfPi: readonly number[];
  /**
   * 1/sqrt estimated from the bits as MAGIC - (bits >> 1), within 3.5% (C. Lomont, "Fast inverse square
   * root", 2003, for float32; M. Robertson, "A brief history of InvSqrt", 2012, for float64).
   */
  rsqrtMagic: number | bigint;
  newtonSteps: number;
}

// Series lengths leave a truncation error under 1/8 ulp on the reduced ranges: |f| <= 1/2 for exp2,
// |s| <= 0.102 for log2 (under 2^-32 resp. 2^-61 relative, for POW), |r| <= pi/4 for sin and cos.
const FLOAT32: Format = {
  float: dtypes.float32,
  int: dtypes.int32,
  mantissa: 23,
  bias: 127,
  half: 12,
  exp2: exp2Series(7),
  log: atanhTail(4),
  logBases: [hiLo(LOG2_3 - ONE, 24), hiLo(LOG2_3 - 2n * ONE, 24)],
  sin: sinSeries(4),
  cos: cosSeries(4),
  halfPi: pieces(PI >> 1n, [8, 8, 8, 8, 8]),
  rsqrtMagic: 0x5f375a86,
  newtonSteps: 3,
};
const FLOAT64: Format = {
  float: dtypes.float64,
  int: dtypes.int64,
  mantissa: 52,
  bias: 1023,
  half: 26,
  exp2: exp2Series(13),
  log: atanhTail(8),
  logBases: [hiLo(LOG2_3 - ONE, 53), hiLo(LOG2_3 - 2n * ONE, 53)],
  sin: sinSeries(8),
  cos: cosSeries(7),
  halfPi: pieces(PI >> 1n, [26, 26, 26]),
  rsqrtMagic: 0x5fe6eb50c7b537a9n,
  newtonSteps: 4,
};

// --- helpers -------------------------------------------------------------------------------------------

const bits = (F: Format, x: UOp) => x.bitcast(F.int);
const fromBits = (F: Format, i: UOp) => i.bitcast(F.float);
const int = (F: Format, v: number | bigint) => UOp.const(F.int, v);
/** The largest value of the bits' int: every bit but the sign. */
const intMax = (F: Format) => int(F, (1n << BigInt(F.int.itemsize * 8 - 1)) - 1n);
/** |x|, by clearing the sign bit (NaN stays NaN). */
const abs = (F: Format, x: UOp) => fromBits(F, bits(F, x).and(intMax(F)));
/** x with all but its top `half` significant bits cleared (x - high(x) is exact). */
const high = (F: Format, x: UOp) =>
  fromBits(F, bits(F, x).and(int(F, -(2n ** BigInt(F.mantissa + 1 - F.half)))));
/** c0 + x*(c1 + x*(c2 + ...)). */
const horner = (x: UOp, cs: readonly number[]) =>
  cs.slice(0, -1).reduceRight((acc, c) => acc.mul(x).add(c), x.constLike(cs.at(-1)!));
/** x rounded to an integer value (ties either way), as a float. */
const roundInt = (x: UOp) => x.add(x.lt(0).where(x.constLike(-0.5), 0.5)).trunc();
/** 2^k for an int32 k in the normal exponent range. */
const pow2 = (F: Format, k: UOp) => fromBits(F, k.add(F.bias).cast(F.int).shl(F.mantissa));

/** 2^(hi + lo) for non-NaN hi (NaN gives infinity); lo is a small correction to hi, dropped when hi is clamped. */
function exp2Of(F: Format, hi: UOp, lo?: UOp): UOp {
  // beyond these bounds the result is infinite or rounds to zero
  const top = F.bias + 2;
  const bottom = -(F.bias + F.mantissa + 1);
  let h = hi.lt(top).where(hi, top);
  h = h.constLike(bottom).lt(h).where(h, bottom);
  const kf = roundInt(h);
  let f = h.sub(kf); // exact
  if (lo !== undefined) f = f.add(h.ne(hi).where(h.constLike(0), lo));
  const k = kf.cast(dtypes.int32);
  const k1 = k.shr(1);
  return horner(f, F.exp2)
    .mul(pow2(F, k1))
    .mul(pow2(F, k.sub(k1)));
}

/**
 * log2(ax) as hi + lo with |lo| <= ulp(hi), for finite ax > 0 without its sign bit (0, inf and NaN give
 * finite nonsense the caller replaces).
 */
function log2Of(F: Format, ax: UOp): [UOp, UOp] {
  // subnormals scaled to normals
  const scale = F.mantissa + 1;
  const sub = ax.lt(2 ** (1 - F.bias));
  const xs = sub.where(ax.mul(2 ** scale), ax);
  // e = the exponent that brings m into [sqrt(1/2), sqrt(2)): offset the bits by those of sqrt(1/2)
  const ix = bits(F, xs);
  const tmp = ix.sub(int(F, execAlu(Ops.BITCAST, F.float, [Math.SQRT1_2], F.int) as number | bigint));
  const m = fromBits(F, ix.sub(tmp.and(int(F, -(2n ** BigInt(F.mantissa))))));
  const e = tmp
    .shr(F.mantissa)
    .cast(F.float)
    .add(sub.where(ax.constLike(-scale), 0));
  // log2 m = log2 b + 2/ln2 * atanh(s), s = (m-b)/(m+b) with b in {0.75, 1, 1.5}: |s| <= 0.102
  const big = m.constLike(Math.sqrt(1.5)).lt(m);
  const small = m.lt(Math.sqrt(0.75));
  const pick = (above: number, below: number, between: number) =>
    big.where(m.constLike(above), small.where(m.constLike(below), between));
  const b = pick(1.5, 0.75, 1);
  const [[l15hi, l15lo], [l075hi, l075lo]] = F.logBases;
  // s = sh + sl: m-b is exact, m+b = uh + ul exactly, and sh*uh is exact
  const f = m.sub(b);
  const u = m.add(b);
  const uh = high(F, u);
  const ul = m.sub(uh.sub(b));
  const ru = u.recip();
  const sh = high(F, f.mul(ru));
  const sl = f.sub(sh.mul(uh)).sub(sh.mul(ul)).mul(ru);
  const s = sh.add(sl);
  const z = s.mul(s);
  // 2/ln2 * s = kh*sh (exact) + the small rest
  const [kh, kl] = hiLo(LOG2E << 1n, F.half);
  const hi0 = sh.mul(kh);
  const lo0 = sl
    .mul(kh)
    .add(s.mul(kl))
    .add(s.mul(z).mul(horner(z, F.log)));
  // e + log2 b + hi0, keeping the rounding errors (Fast2Sum: |e| >= |log2 b| and |e + log2 b| >= |hi0|
  // unless a sum is exact)
  const lbh = pick(l15hi, l075hi, 0);
  const a = e.add(lbh);
  const hi = a.add(hi0);
  const lo = lbh
    .sub(a.sub(e))
    .add(hi0.sub(hi.sub(a)))
    .add(pick(l15lo, l075lo, 0))
    .add(lo0);
  return [hi, lo];
}

// --- the decompositions ----------------------------------------------------------------------------------

function exp2(F: Format, x: UOp): UOp {
  return x.ne(x).where(x, exp2Of(F, x));
}

function log2(F: Format, x: UOp): UOp {
  const ax = abs(F, x);
  const [hi, lo] = log2Of(F, ax);
  let r = ax.ne(0).where(hi.add(lo), -Infinity);
  r = ax.lt(Infinity).where(r, ax); // +inf, NaN
  return x.lt(0).where(x.constLike(Number.NaN), r);
}

function sin(F: Format, x: UOp): UOp {
  const j = roundInt(x.mul(2 / Math.PI));
  // r = x - j*pi/2 = t + lo: t - q is exact or |t| >= |q|, so (t - (t + q)) + q is its rounding error
  const q = F.halfPi.map((c) => j.mul(-c));
  let t = x.add(q[0]!).add(q[1]!);
  let lo = q.at(-1)!;
  for (const p of q.slice(2, -1)) {
    const next = t.add(p);
    lo = lo.add(t.sub(next).add(p));
    t = next;
  }
  const r = t.add(lo);
  const z = r.mul(r);
  const s = t.add(lo.add(r.mul(z).mul(horner(z, F.sin)))); // r's own rounding left out
  // 1 - z/2 as w plus its exact rounding error, then the small terms; cos(r + d) = cos r - d*r with d
  // the rounding error of r
  const hz = z.mul(0.5);
  const w = z.constLike(1).sub(hz);
  const d = t.sub(r).add(lo);
  const c = w.add(
    z
      .constLike(1)
      .sub(w)
      .sub(hz)
      .add(z.mul(z).mul(horner(z, F.cos)))
      .sub(r.mul(d)),
  );
  // the quadrant j mod 4, from an int32 (j out of its range happens only far past the accurate range)
  const quadrant = j
    .lt(2 ** 30)
    .and(j.constLike(-(2 ** 30)).lt(j))
    .where(j, 0)
    .cast(dtypes.int32);
  let v = quadrant.and(1).ne(0).where(c, s);
  v = quadrant.and(2).ne(0).where(v.neg(), v);
  // keeps NaN (from inf and NaN) and bounds what a reduction past its range gives
  v = v.constLike(1).lt(v).where(1, v);
  v = v.lt(-1).where(v.constLike(-1), v);
  return x.ne(0).where(v, x); // keeps the sign of zero
}

function sqrt(F: Format, x: UOp): UOp {
  // tiny x scaled by an even power of two, so that the residual below stays a normal number
  const p = F.mantissa + 1;
  const scale = 3 * p + ((3 * p) % 2);
  const tiny = x.lt(2 ** (2 * p - F.bias));
  const xs = tiny.where(x.mul(2 ** scale), x);
  let y = fromBits(F, int(F, F.rsqrtMagic).sub(bits(F, xs).and(intMax(F)).shr(1)));
  const hx = xs.mul(0.5);
  for (let i = 0; i < F.newtonSteps; i++) y = y.mul(y.constLike(1.5).sub(hx.mul(y).mul(y)));
  // s = xs*y, corrected by the residual xs - s^2, computed exactly from s = sh + sl
  const s = xs.mul(y);
  const sh = high(F, s);
  const sl = s.sub(sh);
  const d = xs.sub(sh.mul(sh)).sub(sh.mul(sl).mul(2)).sub(sl.mul(sl));
  let r = s.add(d.mul(y.mul(0.5))).mul(tiny.where(x.constLike(2 ** (-scale / 2)), 1));
  r = x.lt(Infinity).where(r, x); // +inf, NaN
  r = x.ne(0).where(r, x); // keeps the sign of zero
  return x.lt(0).where(x.constLike(Number.NaN), r);
}

function pow(F: Format, a: UOp, b: UOp): UOp {
  const ax = abs(F, a);
  const ab = abs(F, b);
  // y * log2|a| = ph + pl, with ph = bh*Lh exact
  const [lh, ll] = log2Of(F, ax);
  const L = lh.add(ll);
  const Lh = high(F, L);
  const Ll = lh.sub(Lh).add(ll);
  const bh = high(F, b);
  const ph = bh.mul(Lh);
  const pl = b.sub(bh).mul(Lh).add(b.mul(Ll));
  // |a| in {0, inf} or |b| = inf: y * log2|a| is +-inf, and its sign alone decides
  const ordinary = ax.constLike(0).lt(ax).and(ax.lt(Infinity)).and(ab.lt(Infinity));
  const up = b.constLike(0).lt(b).ne(ax.lt(1));
  const mag = ordinary.where(exp2Of(F, ph, pl), up.where(b.constLike(Infinity), 0));
  const notInt = b.trunc().ne(b); // NaN is not an integer, inf is (an even one)
  const halfB = b.mul(0.5);
  const oddInt = halfB.trunc().ne(halfB).and(notInt.logicalNot());
  let r = bits(F, a).lt(int(F, 0)).and(oddInt).where(mag.neg(), mag);
  r = a.lt(0).and(ax.lt(Infinity)).and(notInt).where(a.constLike(Number.NaN), r);
  r = a.ne(a).or(b.ne(b)).where(a.constLike(Number.NaN), r);
  const notOne = b
    .ne(0)
    .and(a.ne(1))
    .and(a.ne(-1).or(ab.ne(Infinity)));
  return notOne.where(r, 1);
}

// --- the rule table ---------------------------------------------------------------------------------------

const DECOMPOSITIONS: readonly (readonly [Ops, (F: Format, ...src: UOp[]) => UOp])[] = [
  [Ops.EXP2, exp2],
  [Ops.LOG2, log2],
  [Ops.SIN, sin],
  [Ops.SQRT, sqrt],
  [Ops.POW, pow],
];

const FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64];

/** Runs a decomposition in the node's format; float16 and bfloat16 compute in float32. */
function expand(u: UOp, fn: (F: Format, ...src: UOp[]) => UOp): UOp {
  if (u.dtype === dtypes.float64) return fn(FLOAT64, ...u.src);
  if (u.dtype === dtypes.float32) return fn(FLOAT32, ...u.src);
  return fn(FLOAT32, ...u.src.map((s) => s.cast(dtypes.float32))).cast(u.dtype);
}

/** Rules replacing each op in `lacks` that has a decomposition (on scalar floats) by primitive ops. */
export function decompositions(lacks: ReadonlySet<Ops>): PatternMatcher {
  return new PatternMatcher(
    DECOMPOSITIONS.filter(([op]) => lacks.has(op)).map(
      ([op, fn]) =>
        [
          new UPat({ op, dtype: FLOATS, name: 'u', where: (u) => u.dtype.count === 1 }),
          ({ u }) => expand(u!, fn),
        ] as const,
    ),
  );
}

/** The kernel with every op the target lacks decomposed (unchanged when it lacks none of them). */
export function decompose(ast: UOp, lacks: ReadonlySet<Ops>): UOp {
  if (!DECOMPOSITIONS.some(([op]) => lacks.has(op))) return ast;
  return graphRewrite(ast, decompositions(lacks), { name: 'decompose' });
}
