// The host cost of eager ops: us per call of a few small ops realized one at a time (no JIT), after warm-up, so
// every call reuses a cached schedule and compiled kernel. Wall and CPU time (process.cpuUsage, this process's
// user + system: on a shared machine it is the steadier figure). Results are dropped, not disposed, as user
// code does; the loop yields every 500 calls so that collected buffers go back to the allocator.
// Usage: npx tsx bench/eager.ts [DEVICE] [CALLS] (defaults NULL, 20000); CUDA on the GPU machine.

import { Device, Tensor } from '../src/index.ts';

const device = Device.canonicalize(process.argv[2] ?? 'NULL');
const CALLS = Number(process.argv[3] ?? 20000);
const CHUNK = 500;

const x = new Tensor(new Float32Array(1024).fill(1.5), { device }).realize();
const y = new Tensor(new Float32Array(1024).fill(0.5), { device }).realize();
const m = new Tensor(new Float32Array(64 * 64).fill(0.25), { device }).reshape([64, 64]).realize();

const cases: [string, () => unknown][] = [
  ['x.add(1) (graph only)', () => x.add(1)],
  ['x.add(1).realize()', () => x.add(1).realize()],
  ['x.mul(y).realize()', () => x.mul(y).realize()],
  ['x.add(1).mul(2).relu().realize()', () => x.add(1).mul(2).relu().realize()],
  ['x.sum().realize()', () => x.sum().realize()],
  ['m.matmul(m).realize()', () => m.matmul(m).realize()],
];

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

// warm-up, every case before any is timed: schedules, compiles, the JS engine's optimizing tiers, the heap's size
for (const [, fn] of cases) await perCall(fn, 4 * CHUNK);
const rows = [['op', 'wall us/call', 'cpu us/call']];
for (const [name, fn] of cases) {
  const { wall, cpu } = await perCall(fn, CALLS);
  rows.push([name, wall.toFixed(2), cpu.toFixed(2)]);
}
console.log(`${device}, ${CALLS} calls per op, 1024 float32 (matmul 64x64)`);
const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
for (const r of rows)
  console.log(r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  '));
