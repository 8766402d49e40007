// NVRTC compile time for a batch of new kernels, one at a time and on worker threads (compileMany), with an
// empty cubin cache each: what a new model's first step waits for. Usage: npx tsx bench/nvrtc_batch.ts [N]
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lowerKernel } from '../src/codegen/index.ts';
import { CPU_TARGET, type Target } from '../src/codegen/opt/opts.ts';
import { scheduleOf } from '../src/engine/realize.ts';
import { Context, Device, Tensor } from '../src/index.ts';
import { renderCUDA } from '../src/renderer/c.ts';
import { nvrtcLibrary } from '../src/runtime/cuda-api.ts';

const n = Number(process.argv[2] ?? 32);
const cuda = Device.get('CUDA');
const target: Target = { ...CPU_TARGET, threads: 1, vectors: false, grid: cuda.workgroups() };
/** n distinct kernels: elementwise chains and reductions of different sizes. */
const kernels = Array.from({ length: n }, (_, i) => {
  const x = Tensor.empty([64 + i, 96], { device: 'CUDA' });
  const t =
    i % 2
      ? x
          .exp()
          .mul(i + 1)
          .sum(1)
      : x.relu().add(i).softmax(1);
  return scheduleOf([t]).kernels.map((k) => {
    const { name, linear } = lowerKernel(k.ast, { target });
    return { name, source: renderCUDA(name, linear) };
  });
}).flat();
const time = (f: () => void) => {
  const t0 = performance.now();
  f();
  return (performance.now() - t0) / 1000;
};
const fresh = () => ({ CACHEDIR: mkdtempSync(join(tmpdir(), 'tsgrad-bench-')) });
// each run's sources differ by a comment, so that neither finds the other's modules loaded
const run = (tag: string) => kernels.map((k) => ({ name: k.name, source: `${k.source}// ${tag}\n` }));
const one = Context.with(fresh(), () =>
  time(() => {
    for (const k of run('one')) cuda.compile(k.name, k.source);
  }),
);
const many = Context.with(fresh(), () => time(() => cuda.compileMany(run('many'))));
// the same kernels split among P processes, each running NVRTC on its share one at a time (no cubins kept):
// whether NVRTC's threads contend inside one process
const CHILD = `
const koffi = require(process.argv[1]);
const lib = koffi.load(process.argv[2]);
const create = lib.func('int nvrtcCreateProgram(void *prog, const char *src, const char *name, int nheaders, const char **headers, const char **includeNames)');
const compile = lib.func('int nvrtcCompileProgram(uintptr_t prog, int nopts, const char **opts)');
const destroy = lib.func('int nvrtcDestroyProgram(void *prog)');
const { jobs, options } = JSON.parse(require('node:fs').readFileSync(process.argv[3], 'utf8'));
for (const { name, source } of jobs) {
  const prog = new BigUint64Array(1);
  if (create(prog, source, name + '.cu', 0, null, null) !== 0) process.exit(2);
  if (compile(Number(prog[0]), options.length, options) !== 0) process.exit(3);
  destroy(prog);
}`;
async function processes(count: number): Promise<number> {
  const options = JSON.parse(cuda.compilerKey())[3] as string[];
  const jobs = run(`procs${count}`);
  const dir = mkdtempSync(join(tmpdir(), 'tsgrad-nvrtc-procs-'));
  const koffi = createRequire(import.meta.url).resolve('koffi');
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: count }, (_, p) => {
      const file = join(dir, `${p}.json`);
      writeFileSync(file, JSON.stringify({ jobs: jobs.filter((_, i) => i % count === p), options }));
      return new Promise<void>((resolve, reject) =>
        spawn(process.execPath, ['-e', CHILD, koffi, nvrtcLibrary().path, file], { stdio: 'inherit' }).on(
          'exit',
          (code) => (code === 0 ? resolve() : reject(new Error(`NVRTC process exited with ${code}`))),
        ),
      );
    }),
  );
  return (performance.now() - t0) / 1000;
}
const procs = [];
for (const count of [1, 4, 8, 16]) procs.push(`${count}: ${(await processes(count)).toFixed(2)} s`);
console.log(
  `${kernels.length} kernels, empty cache: one at a time ${one.toFixed(2)} s, compileMany ${many.toFixed(2)} s; in processes ${procs.join(', ')}`,
);
