// The target description's dtypes and argument limit: a device refuses tensors of a dtype it lacks where they are
// made (naming the device, the dtype and what it supports), and the schedule cuts kernels to the arguments of
// the device they run on.
import { arch } from 'node:os';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { ALL_DTYPES } from '../../src/runtime/backend.ts';
import { findCompiler } from '../../src/runtime/cc.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';

const simt = Device.get('SIMT');
afterEach(() => {
  vi.restoreAllMocks();
});

describe('supported dtypes', () => {
  // as WebGPU will be: every dtype but float64
  const withoutFloat64 = () =>
    vi.spyOn(simt, 'dtypes').mockReturnValue(new Set([...ALL_DTYPES].filter((d) => d !== dtypes.float64)));
  const refusal = (op: string) =>
    new RegExp(`^${op}: SIMT has no float64 tensors; it supports bool, int8, .*float32$`);

  it('every device supports every dtype today, the CPU all but float16 where its compiler has no half type', () => {
    for (const kind of ['JS', 'SIMT', 'NULL']) expect(Device.get(kind).dtypes()).toBe(ALL_DTYPES);
    const cpu = [...Device.get('CPU').dtypes()];
    expect(cpu.filter((d) => d !== dtypes.float16)).toEqual(
      [...ALL_DTYPES].filter((d) => d !== dtypes.float16),
    );
  });

  // gcc with _Float16's macro undefined has no half type the C renderer uses, as gcc 11 on x86 has none
  it.skipIf(arch() !== 'x64')(
    'the CPU refuses float16 where its C compiler has no half type, and compiles the other dtypes there',
    () => {
      Context.with({ CC: 'gcc -U__FLT16_MAX__' }, () => {
        expect(findCompiler().halves).toBe(false);
        expect(() => new Tensor([1, 2], { device: 'CPU', dtype: 'float16' })).toThrow(
          /^Tensor: CPU has no float16 tensors; it supports bool, .*, uint64, bfloat16, float32, float64$/,
        );
        expect(new Tensor([1.5, 2.25, 7], { device: 'CPU' }).mul(3).tolist()).toEqual([4.5, 6.75, 21]);
      });
      expect(findCompiler().halves).toBe(true);
    },
    30_000,
  );

  it('a tensor of a dtype its device lacks is refused at creation, cast and to()', () => {
    withoutFloat64();
    expect(() => new Tensor([1, 2], { device: 'SIMT', dtype: 'float64' })).toThrow(refusal('Tensor'));
    expect(() => new Tensor(new Float64Array([1, 2]), { device: 'SIMT' })).toThrow(refusal('Tensor'));
    expect(() => Tensor.ones([2], { device: 'SIMT' }).cast(dtypes.float64)).toThrow(refusal('cast'));
    expect(() => Tensor.zeros([2], { device: 'SIMT', dtype: dtypes.float64 })).toThrow(
      refusal('Tensor.zeros'),
    );
    expect(() => new Tensor([1, 2], { device: 'JS', dtype: 'float64' }).to('SIMT')).toThrow(refusal('to'));
  });

  it('the dtypes it has still compute', () => {
    withoutFloat64();
    const f = (d: string) =>
      new Tensor([0.5, -1.25, 3, 2], { device: d })
        .exp()
        .add(new Tensor([1, 2, 3, 4], { device: d, dtype: 'int32' }))
        .sum()
        .tolist();
    expect(f('SIMT')).toEqual(f('JS'));
  });
});

describe('arguments per kernel', () => {
  const sumOf = (n: number, device: string) => {
    const ts = Array.from({ length: n }, (_, i) => new Tensor([i, 1, n], { device }).realize());
    return ts.slice(1).reduce((acc, t) => acc.add(t), ts[0]!);
  };
  /** The most arguments (buffers) one kernel of the schedule takes. */
  const widest = (t: Tensor) =>
    Math.max(
      ...scheduleOf([t]).kernels.map((k) => k.ast.toposort().filter((u) => u.op === Ops.PARAM).length),
    );

  it("come from the kernel's device: the CPU's koffi calls take 64, JS has no limit, SIMT's as CUDA 12.1's", () => {
    expect(Device.get('CPU').maxBuffers()).toBe(64);
    expect(Device.get('JS').maxBuffers()).toBe(Number.POSITIVE_INFINITY);
    expect(simt.maxBuffers()).toBe(4095);
    expect(widest(sumOf(100, 'JS'))).toBe(101);
    expect(widest(sumOf(100, 'CPU'))).toBe(64);
    const sum = sumOf(100, 'CPU');
    expect(scheduleOf([sum]).kernels.length).toBeGreaterThan(1);
    expect(sum.tolist()).toEqual([4950, 100, 10000]);
  });

  it('a device with few arguments gets kernels that fit, and KERNEL_BUFFERS caps any device lower', () => {
    vi.spyOn(simt, 'maxBuffers').mockReturnValue(8);
    const sum = sumOf(30, 'SIMT');
    expect(widest(sum)).toBe(8);
    expect(sum.tolist()).toEqual([435, 30, 900]);
    Context.with({ KERNEL_BUFFERS: 10 }, () => {
      expect(widest(sumOf(30, 'JS'))).toBe(10);
      expect(widest(sumOf(30, 'SIMT'))).toBe(8);
    });
  });

  it('take constants that change as arguments only while they fit; past that, the kernel bakes them', () => {
    // 70 distinct constants, then 70 others: the CPU's kernel cannot read them all from buffer arguments
    const x = new Tensor([1, 2, 3], { device: 'CPU' }).realize();
    const run = (k: number) => {
      let y = x;
      for (let i = 0; i < 70; i++) y = y.add(k + i);
      return y.tolist();
    };
    const total = (k: number) => 70 * k + (70 * 69) / 2;
    expect(run(0.5)).toEqual([1, 2, 3].map((v) => v + total(0.5)));
    expect(run(0.25)).toEqual([1, 2, 3].map((v) => v + total(0.25)));
  });
});
