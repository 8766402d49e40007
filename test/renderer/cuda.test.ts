// CUDA C for GPU-style kernels: the kernels the SIMT target gets for a set of programs (every dtype, workgroups,
// shared reductions) compile with nvcc for sm_90 where nvcc is installed (CI's image has it).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET, type Target } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';

const gpu: Target = { ...CPU_TARGET, threads: 1, vectors: false, grid: Device.get('SIMT').workgroups() };

const nvcc = (() => {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const x = (shape: number[], dtype = dtypes.float32) =>
  Tensor.rand(shape, { device: 'SIMT' }).mul(8).cast(dtype).reshape(shape);

/** Programs whose kernels cover the dtypes, workgroups and shared reductions. */
const PROGRAMS: Record<string, () => Tensor> = {
  elementwise: () =>
    x([6, 40])
      .mul(0.5)
      .exp2()
      .sub(x([40]))
      .sqrt()
      .sin(),
  matmul: () =>
    x([16, 32])
      .matmul(x([32, 8]))
      .relu(),
  'big sum (GROUP_REDUCE)': () => x([4096]).sum(),
  softmax: () => x([8, 100]).softmax(1),
  conv: () => x([1, 2, 8, 8]).conv2d(x([4, 2, 3, 3]), undefined, { padding: 1 }),
  float16: () => x([8, 16], dtypes.float16).add(1).max(1),
  bfloat16: () => x([8, 16], dtypes.bfloat16).mul(3).sum(1),
  float64: () => x([8, 16], dtypes.float64).log().sum(0),
  'int64 and uint8': () =>
    x([10], dtypes.int64)
      .mul(2 ** 33)
      .add(x([10], dtypes.uint8).cast(dtypes.int64)),
  'ints and bools': () =>
    x([12], dtypes.int32)
      .div(3, { roundingMode: 'floor' })
      .eq(x([12], dtypes.int32).mod(-5))
      .where(7, -1),
  'padded gather': () =>
    x([5, 6])
      .pad([
        [1, 1],
        [2, 0],
      ])
      .flip(0)
      .gather(1, x([7, 3], dtypes.int32).mod(8)),
};

/** Each program's kernels as CUDA C, named apart. */
function sources(): [string, string][] {
  return Object.entries(PROGRAMS).flatMap(([program, f]) =>
    scheduleOf([f()]).kernels.map((k, i): [string, string] => {
      const { name, linear } = lowerKernel(k.ast, { target: gpu });
      const unique = `${name}_${program.replace(/\W+/g, '_')}_${i}`;
      return [unique, renderCUDA(unique, linear)];
    }),
  );
}

describe('CUDA renderer', () => {
  it('declares workgroups, shared memory and barriers', () => {
    const all = sources();
    const sum = all.find(([n]) => n.includes('big_sum'))![1];
    expect(sum).toMatch(/extern "C" __global__ void __launch_bounds__\(\d+\) r_/);
    expect(sum).toContain('__shared__ float temp0[');
    expect(sum).toContain('__syncthreads();');
    expect(sum).toMatch(/int lidx0 = threadIdx\.x;/);
  });

  it.skipIf(!nvcc)(
    'compiles every kernel with nvcc for sm_90',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'tsgrad-cuda-'));
      try {
        const files = sources().map(([name, source]) => {
          const file = join(dir, `${name}.cu`);
          writeFileSync(file, source);
          return file;
        });
        expect(files.length).toBeGreaterThan(10);
        execFileSync('nvcc', ['-arch=sm_90', '-cubin', '-odir', dir, ...files], { stdio: 'pipe' });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    300_000,
  );
});
