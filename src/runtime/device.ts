// The device registry: names to devices (created on first use), and the default device.
import { dtypes } from '../dtype.ts';
import { ContextVar, DEBUG } from '../helpers.ts';
import type { Backend, DeviceKind } from './backend.ts';
import { DeviceBuffer } from './buffer.ts';
import { CC } from './cc.ts';
import { CPUBackend } from './cpu.ts';
import { JSBackend } from './js.ts';
import { NullBackend } from './null.ts';

/** The default device's name; empty: CPU when a C compiler works here, else JS. */
export const DEV = new ContextVar<string>('DEV', '');

const factories: Record<DeviceKind, (name: string) => Backend> = {
  CPU: (name) => new CPUBackend(name),
  JS: (name) => new JSBackend(name),
  NULL: (name) => new NullBackend(name),
};
const opened = new Map<string, Backend>();
// the default found for each CC setting: probing compiles a kernel, so it is done once
const detected = new Map<string, string>();

export class Device {
  static readonly kinds = Object.keys(factories) as readonly DeviceKind[];

  /** The canonical form of a device name: the kind in capitals, an index only when not 0 (`cpu:0` is `CPU`). */
  static canonicalize(name: string): string {
    const m = /^([A-Za-z]+)(?::(\d+))?$/.exec(name.trim());
    const kind = m?.[1]?.toUpperCase() ?? '';
    if (m === null || !Object.hasOwn(factories, kind))
      throw new Error(
        `unknown device '${name}': valid devices are ${Device.kinds.join(', ')}, optionally with an index (CPU:1)`,
      );
    const index = Number(m[2] ?? 0);
    return index === 0 ? kind : `${kind}:${index}`;
  }

  /** The device named `name`, created on first use. */
  static get(name: string): Backend {
    const canonical = Device.canonicalize(name);
    let backend = opened.get(canonical);
    if (backend === undefined) {
      backend = factories[canonical.split(':')[0] as DeviceKind](canonical);
      opened.set(canonical, backend);
    }
    return backend;
  }

  /** The default device: DEV when set, else CPU when a C compiler works here, else JS. */
  static get default(): string {
    return DEV.value !== '' ? Device.canonicalize(DEV.value) : detectDefault();
  }

  static set default(name: string) {
    DEV.value = Device.canonicalize(name);
  }
}

function detectDefault(): string {
  let dev = detected.get(CC.value);
  if (dev === undefined) {
    const problem = cpuProblem();
    dev = problem === undefined ? 'CPU' : 'JS';
    if (problem !== undefined && DEBUG.value >= 1)
      console.error(`Device: the default device is JS, as the CPU device does not work here: ${problem}`);
    detected.set(CC.value, dev);
  }
  return dev;
}

/** Why the CPU device does not work (compiler, koffi, loading or running a kernel), or undefined when it does. */
function cpuProblem(): string | undefined {
  try {
    const cpu = Device.get('CPU');
    const buf = new DeviceBuffer(cpu, 1, dtypes.int32);
    cpu
      .compile('tsgrad_probe', 'void tsgrad_probe(int* restrict data0, int var0) { data0[0] = var0 + 1; }')
      .run([buf], [41]);
    const value = buf.view()[0];
    buf.free();
    return value === 42 ? undefined : `a probe kernel computed ${value} instead of 42`;
  } catch (e) {
    return (e as Error).message;
  }
}
