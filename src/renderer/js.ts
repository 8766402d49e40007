// JavaScript for the JS backend: a kernel is the body of a function over TypedArrays. Values are numbers,
// booleans or (64-bit integers) BigInts, wrapped or rounded to their dtype after each op to match C.
import { type ConstValue, type DType, dtypes } from '../dtype.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { type Language, nonNegativeDivision, render } from './render.ts';

const SUPPORTED: ReadonlySet<DType> = new Set([
  dtypes.bool,
  dtypes.int8,
  dtypes.int16,
  dtypes.int32,
  dtypes.int64,
  dtypes.uint8,
  dtypes.uint16,
  dtypes.uint32,
  dtypes.uint64,
  dtypes.float16,
  dtypes.bfloat16,
  dtypes.float32,
  dtypes.float64,
  dtypes.index,
]);

function check(d: DType): DType {
  if (!SUPPORTED.has(d))
    throw new Error(
      `JS: dtype ${d.name} is not supported; supported: ${[...SUPPORTED].map((x) => x.name).join(', ')}`,
    );
  return d;
}

/** 64-bit integers are BigInts in generated code; every other dtype is a number or a boolean. */
const isBig = (d: DType) => d === dtypes.int64 || d === dtypes.uint64;

/** The expression rounded or wrapped to what dtype d holds. */
function wrapTo(d: DType, e: string): string {
  switch (check(d)) {
    case dtypes.float32:
      return `Math.fround(${e})`;
    case dtypes.float16:
      return `tg_rf16(${e})`;
    case dtypes.bfloat16:
      return `tg_rbf16(${e})`;
    case dtypes.int64:
      return `BigInt.asIntN(64,${e})`;
    case dtypes.uint64:
      return `BigInt.asUintN(64,${e})`;
    case dtypes.int32:
      return `(${e}|0)`;
    case dtypes.uint32:
      return `(${e}>>>0)`;
    case dtypes.int16:
      return `(${e}<<16>>16)`;
    case dtypes.int8:
      return `(${e}<<24>>24)`;
    case dtypes.uint16:
      return `(${e}&65535)`;
    case dtypes.uint8:
      return `(${e}&255)`;
    default:
      return e; // float64 and index (exact below 2^53)
  }
}

function literal(v: ConstValue, d: DType): string {
  if (d === dtypes.bool) return v ? 'true' : 'false';
  // negative literals are parenthesized: `-x` after `-` or before `**` is a syntax error
  if (isBig(d)) return BigInt(v) < 0n ? `(${BigInt(v)}n)` : `${BigInt(v)}n`;
  const x = Number(v);
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '(-Infinity)';
  return Object.is(x, -0) ? '(-0)' : x < 0 ? `(${x})` : String(x);
}

/** The zero of a dtype's values, for tests against zero. */
const zero = (d: DType) => (d === dtypes.bool ? 'false' : isBig(d) ? '0n' : '0');

function alu(u: UOp, a: readonly string[]): string {
  const d = check(u.src[u.op === Ops.WHERE ? 1 : 0]!.dtype);
  const out = u.dtype;
  const isBool = d === dtypes.bool;
  const big = isBig(d);
  const floor = (x: string, y: string) => `Math.floor(${x}/${y})`;
  switch (u.op) {
    case Ops.ADD:
      return isBool ? `(${a[0]}||${a[1]})` : wrapTo(d, `(${a[0]}+${a[1]})`);
    case Ops.SUB:
      return wrapTo(d, `(${a[0]}-${a[1]})`);
    case Ops.MUL:
      if (isBool) return `(${a[0]}&&${a[1]})`;
      if (d === dtypes.int32) return `Math.imul(${a[0]},${a[1]})`;
      if (d === dtypes.uint32) return `(Math.imul(${a[0]},${a[1]})>>>0)`;
      return wrapTo(d, `(${a[0]}*${a[1]})`);
    case Ops.NEG:
      return isBool ? `(!${a[0]})` : wrapTo(d, `(-${a[0]})`);
    case Ops.MAX:
      return d.isFloat
        ? `((${a[0]}>${a[1]}||${a[0]}!==${a[0]})?${a[0]}:${a[1]})`
        : `((${a[0]}>${a[1]})?${a[0]}:${a[1]})`;
    case Ops.IDIV:
      // a zero divisor gives 0 (as numpy does): Infinity and NaN wrap to 0, and BigInt needs the check
      if (big) return wrapTo(d, nonNegativeDivision(u) ? `(${a[0]}/${a[1]})` : `tg_idiv64(${a[0]},${a[1]})`);
      if (!d.isFloat && nonNegativeDivision(u)) return wrapTo(d, `Math.trunc(${a[0]}/${a[1]})`);
      return wrapTo(d, floor(a[0]!, a[1]!));
    case Ops.MOD:
      if (big) return wrapTo(d, nonNegativeDivision(u) ? `(${a[0]}%${a[1]})` : `tg_mod64(${a[0]},${a[1]})`);
      if (!d.isFloat && nonNegativeDivision(u)) return wrapTo(d, `(${a[0]}%${a[1]})`);
      return wrapTo(d, `(${a[0]}-${a[1]}*${floor(a[0]!, a[1]!)})`);
    case Ops.CMPLT:
      return `(${a[0]}<${a[1]})`;
    case Ops.CMPNE:
      return `(${a[0]}!==${a[1]})`;
    case Ops.CMPEQ:
      return `(${a[0]}===${a[1]})`;
    case Ops.AND:
      return isBool ? `(${a[0]}&&${a[1]})` : wrapTo(d, `(${a[0]}&${a[1]})`);
    case Ops.OR:
      return isBool ? `(${a[0]}||${a[1]})` : wrapTo(d, `(${a[0]}|${a[1]})`);
    case Ops.XOR:
      return isBool ? `(${a[0]}!==${a[1]})` : wrapTo(d, `(${a[0]}^${a[1]})`);
    case Ops.SHL:
      return wrapTo(d, d === dtypes.index ? `(${a[0]}*2**${a[1]})` : `(${a[0]}<<${a[1]})`);
    case Ops.SHR:
      if (d === dtypes.index) return `Math.floor(${a[0]}/2**${a[1]})`;
      // BigInt has no >>>; a uint64 is never negative, so >> is logical there
      return d.isUnsigned && !big ? wrapTo(d, `(${a[0]}>>>${a[1]})`) : `(${a[0]}>>${a[1]})`;
    case Ops.WHERE:
      return `(${a[0]}?${a[1]}:${a[2]})`;
    case Ops.RECIP:
      return wrapTo(d, `(1/${a[0]})`);
    case Ops.DIV:
      return wrapTo(d, `(${a[0]}/${a[1]})`);
    case Ops.TRUNC:
      return d.isFloat ? wrapTo(d, `Math.trunc(${a[0]})`) : a[0]!;
    case Ops.SQRT:
      return wrapTo(d, `Math.sqrt(${a[0]})`);
    case Ops.EXP2:
      return wrapTo(d, `(2**${a[0]})`);
    case Ops.LOG2:
      return wrapTo(d, `Math.log2(${a[0]})`);
    case Ops.SIN:
      return wrapTo(d, `Math.sin(${a[0]})`);
    case Ops.POW:
      return wrapTo(d, `(${a[0]}**${a[1]})`);
    case Ops.MULACC:
      return wrapTo(d, `(${a[0]}*${a[1]}+${a[2]})`);
    case Ops.CAST:
      return cast(a[0]!, d, check(out));
    case Ops.BITCAST:
      return `(${VIEW_SET.get(d)!(a[0]!)},${VIEW_GET.get(check(out))!})`;
  }
  throw new Error(`JS: no JavaScript for ${opName(u.op)} on ${d.name}`);
}

function cast(x: string, from: DType, to: DType): string {
  if (to === dtypes.bool) return `(${x}!==${zero(from)})`;
  if (isBig(to)) {
    if (from === dtypes.bool) return `(${x}?1n:0n)`;
    // BigInt() throws on NaN and infinities, which C leaves undefined: they become 0
    return wrapTo(to, isBig(from) ? x : from.isFloat ? `tg_bigint(${x})` : `BigInt(${x})`);
  }
  if (isBig(from)) {
    if (to.isFloat) return wrapTo(to, `Number(${x})`);
    return to === dtypes.index ? `Number(${x})` : wrapTo(to, `Number(BigInt.asIntN(32,${x}))`);
  }
  const num = from === dtypes.bool ? `(${x}?1:0)` : x;
  if (to.isFloat) return wrapTo(to, num);
  // float to integer truncates toward zero before wrapping, as C does for values in range
  return wrapTo(to, from.isFloat ? `Math.trunc(${num})` : num);
}

// Bitcasts go through one 8-byte scratch DataView, little-endian as the C backend's hosts are.
const VIEW_SET = new Map<DType, (x: string) => string>([
  [dtypes.int8, (x) => `tg_dv.setInt8(0,${x})`],
  [dtypes.uint8, (x) => `tg_dv.setUint8(0,${x})`],
  [dtypes.int16, (x) => `tg_dv.setInt16(0,${x},true)`],
  [dtypes.uint16, (x) => `tg_dv.setUint16(0,${x},true)`],
  [dtypes.float16, (x) => `tg_dv.setUint16(0,tg_f16bits(${x}),true)`],
  [dtypes.bfloat16, (x) => `tg_dv.setUint16(0,tg_bf16bits(${x}),true)`],
  [dtypes.int32, (x) => `tg_dv.setInt32(0,${x},true)`],
  [dtypes.uint32, (x) => `tg_dv.setUint32(0,${x},true)`],
  [dtypes.float32, (x) => `tg_dv.setFloat32(0,${x},true)`],
  [dtypes.int64, (x) => `tg_dv.setBigInt64(0,${x},true)`],
  [dtypes.uint64, (x) => `tg_dv.setBigUint64(0,${x},true)`],
  [dtypes.float64, (x) => `tg_dv.setFloat64(0,${x},true)`],
]);
const VIEW_GET = new Map<DType, string>([
  [dtypes.int8, 'tg_dv.getInt8(0)'],
  [dtypes.uint8, 'tg_dv.getUint8(0)'],
  [dtypes.int16, 'tg_dv.getInt16(0,true)'],
  [dtypes.uint16, 'tg_dv.getUint16(0,true)'],
  [dtypes.float16, 'tg_f16(tg_dv.getUint16(0,true))'],
  [dtypes.bfloat16, 'tg_bf16(tg_dv.getUint16(0,true))'],
  [dtypes.int32, 'tg_dv.getInt32(0,true)'],
  [dtypes.uint32, 'tg_dv.getUint32(0,true)'],
  [dtypes.float32, 'tg_dv.getFloat32(0,true)'],
  [dtypes.int64, 'tg_dv.getBigInt64(0,true)'],
  [dtypes.uint64, 'tg_dv.getBigUint64(0,true)'],
  [dtypes.float64, 'tg_dv.getFloat64(0,true)'],
]);

// Helpers a kernel may call, as source: the body is compiled on its own, so it cannot import them. A kernel
// gets the ones it names (and the ones those name).
const HELPERS: ReadonlyMap<string, string> = new Map([
  // x rounded to a binary float with `mant` stored mantissa bits, normal exponents from emin, largest finite
  // value max: to nearest, ties to even, straight from the double (no double rounding through float32)
  [
    'tg_round',
    `function tg_round(x, mant, emin, max) {
  if (x !== x || x === 0 || x === Infinity || x === -Infinity) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--; else if (2 ** (e + 1) <= a) e++;
  const ulp = 2 ** (Math.max(e, emin) - mant);
  const q = a / ulp, f = Math.floor(q), d = q - f;
  const r = (d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f) * ulp;
  return (x < 0 ? -1 : 1) * (r > max ? Infinity : r);
}`,
  ],
  ['tg_rf16', 'function tg_rf16(x) { return tg_round(x, 10, -14, 65504); }'],
  ['tg_rbf16', 'function tg_rbf16(x) { return tg_round(x, 7, -126, 3.3895313892515355e38); }'],
  [
    'tg_f16',
    `function tg_f16(h) {
  const e = (h >> 10) & 31, m = h & 1023, s = h & 32768 ? -1 : 1;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1024 + m) * 2 ** (e - 25);
}`,
  ],
  [
    'tg_f16bits',
    `function tg_f16bits(x) {
  if (x !== x) return 0x7e00;
  const r = tg_rf16(x), s = r < 0 || 1 / r < 0 ? 0x8000 : 0, a = Math.abs(r);
  if (a === Infinity) return s | 0x7c00;
  if (a < 2 ** -14) return s | (a * 2 ** 24);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--; else if (2 ** (e + 1) <= a) e++;
  return s | ((e + 15) << 10) | (a * 2 ** (10 - e) - 1024);
}`,
  ],
  ['tg_f32', 'const tg_f32 = new Float32Array(1), tg_u32 = new Uint32Array(tg_f32.buffer);'],
  ['tg_bf16', 'function tg_bf16(b) { tg_u32[0] = b << 16; return tg_f32[0]; }'],
  [
    'tg_bf16bits',
    'function tg_bf16bits(x) { if (x !== x) return 0x7fc0; tg_f32[0] = tg_rbf16(x); return tg_u32[0] >>> 16; }',
  ],
  ['tg_dv', 'const tg_dv = new DataView(new ArrayBuffer(8));'],
  // floor division and remainder of BigInts; a zero divisor gives 0, as in numpy and the C backend
  [
    'tg_idiv64',
    `function tg_idiv64(a, b) {
  if (b === 0n) return 0n;
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
}`,
  ],
  [
    'tg_mod64',
    `function tg_mod64(a, b) {
  if (b === 0n) return 0n;
  const r = a % b;
  return r !== 0n && (r < 0n) !== (b < 0n) ? r + b : r;
}`,
  ],
  ['tg_bigint', 'function tg_bigint(x) { return Number.isFinite(x) ? BigInt(Math.trunc(x)) : 0n; }'],
]);

/** The helper definitions that `code` needs, dependencies first. */
function prelude(code: string): string {
  const needed = new Set<string>();
  const visit = (text: string) => {
    for (const m of text.matchAll(/\btg_\w+/g)) {
      // tg_u32 is defined with tg_f32
      const name = m[0] === 'tg_u32' ? 'tg_f32' : m[0];
      if (needed.has(name) || !HELPERS.has(name)) continue;
      needed.add(name);
      visit(HELPERS.get(name)!);
    }
  };
  visit(code);
  // function declarations hoist, but the scratch constants must come before any use
  return [...HELPERS.keys()]
    .filter((n) => needed.has(n))
    .map((n) => `${HELPERS.get(n)}\n`)
    .join('');
}

const js: Language = {
  name: 'JS',
  kernel: (name, params, body) => {
    const code = body.join('\n');
    return `// ${name}(${params.map((p) => `data${p.slot}: ${p.dtype.name}`).join(', ')})\n"use strict";\n${prelude(code)}${code}\n`;
  },
  constant: literal,
  alu,
  read: (buf, index, d) => {
    const raw = `${buf}[${index}]`;
    if (check(d) === dtypes.bool) return `(${raw}!==0)`;
    if (d === dtypes.float16) return `tg_f16(${raw})`;
    return d === dtypes.bfloat16 ? `tg_bf16(${raw})` : raw;
  },
  write: (buf, index, value, d) => {
    const stored =
      d === dtypes.bool
        ? `(${value}?1:0)`
        : d === dtypes.float16
          ? `tg_f16bits(${value})`
          : d === dtypes.bfloat16
            ? `tg_bf16bits(${value})`
            : value;
    return `${buf}[${index}] = ${stored};`;
  },
  declare: (name, _d, expr, _lanes, mutable) => `${mutable ? 'let' : 'const'} ${name} = ${expr};`,
  assign: (name, expr) => `${name} = ${expr};`,
  loopOpen: (name, bound) => `for (let ${name} = 0; ${name} < ${bound}; ${name}++) {`,
  loopClose: '}',
  when: (gate, statement) => `if (${gate}) ${statement}`,
};

/** A kernel's JS source: the body of a function whose parameters are data0, data1, ... (TypedArrays). */
export function renderJS(name: string, linear: UOp): string {
  return render(js, name, linear);
}
