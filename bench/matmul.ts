// f32 matmul GFLOP/s with the default opts and under BEAM=2, beside numpy's
// (OpenBLAS) from the same run when python3 has numpy. Usage: npm run bench:matmul [-- DEV [sizes...]]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, Device } from '../src/index.ts';
import { best, rand as randOn } from './timing.ts';

const device = process.argv[2] ?? Device.default;
const rand = (shape: number[]) => randOn(shape, device);
const sizes = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [512, 1024, 2048];

const peer = runPeer();

const header = `${'what'.padEnd(26)} ${'tsgrad'.padStart(9)} ${'numpy'.padStart(9)} ${'ratio'.padStart(7)}  GFLOP/s`;
console.log(`device: ${device}\n\n${header}`);
for (const n of sizes) {
  const a = rand([n, n]).realize();
  const b = rand([n, n]).realize();
  const runs = n >= 2048 ? 3 : 5;
  const gflops = (seconds: number) => (2 * n ** 3) / seconds / 1e9;
  const p = peer?.[String(n)];
  const row = (what: string, value: number) => {
    const ratio = p === undefined ? '' : `${((value / p) * 100).toFixed(1)}%`;
    const numpy = p === undefined ? '' : p.toFixed(1);
    console.log(
      `${what.padEnd(26)} ${value.toFixed(1).padStart(9)} ${numpy.padStart(9)} ${ratio.padStart(7)}`,
    );
  };
  row(`matmul ${n}^3 f32`, gflops(best(() => a.matmul(b), runs)));
  row(
    `matmul ${n}^3 f32, BEAM=2`,
    Context.with({ BEAM: 2 }, () => gflops(best(() => a.matmul(b), runs))),
  );
}
if (peer === undefined) console.log('\n(numpy figures need python3 with numpy)');

function runPeer(): Record<string, number> | undefined {
  const script = fileURLToPath(new URL('./matmul_peer.py', import.meta.url));
  const r = spawnSync('python3', [script, ...sizes.map(String)], { encoding: 'utf8' });
  return r.status === 0 ? (JSON.parse(r.stdout) as Record<string, number>) : undefined;
}
