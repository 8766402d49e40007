// The host cost of eager ops: us per call of a few small ops realized one at a time (no JIT), so every call after
// the first reuses a cached schedule and compiled kernel. Two phases:
// - cold: calls 2-19 and 20-60 of one op in a fresh process (the first call schedules and compiles), before V8 has
//   optimized the path: what a user's first steps, and bench/gpu.ts's 20 warm-up calls, pay. Each figure is the
//   median over PROCS processes of the mean wall time of those calls, and of the CPU time of calls 20-60
//   (process.cpuUsage: this process's user + system, V8's background compiler threads included).
// - steady: after warm-up, wall and CPU time per call over CALLS calls (on a shared machine CPU is the steadier).
// Results are dropped, not disposed, as user code does; loops yield every 500 calls so that collected buffers go
// back to the allocator.
// Usage: npx tsx bench/eager.ts [DEVICE] [CALLS] [PROCS] (defaults NULL, 20000, 5); CUDA on the GPU machine.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Device, dtypes, Tensor } from '../src/index.ts';

const child = process.argv[2] === '--child';
const args = child ? process.argv.slice(4) : process.argv.slice(2);
const device = Device.canonicalize(args[0] ?? 'NULL');
const CALLS = Number(args[1] ?? 20000);
const PROCS = Number(args[2] ?? 5);
const CHUNK = 500;

const x = new Tensor(new Float32Array(1024).fill(1.5), { device }).realize();
const y = new Tensor(new Float32Array(1024).fill(0.5), { device }).realize();
const m = new Tensor(new Float32Array(64 * 64).fill(0.25), { device }).reshape([64, 64]).realize();
// bench/gpu.ts's shapes, made on first use (a case's fresh process makes only its own): on NULL they hold no memory
const lazy = <T>(make: () => T) => {
  let v: T | undefined;
  return () => (v ??= make());
};
const big = (shape: number[], dtype = dtypes.float32) =>
  lazy(() => Tensor.zeros(shape, { device, dtype }).contiguous().realize());
const h = big([4096, 4096], dtypes.float16);
const v = big([2 ** 28]);

const cases: [string, () => unknown][] = [
  ['x.add(1) (graph only)', () => x.add(1)],
  ['x.add(1).realize()', () => x.add(1).realize()],
  ['x.mul(y).realize()', () => x.mul(y).realize()],
  ['x.add(1).mul(2).relu().realize()', () => x.add(1).mul(2).relu().realize()],
  ['x.mul(y).add(1).realize()', () => x.mul(y).add(1).realize()],
  ['x.sum().realize()', () => x.sum().realize()],
  ['v.sum().realize() (2^28)', () => v().sum().realize()],
  ['m.matmul(m).realize()', () => m.matmul(m).realize()],
  ['h.matmul(h).realize() (f16 4096^2)', () => h().matmul(h()).realize()],
  ['m.T.add(m).realize()', () => m.T.add(m).realize()],
  ['m.get([0, 32], [16, 48]).mul(2).realize()', () => m.get([0, 32], [16, 48]).mul(2).realize()],
];

/** The cold phase of one case in this (fresh) process: us per call, mean of calls 2-19 and 20-60, and CPU of 20-60. */
async function coldChild(fn: () => unknown): Promise<void> {
  const backend = Device.get(device);
  const wall: number[] = [];
  let cpu0 = process.cpuUsage();
  for (let i = 1; i <= 60; i++) {
    if (i === 20) cpu0 = process.cpuUsage();
    const t0 = performance.now();
    fn();
    wall.push((performance.now() - t0) * 1e3);
  }
  const cpu = process.cpuUsage(cpu0);
  await backend.idle();
  const mean = (from: number, to: number) =>
    wall.slice(from - 1, to).reduce((a, b) => a + b, 0) / (to - from + 1);
  console.log(
    JSON.stringify({
      first: wall[0]! / 1e3,
      early: mean(2, 19),
      cold: mean(20, 60),
      cpu: (cpu.user + cpu.system) / 41,
    }),
  );
}

/** us per call (wall and CPU) of `calls` calls, yielding every CHUNK calls, and the device drained at the end. */
async function perCall(fn: () => unknown, calls: number) {
  const backend = Device.get(device);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let done = 0; done < calls; done += CHUNK) {
    for (let i = 0; i < CHUNK; i++) fn();
    await new Promise((r) => setImmediate(r));
  }
  await backend.idle();
  const cpu = process.cpuUsage(cpu0);
  return { wall: ((performance.now() - t0) * 1e3) / calls, cpu: (cpu.user + cpu.system) / calls };
}

interface Cold {
  first: number;
  early: number;
  cold: number;
  cpu: number;
}

/** Each figure's median over PROCS fresh processes running case `index`. */
function coldPhase(index: number): Cold {
  const self = fileURLToPath(import.meta.url);
  const runs = Array.from({ length: PROCS }, (): Cold => {
    const argv = [...process.execArgv, self, '--child', String(index), device];
    const r = spawnSync(process.execPath, argv, { encoding: 'utf8', env: { ...process.env, DEBUG: '0' } });
    const last = r.stdout.trim().split('\n').at(-1) ?? '';
    if (r.status !== 0 || !last.startsWith('{'))
      throw new Error(`eager bench child ${index} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
    return JSON.parse(last) as Cold;
  });
  const median = (f: (c: Cold) => number) => runs.map(f).sort((a, b) => a - b)[PROCS >> 1]!;
  return {
    first: median((c) => c.first),
    early: median((c) => c.early),
    cold: median((c) => c.cold),
    cpu: median((c) => c.cpu),
  };
}

if (child) await coldChild(cases[Number(process.argv[3])]![1]);
else {
  const rows = [['op', 'first ms', '2-19 us', '20-60 us', '20-60 cpu', 'steady us', 'steady cpu']];
  const cold = cases.map((_, i) => coldPhase(i));
  // warm-up, every case before any is timed: schedules, compiles, the JS engine's optimizing tiers, the heap's size
  for (const [, fn] of cases) await perCall(fn, 4 * CHUNK);
  for (const [i, [name, fn]] of cases.entries()) {
    const { wall, cpu } = await perCall(fn, CALLS);
    const c = cold[i]!;
    rows.push([
      name,
      c.first.toFixed(1),
      c.early.toFixed(1),
      c.cold.toFixed(1),
      c.cpu.toFixed(1),
      wall.toFixed(2),
      cpu.toFixed(2),
    ]);
  }
  console.log(
    `${device}, 1024 float32 (m 64x64, h 4096x4096 float16, v 2^28 float32); cold: median of ${PROCS} fresh processes; steady: ${CALLS} calls per op after warm-up`,
  );
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
  for (const r of rows)
    console.log(r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  '));
}
