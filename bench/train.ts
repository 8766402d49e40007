// Training workloads on the CPU against their peers, all from one run (issue 14): tinygrad's beautiful_mnist
// model (bench/beautiful-mnist-model.ts; Adam, batch 512, random images: the speed does not depend on the
// pixels) and an 8x512 MLP step (batch 64, forward and backward) against the same step by hand in numpy, with
// numpy's square-matmul GFLOP/s as the yardstick for each step's slowest kernels. beautiful_mnist is slow, so
// a few JIT-replayed steps after warm-up are timed on both sides and scaled to the 70 of the real run
// (bench/beautiful_mnist.ts runs all 70 on MNIST and reports the accuracy).
// Each kernel's time is the best of REPEAT runs of its recorded launch on the same buffers (a launch that updates
// its inputs in place, Adam's, runs again on the values it wrote: its speed does not depend on them), since the
// other tenants of a shared VM stall single launches by milliseconds. Kernels marked "mm" are sums of products
// whose factors each read an output axis the other does not (matmuls, convs and their gradients): the kernels
// issue 14 holds to a quarter of numpy's matmul rate.
// Usage: TINYGRAD_PATH=/work/tinygrad npm run bench:train [-- mnist-steps mlp-steps] [--all: every kernel]
// [--convs: a sweep of conv layers' forward and backward over windows 1, 3, 5, 7, strides 1 and 2, batches 8 and 64]
import { execFileSync } from 'node:child_process';
import { optimizable } from '../src/codegen/index.ts';
import { kernelRanges } from '../src/codegen/opt/axes.ts';
import { isLoop, productOperands, reads } from '../src/codegen/opt/operands.ts';
import { renderObservers } from '../src/engine/compile.ts';
import { recordLaunches } from '../src/engine/realize.ts';
import { Context, Device, getParameters, jit, Linear, Tensor } from '../src/index.ts';
import { settleUpgrades } from '../src/runtime/cc-upgrades.ts';
import type { UOp } from '../src/uop/uop.ts';
import { trainStep } from './beautiful-mnist-model.ts';

const args = process.argv.slice(2);
const ALL = args.includes('--all');
const CONVS = args.includes('--convs');
const [mnistSteps, mlpSteps] = args.filter((a) => !a.startsWith('--'));
const MNIST_STEPS = Number(mnistSteps ?? 4);
const MLP_STEPS = Number(mlpSteps ?? 50);
const SHOWN = 8;
const REPEAT = 5;
Device.default = 'CPU';

/** Whether a kernel multiplies two factors that each read an output axis the other does not (matmul, conv). */
function isMatmulLike(ast: UOp): boolean {
  const k = optimizable(ast);
  const factors = productOperands(k);
  if (factors === undefined) return false;
  const loops = kernelRanges(k).filter(isLoop);
  return factors.every((f, i) => loops.some((r) => reads(f, r) && !reads(factors[1 - i]!, r)));
}

// every kernel the CPU renders, by name (the observer makes each one lowered anew, not read from the disk)
const matmulLike = new Map<string, boolean>();
renderObservers.set('C', (name, _linear, ast) => {
  matmulLike.set(name, (matmulLike.get(name) ?? false) || isMatmulLike(ast));
});

/** A kernel's time and rate in one step, summed over its launches. */
type KernelTime = { name: string; us: number; gflops: number; launches: number };

/**
 * The kernels of one step of f, each timed as the best of REPEAT runs of its launch. f runs once before, so
 * that its kernels are compiled and the recorded step's buffers come from the allocator's free list. The
 * recorded step runs with DEBUG=2 for each launch's flops (its GFLOP/s by its time), in launch order.
 */
function kernelTimes(f: () => void): KernelTime[] {
  f();
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => lines.push(a.join(' '));
  let launches: ReturnType<typeof recordLaunches>['launches'];
  try {
    launches = Context.with({ DEBUG: 2 }, () => recordLaunches(f)).launches;
  } finally {
    console.log = log;
  }
  // the recorded step started the optimized builds of the quick ones (CC_TIERS): the timed runs take them up
  settleUpgrades();
  const flops = lines.flatMap((line) => {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: DEBUG=2 colours names with ANSI escapes
    const m = line.replace(/\x1b\[[0-9;]*m/g, '').match(/^(\S+)\s+([\d.]+) us\s+([\d.-]+) GFLOP\/s/);
    return m === null ? [] : [(Number(m[3]) || 0) * Number(m[2]) * 1e3];
  });
  if (flops.length !== launches.length)
    throw new Error(`bench: ${launches.length} launches recorded but ${flops.length} DEBUG=2 lines`);
  const byName = new Map<string, KernelTime>();
  launches.forEach(({ program, bufs }, i) => {
    let seconds = Infinity;
    for (let r = 0; r < REPEAT; r++) seconds = Math.min(seconds, program.run(bufs, [], true));
    const k = byName.get(program.name) ?? { name: program.name, us: 0, gflops: 0, launches: 0 };
    k.gflops = (k.gflops * k.us * 1e3 + flops[i]!) / ((k.us + seconds * 1e6) * 1e3);
    k.us += seconds * 1e6;
    k.launches++;
    byName.set(program.name, k);
  });
  return [...byName.values()].sort((a, b) => b.us - a.us);
}

function showKernels(title: string, kernels: KernelTime[], yardstick: number) {
  const total = kernels.reduce((n, k) => n + k.us, 0);
  const shown = ALL ? kernels : kernels.slice(0, SHOWN);
  console.log(
    `\n${title}: ${kernels.length} kernels, ${(total / 1000).toFixed(1)} ms in kernels (best of ${REPEAT} runs each); ${ALL ? 'all' : 'slowest'}:`,
  );
  console.log(
    `${'kernel'.padEnd(44)} ${'runs'.padStart(4)} ${'ms'.padStart(8)} ${'GFLOP/s'.padStart(8)} ${'of numpy mm'.padStart(11)}  mm`,
  );
  for (const k of shown)
    console.log(
      `${k.name.padEnd(44)} ${String(k.launches).padStart(4)} ${(k.us / 1000).toFixed(2).padStart(8)} ${k.gflops.toFixed(1).padStart(8)} ${`${((100 * k.gflops) / yardstick).toFixed(0)}%`.padStart(11)}  ${matmulLike.get(k.name) ? 'mm' : ''}`,
    );
  const slow = kernels.filter((k) => matmulLike.get(k.name) && k.gflops < yardstick / 4);
  console.log(
    `sums of products below a quarter of numpy's mm: ${slow.length ? slow.map((k) => k.name).join(', ') : 'none'}`,
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

/**
 * One conv layer's training kernels (32 -> 64 channels on 28 x 28 images, padding k / 2): the forward, then the
 * input and weight gradients of an upstream gradient, as a step that holds the layer runs them.
 */
function convLayer(batch: number, k: number, stride: number): KernelTime[] {
  Tensor.manualSeed(0);
  const x = Tensor.randn([batch, 32, 28, 28]).realize().requiresGrad_();
  const w = Tensor.randn([64, 32, k, k]).mul(0.1).realize().requiresGrad_();
  const conv = () => x.conv2d(w, undefined, { stride, padding: k >> 1 });
  const g = Tensor.randn(conv().shape).realize();
  return kernelTimes(() => {
    x.grad = undefined;
    w.grad = undefined;
    const y = conv().realize();
    y.backward(g);
    x.grad!.realize(w.grad!);
  });
}

/** The conv sweep's table: each layer's kernel time, its products' least share of numpy's rate, those under a quarter. */
function showConvs(yardstick: number) {
  console.log(`
conv layers 32 -> 64 channels, 28 x 28, padding k / 2: forward, input and weight gradients`);
  console.log(
    `${'batch k stride'.padEnd(16)} ${'ms'.padStart(8)} ${'least mm'.padStart(9)}  sums of products below a quarter`,
  );
  for (const batch of [8, 64])
    for (const k of [1, 3, 5, 7])
      for (const stride of [1, 2]) {
        const kernels = convLayer(batch, k, stride);
        const mm = kernels.filter((t) => matmulLike.get(t.name));
        const least = Math.min(...mm.map((t) => t.gflops));
        const slow = mm
          .filter((t) => t.gflops < yardstick / 4)
          .map((t) => `${t.name} ${t.gflops.toFixed(0)}`);
        const ms = kernels.reduce((n, t) => n + t.us, 0) / 1000;
        console.log(
          `${`${batch} ${k} ${stride}`.padEnd(16)} ${ms.toFixed(2).padStart(8)} ${`${((100 * least) / yardstick).toFixed(0)}%`.padStart(9)}  ${slow.join(', ') || 'none'}`,
        );
      }
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
if (CONVS) showConvs(peer.matmul_gflops);
