// The device registry: names, the default device (DEV, CPU when a compiler works, else JS) and NULL.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { DEV, Device } from '../../src/runtime/device.ts';

describe('Device', () => {
  afterEach(() => vi.restoreAllMocks());

  it('canonicalizes names: kind in capitals, index only when not 0', () => {
    expect(['cpu', 'CPU:0', ' js:1 ', 'Null', 'CPU:02'].map(Device.canonicalize)).toEqual([
      'CPU',
      'CPU',
      'JS:1',
      'NULL',
      'CPU:2',
    ]);
  });

  it('lists the valid names for an unknown device', () => {
    const valid = 'valid devices are CPU, CUDA, DISK, JS, NULL, SIMT, optionally with an index (CPU:1)';
    expect(() => Device.get('GPU')).toThrow(`unknown device 'GPU': ${valid}`);
    expect(() => Device.get('CPU:x')).toThrow(`unknown device 'CPU:x': ${valid}`);
    expect(() => Device.get('')).toThrow(`unknown device '': ${valid}`);
    expect(() => Device.get('constructor')).toThrow('unknown device');
  });

  it('creates each device once; indexed devices are distinct', () => {
    const cpu = Device.get('cpu');
    expect(Device.get('CPU:0')).toBe(cpu);
    expect([cpu.name, cpu.kind]).toEqual(['CPU', 'CPU']);
    const cpu1 = Device.get('cpu:1');
    expect(cpu1).not.toBe(cpu);
    expect([cpu1.name, cpu1.kind]).toEqual(['CPU:1', 'CPU']);
    expect(Device.get('js').kind).toBe('JS');
  });

  it('takes the default from DEV, from the setter, else CPU when a C compiler works', () => {
    expect(Context.with({ DEV: 'js' }, () => Device.default)).toBe('JS');
    expect(() => Context.with({ DEV: 'tpu' }, () => Device.default)).toThrow("unknown device 'tpu'");
    Context.with({ DEV: '' }, () => {
      expect(Device.default).toBe('CPU'); // these tests run where gcc (at least) is installed
      Device.default = 'null:0';
      expect(Device.default).toBe('NULL');
      expect(DEV.value).toBe('NULL');
      expect(() => {
        Device.default = 'gpu';
      }).toThrow("unknown device 'gpu'");
      expect(Device.default).toBe('NULL');
    });
  });

  it('falls back to JS when no C compiler works, saying so at DEBUG >= 1', () => {
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(Context.with({ DEV: '', CC: '/nonexistent/cc', DEBUG: 1 }, () => Device.default)).toBe('JS');
    // why not CUDA (no GPU in CI), and why not CPU
    expect(errors).toHaveBeenCalledWith(
      expect.stringMatching(
        /^Device: the default device is JS: CUDA: .*; the CPU device does not work here: CPU: the C compiler CC=\/nonexistent\/cc does not run \(`\/nonexistent\/cc --version` failed\)$/,
      ),
    );
    expect(Context.with({ DEV: '', CC: '/nonexistent/cc2' }, () => Device.default)).toBe('JS');
    expect(errors).toHaveBeenCalledTimes(1);
  });

  it('NULL compiles nothing and runs nothing', () => {
    const nul = Device.get('NULL');
    const buf = new DeviceBuffer(nul, 4, dtypes.float32);
    const prg = nul.compile('anything', 'this is not code');
    expect([prg.name, prg.device]).toEqual(['anything', 'NULL']);
    expect(prg.run([buf], [1], true)).toBe(0);
    expect(() => prg.run([new DeviceBuffer('JS', 4, dtypes.float32)])).toThrow(
      'kernel anything on NULL: buffer 0 (data0) is on JS; every buffer must be on NULL',
    );
    expect(() => buf.copyout()).toThrow('the NULL device holds no data');
  });
});
