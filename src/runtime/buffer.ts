// DeviceBuffer: `size` elements of a dtype in one device's memory, allocated on first use.
import { allocStorage, checkStorage, type DType, type StorageArray, storageView } from '../dtype.ts';
import { type Allocator, HostAllocator } from './allocator.ts';
import type { Backend } from './backend.ts';
import { Device } from './device.ts';

// A buffer dropped without free() returns its memory to the allocator's cache once it is collected. The
// registry holds the memory, not the buffer; what else could still reach that memory is a view from view()
// kept after its buffer was dropped, which view() documents as invalid then. Collection happens only after
// the job that dropped the buffer ends, so memory comes back at the next await, not inside a synchronous loop.
const collected = new FinalizationRegistry<{ allocator: Allocator; mem: unknown; nbytes: number }>(
  ({ allocator, mem, nbytes }) => allocator.free(mem, nbytes),
);

/** The most elements of an upload kept on the host beside GPU memory (index tensors, labels). */
const UPLOAD_KEPT = 1 << 16;

const bytesOf = (a: StorageArray) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

export class DeviceBuffer {
  readonly backend: Backend;
  readonly nbytes: number;
  private mem: unknown;
  private freed = false;
  private cachedView: StorageArray | undefined;
  private uploaded: StorageArray | undefined;

  constructor(
    device: string | Backend,
    readonly size: number,
    readonly dtype: DType,
  ) {
    this.backend = typeof device === 'string' ? Device.get(device) : device;
    if (!Number.isSafeInteger(size) || size < 0)
      throw new Error(`DeviceBuffer on ${this.device}: size must be a non-negative integer, got ${size}`);
    try {
      checkStorage(dtype);
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
      // a freed buffer may still sit in a JIT's recorded launches: it must fail there, not run on new memory
      if (this.freed)
        throw new Error(`${this} was freed (by free() or Tensor.dispose()); it cannot be used again`);
      const { allocator } = this.backend;
      this.mem = allocator.alloc(this.nbytes);
      collected.register(this, { allocator, mem: this.mem, nbytes: this.nbytes }, this);
    }
    return this;
  }

  /** The device memory, for the device's Programs (a HostMemory on CPU and JS). */
  get memory(): unknown {
    return this.allocate().mem;
  }

  /**
   * The memory as a storage array (float16 as Uint16Array bits, bool as 0/1 bytes), shared, not copied; valid
   * while this buffer is neither freed nor dropped (its memory then goes to other buffers).
   */
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
    // what the host sent to memory it cannot see, kept while small for host-side checks (index ranges)
    this.uploaded =
      !(this.backend.allocator instanceof HostAllocator) && this.size <= UPLOAD_KEPT
        ? src.slice()
        : undefined;
    return this;
  }

  /**
   * The contents as the host last sent them, where the device's memory is not the host's (a GPU's) and no
   * kernel has written the buffer since (see `written`).
   */
  get hostCopy(): StorageArray | undefined {
    return this.uploaded;
  }

  /** Called by a device's Program for each buffer a kernel writes. */
  written(): void {
    this.uploaded = undefined;
  }

  /** A copy of the contents as a new storage array. */
  copyout(): StorageArray {
    const out = allocStorage(this.dtype, this.size);
    this.backend.allocator.copyout(bytesOf(out), this.memory);
    return out;
  }

  /** Returns the memory to the allocator's cache for good: using the buffer afterwards throws. */
  free(): void {
    this.freed = true;
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
