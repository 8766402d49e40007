// The memory behind tensor-level BUFFER nodes: one DeviceBuffer per node, held as long as the node lives.
import type { StorageArray } from '../dtype.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import type { ArgOf, Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

const memory = new WeakMap<UOp, DeviceBuffer>();

const numel = (buf: UOp) => buf.shape!.reduce<number>((n, d) => n * (d as number), 1);

/** The DeviceBuffer of a BUFFER node, allocated on first use. */
export function deviceBuffer(buf: UOp): DeviceBuffer {
  let b = memory.get(buf);
  if (b === undefined) {
    const a = buf.arg as ArgOf<Ops.BUFFER>;
    b = new DeviceBuffer(a.device as string, numel(buf), a.dtype).allocate();
    memory.set(buf, b);
  }
  return b;
}

export function setBufferData(buf: UOp, values: StorageArray): void {
  deviceBuffer(buf).copyin(values);
}

/** A view of a realized BUFFER's data (valid until the buffer is written again). */
export function bufferData(buf: UOp): StorageArray {
  return deviceBuffer(buf).view();
}
