// How the CPU device should batch new kernels: a model's kernels compiled with an empty cache at each
// kernels-per-unit (CC_BATCH) and compiler-processes (CC_JOBS) setting, interleaved and repeated.
// Usage: npx tsx bench/compile_batch.ts [model = mnist] [rounds = 2] [batches = 1,2,4,8,16] [jobs = 1,2]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Context } from '../src/index.ts';
import type { KernelSource } from '../src/runtime/backend.ts';
import { CPUBackend } from '../src/runtime/cpu.ts';
import { WORKLOADS } from './firststep-models.ts';

const [model = 'mnist', rounds = '2', batches = '1,2,4,8,16', jobs = '1,2'] = process.argv.slice(2);
const list = (s: string) => s.split(',').map(Number);

/** CPU seconds of this process's waited-for children (/proc/self/stat cutime + cstime). */
function childSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

/** Every kernel source the model's construction and first step compile on CPU. */
function sourcesOf(name: keyof typeof WORKLOADS): KernelSource[] {
  const seen = new Map<string, KernelSource>();
  const compileMany = CPUBackend.prototype.compileMany;
  CPUBackend.prototype.compileMany = function (this: CPUBackend, kernels, opts) {
    const noted = kernels.map((input) => () => {
      const k = typeof input === 'function' ? input() : input;
      seen.set(k.source, k);
      return k;
    });
    return compileMany.call(this, noted, opts);
  };
  const cache = mkdtempSync(join(tmpdir(), 'tsgrad-batch-bench-'));
  try {
    Context.with({ CACHEDIR: cache }, () => {
      const w = WORKLOADS[name]();
      w.step(...w.batch(0)).item();
    });
  } finally {
    CPUBackend.prototype.compileMany = compileMany;
    rmSync(cache, { recursive: true, force: true });
  }
  return [...seen.values()];
}

const sources = sourcesOf(model as keyof typeof WORKLOADS);
const bytes = sources.reduce((n, k) => n + k.source.length, 0);
console.log(
  `${model}: ${sources.length} kernels, ${(bytes / 1024).toFixed(0)} KB of C, ${availableParallelism()} cores\n`,
);
const configs = list(batches).flatMap((batch) => list(jobs).map((job) => ({ batch, job })));
const results = configs.map(() => ({ wall: [] as number[], cpu: [] as number[] }));
for (let round = 0; round < Number(rounds); round++)
  configs.forEach(({ batch, job }, i) => {
    const cache = mkdtempSync(join(tmpdir(), 'tsgrad-batch-bench-'));
    try {
      Context.with({ CACHEDIR: cache, CC_BATCH: batch, CC_JOBS: job }, () => {
        const c = childSeconds();
        const t = performance.now();
        const built = new CPUBackend('CPU').compileMany(sources);
        results[i]!.wall.push((performance.now() - t) / 1000);
        results[i]!.cpu.push(childSeconds() - c);
        const failed = built.find((p) => p instanceof Error);
        if (failed !== undefined) throw failed;
      });
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log(
  `${'kernels/unit'.padStart(12)} ${'processes'.padStart(9)} ${'wall s'.padStart(8)} ${'cc cpu s'.padStart(8)}`,
);
configs.forEach(({ batch, job }, i) => {
  const { wall, cpu } = results[i]!;
  console.log(
    `${String(batch).padStart(12)} ${String(job).padStart(9)} ${mean(wall).toFixed(2).padStart(8)} ${mean(cpu).toFixed(2).padStart(8)}`,
  );
});
