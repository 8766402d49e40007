// Memory bandwidth of elementwise kernels and a sum on a CUDA GPU: hand-written CUDA C variants (vector width,
// elements a thread, threads a block, one block a tile or a grid-stride loop, __ldg, streaming stores, blocks in
// flight) beside the kernels tsgrad generates (the heuristics' opts, or opts given as JSON) and torch's copy, all
// timed with events in one run, so that the shape the heuristics should make is measured, not guessed.
// Usage: npx tsx bench/bandwidth.ts [KERNEL=OPTS_JSON ...]   (KERNEL: neg, fma, or sumN for the sum's Nth kernel; a row each)
// SOURCES=dir writes the hand-written kernels there instead of running (for nvcc on a machine without a GPU).
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lowerKernel } from '../src/codegen/index.ts';
import { type Opt, printOpts } from '../src/codegen/opt/opts.ts';
import { dtypes } from '../src/dtype.ts';
import { targetOf } from '../src/engine/compile.ts';
import { scheduleOf } from '../src/engine/realize.ts';
import { renderCUDA } from '../src/renderer/c.ts';
import type { Program } from '../src/runtime/backend.ts';
import { DeviceBuffer } from '../src/runtime/buffer.ts';
import type { CUDABackend } from '../src/runtime/cuda.ts';
import { cudaDriver } from '../src/runtime/cuda-api.ts';
import { Device } from '../src/runtime/device.ts';
import { Tensor } from '../src/tensor/index.ts';
import '../src/node.ts';

const N = 1 << 28;
const N4 = N / 4;
const RUNS = 15;

/** One hand-written elementwise variant. */
interface Shape {
  /** floats a load moves: 1, 2 or 4 */
  vec: 1 | 2 | 4;
  /** vectors a thread loads (all before the first store) per step */
  per: number;
  threads: number;
  /** a grid-stride loop over this many blocks an SM; undefined: one block a tile */
  stride?: number;
  ldg?: boolean;
  /** streaming stores (st.global.cs) */
  cs?: boolean;
  /** __launch_bounds__'s minimum blocks an SM */
  minBlocks?: number;
}

const VEC = { 1: 'float', 2: 'float2', 4: 'float4' } as const;
const shapeName = (s: Shape) =>
  `v${s.vec} x${s.per} t${s.threads}${s.stride ? ` stride${s.stride}` : ''}${s.ldg ? ' ldg' : ''}${s.cs ? ' cs' : ''}${s.minBlocks ? ` min${s.minBlocks}` : ''}`;

const lanes = (v: number) => ['x', 'y', 'z', 'w'].slice(0, v);

/** out = -a (neg) or a*b+1 (fma), in the shape `s`: each step a thread loads `per` vectors `threads` apart. */
function elementwise(
  name: string,
  op: 'neg' | 'fma',
  s: Shape,
  sms: number,
): { source: string; grid: number } {
  const T = VEC[s.vec];
  const n = N / s.vec;
  const tile = s.threads * s.per;
  const grid = s.stride ? sms * s.stride : n / tile;
  const load = (p: string) => (s.ldg ? `__ldg(${p})` : `*(${p})`);
  const f = (v: string) =>
    op === 'neg'
      ? `make_${T}(${lanes(s.vec)
          .map((l) => `-a${v}.${l}`)
          .join(', ')})`
      : `make_${T}(${lanes(s.vec)
          .map((l) => `a${v}.${l} * b${v}.${l} + 1.0f`)
          .join(', ')})`;
  const fs = s.vec === 1 ? (op === 'neg' ? '-a[e]' : 'a[e] * b[e] + 1.0f') : f('[e]');
  const store = (p: string, v: string) => (s.cs ? `__stcs(${p}, ${v})` : `*(${p}) = ${v}`);
  const body = `
    ${T} a[${s.per}]${op === 'fma' ? `, b[${s.per}]` : ''};
#pragma unroll
    for (int e = 0; e < ${s.per}; e++) {
      a[e] = ${load(`x + i + e * ${s.threads}`)};${op === 'fma' ? ` b[e] = ${load(`y + i + e * ${s.threads}`)};` : ''}
    }
#pragma unroll
    for (int e = 0; e < ${s.per}; e++) ${store(`out + i + e * ${s.threads}`, fs)};`;
  const loop = s.stride
    ? `for (long long i = (long long)blockIdx.x * ${tile} + threadIdx.x; i < ${n}LL; i += (long long)gridDim.x * ${tile}) {${body}\n  }`
    : `long long i = (long long)blockIdx.x * ${tile} + threadIdx.x;${body}`;
  const bounds = s.minBlocks
    ? `__launch_bounds__(${s.threads}, ${s.minBlocks})`
    : `__launch_bounds__(${s.threads})`;
  const source = `// launch grid ${grid} 1 1 block ${s.threads} 1 1 writes 0
extern "C" __global__ void ${bounds} ${name}(${T}* __restrict__ out, const ${T}* __restrict__ x${op === 'fma' ? `, const ${T}* __restrict__ y` : ''}) {
  ${loop}
}`;
  return { source, grid };
}

/**
 * A sum in two kernels: `parts` partial sums (each thread float4 over a grid-stride run, `per` float4 loads in
 * flight, reduced in the block by warp shuffles), then one block of 1024 threads sums the parts.
 */
function sumKernels(s: { threads: number; per: number; blocks: number; ldg?: boolean }): string[] {
  const load = (p: string) => (s.ldg ? `__ldg(${p})` : `*(${p})`);
  const reduceBlock = (threads: number) => `
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  __shared__ float warps[${threads / 32}];
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < ${threads / 32} ? warps[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  }`;
  const step = s.threads * s.per;
  const partial = `// launch grid ${s.blocks} 1 1 block ${s.threads} 1 1 writes 0
extern "C" __global__ void __launch_bounds__(${s.threads}) sum_parts(float* __restrict__ parts, const float4* __restrict__ x) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int i = blockIdx.x * ${step} + threadIdx.x; i < ${N4}; i += ${s.blocks * step}) {
    float4 a[${s.per}];
#pragma unroll
    for (int e = 0; e < ${s.per}; e++) a[e] = ${load(`x + i + e * ${s.threads}`)};
#pragma unroll
    for (int e = 0; e < ${s.per}; e++) { v.x += a[e].x; v.y += a[e].y; v.z += a[e].z; v.w += a[e].w; }
  }
  float acc = (v.x + v.y) + (v.z + v.w);${reduceBlock(s.threads)}
  if (threadIdx.x == 0) parts[blockIdx.x] = acc;
}`;
  const combine = `// launch grid 1 1 1 block 1024 1 1 writes 0
extern "C" __global__ void __launch_bounds__(1024) sum_combine(float* __restrict__ out, const float* __restrict__ parts) {
  float acc = 0.0f;
  for (int i = threadIdx.x; i < ${s.blocks}; i += 1024) acc += parts[i];${reduceBlock(1024)}
  if (threadIdx.x == 0) out[0] = acc;
}`;
  return [partial, combine];
}

/** Fills x and y with hashed values in [0, 1): never zeros, which can run faster than real data. */
const FILL = `// launch grid ${N / 256} 1 1 block 256 1 1 writes 0 1
extern "C" __global__ void __launch_bounds__(256) fill(float* __restrict__ x, float* __restrict__ y) {
  unsigned int i = blockIdx.x * 256 + threadIdx.x, h = i * 2654435761u;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
  x[i] = (h & 0xffffff) / 16777216.0f; y[i] = ((h >> 8) & 0xffffff) / 16777216.0f + 0.5f;
}`;

/** Counts the outputs that differ from -x (neg) or x*y+1 (fma) by more than rounding, into bad[0]. */
const CHECK = (op: 'neg' | 'fma') => `// launch grid ${N / 256} 1 1 block 256 1 1 writes 3
extern "C" __global__ void __launch_bounds__(256) check_${op}(const float* out, const float* x, const float* y, unsigned int* bad) {
  unsigned int i = blockIdx.x * 256 + threadIdx.x;
  float want = ${op === 'neg' ? '-x[i]' : '__fmaf_rn(x[i], y[i], 1.0f)'};
  if (!(fabsf(out[i] - want) <= 1e-6f * fabsf(want))) atomicAdd(bad, 1u);
}`;

const ELEMENTWISE: Shape[] = [
  { vec: 4, per: 4, threads: 128 },
  { vec: 4, per: 1, threads: 128 },
  { vec: 4, per: 2, threads: 128 },
  { vec: 4, per: 8, threads: 128 },
  { vec: 4, per: 1, threads: 256 },
  { vec: 4, per: 2, threads: 256 },
  { vec: 4, per: 4, threads: 256 },
  { vec: 4, per: 8, threads: 256 },
  { vec: 4, per: 1, threads: 512 },
  { vec: 4, per: 2, threads: 512 },
  { vec: 4, per: 4, threads: 512 },
  { vec: 4, per: 1, threads: 1024 },
  { vec: 4, per: 4, threads: 64 },
  { vec: 2, per: 4, threads: 256 },
  { vec: 2, per: 8, threads: 256 },
  { vec: 1, per: 8, threads: 256 },
  { vec: 4, per: 4, threads: 128, ldg: true },
  { vec: 4, per: 4, threads: 128, cs: true },
  { vec: 4, per: 4, threads: 128, minBlocks: 16 },
  { vec: 4, per: 2, threads: 256, ldg: true, cs: true },
  { vec: 4, per: 1, threads: 256, stride: 4 },
  { vec: 4, per: 1, threads: 256, stride: 8 },
  { vec: 4, per: 2, threads: 256, stride: 4 },
  { vec: 4, per: 4, threads: 256, stride: 2 },
  { vec: 4, per: 4, threads: 128, stride: 8 },
  { vec: 4, per: 4, threads: 512, stride: 2 },
];
const SUMS = [
  { threads: 256, per: 4, blocks: 132 * 8 },
  { threads: 256, per: 4, blocks: 132 * 4 },
  { threads: 256, per: 4, blocks: 132 * 16 },
  { threads: 256, per: 8, blocks: 132 * 8 },
  { threads: 512, per: 4, blocks: 132 * 4 },
  { threads: 128, per: 4, blocks: 132 * 16 },
  { threads: 256, per: 2, blocks: 132 * 8 },
  { threads: 1024, per: 2, blocks: 132 * 2 },
  { threads: 256, per: 4, blocks: 132 * 8, ldg: true },
];

if (process.env.SOURCES) {
  // compile-check sources where there is no GPU: one unit per kernel, for nvcc -arch=sm_90 -cubin
  mkdirSync(process.env.SOURCES, { recursive: true });
  const write = (name: string, source: string) =>
    writeFileSync(join(process.env.SOURCES!, `${name}.cu`), source);
  ELEMENTWISE.forEach((s, i) => {
    for (const op of ['neg', 'fma'] as const) write(`${op}${i}`, elementwise(`${op}${i}`, op, s, 132).source);
  });
  SUMS.forEach((s, i) => {
    for (const [j, k] of sumKernels(s).entries()) write(`sum${i}_${j}`, k);
  });
  write('fill', FILL);
  write('check_neg', CHECK('neg'));
  write('check_fma', CHECK('fma'));
  process.exit(0);
}

const backend = Device.get('CUDA') as CUDABackend;
const sms = (() => {
  const d = cudaDriver();
  const v = new Int32Array(1);
  d.cuDeviceGetAttribute(v, 16, 0); // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  return v[0]!;
})();
const f32 = (n: number) => new DeviceBuffer(backend, n, dtypes.float32);
const [x, y, out] = [f32(N), f32(N), f32(N)];
const bad = new DeviceBuffer(backend, 1, dtypes.uint32);
const parts = f32(1 << 20);
const scalar = f32(1);
backend.compile('fill', FILL).run([x, y]);
const xs = x.copyout() as Float32Array;
let want = 0;
for (let i = 0; i < N; i++) want += xs[i]!;

/** Median seconds of the programs run back to back, each timed by events. */
function time(programs: readonly [Program, DeviceBuffer[]][]): number {
  for (const [p, b] of programs) p.run(b);
  const t = Array.from({ length: RUNS }, () => programs.reduce((s, [p, b]) => s + p.run(b, [], true), 0));
  return t.sort((a, b) => a - b)[RUNS >> 1]!;
}

/** Outputs of `op` in `out` that are wrong (out poisoned with NaN first by the caller). */
function wrong(op: 'neg' | 'fma'): number {
  bad.copyin(new Uint32Array(1));
  checks[op].run([out, x, y, bad]);
  return (bad.copyout() as Uint32Array)[0]!;
}
const checks = {
  neg: backend.compile('check_neg', CHECK('neg')),
  fma: backend.compile('check_fma', CHECK('fma')),
};
const poison = backend.compile(
  'poison',
  `// launch grid ${N / 256} 1 1 block 256 1 1 writes 0
extern "C" __global__ void poison(float* o) { o[blockIdx.x * 256 + threadIdx.x] = __int_as_float(0x7fc00000); }`,
);

const rows: string[] = [];
function row(what: string, bytes: number, seconds: number, note = ''): void {
  const rate = (bytes / seconds / 1e9).toFixed(0).padStart(6);
  rows.push(`${what.padEnd(34)} ${rate} GB/s ${(seconds * 1e6).toFixed(0).padStart(6)} us  ${note}`);
}

// what tsgrad generates: the heuristics' opts, then each list given on the command line
const given = process.argv
  .slice(2)
  .map((a) => [a.slice(0, a.indexOf('=')), JSON.parse(a.slice(a.indexOf('=') + 1)) as Opt[]] as const);
const target = targetOf(backend);
const xt = Tensor.empty([N], { device: 'CUDA' });
const yt = Tensor.empty([N], { device: 'CUDA' });
const generated = (t: Tensor, optsOf: (kernel: number) => Opt[] | undefined) =>
  scheduleOf([t]).kernels.map(({ ast }, i) => {
    const lowered = lowerKernel(ast, { target, opts: optsOf(i) });
    return { lowered, program: backend.compile(lowered.name, renderCUDA(lowered.name, lowered.linear)) };
  });
for (const [kind, t, bytes] of [
  ['neg', xt.neg(), 8 * N],
  ['fma', xt.mul(yt).add(1), 12 * N],
] as const)
  for (const opts of [undefined, ...given.filter(([k]) => k === kind).map(([, o]) => o)]) {
    const { lowered, program } = generated(t, () => opts)[0]!;
    poison.run([out]);
    const args = kind === 'neg' ? [out, x] : [out, x, y];
    const s = time([[program, args]]);
    row(`tsgrad ${kind} ${lowered.name}`, bytes, s, `${printOpts(lowered.opts)} wrong ${wrong(kind)}`);
  }
/** A sum's kernels in order, each reading the last one's output, timed together and one by one. */
function sumRows(label: string, t: Tensor, kernel?: number, opts?: Opt[]): void {
  const ks = generated(t, (i) => (i === kernel ? opts : undefined));
  const temps = ks.slice(0, -1).map(() => f32(1 << 22));
  const chain = ks.map(({ program }, i): [Program, DeviceBuffer[]] => [
    program,
    [i === ks.length - 1 ? scalar : temps[i]!, i === 0 ? x : temps[i - 1]!],
  ]);
  const s = time(chain);
  const got = (scalar.copyout() as Float32Array)[0]!;
  for (const [i, { lowered }] of ks.entries())
    row(`  kernel ${i} ${lowered.name}`, i ? 0 : 4 * N, time([chain[i]!]), printOpts(lowered.opts));
  row(`tsgrad ${label}`, 4 * N, s, `rel err ${Math.abs(got - want) / want}`);
  for (const b of temps) b.free();
}
sumRows('sum', xt.sum());
for (const [k, opts] of given.filter(([k]) => /^sum\d$/.test(k)))
  sumRows(`sum, ${k} ${printOpts(opts)}`, xt.sum(), Number(k.slice(3)), opts);
// the split's first step by hand: parts partial sums (split.ts's SPLIT_PARTS), then their sum
for (const parts of [1 << 18, 1 << 19])
  sumRows(
    `sum of ${parts} parts`,
    xt
      .reshape([N / parts, parts])
      .sum(0)
      .sum(),
  );

// hand-written variants
for (const op of ['neg', 'fma'] as const)
  ELEMENTWISE.forEach((shape, i) => {
    const { source } = elementwise(`${op}${i}`, op, shape, sms);
    const p = backend.compile(`${op}${i}`, source);
    poison.run([out]);
    const args = op === 'neg' ? [out, x] : [out, x, y];
    const s = time([[p, args]]);
    row(`cuda ${op} ${shapeName(shape)}`, op === 'neg' ? 8 * N : 12 * N, s, `wrong ${wrong(op)}`);
  });
for (const s of SUMS) {
  const [a, b] = sumKernels(s).map((src, i) => backend.compile(i ? 'sum_combine' : 'sum_parts', src));
  const t = time([
    [a!, [parts, x]],
    [b!, [scalar, parts]],
  ]);
  const got = (scalar.copyout() as Float32Array)[0]!;
  row(
    `cuda sum t${s.threads} x${s.per} blocks${s.blocks}${s.ldg ? ' ldg' : ''}`,
    4 * N,
    t,
    `rel err ${Math.abs(got - want) / want}`,
  );
}

// the same ops through realize(), timed by the host clock as bench/gpu.ts times them: what the launches and
// the library's own work per call add to the kernels
function hostTime(fn: () => Tensor): number {
  for (let i = 0; i < 2; i++) fn().realize().dispose();
  backend.synchronize();
  const times = Array.from({ length: RUNS }, () => {
    const t0 = performance.now();
    const o = fn().realize();
    backend.synchronize();
    const s = (performance.now() - t0) / 1000;
    o.dispose();
    return s;
  });
  return times.sort((a, b) => a - b)[RUNS >> 1]!;
}
{
  const [xr, yr] = [Tensor.rand([N], { device: 'CUDA' }), Tensor.rand([N], { device: 'CUDA' })];
  xr.realize(yr);
  row(
    'tsgrad x.neg() realize, host clock',
    8 * N,
    hostTime(() => xr.neg()),
  );
  row(
    'tsgrad x*y+1 realize, host clock',
    12 * N,
    hostTime(() => xr.mul(yr).add(1)),
  );
  row(
    'tsgrad x.sum() realize, host clock',
    4 * N,
    hostTime(() => xr.sum()),
  );
  xr.dispose();
  yr.dispose();
}

// torch from the same run, timed by events (and by the host clock, as bench/gpu_peer.py)
const torch = spawnSync(
  'python3',
  [
    '-c',
    `import torch, json, time
x = torch.rand(1 << 28, device='cuda'); y = torch.rand(1 << 28, device='cuda'); o = torch.empty_like(x)
def t(f, runs=${RUNS}):
  f(); ts = []
  for _ in range(runs):
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
  return sorted(ts)[runs // 2]
def h(f, runs=${RUNS}):
  f(); torch.cuda.synchronize(); ts = []
  for _ in range(runs):
    t0 = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
  return sorted(ts)[runs // 2]
print(json.dumps({'copy_': t(lambda: o.copy_(x)), 'neg': t(lambda: torch.neg(x, out=o)), 'fma': t(lambda: torch.addcmul(torch.ones((), device='cuda'), x, y, out=o)), 'x*y+1': t(lambda: x * y + 1), 'sum': t(lambda: x.sum()), 'neg host': h(lambda: x.neg()), 'sum host': h(lambda: x.sum())}))`,
  ],
  { encoding: 'utf8' },
);
if (torch.status === 0) {
  const t = JSON.parse(torch.stdout.trim().split('\n').at(-1)!) as Record<string, number>;
  row('torch copy_', 8 * N, t.copy_!);
  row('torch neg(out=)', 8 * N, t.neg!);
  row('torch addcmul(out=)', 12 * N, t.fma!);
  row('torch x*y+1', 12 * N, t['x*y+1']!);
  row('torch sum', 4 * N, t.sum!);
  row('torch x.neg(), host clock', 8 * N, t['neg host']!);
  row('torch x.sum(), host clock', 4 * N, t['sum host']!);
} else console.log(`torch: ${torch.stderr.slice(-1000)}`);
console.log(
  `\n${backend.description}, ${sms} SMs; median of ${RUNS} event-timed runs; 2^28 float32\n${rows.join('\n')}`,
);
