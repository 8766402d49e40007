// Spec rules of the tensor graph a front end builds: shaped values on devices, movement ops, functions, assigns.
import { AddrSpace } from '../../dtype.ts';
import { type Device, GroupOp, Ops, opName } from '../ops.ts';
import { UPat } from '../pattern.ts';
import { fmtDim, fmtShape, type Shape, shapesEqual, type sint } from '../shape.ts';
import type { UOp } from '../uop.ts';
import {
  addrspaceArg,
  all,
  atMost,
  describe,
  deviceArg,
  elementwiseRules,
  first,
  fmtDevice,
  form,
  input,
  isCount,
  isStorage,
  isValue,
  isVariable,
  notValue,
  type Problem,
  reduceOp,
  ref,
  refs,
  SIDE_EFFECTS,
  type SpecRule,
  scalarDType,
  shapeOperands,
  sourceRules,
  sourcesAreSideEffects,
  sourcesAreValues,
} from './common.ts';

/** The storage a write lands in: a buffer seen through views (movement ops) and AFTERs. */
function target(u: UOp): UOp | undefined {
  while ((GroupOp.Movement.has(u.op) && u.op !== Ops.STACK) || u.op === Ops.AFTER) u = u.src[0]!;
  return isStorage(u) ? u : undefined;
}

function sameDevices(devices: readonly (Device | null)[]): boolean {
  const ds = devices.filter((d): d is Device => d !== null).map(fmtDevice);
  return ds.every((d) => d === ds[0]);
}

function bufferView(u: UOp): Problem {
  const src = u.src[0]!;
  const { size, dtype, offset } = u.argOf(Ops.BUFFERVIEW);
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
}

const dimMin = (d: sint) => (typeof d === 'number' ? d : d.vmin);
const dimMax = (d: sint) => (typeof d === 'number' ? d : d.vmax);

/** PAD places the input in a larger window, SHRINK a window in the input; construction checks numeric sizes. */
function windowFits(u: UOp): Problem {
  const s = u.src[0]!.shape!;
  const [offset, to] = [u.src[1]!.sizes, u.src[2]!.sizes];
  const [inner, outer] = u.op === Ops.PAD ? [s, to] : [to, s];
  for (let k = 0; k < s.length; k++)
    if (dimMin(offset[k]!) + dimMin(inner[k]!) > dimMax(outer[k]!))
      return `axis ${k}: ${fmtDim(inner[k]!)} elements at offset ${fmtDim(offset[k]!)} never fit in ${fmtDim(outer[k]!)}`;
}

function indices(u: UOp): Problem {
  const shape = u.src[0]!.shape!;
  return first(u.src.slice(1), (i, k) =>
    i.vmin > dimMax(shape[k]!) - 1 || i.vmax < 0
      ? `index ${k} (${ref(i)}, in [${i.vmin}, ${i.vmax}]) is always outside axis ${k} of size ${fmtDim(shape[k]!)}`
      : undefined,
  );
}

function onDeviceTuple(u: UOp): Problem {
  const d = u.src[0]!.device;
  if (!Array.isArray(d))
    return `REPLICATED marks a value spread over several devices; ${ref(u.src[0]!)} is on ${d === null ? 'no device' : fmtDevice(d)}`;
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

function functionCall(u: UOp): Problem {
  const args = u.src.slice(1);
  const { params, buffers } = bodyLeaves(u.src[0]!);
  if (buffers.length > 0)
    return `the body uses ${refs(buffers)}; a function body holds only PARAMs: pass buffers as arguments`;
  return first(params, (param) => {
    const slot = param.argOf(Ops.PARAM).slot as number;
    const arg = args[slot];
    if (arg === undefined)
      return `the body uses PARAM ${slot}, but ${opName(u.op)} passes ${args.length} argument${args.length === 1 ? '' : 's'}`;
    if (arg.dtype !== param.dtype)
      return `PARAM ${slot} has dtype ${param.dtype.name}, but argument ${slot} (${ref(arg)}) has ${arg.dtype.name}`;
    if (!sameKnownShape(param.shape!, arg.shape!))
      return `PARAM ${slot} has shape ${fmtShape(param.shape)}, but argument ${slot} (${ref(arg)}) has ${fmtShape(arg.shape)}`;
  });
}

function loadArg(u: UOp): Problem {
  const a = u.argOf(Ops.LOAD);
  return (
    (a?.device === undefined ? undefined : deviceArg(a.device, 'the target device')) ??
    (a?.addrspace === undefined ? undefined : addrspaceArg(a.addrspace, [AddrSpace.GLOBAL]))
  );
}

// construction has checked the value's dtype and shape against the buffer's
function store(u: UOp): Problem {
  const [buf, val, gate] = u.src as [UOp, UOp, UOp | undefined];
  if (target(buf) === undefined)
    return `the target ${ref(buf)} is not a buffer or a view of one; a STORE writes into a BUFFER or PARAM`;
  const p = notValue(val, 'the value');
  if (p !== undefined) return p;
  if (!sameDevices([buf.device, val.device]))
    return `the value is on ${fmtDevice(val.device!)} but the buffer on ${fmtDevice(buf.device!)}; COPY the value first`;
  if (gate !== undefined && gate.shape!.length !== 0 && !shapesEqual(gate.shape!, buf.shape!))
    return `the gate has shape ${fmtShape(gate.shape)}; it must be () or the buffer's shape ${fmtShape(buf.shape)}`;
}

function after(u: UOp): Problem {
  if (target(u.src[0]!) === undefined)
    return `AFTER passes on a buffer (or a view of one) once its dependencies ran, got ${ref(u.src[0]!)}`;
}

function sinkSources(u: UOp): Problem {
  const bad = u.src.find((s) => !SIDE_EFFECTS.has(s.op) && !isValue(s));
  if (bad !== undefined) return `a SINK collects values to realize and side effects, got ${describe(bad)}`;
}

function operands(u: UOp): Problem {
  const p = sourcesAreValues('operand')(u);
  if (p !== undefined) return p;
  if (!sameDevices(u.src.map((s) => s.device)))
    return `operands are on different devices (${u.src.map((s) => (s.device === null ? 'none' : fmtDevice(s.device))).join(', ')}); COPY them to one device first`;
}

const elements = sourcesAreValues('element');

export const tensorSpec: readonly SpecRule[] = [
  ...sourceRules([AddrSpace.GLOBAL]),
  ['bufferview', form(Ops.BUFFERVIEW, ['buf']), bufferView],
  [
    'binary',
    form(Ops.BINARY, []),
    (u) => (u.arg instanceof Uint8Array ? undefined : 'a BINARY holds its bytes as a Uint8Array in its arg'),
  ],
  ['permute', form(Ops.PERMUTE, ['x']), input],
  ['flip', form(Ops.FLIP, ['x']), input],
  ['reshape', form(Ops.RESHAPE, ['x', 'shape']), all(input, shapeOperands(1))],
  ['expand', form(Ops.EXPAND, ['x', 'shape']), all(input, shapeOperands(1))],
  ['pad', form(Ops.PAD, ['x', 'offset', 'shape']), all(input, shapeOperands(1, 2), windowFits)],
  ['shrink', form(Ops.SHRINK, ['x', 'offset', 'shape']), all(input, shapeOperands(1, 2), windowFits)],
  ['index', form(Ops.INDEX, ['x'], true), all(input, indices)],
  ['stack', form(Ops.STACK), elements],
  ['replicated', form(Ops.REPLICATED, ['x']), all(input, onDeviceTuple)],
  ['reduce', form(Ops.REDUCE, ['x']), all(input, reduceOp)],
  [
    'function',
    new UPat({ op: [Ops.FUNCTION, Ops.CALL], src: [UPat.op(Ops.TUPLE).named('body')], allowMore: true }),
    all(sourcesAreValues('argument', 1), functionCall),
  ],
  ['tuple', form(Ops.TUPLE), elements],
  ['gettuple', form(Ops.GETTUPLE, ['tuple']), () => undefined],
  ['load', form(Ops.LOAD, ['x']), all(input, loadArg)],
  ['copy', form(Ops.COPY, ['x']), all(input, (u) => deviceArg(u.arg, 'the target device'))],
  [
    'store',
    form(Ops.STORE, ['buf', 'val'], true),
    all(atMost(3, 'a STORE takes (buffer, value, gate?)'), store),
  ],
  ['after', form(Ops.AFTER, ['buf', 'dep'], true), after],
  ['marker', form([...GroupOp.Marker], ['x']), input],
  ['group', form(Ops.GROUP), sourcesAreSideEffects],
  ['sink', form(Ops.SINK), sinkSources],
  ...elementwiseRules(operands),
];
