// Realize: callify the tensors' graph, then run its plan: the kernels of the schedule, compiled once, over
// the input buffers, fresh output buffers and planned intermediate storage. Plans are cached by content key.
import { lowerKernel } from '../codegen/index.ts';
import { NOOPT } from '../codegen/opt/heuristic.ts';
import { CPU_TARGET, printOpts, type Target } from '../codegen/opt/opts.ts';
import { BEAM, beamSearch } from '../codegen/opt/search.ts';
import type { DType } from '../dtype.ts';
import { DEBUG } from '../helpers.ts';
import { renderC } from '../renderer/c.ts';
import { renderJS } from '../renderer/js.ts';
import type { Backend, Program } from '../runtime/backend.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import { Device } from '../runtime/device.ts';
import { callify } from '../schedule/callify.ts';
import { planMemory } from '../schedule/memory.ts';
import { newBuffer, rangeify, type Schedule } from '../schedule/rangeify.ts';
import { bindBody, resolveFunctions } from '../schedule/resolve.ts';
import { type ArgOf, Ops } from '../uop/ops.ts';
import { printLinear, toCode } from '../uop/print.ts';
import type { UOp } from '../uop/uop.ts';
import { deviceBuffer } from './buffers.ts';

interface Realizable {
  uop: UOp;
  readonly device: string;
}

/** Source renderers by device kind. */
const RENDERERS: Record<string, ((name: string, linear: UOp) => string) | undefined> = {
  CPU: renderC,
  JS: renderJS,
  NULL: renderC,
};

/** What the kernel optimizer may use on a device: C has vector types, JS does not. */
const targetOf = (backend: Backend): Target => ({
  ...CPU_TARGET,
  threads: backend.threads(),
  vectors: backend.kind !== 'JS',
  registers: backend.registers(),
  vectorBytes: backend.vectorBytes(),
});

/** What decides the opts a kernel gets on a device, for the program and plan caches' keys. */
const optsKey = (backend: Backend) => `${NOOPT.value}|${BEAM.value}|${backend.threads()}`;

const programs = new Map<string, Compiled>();

interface Compiled {
  program: Program;
  display: string;
  flops: number;
}

/** The compiled program of a kernel on a device, cached by the kernel's content. */
function programFor(ast: UOp, device: string): Compiled {
  const backend = Device.get(device);
  // the optimizations in force are part of what a kernel compiles to
  const key = `${device}|${optsKey(backend)}|${ast.key}`;
  let p = programs.get(key);
  if (p === undefined) {
    const render = RENDERERS[backend.kind];
    if (render === undefined) throw new Error(`no renderer for device ${device}`);
    const target = targetOf(backend);
    // searched opts where BEAM asks (undefined: the hand-coded ones)
    const searched =
      BEAM.value > 0 && !NOOPT.value ? beamSearch(ast, backend, render, BEAM.value, { target }) : undefined;
    const { name, linear, display, flops, opts } = lowerKernel(ast, { target, opts: searched });
    const source = render(name, linear);
    if (DEBUG.value >= 5) console.log(toCode(ast));
    if (DEBUG.value >= 6) console.log(printLinear(linear));
    if (DEBUG.value >= 4) console.log(source);
    if (DEBUG.value >= 3) console.log(`${display}: ${opts.length ? printOpts(opts) : 'no opts'}`);
    p = { program: backend.compile(name, source), display, flops };
    programs.set(key, p);
  }
  return p;
}

/**
 * A callified graph's schedule, ready to run: buffer table entries 0..inputs-1 are the inputs, the rest
 * are the buffers the kernels create (outputs and intermediates).
 */
interface Plan {
  steps: { kernel: Compiled; refs: number[]; bytes: number }[];
  inputs: number;
  created: { shape: number[]; dtype: DType }[];
  /** The table entry holding each root's value. */
  outputs: number[];
  /** Storage slot of each created intermediate (outputs get their own buffers). */
  slotOf: number[];
  slots: number;
}

const plans = new Map<string, Plan>();

function makePlan(body: UOp, inputs: number, device: string): Plan {
  const schedule = rangeify(body.src, () => device);
  const table = new Map<UOp, number>();
  const created: Plan['created'] = [];
  const entry = (b: UOp): number => {
    if (b.op === Ops.PARAM) return (b.arg as ArgOf<Ops.PARAM>).slot as number;
    let i = table.get(b);
    if (i === undefined) {
      table.set(b, (i = inputs + created.length));
      created.push({ shape: b.shape as number[], dtype: b.dtype });
    }
    return i;
  };
  const steps = schedule.kernels.map((k) => {
    const refs = k.bufs.map(entry);
    const bytes = k.bufs.reduce(
      (n, b) => n + (b.shape as number[]).reduce((a, d) => a * d, b.dtype.itemsize),
      0,
    );
    return { kernel: programFor(k.ast, device), refs, bytes };
  });
  const outputs = body.src.map((r) => entry(schedule.outputs.get(r)!));
  const uses = created.map((c, j) => {
    const touching = steps.flatMap((s, i) => (s.refs.includes(inputs + j) ? [i] : []));
    const size = c.shape.reduce((a, d) => a * d, 1);
    // an empty buffer may have no kernel touching it
    return {
      size,
      dtype: c.dtype,
      first: touching[0] ?? 0,
      last: touching.at(-1) ?? 0,
      output: outputs.includes(inputs + j),
    };
  });
  const { slotOf, slots } = planMemory(uses);
  return { steps, inputs, created, outputs, slotOf, slots };
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

function runPlan(plan: Plan, inputs: readonly UOp[], device: string): UOp[] {
  const table: DeviceBuffer[] = inputs.map(deviceBuffer);
  const outBuffers = new Map<number, UOp>();
  const storage: (DeviceBuffer | undefined)[] = new Array(plan.slots);
  plan.created.forEach((c, j) => {
    const entry = plan.inputs + j;
    if (plan.outputs.includes(entry)) {
      const buf = newBuffer(c.shape, c.dtype, device);
      outBuffers.set(entry, buf);
      table.push(deviceBuffer(buf));
    } else {
      const slot = plan.slotOf[j]!;
      const size = c.shape.reduce((a, d) => a * d, 1);
      table.push((storage[slot] ??= new DeviceBuffer(device, size, c.dtype).allocate()));
    }
  });
  for (const step of plan.steps) {
    const { program, display, flops } = step.kernel;
    const bufs = step.refs.map((i) => table[i]!);
    recording?.launches.push({ program, bufs });
    const seconds = program.run(bufs, [], DEBUG.value >= 2);
    if (DEBUG.value >= 2) {
      const pad = ' '.repeat(Math.max(0, 24 - program.name.length));
      const rate = (n: number) => (seconds > 0 ? (n / seconds / 1e9).toFixed(2) : '-').padStart(8);
      console.log(
        `${display}${pad} ${(seconds * 1e6).toFixed(1).padStart(9)} us ${rate(flops)} GFLOP/s ${rate(step.bytes)} GB/s`,
      );
    }
  }
  // recorded launches go on using the intermediate storage; otherwise it returns to the allocator
  if (recording === undefined) for (const b of storage) b?.free();
  else for (const b of [...inputs, ...outBuffers.values()]) recording.buffers.add(b);
  const results = plan.outputs.map((i) => outBuffers.get(i) ?? inputs[i]!);
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

/**
 * Computes every tensor's value; afterwards each tensor's uop is the BUFFER holding it. Returns the buffers
 * the realize created (a tensor whose graph was a view of an input gets that input's buffer instead).
 */
export function realize(tensors: readonly Realizable[]): ReadonlySet<UOp> {
  const pending = tensors.filter((t) => t.uop.op !== Ops.BUFFER);
  if (pending.length === 0) return new Set();
  const devices = new Set(pending.map((t) => t.device));
  if (devices.size > 1)
    throw new Error(
      `realize: tensors on several devices (${[...devices].join(', ')}); realize each device's tensors apart`,
    );
  const device = pending[0]!.device;
  const t0 = performance.now();
  const { body, inputs } = callify(
    resolveFunctions(
      pending.map((t) => t.uop),
      (call) => realizeCall(call, device),
    ),
  );
  const key = `${device}|${optsKey(Device.get(device))}|${body.key}`;
  let plan = plans.get(key);
  const cached = plan !== undefined;
  if (plan === undefined) plans.set(key, (plan = makePlan(body, inputs.length, device)));
  const outputs = runPlan(plan, inputs, device);
  if (DEBUG.value >= 1)
    console.log(
      `realize: ${plan.steps.length} kernel(s) on ${device} in ${(performance.now() - t0).toFixed(2)} ms${cached ? ' (cached schedule)' : ''}`,
    );
  pending.forEach((t, i) => {
    t.uop = outputs[i]!;
  });
  const read = new Set(inputs);
  return new Set(outputs.filter((b) => !read.has(b)));
}

/**
 * The kernels realizing these tensors would run, without running them (for tests and tools); a compiled
 * fn call among them is realized first, as realize would, and is not part of the schedule.
 */
export function scheduleOf(tensors: readonly Realizable[]): Schedule {
  const pending = tensors.filter((t) => t.uop.op !== Ops.BUFFER);
  const device = tensors[0]!.device;
  return rangeify(
    callify(
      resolveFunctions(
        pending.map((t) => t.uop),
        (call) => realizeCall(call, device),
      ),
    ).body.src,
    () => device,
  );
}

/** How many schedules are cached (for tests). */
export const cachedPlans = (): number => plans.size;
