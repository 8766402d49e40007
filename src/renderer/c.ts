// C for the CPU backend: one function per kernel, compiled by the system compiler.
import { type DType, dtypes } from '../dtype.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { type Language, maxIndex, nonNegativeDivision, render } from './render.ts';

const C_TYPES = new Map<DType, string>([
  [dtypes.bool, '_Bool'],
  [dtypes.int8, 'signed char'],
  [dtypes.int16, 'short'],
  [dtypes.int32, 'int'],
  [dtypes.int64, 'long long'],
  [dtypes.uint8, 'unsigned char'],
  [dtypes.uint16, 'unsigned short'],
  [dtypes.uint32, 'unsigned int'],
  [dtypes.uint64, 'unsigned long long'],
  [dtypes.float16, '_Float16'],
  [dtypes.float32, 'float'],
  [dtypes.float64, 'double'],
]);

/** float functions take an f suffix, double ones none; _Float16 computes through float. */
const mathSuffix = (d: DType) => (d === dtypes.float64 ? '' : 'f');

function floatLiteral(v: number, d: DType): string {
  if (Number.isNaN(v)) return 'NAN';
  if (v === Infinity) return 'INFINITY';
  if (v === -Infinity) return '-INFINITY';
  const text = Object.is(v, -0) ? '-0.0' : Number.isInteger(v) ? `${v}.0` : String(v);
  return d === dtypes.float64 ? text : `${text}f`;
}

function cLanguage(indexType: string): Language {
  const type = (d: DType): string => {
    if (d === dtypes.index) return indexType;
    const t = C_TYPES.get(d);
    if (t === undefined)
      throw new Error(
        `CPU: dtype ${d.name} is not supported; supported: ${[...C_TYPES.keys()].map((x) => x.name).join(', ')}`,
      );
    return t;
  };
  const fn = (name: string, d: DType) => `${name}${mathSuffix(d)}`;
  // the floor helpers come in int and long long; narrower integers promote to int
  const wide = (d: DType) => (type(d).includes('long long') ? 'll' : 'int');
  const alu = (u: UOp, a: readonly string[]): string => {
    const d = u.src[0]!.dtype;
    switch (u.op) {
      case Ops.ADD:
        return `(${a[0]}+${a[1]})`;
      case Ops.SUB:
        return `(${a[0]}-${a[1]})`;
      case Ops.MUL:
        return `(${a[0]}*${a[1]})`;
      case Ops.DIV:
        return `(${a[0]}/${a[1]})`;
      case Ops.NEG:
        return `(-${a[0]})`;
      case Ops.MAX:
        // NaN in either operand gives NaN, as numpy's maximum does
        return d.isFloat
          ? `((${a[0]}>${a[1]}||${a[0]}!=${a[0]})?${a[0]}:${a[1]})`
          : `((${a[0]}>${a[1]})?${a[0]}:${a[1]})`;
      case Ops.IDIV:
        if (d.isFloat) return `${fn('floor', d)}(${a[0]}/${a[1]})`;
        return nonNegativeDivision(u) ? `(${a[0]}/${a[1]})` : `tg_floordiv_${wide(d)}(${a[0]}, ${a[1]})`;
      case Ops.MOD:
        if (d.isFloat) return `(${a[0]}-${a[1]}*${fn('floor', d)}(${a[0]}/${a[1]}))`;
        return nonNegativeDivision(u) ? `(${a[0]}%${a[1]})` : `tg_floormod_${wide(d)}(${a[0]}, ${a[1]})`;
      case Ops.CMPLT:
        return `(${a[0]}<${a[1]})`;
      case Ops.CMPNE:
        return `(${a[0]}!=${a[1]})`;
      case Ops.CMPEQ:
        return `(${a[0]}==${a[1]})`;
      case Ops.AND:
        return `(${a[0]}&${a[1]})`;
      case Ops.OR:
        return `(${a[0]}|${a[1]})`;
      case Ops.XOR:
        return `(${a[0]}^${a[1]})`;
      case Ops.SHL:
        return `(${a[0]}<<${a[1]})`;
      case Ops.SHR:
        return `(${a[0]}>>${a[1]})`;
      case Ops.WHERE:
        return `(${a[0]}?${a[1]}:${a[2]})`;
      case Ops.RECIP:
        return `(${floatLiteral(1, d)}/${a[0]})`;
      case Ops.TRUNC:
        return d.isFloat ? `${fn('trunc', d)}(${a[0]})` : a[0]!;
      case Ops.SQRT:
        return `${fn('sqrt', d)}(${a[0]})`;
      case Ops.EXP2:
        return `${fn('exp2', d)}(${a[0]})`;
      case Ops.LOG2:
        return `${fn('log2', d)}(${a[0]})`;
      case Ops.SIN:
        return `${fn('sin', d)}(${a[0]})`;
      case Ops.POW:
        return `${fn('pow', d)}(${a[0]}, ${a[1]})`;
      case Ops.MULACC:
        return `(${a[0]}*${a[1]}+${a[2]})`;
      case Ops.CAST:
        return `((${type(u.dtype)})${a[0]})`;
      case Ops.BITCAST:
        return `__extension__({ ${type(u.dtype)} t_; __builtin_memcpy(&t_, &${a[0]}, sizeof t_); t_; })`;
    }
    throw new Error(`CPU: no C for ${opName(u.op)}`);
  };
  return {
    name: 'C',
    kernel: (name, params, body) => {
      const args = params.map((p) => `${p.written ? '' : 'const '}${type(p.dtype)}* restrict data${p.slot}`);
      return `${PRELUDE}\nvoid ${name}(${args.join(', ')}) {\n${body.join('\n')}\n}\n`;
    },
    constant: (v, d) => {
      if (d.isFloat) return floatLiteral(Number(v), d);
      if (d === dtypes.bool) return v ? '1' : '0';
      if (d === dtypes.uint64) return `${v}ull`;
      if (d === dtypes.int64 || (d === dtypes.index && indexType !== 'int')) return `${v}ll`;
      if (d === dtypes.uint32) return `${v}u`;
      return String(v);
    },
    alu,
    read: (slot, index) => `data${slot}[${index}]`,
    write: (slot, index, value) => `data${slot}[${index}] = ${value};`,
    declare: (name, d, expr) => `${type(d)} ${name} = ${expr};`,
    variable: (name, d) => `${type(d)} ${name};`,
    assign: (name, expr) => `${name} = ${expr};`,
    loopOpen: (name, bound) => `for (${indexType} ${name} = 0; ${name} < ${bound}; ${name}++) {`,
    loopClose: '}',
    when: (gate, statement) => `if (${gate}) ${statement}`,
  };
}

// floor division and remainder for operands that may be negative (C's / and % truncate)
const PRELUDE = `#include <math.h>
${[
  ['int', 'int'],
  ['ll', 'long long'],
]
  .map(
    ([
      n,
      t,
    ]) => `static inline ${t} tg_floordiv_${n}(${t} a, ${t} b) { ${t} q = a / b; return q - ((a % b != 0) && ((a < 0) != (b < 0))); }
static inline ${t} tg_floormod_${n}(${t} a, ${t} b) { ${t} r = a % b; return r + ((r != 0) && ((r < 0) != (b < 0))) * b; }`,
  )
  .join('\n')}`;

/** A kernel's C source. */
export function renderC(name: string, linear: UOp): string {
  return render(cLanguage(maxIndex(linear) < 2 ** 31 ? 'int' : 'long long'), name, linear);
}
