// Hand-coded opts: THREAD splits of big kernels, register tiles of matmul, vector lanes of split reductions.
// The opts are read from lowerKernel, which runs handCodedOpts on the kernel after index simplification.
import { describe, expect, it } from 'vitest';
import { lowerKernel, optimizable } from '../../src/codegen/index.ts';
import { capBody, expandedOps, MAX_BODY_OPS } from '../../src/codegen/opt/body-cap.ts';
import { applyOpts, CPU_TARGET, type Opt, type Target } from '../../src/codegen/opt/opts.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const { THREAD, UPCAST, UNROLL } = AxisType;
/** An AVX2 machine by default: 16 vector registers of 32 bytes. */
const target = (over: Partial<Target> = {}): Target => ({
  ...CPU_TARGET,
  vectors: true,
  threads: 2,
  registers: 128,
  vectorBytes: 32,
  ...over,
});
/** 32 vector registers of 64 bytes. */
const AVX512 = { registers: 512, vectorBytes: 64 };

/** A realized float32 tensor of this shape on the CPU (zeros: only the kernels' structure matters here). */
const tensor = (shape: number[]) =>
  new Tensor(new Float32Array(shape.reduce((a, d) => a * d, 1)), { device: 'CPU' }).reshape(shape);

const hasReduce = (ast: UOp) => ast.toposort().some((u) => u.op === Ops.REDUCE);
const optsOf = (ast: UOp, t: Target): readonly Opt[] => lowerKernel(ast, { target: t }).opts;
const split = (axis: number, factor: number, type: AxisType, top?: boolean): Opt =>
  top ? { op: 'SPLIT', axis, factor, target: type, top } : { op: 'SPLIT', axis, factor, target: type };

describe('matmul 256x256x256 on the CPU', () => {
  const { kernels } = scheduleOf([tensor([256, 256]).matmul(tensor([256, 256]))]);
  const product = kernels.find((k) => hasReduce(k.ast))!.ast;
  const pack = kernels.find((k) => !hasReduce(k.ast))!.ast;

  it('is a panel copy and a product', () => {
    expect(kernels).toHaveLength(2);
    expect(kernels.filter((k) => hasReduce(k.ast))).toHaveLength(1);
  });

  it('splits rows over 2 threads, then tiles two vectors of columns by rows: AVX2 4 x 2 x 8, AVX-512 8 x 2 x 16', () => {
    // ranges after the THREAD split: (2 threads, 128 rows, 256 columns, 256 reduce)
    expect(optsOf(product, target())).toEqual([
      split(0, 2, THREAD, true),
      split(2, 8, UPCAST),
      split(2, 2, UPCAST),
      split(1, 4, UPCAST),
    ]);
    expect(optsOf(product, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(2, 16, UPCAST),
      split(2, 2, UPCAST),
      split(1, 8, UPCAST),
    ]);
  });

  it('takes lanes from the vector width and rows from half the registers, two vectors where 4 rows of them fit', () => {
    const tile = (registers: number, vectorBytes: number) =>
      optsOf(product, target({ registers, vectorBytes })).slice(1);
    expect(tile(64, 16)).toEqual([split(2, 4, UPCAST), split(2, 2, UPCAST), split(1, 4, UPCAST)]); // 32 / 8
    expect(tile(1024, 64)).toEqual([split(2, 16, UPCAST), split(2, 2, UPCAST), split(1, 16, UPCAST)]); // 512 / 32
    // no wider than a register: 512 values of 8-lane registers give 16 rows of 2 x 8, not 16-lane vectors
    expect(tile(512, 32)).toEqual([split(2, 8, UPCAST), split(2, 2, UPCAST), split(1, 16, UPCAST)]);
    // 16 values: room for the lanes, not for a second row
    expect(tile(32, 64)).toEqual([split(2, 16, UPCAST)]);
  });

  it('with one thread: no THREAD split, the same tile on the unsplit axes', () => {
    expect(optsOf(product, target({ threads: 1 }))).toEqual([
      split(1, 8, UPCAST),
      split(1, 2, UPCAST),
      split(0, 4, UPCAST),
    ]);
    expect(optsOf(product, target({ threads: 1, ...AVX512 }))).toEqual([
      split(1, 16, UPCAST),
      split(1, 2, UPCAST),
      split(0, 8, UPCAST),
    ]);
  });

  it('splits by the largest thread count that divides the axis', () => {
    expect(optsOf(product, target({ threads: 8 }))[0]).toEqual(split(0, 8, THREAD, true));
    expect(optsOf(product, target({ threads: 3 }))[0]).toEqual(split(0, 2, THREAD, true));
  });

  it('without vector types: threads only, no tile', () => {
    const opts = optsOf(product, target({ vectors: false }));
    expect(opts).toContainEqual(split(0, 2, THREAD, true));
    expect(opts.filter((o) => o.op === 'SPLIT' && o.target === UPCAST)).toEqual([]);
  });

  it('NOOPT=1: no opts at all', () => {
    Context.with({ NOOPT: 1 }, () => {
      expect(optsOf(product, target())).toEqual([]);
      expect(optsOf(pack, target())).toEqual([]);
    });
  });

  it('the panel copy gets the THREAD split and its 16 columns as vector lanes, no tile (it multiplies nothing)', () => {
    // (2 threads, 8 panels, 256 rows, 16 columns): contiguous on both sides along the columns
    expect(optsOf(pack, target(AVX512))).toEqual([split(0, 2, THREAD, true), split(3, 16, UPCAST)]);
    expect(optsOf(pack, target())).toEqual([split(0, 2, THREAD, true), split(3, 8, UPCAST)]);
  });
});

describe('loop order of matmul tiles', () => {
  const product = (m: number, k: number, n: number) =>
    scheduleOf([tensor([m, k]).matmul(tensor([k, n]))]).kernels.find((x) => hasReduce(x.ast))!.ast;
  const swaps = (ast: UOp, t: Target) => optsOf(ast, t).filter((o) => o.op === 'SWAP');

  it('puts the row blocks inside the column blocks when the right operand outgrows the cache', () => {
    // 1024x1024x1024: (2 threads, 64 row blocks, 8 rows, 32 column blocks, 2 x 16 columns | 1024); the
    // 8x32 tile is wider than tall, so the column block of the right operand stays while every row block uses it
    expect(swaps(product(1024, 1024, 1024), target(AVX512))).toEqual([{ op: 'SWAP', axis: 1, other: 3 }]);
    expect(swaps(product(1024, 1024, 1024), target())).toEqual([{ op: 'SWAP', axis: 1, other: 3 }]);
  });

  it('keeps the rows outside when the right operand fits in cache (all of it is reused from there)', () => {
    expect(swaps(product(4096, 576, 64), target(AVX512))).toEqual([]); // a conv's im2col size
    expect(swaps(product(256, 256, 256), target(AVX512))).toEqual([]);
  });

  it('computes what the unoptimized kernel computes', () => {
    const a = new Tensor(
      Float32Array.from({ length: 64 * 512 }, (_, i) => (i % 7) - 3),
      { device: 'CPU' },
    );
    const b = new Tensor(
      Float32Array.from({ length: 512 * 1024 }, (_, i) => (i % 5) - 2),
      { device: 'CPU' },
    );
    const run = () =>
      a
        .reshape([64, 512])
        .matmul(b.reshape([512, 1024]))
        .tolist();
    expect(run()).toEqual(Context.with({ NOOPT: 1 }, run));
  });
});

describe('split sum of 2^20 floats', () => {
  const { kernels } = scheduleOf([tensor([1 << 20]).sum()]);

  it('is two kernels: 256 parts x 16 lanes, then their total', () => {
    expect(kernels).toHaveLength(2);
    expect(kernels[0]!.bufs[0]!.shape).toEqual([256, 1, 16]);
  });

  it('the first step gets THREAD and vector lanes over the contiguous partial sums', () => {
    // ranges (256 parts, 16 lanes, 256 reduce) -> (2, 128, 16, 256) -> lanes UPCAST, reduce unrolled by 4
    expect(optsOf(kernels[0]!.ast, target())).toEqual([
      split(0, 2, THREAD, true),
      split(2, 8, UPCAST),
      split(4, 4, UNROLL),
    ]);
    expect(optsOf(kernels[0]!.ast, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(2, 16, UPCAST),
      split(4, 4, UNROLL),
    ]);
  });

  it('the second step (4096 iterations) is too small for threads', () => {
    const opts = optsOf(kernels[1]!.ast, target({ threads: 8 }));
    expect(opts.some((o) => o.op === 'SPLIT' && o.target === THREAD)).toBe(false);
  });
});

describe('kernels under 2^16 iterations run on one thread', () => {
  const threaded = (t: Tensor) =>
    scheduleOf([t]).kernels.map((k) =>
      optsOf(k.ast, target({ threads: 8 })).some((o) => o.op === 'SPLIT' && o.target === THREAD),
    );

  it('elementwise: 128x128 no, 256x256 yes', () => {
    expect(threaded(tensor([128, 128]).add(1))).toEqual([false]);
    expect(threaded(tensor([256, 256]).add(1))).toEqual([true]);
  });

  it('counts reduce iterations too: a 64^3 matmul (one kernel, 2^18 steps) is threaded, 16^3 is not', () => {
    expect(threaded(tensor([64, 64]).matmul(tensor([64, 64])))).toEqual([true]);
    expect(threaded(tensor([16, 16]).matmul(tensor([16, 16])))).toEqual([false]);
  });
});

describe('a weight gradient x^T @ dy on the CPU: both operands read contiguously along their own output axis', () => {
  // (x 256 x 64)^T @ (dy 256 x 20): ranges (64, 20 | 256); x reads the 64 columns contiguously, dy the 20
  const xs = Float32Array.from({ length: 256 * 64 }, (_, i) => (i % 7) - 3);
  const dys = Float32Array.from({ length: 256 * 20 }, (_, i) => (i % 5) - 2);
  const grad = () =>
    new Tensor(xs, { device: 'CPU' })
      .reshape([256, 64])
      .transpose()
      .matmul(new Tensor(dys, { device: 'CPU' }).reshape([256, 20]));
  const ast = scheduleOf([grad()]).kernels.find((k) => hasReduce(k.ast))!.ast;

  it("takes the lanes from the axis they fill widest (x's 64 columns, 16 lanes, not dy's 20 in 4), moved innermost", () => {
    expect(optsOf(ast, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      { op: 'SWAP', axis: 1, other: 2 }, // the lane axis innermost, so that the rows' UPCAST is not the lanes
      split(2, 16, UPCAST),
      split(2, 2, UPCAST),
      split(1, 4, UPCAST), // 4 of dy's columns as rows
    ]);
  });

  it('computes what the unoptimized kernel computes', () => {
    expect(grad().tolist()).toEqual(Context.with({ NOOPT: 1 }, () => grad().tolist()));
  });
});

describe("a 5x5 conv's weight gradient at batch 64 (32 -> 64 channels, 28 x 28, padding 2)", () => {
  // random images and gradient: the product then reads stored copies of them, as in training
  const x = Tensor.randn([64, 32, 28, 28]).realize().requiresGrad_();
  const w = Tensor.randn([64, 32, 5, 5]).realize().requiresGrad_();
  x.conv2d(w, undefined, { padding: 2 }).backward(Tensor.randn([64, 64, 28, 28]).realize());
  const { kernels } = scheduleOf([x.grad!, w.grad!]);
  // the batch split 16 x 4: ranges (16, 64 out, 32 in, 5, 5 | 4, 28, 28), unoptimized
  const grad = kernels.find(
    (k) =>
      lowerKernel(k.ast, { target: target({ threads: 1, vectors: false }) }).name ===
      'r_16_64_32_5_5_4_28_28',
  )!.ast;

  it("tiles 8 input channels by 2 x 16 output channels; the batch's 4 stay a loop outside the 28 x 28", () => {
    // unrolled, the 4 images were 32 streams of rows 4 KiB apart (32 x 32 padded), which thrashed the L1
    expect(optsOf(grad, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      { op: 'SWAP', axis: 2, other: 5 },
      split(5, 16, UPCAST),
      split(5, 2, UPCAST),
      split(3, 8, UPCAST),
      { op: 'SWAP', axis: 2, other: 6 },
      { op: 'SWAP', axis: 3, other: 6 },
      { op: 'SWAP', axis: 5, other: 6 },
    ]);
  });
});

describe('conv2d 3x3, padding 1, on the CPU', () => {
  // (batch 2, 16 to 32 channels, 8x8): ranges (2, 32, 8, 8 | 16, 3, 3)
  const { kernels } = scheduleOf([
    tensor([2, 16, 8, 8]).conv2d(tensor([32, 16, 3, 3]), undefined, { padding: 1 }),
  ]);
  const conv = kernels.find((k) => hasReduce(k.ast))!.ast;

  it('tiles lanes of columns by rows of channels, unrolls the 3x3 window and pairs the rows it slides along', () => {
    // after the THREAD split of the batch: (2 threads, 1, 32 channels, 8 rows, 8 columns | 16, 3, 3); the
    // padding's wrapped addresses simplify under the load's gate, so the columns read contiguous lanes
    expect(optsOf(conv, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(7, 3, UNROLL), // kw
      split(6, 3, UNROLL), // kh
      split(4, 8, UPCAST), // columns: the lanes
      split(3, 2, UPCAST), // rows of the image: neighbours share two of the window's three input rows
      split(2, 16, UPCAST), // channels: 16 x 8 x 2 = half of 512 registers
    ]);
  });

  it('computes what the unoptimized kernel computes', () => {
    const x = new Tensor(
      Float32Array.from({ length: 2 * 16 * 8 * 8 }, (_, i) => (i % 7) - 3),
      { device: 'CPU' },
    );
    const w = new Tensor(
      Float32Array.from({ length: 32 * 16 * 9 }, (_, i) => (i % 5) - 2),
      { device: 'CPU' },
    );
    const run = () =>
      x
        .reshape([2, 16, 8, 8])
        .conv2d(w.reshape([32, 16, 3, 3]), undefined, { padding: 1 })
        .tolist();
    expect(run()).toEqual(Context.with({ NOOPT: 1 }, run));
  });
});

describe('THREAD splits of odd outer axes', () => {
  it('take the next axis when the outer one does not divide among the threads, if it repeats few regions', () => {
    const odd = scheduleOf([tensor([3, 256, 256]).add(1)]).kernels[0]!.ast;
    expect(optsOf(odd, target())[0]).toEqual(split(1, 2, THREAD, true));
    // 17 outer iterations would enter the parallel region too often
    const many = scheduleOf([tensor([17, 17, 256]).add(1)]).kernels[0]!.ast;
    expect(optsOf(many, target()).some((o) => o.op === 'SPLIT' && o.target === THREAD)).toBe(false);
  });

  it('compute the same values inside an outer loop', () => {
    const x = new Tensor(
      Float32Array.from({ length: 3 * 256 * 128 }, (_, i) => (i % 11) - 5),
      { device: 'CPU' },
    ).reshape([3, 256, 128]);
    const run = () => x.mul(x).sum(2).tolist();
    expect(run()).toEqual(Context.with({ NOOPT: 1 }, run));
  });
});

describe("a max pool's kernels on the CPU (8 x 32 x 20 x 20, windows of 2 x 2)", () => {
  const x = new Tensor(new Float32Array(8 * 32 * 20 * 20), { device: 'CPU', requiresGrad: true }).reshape([
    8, 32, 20, 20,
  ]);
  const pool = x.maxPool2d();
  const [max, count, gradient] = scheduleOf([Tensor.gradient(pool.sum(), [x])[0]!]).kernels.map((k) => k.ast);

  it('the max and the count of maxima: windows unrolled, two outputs at a time along the pooled columns', () => {
    // ranges after the THREAD split: (2 threads, 4 images, 32 channels, 10 rows, 10 columns, 2, 2 window)
    const want = [split(0, 2, THREAD, true), split(6, 2, UNROLL), split(5, 2, UNROLL), split(4, 2, UPCAST)];
    expect(optsOf(max!, target())).toEqual(want);
    expect(optsOf(count!, target())).toEqual(want);
    expect(optsOf(scheduleOf([pool]).kernels[0]!.ast, target())).toEqual(want);
  });

  it('the gradient, elementwise with compares and selects: four copies of its columns', () => {
    expect(hasReduce(gradient!)).toBe(false);
    expect(optsOf(gradient!, target())).toEqual([split(0, 2, THREAD, true), split(4, 4, UPCAST)]);
  });
});

describe('register tiles of expensive bodies', () => {
  // sum over k of exp2(a[i,k] * b[k,j]) where k <= j: the causal mask varies along the column lanes, so each
  // lane's product and exp2 are scalar code of their own (as an attention backward's recomputed scores)
  const masked = (a: Tensor, b: Tensor) =>
    Tensor.ones([128, 128], { dtype: 'bool' })
      .tril()
      .where(
        a
          .reshape([128, 128, 1])
          .mul(b.reshape([1, 128, 128]))
          .exp2(),
        0,
      )
      .sum(1);
  const ast = scheduleOf([masked(tensor([128, 128]), tensor([128, 128]))]).kernels.find((x) =>
    hasReduce(x.ast),
  )!.ast;
  const seen = optimizable(ast, { target: target(AVX512) });
  const ops = (opts: readonly Opt[], t: Target) => expandedOps(applyOpts(seen, opts, t), t);

  it('counts a masked exp2 body per lane and a plain matmul per vector', () => {
    const matmul = scheduleOf([tensor([256, 256]).matmul(tensor([256, 256]))]).kernels.find((k) =>
      hasReduce(k.ast),
    )!.ast;
    const tiled = applyOpts(optimizable(matmul), optsOf(matmul, target(AVX512)), target(AVX512));
    // 8 x 2 x 16: 8 x 2 vector products and sums, 8 row loads, 2 vector loads
    expect(expandedOps(tiled, target(AVX512))).toBe(8 * 2 * 2 + 8 + 2);
    // the uncapped tile of 8 rows x 2 x 16 lanes: 256 copies of exp2 at least
    const full = [split(0, 2, THREAD, true), split(2, 16, UPCAST), split(2, 2, UPCAST), split(1, 8, UPCAST)];
    expect(ops(full, target(AVX512))).toBeGreaterThan(256 * 20);
  });

  it('shrinks the tile until the expanded body fits MAX_BODY_OPS, keeping a tile', () => {
    const opts = optsOf(ast, target(AVX512));
    expect(ops(opts, target(AVX512))).toBeLessThanOrEqual(MAX_BODY_OPS);
    expect(opts.some((o) => o.op === 'SPLIT' && o.target === UPCAST)).toBe(true);
  });

  it('halves the largest factor first and leaves a body that fits as it is', () => {
    const full = [split(0, 2, THREAD, true), split(2, 16, UPCAST), split(2, 2, UPCAST), split(1, 8, UPCAST)];
    expect(capBody(seen, full, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(2, 8, UPCAST),
      split(2, 2, UPCAST),
      split(1, 4, UPCAST),
    ]);
    const small = [split(0, 2, THREAD, true), split(2, 4, UPCAST), split(1, 2, UPCAST)];
    expect(capBody(seen, small, target(AVX512))).toEqual(small);
  });

  it('computes what the unoptimized kernel computes', () => {
    const a = new Tensor(
      Float32Array.from({ length: 128 * 128 }, (_, i) => ((i % 7) - 3) / 64),
      { device: 'CPU' },
    );
    const b = new Tensor(
      Float32Array.from({ length: 128 * 128 }, (_, i) => ((i % 5) - 2) / 64),
      { device: 'CPU' },
    );
    const run = () => masked(a.reshape([128, 128]), b.reshape([128, 128])).tolist() as number[][];
    const want = Context.with({ NOOPT: 1 }, run).flat();
    const error = run()
      .flat()
      .map((x, i) => Math.abs(x - want[i]!) / Math.max(1, Math.abs(want[i]!)));
    expect(Math.max(...error)).toBeLessThan(1e-5);
  });
});

describe('the kernels of a backward pass (64 x 512 through two 512 x 512 layers)', () => {
  // forward relu(x @ w1 + b1) @ w2, backward of a squared loss: every product has an operand computed in it
  const layer = (out: number) => ({
    w: tensor([512, out]).requiresGrad_(),
    b: tensor([out]).requiresGrad_(),
  });
  const [l1, l2] = [layer(512), layer(512)];
  const x = tensor([64, 512]);
  const h = x.matmul(l1.w).add(l1.b).relu();
  h.matmul(l2.w).add(l2.b).square().mean().backward();
  const { kernels } = scheduleOf([l1.w.grad!, l2.w.grad!, l1.b.grad!, l2.b.grad!]);
  const products = kernels.filter((k) => hasReduce(k.ast));
  const named = (name: string) =>
    products.filter((k) => lowerKernel(k.ast, { target: target(AVX512) }).name === name);

  it('the input gradient reads the weight panels along the sum: 16-lane sums, 8 copies of the panel by 2 of dy', () => {
    // dy (computed through the relu's mask) @ panels^T: ranges (2 threads, 32 rows, 512 columns | 32, 16)
    const [dx] = named('r_2_16_2_64_8_32_1_16');
    expect(dx).toBeDefined();
    expect(optsOf(dx!.ast, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(4, 16, UNROLL), // the panel's 16 columns, contiguous in both operands: the lanes
      split(2, 8, UPCAST), // columns, which only the panel reads: 8 sums share each vector of dy
      split(1, 2, UPCAST), // rows, which only dy reads: each vector of the panel serves 2
    ]);
  });

  it('where the rows are computed (a relu, its mask), tiles 4 vectors of columns by 4 rows, not 2 by 8', () => {
    const opts = (name: string) => optsOf(named(name)[0]!.ast, target(AVX512));
    // the second layer's forward, rows relu(x @ w1 + b1): the lanes' axis has one vector, the panels give 4
    expect(opts('r_2_8_4_1_4_8_16_512').slice(0, 4)).toEqual([
      split(0, 2, THREAD, true),
      split(3, 16, UPCAST),
      split(2, 4, UPCAST),
      split(1, 4, UPCAST),
    ]);
    // the weight gradients: rows of the loaded x get 8 x 2 x 16, rows of the masked gradient 4 x 4 x 16
    expect(opts('r_2_32_8_16_2_16_64')).toEqual([
      split(0, 2, THREAD, true),
      split(2, 16, UPCAST),
      split(2, 2, UPCAST),
      split(1, 8, UPCAST),
    ]);
    expect(opts('r_2_64_4_8_4_16_64')).toEqual([
      split(0, 2, THREAD, true),
      split(2, 16, UPCAST),
      split(2, 4, UPCAST),
      split(1, 4, UPCAST),
    ]);
  });

  it('computes what the unoptimized kernels compute (32 x 256 through 256 x 256: the same rules apply)', () => {
    const v = (shape: number[], k: number) =>
      new Tensor(
        Float32Array.from({ length: shape.reduce((a, d) => a * d, 1) }, (_, i) => ((i * k) % 7) / 7 - 0.4),
        { device: 'CPU' },
      ).reshape(shape);
    const run = () => {
      const w1 = v([256, 256], 3).requiresGrad_();
      const w2 = v([256, 256], 5).requiresGrad_();
      v([32, 256], 2).matmul(w1).relu().matmul(w2).square().mean().backward();
      return [w1.grad!.sum(0).tolist(), w2.grad!.sum(1).tolist()] as number[][];
    };
    const got = run();
    const want = Context.with({ NOOPT: 1 }, run);
    // sums in another order: equal to float32 rounding
    const worst = Math.max(
      ...got.flatMap((g, i) => g.map((x, j) => Math.abs(x - want[i]![j]!) / Math.abs(want[i]![j]! || 1))),
    );
    expect(worst).toBeLessThan(1e-5);
  });
});

describe('a product no vector rule fits: conv 5x5 of a relu onto 6 x 6 (rows too short for lanes)', () => {
  // ranges (4 batch, 8 channels out, 6, 6 | 8 channels in, 5, 5); the input's operand is computed (a relu)
  const conv = (x: Tensor, w: Tensor) => x.relu().conv2d(w);
  const { kernels } = scheduleOf([conv(tensor([4, 8, 10, 10]), tensor([8, 8, 5, 5]))]);
  const product = kernels.find((k) => hasReduce(k.ast))!.ast;

  it('gets scalar copies: 8 of the loaded weights per computed input value, 2 of the input', () => {
    // after the THREAD split of the batch: (2 threads, 2 batch, 8 out, 6, 6 | 8, 5, 5)
    expect(optsOf(product, target(AVX512))).toEqual([
      split(0, 2, THREAD, true),
      split(2, 8, UPCAST), // channels out: only the weights read them
      split(1, 2, UPCAST), // batch: only the relu'd input reads it
    ]);
  });

  it('computes what the unoptimized kernel computes', () => {
    const v = (shape: number[], k: number) =>
      new Tensor(
        Float32Array.from({ length: shape.reduce((a, d) => a * d, 1) }, (_, i) => ((i * k) % 9) - 4),
        { device: 'CPU' },
      ).reshape(shape);
    const run = () => conv(v([4, 8, 10, 10], 2), v([8, 8, 5, 5], 5)).tolist();
    expect(run()).toEqual(Context.with({ NOOPT: 1 }, run));
  });
});

describe("a conv's weight gradient through a relu (images loaded, the gradient computed through its mask)", () => {
  // ranges (8 out, 2 in, 3, 3 | 4 batch, 8, 8): the 8 columns of the output rows are the lanes of the sum
  const v = (shape: number[], k: number) =>
    new Tensor(
      Float32Array.from({ length: shape.reduce((a, d) => a * d, 1) }, (_, i) => ((i * k) % 9) - 4),
      { device: 'CPU' },
    ).reshape(shape);
  const weightGradient = () => {
    const w = v([8, 2, 3, 3], 5).requiresGrad_();
    v([4, 2, 10, 10], 2)
      .conv2d(w)
      .relu()
      .mul(v([4, 8, 8, 8], 7))
      .sum()
      .backward();
    return w.grad!;
  };
  const { kernels } = scheduleOf([weightGradient()]);
  const product = kernels.filter((k) => hasReduce(k.ast)).at(-1)!.ast;

  it('copies the images along the window columns and rows while half the registers last, by 2 channels out', () => {
    expect(lowerKernel(product, { target: target(AVX512) }).name).toBe('r_4_2_2_1_3_1_3_4_8_1_8');
    // 32 sums of 8 lanes: 16 for the images' copies, the 3 columns and 3 rows (3 <= 16 / 3; 2 channels in do not
    // fit), by 2 of the gradient's (channels out); on AVX2 8 sums: the 3 columns by 2 channels out
    expect(optsOf(product, target(AVX512))).toEqual([
      split(6, 8, UNROLL),
      split(3, 3, UPCAST),
      split(2, 3, UPCAST),
      split(0, 2, UPCAST),
    ]);
    expect(optsOf(product, target())).toEqual([
      split(6, 8, UNROLL),
      split(3, 3, UPCAST),
      split(0, 2, UPCAST),
    ]);
  });

  it('computes what the unoptimized kernel computes', () => {
    const run = () => weightGradient().tolist();
    expect(run()).toEqual(Context.with({ NOOPT: 1 }, run));
  });
});

describe('elementwise kernels on a GPU with float4 (2^22 floats)', () => {
  const gpu: Target = {
    ...CPU_TARGET,
    threads: 1,
    vectors: true,
    vectorBytes: 16,
    grid: { maxThreads: 1024, localBytes: 48 * 1024 },
  };
  const { LOCAL } = AxisType;
  const x = Tensor.empty([1 << 22], { device: 'SIMT' });
  const y = Tensor.empty([1 << 22], { device: 'SIMT' });
  const opts = (t: Tensor) => optsOf(scheduleOf([t]).kernels[0]!.ast, gpu);

  it('give a thread one float4 of x*y+1 and no register tile (one vector a thread ran fastest)', () => {
    expect(opts(x.mul(y).add(1))).toEqual([split(0, 4, UPCAST), split(0, 32, LOCAL), split(0, 4, LOCAL)]);
  });

  it('give a thread 4 scalars of a kernel without lanes (a sqrt): 16 bytes a thread either way', () => {
    expect(opts(x.sqrt())).toEqual([split(0, 32, LOCAL), split(0, 4, LOCAL), split(0, 4, UPCAST)]);
  });
});
