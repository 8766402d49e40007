// Kernel opts: random legal opt lists never change what a kernel computes; illegal ones are refused with a reason.
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { outputsToGlobal } from '../../src/codegen/grid.ts';
import { kernelName, lowerKernel } from '../../src/codegen/index.ts';
import { kernelRanges } from '../../src/codegen/opt/axes.ts';
import { applyOpts, CPU_TARGET, type Opt, printOpts, type Target } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context, prod } from '../../src/helpers.ts';
import { renderC } from '../../src/renderer/c.ts';
import { renderJS } from '../../src/renderer/js.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { type ArgOf, AxisType, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const js = Device.get('JS');

/** The one kernel computing t. */
function kernelOf(t: Tensor): { ast: UOp; bufs: UOp[] } {
  const { kernels } = scheduleOf([t]);
  expect(kernels).toHaveLength(1);
  return kernels[0]!;
}

/** A Float32Array that throws on an access outside it, which a C kernel would make silently. */
function strict(a: Float32Array): Float32Array {
  const check = (t: Float32Array, p: string | symbol) => {
    if (typeof p === 'string' && /^-?\d+$/.test(p) && !(Number(p) >= 0 && Number(p) < t.length))
      throw new RangeError(`index ${p} is outside a buffer of ${t.length}`);
  };
  return new Proxy(a, {
    get(t, p) {
      check(t, p);
      return Reflect.get(t, p);
    },
    set(t, p, v) {
      check(t, p);
      return Reflect.set(t, p, v);
    },
  });
}

/** Small integers, so float sums are exact; buffer 0 (the output) starts at 0. */
const fill = (slot: number, size: number) =>
  Float32Array.from({ length: size }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5));

/** Conditional stores are in IF blocks (src/codegen/if-blocks.ts); the linear spec checks how they nest. */
const expectNoGatedStores = (linear: UOp) =>
  expect(linear.src.filter((u) => u.op === Ops.STORE && u.src.length === 3)).toEqual([]);

/** Runs the kernel lowered with opts, as JS over strict buffers; returns the output. */
function run(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]): number[] {
  const { name, linear } = lowerKernel(k.ast, { opts });
  expectNoGatedStores(linear);
  const arrays = k.bufs.map((b, slot) => fill(slot, prod(b.shape as number[])));
  const params = arrays.map((_, i) => `data${i}`);
  new Function(...params, `'use strict';${renderJS(name, linear)}`)(...arrays.map(strict));
  return Array.from(arrays[0]!);
}

/** Runs the kernel lowered with opts on a device; returns the output. */
function runOn(device: string, k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]): number[] {
  const { name, linear } = lowerKernel(k.ast, { opts });
  const backend = Device.get(device);
  const bufs = k.bufs.map((b, slot) => {
    const size = prod(b.shape as number[]);
    return new DeviceBuffer(backend, size, b.dtype).copyin(fill(slot, size));
  });
  const render = backend.kind === 'JS' ? renderJS : renderC;
  backend.compile(name, render(name, linear)).run(bufs);
  return Array.from(bufs[0]!.copyout() as Float32Array);
}

const typeOf = (r: UOp) => (r.arg as ArgOf<Ops.RANGE>).type;
const sizeOf = (r: UOp) => Number(r.src[0]!.constValue);

/** Opts the rules allow on this kernel: SPLITs to UPCAST, UNROLL and THREAD, PADTOs and SWAPs. */
function legalOpts(ast: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  const threads = ranges.reduce((p, r) => (typeOf(r) === AxisType.THREAD ? p * sizeOf(r) : p), 1);
  return ranges.flatMap((r, axis): Opt[] => {
    const type = typeOf(r);
    const n = sizeOf(r);
    const loop = type === AxisType.LOOP;
    if (!loop && type !== AxisType.REDUCE) return [];
    const splits = [2, 4]
      .filter((f) => n % f === 0)
      .flatMap((factor): Opt[] => [
        ...[false, true].map((top) => ({
          op: 'SPLIT' as const,
          axis,
          factor,
          target: loop ? AxisType.UPCAST : AxisType.UNROLL,
          top,
        })),
        ...(loop && threads * factor <= CPU_TARGET.threads
          ? [{ op: 'SPLIT' as const, axis, factor, target: AxisType.THREAD, top: true }]
          : []),
      ]);
    const pads = [2, 4, 8]
      .filter((m) => n % m !== 0 && Math.ceil(n / m) * m <= 2 * n)
      .map((multiple) => ({ op: 'PADTO' as const, axis, multiple }));
    const swaps = ranges.flatMap((s, other) =>
      other > axis && typeOf(s) === type ? [{ op: 'SWAP' as const, axis, other }] : [],
    );
    return [...splits, ...pads, ...swaps];
  });
}

const GPU: Target = { ...CPU_TARGET, threads: 1, grid: { maxThreads: 64, localBytes: 48 * 1024 } };

/** Runs the kernel lowered with opts for the GPU target on the SIMT emulator; returns the output. */
function runSimt(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]): number[] {
  const { name, linear } = lowerKernel(k.ast, { opts, target: GPU });
  expectNoGatedStores(linear);
  const backend = Device.get('SIMT');
  const bufs = k.bufs.map((b, slot) => {
    const size = prod(b.shape as number[]);
    return new DeviceBuffer(backend, size, b.dtype).copyin(fill(slot, size));
  });
  backend.compile(name, renderSIMT(name, linear)).run(bufs);
  return Array.from(bufs[0]!.copyout() as Float32Array);
}

/** GPU opts the rules allow: LOCAL, GROUP and GROUPTOP (GROUP_REDUCE), UPCAST, UNROLL, PADTO, SWAP. */
function legalGpuOpts(ast: UOp): Opt[] {
  return [AxisType.LOCAL, AxisType.GROUP_REDUCE, AxisType.UPCAST, AxisType.UNROLL]
    .flatMap((target) =>
      kernelRanges(ast).flatMap((_, axis) =>
        [2, 4].flatMap((factor) =>
          [false, true].map((top): Opt => ({ op: 'SPLIT', axis, factor, target, top })),
        ),
      ),
    )
    .concat(
      kernelRanges(ast).flatMap((_, axis): Opt[] => [
        ...[2, 4, 8].map((multiple): Opt => ({ op: 'PADTO', axis, multiple })),
        ...kernelRanges(ast).map((_, other): Opt => ({ op: 'SWAP', axis, other })),
      ]),
    )
    .filter((o) => {
      try {
        applyOpts(ast, [o], GPU);
        return true;
      } catch {
        return false;
      }
    });
}

const program = fc.record({
  shape: fc.array(fc.constantFrom(2, 3, 4, 5, 6, 8), { minLength: 1, maxLength: 3 }),
  pad: fc.boolean(),
  // inc maps 0 to 1, so a padded read that reached a sum would show
  ops: fc.array(fc.constantFrom('relu', 'neg', 'square', 'inc', 'add', 'mul'), { maxLength: 3 }),
  reduce: fc.constantFrom('sum', 'max', 'none'),
  axis: fc.nat(),
  keepdim: fc.boolean(),
  picks: fc.array(fc.nat(), { maxLength: 4 }),
});

const tensor = (shape: readonly number[]) =>
  new Tensor(new Float32Array(shape.reduce((a, d) => a * d, 1)), { device: 'JS' }).reshape(shape);

type Program = typeof program extends fc.Arbitrary<infer P> ? P : never;

/** The tensor a random program computes. */
function build({ shape, pad, ops, reduce, axis, keepdim }: Program): Tensor {
  // a padded input has gated loads already: padding the kernel adds to their gates
  let t = pad ? tensor(shape).pad(shape.map((_, i) => (i === 0 ? [1, 0] : [0, 0]))) : tensor(shape);
  const y = tensor(t.shape as number[]);
  for (const op of ops)
    t =
      op === 'relu'
        ? t.relu()
        : op === 'neg'
          ? t.neg()
          : op === 'square'
            ? t.mul(t)
            : op === 'inc'
              ? t.add(1)
              : op === 'add'
                ? t.add(y)
                : t.mul(y);
  if (reduce !== 'none') t = t[reduce](axis % shape.length, keepdim);
  return t.add(1);
}

describe('opts', () => {
  it('compute what the NOOPT kernel computes (random programs, random legal opt lists)', () => {
    fc.assert(
      fc.property(program, (p) => {
        const k = kernelOf(build(p));
        // pick each opt among those legal after the previous ones
        const opts: Opt[] = [];
        let ast = k.ast;
        for (const pick of p.picks) {
          const legal = legalOpts(ast);
          if (legal.length === 0) break;
          opts.push(legal[pick % legal.length]!);
          ast = applyOpts(ast, opts.slice(-1));
        }
        expect(run(k, opts)).toEqual(run(k, []));
      }),
      { seed: 5, numRuns: 60 },
    );
  });

  it('on a GPU target compute what the NOOPT kernel computes, run on SIMT (random programs, random legal GPU opts)', () => {
    fc.assert(
      fc.property(program, (p) => {
        const k = kernelOf(build(p));
        const opts: Opt[] = [];
        let ast = outputsToGlobal(k.ast);
        for (const pick of p.picks) {
          const legal = legalGpuOpts(ast);
          if (legal.length === 0) break;
          opts.push(legal[pick % legal.length]!);
          ast = applyOpts(ast, opts.slice(-1), GPU);
        }
        expect(runSimt(k, opts), printOpts(opts)).toEqual(run(k, []));
      }),
      { seed: 7, numRuns: 60 },
    );
  });

  it('turn an UPCAST into several stores and an UNROLL into one wider reduce step', () => {
    const k = kernelOf(tensor([4, 8]).sum(1));
    const opts: Opt[] = [
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 2, factor: 4, target: AxisType.UNROLL },
    ];
    const split = applyOpts(k.ast, opts);
    expect(kernelName(split)).toBe('r_2_2_2_4');
    // colours: LOOP white, UPCAST yellow, REDUCE red, UNROLL magenta
    expect(kernelName(split, true)).toBe(
      ['r', '\x1b[37m2', '\x1b[33m2', '\x1b[31m2', '\x1b[35m4']
        .map((s, i) => (i ? `${s}\x1b[0m` : s))
        .join('_'),
    );
    const { linear, name } = lowerKernel(k.ast, { opts });
    expect(name).toBe('r_2_2_2_4');
    const count = (op: Ops) => linear.src.filter((u) => u.op === op).length;
    // the LOOP and one REDUCE loop that both UPCAST copies share; two output stores and, per copy, an
    // accumulator's init and its update, which adds four loads at once
    expect(count(Ops.RANGE)).toBe(2);
    expect(count(Ops.LOAD)).toBe(2 * (4 + 2));
    expect(linear.src.filter((u) => u.op === Ops.STORE && u.src[1]!.dtype === dtypes.float32).length).toBe(6);
    expect(run(k, opts)).toEqual(run(k, []));
  });

  it('PADTO masks the padding: loads read 0, stores are skipped, a max sees -inf', () => {
    // all the data is negative, so a max that saw a padded 0 would be wrong
    const values = Float32Array.from({ length: 30 }, (_, i) => -1 - (i % 7));
    const x = new Tensor(values, { device: 'JS' }).reshape([6, 5]);
    const k = kernelOf(x.max(1));
    const opts: Opt[] = [
      { op: 'PADTO', axis: 0, multiple: 4 },
      { op: 'PADTO', axis: 1, multiple: 4 },
    ];
    const { linear, name } = lowerKernel(k.ast, { opts });
    expect(name).toBe('r_8_8');
    const gated = (op: Ops) => linear.src.filter((u) => u.op === op && u.src.length === 3).length;
    // the store is skipped by an IF block around it, not by a gate of its own
    const ops = linear.src.map((u) => u.op);
    const block = ops.slice(ops.indexOf(Ops.IF), ops.indexOf(Ops.ENDIF));
    expect([gated(Ops.LOAD), gated(Ops.STORE), block.filter((op) => op === Ops.STORE).length]).toEqual([
      1, 0, 1,
    ]);
    const data = new DeviceBuffer(js, 30, dtypes.float32).copyin(values);
    const out = new DeviceBuffer(js, 6, dtypes.float32);
    js.compile(name, renderJS(name, linear)).run([out, data]);
    expect(Array.from(out.copyout() as Float32Array)).toEqual(x.max(1).tolist());
  });

  it('PADTO of an integer division: the padding divides by 0, which gives 0 instead of trapping', () => {
    const int = (data: number[]) => new Tensor(Int32Array.from(data), { device: 'JS' });
    const [a, b] = [int([7, -8, 9, 10, -11, 12]), int([2, 3, -4, 5, 1, 7])];
    const k = kernelOf(a.mod(b));
    const { name, linear } = lowerKernel(k.ast, { opts: [{ op: 'PADTO', axis: 0, multiple: 4 }] });
    const backend = Device.get(Device.default);
    const render = backend.kind === 'JS' ? renderJS : renderC;
    const bufs = [new Int32Array(6), a.dataSync(), b.dataSync()].map((d) =>
      new DeviceBuffer(backend, 6, dtypes.int32).copyin(d as Int32Array),
    );
    backend.compile(name, render(name, linear)).run(bufs);
    expect(Array.from(bufs[0]!.copyout() as Int32Array)).toEqual(a.mod(b).tolist());
  });

  it('SWAP changes the loop order', () => {
    const k = kernelOf(tensor([4, 6]).add(1));
    const { name, linear } = lowerKernel(k.ast, { opts: [{ op: 'SWAP', axis: 0, other: 1 }] });
    expect(name).toBe('E_6_4');
    expect(linear.src.filter((u) => u.op === Ops.RANGE).map(sizeOf)).toEqual([6, 4]);
    expect(run(k, [{ op: 'SWAP', axis: 0, other: 1 }])).toEqual(run(k, []));
  });

  it('a THREAD axis runs as an ordinary loop until the renderer parallelizes it (C too)', () => {
    const k = kernelOf(tensor([6, 5]).sum(1));
    const opts: Opt[] = [
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.THREAD, top: true },
      { op: 'PADTO', axis: 2, multiple: 4 },
    ];
    const { name, linear } = lowerKernel(k.ast, { opts });
    expect(name).toBe('r_2_3_8');
    expect(linear.src.filter((u) => u.op === Ops.RANGE).map(typeOf)).toEqual([
      AxisType.THREAD,
      AxisType.LOOP,
      AxisType.REDUCE,
    ]);
    expect(runOn(Device.default, k, opts)).toEqual(run(k, []));
  });

  it('print as one line, and at DEBUG=3 per kernel', () => {
    expect(
      printOpts([
        { op: 'SPLIT', axis: 1, factor: 4, target: AxisType.UPCAST },
        { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.THREAD, top: true },
        { op: 'PADTO', axis: 0, multiple: 32 },
        { op: 'SWAP', axis: 0, other: 1 },
        { op: 'NOLOCALS' },
        { op: 'TC', axis: 2, tc: 0, opt: 1, mode: 1 },
      ]),
    ).toBe('SPLIT(1,4,UPCAST) SPLIT(0,2,THREAD,top) PADTO(0,32) SWAP(0,1) NOLOCALS TC(2,0,1,1)');
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      // a shape no other test compiles, so the kernel is lowered here
      Context.with({ DEBUG: 3 }, () => tensor([3, 44]).sum(1).realize());
      expect(log.mock.calls.map((c) => String(c[0]))).toContainEqual(
        expect.stringContaining(': SPLIT(1,4,UNROLL)'),
      );
    } finally {
      log.mockRestore();
    }
  });
});

describe('illegal opts', () => {
  const k = kernelOf(tensor([6, 32]).sum(1));
  const axes = 'kernel axes: 0:L6 1:R32';
  const gpu: Target = { ...CPU_TARGET, grid: { maxThreads: 256, localBytes: 48 * 1024 } };
  const refuse = (opts: Opt[], target?: Target) => () => applyOpts(k.ast, opts, target);
  const split = (axis: number, factor: number, target: AxisType, top?: boolean): Opt => ({
    op: 'SPLIT',
    axis,
    factor,
    target,
    top,
  });
  const { LOCAL, THREAD, UPCAST, UNROLL, GROUP_REDUCE, WARP, LOOP } = AxisType;

  it('SPLIT: from the spec axis types, in the spec direction, within registers and threads', () => {
    expect(refuse([split(1, 2, UPCAST)])).toThrow(
      `opt SPLIT(1,2,UPCAST) is illegal: UPCAST splits GLOBAL, LOCAL, LOOP axes, not REDUCE; ${axes}`,
    );
    expect(refuse([split(0, 2, UNROLL)])).toThrow('UNROLL splits REDUCE, GROUP_REDUCE axes, not LOOP');
    expect(refuse([split(0, 4, UPCAST)])).toThrow('factor 4 does not divide the axis size 6');
    expect(refuse([split(1, 32, UNROLL, true)])).toThrow(
      'opt SPLIT(1,32,UNROLL,top) is illegal: factor 32 exceeds the register limit of 16 for UNROLL',
    );
    expect(refuse([split(2, 2, UPCAST)])).toThrow(`axis 2 does not exist; ${axes}`);
    expect(() => lowerKernel(k.ast, { opts: [split(0, 1, UPCAST)] })).toThrow(
      'factor 1 must be an integer of at least 2',
    );
    expect(refuse([split(0, 2, THREAD)])).toThrow(
      'opt SPLIT(0,2,THREAD) is illegal: a THREAD axis is the outer part of its split (top: true)',
    );
    expect(refuse([split(1, 2, THREAD, true)])).toThrow('THREAD splits GLOBAL, LOOP axes, not REDUCE');
    expect(refuse([split(0, 3, THREAD, true)], { ...CPU_TARGET, threads: 2 })).toThrow(
      "3 threads exceed the target's 2",
    );
    expect(refuse([split(0, 2, WARP)])).toThrow('WARP axes are made by TC, not by SPLIT');
    expect(refuse([split(0, 2, LOOP)])).toThrow(
      'LOOP is not a split target (those are LOCAL, THREAD, GROUP_REDUCE, UPCAST, UNROLL)',
    );
  });

  it('LOCAL and GROUP_REDUCE: only with local memory, and not after NOLOCALS', () => {
    expect(refuse([split(0, 2, LOCAL)])).toThrow(
      'opt SPLIT(0,2,LOCAL) is illegal: LOCAL axes need local memory, which the target does not have',
    );
    expect(refuse([split(1, 2, GROUP_REDUCE)])).toThrow('GROUP_REDUCE axes need local memory');
    expect(() => applyOpts(k.ast, [split(0, 2, LOCAL), split(2, 4, GROUP_REDUCE)], gpu)).not.toThrow();
    expect(refuse([split(0, 2, LOCAL, true)], gpu)).toThrow(
      'a LOCAL axis is the inner part of its split (top: false)',
    );
    expect(refuse([{ op: 'NOLOCALS' }, split(0, 2, LOCAL)], gpu)).toThrow(
      'opt SPLIT(0,2,LOCAL) is illegal: NOLOCALS came earlier, so no LOCAL axis may be made',
    );
    expect(refuse([split(0, 2, LOCAL), { op: 'NOLOCALS' }], gpu)).toThrow(
      'opt NOLOCALS is illegal: the kernel has local axes already (1)',
    );
    expect(refuse([{ op: 'NOLOCALS' }, { op: 'NOLOCALS' }], gpu)).toThrow('NOLOCALS came earlier already');
    expect(refuse([{ op: 'NOLOCALS' }])).toThrow(
      'opt NOLOCALS is illegal: the target has no local memory, so there are no local axes to turn off',
    );
  });

  it('PADTO: a whole GLOBAL, LOOP or REDUCE axis, to a multiple it is not, at most doubling it', () => {
    const pad = (axis: number, multiple: number): Opt => ({ op: 'PADTO', axis, multiple });
    expect(refuse([pad(0, 1)])).toThrow(
      `opt PADTO(0,1) is illegal: multiple 1 must be an integer of at least 2; ${axes}`,
    );
    expect(refuse([pad(1, 8)])).toThrow('the axis size 32 is already a multiple of 8');
    expect(refuse([pad(0, 16)])).toThrow('padding the axis from 6 to 16 more than doubles it (at most 12)');
    expect(refuse([split(1, 4, UNROLL), pad(2, 3)])).toThrow(
      'PADTO pads GLOBAL, LOOP, REDUCE axes, not UNROLL (pad an axis before splitting it)',
    );
    expect(refuse([pad(3, 4)])).toThrow('axis 3 does not exist');
  });

  it('SWAP: two distinct axes of one class; TC: first, and only with tensor cores', () => {
    const swap = (axis: number, other: number): Opt => ({ op: 'SWAP', axis, other });
    expect(refuse([swap(0, 1)])).toThrow(
      `opt SWAP(0,1) is illegal: SWAP reorders two loop axes (GLOBAL, LOOP) or two REDUCE axes, not LOOP and REDUCE; ${axes}`,
    );
    expect(refuse([swap(1, 1)])).toThrow('it swaps axis 1 with itself');
    expect(refuse([swap(0, 2)])).toThrow('axis 2 does not exist');
    expect(refuse([split(0, 2, UPCAST), swap(0, 1)])).toThrow('not LOOP and UPCAST');
    const tc: Opt = { op: 'TC', axis: 1, tc: 0, opt: 0, mode: 1 };
    expect(refuse([tc])).toThrow('opt TC(1,0,0,1) is illegal: the target has no tensor cores');
    expect(refuse([split(0, 2, UPCAST), tc])).toThrow('TC must be the first opt');
  });
});

describe('hand-coded opts', () => {
  it('unroll long reduce loops by 4 unless NOOPT=1, and the result is the same', () => {
    const x = new Tensor(
      Float32Array.from({ length: 6 * 64 }, (_, i) => (i % 7) - 3),
      { device: 'JS' },
    ).reshape([6, 64]);
    const ast = scheduleOf([x.sum(1)]).kernels[0]!.ast;
    expect(lowerKernel(ast).name).toBe('r_6_16_4');
    expect(Context.with({ NOOPT: 1 }, () => lowerKernel(ast).name)).toBe('r_6_64');
    const plain = Context.with({ NOOPT: 1 }, () => x.sum(1).tolist());
    expect(x.sum(1).tolist()).toEqual(plain);
  });
});
