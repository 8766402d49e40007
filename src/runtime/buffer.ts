// DeviceBuffer: `size` elements of a dtype in one device's memory, allocated on first use.
import { allocStorage, type DType, type StorageArray, storageView } from '../dtype.ts';
import type { Allocator } from './allocator.ts';
import type { Backend } from './backend.ts';
import { Device } from './device.ts';

// a buffer dropped without free() leaves the allocator's count of bytes in use when it is collected
const collected = new FinalizationRegistry<{ allocator: Allocator; nbytes: number }>(
  ({ allocator, nbytes }) => allocator.forget(nbytes),
);

const bytesOf = (a: StorageArray) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

export class DeviceBuffer {
  readonly backend: Backend;
  readonly nbytes: number;
  private mem: unknown;
  private cachedView: StorageArray | undefined;

  constructor(
    device: string | Backend,
    readonly size: number,
    readonly dtype: DType,
  ) {
    this.backend = typeof device === 'string' ? Device.get(device) : device;
    if (!Number.isSafeInteger(size) || size < 0)
      throw new Error(`DeviceBuffer on ${this.device}: size must be a non-negative integer, got ${size}`);
    try {
      allocStorage(dtype, 0);
    } catch (e) {
      throw new Error(`DeviceBuffer on ${this.device}: ${(e as Error).message}`);
    }
    this.nbytes = size * dtype.itemsize;
  }

  /** The device's name, as `Device.get` knows it. */
  get device(): string {
    return this.backend.name;
  }

  get allocated(): boolean {
    return this.mem !== undefined;
  }

  /** Allocates the memory now (it is otherwise allocated on first use). A reused block holds stale data. */
  allocate(): this {
    if (this.mem === undefined) {
      this.mem = this.backend.allocator.alloc(this.nbytes);
      collected.register(this, { allocator: this.backend.allocator, nbytes: this.nbytes }, this);
    }
    return this;
  }

  /** The device memory, for the device's Programs (a HostMemory on CPU and JS). */
  get memory(): unknown {
    return this.allocate().mem;
  }

  /** The memory as a storage array (float16 as Uint16Array bits, bool as 0/1 bytes), shared, not copied. */
  view(): StorageArray {
    if (this.cachedView === undefined) {
      const bytes = this.backend.allocator.bytes(this.memory, this.nbytes);
      this.cachedView = storageView(this.dtype, bytes.buffer, bytes.byteOffset, this.size);
    }
    return this.cachedView;
  }

  /** Copies `src` (a storage array of this dtype and size) into the buffer. */
  copyin(src: StorageArray): this {
    if (src.length !== this.size || src.BYTES_PER_ELEMENT !== this.dtype.itemsize)
      throw new Error(
        `DeviceBuffer.copyin: got a ${src.constructor.name} of ${src.length} elements; ${this} takes ${this.size} elements of ${this.dtype.itemsize} bytes`,
      );
    this.backend.allocator.copyin(this.memory, bytesOf(src));
    return this;
  }

  /** A copy of the contents as a new storage array. */
  copyout(): StorageArray {
    const out = allocStorage(this.dtype, this.size);
    this.backend.allocator.copyout(bytesOf(out), this.memory);
    return out;
  }

  /** Returns the memory to the allocator's cache; views taken before now must not be used after. */
  free(): void {
    if (this.mem === undefined) return;
    this.backend.allocator.free(this.mem, this.nbytes);
    collected.unregister(this);
    this.mem = undefined;
    this.cachedView = undefined;
  }

  toString(): string {
    return `DeviceBuffer(${this.device}, ${this.size} x ${this.dtype.name})`;
  }
}
