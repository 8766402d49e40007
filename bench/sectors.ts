// How coalesced the GPU kernels' global loads are: runs a workload's kernels on the SIMT emulator, sampled (a few
// workgroups, each loop a few times), and prints for each LOAD the distinct 32-byte sectors a warp's request
// touches and the share of those bytes used (100%: every sector's bytes used; 12.5%: 4 useful bytes in 32).
// Usage: npx tsx bench/sectors.ts [conv|conv3|mnist|step|mlp|sum|gather]
import { dtypes } from '../src/dtype.ts';
import { Adam, Device, getParameters } from '../src/index.ts';
import { countSectors } from '../src/runtime/simt.ts';
import { Tensor } from '../src/tensor/index.ts';
import { Model, runningStats } from './beautiful-mnist-model.ts';

const device = 'SIMT';
const empty = (shape: number[]) => Tensor.empty(shape, { device });

/** A conv's forward and backward: beautiful_mnist's second 5x5 conv (32 -> 32 channels on 24x24, batch 512). */
function conv(b: number, ci: number, h: number, co: number, k: number): Tensor[] {
  const x = empty([b, ci, h, h]).requiresGrad_();
  const w = empty([co, ci, k, k]).requiresGrad_();
  const y = x.conv2d(w);
  y.backward(empty(y.shape as number[]));
  return [w.grad!, x.grad!];
}

/** An 8 x 512 MLP's backward at batch 64 (the weight gradients reduce over the batch). */
function mlp(): Tensor[] {
  const ws = Array.from({ length: 8 }, () => empty([512, 512]).requiresGrad_());
  let h = empty([64, 512]);
  for (const w of ws) h = h.matmul(w).relu();
  h.sum().backward();
  return ws.map((w) => w.grad!);
}

/** beautiful_mnist's forward and backward at batch 512 (bench/steps_gpu.ts's model, no optimizer). */
function mnist(): Tensor[] {
  const ws = [
    [32, 1, 5],
    [32, 32, 5],
    [64, 32, 3],
    [64, 64, 3],
  ].map(([co, ci, k]) => empty([co!, ci!, k!, k!]).requiresGrad_());
  const fc = empty([576, 10]).requiresGrad_();
  const norm = (x: Tensor) => x.sub(x.mean([0, 2, 3], true)).div(x.var([0, 2, 3], true).add(1e-5).sqrt());
  let x = empty([512, 1, 28, 28]);
  x = norm(x.conv2d(ws[0]!).relu().conv2d(ws[1]!).relu()).maxPool2d();
  x = norm(x.conv2d(ws[2]!).relu().conv2d(ws[3]!).relu()).maxPool2d();
  x.flatten(1)
    .matmul(fc)
    .sparseCategoricalCrossentropy(Tensor.randint([512], 0, 10, { device }))
    .backward();
  return [...ws, fc].map((w) => w.grad!);
}

/** bench/steps_gpu.ts's beautiful_mnist training step (biases, BatchNorm in training, Adam): its very kernels. */
function step(): () => void {
  Device.default = device;
  Tensor.manualSeed(0);
  const model = new Model();
  const params = getParameters(model);
  params[0]!.realize(...params.slice(1));
  const opt = new Adam(params);
  Tensor.training = true;
  // the batch picked from the training set on the device, as there (the first conv and its gradient read it)
  const samples = Tensor.randint([512], 0, 60000, { device });
  const loss = model
    .forward(empty([60000, 1, 28, 28]).indexSelect(0, samples))
    .sparseCategoricalCrossentropy(
      Tensor.empty([60000], { device, dtype: dtypes.int32 }).indexSelect(0, samples),
    );
  loss.backward();
  Tensor.training = false;
  return () => opt.step(loss, ...runningStats(model));
}

/** A thunk realizing the tensors. */
const realizing = (make: () => Tensor[]) => (): (() => void) => {
  const outs = make();
  return () => outs[0]!.realize(...outs.slice(1));
};

const WORKLOADS: Record<string, () => () => void> = {
  mnist: realizing(mnist),
  step,
  conv: realizing(() => conv(512, 32, 24, 32, 5)),
  conv3: realizing(() => conv(512, 32, 12, 64, 3)),
  mlp: realizing(mlp),
  sum: realizing(() => [empty([1 << 24]).sum()]),
  gather: realizing(() => [empty([60000, 784]).indexSelect(0, Tensor.randint([512], 0, 60000, { device }))]),
};

const name = process.argv[2] ?? 'conv';
const make = WORKLOADS[name];
if (make === undefined)
  throw new Error(`sectors: no workload ${name}; one of ${Object.keys(WORKLOADS).join(', ')}`);
const loads = countSectors(make(), { groups: 4, trips: 2 });
console.log(
  `${'kernel'.padEnd(44)} ${'load'.padStart(5)} ${'sectors/req'.padStart(11)} ${'used'.padStart(6)}`,
);
for (const l of loads)
  console.log(
    `${l.kernel.padEnd(44)} ${String(l.pc).padStart(5)} ${(l.sectors / l.requests).toFixed(1).padStart(11)} ${((100 * l.bytes) / (32 * l.sectors)).toFixed(0).padStart(5)}%`,
  );
