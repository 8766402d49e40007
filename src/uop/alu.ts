// What each elementwise op computes on scalar constants: the semantics that constant folding and
// reference evaluators share. Integer results wrap to the dtype; floats round to it.
import {
  type ConstValue,
  type DType,
  dtypes,
  readElement,
  storageView,
  truncate,
  writeElement,
} from '../dtype.ts';
import { Ops } from './ops.ts';

type V = ConstValue;

const big = (v: V) => (typeof v === 'bigint' ? v : BigInt(typeof v === 'boolean' ? Number(v) : v));
const isWide = (d: DType) => d.itemsize === 8 && d.isInt;

/** Floor division and its remainder (the divisor's sign) on numbers. */
export function floorDiv(a: number, b: number): number {
  return Math.floor(a / b);
}
export function floorMod(a: number, b: number): number {
  const r = a % b;
  return r !== 0 && r < 0 !== b < 0 ? r + b : r;
}
function bigFloorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}
function bigFloorMod(a: bigint, b: bigint): bigint {
  const r = a % b;
  return r !== 0n && r < 0n !== b < 0n ? r + b : r;
}

/** An integer op done exactly: through BigInt when an operand or the result leaves the safe range. */
function intOp(
  d: DType,
  a: V,
  b: V,
  fnum: (x: number, y: number) => number,
  fbig: (x: bigint, y: bigint) => bigint,
): V {
  if (typeof a === 'number' && typeof b === 'number' && !isWide(d)) {
    const r = fnum(a, b);
    if (Number.isSafeInteger(r)) return truncate(d, r);
  }
  return truncate(d, fbig(big(a), big(b)));
}

const num = (v: V) => Number(v);

/**
 * The value of `op` on constant operands of dtype `d` (for CAST and BITCAST, `to` is the target), or
 * undefined when it has no value to fold to (integer division by zero, THREEFRY, codegen ops).
 */
export function execAlu(op: Ops, d: DType, vals: readonly V[], to: DType = d): V | undefined {
  const [a, b, c] = vals as [V, V, V];
  const isInt = d.isInt;
  const isBool = d === dtypes.bool;
  switch (op) {
    case Ops.ADD:
      if (isBool) return Boolean(a) || Boolean(b);
      return isInt
        ? intOp(
            d,
            a,
            b,
            (x, y) => x + y,
            (x, y) => x + y,
          )
        : truncate(d, num(a) + num(b));
    case Ops.SUB:
      return isInt
        ? intOp(
            d,
            a,
            b,
            (x, y) => x - y,
            (x, y) => x - y,
          )
        : truncate(d, num(a) - num(b));
    case Ops.MUL:
      if (isBool) return Boolean(a) && Boolean(b);
      return isInt
        ? intOp(
            d,
            a,
            b,
            (x, y) => x * y,
            (x, y) => x * y,
          )
        : truncate(d, num(a) * num(b));
    case Ops.NEG:
      return isBool
        ? !a
        : isInt
          ? intOp(
              d,
              a,
              0,
              (x) => -x,
              (x) => -x,
            )
          : truncate(d, -num(a));
    case Ops.MAX:
      if (isInt || isBool) return big(a) >= big(b) ? a : b;
      // as the renderers compute it: (a > b || a is NaN) ? a : b, so NaN in either wins and max(0, -0) is -0
      return truncate(d, num(a) > num(b) || Number.isNaN(num(a)) ? num(a) : num(b));
    case Ops.IDIV:
      if (isInt || isBool) return big(b) === 0n ? undefined : intOp(d, a, b, floorDiv, bigFloorDiv);
      return truncate(d, Math.floor(num(a) / num(b)));
    case Ops.MOD:
      if (isInt || isBool) return big(b) === 0n ? undefined : intOp(d, a, b, floorMod, bigFloorMod);
      return truncate(d, num(a) - num(b) * Math.floor(num(a) / num(b)));
    case Ops.CMPLT:
      return isInt || isBool ? big(a) < big(b) : num(a) < num(b);
    case Ops.CMPNE:
      return isInt || isBool ? big(a) !== big(b) : num(a) !== num(b);
    case Ops.CMPGT:
      return isInt || isBool ? big(a) > big(b) : num(a) > num(b);
    case Ops.CMPGE:
      return isInt || isBool ? big(a) >= big(b) : num(a) >= num(b);
    case Ops.CMPLE:
      return isInt || isBool ? big(a) <= big(b) : num(a) <= num(b);
    case Ops.CMPEQ:
      return isInt || isBool ? big(a) === big(b) : num(a) === num(b);
    case Ops.NOT:
      return !a;
    case Ops.AND:
      return isBool ? Boolean(a) && Boolean(b) : truncate(d, big(a) & big(b));
    case Ops.OR:
      return isBool ? Boolean(a) || Boolean(b) : truncate(d, big(a) | big(b));
    case Ops.XOR:
      return isBool ? Boolean(a) !== Boolean(b) : truncate(d, big(a) ^ big(b));
    case Ops.SHL:
      return truncate(d, big(a) << big(b));
    case Ops.SHR:
      // on the unwrapped value: arithmetic for signed, logical for unsigned (whose values are non-negative)
      return truncate(d, big(a) >> big(b));
    case Ops.WHERE:
      return a ? b : c;
    case Ops.MULACC:
      return execAlu(Ops.ADD, d, [execAlu(Ops.MUL, d, [a, b])!, c]);
    case Ops.RECIP:
      return truncate(d, 1 / num(a));
    case Ops.DIV:
      return truncate(d, num(a) / num(b));
    case Ops.TRUNC:
      return isInt || isBool ? a : truncate(d, Math.trunc(num(a)));
    case Ops.EXP2:
      return truncate(d, 2 ** num(a));
    case Ops.LOG2:
      return truncate(d, Math.log2(num(a)));
    case Ops.SIN:
      return truncate(d, Math.sin(num(a)));
    case Ops.SQRT:
      return truncate(d, Math.sqrt(num(a)));
    case Ops.POW:
      return truncate(d, num(a) ** num(b));
    case Ops.CAST:
      return castValue(a, to);
    case Ops.BITCAST:
      return bitcastValue(a, d, to);
    default:
      return undefined;
  }
}

function castValue(v: V, to: DType): V | undefined {
  if (to.isInt && typeof v === 'number' && !Number.isFinite(v)) return undefined; // undefined behaviour in C
  return truncate(to, v);
}

function bitcastValue(v: V, from: DType, to: DType): V | undefined {
  if (from.itemsize !== to.itemsize || from.count !== 1 || to.count !== 1) return undefined;
  const bytes = new ArrayBuffer(from.itemsize);
  writeElement(from, storageView(from, bytes), 0, v);
  return readElement(to, storageView(to, bytes), 0);
}
