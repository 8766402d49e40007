// Allocators: reuse of freed blocks by byte size, least-recently-freed eviction, accounting and alignment.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { HOST_BUFFER_ALIGN } from '../../src/helpers.ts';
import type { HostMemory } from '../../src/runtime/allocator.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { JSBackend } from '../../src/runtime/js.ts';

const { float32, float64, uint8 } = dtypes;

describe('allocator', () => {
  it('reuses a freed block of the same byte size, whatever the dtype, and counts bytes', () => {
    const js = new JSBackend('JS');
    const { allocator } = js;
    const a = new DeviceBuffer(js, 100, float32);
    expect(a.allocated).toBe(false);
    expect(allocator.bytesInUse).toBe(0);
    const mem = a.memory;
    expect(a.allocated).toBe(true);
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([400, 0]);
    a.free();
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([0, 400]);
    a.free(); // a second free is a no-op
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([0, 400]);
    const b = new DeviceBuffer(js, 50, float64);
    expect(b.memory).toBe(mem);
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([400, 0]);
    const c = new DeviceBuffer(js, 101, float32);
    expect(c.memory).not.toBe(mem);
    expect(allocator.bytesInUse).toBe(804);
    b.free();
    c.free();
    allocator.clearCache();
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([0, 0]);
  });

  it('hands out the most recently freed block first and evicts the sizes least recently freed', () => {
    const { allocator } = new JSBackend('JS');
    allocator.maxCachedBytes = 1000;
    const [x, y, z] = [allocator.alloc(400), allocator.alloc(300), allocator.alloc(400)];
    allocator.free(x, 400);
    allocator.free(y, 300);
    allocator.free(z, 400); // 1100 cached: the 300-byte size, freed least recently, goes
    expect(allocator.bytesCached).toBe(800);
    expect(allocator.alloc(400)).toBe(z);
    expect(allocator.alloc(400)).toBe(x);
    expect(allocator.alloc(300)).not.toBe(y);
    expect([allocator.bytesInUse, allocator.bytesCached]).toEqual([1100, 0]);
  });

  it('rejects a negative or fractional byte size', () => {
    const { allocator } = new JSBackend('JS');
    expect(() => allocator.alloc(-1)).toThrow('JS alloc: byte size must be a non-negative integer, got -1');
    expect(() => allocator.alloc(1.5)).toThrow('got 1.5');
  });

  it('returns a buffer garbage collected without free() to the cache', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const js = new JSBackend('JS');
    (() => new DeviceBuffer(js, 1000, uint8).allocate())();
    expect(js.allocator.bytesInUse).toBe(1000);
    for (let i = 0; i < 50 && js.allocator.bytesInUse !== 0; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect([js.allocator.bytesInUse, js.allocator.bytesCached]).toEqual([0, 1000]);
  });

  it(`aligns CPU buffers to ${HOST_BUFFER_ALIGN} bytes`, () => {
    const cpu = Device.get('CPU');
    for (const size of [1, 3, 64, 1000]) {
      const buf = new DeviceBuffer(cpu, size, uint8);
      const mem = buf.memory as HostMemory;
      expect(mem.address % HOST_BUFFER_ALIGN).toBe(0);
      expect(buf.view().byteOffset).toBe(mem.byteOffset);
      expect(buf.view().length).toBe(size);
    }
  });
});
