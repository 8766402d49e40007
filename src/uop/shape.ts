// The dtype and shape of a node from its op, sources and arg, with the errors for invalid constructions.
import { DType, dtypes } from '../dtype.ts';
import { execAlu } from './alu.ts';
import { ALU, type Arg, type ArgOf, GroupOp, Ops, opName } from './ops.ts';
import type { UOp } from './uop.ts';

/** A size: a number, or an index-typed UOp for a symbolic size. */
export type sint = number | UOp;
export type Shape = readonly sint[];

const INFIX: Partial<Record<Ops, string>> = {
  [Ops.ADD]: '+',
  [Ops.MUL]: '*',
  [Ops.IDIV]: '//',
  [Ops.MOD]: '%',
  [Ops.CMPLT]: '<',
  [Ops.CMPNE]: '!=',
};

/** A size as text: a number, a variable's name, or a short infix expression of them. */
export function fmtDim(d: sint, depth = 4): string {
  if (typeof d === 'number') return String(d);
  if (d.op === Ops.PARAM) return String(d.argOf(Ops.PARAM).slot);
  if (d.op === Ops.CONST) return String(d.constValue);
  if (depth === 0) return '…';
  const args = d.src.map((x) => fmtDim(x, depth - 1));
  const infix = INFIX[d.op];
  return infix !== undefined && args.length === 2
    ? `(${args[0]}${infix}${args[1]})`
    : `${opName(d.op)}(${args.join(', ')})`;
}
export function fmtShape(s: Shape | null): string {
  if (s === null) return 'none';
  return `(${s.map((d) => fmtDim(d)).join(', ')}${s.length === 1 ? ',' : ''})`;
}

function fail(op: Ops, msg: string): never {
  throw new Error(`${opName(op)}: ${msg}`);
}

// --- dtype -------------------------------------------------------------------------------------------

/** Ops that order, group or hold code: no value and no shape. */
const STRUCTURAL = [Ops.END, Ops.GROUP, Ops.SINK, Ops.LINEAR, Ops.BARRIER, Ops.IF, Ops.ENDIF, Ops.ATOMICADD];
const VOID_OPS = new Set([...STRUCTURAL, Ops.STORE, Ops.TUPLE]);
const FLOAT_ONLY = new Set([Ops.RECIP, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW, Ops.DIV]);

export function deriveDType(op: Ops, src: readonly UOp[], arg: Arg): DType {
  switch (op) {
    case Ops.BUFFER:
    case Ops.BUFFERVIEW:
    case Ops.PARAM:
    case Ops.CONST:
    case Ops.VCONST:
    case Ops.CUSTOM:
      return (arg as { dtype: DType }).dtype;
    case Ops.CAST:
    case Ops.BITCAST:
      if (!(arg instanceof DType)) fail(op, `the arg must be the target DType, got ${String(arg)}`);
      return arg;
    case Ops.BINARY:
      return dtypes.uint8;
    case Ops.RANGE:
    case Ops.SPECIAL:
      return dtypes.index;
    case Ops.STACK:
      for (const x of src)
        if (x.dtype !== src[0]!.dtype)
          fail(op, `all elements must have one dtype, got ${src.map((y) => y.dtype.name).join(', ')}`);
      return src[0]?.dtype ?? dtypes.index;
    case Ops.STORE:
      if (src.length >= 2 && src[0]!.dtype !== src[1]!.dtype)
        fail(
          op,
          `the value's dtype ${src[1]!.dtype.name} must be the buffer's ${src[0]!.dtype.name}; cast it first`,
        );
      return dtypes.void;
    case Ops.WMMA:
      return (arg as ArgOf<Ops.WMMA>).dtypeOut;
    case Ops.FUNCTION:
    case Ops.CALL:
      return dtypes.void;
    case Ops.GETTUPLE:
      return tupleElement(src[0]!, arg as number).dtype;
    case Ops.WHERE:
      if (src.length !== 3) fail(op, `takes (cond, a, b), got ${src.length} sources`);
      if (src[0]!.dtype.base !== dtypes.bool)
        fail(op, `the condition must be bool, got ${src[0]!.dtype.name}; compare it (x != 0) to make one`);
      if (src[1]!.dtype !== src[2]!.dtype)
        fail(op, `both branches must have one dtype, got ${src[1]!.dtype.name} and ${src[2]!.dtype.name}`);
      return src[1]!.dtype;
  }
  if (VOID_OPS.has(op)) return dtypes.void;
  if (src.length === 0) fail(op, 'needs at least one source');
  const d = src[0]!.dtype;
  if (GroupOp.Binary.has(op) || op === Ops.MULACC) checkOperands(op, src);
  else if (FLOAT_ONLY.has(op) && !d.isFloat)
    fail(op, `needs a float operand, got ${d.name}; cast it to a float dtype first`);
  if (GroupOp.Comparison.has(op)) return d.count > 1 ? dtypes.bool.vec(d.count) : dtypes.bool;
  return d;
}

function checkOperands(op: Ops, src: readonly UOp[]): void {
  const arity = op === Ops.MULACC ? 3 : 2;
  if (src.length !== arity) fail(op, `takes ${arity} sources, got ${src.length}`);
  const d = src[0]!.dtype;
  for (const s of src)
    if (s.dtype !== d)
      fail(op, `operand dtypes differ (${src.map((x) => x.dtype.name).join(', ')}); cast them to one dtype`);
  if (GroupOp.IntegerOnly.has(op) && d.isFloat) fail(op, `needs integer (or bool) operands, got ${d.name}`);
  if (FLOAT_ONLY.has(op) && !d.isFloat) fail(op, `needs float operands, got ${d.name}`);
}

function tupleElement(t: UOp, i: number): UOp {
  const tuple = t.op === Ops.TUPLE ? t : t.op === Ops.FUNCTION || t.op === Ops.CALL ? t.src[0]! : undefined;
  if (tuple?.op !== Ops.TUPLE)
    fail(Ops.GETTUPLE, `source must be a TUPLE or a FUNCTION/CALL of one, got ${opName(t.op)}`);
  if (!Number.isInteger(i) || i < 0 || i >= tuple.src.length)
    fail(Ops.GETTUPLE, `index ${i} out of range for a tuple of ${tuple.src.length}`);
  return tuple.src[i]!;
}

// --- shape -------------------------------------------------------------------------------------------

const NO_SHAPE = new Set([...STRUCTURAL, Ops.TUPLE, Ops.FUNCTION, Ops.CALL]);
const SCALAR: Shape = Object.freeze([]);

/** Two sizes are equal when they are the same number or the same (hash-consed) UOp. */
const sameDim = (a: sint, b: sint) => a === b;

export function shapesEqual(a: Shape, b: Shape): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!sameDim(a[i]!, b[i]!)) return false;
  return true;
}

/** The sizes held by a shape operand: non-negative integers or index scalars. */
function dims(op: Ops, v: UOp | undefined): Shape {
  if (v === undefined) fail(op, 'missing a shape operand');
  if (v.op !== Ops.STACK && v.op !== Ops.VCONST)
    fail(op, `a shape operand must be a STACK or VCONST of index scalars, got ${opName(v.op)}`);
  const out = v.sizes;
  for (const d of out)
    if (
      typeof d === 'number'
        ? !(Number.isInteger(d) && d >= 0)
        : d.dtype !== dtypes.index || d.shape?.length !== 0
    )
      fail(op, `sizes and offsets must be non-negative integers or index scalars, got ${fmtShape(out)}`);
  return out;
}

function need(op: Ops, u: UOp | undefined, what: string): Shape {
  if (u === undefined) fail(op, `missing ${what}`);
  if (u.shape === null) fail(op, `${what} has no shape (it is a ${opName(u.op)})`);
  return u.shape;
}

export function deriveShape(op: Ops, src: readonly UOp[], arg: Arg, dtype: DType): Shape | null {
  if (NO_SHAPE.has(op)) return null;
  switch (op) {
    case Ops.CONST:
    case Ops.RANGE:
    case Ops.SPECIAL:
    case Ops.CUSTOM:
      return SCALAR;
    case Ops.VCONST:
      return [(arg as ArgOf<Ops.VCONST>).values.length];
    case Ops.BINARY:
      return [(arg as Uint8Array).length];
    case Ops.BUFFERVIEW:
      return [(arg as ArgOf<Ops.BUFFERVIEW>).size];
    case Ops.BUFFER:
      if (src.length !== 1) fail(op, 'takes one source, its shape');
      return dims(op, src[0]);
    case Ops.PARAM:
      return src.length === 0 ? SCALAR : dims(op, src[0]);
    case Ops.STACK:
      return stackShape(src);
    case Ops.PERMUTE:
      return permuteShape(need(op, src[0], 'the input'), arg as readonly number[]);
    case Ops.FLIP: {
      const s = need(op, src[0], 'the input');
      const f = arg as readonly boolean[];
      if (f.length !== s.length)
        fail(op, `needs one flag per axis: ${f.length} flags for shape ${fmtShape(s)}`);
      return s;
    }
    case Ops.RESHAPE:
      return reshapeShape(need(op, src[0], 'the input'), dims(op, src[1]));
    case Ops.EXPAND:
      return expandShape(need(op, src[0], 'the input'), dims(op, src[1]));
    case Ops.PAD:
      return padShape(need(op, src[0], 'the input'), dims(op, src[1]), dims(op, src[2]));
    case Ops.SHRINK:
      return shrinkShape(need(op, src[0], 'the input'), dims(op, src[1]), dims(op, src[2]));
    case Ops.INDEX:
      return indexShape(src);
    case Ops.BITCAST:
      return bitcastShape(need(op, src[0], 'the input'), src[0]!.dtype, dtype);
    case Ops.REPLICATED:
      return collapse(op, need(op, src[0], 'the input'), arg as readonly number[]);
    case Ops.REDUCE: {
      for (const r of src.slice(1))
        if (r.op !== Ops.RANGE) fail(op, `sources after the input must be RANGEs, got ${opName(r.op)}`);
      return collapse(op, need(op, src[0], 'the input'), (arg as ArgOf<Ops.REDUCE>).axes);
    }
    case Ops.GETTUPLE:
      return calledShape(src[0]!, tupleElement(src[0]!, arg as number).shape);
    case Ops.STORE: {
      const b = need(op, src[0], 'the buffer');
      const v = need(op, src[1], 'the value');
      if (!shapesEqual(b, v))
        fail(op, `buffer shape ${fmtShape(b)} and value shape ${fmtShape(v)} must be equal`);
      if (src[2] !== undefined && src[2].dtype !== dtypes.bool)
        fail(op, `the gate must be bool, got ${src[2].dtype.name}`);
      return SCALAR;
    }
    case Ops.WMMA:
      return need(op, src[2], 'the accumulator');
  }
  if (src.length === 0) fail(op, 'needs at least one source');
  if (src.length === 1 || op === Ops.AFTER || op === Ops.LOAD || op === Ops.COPY)
    return need(op, src[0], 'the input');
  return broadcast(op, src);
}

/**
 * The shape of a value a FUNCTION or CALL returns: symbolic sizes in its body name PARAM k, and take
 * the k-th argument's value in the call.
 */
function calledShape(call: UOp, shape: Shape | null): Shape | null {
  if (shape === null || (call.op !== Ops.FUNCTION && call.op !== Ops.CALL)) return shape;
  const args = call.src.slice(1);
  return shape.map((d) => (typeof d === 'number' ? d : substituteParams(d, args)));
}

/** size with each PARAM k replaced by args[k], folding what becomes constant. */
function substituteParams(size: UOp, args: readonly UOp[]): sint {
  const out = new Map<UOp, UOp>();
  for (const u of size.toposort()) {
    const slot = u.op === Ops.PARAM ? u.argOf(Ops.PARAM).slot : undefined;
    const a = typeof slot === 'number' ? args[slot] : undefined;
    const src = u.src.map((x) => out.get(x)!);
    const folded =
      ALU.has(u.op) && src.every((x) => x.op === Ops.CONST)
        ? execAlu(
            u.op,
            src[0]!.dtype,
            src.map((x) => x.constValue),
            u.dtype,
          )
        : undefined;
    if (a?.shape?.length === 0 && a.dtype === u.dtype) out.set(u, a);
    else out.set(u, folded === undefined ? u.withSrc(src) : u.constLike(folded));
  }
  const r = out.get(size)!;
  return r.op === Ops.CONST ? Number(r.constValue) : r;
}

function stackShape(src: readonly UOp[]): Shape {
  if (src.length === 0) return [0];
  const s = need(Ops.STACK, src[0], 'the first element');
  for (const x of src)
    if (!shapesEqual(need(Ops.STACK, x, 'an element'), s))
      fail(
        Ops.STACK,
        `all elements must have one shape, got ${src.map((y) => fmtShape(y.shape)).join(' and ')}`,
      );
  return [src.length, ...s];
}

/** Right-aligned broadcast: each axis equal, or 1 on one side. */
export function broadcast(op: Ops, src: readonly UOp[]): Shape {
  let out = need(op, src[0], 'operand 0');
  for (let i = 1; i < src.length; i++) {
    const s = need(op, src[i], `operand ${i}`);
    if (s === out || s.length === 0) continue;
    if (out.length === 0) {
      out = s;
      continue;
    }
    if (shapesEqual(s, out)) continue;
    const n = Math.max(s.length, out.length);
    const r: sint[] = [];
    for (let k = 0; k < n; k++) {
      const a = out[out.length - n + k] ?? 1;
      const b = s[s.length - n + k] ?? 1;
      if (sameDim(a, b) || b === 1) r.push(a);
      else if (a === 1) r.push(b);
      else
        fail(
          op,
          `cannot broadcast shapes ${src.map((x) => fmtShape(x.shape)).join(' and ')}: axis ${k - n} has sizes ${fmtDim(a)} and ${fmtDim(b)}; each axis must be equal or 1`,
        );
    }
    out = r;
  }
  return out;
}

function permuteShape(s: Shape, order: readonly number[]): Shape {
  const seen = new Set(order);
  if (order.length !== s.length || seen.size !== order.length || order.some((a) => !(a >= 0 && a < s.length)))
    fail(
      Ops.PERMUTE,
      `order [${order.join(', ')}] is not a permutation of the ${s.length} axes of ${fmtShape(s)}`,
    );
  return order.map((a) => s[a]!);
}

/**
 * Product of sizes as (number, sorted ids of symbolic factors), so symbolic products can be compared. A MUL
 * size is split into its factors, so that (n, 3) and (n*3,) hold the same number of elements.
 */
function symbolicProduct(s: Shape): [number, string] {
  let n = 1;
  const ids: number[] = [];
  const stack: sint[] = [...s];
  while (stack.length) {
    const d = stack.pop()!;
    if (typeof d === 'number') n *= d;
    else if (d.op === Ops.CONST) n *= Number(d.argOf(Ops.CONST).value);
    else if (d.op === Ops.MUL) stack.push(...d.src);
    else ids.push(d.id);
  }
  return [n, ids.sort((a, b) => a - b).join(',')];
}

const fmtCount = (n: number, factors: string) => (factors ? `${n}*[${factors}]` : String(n));

function reshapeShape(s: Shape, to: Shape): Shape {
  for (const d of to)
    if (typeof d === 'number' && !(Number.isInteger(d) && d >= 0))
      fail(Ops.RESHAPE, `sizes must be non-negative integers, got ${fmtShape(to)}`);
  const [n0, f0] = symbolicProduct(s);
  const [n1, f1] = symbolicProduct(to);
  // a reshape is lowered through row-major offsets, which JS numbers hold exactly only below 2^53
  if (n0 > Number.MAX_SAFE_INTEGER || n1 > Number.MAX_SAFE_INTEGER)
    fail(
      Ops.RESHAPE,
      `cannot reshape ${fmtShape(s)} to ${fmtShape(to)}: ${fmtCount(Math.max(n0, n1), f0)} elements is past 2^53, where offsets stop being exact`,
    );
  if (n0 !== n1 || f0 !== f1)
    fail(
      Ops.RESHAPE,
      `cannot reshape ${fmtShape(s)} to ${fmtShape(to)}: ${fmtCount(n0, f0)} elements vs ${fmtCount(n1, f1)}; the new shape must hold the same number`,
    );
  return to;
}

function expandShape(s: Shape, to: Shape): Shape {
  if (s.length !== to.length)
    fail(
      Ops.EXPAND,
      `cannot expand ${fmtShape(s)} to ${fmtShape(to)}: the number of axes must match (reshape first)`,
    );
  for (let k = 0; k < s.length; k++)
    if (!sameDim(s[k]!, to[k]!) && s[k] !== 1)
      fail(
        Ops.EXPAND,
        `cannot expand ${fmtShape(s)} to ${fmtShape(to)}: axis ${k} has size ${fmtDim(s[k]!)}; only size-1 axes expand`,
      );
  return to;
}

const nonNeg = (d: sint) => typeof d !== 'number' || d >= 0;
/** a + b <= c, decided for numbers; symbolic sizes are trusted (their bounds are checked by the verifier). */
const fits = (a: sint, b: sint, c: sint) =>
  typeof a !== 'number' || typeof b !== 'number' || typeof c !== 'number' || a + b <= c;

function padShape(s: Shape, offset: Shape, to: Shape): Shape {
  if (offset.length !== s.length || to.length !== s.length)
    fail(
      Ops.PAD,
      `offset ${fmtShape(offset)} and shape ${fmtShape(to)} need one entry per axis of ${fmtShape(s)}`,
    );
  for (let k = 0; k < s.length; k++)
    if (!nonNeg(offset[k]!) || !fits(offset[k]!, s[k]!, to[k]!))
      fail(
        Ops.PAD,
        `cannot place ${fmtShape(s)} at offset ${fmtShape(offset)} inside ${fmtShape(to)}: axis ${k} needs 0 <= offset and offset + ${fmtDim(s[k]!)} <= ${fmtDim(to[k]!)}`,
      );
  return to;
}

function shrinkShape(s: Shape, offset: Shape, to: Shape): Shape {
  if (offset.length !== s.length || to.length !== s.length)
    fail(
      Ops.SHRINK,
      `offset ${fmtShape(offset)} and shape ${fmtShape(to)} need one entry per axis of ${fmtShape(s)}`,
    );
  for (let k = 0; k < s.length; k++)
    if (!nonNeg(offset[k]!) || !nonNeg(to[k]!) || !fits(offset[k]!, to[k]!, s[k]!))
      fail(
        Ops.SHRINK,
        `cannot keep ${fmtShape(to)} elements from offset ${fmtShape(offset)} of ${fmtShape(s)}: axis ${k} needs 0 <= offset and offset + size <= ${fmtDim(s[k]!)}`,
      );
  return to;
}

function indexShape(src: readonly UOp[]): Shape {
  const s = need(Ops.INDEX, src[0], 'the indexed value');
  // a trailing bool is a gate, as in tinygrad's INDEX(buf, idx, valid): where the element may be read
  const gated = src.length > 1 && src.at(-1)!.dtype === dtypes.bool;
  const idx = src.slice(1, gated ? -1 : undefined);
  if (idx.length > s.length)
    fail(Ops.INDEX, `${idx.length} indices for ${fmtShape(s)}, which has ${s.length} axes`);
  const out: sint[] = [];
  for (const i of idx) {
    if (!i.dtype.isInt) fail(Ops.INDEX, `indices must be integers, got ${i.dtype.name}`);
    out.push(...need(Ops.INDEX, i, 'an index'));
  }
  out.push(...s.slice(idx.length));
  return out;
}

function bitcastShape(s: Shape, from: DType, to: DType): Shape {
  if (from.itemsize === to.itemsize) return s;
  const last = s[s.length - 1];
  const bytes = typeof last === 'number' ? last * from.itemsize : undefined;
  if (bytes === undefined || bytes % to.itemsize !== 0)
    fail(
      Ops.BITCAST,
      `cannot reinterpret ${fmtShape(s)} of ${from.name} as ${to.name}: the last axis must hold a whole number of ${to.name} (${to.itemsize} bytes)`,
    );
  return [...s.slice(0, -1), bytes / to.itemsize];
}

function collapse(op: Ops, s: Shape, axes: readonly number[]): Shape {
  const seen = new Set<number>();
  for (const a of axes) {
    if (!(Number.isInteger(a) && a >= 0 && a < s.length))
      fail(op, `axis ${a} does not exist in ${fmtShape(s)}; valid axes are 0..${s.length - 1}`);
    if (seen.has(a)) fail(op, `axis ${a} is given twice`);
    seen.add(a);
  }
  return s.map((d, i) => (seen.has(i) ? 1 : d));
}
