// Speed of generated kernels (matmul, elementwise, sum, copy, softmax, conv2d) and of the compiler itself,
// beside numpy's figures from the same run when python3 has numpy. Usage: npm run bench:ops [-- DEV]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, Device, type Tensor } from '../src/index.ts';
import { best, rand as randOn } from './timing.ts';

const device = process.argv[2] ?? Device.default;
const rand = (shape: number[]) => randOn(shape, device);

interface Row {
  what: string;
  value: number;
  unit: string;
  peer?: number;
}
const rows: Row[] = [];
const row = (r: Row) => {
  rows.push(r);
  return r;
};
/** Figures compared within the run: of / to, for tsgrad and for numpy. */
const ratios: { what: string; of: Row; to: Row }[] = [];
const peer = runPeer();

for (const n of [512, 1024, 2048]) {
  const a = rand([n, n]).realize();
  const b = rand([n, n]).realize();
  const t = best(() => a.matmul(b), n >= 2048 ? 1 : 3);
  rows.push({
    what: `matmul ${n}^3 f32`,
    value: (2 * n ** 3) / t / 1e9,
    unit: 'GFLOP/s',
    peer: peer?.[`matmul${n}`],
  });
}
{
  const n = 1 << 24;
  const x = rand([n]).realize();
  const y = rand([n]).realize();
  const gbs = (seconds: number) => (3 * 4 * n) / seconds / 1e9;
  rows.push({
    what: 'fused x*y+1, 2^24 f32',
    value: gbs(best(() => x.mul(y).add(1))),
    unit: 'GB/s',
    peer: peer?.fused,
  });
  // numpy's 64 MiB result is a new mapping every run (glibc maps blocks past 32 MiB afresh): ours too here
  const fresh = best(() => x.mul(y).add(1), 3, { fresh: true });
  rows.push({
    what: 'fused x*y+1, 2^24 f32, new memory',
    value: gbs(fresh),
    unit: 'GB/s',
    peer: peer?.fused,
  });
  const s = rand([1 << 26]).realize();
  const tr = best(() => s.sum());
  const sum = row({
    what: 'sum of 2^26 f32',
    value: (4 * (1 << 26)) / tr / 1e9,
    unit: 'GB/s',
    peer: peer?.sum,
  });
  // a plain copy (of a view, so that it is a kernel) is the bandwidth a streaming kernel can expect; it is
  // assigned into a buffer that exists, as numpy's copyto is: a fresh 256 MB output costs its page faults
  const m = (1 << 26) - 16;
  const dst = rand([m]).realize();
  const tc = best(() => dst.assign(s.shrink([[16, 1 << 26]])));
  const copy = row({
    what: 'copy of 2^26 f32 (read + write)',
    value: (8 * m) / tc / 1e9,
    unit: 'GB/s',
    peer: peer?.copy,
  });
  ratios.push({ what: "sum's GB/s / a copy's", of: sum, to: copy });
}
{
  const x = rand([4096, 1024]).realize();
  const t = best(() =>
    x
      .sub(x.max(1, true))
      .exp()
      .div(x.sub(x.max(1, true)).exp().sum(1, true)),
  );
  rows.push({
    what: 'softmax 4096x1024 f32',
    value: (2 * 4 * 4096 * 1024) / t / 1e9,
    unit: 'GB/s',
    peer: peer?.softmax,
  });
}
{
  // conv2d: batch 32, 64 to 64 channels, 3x3, 56x56, padding 1
  const x = rand([32, 64, 56, 56]).realize();
  const w = rand([64, 64, 3, 3]).realize();
  const t = best(() => x.conv2d(w, undefined, { padding: 1 }), 1);
  const conv = row({
    what: 'conv2d 32x64x56x56, 64 3x3, pad 1',
    value: (2 * 32 * 64 * 56 * 56 * 64 * 9) / t / 1e9,
    unit: 'GFLOP/s',
    peer: peer?.conv2d,
  });
  // the matmul of the same size: an output pixel per row (M), a 3x3 window of 64 channels per column (K)
  const [M, K, N] = [32 * 56 * 56, 64 * 9, 64];
  const a = rand([M, K]).realize();
  const b = rand([K, N]).realize();
  const tm = best(() => a.matmul(b), 1);
  const mm = row({
    what: `matmul ${M}x${K}x${N} (conv2d's size)`,
    value: (2 * M * K * N) / tm / 1e9,
    unit: 'GFLOP/s',
    peer: peer?.convMatmul,
  });
  ratios.push({ what: "conv2d's GFLOP/s / its matmul's", of: conv, to: mm });
}
{
  // the compiler: scheduling and codegen of an 8-layer MLP's forward pass, on NULL (nothing compiles or runs)
  const layers = Array.from({ length: 8 }, () => ({
    w: rand([256, 256]).to('NULL'),
    b: rand([256]).to('NULL'),
  }));
  const forward = (x: Tensor) => layers.reduce((h, { w, b }) => h.matmul(w).add(b).relu(), x);
  const x = rand([64, 256]).to('NULL');
  let t0 = performance.now();
  forward(x).realize();
  rows.push({ what: '8-layer MLP forward: schedule + codegen', value: performance.now() - t0, unit: 'ms' });
  t0 = performance.now();
  forward(x).realize();
  rows.push({ what: '8-layer MLP forward: cached schedule', value: performance.now() - t0, unit: 'ms' });
  // and with the C compiler, the disk cache off so every kernel really compiles
  const cpu = layers.map(({ w, b }) => ({ w: rand(w.shape).to(device), b: rand(b.shape).to(device) }));
  const xc = rand([64, 256]);
  t0 = performance.now();
  Context.with({ CACHELEVEL: 0 }, () => cpu.reduce((h, { w, b }) => h.matmul(w).add(b).relu(), xc).realize());
  rows.push({
    what: `8-layer MLP forward: schedule + compile (${device})`,
    value: performance.now() - t0,
    unit: 'ms',
  });
}

console.log(`device: ${device}\n`);
console.log(
  `${'what'.padEnd(42)} ${'tsgrad'.padStart(10)} ${'numpy'.padStart(10)} ${'ratio'.padStart(7)}  unit`,
);
for (const r of rows) {
  const p = r.peer === undefined ? '' : r.peer.toFixed(1);
  const ratio = r.peer === undefined ? '' : `${((r.value / r.peer) * 100).toFixed(0)}%`;
  console.log(
    `${r.what.padEnd(42)} ${r.value.toFixed(1).padStart(10)} ${p.padStart(10)} ${ratio.padStart(7)}  ${r.unit}`,
  );
}
console.log(`\n${'ratios within the run'.padEnd(42)} ${'tsgrad'.padStart(10)} ${'numpy'.padStart(10)}`);
const percent = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? '' : `${((a / b) * 100).toFixed(0)}%`;
for (const { what, of, to } of ratios)
  console.log(
    `${what.padEnd(42)} ${percent(of.value, to.value).padStart(10)} ${percent(of.peer, to.peer).padStart(10)}`,
  );
if (peer === undefined) console.log('\n(numpy figures need python3 with numpy)');

function runPeer(): Record<string, number> | undefined {
  const script = fileURLToPath(new URL('./ops_peer.py', import.meta.url));
  const r = spawnSync('python3', [script], { encoding: 'utf8' });
  return r.status === 0 ? (JSON.parse(r.stdout) as Record<string, number>) : undefined;
}
