// Compiles every kernel the test suite ran on the SIMT target, as CUDA C, with nvcc for sm_90a (what NVRTC builds
// for on a compute capability 9.0 GPU): the GPU-style code the CUDA device would get is checked on a machine
// without a GPU. `vitest run` writes the kernels
// (vitest.config.ts CUDA_KERNELS, test/setup.ts); this joins them into a translation unit per core (a kernel is
// renamed by its number; the shared prelude is guarded) and reports each kernel nvcc rejects, with its source.
// Usage: npx tsx scripts/nvcc-kernels.ts [folder]   (exits 1 where a kernel does not compile)
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CUDA_KERNELS } from '../vitest.config.ts';

const folder = process.argv[2] ?? CUDA_KERNELS;
try {
  execFileSync('nvcc', ['--version'], { stdio: 'ignore' });
} catch {
  console.log('test:nvcc: nvcc not found; the SIMT kernels were not compiled as CUDA C');
  process.exit(0);
}
const files = readdirSync(folder).filter((f) => f.endsWith('.cu'));
const sources = files.map((f) => readFileSync(join(folder, f), 'utf8'));
const build = mkdtempSync(join(tmpdir(), 'tsgrad-nvcc-'));
const nvcc = (file: string) =>
  promisify(execFile)(
    'nvcc',
    ['-gencode=arch=compute_90a,code=sm_90a', '-cubin', '-w', '-o', `${file}.cubin`, file],
    { maxBuffer: 1 << 26 },
  );
const KERNEL = /(__global__ void (?:__launch_bounds__\(\d+\) )?)(\w+)\(/;

/** Compiles the kernels numbered `ids` in one unit; undefined when it compiles, else nvcc's message. */
async function compileUnit(ids: readonly number[], unit: string): Promise<string | undefined> {
  const file = join(build, `${unit}.cu`);
  writeFileSync(file, ids.map((i) => sources[i]!.replace(KERNEL, `$1$2_k${i}(`)).join('\n'));
  try {
    await nvcc(file);
    return undefined;
  } catch (e) {
    return (e as { stderr?: string }).stderr || String(e);
  }
}

const t0 = performance.now();
const units = Math.max(1, Math.min(availableParallelism(), Math.ceil(sources.length / 100)));
const groups = Array.from({ length: units }, (_, u) => sources.map((_, i) => i).filter((i) => i % units === u));
const failed: number[] = [];
await Promise.all(
  groups.map(async (ids, u) => {
    if ((await compileUnit(ids, `unit${u}`)) === undefined) return;
    // a unit failed: each of its kernels alone finds which
    for (const i of ids) if ((await compileUnit([i], `kernel${i}`)) !== undefined) failed.push(i);
  }),
);
const seconds = ((performance.now() - t0) / 1000).toFixed(1);
for (const i of failed.slice(0, 5)) {
  const message = await compileUnit([i], `kernel${i}`);
  console.error(`nvcc rejects ${join(folder, files[i]!)}:\n${message}\n${sources[i]}`);
}
rmSync(build, { recursive: true, force: true });
if (sources.length === 0) {
  console.error(`test:nvcc: no kernels in ${folder}: run the suite (vitest run) first`);
  process.exit(1);
}
console.log(
  `test:nvcc: ${sources.length - failed.length} of ${sources.length} SIMT kernels compile as CUDA C for sm_90a (${units} units, ${seconds} s)`,
);
process.exit(failed.length ? 1 : 0);
