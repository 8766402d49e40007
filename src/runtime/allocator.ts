// Allocators: device memory with a free list that reuses freed blocks of the same byte size, and its accounting.

/** Allocated memory that the host can address: `bytes` of `buffer` from `byteOffset`. */
export interface HostMemory {
  readonly buffer: ArrayBuffer;
  readonly byteOffset: number;
  /** The native address of the first byte (0 on devices whose kernels take no pointers). */
  readonly address: number;
}

/**
 * Memory of one device. Freed blocks stay cached for the next allocation of the same byte size, the most
 * recently freed first; once more than `maxCachedBytes` are cached, the sizes least recently freed are dropped.
 */
export abstract class Allocator<M = unknown> {
  /** Bytes held by live allocations. */
  bytesInUse = 0;
  /** Bytes held in the free list, ready for reuse. */
  bytesCached = 0;
  // byte size -> freed blocks; Map order is recency of the last free, so eviction starts at the front
  private readonly freeLists = new Map<number, M[]>();

  constructor(
    readonly device: string,
    public maxCachedBytes = 1 << 30,
  ) {}

  /** A block of `nbytes` bytes: a cached one of that size if any (its contents are stale), else a new one. */
  alloc(nbytes: number): M {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0)
      throw new Error(`${this.device} alloc: byte size must be a non-negative integer, got ${nbytes}`);
    const list = this.freeLists.get(nbytes);
    let mem = list?.pop();
    if (mem !== undefined) {
      if (list!.length === 0) this.freeLists.delete(nbytes);
      this.bytesCached -= nbytes;
    } else {
      try {
        mem = this.create(nbytes);
      } catch (e) {
        // out of memory: what the cache holds may be enough, so give it back and try once more
        if (this.bytesCached === 0) throw e;
        this.clearCache();
        mem = this.create(nbytes);
      }
    }
    this.bytesInUse += nbytes;
    return mem;
  }

  /** Returns a block to the free list. */
  free(mem: M, nbytes: number): void {
    this.bytesInUse -= nbytes;
    const list = this.freeLists.get(nbytes) ?? [];
    this.freeLists.delete(nbytes); // re-inserted below: this size is now the most recently freed
    list.push(mem);
    this.freeLists.set(nbytes, list);
    this.bytesCached += nbytes;
    this.trim(this.maxCachedBytes);
  }

  /** Drops every cached block. */
  clearCache(): void {
    this.trim(0);
  }

  private trim(limit: number): void {
    for (const [nbytes, list] of this.freeLists) {
      if (this.bytesCached <= limit) return;
      while (list.length > 0 && this.bytesCached > limit) {
        this.destroy(list.shift()!);
        this.bytesCached -= nbytes;
      }
      if (list.length === 0) this.freeLists.delete(nbytes);
    }
  }

  /** The host-visible bytes of a block; devices whose memory the host cannot see throw. */
  abstract bytes(mem: M, nbytes: number): Uint8Array;

  copyin(mem: M, src: Uint8Array): void {
    this.bytes(mem, src.byteLength).set(src);
  }

  copyout(dst: Uint8Array, mem: M): void {
    dst.set(this.bytes(mem, dst.byteLength));
  }

  protected abstract create(nbytes: number): M;
  /** Releases a block dropped from the cache (host memory needs nothing: the garbage collector takes it). */
  protected destroy(_mem: M): void {}
}

/** What bounds one host buffer: the host's memory, where the host says (Node sets it; a browser does not). */
export const hostMemory = { totalBytes: Infinity };

const gigabytes = (n: number) => `${(n / 1e9).toFixed(1)} GB`;

/** Host memory in ArrayBuffers, aligned to `align` bytes when `addressOf` gives native addresses. */
export class HostAllocator extends Allocator<HostMemory> {
  constructor(
    device: string,
    private readonly align = 1,
    private readonly addressOf: (bytes: Uint8Array) => number = () => 0,
  ) {
    super(device);
  }

  protected create(nbytes: number): HostMemory {
    // past the host's memory the allocation may still succeed (pages are mapped lazily), and the process is
    // killed when the kernel writes them: refuse it here
    if (nbytes > hostMemory.totalBytes)
      throw new Error(
        `${this.device}: ${nbytes} bytes (${gigabytes(nbytes)}) is more than this machine's memory, ${gigabytes(hostMemory.totalBytes)}`,
      );
    // over-allocate and start at the first aligned byte: ArrayBuffers only promise 8 or 16
    let buffer: ArrayBuffer;
    try {
      buffer = new ArrayBuffer(nbytes + this.align - 1);
    } catch (e) {
      throw new Error(
        `${this.device}: cannot allocate ${nbytes} bytes (${gigabytes(nbytes)}): ${(e as Error).message}`,
      );
    }
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(buffer);
    } catch {
      // the bytes are read and written as one typed array, whose length the JS engine bounds (2^32 in Node 20)
      throw new Error(
        `${this.device}: cannot allocate ${nbytes} bytes (${gigabytes(nbytes)}): longer than the longest typed array this JS engine allows`,
      );
    }
    const base = this.addressOf(bytes);
    const byteOffset = (this.align - (base % this.align)) % this.align;
    return { buffer, byteOffset, address: base === 0 ? 0 : base + byteOffset };
  }

  bytes(mem: HostMemory, nbytes: number): Uint8Array {
    return new Uint8Array(mem.buffer, mem.byteOffset, nbytes);
  }
}
