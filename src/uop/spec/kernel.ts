// Spec rules of a kernel after rangeify: scalar values over RANGEs, buffers read and written through INDEX.
import { AddrSpace, DType, dtypes } from '../../dtype.ts';
import { AxisType, Ops, opName } from '../ops.ts';
import { fmtShape } from '../shape.ts';
import type { UOp } from '../uop.ts';
import {
  all,
  atMost,
  bodyIsSideEffect,
  elementwiseRules,
  first,
  form,
  gateProblem,
  indexScalar,
  isCount,
  isStorage,
  notValue,
  type Problem,
  reduceOp,
  ref,
  refs,
  type SpecCheck,
  type SpecRule,
  sourceRules,
  sourcesAreSideEffects,
} from './common.ts';

/** The storage a kernel addresses: a buffer, possibly ordered after writes by AFTER. */
function kernelBuffer(u: UOp): UOp | undefined {
  while (u.op === Ops.AFTER) u = u.src[0]!;
  return isStorage(u) ? u : undefined;
}

/** A kernel value: neither a buffer nor an INDEX address, which must be loaded first. */
function kernelValue(s: UOp, what: string): Problem {
  const p = notValue(s, what);
  if (p !== undefined) return p;
  if (s.op === Ops.INDEX && kernelBuffer(s.src[0]!) !== undefined)
    return `${what} ${ref(s)} is an address into a buffer, not a value; LOAD it first`;
  if (kernelBuffer(s) !== undefined) return `${what} ${ref(s)} is a buffer, not a value; INDEX and LOAD it`;
}

const operands = (u: UOp) => first(u.src, (s, i) => kernelValue(s, `operand ${i}`));

const stack = (u: UOp) =>
  first(
    u.src,
    (s, i) =>
      kernelValue(s, `element ${i}`) ??
      (s.shape!.length !== 0
        ? `element ${i} (${ref(s)}) has shape ${fmtShape(s.shape)}; a kernel STACK joins scalars`
        : undefined),
  );

function index(u: UOp): Problem {
  const [buf, ...idx] = u.src as [UOp, ...UOp[]];
  // one lane of a vector value
  if (buf.shape?.length === 1 && kernelBuffer(buf) === undefined && idx.length === 1 && buf.op !== Ops.INDEX)
    return idx[0]!.op === Ops.CONST && idx[0]!.dtype === dtypes.index
      ? undefined
      : `a lane of a vector is picked by a constant index, got ${ref(idx[0]!)}`;
  if (kernelBuffer(buf) === undefined)
    return `a kernel INDEX addresses a buffer (a PARAM or BUFFER, or an AFTER of one), got ${ref(buf)}`;
  if (idx.length !== buf.shape!.length)
    return `${idx.length} indices for a buffer of shape ${fmtShape(buf.shape)}; give one index per axis`;
  // a (k,)-shaped index reads k elements: the lanes of a vector
  return first(idx, (i, k) =>
    i.dtype === dtypes.index && i.shape?.length === 1 ? undefined : indexScalar(i, `index ${k}`),
  );
}

function load(u: UOp): Problem {
  const [address, alt, gate] = u.src as [UOp, UOp | undefined, UOp | undefined];
  if (address.op !== Ops.INDEX)
    return `a kernel LOAD reads through an INDEX, got ${ref(address)}; INDEX the buffer first`;
  if (u.src.length === 2 || u.src.length > 3)
    return `a LOAD takes (index) or (index, alt, gate), got ${u.src.length} sources`;
  if (alt !== undefined) {
    const p = kernelValue(alt, 'the alternative');
    if (p !== undefined) return p;
    if (alt.dtype !== u.dtype) return `the alternative has dtype ${alt.dtype.name}, the load ${u.dtype.name}`;
  }
  return (
    gateProblem(gate) ??
    (u.argOf(Ops.LOAD)?.device === undefined
      ? undefined
      : 'a kernel LOAD cannot change device; devices change between kernels (COPY)')
  );
}

/** STORE and ATOMICADD write a value through an INDEX. */
function write(u: UOp): Problem {
  const address = u.src[0]!;
  if (address.op !== Ops.INDEX)
    return `a kernel ${opName(u.op)} writes through an INDEX, got ${ref(address)}; INDEX the buffer first`;
  return kernelValue(u.src[1]!, 'the value');
}

// construction checks a STORE's value dtype, but not an ATOMICADD's
function sameDTypeAsBuffer(u: UOp): Problem {
  const [address, val] = u.src as [UOp, UOp];
  if (val.dtype !== address.dtype)
    return `the value has dtype ${val.dtype.name} but the buffer holds ${address.dtype.name}`;
}

const AXIS_TYPES: readonly string[] = Object.values(AxisType);
function range(u: UOp): Problem {
  const { id, type } = u.argOf(Ops.RANGE);
  if (!isCount(id)) return `the range id must be a non-negative integer, got ${JSON.stringify(id)}`;
  if (!AXIS_TYPES.includes(type)) return `the axis type must be one of ${AXIS_TYPES.join(', ')}, got ${type}`;
  return indexScalar(u.src[0]!, 'the bound');
}

/** The sources after the first are distinct RANGEs (construction checks that a REDUCE's are RANGEs). */
function distinctRanges(u: UOp): Problem {
  const rs = u.src.slice(1);
  const owner = opName(u.op);
  const bad = rs.find((r) => r.op !== Ops.RANGE);
  if (bad !== undefined) return `${owner} lists RANGEs after its first source, got ${ref(bad)}`;
  if (new Set(rs).size !== rs.length) return `${owner} lists a RANGE twice (${refs(rs)})`;
}

const REDUCE_AXES: readonly AxisType[] = [AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL];
function reduceRanges(u: UOp): Problem {
  if (u.argOf(Ops.REDUCE).axes.length !== 0)
    return 'a kernel REDUCE reduces over its RANGE sources; its axes must be empty';
  const loop = u.src.slice(1).find((r) => !REDUCE_AXES.includes(r.argOf(Ops.RANGE).type));
  if (loop !== undefined)
    return `${ref(loop)} is a ${loop.argOf(Ops.RANGE).type} range; a REDUCE runs over ${REDUCE_AXES.join(', ')} ranges`;
}

function special(u: UOp): Problem {
  if (typeof u.arg !== 'string' || u.arg === '')
    return `a SPECIAL is named (gidx0, lidx1, ...), got ${JSON.stringify(u.arg)}`;
  return indexScalar(u.src[0]!, 'the bound');
}

function wmma(u: UOp): Problem {
  const { name, dims, dtypeIn, dtypeOut } = u.argOf(Ops.WMMA);
  const [a, b, acc] = u.src as [UOp, UOp, UOp];
  if (typeof name !== 'string' || name === '') return 'a WMMA names its tensor core config';
  if (!Array.isArray(dims) || dims.length !== 3 || !dims.every((d) => isCount(d) && d > 0))
    return `WMMA dims are three positive integers (N, M, K), got ${JSON.stringify(dims)}`;
  if (a.dtype.base !== dtypeIn || b.dtype.base !== dtypeIn)
    return `the inputs must be ${dtypeIn.name}, got ${a.dtype.name} and ${b.dtype.name}`;
  if (acc.dtype.base !== dtypeOut) return `the accumulator must be ${dtypeOut.name}, got ${acc.dtype.name}`;
}

function custom(u: UOp): Problem {
  const { fmt, dtype } = u.argOf(Ops.CUSTOM);
  if (typeof fmt !== 'string' || fmt === '') return 'a CUSTOM holds its code as a non-empty fmt string';
  if (!(dtype instanceof DType)) return `the dtype must be a DType, got ${String(dtype)}`;
}

const gate: SpecCheck = (u) => gateProblem(u.src[2]);

/** Rules shared by kernels and linear programs. */
export const codegenRules: readonly SpecRule[] = [
  ...sourceRules(Object.values(AddrSpace)),
  ['stack', form(Ops.STACK), stack],
  ['index', form(Ops.INDEX, ['buf'], true), index],
  ['load', form(Ops.LOAD, ['index'], true), load],
  [
    'store',
    form(Ops.STORE, ['index', 'val'], true),
    all(write, atMost(3, 'a STORE takes (index, value, gate?)'), gate),
  ],
  ['atomicadd', form(Ops.ATOMICADD, ['index', 'val']), all(write, sameDTypeAsBuffer)],
  ['range', form(Ops.RANGE, ['bound']), range],
  ['end', form(Ops.END, ['body', 'range'], true), all(bodyIsSideEffect, distinctRanges)],
  ['after', form(Ops.AFTER, ['buf', 'dep'], true), (u) => notValue(u.src[0]!, 'source 0')],
  ['group', form(Ops.GROUP), sourcesAreSideEffects],
  ['special', form(Ops.SPECIAL, ['bound']), special],
  ['barrier', form(Ops.BARRIER), sourcesAreSideEffects],
  ['wmma', form(Ops.WMMA, ['a', 'b', 'acc']), all(operands, wmma)],
  ['custom', form(Ops.CUSTOM), all(operands, custom)],
  ...elementwiseRules(operands),
];

export const kernelSpec: readonly SpecRule[] = [
  ...codegenRules,
  [
    'reduce',
    form(Ops.REDUCE, ['x', 'range'], true),
    all((u) => kernelValue(u.src[0]!, 'the input'), reduceOp, distinctRanges, reduceRanges),
  ],
  ['sink', form(Ops.SINK), sourcesAreSideEffects],
];
