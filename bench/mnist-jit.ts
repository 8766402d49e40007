// MNIST training speed: steps per second with and without the JIT, and the scheduling time of a step
// without it (the compiler's share). Usage: npx tsx bench/mnist-jit.ts [steps]

import { Net } from '../examples/mnist-model.ts';
import { Adam, Context, Device, dtypes, jit, Tensor } from '../src/index.ts';

const steps = Number(process.argv[2] ?? 30);
const BATCH = 128;

function setup() {
  Tensor.manualSeed(0);
  const net = new Net();
  const opt = new Adam(net.parameters(), { lr: 0.002 });
  const step = (x: Tensor, y: Tensor) => {
    Tensor.training = true;
    opt.zeroGrad();
    const loss = net.forward(x.cast(dtypes.float32).div(255)).sparseCategoricalCrossentropy(y);
    loss.backward();
    opt.step(loss, ...net.buffers());
    Tensor.training = false;
    return loss;
  };
  return step;
}

/** Synthetic batches of MNIST's shape: the speed does not depend on the pixels. */
function batch(i: number): [Tensor, Tensor] {
  const x = new Uint8Array(BATCH * 784).map((_, k) => (k * 31 + i * 7) % 256);
  const y = new Int32Array(BATCH).map((_, k) => (k + i) % 10);
  return [new Tensor(x, { dtype: dtypes.uint8 }).reshape([BATCH, 1, 28, 28]), new Tensor(y)];
}

function stepsPerSecond(step: (x: Tensor, y: Tensor) => Tensor): number {
  for (let i = 0; i < 3; i++) step(...batch(i)).item(); // compile and capture
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) step(...batch(i)).item();
  return steps / ((performance.now() - t0) / 1000);
}

const plain = stepsPerSecond(setup());
const jitted = stepsPerSecond(jit(setup()));
// scheduling alone: the same step on NULL, which compiles and runs nothing; the first step schedules from
// scratch, later ones find their plan in the cache but still build and key the graph
let firstMs = 0;
let laterMs = 0;
Context.with({ DEV: 'NULL' }, () => {
  const step = setup();
  let t = performance.now();
  step(...batch(0));
  firstMs = performance.now() - t;
  t = performance.now();
  for (let i = 1; i <= 5; i++) step(...batch(i));
  laterMs = (performance.now() - t) / 5;
});

console.log(`device: ${Device.default}, batch ${BATCH}, ${steps} timed steps\n`);
console.log(`${'what'.padEnd(40)} ${'value'.padStart(10)}`);
console.log(`${'steps/s without JIT'.padEnd(40)} ${plain.toFixed(2).padStart(10)}`);
console.log(`${'steps/s with JIT'.padEnd(40)} ${jitted.toFixed(2).padStart(10)}`);
console.log(`${'first step: schedule + codegen (ms)'.padEnd(40)} ${firstMs.toFixed(1).padStart(10)}`);
console.log(`${'later steps without JIT: scheduling (ms)'.padEnd(40)} ${laterMs.toFixed(1).padStart(10)}`);
