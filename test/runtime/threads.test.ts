// THREAD axes on the CPU: rendered as OpenMP loops, run on several threads when the compiler has OpenMP, compute
// what NOOPT computes; THREADS overrides the device's thread count.
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET, type Opt } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { recordLaunches, scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderC } from '../../src/renderer/c.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { compileFlags, findCompiler } from '../../src/runtime/cc.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const cpu = Device.get('CPU');
const { openmp } = findCompiler();
const TARGET = { ...CPU_TARGET, vectors: true, threads: 2, registers: 128 };

/** The one kernel of x.sum(1) for a 512 x 256 matrix: 2^17 iterations, 512 results (not split). */
const kernel = scheduleOf([
  new Tensor(new Float32Array(512 * 256), { device: 'CPU' }).reshape([512, 256]).sum(1),
]).kernels[0]!;

/** Runs the kernel lowered with opts (undefined: the hand-coded ones for TARGET) on the CPU. */
function run(k: { ast: UOp; bufs: UOp[] }, opts?: readonly Opt[]): { out: number[]; source: string } {
  const lowered = lowerKernel(k.ast, { target: TARGET, ...(opts ? { opts } : {}) });
  const source = renderC(lowered.name, lowered.linear);
  const bufs = k.bufs.map((b, slot) => {
    const size = (b.shape as number[]).reduce((a, d) => a * d, 1);
    const data = Float32Array.from({ length: size }, (_, i) => (slot === 0 ? 0 : ((i * 7) % 11) - 5));
    return new DeviceBuffer(cpu, size, b.dtype).copyin(data);
  });
  cpu.compile(lowered.name, source).run(bufs);
  return { out: Array.from(bufs[0]!.copyout() as Float32Array), source };
}

describe('THREAD axes on the CPU', () => {
  it('the hand-coded opts split the outer axis over 2 threads', () => {
    expect(lowerKernel(kernel.ast, { target: TARGET }).opts[0]).toEqual({
      op: 'SPLIT',
      axis: 0,
      factor: 2,
      target: AxisType.THREAD,
      top: true,
    });
  });

  it('render an OpenMP loop of 2 (guarded by _OPENMP) and compute what NOOPT computes', () => {
    const threaded = run(kernel);
    const plain = run(kernel, []);
    expect(threaded.source).toMatch(
      /#ifdef _OPENMP\n\s*#pragma omp parallel for num_threads\(tg_team\(2\)\)\n\s*#endif\n\s*for \(int ridx0 = 0; ridx0 < 2;/,
    );
    expect(plain.source).not.toContain('#pragma omp');
    expect(threaded.out).toEqual(plain.out);
    expect(plain.out.some((v) => v !== 0)).toBe(true);
  });

  it('kernels compile with -fopenmp exactly when the compiler has OpenMP', () => {
    expect(compileFlags(findCompiler()).includes('-fopenmp')).toBe(openmp);
  });

  it('without CC, a compiler that has OpenMP is chosen where gcc or clang has it', () => {
    const probe = (cc: string) => {
      try {
        return Context.with({ CC: cc }, () => findCompiler()).openmp;
      } catch {
        return false; // not installed
      }
    };
    // clang without libomp, found first, would leave every THREAD loop serial
    expect(probe('')).toBe(probe('gcc') || probe('clang'));
  });

  it.runIf(openmp)('an OpenMP loop in a CPU kernel runs on 2 threads', () => {
    const src = `#ifdef _OPENMP
#include <omp.h>
#endif
void who(int* restrict data0) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(2) schedule(static)
#endif
  for (int i = 0; i < 2; i++) {
#ifdef _OPENMP
    data0[i] = omp_get_thread_num();
#else
    data0[i] = -1;
#endif
  }
}`;
    const out = new DeviceBuffer(cpu, 2, dtypes.int32).copyin(new Int32Array([9, 9]));
    cpu.compile('who', src).run([out]);
    expect(Array.from(out.copyout() as Int32Array)).toEqual([0, 1]);
  });
});

describe('THREADS', () => {
  it('sets the CPU thread count (1 without OpenMP); 0 is one per core', () => {
    expect(Context.with({ THREADS: 1 }, () => cpu.threads())).toBe(1);
    expect(Context.with({ THREADS: 3 }, () => cpu.threads())).toBe(openmp ? 3 : 1);
    expect(Context.with({ THREADS: 0 }, () => cpu.threads())).toBe(openmp ? availableParallelism() : 1);
  });

  it('THREADS=1 realizes without THREAD splits (another program), to the same values', () => {
    const x = new Tensor(
      Float32Array.from({ length: 512 * 256 }, (_, i) => (i % 13) - 6),
      { device: 'CPU' },
    );
    const sumWith = (threads: number) => {
      let out: unknown;
      const names = Context.with({ THREADS: threads }, () =>
        recordLaunches(() => {
          out = x.reshape([512, 256]).sum(1).tolist();
        }).launches.map((l) => l.program.name),
      );
      return { out, names };
    };
    const two = sumWith(2);
    const one = sumWith(1);
    expect(one.out).toEqual(two.out);
    // rows of 256 summed in vectors as wide as a register (16 floats on AVX-512, 8 on AVX2), 4 a step
    const lanes = cpu.vectorBytes() / 4;
    const loop = `${256 / lanes / 4}_4_${lanes}`;
    expect(one.names).toEqual([`r_512_${loop}`]);
    expect(two.names).toEqual([openmp ? `r_2_256_${loop}` : `r_512_${loop}`]);
  });
});
