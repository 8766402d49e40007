// f32 matmul GFLOP/s with the default opts and under BEAM=2, beside numpy's (OpenBLAS) when python3 has
// numpy. Usage: npm run bench:matmul [-- DEV [sizes...]]. This machine's speed drifts by 2x over seconds
// (other tenants), so both sides are timed in turns, ROUNDS times, and each figure is its best round.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, Device } from '../src/index.ts';
import { best, rand as randOn } from './timing.ts';

const device = process.argv[2] ?? Device.default;
const rand = (shape: number[]) => randOn(shape, device);
const sizes = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [512, 1024, 2048];
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const inputs = sizes.map((n) => [rand([n, n]).realize(), rand([n, n]).realize()] as const);
/** Best GFLOP/s so far by row, and numpy's by size. */
const ours = new Map<string, number>();
const numpy = new Map<number, number>();
const keep = <K>(m: Map<K, number>, k: K, v: number) => m.set(k, Math.max(m.get(k) ?? 0, v));
for (let round = 0; round < ROUNDS; round++) {
  const peer = runPeer();
  for (const [i, n] of sizes.entries()) {
    const [a, b] = inputs[i]!;
    const runs = n >= 2048 ? 3 : 5;
    const gflops = (seconds: number) => (2 * n ** 3) / seconds / 1e9;
    if (peer?.[String(n)] !== undefined) keep(numpy, n, peer[String(n)]!);
    keep(ours, `matmul ${n}^3 f32`, gflops(best(() => a.matmul(b), runs)));
    keep(
      ours,
      `matmul ${n}^3 f32, BEAM=2`,
      Context.with({ BEAM: 2 }, () => gflops(best(() => a.matmul(b), runs))),
    );
  }
}

console.log(`device: ${device}, best of ${ROUNDS} rounds\n`);
console.log(
  `${'what'.padEnd(26)} ${'tsgrad'.padStart(9)} ${'numpy'.padStart(9)} ${'ratio'.padStart(7)}  GFLOP/s`,
);
for (const [what, value] of ours) {
  const p = numpy.get(Number(/\d+/.exec(what)![0]));
  const ratio = p === undefined ? '' : `${((value / p) * 100).toFixed(1)}%`;
  console.log(
    `${what.padEnd(26)} ${value.toFixed(1).padStart(9)} ${(p?.toFixed(1) ?? '').padStart(9)} ${ratio.padStart(7)}`,
  );
}
if (numpy.size === 0) console.log('\n(numpy figures need python3 with numpy)');

function runPeer(): Record<string, number> | undefined {
  const script = fileURLToPath(new URL('./matmul_peer.py', import.meta.url));
  const r = spawnSync('python3', [script, ...sizes.map(String)], { encoding: 'utf8' });
  return r.status === 0 ? (JSON.parse(r.stdout) as Record<string, number>) : undefined;
}
