// Kernel opts: random legal SPLITs never change what a kernel computes; illegal ones are refused with a reason.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { kernelName, lowerKernel } from '../../src/codegen/index.ts';
import { applyOpts, kernelRanges, type Opt } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderJS } from '../../src/renderer/js.ts';
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

/** Runs the kernel lowered with opts on buffers filled with small integers; returns the output. */
function run(k: { ast: UOp; bufs: UOp[] }, opts: readonly Opt[]): number[] {
  const { name, linear } = lowerKernel(k.ast, { opts });
  const bufs = k.bufs.map((b, slot) => {
    const size = (b.shape as number[]).reduce((a, d) => a * d, 1);
    const buf = new DeviceBuffer(js, size, b.dtype);
    return buf.copyin(
      Float32Array.from({ length: size }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5)),
    );
  });
  js.compile(name, renderJS(name, linear)).run(bufs);
  return Array.from(bufs[0]!.copyout() as Float32Array);
}

/** The legal SPLITs of a kernel. */
function legalSplits(ast: UOp): Opt[] {
  return kernelRanges(ast).flatMap((r, axis) => {
    const { type } = r.arg as ArgOf<Ops.RANGE>;
    const n = Number(r.src[0]!.constValue);
    const target =
      type === AxisType.LOOP ? AxisType.UPCAST : type === AxisType.REDUCE ? AxisType.UNROLL : undefined;
    if (target === undefined) return [];
    return [2, 4]
      .filter((f) => n % f === 0)
      .flatMap((factor) => [false, true].map((top) => ({ op: 'SPLIT' as const, axis, factor, target, top })));
  });
}

const program = fc.record({
  shape: fc.array(fc.constantFrom(2, 4, 8), { minLength: 1, maxLength: 3 }),
  ops: fc.array(fc.constantFrom('relu', 'neg', 'square', 'add', 'mul'), { maxLength: 3 }),
  reduce: fc.constantFrom('sum', 'max', 'none'),
  axis: fc.nat(),
  keepdim: fc.boolean(),
  picks: fc.array(fc.nat(), { maxLength: 3 }),
});

describe('SPLIT opts', () => {
  it('compute what the NOOPT kernel computes (random programs, random legal opt sequences)', () => {
    fc.assert(
      fc.property(program, ({ shape, ops, reduce, axis, keepdim, picks }) => {
        const x = new Tensor(new Float32Array(shape.reduce((a, d) => a * d, 1)), { device: 'JS' }).reshape(
          shape,
        );
        const y = new Tensor(new Float32Array(shape.reduce((a, d) => a * d, 1)), { device: 'JS' }).reshape(
          shape,
        );
        let t = x;
        for (const op of ops)
          t =
            op === 'relu'
              ? t.relu()
              : op === 'neg'
                ? t.neg()
                : op === 'square'
                  ? t.mul(t)
                  : op === 'add'
                    ? t.add(y)
                    : t.mul(y);
        if (reduce !== 'none') t = t[reduce](axis % shape.length, keepdim);
        t = t.add(1);
        const k = kernelOf(t);
        // pick each opt among those legal after the previous ones
        const opts: Opt[] = [];
        let ast = k.ast;
        for (const p of picks) {
          const legal = legalSplits(ast);
          if (legal.length === 0) break;
          opts.push(legal[p % legal.length]!);
          ast = applyOpts(ast, opts.slice(-1));
        }
        expect(run(k, opts)).toEqual(run(k, []));
      }),
      { seed: 5, numRuns: 30 },
    );
  });

  it('turn an UPCAST into several stores and an UNROLL into one wider reduce step', () => {
    const x = new Tensor(new Float32Array(32), { device: 'JS' }).reshape([4, 8]);
    const k = kernelOf(x.sum(1));
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

  it('are refused when illegal, saying why and naming the kernel axes', () => {
    const x = new Tensor(new Float32Array(192), { device: 'JS' }).reshape([6, 32]);
    const k = kernelOf(x.sum(1));
    const bad = (o: Omit<Opt, 'op'>) => () => applyOpts(k.ast, [{ op: 'SPLIT', ...o }]);
    const axes = 'kernel axes: 0:L6 1:R32';
    expect(bad({ axis: 1, factor: 2, target: AxisType.UPCAST })).toThrow(
      `opt SPLIT(axis 1, factor 2, UPCAST) is illegal: UPCAST splits GLOBAL, LOCAL, LOOP axes, not REDUCE; ${axes}`,
    );
    expect(bad({ axis: 0, factor: 2, target: AxisType.UNROLL })).toThrow(
      'UNROLL splits REDUCE, GROUP_REDUCE axes, not LOOP',
    );
    expect(bad({ axis: 0, factor: 4, target: AxisType.UPCAST })).toThrow(
      'factor 4 does not divide the axis size 6',
    );
    expect(bad({ axis: 1, factor: 32, target: AxisType.UNROLL, top: true })).toThrow(
      'opt SPLIT(axis 1, factor 32, UNROLL, top) is illegal: factor 32 exceeds the register limit of 16 for UNROLL',
    );
    expect(bad({ axis: 2, factor: 2, target: AxisType.UPCAST })).toThrow(`axis 2 does not exist; ${axes}`);
    expect(bad({ axis: 0, factor: 2, target: AxisType.THREAD })).toThrow(
      'split target THREAD is not supported yet',
    );
    expect(() =>
      lowerKernel(k.ast, { opts: [{ op: 'SPLIT', axis: 0, factor: 1, target: AxisType.UPCAST }] }),
    ).toThrow('factor 1 must be an integer of at least 2');
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
