// The C renderer's loops: a kernel that moves few elements keeps them rolled (no complete unrolling by gcc's
// -fpeel-loops), a bigger one leaves unrolling to the compiler; both compute what they did.
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET, type Opt } from '../../src/codegen/opt/opts.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { elementsMoved, ROLLED_ELEMENTS, renderC } from '../../src/renderer/c.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';

const cpu = Device.get('CPU');
const TARGET = { ...CPU_TARGET, vectors: true, threads: 2, registers: 128 };

/** The one kernel of t (a 3 x 3 x 16 transpose, beautiful_mnist's weight layout, or a sum) lowered, rendered and run. */
function kernelOf(t: Tensor, opts?: readonly Opt[]) {
  const k = scheduleOf([t]).kernels[0]!;
  const { name, linear } = lowerKernel(k.ast, { target: TARGET, ...(opts ? { opts } : {}) });
  const source = renderC(name, linear);
  const sizes = k.bufs.map((b) => (b.shape as number[]).reduce((a, d) => a * d, 1));
  const input = Array.from({ length: sizes[1]! }, (_, i) => ((i * 7) % 11) - 5);
  const bufs = sizes.map((size, slot) =>
    new DeviceBuffer(cpu, size, k.bufs[slot]!.dtype).copyin(
      Float32Array.from(slot === 0 ? new Array(size).fill(0) : input),
    ),
  );
  cpu.compile(name, source).run(bufs);
  return { source, out: Array.from(bufs[0]!.copyout() as Float32Array), input, moved: elementsMoved(linear) };
}

const loops = (source: string) => source.match(/^\s*for \(/gm)?.length ?? 0;
const rolledLoops = (source: string) => source.match(/#pragma GCC unroll 1\n\s*for \(/g)?.length ?? 0;

describe('C loops', () => {
  it('of a kernel that moves few elements stay rolled, and it computes the transpose', () => {
    const x = new Tensor(new Float32Array(16 * 9), { device: 'CPU' }).reshape([16, 3, 3]);
    const { source, out, input, moved } = kernelOf(x.permute([1, 2, 0]).contiguous());
    // 144 loads and 144 stores of one lane
    expect(moved).toBe(2 * 144);
    expect(loops(source)).toBeGreaterThan(0);
    expect(rolledLoops(source)).toBe(loops(source));
    const expected = Array.from({ length: 144 }, (_, i) => input[(i % 16) * 9 + Math.floor(i / 16)]!);
    expect(out).toEqual(expected);
  });

  it('of a bigger kernel are left to the compiler', () => {
    const rows = 512;
    const cols = (2 * ROLLED_ELEMENTS) / rows;
    const { source, out, input, moved } = kernelOf(
      new Tensor(new Float32Array(rows * cols), { device: 'CPU' }).reshape([rows, cols]).sum(1),
    );
    // its loads and stores, whatever their lanes, and its accumulators' besides
    expect(moved).toBeGreaterThan(rows * cols + rows);
    expect(source).not.toContain('#pragma GCC unroll');
    expect(out[3]).toBe(input.slice(3 * cols, 4 * cols).reduce((a, b) => a + b, 0));
  });

  it('take no pragma between an OpenMP loop and its pragma, and the serial loops within stay rolled', () => {
    const threads: Opt = { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.THREAD, top: true };
    const { source, out, input } = kernelOf(
      new Tensor(new Float32Array(64 * 128), { device: 'CPU' }).reshape([64, 128]).sum(1),
      [threads],
    );
    expect(source).toMatch(/#pragma omp parallel for num_threads\(tg_team\(2\)\)\n\s*#endif\n\s*for \(/);
    expect(rolledLoops(source)).toBe(loops(source) - 1);
    expect(out[5]).toBe(input.slice(5 * 128, 6 * 128).reduce((a, b) => a + b, 0));
  });
});
