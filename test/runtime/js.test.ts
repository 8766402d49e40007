// The JS device: handwritten kernel bodies compiled with new Function and run on storage views, and its errors.
import { describe, expect, it } from 'vitest';
import { dtypes, float16Bits, readElement } from '../../src/dtype.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';

const { float16, float32, int32, int64 } = dtypes;
const js = Device.get('JS');

describe('JS kernels', () => {
  it('adds 1000 floats and takes int32 values after the buffers', () => {
    const a = new DeviceBuffer(js, 1000, float32).copyin(Float32Array.from({ length: 1000 }, (_, i) => i));
    const c = new DeviceBuffer(js, 1000, float32);
    const prg = js.compile('addc', 'for (let i = 0; i < var0; i++) data0[i] = data1[i] + var1;');
    expect([prg.name, prg.device]).toEqual(['addc', 'JS']);
    expect(prg.run([c, a], [1000, 3])).toBe(0);
    expect(c.copyout()).toEqual(Float32Array.from({ length: 1000 }, (_, i) => i + 3));
    expect(prg.run([c, a], [10, 3], true)).toBeGreaterThanOrEqual(0);
  });

  it('sees float16 as Uint16Array bits and int64 as BigInt64Array', () => {
    const h = new DeviceBuffer(js, 2, float16);
    const q = new DeviceBuffer(js, 2, int64).copyin(BigInt64Array.of(2n ** 62n, 5n));
    js.compile(
      'k',
      'data0[0] = 0x3e00; data0[1] = data0[0] ^ 0x8000; data1[0] = data1[0] * 2n + data1[1];',
    ).run([h, q]);
    expect([0, 1].map((i) => readElement(float16, h.copyout(), i))).toEqual([1.5, -1.5]);
    expect(h.view()[1]).toBe(float16Bits(-1.5));
    expect((q.copyout() as BigInt64Array)[0]).toBe(5n - 2n ** 63n); // 2^63 + 5 wraps as int64 does
  });

  it('puts a buffer the body never names before var0', () => {
    const out = new DeviceBuffer(js, 1, int32);
    const unused = new DeviceBuffer(js, 1, int32);
    js.compile('k', 'data0[0] = var0;').run([out, unused], [42]);
    expect(out.view()[0]).toBe(42);
  });

  it('shows the source when a body does not parse, and names the kernel when it throws', () => {
    expect(() => js.compile('bad', 'for (;;\n  data0[0] = 1;')).toThrow(
      /^JS: kernel bad does not compile: .+\n--- source ---\n1 \| for \(;;\n2 \| {3}data0\[0\] = 1;$/,
    );
    const out = new DeviceBuffer(js, 1, int32);
    // strict mode: a typo'd variable throws instead of becoming a global
    expect(() => js.compile('typo', 'acc = 1; data0[0] = acc;').run([out])).toThrow(
      'JS: kernel typo threw: acc is not defined',
    );
  });
});
