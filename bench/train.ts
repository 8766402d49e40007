// Training workloads on the CPU against their peers, all from one run (issue 14): tinygrad's beautiful_mnist
// model (bench/beautiful-mnist-model.ts; Adam, batch 512, random images: the speed does not depend on the
// pixels) and an 8x512 MLP step (batch 64, forward and backward) against the same step by hand in numpy, with
// numpy's square-matmul GFLOP/s as the yardstick for each step's slowest kernels. beautiful_mnist is slow, so
// a few JIT-replayed steps after warm-up are timed on both sides and scaled to the 70 of the real run
// (bench/beautiful_mnist.ts runs all 70 on MNIST and reports the accuracy).
// Usage: TINYGRAD_PATH=/work/tinygrad npm run bench:train [-- mnist-steps mlp-steps]
import { execFileSync } from 'node:child_process';
import { Context, Device, getParameters, jit, Linear, Tensor } from '../src/index.ts';
import { trainStep } from './beautiful-mnist-model.ts';

const MNIST_STEPS = Number(process.argv[2] ?? 4);
const MLP_STEPS = Number(process.argv[3] ?? 50);
const SHOWN = 8;
Device.default = 'CPU';

/** A kernel's time and rate from one DEBUG=2 step, summed over its launches. */
type KernelTime = { name: string; us: number; gflops: number; launches: number };

/**
 * Runs f with DEBUG=2 and reads the kernel lines it prints: name, microseconds, GFLOP/s. f runs once before,
 * so that its buffers come from the allocator's free list as the JIT's timed steps find theirs: in a first
 * unjitted step each kernel writing a new buffer paid for its pages (beautiful_mnist's first conv, 38 MB at
 * batch 512, took 2.2x the CPU time writing fresh memory).
 */
function kernelTimes(f: () => void): KernelTime[] {
  f();
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => lines.push(a.join(' '));
  try {
    Context.with({ DEBUG: 2 }, f);
  } finally {
    console.log = log;
  }
  const byName = new Map<string, KernelTime>();
  for (const line of lines) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: DEBUG=2 colours names with ANSI escapes
    const m = line.replace(/\x1b\[[0-9;]*m/g, '').match(/^(\S+)\s+([\d.]+) us\s+([\d.-]+) GFLOP\/s/);
    if (m === null) continue;
    const [, name, us, rate] = m;
    const k = byName.get(name!) ?? { name: name!, us: 0, gflops: 0, launches: 0 };
    const flops = (Number(rate) || 0) * Number(us) * 1e3;
    k.gflops = (k.gflops * k.us * 1e3 + flops) / ((k.us + Number(us)) * 1e3);
    k.us += Number(us);
    k.launches++;
    byName.set(name!, k);
  }
  return [...byName.values()].sort((a, b) => b.us - a.us);
}

function showKernels(title: string, kernels: KernelTime[], yardstick: number) {
  const total = kernels.reduce((n, k) => n + k.us, 0);
  console.log(`\n${title}: ${kernels.length} kernels, ${(total / 1000).toFixed(1)} ms in kernels; slowest:`);
  console.log(
    `${'kernel'.padEnd(44)} ${'ms'.padStart(8)} ${'GFLOP/s'.padStart(8)} ${'of numpy mm'.padStart(11)}`,
  );
  for (const k of kernels.slice(0, SHOWN))
    console.log(
      `${k.name.padEnd(44)} ${(k.us / 1000).toFixed(2).padStart(8)} ${k.gflops.toFixed(1).padStart(8)} ${`${((100 * k.gflops) / yardstick).toFixed(0)}%`.padStart(11)}`,
    );
}

function mlp() {
  Tensor.manualSeed(0);
  const layers = Array.from({ length: 8 }, () => new Linear(512, 512));
  const params = getParameters(layers);
  const x = Tensor.randn([64, 512]).realize();
  const target = Tensor.randn([64, 512]).realize();
  const step = (input: Tensor, want: Tensor) => {
    for (const p of params) p.grad = undefined;
    let h = input;
    layers.forEach((l, i) => {
      h = l.forward(h);
      if (i < layers.length - 1) h = h.relu();
    });
    h.sub(want).square().mean().backward();
    return params.map((p) => p.grad!);
  };
  const jitted = jit(step);
  for (let i = 0; i < 3; i++) jitted(x, target);
  // the best of MLP_STEPS steps: the machine is shared, and a step is short
  let ms = Infinity;
  for (let i = 0; i < MLP_STEPS; i++) {
    const t0 = performance.now();
    jitted(x, target)[0]!.realize();
    Device.get('CPU').synchronize();
    ms = Math.min(ms, performance.now() - t0);
  }
  const kernels = kernelTimes(() => {
    const grads = step(x, target);
    grads[0]!.realize(...grads.slice(1));
  });
  return { ms, kernels };
}

function beautifulMnist() {
  Tensor.manualSeed(0);
  const trainX = Tensor.rand([60000, 1, 28, 28]).mul(255).realize();
  const trainY = Tensor.randint([60000], 0, 10).realize();
  const { step } = trainStep(trainX, trainY);
  const jitted = jit(step);
  const samples = () => Tensor.randint([512], 0, 60000).realize();
  for (let i = 0; i < 3; i++) jitted(samples()).item();
  const t0 = performance.now();
  for (let i = 0; i < MNIST_STEPS; i++) jitted(samples()).item();
  const ms = (performance.now() - t0) / MNIST_STEPS;
  const kernels = kernelTimes(() => {
    step(samples()).item();
  });
  return { ms, kernels };
}

const peer = JSON.parse(
  execFileSync('python3', ['train_peer.py', String(MNIST_STEPS)], {
    cwd: import.meta.dirname,
    encoding: 'utf8',
  }),
) as { matmul_gflops: number; mlp_ms: number; tinygrad_mnist_step_ms?: number };
const m = mlp();
const b = beautifulMnist();
const row = (what: string, ours: number, theirs: number | undefined, peerName: string) =>
  console.log(
    `${what.padEnd(34)} ${ours.toFixed(1).padStart(9)} ${(theirs?.toFixed(1) ?? '-').padStart(9)}  ${peerName.padEnd(22)} ${theirs === undefined ? '-' : (ours / theirs).toFixed(2)}`,
  );
console.log(`CPU, numpy square matmul (1024^3 f32): ${peer.matmul_gflops.toFixed(0)} GFLOP/s\n`);
console.log(
  `${'what'.padEnd(34)} ${'ours'.padStart(9)} ${'peer'.padStart(9)}  ${'peer is'.padEnd(22)} ours/peer`,
);
row('MLP 8x512 fwd+bwd, batch 64 (ms)', m.ms, peer.mlp_ms, 'numpy by hand');
row(
  `beautiful_mnist step, ${MNIST_STEPS} timed (ms)`,
  b.ms,
  peer.tinygrad_mnist_step_ms,
  'tinygrad (CPU, clang)',
);
row(
  'beautiful_mnist 70 steps, scaled (s)',
  (b.ms * 70) / 1000,
  peer.tinygrad_mnist_step_ms && (peer.tinygrad_mnist_step_ms * 70) / 1000,
  'tinygrad',
);
showKernels('MLP step', m.kernels, peer.matmul_gflops);
showKernels('beautiful_mnist step', b.kernels, peer.matmul_gflops);
