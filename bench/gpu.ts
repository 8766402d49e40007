// GPU throughput beside PyTorch's (bench/gpu_peer.py, where python3 has torch with CUDA) and tinygrad's
// (bench/gpu_tinygrad.py, where TINYGRAD_PATH names a checkout) from the same run: bandwidth of elementwise
// kernels and a sum, matmuls in float32, float16 and bfloat16, and the cost of a launch.
// Usage: npx tsx bench/gpu.ts [DEV]   (DEV defaults to CUDA)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { lowerKernel } from '../src/codegen/index.ts';
import { printOpts } from '../src/codegen/opt/opts.ts';
import { targetOf } from '../src/engine/compile.ts';
import { recordLaunches, scheduleOf } from '../src/engine/realize.ts';
import { Device, dtypes, jit, Tensor } from '../src/index.ts';
import type { CUDABackend } from '../src/runtime/cuda.ts';

const device = process.argv[2] ?? 'CUDA';
const backend = Device.get(device);

const WARMUP = 20;
/**
 * Median seconds of one call of `fn` (its output realized and the device synchronized), after 20 warm-up calls:
 * V8 optimizes a realize's host work over its first ~10 calls (x*y+1's 112 us a call there, 30 after, on the
 * 2-core VM), and a loop's calls run optimized.
 */
function timeIt(fn: () => Tensor, runs = 10): number {
  for (let i = 0; i < WARMUP; i++) fn().realize().dispose();
  backend.synchronize();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const out = fn().realize();
    backend.synchronize();
    times.push((performance.now() - t0) / 1000);
    out.dispose();
  }
  return times.sort((a, b) => a - b)[runs >> 1]!;
}

const rand = (shape: number[], dtype = dtypes.float32) =>
  Tensor.rand(shape, { device }).cast(dtype).contiguous().realize();

interface Row {
  what: string;
  unit: 'GB/s' | 'TFLOP/s' | 'us';
  ours: number;
}
const rows: Row[] = [];
const kernels: string[] = [];
const N = 1 << 28;
{
  const x = rand([N]);
  const y = rand([N]);
  rows.push({ what: 'copy 2^28 f32 (neg)', unit: 'GB/s', ours: (8 * N) / timeIt(() => x.neg()) / 1e9 });
  rows.push({ what: 'x*y+1 2^28 f32', unit: 'GB/s', ours: (12 * N) / timeIt(() => x.mul(y).add(1)) / 1e9 });
  rows.push({ what: 'sum 2^28 f32', unit: 'GB/s', ours: (4 * N) / timeIt(() => x.sum()) / 1e9 });
  // the same kernels replayed by a JIT (prebuilt launches): a realize's own host work (60-140 us a call on the
  // H200's host, bench/bandwidth.ts) is up to a quarter of a copy's time; torch's eager call adds ~10 us
  const replay = (f: (a: Tensor, b: Tensor) => Tensor) => {
    const step = jit(f);
    return () => step(x, y);
  };
  for (const [what, bytes, f] of [
    ['copy 2^28 f32 (neg), jit', 8 * N, (a: Tensor) => a.neg()],
    ['x*y+1 2^28 f32, jit', 12 * N, (a: Tensor, b: Tensor) => a.mul(b).add(1)],
    ['sum 2^28 f32, jit', 4 * N, (a: Tensor) => a.sum()],
  ] as const)
    rows.push({ what, unit: 'GB/s', ours: bytes / timeIt(replay(f)) / 1e9 });
  x.dispose();
  y.dispose();
}
{
  // host <-> GPU copies of 256 MiB from and into ordinary (pageable) JS memory, as a user's data moves
  const bytes = 1 << 28;
  const host = new Uint8Array(bytes).fill(1);
  const mem = backend.allocator.alloc(bytes);
  const copyTime = (copy: () => void) => {
    copy();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      copy();
      backend.synchronize();
      times.push((performance.now() - t0) / 1000);
    }
    return times.sort((a, b) => a - b)[2]!;
  };
  rows.push({
    what: 'copy host->GPU 256 MiB',
    unit: 'GB/s',
    ours: bytes / copyTime(() => backend.allocator.copyin(mem, host)) / 1e9,
  });
  rows.push({
    what: 'copy GPU->host 256 MiB',
    unit: 'GB/s',
    ours: bytes / copyTime(() => backend.allocator.copyout(host, mem)) / 1e9,
  });
  backend.allocator.free(mem, bytes);
}
for (const [n, dtype] of [
  [4096, dtypes.float32],
  [4096, dtypes.float16],
  [4096, dtypes.bfloat16],
  [8192, dtypes.float16],
  [8192, dtypes.bfloat16],
] as const) {
  const a = rand([n, n], dtype);
  const b = rand([n, n], dtype);
  const s = timeIt(() => a.matmul(b), n >= 8192 ? 3 : 5);
  rows.push({ what: `matmul ${n}^3 ${dtype.name}`, unit: 'TFLOP/s', ours: (2 * n ** 3) / s / 1e12 });
  // the kernel alone, by events around its launch (median of 5), beside the eager call's figure
  let out: Tensor | undefined;
  const [launch] = recordLaunches(() => {
    out = a.matmul(b).realize();
  }).launches;
  const events = Array.from({ length: 5 }, () => launch!.program.run(launch!.bufs, [], true)).sort(
    (x, y) => x - y,
  )[2]!;
  out?.dispose();
  // the hand-coded opts the kernel got (BEAM=n searches its own: DEBUG=3 prints those)
  const { ast } = scheduleOf([a.matmul(b)]).kernels.at(-1)!;
  const { name, opts } = lowerKernel(ast, { target: targetOf(backend) });
  kernels.push(
    `matmul ${n}^3 ${dtype.name}: kernel ${((2 * n ** 3) / events / 1e12).toFixed(1)} TFLOP/s by events; ${name} ${printOpts(opts)}`,
  );
  a.dispose();
  b.dispose();
}
{
  const x = rand([1024]);
  const runs = 200;
  x.add(1).realize();
  backend.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) x.add(1).realize();
  backend.synchronize();
  rows.push({
    what: 'x+1 on 1024 (realize call)',
    unit: 'us',
    ours: ((performance.now() - t0) / runs) * 1000,
  });
  // a JIT replays recorded launches: 16 kernels a call (each op realized, so none fuse)
  const step = jit((a: Tensor) => {
    let y = a;
    for (let i = 0; i < 16; i++) y = y.add(1).realize();
    return y;
  });
  for (let i = 0; i < 3; i++) step(x);
  backend.synchronize();
  const t1 = performance.now();
  for (let i = 0; i < runs; i++) step(x);
  backend.synchronize();
  rows.push({
    what: 'jit replay, per kernel',
    unit: 'us',
    ours: ((performance.now() - t1) / runs / 16) * 1000,
  });
}

const torch = runPeer('gpu_peer.py');
const tinygrad = process.env.TINYGRAD_PATH ? runPeer('gpu_tinygrad.py') : undefined;
const name = device.startsWith('CUDA') ? (backend as CUDABackend).description : device;
console.log(`\ndevice: ${name}; each figure the median of its runs; the peers from the same run\n`);
console.log(
  `${'what'.padEnd(30)} ${'tsgrad'.padStart(9)} ${'torch'.padStart(9)} ${'ratio'.padStart(6)} ${'tinygrad'.padStart(9)} ${'ratio'.padStart(6)}  unit`,
);
for (const r of rows) {
  const cells = [torch, tinygrad].map((peer) => {
    const p = peer?.[r.what];
    const ratio = p === undefined ? '' : (r.unit === 'us' ? p / r.ours : r.ours / p).toFixed(2);
    return `${(p?.toFixed(1) ?? '-').padStart(9)} ${ratio.padStart(6)}`;
  });
  console.log(`${r.what.padEnd(30)} ${r.ours.toFixed(1).padStart(9)} ${cells.join(' ')}  ${r.unit}`);
}
console.log(
  `\nmatmul kernels (heuristic opts${process.env.BEAM ? '; BEAM chose its own' : ''}):\n${kernels.join('\n')}`,
);
const copy = torch?.['copy 2^28 f32 (neg)'];
if (copy !== undefined)
  console.log(
    `\nover torch's copy: ${rows
      .filter((r) => r.unit === 'GB/s' && r.what.includes('2^28'))
      .map((r) => `${r.what} ${(r.ours / copy).toFixed(2)}`)
      .join(', ')}`,
  );
if (torch === undefined) console.log('\n(torch figures need python3 with torch and a GPU)');

function runPeer(file: string): Record<string, number> | undefined {
  const script = fileURLToPath(new URL(`./${file}`, import.meta.url));
  const r = spawnSync('python3', [script], { encoding: 'utf8' });
  if (r.status !== 0) console.error(`${file}: ${r.stderr.slice(-2000)}`);
  return r.status === 0
    ? (JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, number>)
    : undefined;
}
