// Accuracy and speed of long float32 reductions beside numpy's: x.sum() of uniform [0, 1) values and of ones,
// mean and var, against exact sums of the same float32 data. Usage: npx tsx bench/sum.ts [DEV] (SIZES=1e6,1e7
// sets the lengths, ROUNDS the timed runs; numpy's figures need python3 with numpy).
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Device, Tensor } from '../src/index.ts';
import { best } from './timing.ts';

const device = process.argv[2] ?? Device.default;
const sizes = (process.env.SIZES ?? '1e6,1e7,1e8').split(',').map(Number);
const rounds = Number(process.env.ROUNDS ?? 3);

/** Uniform [0, 1) float32 values from a fixed-seed generator. */
function uniform(n: number): Float32Array {
  const data = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = s / 2 ** 32;
  }
  return data;
}

/** The sum of the values with a compensated (Neumaier) double accumulator: exact to about 1e-16. */
function exactSum(data: Float32Array, f: (x: number) => number = (x) => x): number {
  let sum = 0;
  let c = 0;
  for (let i = 0; i < data.length; i++) {
    const x = f(data[i]!);
    const t = sum + x;
    c += Math.abs(sum) >= Math.abs(x) ? sum - t + x : x - t + sum;
    sum = t;
  }
  return sum + c;
}

const rel = (got: number, want: number) => Math.abs(got - want) / Math.abs(want);
const fmt = (e: number) => (e === 0 ? '0' : e.toExponential(1));

console.log(`device: ${device}; relative errors against exact sums; GB/s best of ${rounds}\n`);
console.log(
  `${'what'.padEnd(28)} ${'tsgrad err'.padStart(10)} ${'numpy err'.padStart(10)} ${'tsgrad GB/s'.padStart(12)} ${'numpy GB/s'.padStart(11)}`,
);
for (const n of sizes) {
  const data = uniform(n);
  const x = new Tensor(data, { device }).realize();
  const sum = exactSum(data);
  const mean = sum / n;
  const variance = exactSum(data, (v) => (v - mean) ** 2) / (n - 1);
  const ones = Tensor.ones([n], { device }).contiguous().realize();
  const gbs = (fn: () => Tensor) => (4 * n) / best(fn, rounds) / 1e9;
  const peer = numpy(data);
  const row = (what: string, err: number, speed?: number, peerErr?: number, peerSpeed?: number) =>
    console.log(
      `${what.padEnd(28)} ${fmt(err).padStart(10)} ${(peerErr === undefined ? '' : fmt(peerErr)).padStart(10)} ${(speed === undefined ? '' : speed.toFixed(1)).padStart(12)} ${(peerSpeed === undefined ? '' : peerSpeed.toFixed(1)).padStart(11)}`,
    );
  const label = n.toExponential(0).replace('+', '');
  row(
    `sum of ${label} uniform`,
    rel(x.sum().item() as number, sum),
    gbs(() => x.sum()),
    peer?.sumErr(sum),
    peer?.sumGBs,
  );
  row(
    `sum of ${label} ones`,
    rel(ones.sum().item() as number, n),
    gbs(() => ones.sum()),
    peer?.onesErr(n),
  );
  row(`mean of ${label} uniform`, rel(x.mean().item() as number, mean), undefined, peer?.meanErr(mean));
  row(`var of ${label} uniform`, rel(x.var().item() as number, variance), undefined, peer?.varErr(variance));
  x.dispose();
  ones.dispose();
}

/** numpy's results on the same data, or undefined without numpy. */
function numpy(data: Float32Array) {
  const file = join(tmpdir(), `tsgrad-sum-${process.pid}.f32`);
  writeFileSync(file, data);
  const script = fileURLToPath(new URL('./sum_peer.py', import.meta.url));
  const r = spawnSync('python3', [script, file], { encoding: 'utf8' });
  rmSync(file);
  if (r.status !== 0) return undefined;
  const p = JSON.parse(r.stdout) as Record<string, number>;
  return {
    sumErr: (want: number) => rel(p.sum!, want),
    onesErr: (want: number) => rel(p.ones!, want),
    meanErr: (want: number) => rel(p.mean!, want),
    varErr: (want: number) => rel(p.var!, want),
    sumGBs: p.sumGBs,
  };
}
