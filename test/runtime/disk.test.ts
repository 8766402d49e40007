// The DISK device: buffers over byte ranges of a file, read only when copied out, never outside the file.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Device } from '../../src/runtime/device.ts';
import { type DiskBackend, DiskBuffer, DiskFile } from '../../src/runtime/disk.ts';

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-disk-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const path = join(dir, 'bytes.bin');
writeFileSync(
  path,
  Uint8Array.from({ length: 32 }, (_, i) => i),
);

describe('DISK', () => {
  it('copies out just the bytes of a buffer', () => {
    const disk = (Device.get('DISK') as DiskBackend).allocator;
    const file = new DiskFile(path);
    expect(file.size).toBe(32);
    const buf = new DiskBuffer(file, 4, 2, dtypes.uint32, 'the second word pair');
    const before = disk.bytesRead;
    expect(buf.copyout()).toEqual(Uint32Array.of(0x07060504, 0x0b0a0908));
    expect(disk.bytesRead - before).toBe(8);
    expect(new DiskBuffer(file, 30, 2, dtypes.uint8, 'the end').view()).toEqual(Uint8Array.of(30, 31));
  });

  it('refuses reads outside the file, writes, allocation and kernels', () => {
    const file = new DiskFile(path);
    expect(() => new DiskBuffer(file, 28, 2, dtypes.uint32, 'w').copyout()).toThrow(
      `${path}: w: bytes [28, 36) lie outside the file's 32 bytes`,
    );
    expect(() => new DiskBuffer(file, 0, 1, dtypes.uint8, 'w').copyin(Uint8Array.of(1))).toThrow(
      `DISK: ${path}: DISK buffers are read-only; write files with safeSave`,
    );
    expect(() => Device.get('DISK').allocator.alloc(4)).toThrow('DISK: cannot allocate 4 bytes');
    expect(() => Device.get('DISK').compile('k', '')).toThrow('DISK: cannot compile kernel k');
    expect(() => new DiskFile(dir)).toThrow('not a regular file');
  });
});
