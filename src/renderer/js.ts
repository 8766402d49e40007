// JavaScript for the JS backend: a kernel is the body of a function over TypedArrays; every value is a JS
// number or boolean, wrapped or rounded to its dtype after each op so results match the C backend.
import { type ConstValue, type DType, dtypes } from '../dtype.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { type Language, nonNegativeDivision, render } from './render.ts';

const SUPPORTED: ReadonlySet<DType> = new Set([
  dtypes.bool,
  dtypes.int8,
  dtypes.int16,
  dtypes.int32,
  dtypes.uint8,
  dtypes.uint16,
  dtypes.uint32,
  dtypes.float32,
  dtypes.float64,
  dtypes.index,
]);

function check(d: DType): DType {
  if (!SUPPORTED.has(d))
    throw new Error(
      `JS: dtype ${d.name} is not supported yet; supported: ${[...SUPPORTED].map((x) => x.name).join(', ')}`,
    );
  return d;
}

/** The expression rounded or wrapped to what dtype d holds. */
function wrapTo(d: DType, e: string): string {
  switch (check(d)) {
    case dtypes.float32:
      return `Math.fround(${e})`;
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
  const x = Number(v);
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  return Object.is(x, -0) ? '-0' : String(x);
}

function alu(u: UOp, a: readonly string[]): string {
  const d = check(u.src[u.op === Ops.WHERE ? 1 : 0]!.dtype);
  const out = u.dtype;
  const isBool = d === dtypes.bool;
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
      if (!d.isFloat && nonNegativeDivision(u)) return wrapTo(d, `Math.trunc(${a[0]}/${a[1]})`);
      return wrapTo(d, floor(a[0]!, a[1]!));
    case Ops.MOD:
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
      return d.isUnsigned ? wrapTo(d, `(${a[0]}>>>${a[1]})`) : `(${a[0]}>>${a[1]})`;
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
  }
  throw new Error(`JS: no JavaScript for ${opName(u.op)} on ${d.name}`);
}

function cast(x: string, from: DType, to: DType): string {
  if (to === dtypes.bool) return `(${x}!==${from === dtypes.bool ? 'false' : '0'})`;
  const num = from === dtypes.bool ? `(${x}?1:0)` : x;
  if (to.isFloat) return wrapTo(to, num);
  // float to integer truncates toward zero before wrapping, as C does for values in range
  return wrapTo(to, from.isFloat ? `Math.trunc(${num})` : num);
}

const js: Language = {
  name: 'JS',
  kernel: (name, params, body) =>
    `// ${name}(${params.map((p) => `data${p.slot}: ${p.dtype.name}`).join(', ')})\n"use strict";\n${body.join('\n')}\n`,
  constant: literal,
  alu,
  read: (slot, index, d) =>
    check(d) === dtypes.bool ? `(data${slot}[${index}]!==0)` : `data${slot}[${index}]`,
  write: (slot, index, value, d) =>
    `data${slot}[${index}] = ${d === dtypes.bool ? `(${value}?1:0)` : value};`,
  declare: (name, _d, expr) => `const ${name} = ${expr};`,
  variable: (name) => `let ${name};`,
  assign: (name, expr) => `${name} = ${expr};`,
  loopOpen: (name, bound) => `for (let ${name} = 0; ${name} < ${bound}; ${name}++) {`,
  loopClose: '}',
  when: (gate, statement) => `if (${gate}) ${statement}`,
};

/** A kernel's JS source: the body of a function whose parameters are data0, data1, ... (TypedArrays). */
export function renderJS(name: string, linear: UOp): string {
  return render(js, name, linear);
}
