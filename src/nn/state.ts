// safetensors files (Node only): safeLoad slices a DISK tensor of the file (read lazily); safeSave writes them.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type DType, dtypes, type StorageArray } from '../dtype.ts';
import { prod } from '../helpers.ts';
import { Device, Tensor } from '../tensor/index.ts';

// a Map, not an object: a dtype named 'constructor' in a header must not find Object's
const DTYPES = new Map<string, DType>([
  ['BOOL', dtypes.bool],
  ['U8', dtypes.uint8],
  ['I8', dtypes.int8],
  ['U16', dtypes.uint16],
  ['I16', dtypes.int16],
  ['F16', dtypes.float16],
  ['BF16', dtypes.bfloat16],
  ['U32', dtypes.uint32],
  ['I32', dtypes.int32],
  ['F32', dtypes.float32],
  ['U64', dtypes.uint64],
  ['I64', dtypes.int64],
  ['F64', dtypes.float64],
]);
const NAMES = new Map([...DTYPES].map(([name, dtype]) => [dtype, name]));

/** The reference implementation refuses larger headers; so do we, before allocating one. */
const MAX_HEADER = 100_000_000;
const METADATA = '__metadata__';
/** Where the header is read: a device every build has, whose memory the host reads directly. */
const HOST = 'JS';

export interface SafeLoadOptions {
  /** Where the tensors are loaded (default: Device.default). */
  device?: string;
}

interface Entry {
  name: string;
  dtype: DType;
  shape: number[];
  begin: number;
  end: number;
}

interface Header {
  entries: Entry[];
  metadata: Record<string, string>;
  /** Where the data starts in the file: data_offsets count from here. */
  dataStart: number;
}

/** A value as a short piece of JSON, for errors. */
function show(v: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = String(v); // a bigint, or an object that holds itself
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * Tensors of a safetensors file by name, on `device`. The file is one uint8 DISK tensor (Tensor.fromFile),
 * and each stored tensor a slice of it, bitcast to its dtype, reshaped and moved with `.to(device)`, as
 * tinygrad's safe_load. Only the header is read now; a tensor's bytes are read from the file (and only its
 * bytes) when its data is first needed. Throws, naming the file and the tensor, when the file is not a
 * well-formed safetensors file.
 */
export function safeLoad(path: string, opts: SafeLoadOptions = {}): Record<string, Tensor> {
  const device = Device.canonicalize(opts.device ?? Device.default);
  if (Device.get(device).language() === undefined)
    throw new Error(
      `safeLoad: ${path}: cannot load onto ${device}, which runs no kernels; pick a device that computes`,
    );
  // disposed once the tensors are made: the file then closes when the last of them has read its bytes
  using file = openFile('safeLoad', path);
  const header = readHeader('safeLoad', path, file);
  return Object.fromEntries(
    header.entries.map(({ name, dtype, shape, begin, end }) => {
      const bytes = file.shrink([[header.dataStart + begin, header.dataStart + end]]);
      return [name, bytes.bitcast(dtype).reshape(shape).to(device)];
    }),
  );
}

/** The `__metadata__` of a safetensors file (string keys and values; empty when it has none). */
export function safeMetadata(path: string): Record<string, string> {
  using file = openFile('safeMetadata', path);
  return readHeader('safeMetadata', path, file).metadata;
}

function openFile(fn: string, path: string): Tensor {
  try {
    return Tensor.fromFile(path);
  } catch (e) {
    // fromFile names itself; the problem is its cause's
    const cause = (e as Error).cause instanceof Error ? ((e as Error).cause as Error) : (e as Error);
    throw new Error(`${fn}: ${path}: cannot open: ${cause.message}`, { cause: e });
  }
}

/** The file's bytes [begin, end), read now (the header: its tensors' bytes are read when used). */
const readBytes = (file: Tensor, begin: number, end: number): Uint8Array =>
  file
    .shrink([[begin, end]])
    .to(HOST)
    .dataSync() as Uint8Array;

/** Reads and checks the header: every tensor's dtype, shape and byte range, within the file and apart. */
function readHeader(fn: string, path: string, file: Tensor): Header {
  const fail = (problem: string): never => {
    throw new Error(`${fn}: ${path}: ${problem}`);
  };
  const size = file.numel;
  if (size < 8)
    fail(
      `the file is ${size} bytes, too short for the 8-byte header length: it is truncated or not safetensors`,
    );
  const lengthBytes = readBytes(file, 0, 8);
  const length = new DataView(lengthBytes.buffer, lengthBytes.byteOffset, 8).getBigUint64(0, true);
  if (length > BigInt(MAX_HEADER))
    fail(
      `the header length ${length} is over the format's limit of ${MAX_HEADER} bytes: the file is not safetensors`,
    );
  const n = Number(length);
  if (8 + n > size)
    fail(
      `the header length ${n} runs past the end of the file (${size} bytes): it is truncated or not safetensors`,
    );
  const bytes = readBytes(file, 8, 8 + n);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return fail('the header is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return fail(`the header is not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(json)) return fail(`the header must be a JSON object of tensors, got ${show(json)}`);

  const dataStart = 8 + n;
  const dataSize = size - dataStart;
  const entries: Entry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name === METADATA) {
      if (!isObject(value) || !Object.values(value).every((v) => typeof v === 'string'))
        fail(`${METADATA} must be an object of strings, got ${show(value)}`);
      metadata = value as Record<string, string>;
      continue;
    }
    const bad = (problem: string): never => fail(`tensor '${name}': ${problem}`);
    if (!isObject(value))
      bad(`the entry must be an object with dtype, shape and data_offsets, got ${show(value)}`);
    const { dtype: dtypeName, shape, data_offsets: offsets } = value as Record<string, unknown>;
    const dtype = typeof dtypeName === 'string' ? DTYPES.get(dtypeName) : undefined;
    if (dtype === undefined)
      bad(`unknown dtype ${show(dtypeName)}; supported: ${[...DTYPES.keys()].join(', ')}`);
    if (!Array.isArray(shape) || !shape.every(isCount))
      bad(`shape must be a list of non-negative integers, got ${show(shape)}`);
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every(isCount) ||
      offsets[0]! > offsets[1]!
    )
      bad(`data_offsets must be [begin, end] with integers 0 <= begin <= end, got ${show(offsets)}`);
    const [begin, end] = offsets as [number, number];
    const dims = shape as number[];
    if (end > dataSize)
      bad(
        `data_offsets [${begin}, ${end}] reach past the ${dataSize} bytes of data after the header: the file is truncated or the offsets are wrong`,
      );
    const nbytes = prod(dims) * dtype!.itemsize;
    if (end - begin !== nbytes)
      bad(
        `data_offsets [${begin}, ${end}] hold ${end - begin} bytes, but ${dtypeName} of shape (${dims.join(', ')}) takes ${nbytes}`,
      );
    entries.push({ name, dtype: dtype!, shape: dims, begin, end });
  }
  // an empty tensor reads nothing, so only the others can overlap
  const ranges = entries.filter((e) => e.end > e.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++) {
    const [a, b] = [ranges[i - 1]!, ranges[i]!];
    if (b.begin < a.end)
      fail(
        `tensors '${a.name}' and '${b.name}' overlap: data_offsets [${a.begin}, ${a.end}] and [${b.begin}, ${b.end}]`,
      );
  }
  return { entries, metadata, dataStart };
}

/**
 * Writes `stateDict` to `path` as safetensors, with optional string `metadata`. The tensors are realized
 * first; the file is written under a temporary name and renamed, so `path` is never left half written.
 */
export function safeSave(
  path: string,
  stateDict: Record<string, Tensor>,
  metadata?: Record<string, string>,
): void {
  const fail = (problem: string): never => {
    throw new Error(`safeSave: ${path}: ${problem}`);
  };
  const items = Object.entries(stateDict);
  for (const [name, t] of items) {
    if (name === METADATA) fail(`'${METADATA}' names the metadata in safetensors; it cannot name a tensor`);
    if (!(t instanceof Tensor)) fail(`tensor '${name}' is not a Tensor: ${show(t)}`);
    if (!NAMES.has(t.dtype))
      fail(
        `tensor '${name}': dtype ${t.dtype.name} has no safetensors name; cast it to one of ${[...NAMES.keys()].join(', ')}`,
      );
  }
  if (
    metadata !== undefined &&
    !(isObject(metadata) && Object.values(metadata).every((v) => typeof v === 'string'))
  )
    fail(`metadata must be an object of strings, got ${show(metadata)}`);

  // realized together, one device at a time (one schedule computes what they share once)
  const byDevice = new Map<string, Tensor[]>();
  for (const [, t] of items) byDevice.set(t.device, [...(byDevice.get(t.device) ?? []), t]);
  for (const [first, ...rest] of byDevice.values()) first!.realize(...rest);
  const data = new Map<string, StorageArray>();
  for (const [name, t] of items) {
    try {
      data.set(name, t.dataSync());
    } catch (e) {
      fail(`tensor '${name}': ${(e as Error).message}`);
    }
  }

  // widest elements first: every tensor then starts at a multiple of its element size (the header is padded to 8)
  const order = [...items].sort(([, a], [, b]) => b.dtype.itemsize - a.dtype.itemsize);
  const offsets = new Map<string, [number, number]>();
  let at = 0;
  for (const [name] of order) {
    const end = at + data.get(name)!.byteLength;
    offsets.set(name, [at, end]);
    at = end;
  }
  const header = Object.fromEntries([
    ...(metadata === undefined ? [] : [[METADATA, metadata]]),
    ...items.map(([name, t]) => [
      name,
      { dtype: NAMES.get(t.dtype), shape: t.shape, data_offsets: offsets.get(name) },
    ]),
  ]);
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = new Uint8Array(Math.ceil(json.byteLength / 8) * 8).fill(0x20);
  padded.set(json);
  const length = new Uint8Array(8);
  new DataView(length.buffer).setBigUint64(0, BigInt(padded.byteLength), true);

  const tmp = join(
    dirname(path),
    `.${basename(path)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`,
  );
  try {
    const fd = openSync(tmp, 'wx');
    try {
      writeAll(fd, length);
      writeAll(fd, padded);
      for (const [name] of order) {
        const a = data.get(name)!;
        writeAll(fd, new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      }
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    fail(`cannot write: ${(e as Error).message}`);
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.byteLength; ) done += writeSync(fd, bytes, done, bytes.byteLength - done);
}
