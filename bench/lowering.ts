// Lowering cost: the CPU seconds a model's first step spends lowering and rendering its new kernels for the CPU
// device (a fresh process each run, empty kernel cache), and a hash of the C they render, so that a change to
// the compiler shows what it costs and whether its output moved. No compiler runs (the step's kernels run as
// no-ops: the schedule does not depend on values), so the figure is the lowering's own on a loaded machine too.
// `step cpu s` is the whole step's CPU: the tensor graph, autograd and scheduling besides the lowering.
// --cuda lowers and renders the same steps as CUDA C for an H100 (sm_90: 1024 threads, 227 KB of shared memory,
// tensor cores) on the NULL device, so that no GPU is needed.
// Usage: npx tsx bench/lowering.ts [models...] [--rounds N] [--cuda]   models: mnist, mlp, transformer (default: all)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Backend, KernelInput, Program } from '../src/runtime/backend.ts';
import { CPUBackend } from '../src/runtime/cpu.ts';
import { NullBackend } from '../src/runtime/null.ts';
import { HOPPER_TENSOR_CORES, NVIDIA_TENSOR_CORES } from '../src/runtime/tensor-cores.ts';
import { WORKLOADS } from './firststep-models.ts';

type Model = keyof typeof WORKLOADS;
const args = process.argv.slice(2);

/** The NULL device as an H100 that renders CUDA C (the child of --cuda runs with DEV=NULL). */
function nullAsH100(): void {
  const gpu = NullBackend.prototype;
  gpu.language = () => 'CUDA';
  gpu.workgroups = () => ({
    maxThreads: 1024,
    localBytes: 232448,
    maxOuterGroups: 65535,
    asyncCopies: true,
    matrixLoads: true,
  });
  gpu.vectorBytes = () => 16;
  gpu.tensorCores = () => [...NVIDIA_TENSOR_CORES, ...HOPPER_TENSOR_CORES];
  gpu.maxBuffers = () => 4095;
  gpu.fusedMultiplyAdds = () => true;
}

/** Runs in the child: the model's first step, its kernels lowered and rendered but not compiled. */
function measure(model: Model, cuda: boolean): void {
  if (cuda) nullAsH100();
  const w = WORKLOADS[model]();
  const [x, y] = w.batch(0);
  let lowering = 0;
  let kernels = 0;
  const hash = createHash('sha256');
  const backend = (cuda ? NullBackend : CPUBackend).prototype as Backend;
  backend.compileMany = function (this: Backend, inputs: readonly KernelInput[]) {
    const u = process.cpuUsage();
    const programs = inputs.map((input): Program => {
      const { name, source } = typeof input === 'function' ? input() : input;
      hash.update(source);
      return { name, device: this.name, run: () => 0 };
    });
    const { user, system } = process.cpuUsage(u);
    lowering += (user + system) / 1e6;
    kernels += inputs.length;
    return programs;
  };
  x.realize(y);
  const u = process.cpuUsage();
  w.step(x, y).realize();
  const { user, system } = process.cpuUsage(u);
  const step = (user + system) / 1e6;
  console.log(JSON.stringify({ kernels, lowering, step, hash: hash.digest('hex').slice(0, 16) }));
}

function main(): void {
  const at = args.indexOf('--rounds');
  const rounds = at < 0 ? 3 : Number(args[at + 1]);
  const chosen = args.filter((a) => a in WORKLOADS) as Model[];
  const models = chosen.length > 0 ? chosen : (Object.keys(WORKLOADS) as Model[]);
  const cuda = args.includes('--cuda');
  const self = fileURLToPath(import.meta.url);
  console.log(
    `${'model'.padEnd(12)} ${'kernels'.padStart(8)} ${'min cpu s'.padStart(10)} ${'median'.padStart(8)} ${'step cpu s'.padStart(10)}  ${cuda ? 'CUDA' : 'C'} hash`,
  );
  for (const model of models) {
    const runs = Array.from({ length: rounds }, () => {
      const cache = mkdtempSync(join(tmpdir(), 'tsgrad-lowering-'));
      try {
        const p = spawnSync(
          process.execPath,
          [...process.execArgv, self, '--child', model, ...(cuda ? ['--cuda'] : [])],
          {
            // the lowering's own CPU, on the main thread (threads would add their loading to it)
            env: {
              LOWER_THREADS: '0',
              ...process.env,
              CACHEDIR: cache,
              DEBUG: '0',
              ...(cuda ? { DEV: 'NULL' } : {}),
            },
            encoding: 'utf8',
          },
        );
        const last = p.stdout.trim().split('\n').at(-1) ?? '';
        if (p.status !== 0 || !last.startsWith('{'))
          throw new Error(`${model} failed:\n${p.stdout}\n${p.stderr}`);
        return JSON.parse(last) as { kernels: number; lowering: number; step: number; hash: string };
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    });
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const cpu = runs.map((r) => r.lowering).sort((a, b) => a - b);
    const { kernels, hash } = runs[0]!;
    if (runs.some((r) => r.hash !== hash))
      throw new Error(`${model}: the rendered source differs between runs`);
    console.log(
      `${model.padEnd(12)} ${String(kernels).padStart(8)} ${cpu[0]!.toFixed(2).padStart(10)} ${median(cpu).toFixed(2).padStart(8)} ${median(
        runs.map((r) => r.step),
      )
        .toFixed(2)
        .padStart(10)}  ${hash}`,
    );
  }
}

if (args[0] === '--child') measure(args[1] as Model, args.includes('--cuda'));
else main();
