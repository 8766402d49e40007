// Speed of generated kernels (matmul, elementwise, sum, copy, softmax, conv2d) and of the compiler itself,
// beside numpy's figures when python3 has numpy. Usage: npm run bench:ops [-- DEV]. This machine's speed
// drifts by 2x over seconds (other tenants), so both sides are timed in turns, ROUNDS times, and each
// figure is its best round.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Context, Device, type Tensor } from '../src/index.ts';
import { best, rand as randOn } from './timing.ts';

const device = process.argv[2] ?? Device.default;
const rand = (shape: number[]) => randOn(shape, device);
const ROUNDS = Number(process.env.ROUNDS ?? 2);

interface Row {
  value: number;
  unit: string;
  peer?: number;
}
const rows = new Map<string, Row>();
/** Keeps the better of this figure and the same row's from earlier rounds (rates higher, times lower). */
function record(what: string, value: number, unit: string, peer?: number): void {
  const old = rows.get(what);
  const better = (a: number, b: number | undefined) =>
    b === undefined ? a : unit === 'ms' ? Math.min(a, b) : Math.max(a, b);
  rows.set(what, {
    value: better(value, old?.value),
    unit,
    peer: peer === undefined ? old?.peer : better(peer, old?.peer),
  });
}

const square = [512, 1024, 2048].map((n) => ({ n, a: rand([n, n]).realize(), b: rand([n, n]).realize() }));
const n24 = 1 << 24;
const [x, y] = [rand([n24]).realize(), rand([n24]).realize()];
const s = rand([1 << 26]).realize();
// a plain copy (of a view, so that it is a kernel) is the bandwidth a streaming kernel can expect; it is
// assigned into a buffer that exists, as numpy's copyto is: a fresh 256 MB output costs its page faults
const m = (1 << 26) - 16;
const dst = rand([m]).realize();
const sm = rand([4096, 1024]).realize();
// conv2d: batch 32, 64 to 64 channels, 3x3, 56x56, padding 1; and the matmul of the same size: an output
// pixel per row (M), a 3x3 window of 64 channels per column (K)
const image = rand([32, 64, 56, 56]).realize();
const kernel = rand([64, 64, 3, 3]).realize();
const [M, K, N] = [32 * 56 * 56, 64 * 9, 64];
const convMatmul = `matmul ${M}x${K}x${N} (conv2d's size)`;
const [ma, mb] = [rand([M, K]).realize(), rand([K, N]).realize()];
/** Figures compared within the run: row `of` / row `to`, for tsgrad and for numpy. */
const ratios = [
  { what: "sum's GB/s / a copy's", of: 'sum of 2^26 f32', to: 'copy of 2^26 f32 (read + write)' },
  { what: "conv2d's GFLOP/s / its matmul's", of: 'conv2d 32x64x56x56, 64 3x3, pad 1', to: convMatmul },
];

for (let round = 0; round < ROUNDS; round++) {
  const peer = runPeer();
  for (const { n, a, b } of square) {
    const t = best(() => a.matmul(b), n >= 2048 ? 1 : 3);
    record(`matmul ${n}^3 f32`, (2 * n ** 3) / t / 1e9, 'GFLOP/s', peer?.[`matmul${n}`]);
  }
  const gbs = (seconds: number) => (3 * 4 * n24) / seconds / 1e9;
  record('fused x*y+1, 2^24 f32', gbs(best(() => x.mul(y).add(1))), 'GB/s', peer?.fused);
  // numpy's 64 MiB result is a new mapping every run (glibc maps blocks past 32 MiB afresh): ours too here
  const fresh = best(() => x.mul(y).add(1), 3, { keep: true });
  record('fused x*y+1, 2^24 f32, new memory', gbs(fresh), 'GB/s', peer?.fused);
  record('sum of 2^26 f32', (4 * (1 << 26)) / best(() => s.sum()) / 1e9, 'GB/s', peer?.sum);
  const tc = best(() => dst.assign(s.shrink([[16, 1 << 26]])), 3, { keep: true });
  record('copy of 2^26 f32 (read + write)', (8 * m) / tc / 1e9, 'GB/s', peer?.copy);
  const ts = best(() =>
    sm
      .sub(sm.max(1, true))
      .exp()
      .div(sm.sub(sm.max(1, true)).exp().sum(1, true)),
  );
  record('softmax 4096x1024 f32', (2 * 4 * 4096 * 1024) / ts / 1e9, 'GB/s', peer?.softmax);
  const tconv = best(() => image.conv2d(kernel, undefined, { padding: 1 }), 1);
  const convFlops = 2 * 32 * 64 * 56 * 56 * 64 * 9;
  record('conv2d 32x64x56x56, 64 3x3, pad 1', convFlops / tconv / 1e9, 'GFLOP/s', peer?.conv2d);
  const tm = best(() => ma.matmul(mb), 1);
  record(convMatmul, (2 * M * K * N) / tm / 1e9, 'GFLOP/s', peer?.convMatmul);
}
{
  // the compiler, once (a second round would find its caches warm): scheduling and codegen of an 8-layer
  // MLP's forward pass on NULL (nothing compiles or runs)
  const layers = Array.from({ length: 8 }, () => ({
    w: rand([256, 256]).to('NULL'),
    b: rand([256]).to('NULL'),
  }));
  const forward = (x: Tensor) => layers.reduce((h, { w, b }) => h.matmul(w).add(b).relu(), x);
  const x = rand([64, 256]).to('NULL');
  let t0 = performance.now();
  forward(x).realize();
  record('8-layer MLP forward: schedule + codegen', performance.now() - t0, 'ms');
  t0 = performance.now();
  forward(x).realize();
  record('8-layer MLP forward: cached schedule', performance.now() - t0, 'ms');
  // and with the C compiler, the disk cache off so every kernel really compiles
  const cpu = layers.map(({ w, b }) => ({ w: rand(w.shape).to(device), b: rand(b.shape).to(device) }));
  const xc = rand([64, 256]);
  t0 = performance.now();
  Context.with({ CACHELEVEL: 0 }, () => cpu.reduce((h, { w, b }) => h.matmul(w).add(b).relu(), xc).realize());
  record(`8-layer MLP forward: schedule + compile (${device})`, performance.now() - t0, 'ms');
}

console.log(`device: ${device}, best of ${ROUNDS} rounds\n`);
console.log(
  `${'what'.padEnd(42)} ${'tsgrad'.padStart(10)} ${'numpy'.padStart(10)} ${'ratio'.padStart(7)}  unit`,
);
for (const [what, r] of rows) {
  const p = r.peer === undefined ? '' : r.peer.toFixed(1);
  const ratio = r.peer === undefined ? '' : `${((r.value / r.peer) * 100).toFixed(0)}%`;
  console.log(
    `${what.padEnd(42)} ${r.value.toFixed(1).padStart(10)} ${p.padStart(10)} ${ratio.padStart(7)}  ${r.unit}`,
  );
}
console.log(`\n${'ratios within the run'.padEnd(42)} ${'tsgrad'.padStart(10)} ${'numpy'.padStart(10)}`);
const percent = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? '' : `${((a / b) * 100).toFixed(0)}%`;
for (const { what, of, to } of ratios) {
  const [a, b] = [rows.get(of)!, rows.get(to)!];
  console.log(
    `${what.padEnd(42)} ${percent(a.value, b.value).padStart(10)} ${percent(a.peer, b.peer).padStart(10)}`,
  );
}
if ([...rows.values()].every((r) => r.peer === undefined))
  console.log('\n(numpy figures need python3 with numpy)');

function runPeer(): Record<string, number> | undefined {
  const script = fileURLToPath(new URL('./ops_peer.py', import.meta.url));
  const r = spawnSync('python3', [script], { encoding: 'utf8' });
  return r.status === 0 ? (JSON.parse(r.stdout) as Record<string, number>) : undefined;
}
