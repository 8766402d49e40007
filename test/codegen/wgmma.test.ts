// Hopper's warpgroup tensor cores (wgmma): TC on a WGMMA core and STAGE with the swizzle make WMMAs whose A and B
// the tensor core reads from the LOCAL tiles itself (one tile load each, src/codegen/wgmma-operands.ts). SIMT
// reads the tiles as the hardware reads a descriptor (the 128-byte swizzle) and must compute the float64 matmul;
// the CUDA source issues wgmma after a proxy fence and compiles with nvcc for sm_90a.
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import type { Opt } from '../../src/codegen/opt/opts.ts';
import { allocStorage, type DType, dtypes, readElement, writeElement } from '../../src/dtype.ts';
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
// SIMT's 48 KB hold no two buffers of four m64 tiles' operands; the emulator itself sets no limit
const roomy = { ...target, grid: { ...target.grid!, localBytes: 227 * 1024 } };
const [M, K, N] = [256, 128, 128];

const kernelOf = (d: DType) =>
  scheduleOf([
    Tensor.empty([M, K], { device: 'SIMT', dtype: d }).matmul(
      Tensor.empty([K, N], { device: 'SIMT', dtype: d }),
    ),
  ]).kernels.at(-1)!;
// after TC the axes are M tiles, N tiles, K tiles, the warpgroup; UPCAST of M (m64 tiles a warpgroup) puts an
// axis before K
const opts = (d: DType, tiles: number): Opt[] => [
  {
    op: 'TC',
    axis: 2,
    tc: target.tensorCores.findIndex((c) => c.sharedOperands && c.dtypeIn === d),
    opt: 0,
    mode: 1,
  },
  ...(tiles > 1 ? [{ op: 'SPLIT', axis: 0, factor: tiles, target: AxisType.UPCAST } as Opt] : []),
  { op: 'SPLIT', axis: tiles > 1 ? 3 : 2, factor: 4, target: AxisType.UNROLL },
  { op: 'STAGE', axis: tiles > 1 ? 3 : 2, swizzle: true },
];

describe('warpgroup tensor cores (wgmma)', () => {
  for (const d of [dtypes.float16, dtypes.bfloat16])
    for (const tiles of [1, 2, 4])
      it(`compute the ${d.name} matmul in SIMT from swizzled tiles (${tiles} m64 tiles a warpgroup)`, () => {
        const k = kernelOf(d);
        const { name, linear } = lowerKernel(k.ast, { target: roomy, opts: opts(d, tiles) });
        const loads = linear.src.filter((u) => u.op === Ops.LOAD && u.argOf(Ops.LOAD)?.tile !== undefined);
        // an A tile per m64 tile and K step of 16, a B tile per K step
        expect(loads.map((u) => u.argOf(Ops.LOAD)!.tile!.operand).sort()).toEqual([
          ...Array<string>(4 * tiles).fill('a'),
          ...Array<string>(4).fill('b'),
        ]);
        let seed = 7;
        const random = () => {
          seed = (seed * 1103515245 + 12345) % 2 ** 31;
          return (Math.floor((seed / 2 ** 31) * 256) - 128) / 64;
        };
        const inputs = [M * K, K * N].map((n) => {
          const s = allocStorage(d, n);
          for (let i = 0; i < n; i++) writeElement(d, s, i, random());
          return s;
        });
        const out = new DeviceBuffer(simt, M * N, d);
        const bufs = [out, ...inputs.map((s, i) => new DeviceBuffer(simt, i ? K * N : M * K, d).copyin(s))];
        simt.compile(name, renderSIMT(name, linear)).run(bufs);
        const got = out.copyout();
        const at = (s: ReturnType<typeof allocStorage>, i: number) => Number(readElement(d, s, i));
        let worst = 0;
        for (let i = 0; i < M; i++)
          for (let j = 0; j < N; j++) {
            let want = 0;
            for (let q = 0; q < K; q++) want += at(inputs[0]!, i * K + q) * at(inputs[1]!, q * N + j);
            // the products of multiples of 1/64 sum exactly in float32; the output rounds once
            worst = Math.max(worst, Math.abs(at(got, i * N + j) - want) / Math.max(1, Math.abs(want)));
          }
        expect(worst).toBeLessThan(d === dtypes.float16 ? 1e-3 : 8e-3);
      });

  it('refuse operands that are not swizzled tiles of rows of 64, naming what they need', () => {
    const k = kernelOf(dtypes.float16);
    const unstaged = opts(dtypes.float16, 1).slice(0, -1);
    expect(() => lowerKernel(k.ast, { target, opts: unstaged })).toThrow(
      /WGMMA_64_64_16_float16.*128-byte swizzle/,
    );
  });

  it("are the heuristics' choice for big plain matmuls on an H100, and the warps' cores where the tiles cannot feed them", () => {
    // an H100's limits (SIMT's 48 KB hold no two-ahead pipeline of these tiles)
    const h100 = { ...target, grid: { ...target.grid!, localBytes: 232448, maxThreads: 1024 } };
    const optsOf = (a: Tensor, b: Tensor) =>
      lowerKernel(scheduleOf([a.matmul(b)]).kernels.at(-1)!.ast, { target: h100 }).opts;
    const chosen = (a: Tensor, b: Tensor) => {
      const tc = optsOf(a, b).find((o) => o.op === 'TC');
      return tc?.op === 'TC' ? h100.tensorCores[tc.tc]!.name : undefined;
    };
    const e = (...shape: number[]) => Tensor.empty(shape, { device: 'SIMT', dtype: dtypes.float16 });
    expect(chosen(e(4096, 4096), e(4096, 4096))).toBe('WGMMA_64_64_16_float16_float32');
    // m64 tiles along M a warpgroup: 4 (256 x 64 blocks) where the grid keeps 4096 of them, else 2
    const mTiles = (n: number) =>
      optsOf(e(n, n), e(n, n)).find((o) => o.op === 'SPLIT' && o.target === 'UPCAST');
    expect(mTiles(8192)).toEqual({ op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST });
    expect(mTiles(4096)).toEqual({ op: 'SPLIT', axis: 0, factor: 2, target: AxisType.UPCAST });
    // A read transposed: its tile is not the core's layout (sharedOperands refuses it); mma.sync instead
    expect(chosen(e(4096, 4096).T, e(4096, 4096))).toMatch(/^WMMA_16_8_16_float16/);
    // too few blocks for the machine
    expect(chosen(e(1024, 1024), e(1024, 1024))).toMatch(/^WMMA_16_8_16_float16/);
  });

  it.skipIf(!hasNvcc)('compile with nvcc for sm_90a (wgmma from descriptors after a proxy fence)', () => {
    const { linear } = lowerKernel(kernelOf(dtypes.bfloat16).ast, {
      target,
      opts: opts(dtypes.bfloat16, 2),
    });
    const source = renderCUDA('wgmma', linear);
    expect(source).toMatch(/wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16/);
    // the multiplies run asynchronously: waited for before each barrier (the next copies overwrite tiles they
    // read) and after the loop (the stores read their sums)
    expect(source).toMatch(
      /wgmma\.wait_group\.sync\.aligned 0;" ::: "memory"\); asm volatile\("fence\.proxy\.async\.shared::cta;" ::: "memory"\); __syncthreads\(\);/,
    );
    expect(source).toMatch(/^ {2}}\n {2}asm volatile\("wgmma\.wait_group\.sync\.aligned 0;"/m);
    expect(source).toMatch(/__shared__ __align__\(1024\)/);
    nvccCompile([source]);
  });
});
