// Tensors over files: Tensor.fromFile, its views (shrink, reshape, bitcast) moved lazily with to(), their errors.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type DType, type DTypeLike, dtypes } from '../../src/dtype.ts';
import { Device } from '../../src/runtime/device.ts';
import type { DiskBackend } from '../../src/runtime/disk.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { unravel } from './reference.ts';

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-disk-tensor-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BYTES = Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 255);
let count = 0;
/** A fresh file holding `bytes`. */
function file(bytes: Uint8Array = BYTES): string {
  const path = join(dir, `f${count++}.bin`);
  writeFileSync(path, bytes);
  return path;
}
const disk = () => (Device.get('DISK') as DiskBackend).allocator;
const view = new DataView(BYTES.buffer);
/** The reference: `n` little-endian elements read by `get` from byte `at`, each `size` bytes. */
const read = <T>(at: number, n: number, size: number, get: (o: number) => T): T[] =>
  Array.from({ length: n }, (_, i) => get(at + i * size));
const openFds = () => readdirSync('/proc/self/fd').length;

describe.each(DEVICES)('Tensor.fromFile onto %s', (device) => {
  it('is the file as uint8 on DISK; a slice moved with to() holds those bytes', () => {
    const t = Tensor.fromFile(file());
    expect([t.shape, t.dtype, t.device]).toEqual([[64], dtypes.uint8, 'DISK']);
    const part = t.shrink([[5, 17]]).to(device);
    expect(part.device).toBe(device);
    expect(part.tolist()).toEqual([...BYTES.slice(5, 17)]);
    expect(t.to(device).tolist()).toEqual([...BYTES]);
  });

  it('bitcasts bytes to every width, little-endian, and reshapes them', () => {
    const t = Tensor.fromFile(file());
    const cases: [Exclude<DTypeLike, DType>, number[], unknown[]][] = [
      ['float32', [2, 3], read(8, 6, 4, (o) => view.getFloat32(o, true))],
      ['int32', [6], read(8, 6, 4, (o) => view.getInt32(o, true))],
      ['uint16', [3, 4], read(8, 12, 2, (o) => view.getUint16(o, true))],
      ['int16', [12], read(8, 12, 2, (o) => view.getInt16(o, true))],
      ['float64', [3], read(8, 3, 8, (o) => view.getFloat64(o, true))],
      ['int64', [3, 1], read(8, 3, 8, (o) => view.getBigInt64(o, true))],
      ['int8', [24], read(8, 24, 1, (o) => view.getInt8(o))],
    ];
    for (const [name, shape, want] of cases) {
      const got = t
        .shrink([[8, 32]])
        .bitcast(name)
        .reshape(shape)
        .to(device);
      expect([got.dtype.name, got.shape]).toEqual([name, shape]);
      const flat = (got.tolist() as unknown[]).flat();
      expect(flat, name).toEqual(want);
    }
    // float16 keeps its bits in storage
    const half = t
      .shrink([[2, 6]])
      .bitcast(dtypes.float16)
      .to(device);
    expect([...half.dataSync()]).toEqual(read(2, 2, 2, (o) => view.getUint16(o, true)));
    // bool takes the bytes as they are (0 and 1 here)
    const flags = Tensor.fromFile(file(Uint8Array.of(1, 0, 0, 1)))
      .bitcast(dtypes.bool)
      .to(device);
    expect(flags.tolist()).toEqual([true, false, false, true]);
  });

  it('moves any shrink that is one contiguous run: leading axes of one element, then a cut, then whole axes', () => {
    const grid = Tensor.fromFile(file()).reshape([2, 4, 8]);
    const cases: [number, number][][] = [
      [
        [1, 2],
        [1, 2],
        [2, 7],
      ],
      [
        [0, 2],
        [0, 4],
        [0, 8],
      ],
      [
        [1, 2],
        [1, 3],
        [0, 8],
      ],
      [
        [0, 1],
        [2, 3],
        [5, 6],
      ],
    ];
    for (const ranges of cases) {
      const got = grid.shrink(ranges).to(device);
      const shape = ranges.map(([a, b]) => b - a);
      const want = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => {
        const [a, b, c] = unravel(i, shape).map((x, k) => x + ranges[k]![0]);
        return BYTES[a! * 32 + b! * 8 + c!]!;
      });
      expect([...got.dataSync()], JSON.stringify(ranges)).toEqual(want);
      expect(got.shape).toEqual(shape);
    }
    // a shrink of a shrink, of a bitcast view; a scalar; an empty slice reads nothing
    const words = Tensor.fromFile(file()).bitcast(dtypes.uint32).reshape([4, 4]);
    const inner = words.shrink([
      [1, 3],
      [0, 4],
    ]);
    expect(
      inner
        .shrink([
          [1, 2],
          [1, 3],
        ])
        .to(device)
        .tolist(),
    ).toEqual([read(36, 2, 4, (o) => view.getUint32(o, true))]);
    expect(
      words
        .shrink([
          [2, 3],
          [3, 4],
        ])
        .reshape([])
        .to(device)
        .item(),
    ).toBe(view.getUint32(44, true));
    const before = disk().bytesRead;
    const empty = words.shrink([
      [1, 1],
      [0, 4],
    ]);
    expect([empty.to(device).shape, empty.to(device).tolist()]).toEqual([[0, 4], []]);
    expect(disk().bytesRead).toBe(before);
  });

  it('reads when the copy is first used, only its bytes, once; a change in place before then shows', () => {
    const path = file();
    const t = Tensor.fromFile(path);
    const start = { bytes: disk().bytesRead, reads: disk().reads };
    const a = t
      .shrink([[4, 12]])
      .bitcast(dtypes.int32)
      .to(device);
    expect([disk().bytesRead - start.bytes, disk().reads - start.reads]).toEqual([0, 0]);
    const changed = BYTES.slice();
    changed.set([1, 0, 0, 0], 4);
    writeFileSync(path, changed);
    expect(a.tolist()).toEqual([1, view.getInt32(8, true)]);
    expect(a.add(1).tolist()).toEqual([2, view.getInt32(8, true) + 1]);
    expect([disk().bytesRead - start.bytes, disk().reads - start.reads]).toEqual([8, 1]);
  });
});

describe('Tensor.fromFile errors', () => {
  it('names a missing file and a directory', () => {
    const missing = join(dir, 'missing.bin');
    expect(() => Tensor.fromFile(missing)).toThrow(`Tensor.fromFile: ${missing}: cannot open: ENOENT`);
    expect(() => Tensor.fromFile(dir)).toThrow(`Tensor.fromFile: ${dir}: cannot open: not a regular file`);
  });

  it('refuses views that are not one byte range, and moving onto DISK', () => {
    const t = Tensor.fromFile(file()).reshape([8, 8]);
    expect(() =>
      t
        .shrink([
          [0, 2],
          [1, 3],
        ])
        .to('JS'),
    ).toThrow(
      'to: a DISK tensor moves as one contiguous byte range of its file, but this shrink of (8, 8) to (2, 2) (from (0, 1)) is not one; shrink a 1-D view, or move a larger range and shrink it on the device',
    );
    for (const [op, v] of [
      ['PERMUTE', t.permute([1, 0])],
      ['FLIP', t.flip(0)],
      ['EXPAND', t.reshape([1, 64]).expand([2, 64])],
      ['CAST', t.cast(dtypes.int32)],
      [
        'PAD',
        t.pad([
          [1, 0],
          [0, 0],
        ]),
      ],
    ] as const)
      expect(() => v.to('JS'), op).toThrow(
        `to: a DISK tensor moves as one contiguous byte range of its file (Tensor.fromFile, then shrink, reshape, bitcast), but this one is a ${op} of it; move it first (.to(device)) and compute there`,
      );
    expect(() => t.to('DISK:1')).toThrow(
      'to: cannot copy a DISK tensor onto DISK:1: DISK buffers are read-only ranges of files; move it to a device that computes',
    );
    expect(t.to('disk')).toBe(t);
    expect(() => Tensor.empty([4], { device: 'DISK' }).to('JS')).toThrow(
      'to: this DISK tensor was not made by Tensor.fromFile, so it has no file to read',
    );
  });

  it('reads a DISK tensor only through to(): its data and kernels on DISK are errors', () => {
    const t = Tensor.fromFile(file());
    expect(() => t.dataSync()).toThrow('DISK: cannot allocate 64 bytes');
    // the engine names the missing renderer before DiskBackend.compile could say more
    expect(() => t.add(1).realize()).toThrow('device DISK holds data only and runs no kernels');
  });

  it('bitcasts to another size only on DISK, and only whole elements of the last axis', () => {
    const t = Tensor.fromFile(file());
    expect(() => t.shrink([[0, 6]]).bitcast(dtypes.float32)).toThrow(
      'bitcast: cannot reinterpret (6) uint8 as float32: the last axis holds 6 bytes, not a whole number of float32 (4 bytes)',
    );
    expect(() =>
      t
        .shrink([[0, 1]])
        .reshape([])
        .bitcast(dtypes.int16),
    ).toThrow(
      'bitcast: cannot reinterpret () uint8 as int16: a scalar has no last axis to rescale; reshape it to (1) first',
    );
    expect(() => new Tensor([1, 2], { dtype: dtypes.uint8, device: 'JS' }).bitcast(dtypes.int16)).toThrow(
      'bitcast: cannot reinterpret uint8 (1 bytes) as int16 (2 bytes); the target needs the same size and neither may be bool (e.g. float32 <-> int32/uint32, float16 <-> int16); only a DISK tensor (Tensor.fromFile) changes size',
    );
    expect(() => new Tensor([1, 0], { dtype: dtypes.uint8, device: 'JS' }).bitcast(dtypes.bool)).toThrow(
      'bitcast: cannot reinterpret uint8 (1 bytes) as bool',
    );
  });
});

describe.skipIf(!existsSync('/proc/self/fd'))('Tensor.fromFile and dispose', () => {
  it('closes the file at dispose(), or once every copy made before then has read its bytes', () => {
    const before = openFds();
    const t = Tensor.fromFile(file());
    expect(openFds()).toBe(before + 1);
    t.dispose();
    expect(openFds()).toBe(before);

    const u = Tensor.fromFile(file());
    const [a, b] = [u.shrink([[0, 4]]).to('JS'), u.shrink([[4, 8]]).to('JS')];
    const later = u.shrink([[8, 12]]);
    u.dispose();
    expect(openFds()).toBe(before + 1);
    expect(a.tolist()).toEqual([...BYTES.slice(0, 4)]);
    expect(openFds()).toBe(before + 1);
    expect(b.tolist()).toEqual([...BYTES.slice(4, 8)]);
    expect(openFds()).toBe(before);
    expect(() => later.to('JS')).toThrow('the file was closed (its Tensor.fromFile tensor was disposed)');
  });
});

describe('new Tensor(typedArray)', () => {
  it('takes an array of the dtype storage as it is, copied: a later change of the array does not show', () => {
    for (const device of DEVICES) {
      const src = Float32Array.of(1.5, -2, 3);
      const t = new Tensor(src, { device });
      src[0] = 9;
      expect([t.dtype, t.shape, t.tolist()]).toEqual([dtypes.float32, [3], [1.5, -2, 3]]);
      // another dtype converts element by element; a value it cannot hold is an error, not a wrap
      expect(new Tensor(Int32Array.of(1, 200), { dtype: dtypes.uint8, device }).tolist()).toEqual([1, 200]);
      expect(() => new Tensor(Int32Array.of(1, 300), { dtype: dtypes.uint8, device })).toThrow(
        'the value 300 does not fit uint8',
      );
    }
  });
});
