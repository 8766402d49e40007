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
  // (an int32 sum gives int64)
  if (dtype === dtypes.int64) return BigInt64Array.from(data, BigInt);
  if (dtype === dtypes.bool) return Uint8Array.from(data, (x) => (x > 0 ? 1 : 0));
  return Float32Array.from(data);
}

/**
 * Lowers the kernel with opts for the C target, runs it on the CPU (inputs from `inputs`, by slot from 1, or
 * small integers), returns the output and the source.
 */
function run(
  k: { ast: UOp; bufs: UOp[] },
  opts: readonly Opt[],
  inputs: Float32Array[] = [],
): { out: number[]; source: string } {
  const { name, linear } = lowerKernel(k.ast, { opts, target: { ...CPU_TARGET, vectors: true } });
  const bufs = k.bufs.map((b, slot) => {
    const size = (b.shape as number[]).reduce((a, d) => a * d, 1);
    return new DeviceBuffer(cpu, size, b.dtype).copyin(inputs[slot - 1] ?? fill(size, b.dtype, slot));
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

  it.each([
    [dtypes.float32, 'tg_float4', 'tg_int4'],
    [dtypes.float64, 'tg_double4', 'tg_long_long4'],
  ])(
    "select %s vectors by the masks of vector comparisons (relu's gradient, a select of selects)",
    (dtype, t, mask) => {
      // where(z < 0, 0, where(z > 0, g, g / 2)): both selects take the bits of one vector or the other by the
      // integer lanes a comparison makes (they were scalar copies: a bool per lane)
      const [zs, gs] = [fill(8 * 8, dtype, 1), fill(8 * 8, dtype, 2)] as [Float64Array, Float64Array];
      const z = new Tensor(zs, { device: 'CPU' }).reshape([8, 8]);
      const g = new Tensor(gs, { device: 'CPU' }).reshape([8, 8]);
      const k = kernelOf(z.lt(0).where(0, z.gt(0).where(g, g.mul(0.5))));
      const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
      expect(source).not.toContain('_Bool');
      expect(source.split(` = ((${t})((((${mask})`)).toHaveLength(3);
      expect(out).toEqual(Array.from(zs, (x, i) => (x < 0 ? 0 : x > 0 ? gs[i]! : gs[i]! * 0.5)));
      expect(new Set(zs.map(Math.sign))).toEqual(new Set([-1, 0, 1]));
    },
  );

  it('compute a select of selects lane by lane where the widths differ, and the rest as vectors', () => {
    // float64 comparisons select float32 values: no mask fits, so each select is a stack of its lanes, and the
    // outer one's lane j takes the inner one's lane j (it took the whole inner stack, and fell back to scalars)
    const zs = fill(8 * 8, dtypes.float64, 1) as Float64Array;
    const gs = fill(8 * 8, dtypes.float32, 2) as Float32Array;
    const z = new Tensor(zs, { device: 'CPU' }).reshape([8, 8]);
    const g = new Tensor(gs, { device: 'CPU' }).reshape([8, 8]);
    const k = kernelOf(z.lt(0).where(0, z.gt(0).where(1, 0.5)).mul(g));
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
    expect(source).toMatch(/tg_float4 alu\d+ = \(vec\d+\*val\d+\);/);
    expect(out).toEqual(Array.from(zs, (x, i) => (x < 0 ? 0 : x > 0 ? 1 : 0.5) * gs[i]!));
  });

  it('select by masks combined with or, and, xor and not, as vectors', () => {
    // GELU's gradient selects by 0 < x | !(x != 0): each select was computed lane by lane
    const xs = fill(8 * 8, dtypes.float32, 1) as Float32Array;
    const ys = fill(8 * 8, dtypes.float32, 2) as Float32Array;
    const x = new Tensor(xs, { device: 'CPU' }).reshape([8, 8]);
    const y = new Tensor(ys, { device: 'CPU' }).reshape([8, 8]);
    const [pos, zero, big] = [x.gt(0), x.ne(0).logicalNot(), y.gt(1)];
    const k = kernelOf(
      pos
        .bitwiseOr(zero)
        .where(x, y)
        .add(pos.bitwiseAnd(big).where(1, 0))
        .add(pos.bitwiseXor(big).logicalNot().where(2, 0)),
    );
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
    expect(source).not.toContain('_Bool');
    expect(source).toMatch(/ = \(~alu\d+\);/);
    const expected = Array.from(xs, (v, i) => {
      const [p, z, b] = [v > 0, v === 0, ys[i]! > 1];
      return (p || z ? v : ys[i]!) + (p && b ? 1 : 0) + (p !== b ? 0 : 2);
    });
    expect(out).toEqual(expected);
    expect(new Set(xs.map(Math.sign))).toEqual(new Set([-1, 0, 1]));
  });

  it("select by a comparison of the lane's column (a causal mask) as a mask of vectors", () => {
    // where(col > row, -inf, x): the column cast to int is made of its lanes, the comparison and select are
    // whole vectors (the cast of the lane index put the whole kernel in scalar copies)
    const xs = fill(8 * 16, dtypes.float32, 1) as Float32Array;
    const x = new Tensor(xs, { device: 'CPU' }).reshape([8, 16]);
    const k = kernelOf(x.tril().exp2());
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
    expect(source).toMatch(/tg_float4 alu\d+ = \(\(tg_float4\)\(\(/);
    expect(source).not.toContain('_Bool');
    expect(out).toEqual(Array.from(xs, (v, i) => (i % 16 <= Math.floor(i / 16) ? Math.fround(2 ** v) : 1)));
  });

  it('sum a reduce once, as a vector, where a value computed lane by lane reads it', () => {
    // where(float64(a @ b) < 0, 0, a @ b) + a @ b: the select's lanes read the matmul's lanes, which were
    // reduced a second time, per lane (four scalar accumulators beside the vector one)
    const a = new Tensor(fill(8 * 16, dtypes.float32, 1), { device: 'CPU' }).reshape([8, 16]);
    const b = new Tensor(fill(16 * 8, dtypes.float32, 2), { device: 'CPU' }).reshape([16, 8]);
    const s = a.matmul(b);
    const k = kernelOf(s.cast(dtypes.float64).lt(0).where(0, s).add(s));
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }]);
    // one accumulator, declared as a vector
    expect(source.match(/^\s*\S+ acc\d+ = /gm)?.map((l) => l.trim())).toEqual(['tg_float4 acc0 =']);
    expect(out).toEqual(run(k, []).out);
    // both selects happen: s < 0 gives s, s > 0 gives 2s
    expect(out.some((x) => x < 0) && out.some((x) => x > 0)).toBe(true);
  });

  it('select whole vectors by a condition all lanes share', () => {
    // where(row's flag, x, -x): one condition per row for a vector of its columns was a select per lane
    const xs = fill(8 * 8, dtypes.float32, 1) as Float32Array;
    const fs = fill(8, dtypes.float32, 2) as Float32Array;
    const x = new Tensor(xs, { device: 'CPU' }).reshape([8, 8]);
    const f = new Tensor(fs, { device: 'CPU' }).reshape([8, 1]);
    const k = kernelOf(f.gt(0).where(x, x.neg()));
    const { out, source } = run(k, [{ op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST }], [fs, xs]);
    expect(source).toMatch(/tg_float4 alu\d+ = \(alu\d+\?val\d+:alu\d+\);/);
    expect(source).not.toMatch(/\[3\]/);
    expect(out).toEqual(Array.from(xs, (v, i) => (fs[Math.floor(i / 8)]! > 0 ? v : -v)));
    expect(new Set(fs.map(Math.sign))).toEqual(new Set([-1, 0, 1]));
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

describe('vector functions (C)', () => {
  const lanes: Opt[] = [{ op: 'SPLIT', axis: 0, factor: 16, target: AxisType.UPCAST }];
  const input = (values: number[]) => new Tensor(Float32Array.from(values), { device: 'CPU' });
  const bits = (out: number[]) => Array.from(new Uint32Array(Float32Array.from(out).buffer));

  it('exp2 of float vectors: the scalar function bit for bit, within 1 ulp, infinities and NaN kept', () => {
    const specials = [0, -0, 1, -1, 0.5, -0.5, 127.99, 128, 129, 1e9, Infinity, -126, -126.5, -149, -149.5];
    const more = [-150, -151, -1e9, -Infinity, Number.NaN, 1e-30, -1e-30];
    const sweep = Array.from({ length: 4096 - 22 }, (_, i) => -160 + (i * 300) / 4074 + Math.sin(i) * 1e-3);
    const values = Float32Array.from([...specials, ...more, ...sweep]);
    const k = kernelOf(input([...values]).exp2());
    const vector = run(k, lanes, [values]);
    expect(vector.source).toContain('tg_exp2_tg_float16(');
    expect(bits(vector.out)).toEqual(bits(run(k, [], [values]).out));
    const f32 = new Float32Array(1);
    const ulp = (x: number) => {
      f32[0] = Math.abs(x);
      const u = new Uint32Array(f32.buffer);
      u[0]! += 1;
      return f32[0]! - Math.abs(x) || 2 ** -149;
    };
    vector.out.forEach((y, i) => {
      const want = Math.fround(2 ** values[i]!);
      if (!Number.isFinite(want)) expect(y).toBe(want);
      else expect(Math.abs(y - 2 ** values[i]!)).toBeLessThanOrEqual(ulp(want));
    });
  });

  it('max of vectors: NaN in either operand gives NaN, as the scalar MAX', () => {
    const x = [Number.NaN, 1, -Infinity, 2, 0, -0, 3, Number.NaN, 5, -5, Infinity, 7, 8, 9, 10, 11];
    const y = [1, Number.NaN, -Infinity, 1, -0, 0, 4, Number.NaN, -5, 5, 1, 6, 9, 8, 11, 10];
    const k = kernelOf(input(x).maximum(input(y)));
    const data = [Float32Array.from(x), Float32Array.from(y)];
    const vector = run(k, lanes, data);
    expect(vector.source).toMatch(/tg_max_tg_float16\(val\d+, val\d+\)/);
    expect(bits(vector.out)).toEqual(bits(run(k, [], data).out));
    expect(
      vector.out.map((v, i) => Number.isNaN(v) === (Number.isNaN(x[i]!) || Number.isNaN(y[i]!))),
    ).toEqual(x.map(() => true));
  });
});
