// Tensor cores: the TC opt turns a matmul's or conv's sum of products into WMMA over a warp, which the SIMT
// emulator runs with NVIDIA's element layouts; results are checked against float64 within what each tensor core
// computes (float16/bfloat16 inputs with exact products, tf32 inputs rounded to 10 bits of mantissa).
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { outputsToGlobal } from '../../src/codegen/grid.ts';
import { lowerKernel } from '../../src/codegen/index.ts';
import { kernelRanges } from '../../src/codegen/opt/axes.ts';
import { applyOpts, type Opt, printOpts } from '../../src/codegen/opt/opts.ts';
import { allocStorage, type DType, dtypes, readElement, writeElement } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context, prod } from '../../src/helpers.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import { graphRewrite } from '../../src/uop/pattern.ts';
import { symbolic } from '../../src/uop/symbolic.ts';
import type { UOp } from '../../src/uop/uop.ts';

const simt = Device.get('SIMT');
const target = targetOf(simt);
const tcIndex = (name: string) => target.tensorCores.findIndex((c) => c.name.includes(name));

const input = (shape: number[], dtype: DType) => Tensor.rand(shape, { device: 'SIMT' }).cast(dtype).realize();

/** The one kernel of t. */
function kernelOf(t: Tensor): { ast: UOp; bufs: UOp[] } {
  const { kernels } = scheduleOf([t]);
  expect(kernels).toHaveLength(1);
  return kernels[0]!;
}

/** Inputs in [-1, 1) as the buffers' dtypes hold them, seeded; buffer 0 (the output) zero. */
function storages(bufs: readonly UOp[], seed: number) {
  return bufs.map((b, slot) => {
    const n = prod(b.shape as number[]);
    const s = allocStorage(b.dtype, n);
    for (let i = 0; i < n; i++)
      writeElement(b.dtype, s, i, slot === 0 ? 0 : Math.sin(i * 1.37 + slot * seed));
    return s;
  });
}

/** Runs the kernel lowered with opts (the heuristics' when undefined) on SIMT; its opts, program and output. */
function runSimt(k: { ast: UOp; bufs: UOp[] }, opts?: readonly Opt[], seed = 1) {
  const lowered = lowerKernel(k.ast, { target, opts });
  const data = storages(k.bufs, seed);
  const bufs = k.bufs.map((b, i) => new DeviceBuffer(simt, data[i]!.length, b.dtype).copyin(data[i]!));
  simt.compile(lowered.name, renderSIMT(lowered.name, lowered.linear)).run(bufs);
  const out = bufs[0]!.copyout();
  const values = (s: ReturnType<typeof allocStorage>, d: DType) =>
    Array.from({ length: s.length }, (_, i) => Number(readElement(d, s, i)));
  return {
    opts: lowered.opts,
    linear: lowered.linear,
    got: values(out, k.bufs[0]!.dtype),
    inputs: data.map((s, i) => values(s, k.bufs[i]!.dtype)),
  };
}

/** C = A (M x K) B (K x N) in float64, and the sums of |products| (the scale of the rounding errors). */
function reference(a: number[], b: number[], M: number, K: number, N: number) {
  const c = new Array<number>(M * N).fill(0);
  const scale = new Array<number>(M * N).fill(0);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++)
      for (let k = 0; k < K; k++) {
        c[i * N + j]! += a[i * K + k]! * b[k * N + j]!;
        scale[i * N + j]! += Math.abs(a[i * K + k]! * b[k * N + j]!);
      }
  return { c, scale };
}

/** Rounding allowed per element: the output dtype's (relative to the value) and the tensor core's (to the sums). */
const TOLERANCE = new Map([
  [dtypes.float16, { out: 2 ** -10, sum: 2 ** -20 }],
  [dtypes.bfloat16, { out: 2 ** -7, sum: 2 ** -20 }],
  // tf32 inputs: two roundings of 2^-11 per product
  [dtypes.float32, { out: 2 ** -23, sum: 2 ** -10 }],
]);

/** The worst error of a matmul's output over its allowance (at most 1 passes). */
function worst(got: number[], a: number[], b: number[], M: number, K: number, N: number, d: DType) {
  const { c, scale } = reference(a, b, M, K, N);
  const tol = TOLERANCE.get(d)!;
  return Math.max(
    ...got.map((g, i) => Math.abs(g - c[i]!) / (tol.out * Math.abs(c[i]!) + tol.sum * scale[i]! + 1e-30)),
  );
}

const wmmas = (linear: UOp) => linear.src.filter((u) => u.op === Ops.WMMA).map((u) => u.argOf(Ops.WMMA).name);

describe('tensor cores on SIMT', () => {
  for (const [d, name] of [
    [dtypes.float16, 'float16'],
    [dtypes.bfloat16, 'bfloat16'],
    [dtypes.float32, 'tf32'],
  ] as const) {
    it(`a ${name} matmul takes TC first and matches float64 within the tensor core's precision`, () => {
      const [M, K, N] = [32, 48, 16];
      const k = kernelOf(input([M, K], d).matmul(input([K, N], d)));
      const { opts, linear, got, inputs } = Context.with({ ALLOW_TF32: 1 }, () => runSimt(k));
      expect(opts[0]).toEqual({ op: 'TC', axis: 2, tc: tcIndex(name), opt: 0, mode: 1 });
      expect(wmmas(linear)).toEqual([target.tensorCores[tcIndex(name)]!.name]);
      expect(worst(got, inputs[1]!, inputs[2]!, M, K, N, d)).toBeLessThanOrEqual(1);
    });
  }

  it('gives each lane 2 x 2 output tiles after TC where the tile axes have 4 or more tiles', () => {
    const [M, K, N] = [64, 32, 32];
    const k = kernelOf(input([M, K], dtypes.float16).matmul(input([K, N], dtypes.float16)));
    const { opts, linear, got, inputs } = runSimt(k);
    expect(opts.slice(0, 3)).toEqual([
      { op: 'TC', axis: 2, tc: 0, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.UPCAST },
    ]);
    expect(wmmas(linear)).toHaveLength(4);
    expect(worst(got, inputs[1]!, inputs[2]!, M, K, N, dtypes.float16)).toBeLessThanOrEqual(1);
  });

  it("counts a WMMA's multiplies and adds in the kernel's flops (DEBUG=2's GFLOP/s)", () => {
    const [M, K, N] = [64, 32, 32];
    const k = kernelOf(input([M, K], dtypes.float16).matmul(input([K, N], dtypes.float16)));
    const { linear, flops } = lowerKernel(k.ast, { target });
    expect(wmmas(linear).length).toBeGreaterThan(0);
    // the products and sums, beside which the output's casts are a few percent
    expect(flops).toBeGreaterThanOrEqual(2 * M * K * N);
    expect(flops).toBeLessThan(2.1 * M * K * N);
  });

  it("reads the A fragment's neighbouring pairs (columns c, c + 1 of a row) as one half2 load each, stores C's so", () => {
    const k = kernelOf(input([32, 32], dtypes.float16).matmul(input([32, 16], dtypes.float16)));
    const { linear, got, inputs } = runSimt(k, [{ op: 'TC', axis: 2, tc: 0, opt: 0, mode: 1 }]);
    const loads = linear.src.filter((u) => u.op === Ops.LOAD);
    // A (row-major, K contiguous): 4 pairs a fragment; B (K rows apart): 4 scalars
    expect(loads.filter((u) => u.lanes === 2)).toHaveLength(4);
    expect(loads.filter((u) => u.lanes === 1 && u.dtype === dtypes.float16)).toHaveLength(4);
    // and each lane's result pairs (c0 c1, c2 c3: neighbouring columns) store as half2
    const stores = linear.src.filter((u) => u.op === Ops.STORE && u.src[1]!.dtype === dtypes.float16);
    expect(stores.map((u) => u.src[1]!.lanes)).toEqual([2, 2]);
    expect(worst(got, inputs[1]!, inputs[2]!, 32, 32, 16, dtypes.float16)).toBeLessThanOrEqual(1);
  });

  it('reads float32 as tf32: the result differs from float32 arithmetic by the rounded inputs', () => {
    const k = kernelOf(input([16, 8], dtypes.float32).matmul(input([8, 8], dtypes.float32)));
    const tc = runSimt(k, [{ op: 'TC', axis: 2, tc: tcIndex('tf32'), opt: 0, mode: 1 }]).got;
    const plain = runSimt(k, []).got;
    const diff = Math.max(...tc.map((v, i) => Math.abs(v - plain[i]!)));
    expect(diff).toBeGreaterThan(1e-6);
    expect(diff).toBeLessThan(1e-2);
  });

  it('shows TC and the WARP axis (bright cyan) at DEBUG=3 for a float16 matmul realized on SIMT', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const t = input([32, 16], dtypes.float16).matmul(input([16, 16], dtypes.float16));
      Context.with({ DEBUG: 3 }, () => t.realize());
      const lines = log.mock.calls.map((c) => String(c[0]));
      const line = lines.find((l) => l.includes('TC('));
      expect(line).toMatch(/TC\(2,0,0,1\)/);
      expect(line).toContain('\x1b[96m32\x1b[0m');
    } finally {
      log.mockRestore();
    }
  });

  it('TC=0 turns it off, and float32 takes tf32 only with ALLOW_TF32=1', () => {
    const half = kernelOf(input([16, 16], dtypes.float16).matmul(input([16, 8], dtypes.float16)));
    const float = kernelOf(input([16, 16], dtypes.float32).matmul(input([16, 8], dtypes.float32)));
    const first = (k: { ast: UOp }) => lowerKernel(k.ast, { target }).opts[0]?.op;
    expect(first(half)).toBe('TC');
    expect(Context.with({ TC: 0 }, () => first(half))).not.toBe('TC');
    expect(first(float)).not.toBe('TC');
    expect(Context.with({ ALLOW_TF32: 1 }, () => first(float))).toBe('TC');
  });

  it('pads odd shapes to the tile with opt 2, and refuses them with opt 0 naming the tile', () => {
    const [M, K, N] = [19, 21, 11];
    const k = kernelOf(input([M, K], dtypes.float16).matmul(input([K, N], dtypes.float16)));
    const tc = (opt: number): Opt => ({ op: 'TC', axis: 2, tc: -1, opt, mode: 1 });
    expect(() => lowerKernel(k.ast, { target, opts: [tc(0)] })).toThrow(
      "opt TC(2,-1,0,1) is illegal: axes M, N, K of sizes 19, 11, 21 are not multiples of WMMA_16_8_16_float16_float32's tile 16, 8, 16 (opt 2 pads them)",
    );
    const { got, inputs } = runSimt(k, [tc(2)]);
    expect(worst(got, inputs[1]!, inputs[2]!, M, K, N, dtypes.float16)).toBeLessThanOrEqual(1);
    expect(Context.with({ TC_OPT: 2 }, () => lowerKernel(k.ast, { target }).opts[0]?.op)).toBe('TC');
  });

  it('refuses TC with a reason: not first, no tensor cores, not a product, dtypes no tensor core takes', () => {
    const half = kernelOf(input([16, 16], dtypes.float16).matmul(input([16, 8], dtypes.float16))).ast;
    const tc: Opt = { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 };
    const illegal =
      (ast: UOp, opts: Opt[], t = target) =>
      () =>
        lowerKernel(ast, { target: t, opts });
    expect(illegal(half, [{ op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL }, tc])).toThrow(
      'TC must be the first opt',
    );
    expect(illegal(half, [tc], { ...target, tensorCores: [] })).toThrow('the target has no tensor cores');
    expect(illegal(half, [{ ...tc, axis: 0 }])).toThrow('axis 0 is not a REDUCE axis');
    expect(illegal(half, [{ ...tc, mode: 2 }])).toThrow(
      "mode 2 is not supported (1: the tensor core's instructions)",
    );
    expect(illegal(half, [{ ...tc, tc: 9 }])).toThrow(
      'tc 9 does not exist (the target has 0: WMMA_16_8_16_float16',
    );
    const sum = kernelOf(input([16, 16], dtypes.float16).cast(dtypes.float32).sum(1)).ast;
    expect(illegal(sum, [{ ...tc, axis: 1 }])).toThrow('the reduced value is not a product of two factors');
    const f64 = kernelOf(input([16, 16], dtypes.float64).matmul(input([16, 8], dtypes.float64))).ast;
    expect(illegal(f64, [tc])).toThrow('no tensor core takes float64 x float64 summed in float64');
    expect(illegal(half, [tc, { op: 'SPLIT', axis: 2, factor: 2, target: AxisType.GROUP_REDUCE }])).toThrow(
      "GROUP_REDUCE does not share a tensor core's sums",
    );
  });

  it('runs a conv through TC (channels and window summed by WMMA tiles)', () => {
    const x = input([2, 16, 4, 16], dtypes.float16);
    const w = input([8, 16, 3, 3], dtypes.float16);
    const t = x.conv2d(w, undefined, { padding: 1 });
    const { kernels } = scheduleOf([t]);
    const conv = kernels.find((k) => lowerKernel(k.ast, { target }).opts[0]?.op === 'TC');
    expect(conv).toBeDefined();
    const want = x
      .to('JS')
      .cast(dtypes.float32)
      .conv2d(w.to('JS').cast(dtypes.float32), undefined, { padding: 1 });
    const got = t.cast(dtypes.float32).dataSync() as Float32Array;
    const ref = want.dataSync() as Float32Array;
    const scale = Math.max(...Array.from(ref, Math.abs));
    const err = Math.max(...Array.from(got, (g, i) => Math.abs(g - ref[i]!)));
    expect(err).toBeLessThanOrEqual(2 ** -9 * scale);
  });

  it('computes what float64 does under TC and random other GPU opts (random small shapes)', () => {
    const shapes = fc.record({
      M: fc.constantFrom(16, 32, 48),
      K: fc.constantFrom(16, 32),
      N: fc.constantFrom(8, 16, 24),
      d: fc.constantFrom(dtypes.float16, dtypes.bfloat16),
      picks: fc.array(fc.nat(), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(shapes, ({ M, K, N, d, picks }) => {
        const k = kernelOf(input([M, K], d).matmul(input([K, N], d)));
        const opts: Opt[] = [{ op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 }];
        const start = outputsToGlobal(graphRewrite(k.ast, symbolic, { ctx: {} }));
        let ast = applyOpts(start, opts, target);
        for (const pick of picks) {
          const legal = legalAfterTc(ast);
          if (legal.length === 0) break;
          opts.push(legal[pick % legal.length]!);
          ast = applyOpts(start, opts, target);
        }
        const { got, inputs, linear } = runSimt(k, opts);
        expect(wmmas(linear).length, printOpts(opts)).toBeGreaterThan(0);
        expect(worst(got, inputs[1]!, inputs[2]!, M, K, N, d), printOpts(opts)).toBeLessThanOrEqual(1);
      }),
      { seed: 12, numRuns: 25 },
    );
  });
});

/** LOCAL, UPCAST and UNROLL splits of 2 the target allows after TC (on the tile axes it left). */
function legalAfterTc(ast: UOp): Opt[] {
  return kernelRanges(ast).flatMap((_, axis) =>
    [AxisType.LOCAL, AxisType.UPCAST, AxisType.UNROLL].flatMap((t): Opt[] => {
      const o: Opt = { op: 'SPLIT', axis, factor: 2, target: t };
      try {
        applyOpts(ast, [o], target);
        return [o];
      } catch {
        return [];
      }
    }),
  );
}
