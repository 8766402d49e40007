// Vector lanes on the C target: kernels whose innermost UPCAST becomes vectors compute what NOOPT kernels do.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { kernelRanges } from '../../src/codegen/opt/axes.ts';
import { applyOpts, CPU_TARGET, type Opt } from '../../src/codegen/opt/opts.ts';
import { type DType, dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderC } from '../../src/renderer/c.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { type ArgOf, AxisType, type Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const cpu = Device.get('CPU');

function kernelOf(t: Tensor): { ast: UOp; bufs: UOp[] } {
  const { kernels } = scheduleOf([t]);
  expect(kernels).toHaveLength(1);
  return kernels[0]!;
}

/** Small integers in every dtype, so sums in any order are exact. */
function fill(size: number, dtype: DType, slot: number) {
  const data = Array.from({ length: size }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5));
  if (dtype === dtypes.float64) return Float64Array.from(data);
  if (dtype === dtypes.int32) return Int32Array.from(data);
  if (dtype === dtypes.bool) return Uint8Array.from(data, (x) => (x > 0 ? 1 : 0));
  return Float32Array.from(data);
}

/** Lowers the kernel with opts for the C target, runs it on the CPU, returns the output and the source. */
function run(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]): { out: number[]; source: string } {
  const { name, linear } = lowerKernel(k.ast, { opts, target: { ...CPU_TARGET, vectors: true } });
  const bufs = k.bufs.map((b, slot) => {
    const size = (b.shape as number[]).reduce((a, d) => a * d, 1);
    return new DeviceBuffer(cpu, size, b.dtype).copyin(fill(size, b.dtype, slot));
  });
  const source = renderC(name, linear);
  cpu.compile(name, source).run(bufs);
  return { out: Array.from(bufs[0]!.copyout() as ArrayLike<number>), source };
}

/** UPCAST splits of non-reduce axes (the last one made becomes the lanes), UNROLLs of reduce axes. */
function legalSplits(ast: UOp): Opt[] {
  return kernelRanges(ast).flatMap((r, axis) => {
    const { type } = r.arg as ArgOf<Ops.RANGE>;
    const n = Number(r.src[0]!.constValue);
    const target =
      type === AxisType.LOOP ? AxisType.UPCAST : type === AxisType.REDUCE ? AxisType.UNROLL : undefined;
    if (target === undefined) return [];
    return [2, 4, 8]
      .filter((f) => n % f === 0)
      .map((factor) => ({ op: 'SPLIT' as const, axis, factor, target }));
  });
}

const program = fc.record({
  shape: fc.array(fc.constantFrom(2, 4, 8, 16), { minLength: 1, maxLength: 3 }),
  dtype: fc.constantFrom(dtypes.float32, dtypes.float64, dtypes.int32),
  ops: fc.array(fc.constantFrom('relu', 'neg', 'square', 'add', 'mul', 'permute', 'flip', 'pad'), {
    maxLength: 3,
  }),
  reduce: fc.constantFrom('sum', 'max', 'none'),
  axis: fc.nat(),
  picks: fc.array(fc.nat(), { maxLength: 3 }),
});

describe('vector lanes (C)', () => {
  it('compute what NOOPT kernels compute (random programs, dtypes and legal opt sequences)', () => {
    let vectorized = 0;
    fc.assert(
      fc.property(program, ({ shape, dtype, ops, reduce, axis, picks }) => {
        const size = shape.reduce((a, d) => a * d, 1);
        const x = new Tensor(fill(size, dtype, 1), { device: 'CPU' }).reshape(shape);
        const y = new Tensor(fill(size, dtype, 2), { device: 'CPU' }).reshape(shape);
        let t = x;
        for (const op of ops) {
          if (op === 'permute') t = t.permute([...shape.keys()].reverse());
          else if (op === 'flip') t = t.flip(-1);
          else if (op === 'pad')
            t = t
              .pad(t.shape.map((_, i) => (i === t.ndim - 1 ? [1, 1] : [0, 0])))
              .shrink(t.shape.map((d, i) => (i === t.ndim - 1 ? [0, d] : [0, d])));
          else if (op === 'relu') t = t.relu();
          else if (op === 'neg') t = t.neg();
          else if (op === 'square') t = t.mul(t);
          else if (t.shape.join() === y.shape.join()) t = op === 'add' ? t.add(y) : t.mul(y);
        }
        if (reduce !== 'none') t = t[reduce](axis % t.ndim);
        const k = kernelOf(t.add(1));
        const opts: Opt[] = [];
        let ast = k.ast;
        for (const p of picks) {
          const legal = legalSplits(ast);
          if (legal.length === 0) break;
          opts.push(legal[p % legal.length]!);
          ast = applyOpts(ast, opts.slice(-1));
        }
        const optimized = run(k, opts);
        if (optimized.source.includes('vector_size')) vectorized++;
        expect(optimized.out).toEqual(run(k, []).out);
      }),
      { seed: 7, numRuns: 40 },
    );
    // the property means little unless many of the kernels used vectors
    expect(vectorized).toBeGreaterThan(10);
  }, 120_000); // 80 gcc compiles on a cold cache

  it('tile a matmul into vector accumulators that share one reduce loop', () => {
    const a = new Tensor(fill(64 * 32, dtypes.float32, 1), { device: 'CPU' }).reshape([64, 32]);
    const b = new Tensor(fill(32 * 64, dtypes.float32, 2), { device: 'CPU' }).reshape([32, 64]);
    const k = kernelOf(a.matmul(b));
    const opts: Opt[] = [
      { op: 'SPLIT', axis: 1, factor: 16, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 4, factor: 4, target: AxisType.UNROLL },
    ];
    const { out, source } = run(k, opts);
    expect(out).toEqual(run(k, []).out);
    // 4 rows of 16 lanes: four vector accumulators, updated in one K loop (3 loops in all)
    expect(source).toContain('typedef float tg_float16 __attribute__((vector_size(64)));');
    expect(source.match(/tg_float16 acc\d+ = /g)).toHaveLength(4);
    expect(source.match(/for \(/g)).toHaveLength(3);
  });

  it('load lane by lane where the gate differs between lanes, and compute the rest as vectors', () => {
    // padding the upcast axis makes the load's validity differ between lanes
    const x = new Tensor(fill(8 * 8, dtypes.float32, 1), { device: 'CPU' }).reshape([8, 8]);
    const k = kernelOf(
      x
        .pad([
          [0, 0],
          [1, 1],
        ])
        .mul(2),
    );
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 2, target: AxisType.UPCAST }]);
    expect(source).toMatch(/tg_float2 vec0 = \(\(tg_float2\)\{val0, val1\}\);/);
    expect(source).toMatch(/tg_float2 alu\d+ = \(vec0\*2\.0f\);/);
    expect(out).toEqual(run(k, []).out);
  });

  it('fall back to scalar copies where a vector would hold bools', () => {
    const x = new Tensor(fill(8 * 8, dtypes.float32, 1), { device: 'CPU' }).reshape([8, 8]);
    const k = kernelOf(x.gt(0));
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
    expect(source).not.toContain('vector_size');
    expect(out).toEqual(run(k, []).out);
  });
});

describe('aligned vector moves (C)', () => {
  it('are marked where the address is a multiple of the lanes, and not where it is off by one', () => {
    const x = new Tensor(fill(40, dtypes.float32, 1), { device: 'CPU' });
    // out[i] = 2 * x[i + 1]: the store starts at multiples of 8, the load one element later
    const k = kernelOf(x.shrink([[1, 33]]).mul(2));
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 0, factor: 8, target: AxisType.UPCAST }]);
    const moves = source.split('\n').filter((l) => l.includes('__builtin_memcpy') && l.includes('v_'));
    expect(moves).toHaveLength(2);
    expect(moves.find((l) => l.includes('data0'))).toContain('__builtin_assume_aligned(data0+');
    expect(moves.find((l) => l.includes('data1'))).not.toContain('__builtin_assume_aligned');
    expect(out).toEqual(run(k, []).out);
  });
});
