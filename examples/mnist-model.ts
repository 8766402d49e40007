// The small CNN that examples/mnist.ts trains and bench/train.ts times.
import { BatchNorm, Conv2d, Linear, type Tensor } from '../src/index.ts';

export class Net {
  c1 = new Conv2d(1, 16, 3);
  b1 = new BatchNorm(16);
  c2 = new Conv2d(16, 32, 3);
  b2 = new BatchNorm(32);
  l1 = new Linear(32 * 5 * 5, 10);
  forward(x: Tensor): Tensor {
    const h = this.b1.forward(this.c1.forward(x)).relu().maxPool2d(2);
    const g = this.b2.forward(this.c2.forward(h)).relu().maxPool2d(2);
    return this.l1.forward(g.flatten(1));
  }
  parameters(): Tensor[] {
    return [this.c1, this.b1, this.c2, this.b2, this.l1].flatMap((m) =>
      [m.weight, m.bias].filter((t): t is Tensor => t !== undefined),
    );
  }
  buffers(): Tensor[] {
    return [this.b1, this.b2]
      .flatMap((b) => [b.runningMean, b.runningVar, b.numBatchesTracked])
      .filter((t): t is Tensor => t !== undefined);
  }
}
