// tinygrad's examples/beautiful_mnist.py model written with tsgrad (bench/beautiful_mnist.ts, bench/train.ts).
import { BatchNorm, Conv2d, Linear, type Tensor } from '../src/index.ts';

export class Model {
  layers = [
    new Conv2d(1, 32, 5),
    new Conv2d(32, 32, 5),
    new BatchNorm(32),
    new Conv2d(32, 64, 3),
    new Conv2d(64, 64, 3),
    new BatchNorm(64),
    new Linear(576, 10),
  ] as const;

  forward(x: Tensor): Tensor {
    const [c1, c2, bn1, c3, c4, bn2, fc] = this.layers;
    x = bn1.forward(c2.forward(c1.forward(x).relu()).relu()).maxPool2d();
    x = bn2.forward(c4.forward(c3.forward(x).relu()).relu()).maxPool2d();
    return fc.forward(x.flatten(1));
  }
}

/** The running statistics a train step writes too (realized with it). */
export const runningStats = (model: Model): Tensor[] =>
  model.layers.flatMap((l) =>
    l instanceof BatchNorm
      ? [l.runningMean, l.runningVar, l.numBatchesTracked].filter((t): t is Tensor => t !== undefined)
      : [],
  );
