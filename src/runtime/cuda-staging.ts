// Host <-> GPU copies through pinned (page-locked) staging buffers. A copy from pageable memory makes the driver
// stage it through its own small pinned buffer, one piece after another; with two pinned buffers of our own the
// host fills one while the copy engine drains the other, so the memcpy on the CPU and the DMA overlap.
import { checkDriver, type Gpu, koffi, OutHandle, use } from './cuda-api.ts';

/** Bytes of each staging buffer. */
const CHUNK = 8 << 20;
/** Copies up to this size go straight from pageable memory: one driver call costs less than the pipeline. */
export const DIRECT_COPY_BYTES = 1 << 20;

interface Slot {
  address: number;
  bytes: Uint8Array;
  event: number;
  /** An asynchronous copy from or into it may still be running. */
  busy: boolean;
}

export class PinnedStaging {
  private slots: [Slot, Slot] | undefined;

  constructor(private readonly gpu: Gpu) {}

  /** Copies `src` to device address `dst`; returns once `src` may change (the GPU's copy may still be running). */
  copyin(dst: number, src: Uint8Array): void {
    const d = use(this.gpu);
    const slots = this.pinned();
    for (let off = 0, i = 0; off < src.byteLength; off += CHUNK, i ^= 1) {
      const slot = slots[i as 0 | 1];
      const n = Math.min(CHUNK, src.byteLength - off);
      this.wait(slot);
      slot.bytes.set(src.subarray(off, off + n));
      checkDriver(d, d.cuMemcpyHtoDAsync_v2(dst + off, slot.address, n, 0), 'cuMemcpyHtoDAsync');
      this.record(slot);
    }
  }

  /** Copies device address `src` into `dst`, after the work issued before it. */
  copyout(dst: Uint8Array, src: number): void {
    const d = use(this.gpu);
    const slots = this.pinned();
    const issue = (off: number, slot: Slot) => {
      const n = Math.min(CHUNK, dst.byteLength - off);
      this.wait(slot);
      checkDriver(d, d.cuMemcpyDtoHAsync_v2(slot.address, src + off, n, 0), 'cuMemcpyDtoHAsync');
      this.record(slot);
    };
    issue(0, slots[0]);
    for (let off = 0, i = 0; off < dst.byteLength; off += CHUNK, i ^= 1) {
      const slot = slots[i as 0 | 1];
      if (off + CHUNK < dst.byteLength) issue(off + CHUNK, slots[(i ^ 1) as 0 | 1]);
      this.wait(slot);
      dst.set(slot.bytes.subarray(0, Math.min(CHUNK, dst.byteLength - off)), off);
    }
  }

  private wait(slot: Slot): void {
    if (!slot.busy) return;
    checkDriver(use(this.gpu), this.gpu.driver.cuEventSynchronize(slot.event), 'cuEventSynchronize');
    slot.busy = false;
  }

  private record(slot: Slot): void {
    checkDriver(use(this.gpu), this.gpu.driver.cuEventRecord(slot.event, 0), 'cuEventRecord');
    slot.busy = true;
  }

  // made on the first large copy and kept for the process (16 MiB of page-locked memory)
  private pinned(): [Slot, Slot] {
    if (this.slots !== undefined) return this.slots;
    const d = use(this.gpu);
    const slot = (): Slot => {
      const ptr = new OutHandle();
      checkDriver(d, d.cuMemAllocHost_v2(ptr.ptr, CHUNK), `cuMemAllocHost (${CHUNK} bytes)`);
      const event = new OutHandle();
      checkDriver(d, d.cuEventCreate(event.ptr, 2 /* CU_EVENT_DISABLE_TIMING */), 'cuEventCreate');
      const address = ptr.read();
      return {
        address,
        bytes: new Uint8Array(koffi().view(address, CHUNK)),
        event: event.read(),
        busy: false,
      };
    };
    this.slots = [slot(), slot()];
    return this.slots;
  }
}
