// First steps: how long a new model's first training steps take with an empty kernel cache and with a warm
// one (each run a fresh process), beside the later steps, for the models of bench/firststep-models.ts; with
// TINYGRAD_PATH set, tinygrad's figures from bench/firststep_peer.py in the same run. `cpu s` and `cc cpu s` are
// the CPU seconds of the process and of the compilers it ran during the first step: on a loaded machine they
// compare where wall times do not. `results` hashes every step's loss and the parameters after the last: a change
// to the compiler or its flags that means to keep results keeps it.
// An empty run's caches are all empty: the kernel cache (CACHEDIR) and NVRTC's (CUDA_CACHE_PATH, where NVRTC keeps
// the machine code it made from a kernel's PTX: with ~/.nv/ComputeCache kept, a process that compiled the
// transformer's kernels again took 0.6 s less than the first on the H100's host).
// Usage: npx tsx bench/firststep.ts [models...] [--later N] [--start STEPS]
//   models: mnist, mlp, transformer (default: all, or none with --start); --start times `npm start -- --steps STEPS`.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tensor } from '../src/index.ts';
import { settleUpgrades } from '../src/runtime/cc-upgrades.ts';
import { TITLES, WORKLOADS } from './firststep-models.ts';

type Model = keyof typeof WORKLOADS;

/** What one process measured, in seconds: building the model, its first step, the mean later step. */
interface Times {
  init: number;
  first: number;
  later: number;
  /** The second step and the wait for the optimized builds it starts (src/runtime/cc-upgrades.ts). */
  second?: number;
  /** CPU seconds spent by child processes (the C compiler) during the first step. */
  compiler: number;
  /** CPU seconds of this process (its threads included) during the first step: the figure a loaded machine keeps. */
  own: number;
  /** A hash of the losses of all steps and of the parameters after them. */
  results: string;
}

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name);
  return at < 0 ? fallback : Number(args[at + 1]);
};
const LATER = option('--later', 3);

/** CPU seconds of this process's waited-for children (/proc/self/stat cutime + cstime; 0 elsewhere). */
function childSeconds(): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return 0;
  }
}

/** Runs in the child: builds the model, runs and times its steps, prints the times as JSON. */
function measure(model: Model): void {
  const seconds = (t: number) => (performance.now() - t) / 1000;
  let t = performance.now();
  const w = WORKLOADS[model]();
  Tensor.realizeDeferred(); // the parameters' initial values, computed together at their first use
  const init = seconds(t);
  const batches = Array.from({ length: LATER + 2 }, (_, i) => w.batch(i));
  for (const [x, y] of batches) x.realize(y);
  const c = childSeconds();
  const u = process.cpuUsage();
  const losses: number[] = [];
  t = performance.now();
  losses.push(w.step(...batches[0]!).item() as number);
  const first = seconds(t);
  const compiler = childSeconds() - c;
  const { user, system } = process.cpuUsage(u);
  const own = (user + system) / 1e6;
  // the second step starts the optimized builds (CC_TIERS); it and the wait for them are their own column, and
  // the later steps run the optimized builds
  t = performance.now();
  losses.push(w.step(...batches[1]!).item() as number);
  settleUpgrades();
  const second = seconds(t);
  t = performance.now();
  for (const b of batches.slice(2)) losses.push(w.step(...b).item() as number);
  const later = seconds(t) / LATER;
  const hash = createHash('sha256').update(new Float64Array(losses));
  for (const p of w.params) hash.update(p.dataSync() as Uint8Array);
  const results = hash.digest('hex').slice(0, 12);
  console.log(JSON.stringify({ init, first, second, later, compiler, own, results } satisfies Times));
}

const self = fileURLToPath(import.meta.url);

/** Runs `argv` with CACHEDIR=cache and returns the JSON its last line printed, or throws with its output. */
function run(argv: string[], env: Record<string, string>): Times {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !last.startsWith('{'))
    throw new Error(`${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(last) as Times;
}

/** The caches of a run: ours, and NVRTC's machine code (CUDA_CACHE_PATH), both inside `cache`. */
const caches = (cache: string) => ({ CACHEDIR: cache, CUDA_CACHE_PATH: join(cache, 'nvrtc') });

const ours = (model: Model, cache: string) =>
  run([process.execPath, ...process.execArgv, self, '--child', model], { ...caches(cache), DEBUG: '0' });

/** tinygrad's figures, where TINYGRAD_PATH names its checkout: its kernel cache is the CACHEDB file. */
const peer = (model: Model, cache: string): Times | undefined => {
  const path = process.env.TINYGRAD_PATH;
  if (path === undefined) return undefined;
  const script = join(self, '..', 'firststep_peer.py');
  return run(['python3', script, model, String(LATER)], {
    PYTHONPATH: path,
    CACHEDB: join(cache, 'tinygrad.db'),
    CUDA_CACHE_PATH: join(cache, 'tinygrad-nvrtc'),
  });
};

/** `npm start -- --steps N`'s wall time in seconds, with the cache directory `cache`. */
function npmStart(steps: number, cache: string): number {
  const t = performance.now();
  const r = spawnSync('npx', ['tsx', 'examples/mnist.ts', '--steps', String(steps)], {
    env: { ...process.env, ...caches(cache) },
    cwd: join(self, '..', '..'),
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`npm start failed:\n${r.stdout}\n${r.stderr}`);
  return (performance.now() - t) / 1000;
}

function main(): void {
  const models = args.filter((a) => a in WORKLOADS) as Model[];
  // --start alone times only npm start
  const all = args.includes('--start') ? [] : (Object.keys(WORKLOADS) as Model[]);
  const chosen = models.length > 0 ? models : all;
  const s = (x: number | undefined) => (x === undefined ? '-' : x.toFixed(2)).padStart(8);
  console.log(
    `${'model'.padEnd(36)} ${'cache'.padEnd(6)} ${'init s'.padStart(8)} ${'first s'.padStart(8)} ${'cpu s'.padStart(8)} ${'cc cpu s'.padStart(8)} ${'2nd+opt s'.padStart(9)} ${'later s'.padStart(8)} ${'tg first'.padStart(8)} ${'tg later'.padStart(8)}  results`,
  );
  for (const model of chosen) {
    const cache = mkdtempSync(join(tmpdir(), 'tsgrad-firststep-'));
    try {
      for (const state of ['empty', 'warm'] as const) {
        const t = ours(model, cache);
        const tg = peer(model, cache);
        console.log(
          `${TITLES[model].padEnd(36)} ${state.padEnd(6)} ${s(t.init)} ${s(t.first)} ${s(t.own)} ${s(t.compiler)} ${s(t.second).padStart(9)} ${s(t.later)} ${s(tg?.first)} ${s(tg?.later)}  ${t.results}`,
        );
      }
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  }
  const start = args.indexOf('--start');
  if (start >= 0) {
    const steps = Number(args[start + 1] ?? 600);
    const cache = mkdtempSync(join(tmpdir(), 'tsgrad-firststep-'));
    try {
      const empty = npmStart(steps, cache);
      const warm = npmStart(steps, cache);
      console.log(
        `\nnpm start -- --steps ${steps}: ${empty.toFixed(1)} s with an empty cache, ${warm.toFixed(1)} s warm`,
      );
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  }
}

if (args[0] === '--child') measure(args[1] as Model);
else main();
