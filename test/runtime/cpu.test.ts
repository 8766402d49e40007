// The CPU device: handwritten C kernels compiled, loaded through koffi and run on buffers, and its errors.
import { describe, expect, it, vi } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import type { Program } from '../../src/runtime/backend.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';

const { float32, float64, int64, uint8 } = dtypes;
const cpu = Device.get('CPU');
const floats = (n: number, f: (i: number) => number) => Float32Array.from({ length: n }, (_, i) => f(i));

const ADD = `void add(float* restrict data0, const float* restrict data1, const float* restrict data2) {
  for (int i = 0; i < 1000; i++) data0[i] = data1[i] + data2[i];
}`;

describe('CPU kernels', () => {
  it('adds 1000 floats: c[i] = a[i] + b[i]', () => {
    const a = new DeviceBuffer(cpu, 1000, float32).copyin(floats(1000, (i) => i * 0.5));
    const b = new DeviceBuffer(cpu, 1000, float32).copyin(floats(1000, (i) => 1000 - i));
    const c = new DeviceBuffer(cpu, 1000, float32);
    const prg = cpu.compile('add', ADD);
    expect([prg.name, prg.device]).toEqual(['add', 'CPU']);
    expect(prg.run([c, a, b])).toBe(0);
    expect(c.copyout()).toEqual(floats(1000, (i) => i * 0.5 + 1000 - i));
    const seconds = prg.run([c, a, b], [], true);
    expect(typeof seconds).toBe('number');
    expect(seconds).toBeGreaterThanOrEqual(0);
  });

  it('passes int32 values after the buffers, and buffers of several dtypes', () => {
    const src = `void axpy(long long* restrict data0, const double* restrict data1, const unsigned char* restrict data2,
    int var0, int var1) {
  for (int i = 0; i < var0; i++) data0[i] = (long long)(data1[i] * var1) + data2[i];
}`;
    const out = new DeviceBuffer(cpu, 10, int64);
    const x = new DeviceBuffer(cpu, 10, float64).copyin(Float64Array.from({ length: 10 }, (_, i) => i + 0.5));
    const y = new DeviceBuffer(cpu, 10, uint8).copyin(Uint8Array.from({ length: 10 }, (_, i) => 240 + i));
    out.copyin(new BigInt64Array(10).fill(-1n));
    cpu.compile('axpy', src).run([out, x, y], [7, -4]);
    const expected = Array.from({ length: 10 }, (_, i) =>
      i < 7 ? BigInt(Math.trunc((i + 0.5) * -4) + 240 + i) : -1n,
    );
    expect([...(out.copyout() as BigInt64Array)]).toEqual(expected);
  });

  it('shows the source with line numbers and the compiler message when a kernel does not compile', () => {
    const src = 'void bad(float* restrict data0) {\n  data0[0] = undefined_fn(1.0f);\n}';
    let msg = '';
    try {
      cpu.compile('bad', src);
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toMatch(/^CPU: kernel bad does not compile with \S*(gcc|clang|cc)/);
    expect(msg).toMatch(/implicit declaration of function .undefined_fn/);
    expect(msg).toContain(
      '--- source ---\n1 | void bad(float* restrict data0) {\n2 |   data0[0] = undefined_fn(1.0f);',
    );
  });

  it('shows compiler warnings: generated code should compile cleanly under -Wall', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    // not cached, so that the compiler runs and warns
    Context.with({ CACHELEVEL: 0 }, () =>
      cpu.compile('warns', 'void warns(int* restrict data0) {\n  int unused;\n  data0[0] = 1;\n}'),
    );
    expect(warn).toHaveBeenCalledOnce();
    expect(warn.mock.calls[0]![0]).toMatch(/^CPU: kernel warns: \S+ warns:\n.*unused variable .unused/s);
    warn.mockRestore();
  });

  // the C prelude declares the libm functions and constants the renderer emits instead of including math.h
  it('computes the math functions kernels call, and infinities and NaNs, without math.h and without warnings', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const values = [0.5, 2, 3.75, -1.5, 0, Infinity, Number.NaN];
    const ops = (x: Tensor) => [
      x.sqrt(),
      x.sin(),
      x.log2(),
      x.exp2(),
      x.pow(1.7),
      x.trunc(),
      x.maximum(Number.NEGATIVE_INFINITY),
      x.where(Number.NaN, 0),
    ];
    for (const dtype of [float32, float64]) {
      const [onCpu, onJs] = (['CPU', 'JS'] as const).map((device) =>
        Context.with({ CACHELEVEL: 0 }, () =>
          ops(new Tensor(values, { dtype, device })).map((t) => [...(t.dataSync() as Float32Array)]),
        ),
      );
      for (const [i, got] of onCpu!.entries())
        for (const [j, v] of got.entries()) {
          const want = onJs![i]![j]!;
          if (Number.isFinite(want)) expect(v).toBeCloseTo(want, 5);
          else expect(v).toBe(want);
        }
    }
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
  });

  it('names the kernel and the devices when a buffer is on another device', () => {
    const prg = cpu.compile('add', ADD);
    const onCpu = new DeviceBuffer(cpu, 1000, float32);
    const onJs = new DeviceBuffer('JS', 1000, float32);
    expect(() => prg.run([onCpu, onJs, onCpu])).toThrow(
      'kernel add on CPU: buffer 1 (data1) is on JS; every buffer must be on CPU',
    );
  });

  it('says which function is missing when the source does not define the kernel', () => {
    const prg = cpu.compile('nosuch', ADD);
    expect(() => prg.run([])).toThrow(
      /^CPU: kernel nosuch: .*; its source must define void nosuch\(\.\.\.\)$/,
    );
  });
});

describe('CPU batch compile', () => {
  it('compiles several kernels at once; one that does not compile is its Error, the others run', () => {
    const twice = (name: string, k: number) =>
      `void ${name}(int* restrict data0) {\n  for (int i = 0; i < 4; i++) data0[i] = ${k} * i;\n}`;
    const got = cpu.compileMany([
      { name: 'times2', source: twice('times2', 2) },
      { name: 'broken', source: 'void broken(int* restrict data0) {\n  data0[0] = undefined_fn(1);\n}' },
      { name: 'times3', source: twice('times3', 3) },
    ]);
    expect(got[1]).toBeInstanceOf(Error);
    expect((got[1] as Error).message).toMatch(/^CPU: kernel broken does not compile with .*undefined_fn/s);
    expect((got[1] as Error).message).toContain('--- source ---\n1 | void broken(');
    for (const [i, k] of [
      [0, 2],
      [2, 3],
    ] as const) {
      const out = new DeviceBuffer(cpu, 4, dtypes.int32);
      (got[i] as Program).run([out]);
      expect([...out.view()]).toEqual([0, k, 2 * k, 3 * k]);
    }
  });

  it('runs each kernel of a batch as its own, whatever their names (two kernels may share one)', () => {
    const fill = (k: number) =>
      `void fill(int* restrict data0) { /* ${Date.now()} */\n  for (int i = 0; i < 4; i++) data0[i] = ${k} + i;\n}`;
    // one translation unit for all three
    const got = Context.with({ CC_JOBS: 1 }, () =>
      cpu.compileMany([1, 2, 3].map((k) => ({ name: 'fill', source: fill(k) }))),
    );
    got.forEach((p, k) => {
      const out = new DeviceBuffer(cpu, 4, dtypes.int32);
      (p as Program).run([out]);
      expect([...out.view()]).toEqual([1, 2, 3, 4].map((i) => i + k));
    });
  });
});
