// Realize: schedules tensors' graphs into kernels, compiles each kernel once, and runs them in order.
import { lowerKernel } from '../codegen/index.ts';
import { DEBUG } from '../helpers.ts';
import { renderC } from '../renderer/c.ts';
import { renderJS } from '../renderer/js.ts';
import type { Program } from '../runtime/backend.ts';
import { Device } from '../runtime/device.ts';
import { type Kernel, rangeify, type Schedule } from '../schedule/rangeify.ts';
import { Ops } from '../uop/ops.ts';
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

const programs = new Map<string, Program>();

/** The compiled program of a kernel on a device, from the cache keyed by the kernel's content. */
function programFor(k: Kernel, device: string): Program {
  const key = `${device}|${k.ast.key}`;
  let p = programs.get(key);
  if (p === undefined) {
    const { name, linear } = lowerKernel(k.ast);
    const backend = Device.get(device);
    const render = RENDERERS[backend.kind];
    if (render === undefined) throw new Error(`no renderer for device ${device}`);
    const source = render(name, linear);
    if (DEBUG.value >= 4) console.log(source);
    p = backend.compile(name, source);
    programs.set(key, p);
  }
  return p;
}

/** Computes every tensor's value; afterwards each tensor's uop is the BUFFER holding it. */
export function realize(tensors: readonly Realizable[]): void {
  const pending = tensors.filter((t) => t.uop.op !== Ops.BUFFER);
  if (pending.length === 0) return;
  const devices = new Set(pending.map((t) => t.device));
  if (devices.size > 1)
    throw new Error(
      `realize: tensors on several devices (${[...devices].join(', ')}); realize each device's tensors apart`,
    );
  const device = pending[0]!.device;
  const t0 = performance.now();
  const schedule = rangeify(
    pending.map((t) => t.uop),
    () => device,
  );
  for (const k of schedule.kernels) {
    const program = programFor(k, device);
    const seconds = program.run(k.bufs.map(deviceBuffer), [], DEBUG.value >= 2);
    if (DEBUG.value >= 2)
      console.log(`${program.name.padEnd(24)} ${(seconds * 1e6).toFixed(1).padStart(10)} us`);
  }
  if (DEBUG.value >= 1)
    console.log(
      `realize: ${schedule.kernels.length} kernel(s) on ${device} in ${(performance.now() - t0).toFixed(2)} ms`,
    );
  for (const t of pending) t.uop = schedule.outputs.get(t.uop)!;
}

/** The kernels realizing these tensors would run, without running them (for tests and tools). */
export function scheduleOf(tensors: readonly Realizable[]): Schedule {
  return rangeify(
    tensors.filter((t) => t.uop.op !== Ops.BUFFER).map((t) => t.uop),
    () => tensors[0]!.device,
  );
}
