// tinygrad's examples/beautiful_mnist.py written with tsgrad: the same model (conv 5x5 32 twice, batch norm,
// max pool, conv 3x3 64 twice, batch norm, max pool, linear), 70 Adam steps of 512 random training images
// (sampled on the device inside the JIT, as there), then the test accuracy. Prints the whole run's time with
// compiles, the steps' time once compiled, and where the time went: loading the data, lowering kernels (on
// this thread), the rest of their compiles (NVRTC or gcc, loading), the steps, the test.
// Usage: npx tsx bench/beautiful_mnist.ts [DEV] [steps]
import { Device, jit, mnist, Tensor } from '../src/index.ts';
import type { KernelInput } from '../src/runtime/backend.ts';
import { trainStep } from './beautiful-mnist-model.ts';

const device = process.argv[2] ?? Device.default;
const STEPS = Number(process.argv[3] ?? 70);
const BATCH = 512;
Device.default = device;

// the device lowers each new kernel when its compileMany asks for it: the lowering's share of compiling
const backend = Device.get(device);
const compileMany = backend.compileMany.bind(backend);
let [lowering, compiling] = [0, 0];
backend.compileMany = (kernels: readonly KernelInput[]) => {
  const t = performance.now();
  const timed = kernels.map((k) =>
    typeof k === 'function'
      ? () => {
          const t1 = performance.now();
          const made = k();
          lowering += performance.now() - t1;
          return made;
        }
      : k,
  );
  const made = compileMany(timed);
  compiling += performance.now() - t;
  return made;
};

const t0 = performance.now();
const data = mnist({ device });
const [trainX, trainY] = [data.trainImages.float().realize(), data.trainLabels.realize()];
const tData = performance.now();
Tensor.manualSeed(0);
const { model, step } = trainStep(trainX, trainY);
const jitted = jit(step);

// indices drawn on the host (a seeded generator), each step's as a new input
let seed = 1;
const random = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const samples = () =>
  new Tensor(
    Int32Array.from({ length: BATCH }, () => Math.floor(random() * 60000)),
    { device },
  );
let loss = 0;
let tCompiled = 0;
for (let i = 0; i < STEPS; i++) {
  if (i === 3) {
    Device.get(device).synchronize();
    tCompiled = performance.now(); // the JIT captured on the second call: replays from here
  }
  const l = jitted(samples());
  if (i === STEPS - 1) loss = l.item() as number;
}
const tTrained = performance.now();
const tSteps = (tTrained - tCompiled) / 1000 / (STEPS - 3);
let correct = 0;
for (let i = 0; i < 10000; i += 2000) {
  const x = data.testImages.shrink([
    [i, i + 2000],
    [0, 1],
    [0, 28],
    [0, 28],
  ]);
  const pred = model.forward(x.float()).argmax(1);
  const want = data.testLabels.shrink([[i, i + 2000]]);
  correct += pred.eq(want).sum().item() as number;
}
const total = (performance.now() - t0) / 1000;
console.log(
  `beautiful_mnist on ${device}: ${STEPS} steps of ${BATCH}, loss ${loss.toFixed(3)}, test accuracy ${(correct / 100).toFixed(2)}%; ` +
    `${total.toFixed(1)} s in all (data, compiles, steps, test), ${(tSteps * 1000).toFixed(1)} ms a compiled step`,
);
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
console.log(
  `  data ${s(tData - t0)}, first 3 steps ${s(tCompiled - tData)}, ${STEPS - 3} compiled steps ${s(tTrained - tCompiled)}, ` +
    `test ${s(performance.now() - tTrained)}; kernel compiles ${s(compiling)} of which lowering ${s(lowering)}`,
);
