// The main job: train a small CNN on MNIST with a JIT-captured Adam step, then report test accuracy.
// Usage: npm start [-- --steps N] [--expect PCT] (DEV=JS to train on the JS backend; --expect: exit 1 if the test
// accuracy is below PCT, as `npm run test:gpu` runs it).
import { Adam, Device, dtypes, jit, mnist, Tensor } from '../src/index.ts';
import { Net } from './mnist-model.ts';

const args = process.argv.slice(2);
const steps = Number(args[args.indexOf('--steps') + 1] || 0) || 600;
const expect = args.includes('--expect') ? Number(args[args.indexOf('--expect') + 1]) : undefined;
const BATCH = 128;

const t0 = performance.now();
const data = mnist();
const trainX = data.trainImages.dataSync() as Uint8Array;
const trainY = data.trainLabels.dataSync() as Int32Array;
console.log(
  `MNIST: ${trainY.length} training and ${data.testLabels.shape[0]} test images; device ${Device.default}`,
);

Tensor.manualSeed(0);
const net = new Net();
const opt = new Adam(net.parameters(), { lr: 0.002 });
const normalize = (x: Tensor) => x.cast(dtypes.float32).div(255).sub(0.1307).div(0.3081);

const trainStep = jit(function trainStep(x: Tensor, y: Tensor) {
  Tensor.training = true;
  opt.zeroGrad();
  const loss = net.forward(normalize(x)).sparseCategoricalCrossentropy(y);
  loss.backward();
  opt.step(loss, ...net.buffers());
  Tensor.training = false;
  return loss;
});

/** A batch copied out of the host arrays (the JIT takes it as an input buffer). */
function batch(order: Uint32Array, at: number): [Tensor, Tensor] {
  const x = new Uint8Array(BATCH * 784);
  const y = new Int32Array(BATCH);
  for (let i = 0; i < BATCH; i++) {
    const k = order[(at + i) % order.length]!;
    x.set(trainX.subarray(k * 784, (k + 1) * 784), i * 784);
    y[i] = trainY[k]!;
  }
  return [new Tensor(x, { dtype: dtypes.uint8 }).reshape([BATCH, 1, 28, 28]), new Tensor(y)];
}

// a seeded shuffle, so runs are repeatable
let seed = 1;
const random = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const order = Uint32Array.from({ length: trainY.length }, (_, i) => i);
for (let i = order.length - 1; i > 0; i--) {
  const j = Math.floor(random() * (i + 1));
  [order[i], order[j]] = [order[j]!, order[i]!];
}

const tTrain = performance.now();
for (let step = 1; step <= steps; step++) {
  const [x, y] = batch(order, step * BATCH);
  const loss = trainStep(x, y);
  if (step % 20 === 0 || step === steps) {
    const rate = step / ((performance.now() - tTrain) / 1000);
    const done = Math.round((step / steps) * 30);
    process.stdout.write(
      `\r[${'#'.repeat(done)}${' '.repeat(30 - done)}] step ${step}/${steps}  loss ${(loss.item() as number).toFixed(3)}  ${rate.toFixed(1)} steps/s`,
    );
  }
}
process.stdout.write('\n');

// evaluate in batches of 1000 (running statistics in eval mode)
let correct = 0;
const testN = data.testLabels.shape[0]!;
for (let i = 0; i < testN; i += 1000) {
  const x = data.testImages.shrink([
    [i, i + 1000],
    [0, 1],
    [0, 28],
    [0, 28],
  ]);
  const pred = net.forward(normalize(x)).argmax(1);
  correct +=
    (pred
      .eq(data.testLabels.shrink([[i, i + 1000]]))
      .sum()
      .item() as number) ?? 0;
}
const accuracy = (correct / testN) * 100;
console.log(
  `test accuracy: ${accuracy.toFixed(2)}% after ${steps} steps (${((performance.now() - t0) / 1000).toFixed(0)} s in all)`,
);
if (expect !== undefined && !(accuracy >= expect)) {
  console.error(`test accuracy ${accuracy.toFixed(2)}% is below the expected ${expect}%`);
  process.exit(1);
}
