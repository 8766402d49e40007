// Tensors over files (Node only): Tensor.fromFile, and moving a byte range of one to a device that computes.

import { dtypes } from '../dtype.ts';
import { copyOnFirstUse } from '../engine/buffers.ts';
import { prod } from '../helpers.ts';
import { Device } from '../runtime/device.ts';
import type { DiskBackend, DiskFile } from '../runtime/disk.ts';
import { newBuffer } from '../schedule/rangeify.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { Tensor } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** @internal to() of a DISK tensor: its bytes, copied onto `device` when first used. */
    fromDisk(device: string): Tensor;
    /** @internal dispose() of a DISK tensor: a Tensor.fromFile tensor lets its file close. */
    releaseFile(): void;
  }
  namespace Tensor {
    /**
     * The bytes of the file at `path` as a uint8 tensor on the DISK device (Node only). Nothing is read now:
     * slice it (`shrink`), `bitcast` and `reshape` it, then `.to(device)` reads just that range, when its
     * data is first needed. The file stays open until the tensor is disposed (or collected) and every copy
     * made by `to()` has read its bytes.
     */
    function fromFile(path: string): Tensor;
  }
}

// the file behind each DISK BUFFER that fromFile made
const files = new WeakMap<UOp, DiskFile>();

/** Where a contiguous run of a file's bytes starts (its length is the view's). */
interface ByteRange {
  file: DiskFile;
  offset: number;
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;

/** The numbers of a shape vector (a STACK of index constants). */
const numbers = (vec: UOp): number[] => vec.src.map((c) => Number((c.arg as { value: number }).value));

/**
 * The bytes a view of a fromFile tensor stands for. Reshapes and bitcasts keep the bytes; a shrink keeps a
 * contiguous run when every axis before its last cut axis keeps one element. Anything else is not one
 * range of the file, and throws.
 */
function byteRange(u: UOp): ByteRange {
  if (u.op === Ops.BUFFER) {
    const file = files.get(u);
    if (file === undefined)
      throw new Error('to: this DISK tensor was not made by Tensor.fromFile, so it has no file to read');
    return { file, offset: 0 };
  }
  if (u.op === Ops.RESHAPE || u.op === Ops.BITCAST) return byteRange(u.src[0]!);
  if (u.op === Ops.SHRINK) {
    const src = u.src[0]!;
    const range = byteRange(src);
    const shape = src.shape as number[];
    const [starts, sizes] = [numbers(u.src[1]!), numbers(u.src[2]!)];
    if (sizes.includes(0)) return range; // reads nothing
    const lastCut = shape.reduce((last, d, i) => (sizes[i] !== d ? i : last), -1);
    if (sizes.slice(0, Math.max(0, lastCut)).some((d) => d !== 1))
      throw new Error(
        `to: a DISK tensor moves as one contiguous byte range of its file, but this shrink of ${fmt(shape)} to ${fmt(sizes)} (from ${fmt(starts)}) is not one; shrink a 1-D view, or move a larger range and shrink it on the device`,
      );
    const offset = starts.reduce((o, s, i) => o + s * prod(shape.slice(i + 1)), 0);
    return { file: range.file, offset: range.offset + offset * src.dtype.itemsize };
  }
  throw new Error(
    `to: a DISK tensor moves as one contiguous byte range of its file (Tensor.fromFile, then shrink, reshape, bitcast), but this one is a ${opName(u.op)} of it; move it first (.to(device)) and compute there`,
  );
}

Tensor.fromFile = (path: string): Tensor => {
  let file: DiskFile;
  try {
    file = (Device.get('DISK') as DiskBackend).open(path);
  } catch (e) {
    throw new Error(`Tensor.fromFile: ${path}: cannot open: ${(e as Error).message}`, { cause: e });
  }
  const buf = newBuffer([file.size], dtypes.uint8, 'DISK');
  files.set(buf, file);
  return new Tensor(buf, { device: 'DISK' });
};

Tensor.prototype.fromDisk = function (this: Tensor, device: string): Tensor {
  if (Device.get(device).language() === undefined)
    throw new Error(
      `to: cannot copy a DISK tensor onto ${device}: DISK buffers are read-only ranges of files; move it to a device that computes`,
    );
  const { file, offset } = byteRange(this.uop);
  const what = `a ${fmt(this.shape)} ${this.dtype.name} view`;
  // the view's bytes are the range's, in order: the copy needs no kernel
  const buf = newBuffer(this.shape, this.dtype, device);
  copyOnFirstUse(
    buf,
    (Device.get(this.device) as DiskBackend).view(file, offset, this.numel, this.dtype, what),
  );
  return new Tensor(buf, { device });
};

Tensor.prototype.releaseFile = function (this: Tensor): void {
  files.get(this.uop)?.release();
};
