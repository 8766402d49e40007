// Training steps on the GPU, kernel by kernel, beside PyTorch eager (bench/steps_gpu_peer.py, the same models
// and batches, with torch.profiler's kernels): tinygrad's beautiful_mnist model (batch 512, Adam, images picked
// by indexSelect on the device) and an 8x512 MLP (batch 64, Adam). Prints each model's compiled step time (a
// JIT replay) and its slowest kernels from one unjitted step at DEBUG=2 (each kernel timed by events).
// Usage: npx tsx bench/steps_gpu.ts [DEV] [steps] [mnist,mlp]   (DEV defaults to CUDA; both models by default)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { Adam, Context, Device, getParameters, jit, Linear, type Tensor as T, Tensor } from '../src/index.ts';
import { trainStep } from './beautiful-mnist-model.ts';

const device = process.argv[2] ?? 'CUDA';
const STEPS = Number(process.argv[3] ?? 20);
const MODELS = (process.argv[4] ?? 'mnist,mlp').split(',');
const TOP = 12;
Device.default = device;
const backend = Device.get(device);

interface Workload {
  title: string;
  step: (samples: T) => T;
  samples: () => T;
}

function mnist(): Workload {
  const BATCH = 512;
  Tensor.manualSeed(0);
  const trainX = Tensor.rand([60000, 1, 28, 28]).realize();
  const trainY = Tensor.randint([60000], 0, 10).realize();
  return {
    title: 'beautiful_mnist step (batch 512)',
    step: trainStep(trainX, trainY).step,
    samples: () => Tensor.randint([BATCH], 0, 60000),
  };
}

function mlp(): Workload {
  const [BATCH, WIDTH] = [64, 512];
  Tensor.manualSeed(0);
  const layers = Array.from({ length: 8 }, () => new Linear(WIDTH, WIDTH));
  const opt = new Adam(getParameters(layers), { lr: 0.001 });
  const x = Tensor.randn([BATCH, WIDTH]).realize();
  return {
    title: '8x512 MLP step (batch 64)',
    step: (labels) => {
      opt.zeroGrad();
      let h = x;
      layers.forEach((l, i) => {
        h = l.forward(h);
        if (i < layers.length - 1) h = h.relu();
      });
      const loss = h.sparseCategoricalCrossentropy(labels);
      loss.backward();
      opt.step(loss);
      return loss;
    },
    samples: () => Tensor.randint([BATCH], 0, WIDTH),
  };
}

/** Seconds a compiled step takes (JIT replays, synchronized), and the kernels of one unjitted step. */
function measure(w: Workload): { title: string; step: number; kernels: Map<string, number> } {
  const kernels = new Map<string, number>();
  // an unjitted step compiles everything; the next, at DEBUG=2, times each kernel
  w.step(w.samples()).realize();
  const log = console.log;
  console.log = (line: string) => {
    // DEBUG=2's kernel line: name (ANSI colours), time in us, GFLOP/s, GB/s
    const m = /^(\S+)\s+([\d.]+) us/.exec(stripVTControlCharacters(String(line)));
    if (m) kernels.set(m[1]!, (kernels.get(m[1]!) ?? 0) + Number(m[2]) / 1e6);
  };
  try {
    Context.with({ DEBUG: 2 }, () => w.step(w.samples()).realize());
  } finally {
    console.log = log;
  }
  const step = jit(w.step);
  for (let i = 0; i < 3; i++) step(w.samples()).realize();
  backend.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < STEPS; i++) step(w.samples());
  backend.synchronize();
  return { title: w.title, step: (performance.now() - t0) / 1000 / STEPS, kernels };
}

interface Peer {
  step: number;
  kernels: [string, number][];
}

function torchPeer(): Record<string, Peer> | undefined {
  const script = fileURLToPath(new URL('./steps_gpu_peer.py', import.meta.url));
  const r = spawnSync('python3', [script, String(STEPS)], { encoding: 'utf8' });
  if (r.status !== 0) {
    console.log(`(torch peer failed: ${(r.stderr || r.error?.message || '').trim().split('\n').at(-1)})`);
    return undefined;
  }
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
}

const WORKLOADS: Record<string, () => Workload> = { mnist, mlp };
const ours = Object.fromEntries(MODELS.map((m) => [m, measure(WORKLOADS[m]!())]));
const torch = torchPeer();
const ms = (s: number) => (s * 1e3).toFixed(3).padStart(9);
for (const [key, { title, step, kernels }] of Object.entries(ours)) {
  const peer = torch?.[key];
  const ratio =
    peer === undefined ? '' : `, ${(step / peer.step).toFixed(2)}x torch eager's ${ms(peer.step).trim()} ms`;
  const total = [...kernels.values()].reduce((a, b) => a + b, 0);
  console.log(`\n${title} on ${device}: ${ms(step).trim()} ms a compiled step${ratio}`);
  console.log(
    `  kernels of one unjitted step: ${kernels.size} distinct, ${ms(total).trim()} ms of kernel time`,
  );
  const mine = [...kernels].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  const theirs = peer?.kernels ?? [];
  console.log(
    `  ${'tsgrad kernel'.padEnd(40)} ${'ms'.padStart(9)}   ${'torch kernel'.padEnd(48)} ${'ms'.padStart(9)}`,
  );
  for (let i = 0; i < TOP; i++) {
    const a = mine[i];
    const b = theirs[i];
    console.log(
      `  ${(a?.[0] ?? '').slice(0, 40).padEnd(40)} ${a ? ms(a[1]) : ''.padStart(9)}   ${(b?.[0] ?? '').slice(0, 48).padEnd(48)} ${b ? ms(b[1]) : ''.padStart(9)}`,
    );
  }
}
