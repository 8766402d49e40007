// The memory behind tensor-level BUFFER nodes: one DeviceBuffer per node, held as long as the node lives.
import type { DType, StorageArray } from '../dtype.ts';
import { HostAllocator } from '../runtime/allocator.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import { newBuffer } from '../schedule/rangeify.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

/**
 * What the engine keeps of a BUFFER node, one record per node (every realize makes a node and allocates for it:
 * one weak-map entry, not one per field):
 * - `memory`, allocated on first use;
 * - `source`, a buffer (a DISK file range) its data is copied from when it is first used;
 * - `released`, set once Tensor.dispose() freed the memory: any graph still reading the node must not run;
 * - `holders`, how many holders (tensors whose value the node is, a JIT's outputs) it has: dispose() frees the
 *   memory only when the last one lets go, so a tensor that shares its buffer (a no-op view realized, a JIT's
 *   output) never frees memory another tensor still holds. Holders that die without dispose() never let go:
 *   their memory comes back through garbage collection instead.
 */
interface Held {
  memory: DeviceBuffer | undefined;
  source: DeviceBuffer | undefined;
  released: boolean;
  holders: number;
}
const held = new WeakMap<UOp, Held>();

function heldOf(buf: UOp): Held {
  let h = held.get(buf);
  if (h === undefined)
    held.set(buf, (h = { memory: undefined, source: undefined, released: false, holders: 0 }));
  return h;
}

/** New memory for a value of this shape, or an error naming the shape and its bytes when there is none. */
export function allocateFor(shape: readonly number[], dtype: DType, device: string): DeviceBuffer {
  const size = shape.reduce((n, d) => n * d, 1);
  const buffer = new DeviceBuffer(device, size, dtype);
  try {
    return buffer.allocate();
  } catch (e) {
    throw new Error(
      `realize: no memory for a ${dtype.name} tensor of shape (${shape.join(', ')}) on ${device}, ${size * dtype.itemsize} bytes: ${(e as Error).message}`,
    );
  }
}

/**
 * The DeviceBuffer of a BUFFER node, allocated (and filled from its source, if it has one) on first use.
 * Realize takes its inputs' buffers here before any kernel runs, so a graph reading a released buffer fails whole.
 */
export function deviceBuffer(buf: UOp): DeviceBuffer {
  const h = heldOf(buf);
  if (h.memory === undefined) {
    const a = buf.argOf(Ops.BUFFER);
    if (h.released)
      throw new Error(
        `a graph reads a buffer (${buf.shape!.join(', ')}) ${a.dtype.name} on ${a.device} that Tensor.dispose() freed; dispose a tensor only after everything computed from it is realized`,
      );
    const b = allocateFor(buf.shape as number[], a.dtype, a.device as string);
    // the source is kept until the copy succeeds, so that a failed read can be retried
    if (h.source !== undefined) copyBuffer(b, h.source);
    h.source = undefined;
    h.memory = b;
  }
  return h.memory;
}

/** Gives a BUFFER node just made (a realize's result) memory just allocated: deviceBuffer's record in one step. */
export function withMemory(buf: UOp, memory: DeviceBuffer): DeviceBuffer {
  held.set(buf, { memory, source: undefined, released: false, holders: 0 });
  return memory;
}

/** One more holder of a BUFFER node's memory. */
export function holdBuffer(buf: UOp): void {
  heldOf(buf).holders++;
}

/** One holder fewer; with `free`, the last holder frees the memory now (releaseBuffer). */
export function letGoOfBuffer(buf: UOp, free: boolean): void {
  const h = heldOf(buf);
  // (a node nobody held counts as held once, as before holders were counted)
  h.holders = (h.holders === 0 ? 1 : h.holders) - 1;
  if (free && h.holders <= 0) releaseBuffer(h);
}

/** Whether Tensor.dispose() freed a BUFFER node's memory. */
export const isReleased = (buf: UOp): boolean => held.get(buf)?.released ?? false;

/** Frees a BUFFER node's memory now (back to the allocator's cache); the node cannot be used afterwards. */
function releaseBuffer(h: Held): void {
  h.memory?.free();
  h.memory = undefined;
  h.source = undefined;
  h.released = true;
}

/** Gives `buf` the contents of `src`, copied when buf is first used rather than now (lazy loading). */
export function copyOnFirstUse(buf: UOp, src: DeviceBuffer): void {
  heldOf(buf).source = src;
}

/** Copies `src` into `dst`: straight into dst's memory where the host can address it, else through a host copy. */
function copyBuffer(dst: DeviceBuffer, src: DeviceBuffer): void {
  if (dst.nbytes !== src.nbytes)
    throw new Error(`copy from ${src} to ${dst}: the byte sizes differ (${src.nbytes} and ${dst.nbytes})`);
  if (dst.backend.allocator instanceof HostAllocator) {
    const v = dst.view();
    src.backend.allocator.copyout(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), src.memory);
  } else dst.copyin(src.copyout());
}

/**
 * A new BUFFER node of `shape` (as many elements as buf) holding a copy of buf's elements, made by the host where
 * it addresses the device's memory (CPU, JS, SIMT): what a copy kernel would make, without a kernel to compile
 * and launch. Undefined on other devices.
 */
export function hostCopyOf(buf: UOp, shape: number[]): UOp | undefined {
  const from = deviceBuffer(buf);
  if (!(from.backend.allocator instanceof HostAllocator)) return undefined;
  const { dtype, device } = buf.argOf(Ops.BUFFER);
  const copy = newBuffer(shape, dtype, device as string);
  withMemory(copy, allocateFor(shape, dtype, device as string)).copyin(from.view());
  return copy;
}

export function setBufferData(buf: UOp, values: StorageArray): void {
  deviceBuffer(buf).copyin(values);
}

/**
 * A BUFFER's data when the host has it: a view of its memory on a device whose memory the host addresses (CPU,
 * JS), else what the host uploaded to it while no kernel has run on it since (a GPU's). Undefined otherwise;
 * nothing is allocated, copied or run.
 */
export function hostData(buf: UOp): StorageArray | undefined {
  const b = held.get(buf)?.memory;
  if (!b?.allocated) return undefined;
  return b.backend.allocator instanceof HostAllocator ? b.view() : b.hostCopy;
}

/**
 * A realized BUFFER's data: a view where the host addresses the device's memory (valid until the buffer is
 * written again, freed or dropped), else a copy (a GPU's).
 */
export function bufferData(buf: UOp): StorageArray {
  const b = deviceBuffer(buf);
  return b.backend.allocator instanceof HostAllocator ? b.view() : b.copyout();
}
