// safetensors: round trips of every dtype and shape, the exact bytes, lazy loading through DISK, malformed files.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ConstValue, type DType, dtypes, type StorageArray } from '../../src/dtype.ts';
import { safeLoad, safeMetadata, safeSave } from '../../src/nn/state.ts';
import { Device } from '../../src/runtime/device.ts';
import type { DiskBackend } from '../../src/runtime/disk.ts';
import { Tensor } from '../../src/tensor/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-safetensors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const fresh = (name = 'model') => join(dir, `${name}-${files++}.safetensors`);

const disk = () => (Device.get('DISK') as DiskBackend).allocator;
const bytesOf = (a: StorageArray) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** The JSON header of a safetensors file and where its data starts, read without tsgrad. */
function rawHeader(path: string): { header: Record<string, unknown>; length: number } {
  const bytes = readFileSync(path);
  const length = Number(bytes.readBigUInt64LE(0));
  return { header: JSON.parse(bytes.subarray(8, 8 + length).toString('utf8')), length };
}

/** A file of a header length (by default the header's own), a header (bytes, JSON text or a value) and data. */
function craft(header: unknown, data: ArrayLike<number> = [], length?: bigint): string {
  const text =
    header instanceof Uint8Array
      ? header
      : Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(length ?? BigInt(text.length));
  const path = fresh('crafted');
  writeFileSync(path, Buffer.concat([prefix, text, Buffer.from(Uint8Array.from(data))]));
  return path;
}

// values at the edges of each dtype, as safetensors names it
const CASES: [string, DType, ConstValue[]][] = [
  ['F32', dtypes.float32, [0, -0, 1.5, -3.25, 3.4e38, 1e-45, Infinity, -Infinity, Number.NaN]],
  ['F16', dtypes.float16, [0, -0, 1, -2.5, 65504, 6e-8, Infinity, Number.NaN]],
  ['BF16', dtypes.bfloat16, [0, -0, 1, -2.5, 3.3895e38, Infinity, Number.NaN]],
  ['F64', dtypes.float64, [0, -0, Math.PI, -1e308, 5e-324, Infinity, Number.NaN]],
  ['I8', dtypes.int8, [0, 1, -1, 127, -128]],
  ['I16', dtypes.int16, [0, -1, 32767, -32768]],
  ['I32', dtypes.int32, [0, -1, 2147483647, -2147483648]],
  ['I64', dtypes.int64, [0, -1, 2 ** 53, -(2n ** 63n), 2n ** 63n - 1n]],
  ['U8', dtypes.uint8, [0, 1, 255]],
  ['U16', dtypes.uint16, [0, 65535]],
  ['U32', dtypes.uint32, [0, 4294967295]],
  ['U64', dtypes.uint64, [0, 2n ** 64n - 1n]],
  ['BOOL', dtypes.bool, [true, false, true]],
];

describe.each(['CPU', 'JS'])('safetensors on %s', (device) => {
  it.each(CASES)('%s round-trips bit for bit', (name, dtype, values) => {
    const t = new Tensor(values, { dtype, device });
    const path = fresh();
    safeSave(path, { t, t2: t.reshape([1, values.length]) });
    expect(rawHeader(path).header.t).toEqual({
      dtype: name,
      shape: [values.length],
      data_offsets: [0, values.length * dtype.itemsize],
    });
    const loaded = safeLoad(path, { device });
    for (const [key, shape] of [
      ['t', [values.length]],
      ['t2', [1, values.length]],
    ] as const) {
      const l = loaded[key]!;
      expect([l.shape, l.dtype, l.device]).toEqual([shape, dtype, device]);
      expect(bytesOf(l.dataSync())).toEqual(bytesOf(t.dataSync()));
    }
  });

  it('round-trips scalars, zero-size tensors and computed (unrealized) tensors', () => {
    const path = fresh();
    const computed = Tensor.arange(6, undefined, 1, { device }).reshape([2, 3]).mul(2);
    const state = {
      scalar: new Tensor(2.5, { device }),
      empty: Tensor.empty([0], { device }),
      empty3d: Tensor.zeros([2, 0, 3], { device, dtype: dtypes.int64 }),
      computed,
      tied: computed,
    };
    safeSave(path, state);
    const loaded = safeLoad(path, { device });
    expect(Object.keys(loaded)).toEqual(Object.keys(state));
    expect(loaded.scalar!.shape).toEqual([]);
    expect(loaded.scalar!.item()).toBe(2.5);
    expect([loaded.empty!.shape, loaded.empty!.tolist()]).toEqual([[0], []]);
    expect([loaded.empty3d!.shape, loaded.empty3d!.dtype, loaded.empty3d!.numel]).toEqual([
      [2, 0, 3],
      dtypes.int64,
      0,
    ]);
    for (const t of [loaded.computed!, loaded.tied!])
      expect(t.tolist()).toEqual([
        [0, 2, 4],
        [6, 8, 10],
      ]);
    // saved, unread, over the file they come from: they are read before the new file replaces it
    safeSave(path, safeLoad(path, { device }));
    expect(safeLoad(path, { device }).tied!.sum().item()).toBe(30);
  });

  it('feeds lazily loaded tensors to kernels and to other devices', () => {
    const path = fresh();
    safeSave(path, {
      w: new Tensor(
        [
          [1, 2],
          [3, 4],
        ],
        { device },
      ),
      b: new Tensor([10, 20], { device }),
    });
    const { w, b } = safeLoad(path, { device });
    expect(
      w!
        .matmul(new Tensor([1, 1], { device }))
        .add(b!)
        .tolist(),
    ).toEqual([13, 27]);
    const other = device === 'CPU' ? 'JS' : 'CPU';
    expect(safeLoad(path, { device }).w!.to(other).sum().item()).toBe(10);
  });
});

describe('safeSave', () => {
  it('writes the exact bytes: a padded header in the dict order, data widest dtype first', () => {
    const path = fresh();
    safeSave(
      path,
      {
        flag: new Tensor([true], { device: 'JS' }),
        w: new Tensor([1, 2], { dtype: dtypes.float32, device: 'JS' }),
        h: new Tensor([1], { dtype: dtypes.float16, device: 'JS' }),
      },
      { format: 'pt' },
    );
    const json =
      '{"__metadata__":{"format":"pt"},"flag":{"dtype":"BOOL","shape":[1],"data_offsets":[10,11]},' +
      '"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"h":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}';
    const header = json.padEnd(Math.ceil(json.length / 8) * 8, ' ');
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(header.length));
    const data = [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0x00, 0x3c, 1];
    expect(readFileSync(path)).toEqual(Buffer.concat([length, Buffer.from(header), Buffer.from(data)]));
  });

  it('aligns every tensor to its element size and the data to 8 bytes, with names of any characters', () => {
    const path = fresh();
    const names = ['é/层.weight', '__proto__', 'a b"c'];
    safeSave(path, {
      [names[0]!]: new Tensor([1], { dtype: dtypes.int8 }),
      [names[1]!]: new Tensor([2], { dtype: dtypes.float64 }),
      [names[2]!]: new Tensor([3, 4, 5], { dtype: dtypes.int16 }),
    });
    const { header, length } = rawHeader(path);
    expect(length % 8).toBe(0);
    for (const name of names) {
      const { dtype, data_offsets } = header[name] as { dtype: string; data_offsets: number[] };
      expect(data_offsets[0]! % CASES.find(([n]) => n === dtype)![1].itemsize).toBe(0);
    }
    const loaded = safeLoad(path);
    expect(Object.keys(loaded)).toEqual(names);
    expect(names.map((n) => loaded[n]!.tolist())).toEqual([[1], [2], [3, 4, 5]]);
    expect(Object.getPrototypeOf(loaded)).toBe(Object.prototype);
  });

  it('round-trips metadata; a file without it has none', () => {
    const path = fresh();
    const metadata = { format: 'pt', note: 'ünïcode, "quotes" and\nnewlines' };
    safeSave(path, { x: new Tensor([1]) }, metadata);
    expect(safeMetadata(path)).toEqual(metadata);
    expect(Object.keys(safeLoad(path))).toEqual(['x']);
    const plain = fresh();
    safeSave(plain, { x: new Tensor([1]) });
    expect(safeMetadata(plain)).toEqual({});
    expect(rawHeader(plain).header).not.toHaveProperty('__metadata__');
    safeSave(plain, {});
    expect(safeLoad(plain)).toEqual({});
  });

  it('replaces a file atomically: a failed save leaves the old file and no temporary file', () => {
    const sub = join(dir, 'atomic');
    mkdirSync(sub);
    const path = join(sub, 'model.safetensors');
    safeSave(path, { x: new Tensor([1, 2]) });
    const before = readFileSync(path);
    expect(() => safeSave(path, { x: new Tensor([1, 2]), y: Tensor.ones([2], { device: 'NULL' }) })).toThrow(
      `safeSave: ${path}: tensor 'y': dataSync: NULL: cannot read`,
    );
    expect(readFileSync(path)).toEqual(before);
    safeSave(path, { x: new Tensor([7, 8, 9]) });
    expect(safeLoad(path).x!.tolist()).toEqual([7, 8, 9]);
    expect(readdirSync(sub)).toEqual(['model.safetensors']);
    const missing = join(sub, 'no-such-dir', 'model.safetensors');
    expect(() => safeSave(missing, { x: new Tensor([1]) })).toThrow(
      `safeSave: ${missing}: cannot write: ENOENT`,
    );
  });

  it('names the problem with a state dict', () => {
    const path = fresh();
    expect(() => safeSave(path, { __metadata__: new Tensor([1]) })).toThrow(
      `safeSave: ${path}: '__metadata__' names the metadata in safetensors; it cannot name a tensor`,
    );
    expect(() => safeSave(path, { w: [1, 2] as unknown as Tensor })).toThrow(
      `safeSave: ${path}: tensor 'w' is not a Tensor: [1,2]`,
    );
    expect(() => safeSave(path, { w: new Tensor([1]) }, { n: 1 as unknown as string })).toThrow(
      `safeSave: ${path}: metadata must be an object of strings, got {"n":1}`,
    );
    expect(() => safeSave(path, { w: new Tensor([1]) }, 'pt' as never)).toThrow('got "pt"');
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(() => safeSave(path, { w: loop as never })).toThrow("tensor 'w' is not a Tensor: [object Object]");
    expect(existsSync(path)).toBe(false);
  });
});

describe('safeLoad is lazy', () => {
  const big = 1 << 20;

  function bigFile(): string {
    const path = fresh('big');
    safeSave(path, {
      big: Tensor.full([big / 4], 1.5, { dtype: dtypes.float32 }),
      small: new Tensor([1, 2, 3, 4], { dtype: dtypes.int32 }),
      other: new Tensor([5, 6], { dtype: dtypes.int64 }),
    });
    return path;
  }

  it('reads nothing but the header when loading, then only each used tensor, once', () => {
    const path = bigFile();
    expect(statSync(path).size).toBeGreaterThan(big);
    let start = { bytes: disk().bytesRead, reads: disk().reads };
    const read = () => ({ bytes: disk().bytesRead - start.bytes, reads: disk().reads - start.reads });
    const t = safeLoad(path);
    // the header's length, then the header, through the file's DISK tensor
    expect(read()).toEqual({ bytes: 8 + rawHeader(path).length, reads: 2 });
    start = { bytes: disk().bytesRead, reads: disk().reads };
    expect(t.small!.tolist()).toEqual([1, 2, 3, 4]);
    expect(read()).toEqual({ bytes: 16, reads: 1 });
    expect(t.small!.add(1).tolist()).toEqual([2, 3, 4, 5]);
    expect(read()).toEqual({ bytes: 16, reads: 1 });
    expect(t.other!.sum().item()).toBe(11);
    expect(read()).toEqual({ bytes: 32, reads: 2 });
    expect(t.big!.shape).toEqual([big / 4]);
    expect(read()).toEqual({ bytes: 32, reads: 2 });
  });

  it('reads the bytes when they are used: a change in place before then shows', () => {
    const path = fresh();
    safeSave(path, {
      a: new Tensor([1, 2], { dtype: dtypes.uint8 }),
      b: new Tensor([3], { dtype: dtypes.uint8 }),
    });
    const t = safeLoad(path);
    const bytes = readFileSync(path);
    bytes[bytes.length - 3] = 42; // a[0]
    writeFileSync(path, bytes); // same file, rewritten in place
    expect(t.a!.tolist()).toEqual([42, 2]);
  });

  it('keeps reading the file it opened when a save replaces it', () => {
    const path = fresh();
    safeSave(path, { x: new Tensor([1, 2, 3]) });
    const old = safeLoad(path);
    safeSave(path, { y: new Tensor([9]), x: new Tensor([4, 5, 6]) });
    expect(old.x!.tolist()).toEqual([1, 2, 3]);
    expect(safeLoad(path).x!.tolist()).toEqual([4, 5, 6]);
  });

  it('throws, naming file and tensor, when the file was truncated after loading', () => {
    const path = bigFile();
    const t = safeLoad(path);
    const { header, length } = rawHeader(path);
    const [begin, end] = (header.small as { data_offsets: number[] }).data_offsets.map((o) => 8 + length + o);
    truncateSync(path, 100);
    expect(() => t.small!.tolist()).toThrow(
      `${path}: a (4) int32 view: bytes [${begin}, ${end}) are no longer in the file: it was truncated after it was opened`,
    );
  });

  it('loads onto the device asked for, by default the default device; never onto DISK', () => {
    const path = bigFile();
    expect(safeLoad(path).small!.device).toBe(Device.default);
    expect(safeLoad(path, { device: 'js' }).small!.device).toBe('JS');
    expect(() => safeLoad(path, { device: 'DISK' })).toThrow(`safeLoad: ${path}: cannot load onto DISK`);
    expect(() => new Tensor([1], { device: 'DISK' })).toThrow('DISK: cannot allocate 4 bytes');
  });
});

describe('safeLoad of malformed files', () => {
  const f32 = (shape: number[], data_offsets: unknown) => ({ dtype: 'F32', shape, data_offsets });
  const zeros = (n: number) => new Array<number>(n).fill(0);

  // [what is wrong, the file, the error's words after the path]
  const cases: [string, () => string, string][] = [
    ['an empty file', () => shortFile(0), 'the file is 0 bytes, too short for the 8-byte header length'],
    [
      'a file shorter than 8 bytes',
      () => shortFile(5),
      'the file is 5 bytes, too short for the 8-byte header length',
    ],
    [
      'a file shorter than its header',
      () => craft('{"a":{}}', [], 100n),
      'the header length 100 runs past the end of the file (16 bytes)',
    ],
    [
      'an absurd header length',
      () => craft('{}', [], 2n ** 64n - 1n),
      "the header length 18446744073709551615 is over the format's limit of 100000000 bytes",
    ],
    ['a header of bad JSON', () => craft('{"a": {"dtype": "F32",'), 'the header is not valid JSON'],
    ['a header of bad UTF-8', () => craft(Uint8Array.of(0x7b, 0xff, 0x7d)), 'not valid UTF-8'],
    [
      'a header that is an array',
      () => craft([1, 2]),
      'the header must be a JSON object of tensors, got [1,2]',
    ],
    ['a header that is null', () => craft('null'), 'the header must be a JSON object of tensors, got null'],
    ['a header that is a string', () => craft('"x"'), 'the header must be a JSON object of tensors, got "x"'],
    ['an entry that is not an object', () => craft({ a: 3 }), "tensor 'a': the entry must be an object"],
    [
      'an unknown dtype',
      () => craft({ a: { dtype: 'F8_E4M3', shape: [1], data_offsets: [0, 1] } }, [0]),
      'tensor \'a\': unknown dtype "F8_E4M3"; supported: BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64',
    ],
    [
      'a dtype named like an Object property',
      () => craft({ a: { dtype: 'constructor', shape: [1], data_offsets: [0, 1] } }, [0]),
      'tensor \'a\': unknown dtype "constructor"',
    ],
    [
      'a missing dtype',
      () => craft({ a: { shape: [1], data_offsets: [0, 4] } }, zeros(4)),
      'unknown dtype undefined',
    ],
    [
      'a negative dimension',
      () => craft({ a: f32([-1], [0, 0]) }),
      "tensor 'a': shape must be a list of non-negative integers, got [-1]",
    ],
    ['a fractional dimension', () => craft({ a: f32([2.5], [0, 10]) }, zeros(10)), 'got [2.5]'],
    ['a shape that is not a list', () => craft({ a: f32('2' as never, [0, 8]) }, zeros(8)), 'got "2"'],
    [
      'offsets in the wrong order',
      () => craft({ a: f32([1], [8, 4]) }, zeros(8)),
      "tensor 'a': data_offsets must be [begin, end] with integers 0 <= begin <= end, got [8,4]",
    ],
    ['a negative offset', () => craft({ a: f32([1], [-4, 0]) }, zeros(4)), 'got [-4,0]'],
    ['one offset', () => craft({ a: f32([1], [4]) }, zeros(4)), 'got [4]'],
    ['no offsets', () => craft({ a: { dtype: 'F32', shape: [1] } }, zeros(4)), 'got undefined'],
    [
      'offsets past the data (a truncated file)',
      () => craft({ a: f32([2], [0, 8]) }, zeros(6)),
      "tensor 'a': data_offsets [0, 8] reach past the 6 bytes of data after the header",
    ],
    [
      'offsets far out of range',
      () => craft({ a: f32([1], [2 ** 52, 2 ** 52 + 4]) }, zeros(4)),
      "tensor 'a': data_offsets [4503599627370496, 4503599627370500] reach past the 4 bytes",
    ],
    [
      'offsets that do not match dtype and shape',
      () => craft({ a: f32([2, 2], [0, 12]) }, zeros(16)),
      "tensor 'a': data_offsets [0, 12] hold 12 bytes, but F32 of shape (2, 2) takes 16",
    ],
    [
      'overlapping tensors',
      () => craft({ a: f32([4], [0, 16]), b: f32([4], [8, 24]) }, zeros(24)),
      "tensors 'a' and 'b' overlap: data_offsets [0, 16] and [8, 24]",
    ],
    [
      'metadata that is not strings',
      () => craft({ __metadata__: { epoch: 3 } }),
      '__metadata__ must be an object of strings, got {"epoch":3}',
    ],
  ];

  function shortFile(n: number): string {
    const path = fresh('short');
    writeFileSync(path, Buffer.alloc(n));
    return path;
  }

  it.each(cases)('%s throws, naming the file and the problem', (_, make, problem) => {
    const path = make();
    expect(() => safeLoad(path)).toThrow(`safeLoad: ${path}: `);
    expect(() => safeLoad(path)).toThrow(problem);
  });

  it('accepts what the format allows: no padding, data in another order than the header, gaps, empty tensors anywhere', () => {
    const path = craft(
      {
        b: { dtype: 'I16', shape: [2], data_offsets: [8, 12] },
        __metadata__: { k: 'v' },
        e: { dtype: 'F64', shape: [0, 4], data_offsets: [2, 2] },
        a: { dtype: 'U8', shape: [2], data_offsets: [0, 2] },
      },
      [7, 9, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xff, 0xff, 3, 0],
    );
    const t = safeLoad(path);
    expect(Object.keys(t)).toEqual(['b', 'e', 'a']);
    expect([t.a!.tolist(), t.b!.tolist(), t.e!.shape]).toEqual([
      [7, 9],
      [-1, 3],
      [0, 4],
    ]);
    expect(safeMetadata(path)).toEqual({ k: 'v' });
  });

  it('names a missing file, and a directory', () => {
    const path = join(dir, 'missing.safetensors');
    expect(() => safeLoad(path)).toThrow(`safeLoad: ${path}: cannot open: ENOENT`);
    expect(() => safeLoad(dir)).toThrow(`safeLoad: ${dir}: cannot open: not a regular file`);
  });

  it.skipIf(!existsSync('/proc/self/fd'))('closes the file after a failed load or a metadata read', () => {
    const bad = craft({ a: f32([2], [0, 8]) }, zeros(4));
    const good = craft({ __metadata__: { k: 'v' } });
    const open = () => readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 50; i++) {
      expect(() => safeLoad(bad)).toThrow();
      safeMetadata(good);
    }
    expect(open()).toBe(before);
  });
});
