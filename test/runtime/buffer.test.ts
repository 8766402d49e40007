// DeviceBuffer: copyin/copyout/view for every storable dtype on each device, and the errors for misuse.
import { describe, expect, it } from 'vitest';
import {
  allocStorage,
  type DType,
  dtypes,
  readElement,
  type StorageArray,
  toStorage,
} from '../../src/dtype.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';

const storable = Object.values(dtypes).filter((d) => d !== dtypes.void && d !== dtypes.index);

/** A storage array of n elements with pseudo-random bytes (any bit pattern round-trips). */
function randomStorage(dtype: DType, n: number, seed: number): StorageArray {
  const out = allocStorage(dtype, n);
  const bytes = new Uint8Array(out.buffer);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
  if (dtype === dtypes.bool) for (let i = 0; i < n; i++) bytes[i]! &= 1;
  return out;
}

describe.each(['CPU', 'JS'])('DeviceBuffer on %s', (device) => {
  it.each(storable.map((d) => [d.name, d] as const))(
    '%s: copyin, copyout and view round-trip',
    (_, dtype) => {
      const src = randomStorage(dtype, 37, dtype.itemsize * 31 + dtype.name.length);
      const buf = new DeviceBuffer(device, 37, dtype);
      expect(buf.nbytes).toBe(37 * dtype.itemsize);
      buf.copyin(src);
      const out = buf.copyout();
      expect(out.constructor).toBe(src.constructor);
      expect(out).toEqual(src);
      expect(buf.view()).toEqual(src);
      buf.free();
    },
  );

  it('view() shares the memory; copyout() copies it; values decode as the dtype stores them', () => {
    const buf = new DeviceBuffer(device, 3, dtypes.float16).copyin(
      toStorage(dtypes.float16, [1.5, -2, 65504]),
    );
    const view = buf.view();
    expect(view).toBe(buf.view());
    const out = buf.copyout();
    view[0] = 0x3c00; // float16 1.0
    expect(readElement(dtypes.float16, buf.copyout(), 0)).toBe(1);
    expect(readElement(dtypes.float16, out, 0)).toBe(1.5);
    expect([1, 2].map((i) => readElement(dtypes.float16, out, i))).toEqual([-2, 65504]);
  });

  it('holds zero elements', () => {
    const buf = new DeviceBuffer(device, 0, dtypes.float32).copyin(new Float32Array(0));
    expect(buf.copyout()).toEqual(new Float32Array(0));
  });

  it('names the buffer, dtype and sizes when misused', () => {
    const buf = new DeviceBuffer(device, 4, dtypes.float32);
    expect(() => buf.copyin(new Float32Array(5))).toThrow(
      `DeviceBuffer.copyin: got a Float32Array of 5 elements; DeviceBuffer(${device}, 4 x float32) takes 4 elements of 4 bytes`,
    );
    expect(() => buf.copyin(new Float64Array(4))).toThrow('Float64Array of 4 elements');
    expect(() => new DeviceBuffer(device, 4, dtypes.index)).toThrow(
      `DeviceBuffer on ${device}: dtype index has no TypedArray storage; storable dtypes are bool, int8`,
    );
    expect(() => new DeviceBuffer(device, 4, dtypes.float32.vec(4))).toThrow(
      'float32x4 has no TypedArray storage',
    );
    expect(() => new DeviceBuffer(device, -1, dtypes.float32)).toThrow(
      `DeviceBuffer on ${device}: size must be a non-negative integer, got -1`,
    );
  });
});

describe('DeviceBuffer on NULL', () => {
  it('takes uploads, counts bytes, and refuses to read: the NULL device holds no data', () => {
    const nul = Device.get('NULL');
    const buf = new DeviceBuffer('null', 8, dtypes.int32).copyin(new Int32Array(8));
    expect(buf.device).toBe('NULL');
    expect(nul.allocator.bytesInUse).toBe(32);
    const msg =
      'NULL: cannot read 32 bytes: the NULL device holds no data (it runs no kernels); use CPU or JS';
    expect(() => buf.copyout()).toThrow(msg);
    expect(() => buf.view()).toThrow(msg);
    buf.free();
    expect(nul.allocator.bytesInUse).toBe(0);
  });
});
