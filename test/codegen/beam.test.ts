// BEAM search: it computes what the kernel computes unoptimized, stores its result for the next process, and
// drops candidates that do not compile.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET } from '../../src/codegen/opt/opts.ts';
import { beamSearch, beamStats } from '../../src/codegen/opt/search.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderC } from '../../src/renderer/c.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

const cpu = Device.get('CPU');
const dirs: string[] = [];
const freshDir = () => {
  dirs.push(mkdtempSync(join(tmpdir(), 'tsgrad-beam-test-')));
  return dirs.at(-1)!;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const since = (before: typeof beamStats) =>
  Object.fromEntries(Object.entries(beamStats).map(([k, v]) => [k, v - before[k as keyof typeof beamStats]]));

/** Small integers: every summation order gives the same float. */
const ints = (n: number) => Float32Array.from({ length: n }, (_, i) => ((i * 7) % 11) - 5);
const matrix = (rows: number, cols: number) =>
  new Tensor(ints(rows * cols), { device: 'CPU' }).reshape([rows, cols]);

describe('BEAM search', () => {
  it('computes what NOOPT computes, and a second process takes the result from the disk cache', () => {
    const dir = freshDir();
    const x = matrix(4, 16);
    const want = Context.with({ NOOPT: 1 }, () => x.sum(1).tolist());
    const before = { ...beamStats };
    expect(Context.with({ CACHEDIR: dir, BEAM: 2 }, () => x.sum(1).tolist())).toEqual(want);
    const first = since(before);
    expect(first).toMatchObject({ searches: 1, hits: 0 });
    expect(first.timed).toBeGreaterThan(1);
    expect(readdirSync(dir).filter((f) => f.endsWith('.beam.json'))).toHaveLength(1);

    // another process finds only the disk cache: realize's compiled programs are this process's
    const ast = scheduleOf([x.sum(1)]).kernels[0]!.ast;
    const again = { ...beamStats };
    const opts = Context.with({ CACHEDIR: dir }, () => beamSearch(ast, cpu, renderC, 2));
    expect(since(again)).toEqual({ searches: 0, hits: 1, timed: 0, failed: 0 });
    expect(opts).toBeInstanceOf(Array);
  }, 60_000); // compiles a few dozen candidates with gcc

  it('drops candidates that do not compile, and still finds opts that compute the right values', () => {
    const x = matrix(4, 16);
    const { ast } = scheduleOf([x.sum(1)]).kernels[0]!;
    // every second kernel rendered is broken; the first, without opts, is not
    let renders = 0;
    const flaky = (name: string, linear: UOp) =>
      renderC(name, linear) + (renders++ % 2 === 1 ? '\n#error broken by the test\n' : '');
    const dir = freshDir();
    const before = { ...beamStats };
    const opts = Context.with({ CACHEDIR: dir, CACHELEVEL: 0 }, () => beamSearch(ast, cpu, flaky, 2));
    expect(since(before).failed).toBeGreaterThan(0);
    expect(readdirSync(dir)).toEqual([]); // CACHELEVEL=0 stores nothing
    const { name, linear } = lowerKernel(ast, { opts });
    const out = new DeviceBuffer(cpu, 4, dtypes.float32);
    const input = new DeviceBuffer(cpu, 64, dtypes.float32).copyin(ints(64));
    cpu.compile(name, renderC(name, linear)).run([out, input]);
    expect([...out.view()]).toEqual(Context.with({ NOOPT: 1 }, () => x.sum(1).tolist()));
  }, 60_000); // compiles a few dozen candidates with gcc

  it('stops at BEAM_TIME: past it only the first round (no opts, the hand-coded ones) is timed', () => {
    const x = matrix(8, 64);
    const want = Context.with({ NOOPT: 1 }, () => x.sum(1).tolist());
    const before = { ...beamStats };
    const got = Context.with({ CACHEDIR: freshDir(), BEAM: 2, BEAM_TIME: 1e-6 }, () => x.sum(1).tolist());
    expect(got).toEqual(want);
    const spent = since(before);
    expect(spent.searches).toBe(1);
    expect(spent.timed).toBeLessThanOrEqual(2);
  });

  it('on SIMT searches GPU actions (LOCAL, GROUP, GROUPTOP, PADTO, NOLOCALS) and computes what JS computes', () => {
    const x = (d: string) => new Tensor(ints(4 * 32), { device: d }).reshape([4, 32]);
    const want = x('JS').sum(1).tolist();
    const before = { ...beamStats };
    expect(Context.with({ CACHEDIR: freshDir(), BEAM: 2 }, () => x('SIMT').sum(1).tolist())).toEqual(want);
    expect(since(before).searches).toBe(1);
    const ast = scheduleOf([x('SIMT').sum(1)]).kernels[0]!.ast;
    const target = { ...CPU_TARGET, threads: 1, grid: Device.get('SIMT').workgroups() };
    const opts = Context.with({ CACHEDIR: freshDir() }, () =>
      beamSearch(ast, Device.get('SIMT'), renderSIMT, 2, { target }),
    );
    // the winner is whatever ran fastest in the emulator: GPU opts, never a CPU's THREAD split
    expect(opts).toBeDefined();
    expect(opts!.every((o) => o.op !== 'SPLIT' || o.target !== AxisType.THREAD)).toBe(true);
  });
});
