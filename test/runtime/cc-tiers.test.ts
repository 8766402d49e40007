// Kernels built in two tiers on the CPU (src/runtime/cc-upgrades.ts): a quick -Og build runs first, the -O2
// build, started once a second plan (a later step) has shown that it pays, replaces it once ready, and both
// compute the same bits.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import { type Program, planStarts } from '../../src/runtime/backend.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { settleUpgrades, waitForRebuilds } from '../../src/runtime/cc-upgrades.ts';
import { CPUBackend } from '../../src/runtime/cpu.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';

const newCache = () => mkdtempSync(join(tmpdir(), 'tsgrad-tiers-'));

/** A step: a plan that launches `p` `times` times. */
function plan(p: Program, bufs: DeviceBuffer[], times = 1, vals: number[] = []): void {
  planStarts();
  for (let i = 0; i < times; i++) p.run(bufs, vals);
}

/** A small training step's loss and gradients (matmul, tanh, exp and log in a softmax, sqrt), as bits. */
function step(): Uint8Array[] {
  Tensor.manualSeed(3);
  const w = Tensor.randn([24, 16]).requiresGrad_();
  const x = Tensor.randn([8, 24]);
  const h = x.matmul(w).tanh().mul(1.7).add(0.3);
  const loss = h.logSoftmax(-1).mean().add(h.square().mean().sqrt());
  loss.backward();
  return [loss, w.grad!].map((t) => new Uint8Array((t.dataSync() as Float32Array).buffer.slice(0)));
}

/** What `run` printed with DEBUG=2: a line per launch. */
function launches(run: () => void): string[] {
  const lines: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
  try {
    Context.with({ DEBUG: 2 }, run);
  } finally {
    log.mockRestore();
  }
  return lines.filter((l) => / us /.test(l));
}

describe('CPU kernel tiers', () => {
  // first in the file: its kernels are new to the process
  it('runs the quick build first, then the optimized one, and both give the same bits', () => {
    // every kernel a second plan launches is rebuilt, however short its launches
    Context.with({ DEV: 'CPU', CC_TIERS: 1, CC_PAYBACK: -1, CACHEDIR: newCache() }, () => {
      let quick: Uint8Array[] = [];
      const first = launches(() => {
        quick = step();
      });
      // the step's first launches run quick builds; later ones may find their optimized build ready
      expect(first[0]).toMatch(/\(-Og build\)$/);
      expect(first.filter((l) => l.endsWith('(-Og build)')).length).toBeGreaterThan(first.length / 2);
      step(); // the second step starts the optimized builds
      settleUpgrades();
      let later: Uint8Array[] = [];
      const second = launches(() => {
        later = step();
      });
      expect(second.some((l) => l.includes('-Og'))).toBe(false);
      expect(later).toEqual(quick);
    });
  });

  it('upgrades a kernel a second plan launches, caches both builds, and builds trials optimized', () => {
    const source =
      'void k(float* restrict data0) { for (int i = 0; i < 4; i++) data0[i] = data0[i] * 2.0f + 1.0f; }';
    const cpu = Device.get('CPU') as CPUBackend;
    const buf = new DeviceBuffer(cpu, 4, dtypes.float32).copyin(new Float32Array([1, 2, 3, 4]));
    // a new backend loads what the disk cache has, as the next process would
    const compile = (backend = new CPUBackend('CPU')) =>
      backend.compileMany([{ name: 'k', source }])[0] as Program;
    Context.with({ CC_TIERS: 1, CC_PAYBACK: -1, CACHEDIR: newCache() }, () => {
      const [trial] = new CPUBackend('CPU').compileMany([{ name: 'k', source }], { trial: true });
      expect(trial).toMatchObject({ tier: undefined });
      // launched by one plan only, as a parameter's initial values: no optimized build; the next run loads the
      // quick one
      const once = compile(cpu);
      expect(once.tier).toBe('-Og');
      plan(once, [buf], 2);
      settleUpgrades();
      expect(compile().tier).toBe('-Og');
      const again = compile(cpu);
      expect(again.tier).toBe('-Og');
      plan(again, [buf]);
      plan(again, [buf]);
      settleUpgrades();
      // taken up at the next launch, within a plan or not (a bench's recorded launches)
      again.run([buf]);
      expect(again.tier).toBe(undefined);
      // x -> 2x + 1 five times: 32x + 31, the same in either build
      expect([...(buf.copyout() as Float32Array)]).toEqual([63, 95, 127, 159]);
      expect(compile().tier).toBe(undefined);
    });
  });

  it('rebuilds a kernel whose launches pay for it, and not one whose launches take microseconds', () => {
    // n multiply-adds of a running value: n sets how long a launch takes
    const source = `void spin(float* restrict data0, int n) {
  float x = data0[0];
  for (int i = 0; i < n; i++) x = x * 0.999f + 0.001f;
  data0[0] = x;
}`;
    const cpu = Device.get('CPU') as CPUBackend;
    const buf = new DeviceBuffer(cpu, 1, dtypes.float32);
    Context.with({ CC_TIERS: 1, CC_PAYBACK: 2, CACHEDIR: newCache() }, () => {
      const [short, long] = cpu.compileMany([
        { name: 'spin', source },
        { name: 'spin', source: `${source}\n` },
      ]) as Program[];
      // microseconds a launch at -Og, against a rebuild's estimate of over 5 ms: not due in 3 plans
      for (let i = 0; i < 3; i++) plan(short!, [buf], 1, [1000]);
      // 5-10 ms a launch: due in the second plan, started in the third
      for (let i = 0; i < 3; i++) plan(long!, [buf], 1, [5_000_000]);
      waitForRebuilds();
      short!.run([buf], [1]);
      long!.run([buf], [1]);
      expect(short!.tier).toBe('-Og');
      expect(long!.tier).toBe(undefined);
      // a bench's later steps: every kernel two plans launched is rebuilt
      settleUpgrades();
      short!.run([buf], [1]);
      expect(short!.tier).toBe(undefined);
    });
  });

  // OpenMP's teams spin at a loop's end for a thread a compiler displaced (src/runtime/cpu.ts teamWhile)
  it('runs parallel loops on the cores that the optimized builds compiling leave', () => {
    // a team as the C renderer sizes one (tg_team): a thread per iteration, at most OpenMP's nthreads-var
    const source = `int omp_get_max_threads(void);
int omp_get_num_threads(void);
int omp_get_thread_num(void);
void team(int* restrict data0) {
  int m = omp_get_max_threads();
  #pragma omp parallel num_threads(256 < m ? 256 : m)
  { if (omp_get_thread_num() == 0) data0[0] = omp_get_num_threads(); }
}`;
    const cpu = Device.get('CPU') as CPUBackend;
    const out = new DeviceBuffer(cpu, 1, dtypes.int32);
    const team = () => {
      p.run([out]);
      return Number((out.copyout() as Int32Array)[0]);
    };
    const p = Context.with({ CC_TIERS: 0 }, () => cpu.compileMany([{ name: 'team', source }])[0] as Program);
    const cores = team();
    // OpenMP's default: a thread per core, or what OMP_NUM_THREADS says
    expect(cores).toBe(Number.parseInt(process.env.OMP_NUM_THREADS ?? '', 10) || availableParallelism());
    Context.with({ CC_TIERS: 1, CC_PAYBACK: -1, CACHEDIR: newCache() }, () => {
      const other = cpu.compileMany([
        { name: 'other', source: 'void other(int* restrict data0) { data0[0] = 7; }' },
      ]);
      // due in the second plan, started in the third
      for (let i = 0; i < 3; i++) plan(other[0] as Program, [out]);
      // other's optimized build cannot have ended yet: one compiler takes a core
      expect(team()).toBe(Math.max(1, cores - 1));
      settleUpgrades();
      expect(team()).toBe(cores);
    });
  });

  it('stops the optimized builds of a process that exits, leaving no build directory', () => {
    const cache = newCache();
    const script = join(cache, 'exits.ts');
    const index = fileURLToPath(new URL('../../src/index.ts', import.meta.url));
    writeFileSync(
      script,
      `import { Tensor } from '${index}';\nconsole.log(Tensor.randn([64, 64]).matmul(Tensor.randn([64, 64])).sum().item());\nprocess.exit(0);\n`,
    );
    const tsx = fileURLToPath(new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url));
    const r = spawnSync(process.execPath, [tsx, script], {
      env: { ...process.env, CACHEDIR: cache, DEV: 'CPU', CC_TIERS: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(readdirSync(cache).filter((f) => f.startsWith('build-'))).toEqual([]);
  });
});

describe('CPU fused multiply-adds', () => {
  // x = 1 + 2^-12: x * x = 1 + 2^-11 + 2^-24 exactly, which float32 rounds to 1 + 2^-11 before an add
  it('computes a product and a sum with one rounding, at either optimization level', () => {
    const x = 1 + 2 ** -12;
    for (const tiers of [0, 1])
      Context.with({ DEV: 'CPU', CC_TIERS: tiers, CACHEDIR: newCache() }, () => {
        const t = new Tensor([x, x, x, x, x, x, x, x, x]);
        expect([
          ...(t
            .mul(t)
            .sub(1 + 2 ** -11)
            .dataSync() as Float32Array),
        ]).toEqual(Array(9).fill(2 ** -24));
      });
  });
});
