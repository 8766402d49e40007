// GPU-style kernels: output axes as workgroups (GLOBAL) and threads (LOCAL) read from SPECIAL indices, run on the
// SIMT emulator and compared with the JS device.
import { describe, expect, it, vi } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET, type Opt, type Target } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';

const gpu: Target = { ...CPU_TARGET, threads: 1, grid: { maxThreads: 256, localBytes: 48 * 1024 } };

const ramp = (shape: number[], device: string) =>
  Tensor.arange(
    shape.reduce((a, b) => a * b, 1),
    undefined,
    undefined,
    { device, dtype: dtypes.float32 },
  ).reshape(shape);

/** The SPECIAL names and RANGE count of t's one kernel lowered for the GPU target with opts. */
function lowered(t: Tensor, opts?: Opt[]) {
  const { kernels } = scheduleOf([t]);
  expect(kernels).toHaveLength(1);
  const { linear } = lowerKernel(kernels[0]!.ast, { target: gpu, opts });
  return {
    specials: linear.src
      .filter((u) => u.op === Ops.SPECIAL)
      .map((u) => [u.arg, Number(u.src[0]!.constValue)]),
    loops: linear.src.filter((u) => u.op === Ops.RANGE).length,
  };
}

describe('grid lowering', () => {
  it('makes output axes workgroup indices, innermost as dimension 0, and keeps reduce loops', () => {
    expect(lowered(ramp([2, 3, 4], 'SIMT').add(1), [])).toEqual({
      specials: [
        ['gidx0', 4],
        ['gidx1', 3],
        ['gidx2', 2],
      ],
      loops: 0,
    });
    expect(lowered(ramp([2, 3, 4], 'SIMT').sum(2), [])).toEqual({
      specials: [
        ['gidx0', 3],
        ['gidx1', 2],
      ],
      loops: 1,
    });
  });

  it("puts every workgroup axis in dimension 0 where the outer ones would pass a GPU's 65535", () => {
    expect(lowered(ramp([70000, 2, 2], 'SIMT').add(1), []).specials).toEqual([['gidx0', 280000]]);
    expect(lowered(ramp([60000, 2, 2], 'SIMT').add(1), []).specials).toEqual([
      ['gidx0', 2],
      ['gidx1', 2],
      ['gidx2', 60000],
    ]);
  });

  it('makes LOCAL axes thread indices', () => {
    const split: Opt = { op: 'SPLIT', axis: 1, factor: 8, target: AxisType.LOCAL };
    expect(lowered(ramp([3, 32], 'SIMT').mul(2), [split]).specials).toEqual([
      ['gidx0', 4],
      ['lidx0', 8],
      ['gidx1', 3],
    ]);
  });

  it('counts axes past the third through the last dimension', () => {
    expect(lowered(ramp([2, 3, 2, 5, 4], 'SIMT').add(1), []).specials).toEqual([
      ['gidx0', 4],
      ['gidx1', 5],
      ['gidx2', 12],
    ]);
  });

  it('lays two GLOBAL axes out as one dimension in bands (RASTER), and refuses what it cannot order', () => {
    const raster = (rows: number): Opt => ({ op: 'RASTER', rows });
    expect(lowered(ramp([6, 5], 'SIMT').add(1), [raster(2)]).specials).toEqual([['gidx0', 30]]);
    const illegal = (t: Tensor, opts: Opt[]) => () => lowered(t, opts);
    expect(illegal(ramp([6, 5], 'SIMT').add(1), [raster(4)])).toThrow(
      "rows 4 must be an integer of at least 2 that divides the outer GLOBAL axis's 6",
    );
    expect(illegal(ramp([2, 3, 4], 'SIMT').add(1), [raster(2)])).toThrow(
      'it orders exactly two GLOBAL axes, of constant sizes of at least 2; kernel axes: 0:g2 1:g3 2:g4',
    );
    const local: Opt = { op: 'SPLIT', axis: 1, factor: 5, target: AxisType.LOCAL };
    expect(illegal(ramp([6, 5], 'SIMT').add(1), [raster(3), local])).toThrow(
      'RASTER came earlier, so the GLOBAL axes stay',
    );
  });

  it('refuses more threads in a workgroup than the target has', () => {
    const { kernels } = scheduleOf([ramp([512, 2], 'SIMT').add(1)]);
    const opts: Opt[] = [
      { op: 'SPLIT', axis: 0, factor: 32, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 2, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 0, factor: 8, target: AxisType.LOCAL },
    ];
    expect(() => lowerKernel(kernels[0]!.ast, { target: gpu, opts })).toThrow(
      "512 threads in a workgroup exceed the target's 256 (the LOCAL, GROUP_REDUCE and WARP axes' sizes multiply)",
    );
  });
});

describe('GPU-style kernels on SIMT', () => {
  const programs: Record<string, (d: string) => Tensor> = {
    elementwise: (d) =>
      ramp([6, 40], d)
        .mul(0.5)
        .exp2()
        .sub(ramp([40], d)),
    'five axes': (d) => ramp([2, 3, 2, 5, 4], d).permute([4, 2, 0, 3, 1]).add(1).contiguous(),
    'reduce per thread': (d) => ramp([16, 33], d).sin().sum(1),
    matmul: (d) =>
      ramp([8, 12], d)
        .div(50)
        .matmul(ramp([12, 16], d).div(70))
        .relu(),
    conv: (d) =>
      ramp([1, 2, 6, 6], d)
        .div(40)
        .conv2d(ramp([4, 2, 3, 3], d).div(90), undefined, { padding: 1 }),
    // 5 x 5 outputs, which no LOCAL factor divides: columns and rows whole as threads (80 a group)
    'conv with odd widths': (d) =>
      ramp([2, 3, 7, 7], d)
        .div(40)
        .conv2d(ramp([16, 3, 3, 3], d).div(90)),
    'max and where': (d) => {
      const x = ramp([5, 24], d).sin();
      return x.eq(x.max(1, true)).where(x, 0);
    },
  };
  for (const [name, f] of Object.entries(programs))
    it(name, () => {
      const want = f('JS').tolist();
      expect(f('SIMT').tolist()).toEqual(want);
    });
});

describe('GROUP_REDUCE on SIMT', () => {
  const lowerAndRun = (t: (d: string) => Tensor, opts: Opt[]) => {
    const { kernels } = scheduleOf([t('SIMT')]);
    const { linear } = lowerKernel(kernels[0]!.ast, { target: gpu, opts });
    return linear.src.map((u) => Ops[u.op]);
  };
  it('shares a reduce among the threads of a group through LOCAL memory and a BARRIER', () => {
    const ops = lowerAndRun(
      (d) => ramp([3, 64], d).sum(1),
      [{ op: 'SPLIT', axis: 1, factor: 16, target: AxisType.GROUP_REDUCE }],
    );
    expect(ops).toContain('BARRIER');
    expect(ops.filter((o) => o === 'SPECIAL')).toHaveLength(2);
  });
  it('lets one thread of the group store the shared result', () => {
    const { kernels } = scheduleOf([ramp([3, 64], 'SIMT').sum(1)]);
    const opts: Opt[] = [{ op: 'SPLIT', axis: 1, factor: 16, target: AxisType.GROUP_REDUCE }];
    const { linear } = lowerKernel(kernels[0]!.ast, { target: gpu, opts });
    const global = linear.src.filter(
      (u) =>
        u.op === Ops.STORE &&
        u.src[0]!.src[0]!.op === Ops.PARAM &&
        u.src[0]!.src[0]!.argOf(Ops.PARAM).addrspace === 'GLOBAL',
    );
    expect(global).toHaveLength(1);
    // in an IF block on the group's thread index being 0 (test/codegen/if-blocks.test.ts)
    const open = linear.src.slice(0, linear.src.indexOf(global[0]!)).filter((u) => u.op === Ops.IF);
    expect(open).toHaveLength(1);
    expect(open[0]!.src[0]!.toposort().some((u) => u.op === Ops.SPECIAL && u.arg === 'lidx0')).toBe(true);
  });
});

describe("GROUP_REDUCE over a thread's register tile", () => {
  // a matmul's k shared by 16 threads, each thread 4 x 2 outputs: 8 shares a thread
  const tile: Opt[] = [
    { op: 'SPLIT', axis: 2, factor: 16, target: AxisType.GROUP_REDUCE },
    { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.UPCAST },
    { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
  ];
  const matmul = (d: string, k: number) =>
    Tensor.empty([8, k], { device: d }).matmul(Tensor.empty([k, 8], { device: d }));
  const linearOf = (t: Tensor, opts: Opt[]) => {
    const { kernels } = scheduleOf([t]);
    return lowerKernel(kernels[0]!.ast, { target: gpu, opts }).linear;
  };

  it('stores all its shares, then waits at one BARRIER; the sums equal unoptimized ones (SIMT finds no race)', () => {
    const ops = linearOf(matmul('SIMT', 64), tile).src.map((u) => u.op);
    expect(ops.filter((o) => o === Ops.BARRIER)).toHaveLength(1);
    // integer operands: every order of the sums is exact
    const [k] = scheduleOf([matmul('SIMT', 64)]).kernels;
    const run = (opts: Opt[]) => {
      const { name, linear } = lowerKernel(k!.ast, { target: gpu, opts });
      const backend = Device.get('SIMT');
      const bufs = k!.bufs.map((b, slot) => {
        const n = (b.shape as number[]).reduce((a, d) => a * d, 1);
        const data = Float32Array.from({ length: n }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5));
        return new DeviceBuffer(backend, n, b.dtype).copyin(data);
      });
      backend.compile(name, renderSIMT(name, linear)).run(bufs);
      return Array.from(bufs[0]!.copyout() as Float32Array);
    };
    const want = run([]);
    expect(want.some((v) => v !== 0)).toBe(true);
    expect(run(tile)).toEqual(want);
  });

  it('adds the shares in float32: each is a partial sum (at most 64 of them; a longer combine adds in float64)', () => {
    const wide = (k: number, group: number) =>
      linearOf(matmul('SIMT', k), [
        { op: 'SPLIT', axis: 2, factor: group, target: AxisType.GROUP_REDUCE },
      ]).src.some((u) => u.dtype.base === dtypes.float64);
    expect(wide(64, 32)).toBe(false);
    expect(wide(128, 64)).toBe(false);
    expect(wide(256, 128)).toBe(true);
  });
});

describe('GROUP_REDUCE local memory', () => {
  const small: Target = { ...gpu, grid: { maxThreads: 256, localBytes: 1024 } };
  const ast = () => scheduleOf([ramp([64, 64], 'SIMT').sum(1)]).kernels[0]!.ast;
  const group: Opt[] = [
    { op: 'SPLIT', axis: 1, factor: 16, target: AxisType.GROUP_REDUCE },
    { op: 'SPLIT', axis: 0, factor: 16, target: AxisType.LOCAL },
  ];
  it('takes a slot per thread and UPCAST copy, within the target', () => {
    // 16 group threads x 16 LOCAL threads x 4 bytes: the whole 1 KB
    expect(() => lowerKernel(ast(), { target: small, opts: group })).not.toThrow();
  });
  it('refuses a split whose shares would not fit, naming the bytes', () => {
    const upcast: Opt = { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.UPCAST };
    expect(() => lowerKernel(ast(), { target: small, opts: [...group, upcast] })).toThrow(
      /SPLIT\(0,2,UPCAST\) is illegal: its GROUP_REDUCE shares take 2048 bytes of local memory, more than the target's 1024/,
    );
  });
});

describe('GROUP_REDUCE kernels on SIMT', () => {
  // integer-valued sums, exact in any order
  const programs: Record<string, (d: string) => Tensor> = {
    'sum of a row': (d) => ramp([3, 256], d).sum(1),
    'sum of everything': (d) => ramp([1024], d).sum(),
    'max of columns': (d) => ramp([128, 4], d).max(0),
    'matrix-vector': (d) => ramp([4, 128], d).matmul(ramp([128], d).mod(3)),
    'mean then exp': (d) => ramp([2, 512], d).div(512).mean(1).exp(),
    // the shared factor does not read the LOCAL axis (columns of a constant): each thread still has its slot,
    // which SIMT's race check would report otherwise
    'matmul with a constant': (d) => {
      const x = new Tensor(
        Array.from({ length: 128 }, (_, i) => i % 7),
        { device: d },
      ).reshape([8, 16]);
      return x
        .mul(2)
        .add(1)
        .mul(x)
        .sub(3)
        .matmul(Tensor.full([16, 32], 0.5, { device: d }));
    },
  };
  for (const [name, f] of Object.entries(programs))
    it(name, () => {
      expect(f('SIMT').tolist()).toEqual(f('JS').tolist());
    });
});

describe('heuristics for the SIMT target', () => {
  const optsOf = (t: Tensor) => scheduleOf([t]).kernels.map((k) => lowerKernel(k.ast, { target: gpu }));
  const targets = (k: ReturnType<typeof optsOf>[number]) =>
    k.opts.flatMap((o) => (o.op === 'SPLIT' ? [o.target] : []));

  it('give a matmul and a conv workgroups (GLOBAL and LOCAL axes), coloured by type at DEBUG=2', () => {
    for (const t of [
      ramp([64, 32], 'SIMT').matmul(ramp([32, 48], 'SIMT')),
      ramp([2, 4, 16, 16], 'SIMT').conv2d(ramp([8, 4, 3, 3], 'SIMT'), undefined, { padding: 1 }),
    ]) {
      const [k] = optsOf(t);
      expect(targets(k!)).toContain(AxisType.LOCAL);
      // GLOBAL blue (34), LOCAL cyan (36)
      expect(k!.display).toContain('\x1b[34m');
      expect(k!.display).toContain('\x1b[36m');
    }
  });

  it('are printed at DEBUG=3 as they run: matmul, conv and softmax with GLOBAL and LOCAL axes, a big sum with GROUP', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const printed = (t: Tensor) => {
      log.mockClear();
      Context.with({ DEBUG: 3 }, () => t.realize());
      // the opts lines: `name: opts`, the name's axes coloured by type
      return log.mock.calls.map((c) => String(c[0])).filter((l) => /: (SPLIT|TC|no opts)/.test(l));
    };
    try {
      const programs = {
        matmul: ramp([64, 32], 'SIMT').matmul(ramp([32, 48], 'SIMT')),
        conv: ramp([2, 4, 16, 16], 'SIMT').conv2d(ramp([8, 4, 3, 3], 'SIMT'), undefined, { padding: 1 }),
        softmax: ramp([16, 1024], 'SIMT').realize().softmax(1),
      };
      for (const t of Object.values(programs)) {
        const lines = printed(t);
        // GLOBAL blue (34), LOCAL cyan (36)
        expect(
          lines.some((l) => l.includes('\x1b[34m') && l.includes('\x1b[36m') && l.includes(',LOCAL)')),
        ).toBe(true);
      }
      const sum = printed(ramp([65536], 'SIMT').realize().sum());
      expect(sum.some((l) => /SPLIT\(\d+,\d+,GROUP_REDUCE\)/.test(l))).toBe(true);
    } finally {
      log.mockRestore();
    }
  });

  it('share a big sum and a softmax row among the threads of a group (GROUP_REDUCE)', () => {
    // the schedule splits a big sum of memory in two kernels; the one into a single result is a group's
    const sum = optsOf(ramp([65536], 'SIMT').realize().sum());
    expect(targets(sum.at(-1)!)).toContain(AxisType.GROUP_REDUCE);
    const softmax = optsOf(ramp([16, 1024], 'SIMT').realize().softmax(1));
    expect(softmax.some((k) => targets(k).includes(AxisType.GROUP_REDUCE))).toBe(true);
  });
});
