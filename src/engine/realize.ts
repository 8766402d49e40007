// Realize: the schedule's stages (src/schedule/index.ts) give a function of the tensors' input buffers and its
// plan, cached by the function's content key; the program stage (compile.ts) compiles the plan's new kernels
// together before the first one runs, for the values of the graph's constants (lift.ts); realize runs them over
// the input buffers, fresh output buffers, the planned intermediate storage and the constants' buffers.

import type { ConstValue, DType } from '../dtype.ts';
import { DEBUG } from '../helpers.ts';
import { LRU } from '../lru.ts';
import { type Program, planStarts } from '../runtime/backend.ts';
import type { DeviceBuffer } from '../runtime/buffer.ts';
import { Device } from '../runtime/device.ts';
import { markDone } from '../schedule/callify.ts';
import { kernelsOf, type Plan, planOf, type ScheduleTarget, toFunction } from '../schedule/index.ts';
import { newBuffer, type Schedule } from '../schedule/rangeify.ts';
import { bindBody } from '../schedule/resolve.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { allocateFor, deviceBuffer, hostCopyOf, withMemory } from './buffers.ts';
import { type Compiled, compileKernel, compileKernels, optsKey } from './compile.ts';
import { bake, groupAlike, KernelStep, type StepLaunch } from './lift.ts';

interface Realizable {
  uop: UOp;
  readonly device: string;
}

/**
 * A plan whose kernels compile on first use, for the values of the graph's constants (lift.ts), with its buffer
 * table laid out once: each run only fills it.
 */
interface Runnable {
  steps: KernelStep<Compiled>[];
  inputs: number;
  /**
   * The buffers the plan creates, after its inputs in the table: an output (no `slot`) gets a new BUFFER node per
   * run; an intermediate takes storage slot `slot`, allocated per run.
   */
  created: { shape: number[]; dtype: DType; slot: number | undefined }[];
  outputs: number[];
  slots: number;
  /** Compiles a kernel of the plan on its device. */
  compile: (ast: UOp) => Compiled;
}

const plans = new LRU<string, Runnable>();
/**
 * The plan cache's key a function body last ran under, with its device and opts, while the body lives: an eager
 * loop realizing the same graph (callify keeps its body per graph) looks its plan up without building the long key
 * again (the same string, whose hash the engine keeps, where a new one is hashed whole).
 */
const lastPlans = new WeakMap<UOp, { device: string; opts: string; key: string }>();

function runnable(plan: Plan, device: string): Runnable {
  const steps = plan.steps.map(({ ast, refs, bytes }) => new KernelStep<Compiled>(ast, refs, bytes, device));
  groupAlike(steps);
  const created = plan.created.map(({ shape, dtype }, j) => ({
    shape,
    dtype,
    slot: plan.outputs.includes(plan.inputs + j) ? undefined : plan.slotOf[j]!,
  }));
  const { inputs, outputs, slots } = plan;
  return { steps, inputs, created, outputs, slots, compile: (ast) => compileKernel(ast, device) };
}

/** A kernel launch as a JIT records it: the program and the buffers it ran on. */
export interface Launch {
  program: Program;
  bufs: DeviceBuffer[];
}
interface Recording {
  launches: Launch[];
  /** The BUFFER nodes of the recorded launches' inputs and outputs. */
  buffers: Set<UOp>;
  /** The BUFFER nodes the launches write: each realize's results (fresh, or the buffers assigns write). */
  written: Set<UOp>;
}
let recording: Recording | undefined;

/** Records every kernel launch that fn makes (fn still runs them); intermediate storage is kept alive. */
export function recordLaunches(fn: () => void): Recording {
  if (recording !== undefined)
    throw new Error('jit: a jitted function cannot run inside another one being captured');
  const rec: Recording = { launches: [], buffers: new Set(), written: new Set() };
  recording = rec;
  try {
    fn();
  } finally {
    recording = undefined;
  }
  return rec;
}

/**
 * Each step's program for these values: the baked ones where every step has its program (most eager calls), else
 * every kernel compiles before anything is allocated or run (one that fails leaves every buffer as it was), the
 * new ones together.
 */
function launchesOf(plan: Runnable, values: readonly ConstValue[], device: string): StepLaunch<Compiled>[] {
  const baked: StepLaunch<Compiled>[] = [];
  for (const step of plan.steps) {
    const launch = step.bakedLaunch(values);
    if (launch === undefined) break;
    baked.push(launch);
  }
  if (baked.length === plan.steps.length) return baked;
  let pending: UOp[] | undefined;
  for (const step of plan.steps) {
    const ast = step.pending(values);
    if (ast !== undefined) (pending ??= []).push(ast);
  }
  if (pending !== undefined) compileKernels(pending, device);
  return plan.steps.map((step) => step.program(values, plan.compile));
}

function runPlan(
  plan: Runnable,
  inputs: readonly UOp[],
  values: readonly ConstValue[],
  device: string,
): UOp[] {
  const launches = launchesOf(plan, values, device);
  planStarts();
  // the table: the inputs' buffers, then the created ones: outputs new BUFFER nodes, intermediates their storage
  const table = new Array<DeviceBuffer>(plan.inputs + plan.created.length);
  const nodes = new Array<UOp | undefined>(table.length);
  for (let i = 0; i < inputs.length; i++) table[i] = deviceBuffer((nodes[i] = inputs[i]!));
  const storage: (DeviceBuffer | undefined)[] = new Array(plan.slots);
  for (let j = 0; j < plan.created.length; j++) {
    const { shape, dtype, slot } = plan.created[j]!;
    const entry = plan.inputs + j;
    if (slot !== undefined) table[entry] = storage[slot] ??= allocateFor(shape, dtype, device);
    else
      table[entry] = withMemory(
        (nodes[entry] = newBuffer(shape, dtype, device)),
        allocateFor(shape, dtype, device),
      );
  }
  for (let n = 0; n < plan.steps.length; n++) {
    const step = plan.steps[n]!;
    const { kernel, extra } = launches[n]!;
    const { program, display, flops } = kernel;
    const bufs: DeviceBuffer[] = [];
    for (const i of step.refs) bufs.push(table[i]!);
    for (const b of extra) {
      bufs.push(b);
      storage.push(b);
    }
    recording?.launches.push({ program, bufs });
    const seconds = program.run(bufs, [], DEBUG.value >= 2);
    if (DEBUG.value >= 2) {
      const pad = ' '.repeat(Math.max(0, 24 - program.name.length));
      const rate = (n: number) => (seconds > 0 ? (n / seconds / 1e9).toFixed(2) : '-').padStart(8);
      console.log(
        `${display}${pad} ${(seconds * 1e6).toFixed(1).padStart(9)} us ${rate(flops)} GFLOP/s ${rate(step.bytes)} GB/s${program.tier === undefined ? '' : ` (${program.tier} build)`}`,
      );
    }
  }
  // recorded launches go on using the intermediate storage and the constants' buffers; else they are freed
  if (recording === undefined) for (let i = 0; i < storage.length; i++) storage[i]?.free();
  else for (const b of nodes) if (b !== undefined) recording.buffers.add(b);
  const results = plan.outputs.map((i) => nodes[i]!);
  for (const b of results) recording?.written.add(b);
  return results;
}

const loweredCalls = new WeakMap<UOp, UOp[]>();

/**
 * A compiled fn call's results as buffers: its arguments are realized, then its body on their buffers, in
 * a realize of its own, so the body's kernels are never fused with the caller's and its plan is cached by
 * the body's key (callify turns the argument buffers back into PARAMs). The device is the caller's: arguments
 * made of constants alone (Tensor.ones) have none of their own.
 */
function realizeCall(call: UOp, device: string): UOp[] {
  let results = loweredCalls.get(call);
  if (results === undefined) {
    const args = call.src.slice(1).map((uop) => ({ uop, device }));
    realize(args);
    const bound = bindBody(
      call,
      args.map((a) => a.uop),
    ).src.map((uop) => ({ uop, device }));
    realize(bound);
    loweredCalls.set(call, (results = bound.map((r) => r.uop)));
  }
  return results;
}

/** The realized buffer u reshapes (u is its elements in another, constant, shape), if any. */
function reshapeOf(u: UOp): UOp | undefined {
  let x = u;
  while (x.op === Ops.RESHAPE) x = x.src[0]!;
  return x !== u && x.op === Ops.BUFFER && u.shape!.every((d) => typeof d === 'number') ? x : undefined;
}

/**
 * Computes every tensor's value; afterwards each tensor's uop is the BUFFER holding it. Returns the buffers
 * the realize created (a tensor whose graph was a view of an input gets that input's buffer instead). A reshape
 * of a buffer the host addresses (host data given a shape: a data set, a batch) is copied by the host.
 */
export function realize(tensors: readonly Realizable[]): ReadonlySet<UOp> {
  let pending = tensors.filter((t) => t.uop.op !== Ops.BUFFER);
  if (pending.length === 0) return new Set();
  const device = pending[0]!.device;
  if (pending.some((t) => t.device !== device)) {
    const devices = new Set(pending.map((t) => t.device));
    throw new Error(
      `realize: tensors on several devices (${[...devices].join(', ')}); realize each device's tensors apart`,
    );
  }
  const created = new Set<UOp>();
  // (a device that only holds data, DISK, keeps its reshapes as graphs over its files; a JIT being captured
  // replays launches, so the copy it records is a kernel's)
  if (
    recording === undefined &&
    pending.some((t) => reshapeOf(t.uop) !== undefined) &&
    Device.get(device).language() !== undefined
  ) {
    for (const t of pending) {
      const base = reshapeOf(t.uop);
      const copy = base && hostCopyOf(base, t.uop.shape as number[]);
      if (copy === undefined) continue;
      t.uop = copy;
      created.add(copy);
    }
    pending = pending.filter((t) => t.uop.op !== Ops.BUFFER);
    if (pending.length === 0) return created;
  }
  const t0 = DEBUG.value >= 1 ? performance.now() : 0;
  const { body, inputs, values, assigns } = toFunction(
    pending.map((t) => t.uop),
    (call) => realizeCall(call, device),
  );
  const opts = optsKey(Device.get(device));
  const last = lastPlans.get(body);
  const key = last?.device === device && last.opts === opts ? last.key : `${device}|${opts}|${body.key}`;
  let plan = plans.get(key);
  const cached = plan !== undefined;
  if (plan === undefined)
    plans.set(key, (plan = runnable(planOf(body, inputs.length, device, scheduleTarget(device)), device)));
  if (last?.key !== key) lastPlans.set(body, { device, opts, key });
  const outputs = runPlan(plan, inputs, values, device);
  markDone(assigns);
  if (DEBUG.value >= 1)
    console.log(
      `realize: ${plan.steps.length} kernel(s) on ${device} in ${(performance.now() - t0).toFixed(2)} ms${cached ? ' (cached schedule)' : ''}`,
    );
  pending.forEach((t, i) => {
    t.uop = outputs[i]!;
  });
  // a result in the table after the inputs is a buffer this realize made, not an input seen through a view
  for (let i = 0; i < outputs.length; i++) if (plan.outputs[i]! >= plan.inputs) created.add(outputs[i]!);
  return created;
}

/**
 * The kernels realizing these tensors would run, without running them (for tests and tools); a compiled
 * fn call among them is realized first, as realize would, and is not part of the schedule.
 */
export function scheduleOf(tensors: readonly Realizable[]): Schedule {
  const pending = tensors.filter((t) => t.uop.op !== Ops.BUFFER);
  const device = tensors[0]!.device;
  const { body, values } = toFunction(
    pending.map((t) => t.uop),
    (call) => realizeCall(call, device),
  );
  const { kernels, outputs } = kernelsOf(body, device, scheduleTarget(device));
  return { kernels: kernels.map((k) => ({ ...k, ast: bake(k.ast, values) })), outputs };
}

/** What the schedule needs of a device: whether it runs workgroups (big sums split for them), its most arguments. */
const scheduleTarget = (device: string): ScheduleTarget => {
  const backend = Device.get(device);
  return { gpu: backend.workgroups() !== undefined, maxBuffers: backend.maxBuffers() };
};

/** How many schedules are cached (for tests). */
export const cachedPlans = (): number => plans.size;
