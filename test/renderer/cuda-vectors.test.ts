// Vector values on GPU targets: random programs with random UPCAST/UNROLL splits, lowered for the SIMT device's
// target (float4-wide lanes), compute on the SIMT emulator what the unoptimized kernel computes, and their CUDA
// C (vectors as a struct of lanes, aligned loads whole) compiles with nvcc for sm_90a where nvcc is installed.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { outputsToGlobal } from '../../src/codegen/grid.ts';
import { lowerKernel } from '../../src/codegen/index.ts';
import { kernelRanges } from '../../src/codegen/opt/axes.ts';
import { applyOpts, type Opt, printOpts } from '../../src/codegen/opt/opts.ts';
import { type DType, dtypes } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';
import { graphRewrite } from '../../src/uop/pattern.ts';
import { symbolic } from '../../src/uop/symbolic.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { hasNvcc, nvccCompile } from './nvcc.ts';

const simt = Device.get('SIMT');
const target = targetOf(simt);

/** Small integers (exact in every dtype here); buffer 0 (the output) zero. */
const fill = (size: number, slot: number) =>
  Array.from({ length: size }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5));

/** The kernel lowered for SIMT with opts, run on it; its output and CUDA C. */
function run(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]) {
  const { name, linear } = lowerKernel(k.ast, { target, opts });
  const bufs = k.bufs.map((b) => {
    const size = (b.shape as number[]).reduce((a, d) => a * d, 1);
    const data = new Tensor(fill(size, k.bufs.indexOf(b)), { device: 'JS' }).cast(b.dtype).dataSync();
    return new DeviceBuffer(simt, size, b.dtype).copyin(data as never);
  });
  simt.compile(name, renderSIMT(name, linear)).run(bufs);
  // an int32 sum is int64 (BigInt64Array): compared as numbers, exact at these sizes
  return {
    out: Array.from(bufs[0]!.copyout() as ArrayLike<number | bigint>, Number),
    cuda: renderCUDA(name, linear),
  };
}

const program = fc.record({
  shape: fc.array(fc.constantFrom(4, 8, 16), { minLength: 1, maxLength: 3 }),
  dtype: fc.constantFrom<DType>(dtypes.float32, dtypes.int32, dtypes.float64),
  ops: fc.array(fc.constantFrom('relu', 'neg', 'square', 'add', 'mul', 'max', 'div', 'cast', 'flip'), {
    maxLength: 4,
  }),
  reduce: fc.constantFrom('sum', 'max', 'none'),
  axis: fc.nat(),
  picks: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
});

describe('vectors on the SIMT target', () => {
  it('compute what unoptimized kernels compute, and their CUDA C compiles (random programs and lane splits)', () => {
    const sources: string[] = [];
    fc.assert(
      fc.property(program, ({ shape, dtype, ops, reduce, axis, picks }) => {
        const size = shape.reduce((a, d) => a * d, 1);
        const input = (slot: number) =>
          new Tensor(fill(size, slot), { device: 'SIMT' }).cast(dtype).reshape(shape).realize();
        const [x, y] = [input(1), input(2)];
        let t = x;
        for (const op of ops) {
          if (op === 'flip') t = t.flip(-1);
          else if (op === 'relu') t = t.relu();
          else if (op === 'neg') t = t.neg();
          else if (op === 'square') t = t.mul(t);
          else if (op === 'cast') t = t.cast(dtypes.float32);
          else if (op === 'div') t = t.cast(dtypes.float32).div(y.cast(dtypes.float32).add(11));
          else if (op === 'max') t = t.maximum(y.cast(t.dtype));
          else t = op === 'add' ? t.add(y.cast(t.dtype)) : t.mul(y.cast(t.dtype));
        }
        if (reduce !== 'none') t = t[reduce](axis % t.ndim);
        const { kernels } = scheduleOf([t.add(1)]);
        expect(kernels).toHaveLength(1);
        const k = kernels[0]!;
        const opts: Opt[] = [];
        let ast = outputsToGlobal(graphRewrite(k.ast, symbolic, { ctx: {} }));
        for (const p of picks) {
          const legal = kernelRanges(ast).flatMap((_, a) =>
            [AxisType.UPCAST, AxisType.UNROLL].flatMap((to) =>
              [2, 4].flatMap((factor): Opt[] => {
                const o: Opt = { op: 'SPLIT', axis: a, factor, target: to };
                try {
                  applyOpts(ast, [o], target);
                  return [o];
                } catch {
                  return [];
                }
              }),
            ),
          );
          if (legal.length === 0) break;
          opts.push(legal[p % legal.length]!);
          ast = applyOpts(ast, opts.slice(-1), target);
        }
        const optimized = run(k, opts);
        const plain = run(k, []).out;
        // lanes and unrolled copies sum in another order: floats within rounding, integers exact
        const off = optimized.out.map((v, i) => Math.abs(v - plain[i]!) / (1 + Math.abs(plain[i]!)));
        expect(Math.max(0, ...off), printOpts(opts)).toBeLessThanOrEqual(1e-5);
        sources.push(optimized.cuda);
      }),
      { seed: 3, numRuns: 16 },
    );
    // the property means little unless many of the kernels used vectors
    expect(sources.filter((s) => s.includes('typedef tg_vec<')).length).toBeGreaterThan(10);
    if (hasNvcc) nvccCompile(sources);
  }, 300_000);
});
