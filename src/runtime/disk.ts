// The DISK device (Node only): buffers that stand for byte ranges of a file; copying one out reads just its bytes.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type { DType } from '../dtype.ts';
import { Allocator } from './allocator.ts';
import { Backend } from './backend.ts';
import { DeviceBuffer } from './buffer.ts';

// a file stays open while buffers over it live, and is closed with the last of them
const closer = new FinalizationRegistry<number>((fd) => {
  try {
    closeSync(fd);
  } catch {
    // an error thrown here would end the process, and there is no caller left to tell
  }
});

/**
 * A file opened for reading. Reads go through the descriptor opened here, so a file replaced on disk (as
 * safeSave replaces one) still reads as it was when opened.
 */
export class DiskFile {
  readonly fd: number;
  /** The size in bytes when opened: no read goes past it. */
  readonly size: number;
  // reads promised to DISK tensors' copies and not yet done, and whether its tensor let go (release)
  private pending = 0;
  private released = false;
  private closed = false;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'r');
    try {
      const stat = fstatSync(this.fd);
      if (!stat.isFile()) throw new Error('not a regular file');
      this.size = stat.size;
    } catch (e) {
      closeSync(this.fd);
      throw e;
    }
    closer.register(this, this.fd, this);
  }

  /** Fills `dst` with the file's bytes from `position`; `what` names them in errors. */
  read(dst: Uint8Array, position: number, what: string): void {
    const end = position + dst.byteLength;
    if (this.closed)
      throw new Error(`${this.path}: ${what}: the file was closed (its Tensor.fromFile tensor was disposed)`);
    if (!(Number.isSafeInteger(position) && position >= 0 && end <= this.size))
      throw new Error(
        `${this.path}: ${what}: bytes [${position}, ${end}) lie outside the file's ${this.size} bytes`,
      );
    for (let done = 0; done < dst.byteLength; ) {
      const n = readSync(this.fd, dst, done, dst.byteLength - done, position + done);
      if (n === 0)
        throw new Error(
          `${this.path}: ${what}: bytes [${position}, ${end}) are no longer in the file: it was truncated after it was opened`,
        );
      done += n;
    }
  }

  /** Closes the file now; only for a file that no buffer reads (a failed or header-only load). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closer.unregister(this);
    closeSync(this.fd);
  }

  /** One more read promised (a copy that reads when first used): the file stays open for it. */
  promise(what: string): void {
    if (this.closed)
      throw new Error(`${this.path}: ${what}: the file was closed (its Tensor.fromFile tensor was disposed)`);
    this.pending++;
  }

  /** A promised read is done; the file closes if it was released and nothing else waits. */
  kept(): void {
    this.pending--;
    if (this.released && this.pending === 0) this.close();
  }

  /** Closes the file once no promised read is left: now, or after the last of them. */
  release(): void {
    this.released = true;
    if (this.pending === 0) this.close();
  }
}

/** The memory of a DISK buffer: its bytes start at `offset` in `file`; `what` names them in errors. */
export interface DiskRange {
  readonly file: DiskFile;
  readonly offset: number;
  readonly what: string;
  /** Whether the file keeps a promised read open for this range (see DiskFile.promise), until it is read. */
  promised: boolean;
}

export class DiskAllocator extends Allocator<DiskRange> {
  /** Bytes copied out of files so far, and in how many reads (shows that loading reads only what is used). */
  bytesRead = 0;
  reads = 0;

  protected create(nbytes: number): never {
    throw new Error(
      `${this.device}: cannot allocate ${nbytes} bytes: DISK buffers are byte ranges of existing files (Tensor.fromFile makes them); move a DISK tensor with .to(device) and compute there`,
    );
  }

  /** A fresh copy of the range's bytes (a file's bytes cannot be shared with the host). */
  bytes(range: DiskRange, nbytes: number): Uint8Array {
    const out = new Uint8Array(nbytes);
    this.copyout(out, range);
    return out;
  }

  override copyin(range: DiskRange): never {
    throw new Error(
      `${this.device}: ${range.file.path}: DISK buffers are read-only; write files with safeSave`,
    );
  }

  override copyout(dst: Uint8Array, range: DiskRange): void {
    range.file.read(dst, range.offset, range.what);
    this.bytesRead += dst.byteLength;
    this.reads++;
    if (range.promised) {
      range.promised = false;
      range.file.kept();
    }
  }
}

export class DiskBackend extends Backend {
  declare readonly allocator: DiskAllocator;

  constructor(name: string) {
    super(name, 'DISK', new DiskAllocator(name));
  }

  language(): undefined {
    return undefined;
  }

  /** The file at `path`, opened for reading (Tensor.fromFile reaches it through the device registry). */
  open(path: string): DiskFile {
    return new DiskFile(path);
  }

  /**
   * `size` elements of `dtype` at byte `offset` of `file`, to be read once (what a DISK tensor's `to()`
   * copies from): the file stays open until then, even when its tensor is disposed.
   */
  view(file: DiskFile, offset: number, size: number, dtype: DType, what: string): DiskBuffer {
    return new DiskBuffer(file, offset, size, dtype, what, true);
  }

  compile(name: string): never {
    throw new Error(
      `${this.name}: cannot compile kernel ${name}: the DISK device runs no kernels; load its tensors onto a device that computes`,
    );
  }
}

/** `size` elements of `dtype` at byte `offset` of `file`: a DeviceBuffer whose memory is that range, never allocated. */
export class DiskBuffer extends DeviceBuffer {
  private readonly range: DiskRange;

  constructor(file: DiskFile, offset: number, size: number, dtype: DType, what: string, promised = false) {
    super('DISK', size, dtype);
    this.range = { file, offset, what, promised };
    if (promised) file.promise(what);
  }

  override get memory(): DiskRange {
    return this.range;
  }
}
