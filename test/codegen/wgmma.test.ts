// Hopper's warpgroup tensor cores (wgmma): TC on a WGMMA core and STAGE with the swizzle make WMMAs whose A and B
// the tensor core reads from the LOCAL tiles itself (one tile load each, src/codegen/wgmma-operands.ts). SIMT
// reads the tiles as the hardware reads a descriptor (the 128-byte swizzle; B of m64n128 / m64n256 in blocks of 64
// columns, its leading byte offset apart) and must compute the float64 matmul; the CUDA source issues wgmma after
// a proxy fence and compiles with nvcc for sm_90a.
import { describe, expect, it } from 'vitest';
import { lowerKernel, optimizable } from '../../src/codegen/index.ts';
import { type WarpgroupBlock, warpgroupBlockOpts } from '../../src/codegen/opt/heuristic-gpu.ts';
import type { Opt } from '../../src/codegen/opt/opts.ts';
import { allocStorage, type DType, dtypes, readElement, writeElement } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import type { SimtProgram } from '../../src/runtime/simt.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import { hasNvcc, nvccCompile } from '../renderer/nvcc.ts';

const simt = Device.get('SIMT');
const target = targetOf(simt);
// SIMT's 48 KB hold no two buffers of four m64 tiles' operands; the emulator itself sets no limit
const roomy = { ...target, grid: { ...target.grid!, localBytes: 227 * 1024 } };
const [M, K, N] = [256, 128, 128];

const kernelOf = (d: DType, m = M, k = K, n = N) =>
  scheduleOf([
    Tensor.empty([m, k], { device: 'SIMT', dtype: d }).matmul(
      Tensor.empty([k, n], { device: 'SIMT', dtype: d }),
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

type Shape = readonly [m: number, k: number, n: number];

/** The SIMT program's largest error on an [m, k] x [k, n] matmul of random multiples of 1/64, against float64. */
function simtError(d: DType, [m, k, n]: Shape, name: string, program: string): number {
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return (Math.floor((seed / 2 ** 31) * 256) - 128) / 64;
  };
  const inputs = [m * k, k * n!].map((size) => {
    const s = allocStorage(d, size);
    for (let i = 0; i < size; i++) writeElement(d, s, i, random());
    return s;
  });
  const out = new DeviceBuffer(simt, m * n!, d);
  const bufs = [out, ...inputs.map((s, i) => new DeviceBuffer(simt, i ? k * n : m * k, d).copyin(s))];
  simt.compile(name, program).run(bufs);
  const got = out.copyout();
  const at = (s: ReturnType<typeof allocStorage>, i: number) => Number(readElement(d, s, i));
  let worst = 0;
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) {
      let want = 0;
      for (let q = 0; q < k; q++) want += at(inputs[0]!, i * k + q) * at(inputs[1]!, q * n + j);
      // the products of multiples of 1/64 sum exactly in float32; the output rounds once
      worst = Math.max(worst, Math.abs(at(got, i * n + j) - want) / Math.max(1, Math.abs(want)));
    }
  return worst;
}
const tolerance = (d: DType) => (d === dtypes.float16 ? 1e-3 : 8e-3);

// B of m64n128 / m64n256 spans 2 / 4 blocks of 64 columns: 128 x 128 blocks (two m64n128 tiles a warpgroup) on a
// matrix as wide as the block (B's tile one run of memory), and 128 x 256 blocks of two warpgroups on a wider one
const WIDE: readonly [WarpgroupBlock, Shape][] = [
  [{ width: 128, warpgroups: 1, tiles: 2 }, [128, 128, 128]],
  [{ width: 256, warpgroups: 2, tiles: 1 }, [128, 128, 512]],
];
/** The matmul of that shape lowered with a warpgroup block of the heuristics' form. */
function wideKernel(d: DType, block: WarpgroupBlock, shape: Shape) {
  const k = kernelOf(d, ...shape);
  const tc = roomy.tensorCores.findIndex((c) => c.sharedOperands && c.dtypeIn === d && c.n === block.width);
  const opts = warpgroupBlockOpts(optimizable(k.ast, { target: roomy }), tc, block, roomy);
  return lowerKernel(k.ast, { target: roomy, opts });
}

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
        expect(simtError(d, [M, K, N], name, renderSIMT(name, linear))).toBeLessThan(tolerance(d));
      });

  for (const d of [dtypes.float16, dtypes.bfloat16])
    for (const [block, shape] of WIDE)
      it(`compute the ${d.name} matmul in SIMT with m64n${block.width} tiles, B in blocks of 64 columns (${shape.join(' x ')})`, () => {
        const { name, linear } = wideKernel(d, block, shape);
        const tiles = linear.src.flatMap((u) => {
          const tile = u.op === Ops.LOAD ? u.argOf(Ops.LOAD)?.tile : undefined;
          return tile === undefined ? [] : [tile];
        });
        // B's blocks a K slab's 64 rows of 64 columns apart, for each of its 4 steps of 16; A within one block
        expect(tiles.filter((t) => t.operand === 'b').map((t) => t.leading)).toEqual(Array(4).fill(64 * 64));
        expect(tiles.filter((t) => t.operand === 'a').every((t) => t.leading === undefined)).toBe(true);
        expect(simtError(d, shape, name, renderSIMT(name, linear))).toBeLessThan(tolerance(d));
      });

  it('read B through its leading byte offset: another gives a wrong matmul, none is refused', () => {
    const d = dtypes.float16;
    const [block, shape] = WIDE[1]!;
    const { name, linear } = wideKernel(d, block, shape);
    const program = JSON.parse(renderSIMT(name, linear)) as SimtProgram;
    const withLeading = (leading: number | undefined) =>
      JSON.stringify({
        ...program,
        instructions: program.instructions.map(([op, dtype, src, arg]) =>
          arg !== undefined && 'tile' in arg && arg.tile.operand === 'b'
            ? [op, dtype, src, { ...arg, tile: { ...arg.tile, leading } }]
            : [op, dtype, src, ...(arg === undefined ? [] : [arg])],
        ),
      });
    expect(simtError(d, shape, name, withLeading(64 * 64))).toBeLessThan(tolerance(d));
    // one 8-row group further: the descriptor would read other rows of the slab
    expect(simtError(d, shape, name, withLeading(64 * 64 + 8 * 64))).toBeGreaterThan(0.1);
    expect(() => simtError(d, shape, name, withLeading(undefined))).toThrow(/no leading byte offset/);
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
    // the block: its warpgroups (LOCAL) and m64 tiles a warpgroup (UPCAST) along M
    const splits = (a: Tensor, b: Tensor) =>
      optsOf(a, b).flatMap((o) => (o.op === 'SPLIT' && o.target !== AxisType.UNROLL ? [o] : []));
    const along = (factor: number, target: AxisType) => [{ op: 'SPLIT', axis: 0, factor, target }];
    // 128 x 256 blocks of two warpgroups where N is a multiple of 256
    for (const n of [4096, 8192]) {
      expect(chosen(e(n, n), e(n, n))).toBe('WGMMA_64_256_16_float16_float32');
      expect(splits(e(n, n), e(n, n))).toEqual(along(2, AxisType.LOCAL));
    }
    // else 128 x 128 of one warpgroup where it is one of 128
    expect(chosen(e(4096, 4096), e(4096, 3968))).toBe('WGMMA_64_128_16_float16_float32');
    expect(splits(e(4096, 4096), e(4096, 3968))).toEqual(along(2, AxisType.UPCAST));
    // else m64n64 tiles: 4 (256 x 64 blocks) where the grid keeps 4096 of them, else 2
    expect(chosen(e(4096, 4096), e(4096, 4032))).toBe('WGMMA_64_64_16_float16_float32');
    expect(splits(e(16384, 4096), e(4096, 8128))).toEqual(along(4, AxisType.UPCAST));
    expect(splits(e(4096, 4096), e(4096, 4032))).toEqual(along(2, AxisType.UPCAST));
    // A or B read transposed: its tile is not the core's layout (sharedOperands refuses it); mma.sync instead
    expect(chosen(e(4096, 4096).T, e(4096, 4096))).toMatch(/^WMMA_16_8_16_float16/);
    expect(chosen(e(4096, 4096), e(4096, 4096).T)).toMatch(/^WMMA_16_8_16_float16/);
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

  it.skipIf(!hasNvcc)(
    "compile m64n256 with nvcc: B's descriptor with its blocks of 64 columns 8 KB apart",
    () => {
      const [block, shape] = WIDE[1]!;
      const source = renderCUDA('wgmma', wideKernel(dtypes.bfloat16, block, shape).linear);
      expect(source).toMatch(
        /wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.bf16\.bf16 \{%0, [^}]*, %127\}, %128, %129/,
      );
      // A's one block (the field unused) and B's: 64 rows of 128 bytes
      expect(source).toMatch(
        /tg_WGMMA_64_256_16_bfloat16_float32\(tg_wgmma_descriptor\([^;]*, 16\), tg_wgmma_descriptor\([^;]*, 8192\), /,
      );
      nvccCompile([source]);
    },
  );
});
