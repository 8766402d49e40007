// tinygrad's examples/beautiful_mnist.py model written with tsgrad (bench/beautiful_mnist.ts, bench/train.ts,
// bench/steps_gpu.ts), and its training step.
import { Adam, BatchNorm, Conv2d, getParameters, Linear, Tensor } from '../src/index.ts';

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

/**
 * A new model and its training step with Adam (as beautiful_mnist.py): the images and labels at `samples` picked
 * from the training set on the device, the loss realized with the parameters and running statistics.
 */
export function trainStep(
  trainX: Tensor,
  trainY: Tensor,
): { model: Model; step: (samples: Tensor) => Tensor } {
  const model = new Model();
  const opt = new Adam(getParameters(model.layers));
  const stats = runningStats(model);
  const step = (samples: Tensor) => {
    Tensor.training = true;
    opt.zeroGrad();
    const loss = model
      .forward(trainX.indexSelect(0, samples))
      .sparseCategoricalCrossentropy(trainY.indexSelect(0, samples));
    loss.backward();
    opt.step(loss, ...stats);
    Tensor.training = false;
    return loss;
  };
  return { model, step };
}
