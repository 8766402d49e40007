// What every stage's spec rules share: the rule type, node descriptions, and checks on sources and args.
import { AddrSpace, type ConstValue, DType, dtypes, truncate } from '../../dtype.ts';
import { type Device, GroupOp, Ops, opName } from '../ops.ts';
import { UPat } from '../pattern.ts';
import { fmtDim, fmtShape } from '../shape.ts';
import { argKey, type UOp } from '../uop.ts';

// Construction (shape.ts) already refuses wrong operand dtypes and arities of ALU ops, shape operands that
// are not non-negative sizes, STORE values of another dtype and mixed-dtype STACKs; the rules here check
// only what a constructible node can still get wrong.

/** What is wrong with a node, or undefined when nothing is. */
export type Problem = string | undefined;
/** What a rule says of a node its pattern matches: undefined when valid, else what is wrong. */
export type SpecCheck = (u: UOp) => Problem;
/** A named rule: nodes matching the pattern are valid when the check finds no problem. */
export type SpecRule = readonly [name: string, pat: UPat, check: SpecCheck];

/** A check that runs the given checks in order and reports the first problem. */
export const all =
  (...checks: SpecCheck[]): SpecCheck =>
  (u) => {
    for (const c of checks) {
      const r = c(u);
      if (r !== undefined) return r;
    }
  };

/** The first problem f finds among xs. */
export function first<T>(xs: readonly T[], f: (x: T, i: number) => Problem): Problem {
  for (const [i, x] of xs.entries()) {
    const p = f(x, i);
    if (p !== undefined) return p;
  }
}

/** A node of `op` whose sources are named in order (any sources when names is omitted); `more` allows extras. */
export function form(op: Ops | readonly Ops[], names?: readonly string[], more = false): UPat {
  if (names === undefined) return new UPat({ op });
  return new UPat({ op, src: names.map((n) => UPat.var(n)), allowMore: more });
}

// --- naming nodes in messages ------------------------------------------------------------------------

export const ref = (u: UOp) => `${opName(u.op)} #${u.id}`;
export const refs = (us: readonly UOp[]) => us.map(ref).join(', ');
export const fmtDevice = (d: Device) => (typeof d === 'string' ? d : `(${d.join(', ')})`);

/** A node with its dtype, shape, device and arg. */
export function describe(u: UOp): string {
  const parts = [u.dtype.name];
  if (u.shape !== null) parts.push(`shape ${fmtShape(u.shape)}`);
  if (u.device !== null) parts.push(`on ${fmtDevice(u.device)}`);
  if (u.arg !== null) {
    const a = argKey(u.op, u.arg);
    parts.push(`arg ${a.length > 60 ? `${a.slice(0, 57)}...` : a}`);
  }
  return `${ref(u)} (${parts.join(', ')})`;
}

// --- what kind of node a source is -------------------------------------------------------------------

export const isVariable = (u: UOp) => u.op === Ops.PARAM && typeof u.argOf(Ops.PARAM).slot === 'string';
/** Memory: a BUFFER, a buffer view, or a PARAM standing for a buffer (not a symbolic variable). */
export const isStorage = (u: UOp) =>
  u.op === Ops.BUFFER || u.op === Ops.BUFFERVIEW || (u.op === Ops.PARAM && !isVariable(u));

/** Ops that are done for their effect: what SINK, GROUP, END bodies and BARRIERs hold. */
export const SIDE_EFFECTS: ReadonlySet<Ops> = new Set([
  Ops.STORE,
  Ops.GROUP,
  Ops.END,
  Ops.CALL,
  Ops.BARRIER,
  Ops.ATOMICADD,
]);
const EFFECT_NAMES = [...SIDE_EFFECTS].map(opName).join(', ');

export function sourcesAreSideEffects(u: UOp): Problem {
  const bad = u.src.find((s) => !SIDE_EFFECTS.has(s.op));
  if (bad !== undefined) return `${opName(u.op)} holds side effects (${EFFECT_NAMES}), got ${ref(bad)}`;
}

export function bodyIsSideEffect(u: UOp): Problem {
  const body = u.src[0]!;
  if (!SIDE_EFFECTS.has(body.op))
    return `the body of a loop is a side effect (${EFFECT_NAMES}), got ${ref(body)}`;
}

// kind 'void' rather than dtypes.void, so that a void pointer is no value either
export const isValue = (u: UOp) => u.dtype.kind !== 'void' && u.shape !== null;

export function notValue(s: UOp, what: string): Problem {
  if (!isValue(s))
    return `${what} ${ref(s)} is not a value (${s.dtype.kind === 'void' ? 'dtype void' : 'no shape'})`;
}

export const input = (u: UOp) => notValue(u.src[0]!, 'the input');

/** Every source from `from` on is a value. */
export const sourcesAreValues =
  (what: string, from = 0): SpecCheck =>
  (u) =>
    first(u.src.slice(from), (s, i) => notValue(s, `${what} ${i}`));

export function indexScalar(u: UOp, what: string): Problem {
  if (!(u.dtype === dtypes.index && u.shape?.length === 0))
    return `${what} must be an index-typed scalar, got ${ref(u)} of dtype ${u.dtype.name} and shape ${fmtShape(u.shape)}`;
}

export function gateProblem(gate: UOp | undefined): Problem {
  if (gate !== undefined && !(gate.dtype === dtypes.bool && gate.shape?.length === 0))
    return `the gate must be a bool scalar, got ${ref(gate)} of dtype ${gate.dtype.name} and shape ${fmtShape(gate.shape)}`;
}

/** A node with at most n sources, used as `usage` says. */
export const atMost =
  (n: number, usage: string): SpecCheck =>
  (u) =>
    u.src.length > n ? `${usage}, got ${u.src.length} sources` : undefined;

// --- arguments -----------------------------------------------------------------------------------------

export const isCount = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0;

function valueDType(d: unknown, what: string): Problem {
  if (!(d instanceof DType)) return `${what} must be a DType, got ${String(d)}`;
  if (d === dtypes.void || d.isPtr) return `${what} must be a value dtype, got ${d.name}`;
}

export function scalarDType(d: unknown, what: string): Problem {
  return (
    valueDType(d, what) ??
    ((d as DType).count !== 1 ? `${what} must be a scalar dtype, got ${(d as DType).name}` : undefined)
  );
}

const isDeviceName = (d: unknown) => typeof d === 'string' && d !== '';
export function deviceArg(d: unknown, what: string): Problem {
  if (!(isDeviceName(d) || (Array.isArray(d) && d.length > 0 && d.every(isDeviceName))))
    return `${what} must be a device name or a non-empty tuple of names, got ${JSON.stringify(d)}`;
}

export function addrspaceArg(a: unknown, allowed: readonly AddrSpace[]): Problem {
  if (!allowed.includes(a as AddrSpace))
    return `address space ${String(a)} is not allowed here; expected ${allowed.join(' or ')}`;
}

/** Each value exactly as the dtype stores it (what UOp.const makes). */
function constValues(dtype: DType, values: readonly ConstValue[]): Problem {
  for (const v of values) {
    let stored: ConstValue;
    try {
      stored = truncate(dtype, v);
    } catch (e) {
      return `value ${String(v)} cannot be a ${dtype.name}: ${(e as Error).message}`;
    }
    if (!Object.is(stored, v))
      return `value ${String(v)} (${typeof v}) is not stored as a ${dtype.name} stores it (${String(stored)}); build constants with UOp.const`;
  }
}

// --- source ops, the same in every stage but for the address spaces a buffer may live in ---------------

/** src[i] holds sizes or offsets; construction has checked that numbers are counts and the rest index scalars. */
const shapeOperand =
  (i: number): SpecCheck =>
  (u) => {
    const s = u.src[i]!;
    // a STACK of CONSTs or a VCONST passes construction with any integer dtype
    if (s.dtype !== dtypes.index)
      return `source ${i} (a shape operand) must hold index values, got ${ref(s)} of dtype ${s.dtype.name}`;
    const neg = s.op === Ops.STACK ? s.src.find((d) => d.vmax < 0) : undefined;
    if (neg !== undefined) return `${fmtDim(neg)} in source ${i} (a shape operand) is always negative`;
  };
export const shapeOperands = (...is: number[]) => all(...is.map(shapeOperand));

/** The arg of a BUFFER, or of a PARAM standing for one (whose device and address space may be left out). */
const storageArg =
  (addrspaces: readonly AddrSpace[]): SpecCheck =>
  (u) => {
    const a = u.argOf(Ops.BUFFER, Ops.PARAM);
    const param = u.op === Ops.PARAM;
    if (!isCount(a.slot))
      return param
        ? `slot ${JSON.stringify(a.slot)} is not a position (a non-negative integer); a PARAM named by a string is a symbolic variable and takes (STACK(), min, max)`
        : `slot must be a non-negative integer, got ${JSON.stringify(a.slot)}`;
    return (
      scalarDType(a.dtype, 'the dtype') ??
      (param && a.device === undefined ? undefined : deviceArg(a.device, 'the device')) ??
      addrspaceArg(param ? (a.addrspace ?? AddrSpace.GLOBAL) : a.addrspace, addrspaces)
    );
  };

function variable(u: UOp): Problem {
  const a = u.argOf(Ops.PARAM);
  const [shape, lo, hi] = u.src as [UOp, UOp, UOp];
  if (typeof a.slot !== 'string' || a.slot === '')
    return `a PARAM with (shape, min, max) is a symbolic variable, named by a non-empty string slot; got slot ${JSON.stringify(a.slot)}`;
  if (!(a.dtype instanceof DType) || !a.dtype.isInt || a.dtype.count !== 1)
    return `variable ${a.slot} must have a scalar integer dtype (index or int), got ${String(a.dtype)}`;
  if (shape.op !== Ops.STACK || shape.src.length !== 0)
    return `variable ${a.slot}: source 0 must be STACK() (a variable has shape ()), got ${ref(shape)}`;
  for (const [b, what] of [
    [lo, 'min'],
    [hi, 'max'],
  ] as const)
    if (b.op !== Ops.CONST || b.dtype !== a.dtype)
      return `variable ${a.slot}: ${what} must be a CONST of dtype ${a.dtype.name}, got ${ref(b)} of dtype ${b.dtype.name}`;
  if (Number(lo.constValue) > Number(hi.constValue))
    return `variable ${a.slot}: min ${String(lo.constValue)} exceeds max ${String(hi.constValue)}`;
}

function constant(u: UOp): Problem {
  const { value, dtype } = u.argOf(Ops.CONST);
  return (
    scalarDType(dtype, 'a CONST (a scalar; build vectors with STACK) dtype') ?? constValues(dtype, [value])
  );
}

function vectorConstant(u: UOp): Problem {
  const { values, dtype } = u.argOf(Ops.VCONST);
  if (!Array.isArray(values) || values.length === 0)
    return 'a VCONST holds one or more values (the empty vector is STACK())';
  return scalarDType(dtype, 'the element dtype') ?? constValues(dtype, values);
}

/** BUFFER, PARAM, variables and constants; buffers may live in the given address spaces. */
export function sourceRules(addrspaces: readonly AddrSpace[]): SpecRule[] {
  return [
    ['buffer', form(Ops.BUFFER, ['shape']), all(shapeOperands(0), storageArg(addrspaces))],
    ['param', form(Ops.PARAM, ['shape']), all(shapeOperands(0), storageArg(addrspaces))],
    ['variable', form(Ops.PARAM, ['shape', 'min', 'max']), variable],
    ['const', form(Ops.CONST, []), constant],
    ['vconst', form(Ops.VCONST, []), vectorConstant],
  ];
}

// --- elementwise ops: construction checks ALU dtypes and arity, except for these ------------------------

const dtypeKind =
  (test: (d: DType) => boolean, what: string): SpecCheck =>
  (u) =>
    test(u.src[0]!.dtype)
      ? undefined
      : `${opName(u.op)} needs ${what} operands, got ${u.src.map((s) => s.dtype.name).join(', ')}`;

function castTarget(u: UOp): Problem {
  const to = u.arg as DType;
  return (
    valueDType(to, `the target dtype of ${opName(u.op)}`) ??
    (u.op === Ops.CAST && to.count !== u.src[0]!.dtype.count
      ? `CAST keeps the vector width: ${u.src[0]!.dtype.name} cannot become ${to.name}`
      : undefined)
  );
}

const floatOperand = dtypeKind((d) => d.isFloat, 'float');
const boolOperand = dtypeKind((d) => d.isBool, 'bool');
const uint64Operands = dtypeKind((d) => d.base === dtypes.uint64, 'uint64');
const notBool = (u: UOp): Problem =>
  u.src[0]!.dtype.isBool ? 'NEG of a bool: use NOT (CMPNE x, true) instead' : undefined;

const REDUCE_OPS: readonly Ops[] = [Ops.ADD, Ops.MAX, Ops.MUL];
export function reduceOp(u: UOp): Problem {
  const op = u.argOf(Ops.REDUCE).op;
  if (!REDUCE_OPS.includes(op))
    return `a REDUCE reduces with ${REDUCE_OPS.map(opName).join(', ')}, got ${Ops[op] ?? String(op)}`;
}

/** The elementwise rules; `operands` says what a stage accepts as an operand. */
export function elementwiseRules(operands: SpecCheck): SpecRule[] {
  const x = ['x'];
  return [
    // construction refuses the others on non-floats, but not TRUNC
    [
      'float-unary',
      form([Ops.RECIP, Ops.TRUNC, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT], x),
      all(operands, floatOperand),
    ],
    ['neg', form(Ops.NEG, x), all(operands, notBool)],
    ['not', form(Ops.NOT, x), all(operands, boolOperand)],
    ['cast', form([Ops.CAST, Ops.BITCAST], x), all(operands, castTarget)],
    // binary and ternary: construction has checked their arity and operand dtypes
    ['alu', form([...GroupOp.Binary, ...GroupOp.Ternary].filter((op) => op !== Ops.THREEFRY)), operands],
    ['threefry', form(Ops.THREEFRY, ['x', 'key']), all(operands, uint64Operands)],
  ];
}
