// The device registry: names to devices (created on first use), and the default device.
import { ContextVar } from '../helpers.ts';
import type { Backend, DeviceKind } from './backend.ts';
import { JSBackend } from './js.ts';
import { NullBackend } from './null.ts';
import { SIMTBackend } from './simt.ts';

/** The default device's name; empty: the detected one (CPU when a C compiler works in Node, else JS). */
export const DEV = new ContextVar<string>('DEV', '');

// JS, NULL and SIMT run anywhere; devices that need Node (CPU) are added by its entry point, src/runtime/node.ts
const factories = new Map<string, (name: string) => Backend>([
  ['JS', (name) => new JSBackend(name)],
  ['NULL', (name) => new NullBackend(name)],
  ['SIMT', (name) => new SIMTBackend(name)],
]);
const opened = new Map<string, Backend>();
let detectDefault = (): string => 'JS';

/**
 * Adds a device kind, made by `factory` on first use of each name. `detect`, when given, picks the default
 * device from now on where DEV is not set (it should remember its answer: the default is read per tensor).
 */
export function registerDevice(
  kind: DeviceKind,
  factory: (name: string) => Backend,
  detect?: () => string,
): void {
  factories.set(kind, factory);
  if (detect !== undefined) detectDefault = detect;
}

export class Device {
  /** The kinds registered here, in name order. */
  static get kinds(): readonly DeviceKind[] {
    return [...factories.keys()].sort() as DeviceKind[];
  }

  /** The canonical form of a device name: the kind in capitals, an index only when not 0 (`cpu:0` is `CPU`). */
  static canonicalize(name: string): string {
    // every op's tensor asks: an open device's canonical name is itself
    if (opened.get(name)?.name === name) return name;
    const m = /^([A-Za-z]+)(?::(\d+))?$/.exec(name.trim());
    const kind = m?.[1]?.toUpperCase() ?? '';
    if (m === null || !factories.has(kind)) {
      const kinds = Device.kinds;
      throw new Error(
        `unknown device '${name}': valid devices are ${kinds.join(', ')}, optionally with an index (${kinds[0]}:1)`,
      );
    }
    const index = Number(m[2] ?? 0);
    return index === 0 ? kind : `${kind}:${index}`;
  }

  /** The device named `name`, created on first use. */
  static get(name: string): Backend {
    // every op's tensor asks: an open device's canonical name is found without parsing it
    const open = opened.get(name);
    if (open !== undefined) return open;
    const canonical = Device.canonicalize(name);
    let backend = opened.get(canonical);
    if (backend === undefined) {
      backend = factories.get(canonical.split(':')[0]!)!(canonical);
      opened.set(canonical, backend);
    }
    return backend;
  }

  /** The default device: DEV when set, else CPU when a C compiler works in Node, else JS. */
  static get default(): string {
    return DEV.value !== '' ? Device.canonicalize(DEV.value) : detectDefault();
  }

  static set default(name: string) {
    DEV.value = Device.canonicalize(name);
  }
}

/** What a device's memory holds: bytes in live buffers and bytes freed and cached for reuse. */
export interface MemoryStats {
  bytesInUse: number;
  bytesCached: number;
}

/**
 * The memory a device (the default one unless named) holds now. Buffers of tensors that are no longer
 * reachable return to the cache once garbage collected, which happens after the current job: a synchronous
 * loop sees them come back at its next await. `Tensor.dispose()` returns a buffer at once.
 */
export function memoryStats(device?: string): MemoryStats {
  const { bytesInUse, bytesCached } = Device.get(device ?? Device.default).allocator;
  return { bytesInUse, bytesCached };
}
