// The memory behind tensor-level BUFFER nodes: one DeviceBuffer per node, held as long as the node lives.
import type { DType, StorageArray } from '../dtype.ts';
import { HostAllocator } from '../runtime/allocator.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

const memory = new WeakMap<UOp, DeviceBuffer>();
// BUFFER nodes whose data is copied from another buffer (a DISK file range) when they are first used
const sources = new WeakMap<UOp, DeviceBuffer>();
// BUFFER nodes whose memory Tensor.dispose() freed: any graph still reading them must not run
const released = new WeakSet<UOp>();
// How many holders (tensors whose value the node is, a JIT's outputs) a BUFFER node has: dispose() frees the
// memory only when the last one lets go, so a tensor that shares its buffer (a no-op view realized, a JIT's
// output) never frees memory another tensor still holds. Holders that die without dispose() never let go:
// their memory comes back through garbage collection instead.
const holders = new WeakMap<UOp, number>();

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
  let b = memory.get(buf);
  if (b === undefined) {
    const a = buf.argOf(Ops.BUFFER);
    if (released.has(buf))
      throw new Error(
        `a graph reads a buffer (${buf.shape!.join(', ')}) ${a.dtype.name} on ${a.device} that Tensor.dispose() freed; dispose a tensor only after everything computed from it is realized`,
      );
    b = allocateFor(buf.shape as number[], a.dtype, a.device as string);
    const src = sources.get(buf);
    // the source is kept until the copy succeeds, so that a failed read can be retried
    if (src !== undefined) copyBuffer(b, src);
    sources.delete(buf);
    memory.set(buf, b);
  }
  return b;
}

/** One more holder of a BUFFER node's memory. */
export function holdBuffer(buf: UOp): void {
  holders.set(buf, (holders.get(buf) ?? 0) + 1);
}

/** One holder fewer; with `free`, the last holder frees the memory now (releaseBuffer). */
export function letGoOfBuffer(buf: UOp, free: boolean): void {
  const left = (holders.get(buf) ?? 1) - 1;
  holders.set(buf, left);
  if (free && left <= 0) releaseBuffer(buf);
}

/** Whether Tensor.dispose() freed a BUFFER node's memory. */
export const isReleased = (buf: UOp): boolean => released.has(buf);

/** Frees a BUFFER node's memory now (back to the allocator's cache); the node cannot be used afterwards. */
function releaseBuffer(buf: UOp): void {
  memory.get(buf)?.free();
  memory.delete(buf);
  sources.delete(buf);
  released.add(buf);
}

/** Gives `buf` the contents of `src`, copied when buf is first used rather than now (lazy loading). */
export function copyOnFirstUse(buf: UOp, src: DeviceBuffer): void {
  sources.set(buf, src);
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

export function setBufferData(buf: UOp, values: StorageArray): void {
  deviceBuffer(buf).copyin(values);
}

/**
 * A BUFFER's data when the host has it: a view of its memory on a device whose memory the host addresses (CPU,
 * JS), else what the host uploaded to it while no kernel has run on it since (a GPU's). Undefined otherwise;
 * nothing is allocated, copied or run.
 */
export function hostData(buf: UOp): StorageArray | undefined {
  const b = memory.get(buf);
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
