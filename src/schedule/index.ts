// The schedule as named stages. A tensor graph becomes one function over its input buffers (resolve
// functions, callify), whose content key caches everything after; the function becomes kernels (split
// reduces, bound kernels, rangeify) over a table of buffers (the buffer table, the memory plan).
import type { DType } from '../dtype.ts';
import { prod } from '../helpers.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { boundKernels } from './bound.ts';
import { type Callified, callify } from './callify.ts';
import { foldViews } from './fold-views.ts';
import { planMemory } from './memory.ts';
import { storeOperands } from './operands.ts';
import { rangeify, type Schedule } from './rangeify.ts';
import { type LowerCall, resolveFunctions } from './resolve.ts';
import { splitReduces, splitSweeps } from './split.ts';

/** Resolve functions, then callify: the roots as one stateless function over their input buffers. */
export function toFunction(roots: readonly UOp[], lowerCall: LowerCall): Callified {
  // most graphs call no function: callify's walk finds out, and only a graph that does is walked again
  const f = callify(roots);
  return f.calls ? callify(resolveFunctions(roots, lowerCall)) : f;
}

/**
 * A function's kernels over a buffer table: entries 0..inputs-1 are its inputs (PARAM k), the rest are the
 * buffers the kernels create, outputs and intermediates.
 */
export interface Plan {
  steps: { ast: UOp; refs: number[]; bytes: number }[];
  inputs: number;
  created: { shape: number[]; dtype: DType }[];
  /** The table entry holding each root's value. */
  outputs: number[];
  /** Storage slot of each created intermediate (outputs get their own buffers). */
  slotOf: number[];
  slots: number;
}

/** What the schedule needs to know of the device its kernels run on. */
export interface ScheduleTarget {
  /** Kernels run on workgroups (a GPU): big sums split for them, and stored operands read in their own layout. */
  gpu: boolean;
  /** The most arguments one kernel may take (Backend.maxBuffers). */
  maxBuffers: number;
}

const HOST: ScheduleTarget = { gpu: false, maxBuffers: Number.POSITIVE_INFINITY };

/**
 * Fold views, split reduces, store costly operands of products, bound kernels (realize
 * intermediates of expressions too long to compile), then rangeify: the kernels of a function's body, and
 * the buffer holding each root.
 */
export function kernelsOf(body: UOp, device: string, target = HOST): Schedule {
  const stored = storeOperands(splitReduces(foldViews(body), target.gpu), target.gpu);
  const split = boundKernels(target.gpu ? stored : splitSweeps(stored), target.maxBuffers);
  const schedule = rangeify(split.src, () => device, target.maxBuffers);
  // the roots as the caller knows them
  const outputs = new Map(body.src.map((r, i) => [r, schedule.outputs.get(split.src[i]!)!]));
  return { kernels: schedule.kernels, outputs };
}

/** The buffer table of a function's kernels: entries for its PARAMs, then one per buffer rangeify created. */
function bufferTable(body: UOp, inputs: number, device: string, target: ScheduleTarget) {
  const schedule = kernelsOf(body, device, target);
  const table = new Map<UOp, number>();
  const created: Plan['created'] = [];
  const entry = (b: UOp): number => {
    if (b.op === Ops.PARAM) return b.argOf(Ops.PARAM).slot as number;
    let i = table.get(b);
    if (i === undefined) {
      table.set(b, (i = inputs + created.length));
      created.push({ shape: b.shape as number[], dtype: b.dtype });
    }
    return i;
  };
  const steps = schedule.kernels.map((k) => ({
    ast: k.ast,
    refs: k.bufs.map(entry),
    bytes: k.bufs.reduce((n, b) => n + prod(b.shape as number[]) * b.dtype.itemsize, 0),
  }));
  const outputs = body.src.map((r) => entry(schedule.outputs.get(r)!));
  return { steps, created, outputs };
}

/** Rangeify, the buffer table and the memory plan: a function's plan on a device. */
export function planOf(body: UOp, inputs: number, device: string, target = HOST): Plan {
  const { steps, created, outputs } = bufferTable(body, inputs, device, target);
  const uses = created.map((c, j) => {
    const touching = steps.flatMap((s, i) => (s.refs.includes(inputs + j) ? [i] : []));
    // an empty buffer may have no kernel touching it
    return {
      size: prod(c.shape),
      dtype: c.dtype,
      first: touching[0] ?? 0,
      last: touching.at(-1) ?? 0,
      output: outputs.includes(inputs + j),
    };
  });
  const { slotOf, slots } = planMemory(uses);
  return { steps, inputs, created, outputs, slotOf, slots };
}
