// STAGE: a sum of products reads its operands from LOCAL tiles the workgroup copies each reduce step. On SIMT
// (which fails a kernel on a race in LOCAL memory or a BARRIER in divergent code) a staged kernel must give the
// same bits as the same kernel unstaged, for random shapes, dtypes and opts; its CUDA C compiles with nvcc.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lowerKernel, optimizable } from '../../src/codegen/index.ts';
import { applyOpts, type Opt, type Target } from '../../src/codegen/opt/opts.ts';
import { type StagePlan, stagePlan } from '../../src/codegen/opt/stage.ts';
import { allocStorage, type DType, dtypes, readElement, writeElement } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { prod } from '../../src/helpers.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import { substitute } from '../../src/uop/pattern.ts';
import { simplify } from '../../src/uop/symbolic.ts';
import { UOp } from '../../src/uop/uop.ts';
import { hasNvcc, nvccCompile } from '../renderer/nvcc.ts';

const simt = Device.get('SIMT');
const target = targetOf(simt);

function matmul(M: number, K: number, N: number, d: DType) {
  const t = Tensor.empty([M, K], { device: 'SIMT', dtype: d }).matmul(
    Tensor.empty([K, N], { device: 'SIMT', dtype: d }),
  );
  return scheduleOf([t]).kernels.at(-1)!;
}

/** The kernel lowered with opts, run on SIMT on seeded inputs: its output's values and CUDA C. */
function run(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]) {
  const lowered = lowerKernel(k.ast, { target, opts });
  const bufs = k.bufs.map((b, slot) => {
    const n = prod(b.shape as number[]);
    const s = allocStorage(b.dtype, n);
    for (let i = 0; i < n; i++) writeElement(b.dtype, s, i, slot === 0 ? 0 : Math.sin(i * 1.37 + slot));
    return new DeviceBuffer(simt, n, b.dtype).copyin(s);
  });
  simt.compile(lowered.name, renderSIMT(lowered.name, lowered.linear)).run(bufs);
  const out = bufs[0]!.copyout();
  return {
    values: Array.from({ length: out.length }, (_, i) => Number(readElement(k.bufs[0]!.dtype, out, i))),
    cuda: renderCUDA(lowered.name, lowered.linear),
    linear: lowered.linear,
  };
}

/** Scalar loads from LOCAL tiles: a fragment's elements read one at a time. */
const scalarTileReads = (linear: UOp) =>
  linear.src.filter((u) => {
    if (u.op !== Ops.LOAD || u.lanes !== 1) return false;
    const buf = u.src[0]!.src[0]!;
    return (buf.op === Ops.AFTER ? buf.src[0]! : buf).addrspace === 'LOCAL';
  }).length;

const locals = (linear: UOp) =>
  linear.src.filter((u) => u.op === Ops.PARAM && u.argOf(Ops.PARAM).addrspace === 'LOCAL').length;

/**
 * The most lanes of one 8-lane phase of a warp (threadIdx.x; other threads and loops at 0) whose 16-byte chunks
 * fall in one bank group, over the kernel's matrix loads and asynchronous copies into LOCAL tiles: 1 is
 * conflict-free.
 */
function worstPhase(linear: UOp): number {
  const specials = linear.src.filter((u) => u.op === Ops.SPECIAL || u.op === Ops.RANGE);
  const lane = specials.find((u) => u.op === Ops.SPECIAL && u.argOf(Ops.SPECIAL) === 'lidx0')!;
  const at = (x: UOp, l: number) =>
    Number(
      simplify(substitute(x, new Map(specials.map((u) => [u, UOp.index(u === lane ? l : 0)])))).constValue,
    );
  let worst = 0;
  for (const u of linear.src) {
    const matrix = u.op === Ops.LOAD ? u.argOf(Ops.LOAD)?.matrix : undefined;
    const copy = u.op === Ops.STORE && u.argOf(Ops.STORE)?.async;
    if (matrix === undefined && !copy) continue;
    const index = u.src[0]!;
    const x = index.src[1]!.op === Ops.ADD ? index.src[1]!.src[0]! : index.src[1]!;
    const bytes = (copy ? u.src[1]! : u).dtype.base.itemsize;
    // a matrix load reads a row of 16 bytes for each lane of its matrices; a copy moves 16 bytes a lane
    const lanes = matrix ? (u.lanes / 2) * 8 : 32;
    for (let phase = 0; phase < lanes; phase += 8) {
      const groups = Array.from({ length: 8 }, (_, i) => Math.floor((at(x, phase + i) * bytes) / 16) % 8);
      worst = Math.max(worst, ...groups.map((g) => groups.filter((h) => h === g).length));
    }
  }
  return worst;
}

const bufferOf = (index: UOp) => (index.src[0]!.op === Ops.AFTER ? index.src[0]!.src[0]! : index.src[0]!);

/** A value read from a REG buffer, or a lane of one. */
const fromRegister = (v: UOp): boolean =>
  v.op === Ops.INDEX
    ? fromRegister(v.src[0]!)
    : v.op === Ops.LOAD && bufferOf(v.src[0]!).argOf(Ops.PARAM).addrspace === 'REG';

/** Opts for a matmul kernel whose axes are M, N, K: a thread tile, a workgroup, an unrolled reduce step. */
const plainOpts = fc.record({
  local: fc.constantFrom(2, 4),
  upcast: fc.constantFrom(1, 2, 4),
  unroll: fc.constantFrom(1, 2, 4),
  localM: fc.constantFrom(1, 2),
});

const tcOpts = fc.record({
  upM: fc.constantFrom(1, 2),
  upN: fc.constantFrom(1, 2),
  localN: fc.constantFrom(1, 2),
  unroll: fc.constantFrom(1, 2),
});

/**
 * `first`, then the splits that are legal on this shape (a factor must divide its axis), in order; and the
 * index of the reduce axis (2: M and N come first) after the splits of axes before it.
 */
function splits(ast: UOp, first: Opt[], wanted: { axis: number; factor: number; target: AxisType }[]) {
  const opts = [...first];
  let reduce = 2;
  for (const w of wanted) {
    if (w.factor === 1) continue;
    const o: Opt = { op: 'SPLIT', ...w };
    try {
      lowerKernel(ast, { target, opts: [...opts, o] });
      opts.push(o);
      if (w.axis < 2) reduce++;
    } catch {
      // not a divisor of this shape's axis
    }
  }
  return { opts, reduce };
}

describe('STAGE on SIMT', () => {
  it('gives the unstaged bits for random float32 matmuls and opts (LOCAL, UPCAST, UNROLL)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(8, 16, 24),
        fc.constantFrom(8, 16, 32),
        fc.constantFrom(16, 32),
        plainOpts,
        (M, K, N, o) => {
          const k = matmul(M, K, N, dtypes.float32);
          // axes M, N, K: split N (innermost output) into LOCAL then UPCAST, M into LOCAL, K by UNROLL
          const { opts, reduce } = splits(
            k.ast,
            [],
            [
              { axis: 2, factor: o.unroll, target: AxisType.UNROLL },
              { axis: 1, factor: o.upcast, target: AxisType.UPCAST },
              { axis: 1, factor: o.local, target: AxisType.LOCAL },
              { axis: 0, factor: o.localM, target: AxisType.LOCAL },
            ],
          );
          const staged = run(k, [...opts, { op: 'STAGE', axis: reduce }]);
          expect(locals(staged.linear)).toBe(2);
          expect(staged.values).toEqual(run(k, opts).values);
        },
      ),
      { numRuns: 6, seed: 13 },
    );
  });

  it('stores a float32 A by columns where a thread reads rows of it, copied one iteration ahead through registers', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(16, 32),
        fc.constantFrom(8, 16, 32),
        fc.constantFrom(16, 32),
        fc.constantFrom(1, 2, 4),
        (M, K, N, unroll) => {
          const k = matmul(M, K, N, dtypes.float32);
          // a register block: 4 x 4 outputs a thread, 2 x 2 threads
          const { opts, reduce } = splits(
            k.ast,
            [],
            [
              { axis: 2, factor: unroll, target: AxisType.UNROLL },
              { axis: 1, factor: 4, target: AxisType.UPCAST },
              { axis: 1, factor: 2, target: AxisType.LOCAL },
              { axis: 0, factor: 4, target: AxisType.UPCAST },
              { axis: 0, factor: 2, target: AxisType.LOCAL },
            ],
          );
          const staged = run(k, [...opts, { op: 'STAGE', axis: reduce }]);
          expect(staged.values).toEqual(run(k, opts).values);
          // A by columns (a thread's 4 rows at one k neighbours, for one vector read), B by rows
          const plan = stagePlan(
            applyOpts(optimizable(k.ast, { target }), opts, target),
            reduce,
          ) as StagePlan;
          expect(plan.tiles.map((t) => [t.buffer.argOf(Ops.PARAM).slot, t.transposed])).toEqual([
            [1, true],
            [2, false],
          ]);
          // what the tiles get each iteration, registers loaded the iteration before
          const tileStores = staged.linear.src.filter(
            (u) => u.op === Ops.STORE && bufferOf(u.src[0]!).argOf(Ops.PARAM).addrspace === 'LOCAL',
          );
          expect(tileStores.length).toBeGreaterThan(0);
          expect(tileStores.every((u) => fromRegister(u.src[1]!))).toBe(true);
        },
      ),
      { numRuns: 8, seed: 13 },
    );
  });

  it('gives the unstaged bits for random float16 and bfloat16 tensor-core matmuls', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(dtypes.float16, dtypes.bfloat16),
        fc.constantFrom(32, 64),
        fc.constantFrom(32, 64),
        fc.constantFrom(16, 32),
        tcOpts,
        (d, M, K, N, o) => {
          const k = matmul(M, K, N, d);
          // after TC the axes are M tiles, N tiles, K tiles, the warp
          const tc: Opt = { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 };
          const { opts, reduce } = splits(
            k.ast,
            [tc],
            [
              { axis: 2, factor: o.unroll, target: AxisType.UNROLL },
              { axis: 1, factor: o.upN, target: AxisType.UPCAST },
              { axis: 1, factor: o.localN, target: AxisType.LOCAL },
              { axis: 0, factor: o.upM, target: AxisType.UPCAST },
            ],
          );
          const staged = run(k, [...opts, { op: 'STAGE', axis: reduce }]);
          expect(locals(staged.linear)).toBe(2);
          // A's column pairs and B's row pairs (its tile interleaves rows k and k + 1) load as half2
          expect(scalarTileReads(staged.linear)).toBe(0);
          expect(staged.values).toEqual(run(k, opts).values);
        },
      ),
      { numRuns: 6, seed: 13 },
    );
  });

  it('gives the unstaged bits with asynchronous copies 1 to 3 iterations ahead, padded or swizzled (float32, float16, bfloat16)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(dtypes.float32, dtypes.float16, dtypes.bfloat16),
        fc.constantFrom(32, 64),
        fc.constantFrom(32, 64, 96),
        fc.constantFrom(16, 32),
        fc.constantFrom(1, 2, 3),
        tcOpts,
        fc.boolean(),
        (d, M, K, N, depth, o, swizzle) => {
          const k = matmul(M, K, N, d);
          const tc: Opt[] = d === dtypes.float32 ? [] : [{ op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 }];
          const { opts, reduce } = splits(k.ast, tc, [
            { axis: 2, factor: o.unroll * (d === dtypes.float32 ? 4 : 1), target: AxisType.UNROLL },
            { axis: 1, factor: o.upN, target: AxisType.UPCAST },
            { axis: 1, factor: d === dtypes.float32 ? 8 : o.localN, target: AxisType.LOCAL },
            { axis: 0, factor: o.upM * (d === dtypes.float32 ? 2 : 1), target: AxisType.UPCAST },
          ]);
          const staged = run(k, [...opts, { op: 'STAGE', axis: reduce, depth, swizzle }]);
          expect(locals(staged.linear)).toBe(2);
          // every tile's copies are asynchronous after the first `depth` iterations, waited for by the BARRIER
          const stores = staged.linear.src.filter((u) => u.op === Ops.STORE && u.argOf(Ops.STORE)?.async);
          expect(stores.length).toBeGreaterThanOrEqual(2);
          expect(staged.linear.src.find((u) => u.op === Ops.BARRIER)?.arg).toEqual({ pending: depth });
          expect(staged.cuda).toContain(`cp.async.wait_group ${depth};`);
          expect(staged.values).toEqual(run(k, opts).values);
        },
      ),
      { numRuns: 10, seed: 13 },
    );
  });

  it("swizzles big blocks' tiles: the unstaged bits, and matrix loads and copies free of bank conflicts", () => {
    const big = { ...target, grid: { ...target.grid!, localBytes: 227 * 1024 } };
    const opts = (swizzle: boolean): Opt[] => [
      { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 2, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 6, factor: 2, target: AxisType.UNROLL },
      { op: 'STAGE', axis: 6, depth: 2, swizzle },
    ];
    const lower = (k: { ast: UOp }, swizzle: boolean) =>
      lowerKernel(k.ast, { target: big, opts: opts(swizzle) });
    // A's rows of 32 elements (64 bytes: two a line of 8 chunks) and B's of 128 (16 chunks); 16 KB a buffer
    const large = matmul(4096, 4096, 4096, dtypes.float16);
    const [padded, swizzled] = [lower(large, false), lower(large, true)];
    expect(worstPhase(swizzled.linear)).toBe(1);
    expect(worstPhase(padded.linear)).toBeGreaterThan(1);
    expect(renderCUDA(swizzled.name, swizzled.linear)).toMatch(/shared 65536\n/);
    // on SIMT, with B's tile rows apart (N wider than the block's 128)
    const k = matmul(128, 64, 256, dtypes.bfloat16);
    const plain = run(k, opts(false).slice(0, -2)).values;
    // K by 16 a tile (A's rows of 32 bytes, four a line), that 4 buffers fit SIMT's 48 KB
    const got = run(k, [...opts(true).slice(0, -2), { op: 'STAGE', axis: 6, depth: 2, swizzle: true }]);
    expect(got.cuda).toMatch(/\^/);
    expect(got.values).toEqual(plain);
  });

  it("gives a conv's unstaged bits, staged on each of its reduce axes (channels, window rows, columns)", () => {
    const x = Tensor.empty([2, 8, 6, 16], { device: 'SIMT' });
    const k = scheduleOf([x.conv2d(Tensor.empty([16, 8, 3, 3], { device: 'SIMT' }))]).kernels.at(-1)!;
    const { opts } = lowerKernel(k.ast, { target });
    const unstaged = run(k, opts).values;
    let staged = 0;
    for (let axis = 0; axis < 16; axis++) {
      const with_ = [...opts, { op: 'STAGE', axis } as Opt];
      try {
        lowerKernel(k.ast, { target, opts: with_ });
      } catch (e) {
        expect((e as Error).message).toMatch(/is not a REDUCE axis|does not exist/);
        continue;
      }
      const got = run(k, with_);
      expect(locals(got.linear)).toBe(2);
      expect(got.values).toEqual(unstaged);
      staged++;
    }
    expect(staged).toBe(3);
  });

  it('is chosen by the GPU heuristics for big tensor-core matmuls, last, after 4 x 4 WMMA tiles a warp', () => {
    const k = matmul(256, 256, 256, dtypes.float16);
    const { opts } = lowerKernel(k.ast, { target });
    expect(opts).toEqual([
      { op: 'TC', axis: 2, tc: 0, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 2, factor: 4, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 5, factor: 2, target: AxisType.UNROLL },
      { op: 'STAGE', axis: 5 },
    ]);
    expect(lowerKernel(matmul(64, 64, 64, dtypes.float16).ast, { target }).opts.at(-1)?.op).not.toBe('STAGE');
  });

  it('is chosen 2 iterations ahead in big blocks where the GPU copies asynchronously and the grid stays full', () => {
    // the warps' tensor cores (mma.sync): where a warpgroup's fit, the heuristics take those (wgmma.test.ts)
    const warps = { ...target, tensorCores: target.tensorCores.filter((c) => !c.sharedOperands) };
    const big = { ...warps, grid: { ...target.grid!, localBytes: 227 * 1024 } };
    const block = [
      { op: 'TC', axis: 2, tc: 0, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 2, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL },
    ];
    const k32 = [
      { op: 'SPLIT', axis: 6, factor: 2, target: AxisType.UNROLL },
      { op: 'STAGE', axis: 6, depth: 2, swizzle: true },
    ];
    // 128 x 128 blocks at 4096 (1024 of them, rows of 32) and at 8192 (rows of 64 in bands of 16); K by 32 where
    // 4 buffers fit, else by 16
    const chosen = (m: number, k: number, n: number, t: Target = big) =>
      lowerKernel(matmul(m, k, n, dtypes.float16).ast, { target: t }).opts;
    expect(chosen(4096, 4096, 4096)).toEqual([...block, ...k32]);
    expect(chosen(8192, 8192, 8192)).toEqual([...block, { op: 'RASTER', rows: 16 }, ...k32]);
    // 24 rows of M tiles, which 16 does not divide: row by row
    expect(chosen(3072, 1024, 8192)).toEqual([...block, ...k32]);
    expect(chosen(4096, 4096, 4096, warps)).toEqual([
      ...block,
      { op: 'STAGE', axis: 6, depth: 2, swizzle: true },
    ]);
    // too few blocks to fill the GPU: the 64 x 128 synchronous default
    expect(chosen(1024, 1024, 1024).at(-1)).toEqual({
      op: 'STAGE',
      axis: 5,
    });
    // the big block's kernel on SIMT: the unstaged bits; in bands of 2 of 4 rows of 2 blocks, each block once
    const k = matmul(512, 32, 256, dtypes.float16);
    const opts = block as Opt[];
    const staged = run(k, [
      ...opts,
      { op: 'RASTER', rows: 2 },
      { op: 'STAGE', axis: 6, depth: 2, swizzle: true },
    ]);
    expect(staged.cuda).toMatch(/launch grid 8 1 1 /);
    expect(staged.values).toEqual(run(k, opts).values);
  });

  it('refuses STAGE with a reason: no local memory, not last, not a reduce, no threads, tiles too big', () => {
    const k = matmul(16, 16, 32, dtypes.float32);
    const illegal =
      (opts: Opt[], t = target) =>
      () =>
        lowerKernel(k.ast, { target: t, opts });
    const local: Opt = { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.LOCAL };
    expect(illegal([{ op: 'STAGE', axis: 2 }], { ...target, grid: undefined })).toThrow(
      'the target has no local memory',
    );
    expect(illegal([local, { op: 'STAGE', axis: 3 }, { op: 'SWAP', axis: 0, other: 1 }])).toThrow(
      'STAGE must be the last opt',
    );
    expect(illegal([local, { op: 'STAGE', axis: 0 }])).toThrow('axis 0 is not a REDUCE axis');
    expect(illegal([{ op: 'STAGE', axis: 2 }])).toThrow('the kernel has no LOCAL or WARP axes');
    const big = matmul(64, 4096, 64, dtypes.float32);
    expect(() =>
      lowerKernel(big.ast, {
        target: { ...target, grid: { ...target.grid!, localBytes: 1024 } },
        opts: [
          { op: 'SPLIT', axis: 1, factor: 32, target: AxisType.LOCAL },
          { op: 'SPLIT', axis: 3, factor: 16, target: AxisType.UNROLL },
          { op: 'STAGE', axis: 3 },
        ],
      }),
    ).toThrow(/its tiles take \d+ bytes of local memory, more than the target's 1024/);
  });

  it.skipIf(!hasNvcc)(
    'staged kernels compile with nvcc for sm_90a (vector copies into __shared__ tiles)',
    () => {
      const tc = matmul(256, 256, 256, dtypes.bfloat16);
      const plain = matmul(64, 64, 64, dtypes.float32);
      const sources = [
        renderCUDA('staged_tc', lowerKernel(tc.ast, { target }).linear),
        renderCUDA(
          'staged_f32',
          lowerKernel(plain.ast, {
            target,
            opts: [
              { op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST },
              { op: 'SPLIT', axis: 1, factor: 16, target: AxisType.LOCAL },
              { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.LOCAL },
              { op: 'SPLIT', axis: 5, factor: 8, target: AxisType.UNROLL },
              { op: 'STAGE', axis: 5 },
            ],
          }).linear,
        ),
      ];
      for (const s of sources) expect(s).toContain('__syncthreads()');
      expect(sources[1]).toMatch(/\*\(tg_float4\*\)\(temp\d\+alu\d+\) = /);
      nvccCompile(sources);
    },
  );
});
