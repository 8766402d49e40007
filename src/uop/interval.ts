// Interval analysis: the [vmin, vmax] of a node from its sources' intervals (read from their _range).
import { type DType, dtypes, truncate } from '../dtype.ts';
import { GroupOp, Ops } from './ops.ts';
import type { UOp } from './uop.ts';

type Interval = readonly [number, number];

const BOOL_FALSE: Interval = [0, 0];
const BOOL_TRUE: Interval = [1, 1];
const BOOL_ANY: Interval = [0, 1];

function dtypeRange(d: DType): Interval {
  const b = d.base;
  return b.kind === 'void' ? [-Infinity, Infinity] : [b.min, b.max];
}

const r = (u: UOp): Interval => u._range!;
const num = (v: unknown) => Number(v);

/** Clips an interval to what the dtype can hold; an integer interval that overflows becomes the whole range. */
function clampToDType(d: DType, lo: number, hi: number): Interval {
  if (Number.isNaN(lo) || Number.isNaN(hi)) return dtypeRange(d);
  if (d.isFloat || d.kind === 'index' || d.kind === 'void') return [lo, hi];
  const [a, b] = dtypeRange(d);
  return lo < a || hi > b ? [a, b] : [lo, hi];
}

const floorDiv = (a: number, b: number) => Math.floor(a / b);
const nextPow2Minus1 = (x: number) => 2 ** Math.ceil(Math.log2(x + 1)) - 1;

export function intervalOf(u: UOp): Interval {
  const d = u.dtype;
  const s = u.src;
  switch (u.op) {
    case Ops.CONST: {
      const v = num(u.argOf(Ops.CONST).value);
      return [v, v];
    }
    case Ops.VCONST: {
      const vs = u.argOf(Ops.VCONST).values.map(num);
      return [Math.min(...vs), Math.max(...vs)];
    }
    case Ops.PARAM:
      return s.length >= 3 ? [r(s[1]!)[0], r(s[2]!)[1]] : dtypeRange(d);
    case Ops.RANGE:
    case Ops.SPECIAL:
      return [0, Math.max(0, r(s[0]!)[1] - 1)];
    case Ops.STACK:
      return s.length === 0
        ? dtypeRange(d)
        : [Math.min(...s.map((x) => r(x)[0])), Math.max(...s.map((x) => r(x)[1]))];
    case Ops.INDEX:
    case Ops.AFTER:
    case Ops.COPY:
    case Ops.LOAD:
    case Ops.CONTIGUOUS:
    case Ops.CONTIGUOUSBACKWARD:
    case Ops.DETACH:
      return r(s[0]!);
    case Ops.BITCAST:
      return dtypeRange(d);
    case Ops.CAST:
      return castInterval(r(s[0]!), d);
    case Ops.WHERE: {
      const [c0, c1] = r(s[0]!);
      if (c0 === 1) return r(s[1]!);
      if (c1 === 0) return r(s[2]!);
      const [a0, a1] = r(s[1]!);
      const [b0, b1] = r(s[2]!);
      return [Math.min(a0, b0), Math.max(a1, b1)];
    }
  }
  // padding reads 0 outside the source
  if (u.op === Ops.PAD) return [Math.min(r(s[0]!)[0], 0), Math.max(r(s[0]!)[1], 0)];
  if (GroupOp.Movement.has(u.op)) return r(s[0]!);
  if (s.length === 0) return dtypeRange(d);
  // a float interval cannot say whether NaN is possible, and NaN makes every comparison false
  if (GroupOp.Comparison.has(u.op) && s[0]!.dtype.isFloat && !s.every((x) => x.op === Ops.CONST))
    return BOOL_ANY;
  const [a0, a1] = r(s[0]!);
  const [b0, b1] = s.length > 1 ? r(s[1]!) : [0, 0];
  switch (u.op) {
    case Ops.ADD:
      return clampToDType(d, a0 + b0, a1 + b1);
    case Ops.SUB:
      return clampToDType(d, a0 - b1, a1 - b0);
    case Ops.NEG:
      return d === dtypes.bool ? [1 - a1, 1 - a0] : clampToDType(d, -a1, -a0);
    case Ops.MUL: {
      const p = [a0 * b0, a0 * b1, a1 * b0, a1 * b1];
      return clampToDType(d, Math.min(...p), Math.max(...p));
    }
    case Ops.MAX:
      return [Math.max(a0, b0), Math.max(a1, b1)];
    case Ops.CMPLT:
      return a1 < b0 ? BOOL_TRUE : a0 >= b1 ? BOOL_FALSE : BOOL_ANY;
    case Ops.CMPGT:
      return a0 > b1 ? BOOL_TRUE : a1 <= b0 ? BOOL_FALSE : BOOL_ANY;
    case Ops.CMPGE:
      return a0 >= b1 ? BOOL_TRUE : a1 < b0 ? BOOL_FALSE : BOOL_ANY;
    case Ops.CMPLE:
      return a1 <= b0 ? BOOL_TRUE : a0 > b1 ? BOOL_FALSE : BOOL_ANY;
    case Ops.CMPNE:
      return a1 < b0 || b1 < a0 ? BOOL_TRUE : a0 === a1 && b0 === b1 && a0 === b0 ? BOOL_FALSE : BOOL_ANY;
    case Ops.CMPEQ:
      return a1 < b0 || b1 < a0 ? BOOL_FALSE : a0 === a1 && b0 === b1 && a0 === b0 ? BOOL_TRUE : BOOL_ANY;
    case Ops.NOT:
      return [1 - a1, 1 - a0];
    case Ops.IDIV:
      // floor division is monotone in each operand while the divisor keeps one sign: extremes at the corners
      if (b0 > 0 || b1 < 0) {
        const q = [floorDiv(a0, b0), floorDiv(a0, b1), floorDiv(a1, b0), floorDiv(a1, b1)];
        return clampToDType(d, Math.min(...q), Math.max(...q));
      }
      return dtypeRange(d);
    case Ops.MOD:
      // the remainder takes the divisor's sign
      if (b0 > 0) return a0 >= 0 && a1 < b0 ? [a0, a1] : [0, b1 - 1];
      if (b1 < 0) return [b0 + 1, 0];
      return dtypeRange(d);
    case Ops.AND:
      if (d === dtypes.bool) return [a0 & b0, a1 & b1];
      return a0 >= 0 && b0 >= 0 ? [0, Math.min(a1, b1)] : dtypeRange(d);
    case Ops.OR:
      if (d === dtypes.bool) return [a0 | b0, a1 | b1];
      return a0 >= 0 && b0 >= 0 ? [Math.max(a0, b0), nextPow2Minus1(Math.max(a1, b1))] : dtypeRange(d);
    case Ops.XOR:
      if (d === dtypes.bool) return a0 === a1 && b0 === b1 ? [a0 ^ b0, a0 ^ b0] : BOOL_ANY;
      return a0 >= 0 && b0 >= 0 ? [0, nextPow2Minus1(Math.max(a1, b1))] : dtypeRange(d);
    case Ops.SHL:
      return a0 >= 0 && b0 >= 0 ? clampToDType(d, a0 * 2 ** b0, a1 * 2 ** b1) : dtypeRange(d);
    case Ops.SHR:
      return a0 >= 0 && b0 >= 0 ? [Math.floor(a0 / 2 ** b1), Math.floor(a1 / 2 ** b0)] : dtypeRange(d);
  }
  return dtypeRange(d);
}

function castInterval([lo, hi]: Interval, to: DType): Interval {
  if (to.base === dtypes.bool)
    return lo === 0 && hi === 0 ? BOOL_FALSE : lo > 0 || hi < 0 ? BOOL_TRUE : BOOL_ANY;
  // rounding is monotone, so the rounded bounds bound the rounded values (int32 16777217 is 16777216 in float32)
  if (to.isFloat) return [truncate(to, lo) as number, truncate(to, hi) as number];
  const [tlo, thi] = [Math.trunc(lo), Math.trunc(hi)];
  const [a, b] = dtypeRange(to);
  return tlo >= a && thi <= b ? [tlo, thi] : [a, b];
}
