// The spec verifier: one table of rules per stage (tensor graph, kernel, linear program) and verify().
import { AddrSpace, type ConstValue, DType, dtypes, truncate } from '../dtype.ts';
import { SPEC } from '../helpers.ts';
import { type ArgOf, AxisType, type Device, GroupOp, Ops, opName } from './ops.ts';
import { UPat } from './pattern.ts';
import { fmtDim, fmtShape, type Shape, shapesEqual, type sint } from './shape.ts';
import { argKey, type UOp, uopHooks } from './uop.ts';

export type Stage = 'tensor' | 'kernel' | 'linear';
export const STAGES: readonly Stage[] = ['tensor', 'kernel', 'linear'];

/** What a rule says of a node its pattern matches: true when valid, else what is wrong. */
export type SpecCheck = (u: UOp) => true | string;
/** A named rule: nodes matching the pattern are valid when the check passes. */
export type SpecRule = readonly [name: string, pat: UPat, check: SpecCheck];

// Helpers return a problem (a string) or undefined, so that a check reads `a(u) ?? b(u) ?? true`.
type Problem = string | undefined;

/** A check that passes when none of the helpers finds a problem (the first problem found is reported). */
const ok =
  (...problems: ((u: UOp) => Problem)[]): SpecCheck =>
  (u) => {
    for (const p of problems) {
      const r = p(u);
      if (r !== undefined) return r;
    }
    return true;
  };

/** A node of `op` whose sources are named in order (any sources when names is omitted); `more` allows extras. */
function form(op: Ops | readonly Ops[], names?: readonly string[], more = false): UPat {
  if (names === undefined) return new UPat({ op });
  return new UPat({ op, src: names.map((n) => UPat.var(n)), allowMore: more });
}

// --- naming nodes in messages ------------------------------------------------------------------------

const ref = (u: UOp) => `${opName(u.op)} #${u.id}`;
const refs = (us: readonly UOp[]) => us.map(ref).join(', ');
const fmtDevice = (d: Device) => (typeof d === 'string' ? d : `(${d.join(', ')})`);

function describe(u: UOp): string {
  const parts = [u.dtype.name];
  if (u.shape !== null) parts.push(`shape ${fmtShape(u.shape)}`);
  const d = u.device;
  if (d !== null) parts.push(`on ${fmtDevice(d)}`);
  if (u.arg !== null) {
    const a = argKey(u.op, u.arg);
    parts.push(`arg ${a.length > 60 ? `${a.slice(0, 57)}...` : a}`);
  }
  return `${ref(u)} (${parts.join(', ')})`;
}

function describeSources(u: UOp): string {
  if (u.src.length === 0) return 'none';
  const shown = u.src.slice(0, 6).map((s) => {
    const shape = s.shape === null ? '' : ` ${fmtShape(s.shape)}`;
    return `${ref(s)} ${s.dtype.name}${shape}`;
  });
  return shown.join(', ') + (u.src.length > 6 ? `, ... (${u.src.length} in all)` : '');
}

// --- what kind of node a source is -------------------------------------------------------------------

const isVariable = (u: UOp) => u.op === Ops.PARAM && typeof (u.arg as ArgOf<Ops.PARAM>).slot === 'string';
/** Memory: a BUFFER, a buffer view, or a PARAM standing for a buffer (not a symbolic variable). */
const isStorage = (u: UOp) =>
  u.op === Ops.BUFFER || u.op === Ops.BUFFERVIEW || (u.op === Ops.PARAM && !isVariable(u));

/** The storage a kernel addresses: a buffer, possibly ordered after writes by AFTER. */
function kernelBuffer(u: UOp): UOp | undefined {
  while (u.op === Ops.AFTER) u = u.src[0]!;
  return isStorage(u) ? u : undefined;
}

/** The storage a tensor-level write lands in: a buffer seen through views (movement ops) and AFTERs. */
function tensorTarget(u: UOp): UOp | undefined {
  while ((GroupOp.Movement.has(u.op) && u.op !== Ops.STACK) || u.op === Ops.AFTER) u = u.src[0]!;
  return isStorage(u) ? u : undefined;
}

/** Ops that are done for their effect: what SINK, GROUP, END bodies and BARRIERs hold. */
const SIDE_EFFECTS: ReadonlySet<Ops> = new Set([
  Ops.STORE,
  Ops.GROUP,
  Ops.END,
  Ops.CALL,
  Ops.BARRIER,
  Ops.ATOMICADD,
]);

const isValue = (u: UOp) => u.dtype !== dtypes.void && u.shape !== null;

function notValue(s: UOp, what: string): Problem {
  if (!isValue(s))
    return `${what} ${ref(s)} is not a value (${s.dtype === dtypes.void ? 'dtype void' : 'no shape'})`;
}

function sourcesAreValues(u: UOp, from = 0, what = 'source'): Problem {
  for (let i = from; i < u.src.length; i++) {
    const p = notValue(u.src[i]!, `${what} ${i - from}`);
    if (p !== undefined) return p;
  }
}

function sourcesAreSideEffects(u: UOp): Problem {
  const bad = u.src.find((s) => !SIDE_EFFECTS.has(s.op));
  if (bad !== undefined)
    return `${opName(u.op)} holds side effects (${[...SIDE_EFFECTS].map(opName).join(', ')}), got ${ref(bad)}`;
}

const isIndexScalar = (u: UOp) => u.dtype === dtypes.index && u.shape?.length === 0;

function indexScalar(u: UOp, what: string): Problem {
  if (!isIndexScalar(u))
    return `${what} must be an index-typed scalar, got ${ref(u)} of dtype ${u.dtype.name} and shape ${fmtShape(u.shape)}`;
}

function sameDevices(devices: readonly (Device | null)[]): boolean {
  const ds = devices.filter((d): d is Device => d !== null).map(fmtDevice);
  return ds.every((d) => d === ds[0]);
}

// --- arguments -----------------------------------------------------------------------------------------

function valueDType(d: unknown, what: string): Problem {
  if (!(d instanceof DType)) return `${what} must be a DType, got ${String(d)}`;
  if (d === dtypes.void || d.isPtr) return `${what} must be a value dtype, got ${d.name}`;
}

function scalarDType(d: unknown, what: string): Problem {
  return (
    valueDType(d, what) ??
    ((d as DType).count !== 1 ? `${what} must be a scalar dtype, got ${(d as DType).name}` : undefined)
  );
}

const isDeviceName = (d: unknown) => typeof d === 'string' && d !== '';
function deviceArg(d: unknown, what: string): Problem {
  const ok = isDeviceName(d) || (Array.isArray(d) && d.length > 0 && d.every(isDeviceName));
  if (!ok) return `${what} must be a device name or a non-empty tuple of names, got ${JSON.stringify(d)}`;
}

function addrspaceArg(a: unknown, allowed: readonly AddrSpace[]): Problem {
  if (!allowed.includes(a as AddrSpace))
    return `address space ${String(a)} is not allowed here; expected ${allowed.join(' or ')}`;
}

const isCount = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0;

/** A value as the dtype stores it (what UOp.const makes), or why there is none. */
function storedValue(dtype: DType, v: ConstValue): ConstValue | Error {
  try {
    return truncate(dtype, v);
  } catch (e) {
    return e as Error;
  }
}

function constValues(dtype: DType, values: readonly ConstValue[]): Problem {
  for (const v of values) {
    const stored = storedValue(dtype, v);
    if (stored instanceof Error) return `value ${String(v)} cannot be a ${dtype.name}: ${stored.message}`;
    if (!Object.is(stored, v))
      return `value ${String(v)} (${typeof v}) is not stored as a ${dtype.name} stores it (${String(stored)}); build constants with UOp.const`;
  }
}

// --- shape operands ------------------------------------------------------------------------------------

/** src[i] holds sizes or offsets: a STACK of index scalars or an index VCONST, none always negative. */
const shapeOperand =
  (i: number) =>
  (u: UOp): Problem => {
    const s = u.src[i]!;
    const what = `source ${i} (a shape operand)`;
    if (s.op === Ops.VCONST) {
      if (s.dtype !== dtypes.index) return `${what} must hold index values, got ${s.dtype.name}`;
      const bad = (s.arg as ArgOf<Ops.VCONST>).values.find((v) => !isCount(v));
      if (bad !== undefined)
        return `${what} holds ${String(bad)}; sizes and offsets are non-negative integers`;
      return;
    }
    if (s.op !== Ops.STACK) return `${what} must be a STACK of index scalars or a VCONST, got ${ref(s)}`;
    for (const [k, d] of s.src.entries()) {
      const p = indexScalar(d, `entry ${k} of ${what}`);
      if (p !== undefined) return p;
      if (d.vmax < 0)
        return `entry ${k} of ${what} (${fmtDim(d.op === Ops.CONST ? d.vmax : d)}) is always negative`;
    }
  };

const dimMin = (d: sint) => (typeof d === 'number' ? d : d.vmin);
const dimMax = (d: sint) => (typeof d === 'number' ? d : d.vmax);

// Construction checks numeric PAD/SHRINK bounds; symbolic ones are rejected here when they can never fit.
function padFits(u: UOp): Problem {
  const s = u.src[0]!.shape!;
  const offset = u.src[1]!.sizes;
  const to = u.src[2]!.sizes;
  for (let k = 0; k < s.length; k++)
    if (dimMin(offset[k]!) + dimMin(s[k]!) > dimMax(to[k]!))
      return `axis ${k}: size ${fmtDim(s[k]!)} at offset ${fmtDim(offset[k]!)} never fits in ${fmtDim(to[k]!)}`;
}

function shrinkFits(u: UOp): Problem {
  const s = u.src[0]!.shape!;
  const offset = u.src[1]!.sizes;
  const to = u.src[2]!.sizes;
  for (let k = 0; k < s.length; k++)
    if (dimMin(offset[k]!) + dimMin(to[k]!) > dimMax(s[k]!))
      return `axis ${k}: ${fmtDim(to[k]!)} elements from offset ${fmtDim(offset[k]!)} never fit in ${fmtDim(s[k]!)}`;
}

// --- source ops ----------------------------------------------------------------------------------------

const bufferArg =
  (addrspaces: readonly AddrSpace[]) =>
  (u: UOp): Problem => {
    const a = u.arg as ArgOf<Ops.BUFFER>;
    if (!isCount(a.slot)) return `slot must be a non-negative integer, got ${JSON.stringify(a.slot)}`;
    return (
      scalarDType(a.dtype, 'the dtype') ??
      deviceArg(a.device, 'the device') ??
      addrspaceArg(a.addrspace, addrspaces)
    );
  };

const paramArg =
  (addrspaces: readonly AddrSpace[]) =>
  (u: UOp): Problem => {
    const a = u.arg as ArgOf<Ops.PARAM>;
    if (!isCount(a.slot))
      return `slot ${JSON.stringify(a.slot)} is not a position (a non-negative integer); a PARAM named by a string is a symbolic variable and takes (STACK(), min, max)`;
    return (
      scalarDType(a.dtype, 'the dtype') ??
      (a.device === undefined ? undefined : deviceArg(a.device, 'the device')) ??
      addrspaceArg(a.addrspace ?? AddrSpace.GLOBAL, addrspaces)
    );
  };

function variable(u: UOp): true | string {
  const a = u.arg as ArgOf<Ops.PARAM>;
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
  return true;
}

function constant(u: UOp): true | string {
  const { value, dtype } = u.arg as ArgOf<Ops.CONST>;
  return (
    scalarDType(dtype, 'a CONST (a scalar; build vectors with STACK) dtype') ??
    constValues(dtype, [value]) ??
    true
  );
}

function vectorConstant(u: UOp): true | string {
  const { values, dtype } = u.arg as ArgOf<Ops.VCONST>;
  if (!Array.isArray(values) || values.length === 0)
    return 'a VCONST holds one or more values (the empty vector is STACK())';
  return scalarDType(dtype, 'the element dtype') ?? constValues(dtype, values) ?? true;
}

function bufferView(u: UOp): true | string {
  const src = u.src[0]!;
  const { size, dtype, offset } = u.arg as ArgOf<Ops.BUFFERVIEW>;
  if (!isStorage(src)) return `a BUFFERVIEW views a BUFFER, PARAM or BUFFERVIEW, got ${ref(src)}`;
  if (!isCount(size) || !isCount(offset))
    return `size and offset must be non-negative integers, got size ${size} and offset ${offset}`;
  const dp = scalarDType(dtype, 'the dtype');
  if (dp !== undefined) return dp;
  // the offset counted in bytes: the weaker of its two readings, so no valid view is refused
  const shape = src.shape!;
  if (shape.every((d) => typeof d === 'number')) {
    const bytes = shape.reduce((n: number, d) => n * (d as number), 1) * src.dtype.itemsize;
    if (offset + size * dtype.itemsize > bytes)
      return `a view of ${size} ${dtype.name} at offset ${offset} does not fit in ${ref(src)} (${bytes} bytes)`;
  }
  return true;
}

const rawBytes = (u: UOp) =>
  u.arg instanceof Uint8Array ? true : 'a BINARY holds its bytes as a Uint8Array in its arg';

// --- tensor-level ops ----------------------------------------------------------------------------------

const input = (u: UOp) => notValue(u.src[0]!, 'the input');

function stackElements(u: UOp): true | string {
  return (
    sourcesAreValues(u, 0, 'element') ??
    (u.src.some((s) => s.dtype !== u.src[0]!.dtype)
      ? `all elements must have one dtype, got ${u.src.map((s) => s.dtype.name).join(', ')}`
      : undefined) ??
    true
  );
}

function tensorIndices(u: UOp): Problem {
  const shape = u.src[0]!.shape!;
  for (let k = 1; k < u.src.length; k++) {
    const i = u.src[k]!;
    const dim = shape[k - 1]!;
    if (i.vmin > dimMax(dim) - 1 || i.vmax < 0)
      return `index ${k - 1} (${ref(i)}, in [${i.vmin}, ${i.vmax}]) is always outside axis ${k - 1} of size ${fmtDim(dim)}`;
  }
}

function onDeviceTuple(u: UOp): Problem {
  const d = u.src[0]!.device;
  if (!Array.isArray(d))
    return `REPLICATED marks a value spread over several devices; ${ref(u.src[0]!)} is on ${d === null ? 'no device' : fmtDevice(d)}`;
}

const REDUCE_OPS: readonly Ops[] = [Ops.ADD, Ops.MAX, Ops.MUL];
function reduceOp(u: UOp): Problem {
  const op = (u.arg as ArgOf<Ops.REDUCE>).op;
  if (!REDUCE_OPS.includes(op))
    return `a REDUCE reduces with ${REDUCE_OPS.map(opName).join(', ')}, got ${Ops[op] ?? String(op)}`;
}

/** The PARAMs (by slot) and BUFFERs a function body uses, not looking into the bodies of nested calls. */
function bodyLeaves(body: UOp): { params: UOp[]; buffers: UOp[] } {
  const params: UOp[] = [];
  const buffers: UOp[] = [];
  const seen = new Set<UOp>([body]);
  const stack = [body];
  while (stack.length) {
    const u = stack.pop()!;
    if (u.op === Ops.PARAM && !isVariable(u)) params.push(u);
    if (u.op === Ops.BUFFER) buffers.push(u);
    const inner = u.op === Ops.FUNCTION || u.op === Ops.CALL ? u.src.slice(1) : u.src;
    for (const s of inner)
      if (!seen.has(s)) {
        seen.add(s);
        stack.push(s);
      }
  }
  return { params, buffers };
}

const sameKnownShape = (a: Shape, b: Shape) =>
  a.length === b.length && a.every((d, k) => typeof d !== 'number' || typeof b[k] !== 'number' || d === b[k]);

function functionCall(u: UOp): true | string {
  const args = u.src.slice(1);
  const p = sourcesAreValues(u, 1, 'argument');
  if (p !== undefined) return p;
  const { params, buffers } = bodyLeaves(u.src[0]!);
  if (buffers.length > 0)
    return `the body uses ${refs(buffers)}; a function body holds only PARAMs: pass buffers as arguments`;
  for (const param of params) {
    const slot = (param.arg as ArgOf<Ops.PARAM>).slot as number;
    const arg = args[slot];
    if (arg === undefined)
      return `the body uses PARAM ${slot}, but ${opName(u.op)} passes ${args.length} argument${args.length === 1 ? '' : 's'}`;
    if (arg.dtype !== param.dtype)
      return `PARAM ${slot} has dtype ${param.dtype.name}, but argument ${slot} (${ref(arg)}) has ${arg.dtype.name}`;
    if (!sameKnownShape(param.shape!, arg.shape!))
      return `PARAM ${slot} has shape ${fmtShape(param.shape)}, but argument ${slot} (${ref(arg)}) has ${fmtShape(arg.shape)}`;
  }
  return true;
}

function tensorLoad(u: UOp): true | string {
  const a = u.arg as ArgOf<Ops.LOAD>;
  return (
    input(u) ??
    (a?.device === undefined ? undefined : deviceArg(a.device, 'the target device')) ??
    (a?.addrspace === undefined ? undefined : addrspaceArg(a.addrspace, [AddrSpace.GLOBAL])) ??
    true
  );
}

function tensorStore(u: UOp): true | string {
  const [buf, val, gate] = u.src as [UOp, UOp, UOp | undefined];
  if (u.src.length > 3) return `a STORE takes (buffer, value, gate?), got ${u.src.length} sources`;
  if (tensorTarget(buf) === undefined)
    return `the target ${ref(buf)} is not a buffer or a view of one; a STORE writes into a BUFFER or PARAM`;
  const p = notValue(val, 'the value');
  if (p !== undefined) return p;
  if (val.dtype !== buf.dtype)
    return `the value has dtype ${val.dtype.name} but the buffer holds ${buf.dtype.name}; CAST the value first`;
  if (!sameDevices([buf.device, val.device]))
    return `the value is on ${fmtDevice(val.device!)} but the buffer on ${fmtDevice(buf.device!)}; COPY the value first`;
  if (gate !== undefined && gate.shape!.length !== 0 && !shapesEqual(gate.shape!, buf.shape!))
    return `the gate has shape ${fmtShape(gate.shape)}; it must be () or the buffer's shape ${fmtShape(buf.shape)}`;
  return true;
}

function tensorAfter(u: UOp): true | string {
  if (tensorTarget(u.src[0]!) === undefined)
    return `AFTER passes on a buffer (or a view of one) once its dependencies ran, got ${ref(u.src[0]!)}`;
  return true;
}

function tensorSinkSources(u: UOp): true | string {
  const bad = u.src.find((s) => !SIDE_EFFECTS.has(s.op) && !isValue(s));
  if (bad !== undefined) return `a SINK collects values to realize and side effects, got ${describe(bad)}`;
  return true;
}

// --- elementwise ops: the same dtype rules in every stage, with the stage's rule for operands ------------

const operandDTypes = (u: UOp) => u.src.map((s) => s.dtype.name).join(', ');

function sameDTypes(u: UOp): Problem {
  if (u.src.some((s) => s.dtype !== u.src[0]!.dtype))
    return `operands must have one dtype, got ${operandDTypes(u)}; cast them first`;
}

const dtypeKind =
  (test: (d: DType) => boolean, what: string) =>
  (u: UOp): Problem =>
    test(u.src[0]!.dtype) ? undefined : `${opName(u.op)} needs ${what} operands, got ${operandDTypes(u)}`;
const floatOperands = dtypeKind((d) => d.isFloat, 'float');
const boolOperand = dtypeKind((d) => d.isBool, 'bool');
const intOrBoolOperands = dtypeKind((d) => d.isInt || d.isBool, 'integer or bool');
const uint64Operands = dtypeKind((d) => d.base === dtypes.uint64, 'uint64');
const notBool = (u: UOp): Problem =>
  u.src[0]!.dtype.isBool ? 'NEG of a bool: use NOT (CMPNE x, true) instead' : undefined;

function castTarget(u: UOp): Problem {
  const to = u.arg as DType;
  return (
    valueDType(to, `the target dtype of ${opName(u.op)}`) ??
    (u.op === Ops.CAST && to.count !== u.src[0]!.dtype.count
      ? `CAST keeps the vector width: ${u.src[0]!.dtype.name} cannot become ${to.name}`
      : undefined)
  );
}

function whereOperands(u: UOp): Problem {
  const [cond, a, b] = u.src as [UOp, UOp, UOp];
  if (!cond.dtype.isBool) return `the condition must be bool, got ${cond.dtype.name}`;
  if (a.dtype !== b.dtype)
    return `both branches must have one dtype, got ${a.dtype.name} and ${b.dtype.name}`;
}

/** The elementwise rules; `operands` says what a stage accepts as an operand. */
function elementwiseRules(operands: (u: UOp) => Problem): SpecRule[] {
  const x = ['x'];
  const ab = ['a', 'b'];
  return [
    [
      'float-unary',
      form([Ops.RECIP, Ops.TRUNC, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT], x),
      ok(operands, floatOperands),
    ],
    ['neg', form(Ops.NEG, x), ok(operands, notBool)],
    ['not', form(Ops.NOT, x), ok(operands, boolOperand)],
    ['cast', form([Ops.CAST, Ops.BITCAST], x), ok(operands, castTarget)],
    ['arithmetic', form([Ops.ADD, Ops.MUL, Ops.MAX, Ops.SUB], ab), ok(operands, sameDTypes)],
    ['float-binary', form([Ops.DIV, Ops.POW], ab), ok(operands, sameDTypes, floatOperands)],
    [
      'integer-binary',
      form([Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR], ab),
      ok(operands, sameDTypes, intOrBoolOperands),
    ],
    ['comparison', form([...GroupOp.Comparison], ab), ok(operands, sameDTypes)],
    ['where', form(Ops.WHERE, ['cond', 'a', 'b']), ok(operands, whereOperands)],
    ['mulacc', form(Ops.MULACC, ['a', 'b', 'c']), ok(operands, sameDTypes)],
    ['threefry', form(Ops.THREEFRY, ['x', 'key']), ok(operands, sameDTypes, uint64Operands)],
  ];
}

function tensorOperands(u: UOp): Problem {
  const p = sourcesAreValues(u, 0, 'operand');
  if (p !== undefined) return p;
  if (!sameDevices(u.src.map((s) => s.device)))
    return `operands are on different devices (${u.src.map((s) => (s.device === null ? 'none' : fmtDevice(s.device))).join(', ')}); COPY them to one device first`;
}

/** The tensor graph a front end builds: shaped values on devices, movement ops, functions, assigns. */
export const tensorSpec: readonly SpecRule[] = [
  ['buffer', form(Ops.BUFFER, ['shape']), ok(shapeOperand(0), bufferArg([AddrSpace.GLOBAL]))],
  ['bufferview', form(Ops.BUFFERVIEW, ['buf']), bufferView],
  ['param', form(Ops.PARAM, ['shape']), ok(shapeOperand(0), paramArg([AddrSpace.GLOBAL]))],
  ['variable', form(Ops.PARAM, ['shape', 'min', 'max']), variable],
  ['const', form(Ops.CONST, []), constant],
  ['vconst', form(Ops.VCONST, []), vectorConstant],
  ['binary', form(Ops.BINARY, []), rawBytes],
  ['permute', form(Ops.PERMUTE, ['x']), ok(input)],
  ['flip', form(Ops.FLIP, ['x']), ok(input)],
  ['reshape', form(Ops.RESHAPE, ['x', 'shape']), ok(input, shapeOperand(1))],
  ['expand', form(Ops.EXPAND, ['x', 'shape']), ok(input, shapeOperand(1))],
  ['pad', form(Ops.PAD, ['x', 'offset', 'shape']), ok(input, shapeOperand(1), shapeOperand(2), padFits)],
  [
    'shrink',
    form(Ops.SHRINK, ['x', 'offset', 'shape']),
    ok(input, shapeOperand(1), shapeOperand(2), shrinkFits),
  ],
  ['index', form(Ops.INDEX, ['x'], true), ok(input, tensorIndices)],
  ['stack', form(Ops.STACK), stackElements],
  ['replicated', form(Ops.REPLICATED, ['x']), ok(input, onDeviceTuple)],
  ['reduce', form(Ops.REDUCE, ['x']), ok(input, reduceOp)],
  [
    'function',
    new UPat({ op: [Ops.FUNCTION, Ops.CALL], src: [UPat.op(Ops.TUPLE).named('body')], allowMore: true }),
    functionCall,
  ],
  ['tuple', form(Ops.TUPLE), ok((u) => sourcesAreValues(u, 0, 'element'))],
  [
    'gettuple',
    new UPat({ op: Ops.GETTUPLE, src: [UPat.op([Ops.FUNCTION, Ops.CALL, Ops.TUPLE])] }),
    () => true,
  ],
  ['load', form(Ops.LOAD, ['x']), tensorLoad],
  ['copy', form(Ops.COPY, ['x']), ok(input, (u) => deviceArg(u.arg, 'the target device'))],
  ['store', form(Ops.STORE, ['buf', 'val'], true), tensorStore],
  ['after', form(Ops.AFTER, ['buf', 'dep'], true), tensorAfter],
  ['marker', form([...GroupOp.Marker], ['x']), ok(input)],
  ['group', form(Ops.GROUP), ok(sourcesAreSideEffects)],
  ['sink', form(Ops.SINK), tensorSinkSources],
  ...elementwiseRules(tensorOperands),
];

// --- kernel-level ops ----------------------------------------------------------------------------------

const ALL_ADDRSPACES = Object.values(AddrSpace);

/** A kernel value: neither a buffer nor an INDEX address, which must be loaded first. */
function kernelValue(s: UOp, what: string): Problem {
  const p = notValue(s, what);
  if (p !== undefined) return p;
  if (s.op === Ops.INDEX) return `${what} ${ref(s)} is an address into a buffer, not a value; LOAD it first`;
  if (kernelBuffer(s) !== undefined) return `${what} ${ref(s)} is a buffer, not a value; INDEX and LOAD it`;
}

function kernelOperands(u: UOp): Problem {
  for (const [i, s] of u.src.entries()) {
    const p = kernelValue(s, `operand ${i}`);
    if (p !== undefined) return p;
  }
}

function kernelStack(u: UOp): true | string {
  for (const [i, s] of u.src.entries()) {
    const p = kernelValue(s, `element ${i}`);
    if (p !== undefined) return p;
    if (s.shape!.length !== 0)
      return `element ${i} (${ref(s)}) has shape ${fmtShape(s.shape)}; a kernel STACK joins scalars`;
  }
  return stackElements(u);
}

function gateProblem(gate: UOp | undefined): Problem {
  if (gate !== undefined && !(gate.dtype === dtypes.bool && gate.shape?.length === 0))
    return `the gate must be a bool scalar, got ${ref(gate)} of dtype ${gate.dtype.name} and shape ${fmtShape(gate.shape)}`;
}

function kernelIndex(u: UOp): true | string {
  const [buf, ...idx] = u.src as [UOp, ...UOp[]];
  if (kernelBuffer(buf) === undefined)
    return `a kernel INDEX addresses a buffer (a PARAM or BUFFER, or an AFTER of one), got ${ref(buf)}`;
  if (idx.length !== buf.shape!.length)
    return `${idx.length} indices for a buffer of shape ${fmtShape(buf.shape)}; give one index per axis`;
  for (const [k, i] of idx.entries()) {
    const p = indexScalar(i, `index ${k}`);
    if (p !== undefined) return p;
  }
  return true;
}

const isAddress = (u: UOp) => u.op === Ops.INDEX;

function kernelLoad(u: UOp): true | string {
  const [index, alt, gate] = u.src as [UOp, UOp | undefined, UOp | undefined];
  if (!isAddress(index))
    return `a kernel LOAD reads through an INDEX, got ${ref(index)}; INDEX the buffer first`;
  if (u.src.length === 2 || u.src.length > 3)
    return `a LOAD takes (index) or (index, alt, gate), got ${u.src.length} sources`;
  if (alt !== undefined) {
    const p = kernelValue(alt, 'the alternative');
    if (p !== undefined) return p;
    if (alt.dtype !== u.dtype) return `the alternative has dtype ${alt.dtype.name}, the load ${u.dtype.name}`;
  }
  const g = gateProblem(gate);
  if (g !== undefined) return g;
  if ((u.arg as ArgOf<Ops.LOAD>)?.device !== undefined)
    return 'a kernel LOAD cannot change device; devices change between kernels (COPY)';
  return true;
}

function kernelStore(u: UOp): true | string {
  const [index, val, gate] = u.src as [UOp, UOp, UOp | undefined];
  if (!isAddress(index))
    return `a kernel STORE writes through an INDEX, got ${ref(index)}; INDEX the buffer first`;
  if (u.src.length > 3) return `a STORE takes (index, value, gate?), got ${u.src.length} sources`;
  const p = kernelValue(val, 'the value') ?? gateProblem(gate);
  if (p !== undefined) return p;
  if (val.dtype !== index.dtype)
    return `the value has dtype ${val.dtype.name} but the buffer holds ${index.dtype.name}; CAST the value first`;
  return true;
}

function atomicAdd(u: UOp): true | string {
  const [index, val] = u.src as [UOp, UOp];
  if (!isAddress(index)) return `ATOMICADD adds through an INDEX, got ${ref(index)}`;
  const p = kernelValue(val, 'the value');
  if (p !== undefined) return p;
  if (val.dtype !== index.dtype)
    return `the value has dtype ${val.dtype.name} but the buffer holds ${index.dtype.name}`;
  return true;
}

const AXIS_TYPES: readonly string[] = Object.values(AxisType);
function range(u: UOp): true | string {
  const { id, type } = u.arg as ArgOf<Ops.RANGE>;
  if (!isCount(id)) return `the range id must be a non-negative integer, got ${JSON.stringify(id)}`;
  if (!AXIS_TYPES.includes(type)) return `the axis type must be one of ${AXIS_TYPES.join(', ')}, got ${type}`;
  return indexScalar(u.src[0]!, 'the bound') ?? true;
}

function distinctRanges(rs: readonly UOp[], owner: string): Problem {
  const bad = rs.find((r) => r.op !== Ops.RANGE);
  if (bad !== undefined) return `${owner} lists RANGEs after its first source, got ${ref(bad)}`;
  if (new Set(rs).size !== rs.length) return `${owner} lists a RANGE twice (${refs(rs)})`;
}

function end(u: UOp): true | string {
  const body = u.src[0]!;
  if (!SIDE_EFFECTS.has(body.op))
    return `the body of a loop is a side effect (${[...SIDE_EFFECTS].map(opName).join(', ')}), got ${ref(body)}`;
  return distinctRanges(u.src.slice(1), 'END') ?? true;
}

const REDUCE_AXES: readonly AxisType[] = [AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL];
function kernelReduce(u: UOp): true | string {
  const ranges = u.src.slice(1);
  const p = kernelValue(u.src[0]!, 'the input') ?? reduceOp(u) ?? distinctRanges(ranges, 'REDUCE');
  if (p !== undefined) return p;
  if ((u.arg as ArgOf<Ops.REDUCE>).axes.length !== 0)
    return 'a kernel REDUCE reduces over its RANGE sources; its axes must be empty';
  const loop = ranges.find((r) => !REDUCE_AXES.includes((r.arg as ArgOf<Ops.RANGE>).type));
  if (loop !== undefined)
    return `${ref(loop)} is a ${(loop.arg as ArgOf<Ops.RANGE>).type} range; a REDUCE runs over ${REDUCE_AXES.join(', ')} ranges`;
  return true;
}

function special(u: UOp): true | string {
  if (typeof u.arg !== 'string' || u.arg === '')
    return `a SPECIAL is named (gidx0, lidx1, ...), got ${JSON.stringify(u.arg)}`;
  return indexScalar(u.src[0]!, 'the bound') ?? true;
}

function wmma(u: UOp): true | string {
  const { name, dims, dtypeIn, dtypeOut } = u.arg as ArgOf<Ops.WMMA>;
  const [a, b, acc] = u.src as [UOp, UOp, UOp];
  if (typeof name !== 'string' || name === '') return 'a WMMA names its tensor core config';
  if (!Array.isArray(dims) || dims.length !== 3 || !dims.every((d) => isCount(d) && d > 0))
    return `WMMA dims are three positive integers (N, M, K), got ${JSON.stringify(dims)}`;
  const p = kernelOperands(u);
  if (p !== undefined) return p;
  if (a.dtype.base !== dtypeIn || b.dtype.base !== dtypeIn)
    return `the inputs must be ${dtypeIn.name}, got ${a.dtype.name} and ${b.dtype.name}`;
  if (acc.dtype.base !== dtypeOut) return `the accumulator must be ${dtypeOut.name}, got ${acc.dtype.name}`;
  return true;
}

function custom(u: UOp): true | string {
  const { fmt, dtype } = u.arg as ArgOf<Ops.CUSTOM>;
  if (typeof fmt !== 'string' || fmt === '') return 'a CUSTOM holds its code as a non-empty fmt string';
  return dtype instanceof DType ? true : `the dtype must be a DType, got ${String(dtype)}`;
}

function kernelAfter(u: UOp): true | string {
  return notValue(u.src[0]!, 'source 0') ?? true;
}

/** Rules shared by kernels and linear programs. */
const codegenRules: readonly SpecRule[] = [
  ['buffer', form(Ops.BUFFER, ['shape']), ok(shapeOperand(0), bufferArg(ALL_ADDRSPACES))],
  ['param', form(Ops.PARAM, ['shape']), ok(shapeOperand(0), paramArg(ALL_ADDRSPACES))],
  ['variable', form(Ops.PARAM, ['shape', 'min', 'max']), variable],
  ['const', form(Ops.CONST, []), constant],
  ['vconst', form(Ops.VCONST, []), vectorConstant],
  ['stack', form(Ops.STACK), kernelStack],
  ['index', form(Ops.INDEX, ['buf'], true), kernelIndex],
  ['load', form(Ops.LOAD, ['index'], true), kernelLoad],
  ['store', form(Ops.STORE, ['index', 'val'], true), kernelStore],
  ['atomicadd', form(Ops.ATOMICADD, ['index', 'val']), atomicAdd],
  ['range', form(Ops.RANGE, ['bound']), range],
  ['end', form(Ops.END, ['body', 'range'], true), end],
  ['after', form(Ops.AFTER, ['buf', 'dep'], true), kernelAfter],
  ['group', form(Ops.GROUP), ok(sourcesAreSideEffects)],
  ['special', form(Ops.SPECIAL, ['bound']), special],
  ['barrier', form(Ops.BARRIER), ok(sourcesAreSideEffects)],
  ['wmma', form(Ops.WMMA, ['a', 'b', 'acc']), wmma],
  ['custom', form(Ops.CUSTOM), (u) => kernelOperands(u) ?? custom(u)],
  ...elementwiseRules(kernelOperands),
];

/** A kernel after rangeify: scalar values over RANGEs, buffers read and written through INDEX. */
export const kernelSpec: readonly SpecRule[] = [
  ...codegenRules,
  ['reduce', form(Ops.REDUCE, ['x', 'range'], true), kernelReduce],
  ['sink', form(Ops.SINK), ok(sourcesAreSideEffects)],
];

// --- linear programs -----------------------------------------------------------------------------------

/** Instructions in order: sources first, blocks (RANGE..END, IF..ENDIF) properly nested and closed. */
function linearOrder(u: UOp): true | string {
  const pos = new Map<UOp, number>();
  for (const [i, x] of u.src.entries()) {
    const first = pos.get(x);
    if (first !== undefined) return `${ref(x)} appears twice in the list (at ${first} and ${i})`;
    pos.set(x, i);
  }
  const open: UOp[] = [];
  for (const [i, x] of u.src.entries()) {
    if (x.op === Ops.LINEAR) return `instruction ${i} is a nested LINEAR; a LINEAR lists instructions only`;
    for (const s of x.src) {
      const p = pos.get(s);
      if (p === undefined) return `instruction ${i} (${ref(x)}) uses ${ref(s)}, which is not in the list`;
      if (p > i)
        return `instruction ${i} (${ref(x)}) uses ${ref(s)}, which comes later (at ${p}); sources must come first`;
    }
    if (x.op === Ops.RANGE || x.op === Ops.IF) open.push(x);
    else if (x.op === Ops.END || x.op === Ops.ENDIF) {
      const closes = x.op === Ops.END ? x.src.slice(1) : x.src;
      const innermost = open.slice(Math.max(0, open.length - closes.length));
      if (closes.some((c) => !innermost.includes(c)))
        return `instruction ${i} (${ref(x)}) closes ${refs(closes)}, but the innermost open block${innermost.length === 1 ? ' is' : 's are'} ${innermost.length ? refs(innermost) : 'none'}`;
      open.length -= closes.length;
    }
  }
  if (open.length > 0)
    return `${refs(open)} ${open.length === 1 ? 'is' : 'are'} never closed (a RANGE needs a later END, an IF a later ENDIF)`;
  return true;
}

/** A linearized kernel: a LINEAR listing every instruction in execution order. */
export const linearSpec: readonly SpecRule[] = [
  ...codegenRules,
  ['if', form(Ops.IF, ['gate']), (u) => gateProblem(u.src[0]) ?? true],
  ['endif', new UPat({ op: Ops.ENDIF, src: [UPat.op(Ops.IF)] }), () => true],
  ['linear', form(Ops.LINEAR), linearOrder],
];

export const specs: Readonly<Record<Stage, readonly SpecRule[]>> = {
  tensor: tensorSpec,
  kernel: kernelSpec,
  linear: linearSpec,
};

/** The op a stage's graph must have at its root. */
const ROOTS: Readonly<Partial<Record<Stage, Ops>>> = { kernel: Ops.SINK, linear: Ops.LINEAR };

// --- verification --------------------------------------------------------------------------------------

// Rules by op, so a node is only tried against the rules that can match it.
const rulesByOp = Object.fromEntries(
  STAGES.map((stage) => {
    const byOp = new Map<Ops, SpecRule[]>();
    for (const rule of specs[stage]) {
      if (rule[1].ops === undefined) throw new Error(`spec rule '${rule[0]}' must name its ops`);
      for (const op of rule[1].ops) byOp.set(op, [...(byOp.get(op) ?? []), rule]);
    }
    return [stage, byOp];
  }),
) as Record<Stage, Map<Ops, SpecRule[]>>;

/** Why a stage refuses u, or undefined when one of its rules accepts it. */
function rejection(u: UOp, stage: Stage): string | undefined {
  const rules = rulesByOp[stage].get(u.op);
  if (rules === undefined) {
    const others = STAGES.filter((s) => rulesByOp[s].has(u.op));
    if (others.length === 0) return `no stage has a rule for ${opName(u.op)}`;
    const where = `${others.join(' and ')} stage${others.length > 1 ? 's' : ''}`;
    return `the ${stage} stage has no rule for ${opName(u.op)} (it belongs to the ${where})`;
  }
  const failures: string[] = [];
  for (const [name, pat, check] of rules) {
    if (pat.match(u) === undefined) continue;
    const r = check(u);
    if (r === true) return undefined;
    failures.push(`rule '${name}': ${r}`);
  }
  if (failures.length) return failures.join('\n  ');
  const n = u.src.length;
  return `${opName(u.op)} with ${n} source${n === 1 ? '' : 's'} fits no rule of the ${stage} stage: ${rules.map(([name, pat]) => `'${name}' expects ${pat}`).join('; ')}`;
}

function invalid(header: string, u: UOp, why: string): Error {
  return new Error(`${header}: invalid ${describe(u)}\n  sources: ${describeSources(u)}\n  ${why}`);
}

/** Checks every node of the graph under `sink` against the stage's rules; throws on the first invalid one. */
export function verify(sink: UOp, stage: Stage): void {
  if (!STAGES.includes(stage))
    throw new Error(`verify: unknown stage '${stage}'; stages are ${STAGES.join(', ')}`);
  const root = ROOTS[stage];
  if (root !== undefined && sink.op !== root)
    throw invalid(`${stage} spec`, sink, `the root of a ${stage} graph must be a ${opName(root)}`);
  // sources come before their users, so the first invalid node found is the deepest cause
  for (const u of sink.toposort()) {
    const why = rejection(u, stage);
    if (why !== undefined) throw invalid(`${stage} spec`, u, why);
  }
}

/** Verifies at a stage boundary when SPEC >= 1 (the compiler's stages call this). */
export function verifyStage(sink: UOp, stage: Stage): void {
  if (SPEC.value >= 1) verify(sink, stage);
}

/** Checks one node against every stage (valid if some stage accepts it); UOp.make calls this when SPEC >= 2. */
export function verifyNode(u: UOp): void {
  const reasons = new Map<string, Stage[]>();
  for (const stage of STAGES) {
    const why = rejection(u, stage);
    if (why === undefined) return;
    reasons.set(why, [...(reasons.get(why) ?? []), stage]);
  }
  const lines = [...reasons].map(([why, stages]) => `${stages.join(', ')}: ${why}`);
  throw invalid('spec (SPEC=2, at construction)', u, `no stage accepts it:\n  ${lines.join('\n  ')}`);
}

uopHooks.verifyNode = verifyNode;
