// CUDA C for GPU-style kernels: the kernels the SIMT target gets for a set of programs (every dtype, workgroups,
// shared reductions) compile with nvcc for sm_90a where nvcc is installed (CI's image has it).
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import type { Opt } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';
import { hasNvcc, nvccCompile } from './nvcc.ts';

// the SIMT device's target: workgroups, vector types and NVIDIA's tensor cores (tf32 too)
const gpu = targetOf(Device.get('SIMT'));

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
  // tg_bfloat through the operators, casts and functions its conversions must resolve unambiguously
  'bfloat16 ops': () => {
    const b = x([8, 16], dtypes.bfloat16);
    return b
      .add(1)
      .sqrt()
      .exp2()
      .neg()
      .maximum(b)
      .lt(2)
      .where(b, 0.5)
      .add(b.cast(dtypes.float16).cast(dtypes.bfloat16))
      .add(b.cast(dtypes.int32).cast(dtypes.bfloat16))
      .max(1);
  },
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
  'vector elementwise': () =>
    x([16, 64])
      .realize()
      .mul(x([64]).realize())
      .add(x([16, 1]).realize())
      .maximum(0),
  'matmul float16 (TC)': () => x([32, 32], dtypes.float16).matmul(x([32, 16], dtypes.float16)),
  'matmul bfloat16 (TC)': () => x([16, 32], dtypes.bfloat16).matmul(x([32, 24], dtypes.bfloat16)),
  // operands in memory, as STAGE wants them (computed ones would be recomputed per element)
  'staged matmul bfloat16 (TC, STAGE)': () =>
    Tensor.empty([512, 512], { device: 'SIMT', dtype: dtypes.bfloat16 }).matmul(
      Tensor.empty([512, 512], { device: 'SIMT', dtype: dtypes.bfloat16 }),
    ),
  'matmul tf32 (TC)': () => x([32, 16]).matmul(x([16, 16])),
  'conv float16 (TC)': () =>
    x([1, 16, 4, 16], dtypes.float16).conv2d(x([8, 16, 3, 3], dtypes.float16), undefined, { padding: 1 }),
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
      const { name, linear } = Context.with({ ALLOW_TF32: 1 }, () => lowerKernel(k.ast, { target: gpu }));
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
    expect(sum).toContain('__shared__ __align__(16) float temp0[');
    expect(sum).toContain('__syncthreads();');
    expect(sum).toMatch(/int lidx0 = threadIdx\.x;/);
  });

  it("includes CUDA's half header only in kernels of float16 values", () => {
    const all = sources();
    const header = (program: string) =>
      all.filter(([n]) => n.includes(program)).map(([, s]) => s.includes('#include <cuda_fp16.h>'));
    expect(header('_float16_')).toContain(true);
    expect(header('matmul_float16_TC')).toContain(true);
    expect(header('elementwise')).not.toContain(true);
    expect(header('softmax')).not.toContain(true);
    expect(header('matmul_bfloat16_TC')).not.toContain(true);
  });

  it('asks for two blocks a multiprocessor for 256 threads without tensor cores (128 registers a thread)', () => {
    const bounds = (t: Tensor, target = gpu, opts?: Opt[]) => {
      const { name, linear } = lowerKernel(scheduleOf([t]).kernels.at(-1)!.ast, { target, opts });
      return /__launch_bounds__\(([^)]*)\)/.exec(renderCUDA(name, linear))![1];
    };
    // float32 register blocks: 16 x 16 threads of 8 x 8 sums (src/codegen/opt/register-blocks.ts)
    expect(bounds(x([1024, 1024]).matmul(x([1024, 1024])))).toBe('256, 2');
    expect(bounds(x([6, 40]).mul(2))).toMatch(/^\d+$/);
    // tensor cores keep their registers: 8 warps of 64 x 64 (a 128 x 256 block; 227 KB of shared memory)
    const h100 = { ...gpu, grid: { ...gpu.grid!, maxThreads: 1024, localBytes: 232448 } };
    const half = () => Tensor.empty([1024, 1024], { device: 'SIMT', dtype: dtypes.float16 });
    const block: Opt[] = [
      { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 2, factor: 4, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL },
      { op: 'STAGE', axis: 6, depth: 2, swizzle: true },
    ];
    expect(bounds(half().matmul(half()), h100, block)).toBe('256');
  });

  it('loads and stores aligned vectors whole, and computes them lane by lane through operators', () => {
    const source = sources()
      .filter(([n]) => n.includes('vector_elementwise'))
      .map(([, source]) => source)
      .join('\n');
    expect(source).toContain('typedef tg_vec<float, 4> tg_float4;');
    expect(source).toMatch(/tg_float4 val\d+ = \(\*\(const tg_float4\*\)\(data\d\+alu\d+\)\);/);
    expect(source).toMatch(/\*\(tg_float4\*\)\(data0\+alu\d+\) = alu\d+;/);
  });

  it('moves bfloat16 as its bits (tg_bfloat): tile copies and mma.sync operands convert nothing', () => {
    const staged = sources()
      .filter(([n]) => n.includes('staged_matmul_bfloat16'))
      .map(([, source]) => source)
      .join('\n');
    expect(staged).toMatch(/tg_bfloat8 val\d+ = \(\*\(const tg_bfloat8\*\)\(data\d\+alu\d+\)\);/);
    expect(staged).toMatch(/\*\(tg_bfloat8\*\)\(temp\d\+alu\d+\) = val\d+;/);
    expect(staged).toContain('((unsigned)a[0].bits | ((unsigned)a[1].bits << 16))');
    // the kernel converts no bfloat16 where it moves (only its float results round, as tg_bfloat's are declared)
    expect(staged.slice(staged.indexOf('__global__'))).not.toMatch(/tg_bf16_to_float|tg_float_to_bf16/);
  });

  it('runs tensor cores as mma.sync: float16 and bfloat16 packed in pairs, float32 through cvt.rna.tf32', () => {
    const all = sources();
    const of = (program: string) =>
      all
        .filter(([n]) => n.includes(program))
        .map(([, source]) => source)
        .join('\n');
    expect(of('matmul_float16')).toContain('mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32');
    expect(of('matmul_float16')).toContain(
      '__half_as_ushort(a[0]) | ((unsigned)__half_as_ushort(a[1]) << 16)',
    );
    expect(of('matmul_bfloat16')).toContain('mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32');
    expect(of('matmul_tf32')).toContain('mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32');
    expect(of('matmul_tf32')).toContain('cvt.rna.tf32.f32');
    expect(of('conv_float16')).toContain('tg_WMMA_16_8_16_float16_float32(');
  });

  it.skipIf(!hasNvcc)(
    'compiles every kernel with nvcc for sm_90a',
    () => {
      const all = sources();
      expect(all.length).toBeGreaterThan(10);
      nvccCompile(all.map(([, source]) => source));
    },
    300_000,
  );
});
