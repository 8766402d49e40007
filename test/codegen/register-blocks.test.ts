// Register blocks (src/codegen/opt/register-blocks.ts): which float32 matmuls get them on a GPU, and their kernels
// on SIMT, whose chained accumulators (src/codegen/accumulate.ts) add each product in K order: the bits of a
// sequential float32 loop. Their CUDA C compiles with nvcc.
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import type { Opt, Target } from '../../src/codegen/opt/opts.ts';
import { type DType, dtypes } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import { hasNvcc, nvccCompile } from '../renderer/nvcc.ts';

const simt = Device.get('SIMT');
const target = targetOf(simt);
/** An H100's limits: 1024 threads, 227 KB of shared memory. */
const h100: Target = { ...target, grid: { ...target.grid!, maxThreads: 1024, localBytes: 232448 } };

const matmul = (M: number, K: number, N: number, dtype: DType = dtypes.float32, batch: number[] = []) =>
  scheduleOf([
    Tensor.empty([...batch, M, K], { device: 'SIMT', dtype }).matmul(
      Tensor.empty([...batch, K, N], { device: 'SIMT', dtype }),
    ),
  ]).kernels.at(-1)!;

const split = (axis: number, factor: number, type: AxisType): Opt => ({
  op: 'SPLIT',
  axis,
  factor,
  target: type,
});
const { LOCAL, UPCAST, UNROLL } = AxisType;
/**
 * A 128 x 128 block of a matmul whose axes are M, N, K: two quads 64 apart a thread along each, K by 16 (copied
 * `depth` iterations ahead asynchronously, or where none synchronously through registers).
 */
const block128 = (depth?: number): Opt[] => [
  split(1, 4, UPCAST),
  split(1, 16, LOCAL),
  split(1, 2, UPCAST),
  split(0, 4, UPCAST),
  split(0, 16, LOCAL),
  split(0, 2, UPCAST),
  split(8, 4, UNROLL),
  split(8, 4, UNROLL),
  depth === undefined ? { op: 'STAGE', axis: 8 } : { op: 'STAGE', axis: 8, depth },
];

describe('register blocks', () => {
  it('take big float32 matmuls: 128 x 128 where 256 groups remain, else smaller', () => {
    const opts = (M: number, K: number, N: number, t = h100, batch: number[] = []) =>
      lowerKernel(matmul(M, K, N, dtypes.float32, batch).ast, { target: t }).opts;
    // synchronous copies, though the GPU copies asynchronously: A's tile is stored by columns
    expect(opts(4096, 4096, 4096)).toEqual(block128());
    expect(opts(2048, 2048, 2048)).toEqual(block128());
    // 1024^3: 64 groups of 128 x 128, 128 of 128 x 64; 256 of 64 x 64
    expect(opts(1024, 1024, 1024).slice(0, 4)).toEqual([
      split(1, 4, UPCAST),
      split(1, 16, LOCAL),
      split(0, 4, UPCAST),
      split(0, 16, LOCAL),
    ]);
    expect(opts(4096, 4096, 4096, target)).toEqual(block128());
    // a batch axis stays a grid axis: M and N are the axes one operand reads (4 x 64 groups of 64 x 64)
    expect(opts(512, 512, 512, h100, [4]).slice(0, 4)).toEqual([
      split(2, 4, UPCAST),
      split(2, 16, LOCAL),
      split(1, 4, UPCAST),
      split(1, 16, LOCAL),
    ]);
  });

  it('leave small, tensor-core and odd-shaped matmuls to the other opts', () => {
    // (without tensor cores, only register blocks stage)
    const staged = (M: number, K: number, N: number) =>
      lowerKernel(matmul(M, K, N).ast, { target: h100 }).opts.some((o) => o.op === 'STAGE');
    expect(staged(128, 128, 128)).toBe(false);
    // 64 groups of 64 x 64: fewer than one a multiprocessor
    expect(staged(512, 512, 512)).toBe(false);
    expect(staged(1000, 1000, 1000)).toBe(false);
    expect(lowerKernel(matmul(1024, 1024, 1024, dtypes.float16).ast, { target: h100 }).opts[0]!.op).toBe(
      'TC',
    );
  });

  // 3 slabs of K: every buffer of the async rotation (depth + 2) and the synchronous pair are used
  const [M, K, N] = [128, 48, 128];
  const a = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i * 1.37 + 1));
  const b = Float32Array.from({ length: K * N }, (_, i) => Math.sin(i * 0.71 + 2));
  // the products added in K order, each rounded to float32
  const expected = new Float32Array(M * N);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc = Math.fround(acc + Math.fround(a[i * K + k]! * b[k * N + j]!));
      expected[i * N + j] = acc;
    }

  it.each([0, 1])('sum in K order on SIMT, bit for bit (copies %i ahead)', (depth) => {
    const k = matmul(M, K, N);
    // (lowered for an H100: three buffers of its tiles take more than SIMT's 48 KB, which SIMT does not limit)
    const lowered = lowerKernel(k.ast, { target: h100, opts: block128(depth) });
    // each product is added to the accumulator in turn: no ADD of two products
    const products = new Set(
      lowered.linear.src.filter((u) => u.op === Ops.MUL && u.dtype.base === dtypes.float32),
    );
    expect(lowered.linear.src.some((u) => u.op === Ops.ADD && u.src.every((s) => products.has(s)))).toBe(
      false,
    );
    const bufs = [new Float32Array(M * N), a, b].map((v) =>
      new DeviceBuffer(simt, v.length, dtypes.float32).copyin(v),
    );
    simt.compile(lowered.name, renderSIMT(lowered.name, lowered.linear)).run(bufs);
    expect(bufs[0]!.copyout()).toEqual(expected);
    if (hasNvcc) nvccCompile([renderCUDA(lowered.name, lowered.linear)]);
  });
});
