// The training steps bench/firststep.ts times: beautiful_mnist's CNN, an 8x512 MLP and a small transformer.
import { Net } from '../examples/mnist-model.ts';
import { Adam, dtypes, Embedding, getParameters, LayerNorm, Linear, Tensor } from '../src/index.ts';

/** A model's training step and a function giving the i-th batch of its inputs. */
export interface Workload {
  step: (x: Tensor, y: Tensor) => Tensor;
  batch: (i: number) => [Tensor, Tensor];
  /** What the steps train: bench/firststep.ts hashes it after them, so that a compiler change that means to keep results can show it did. */
  params: readonly Tensor[];
}

/** beautiful_mnist: the CNN examples/mnist.ts trains, batch 128, Adam. */
export function mnistWorkload(): Workload {
  const BATCH = 128;
  Tensor.manualSeed(0);
  const net = new Net();
  const opt = new Adam(net.parameters(), { lr: 0.002 });
  return {
    params: opt.params,
    step: (x, y) => {
      Tensor.training = true;
      opt.zeroGrad();
      const loss = net.forward(x.cast(dtypes.float32).div(255)).sparseCategoricalCrossentropy(y);
      loss.backward();
      opt.step(loss, ...net.buffers());
      Tensor.training = false;
      return loss;
    },
    batch: (i) => {
      const x = new Uint8Array(BATCH * 784).map((_, k) => (k * 31 + i * 7) % 256);
      const y = new Int32Array(BATCH).map((_, k) => (k + i) % 10);
      return [new Tensor(x, { dtype: dtypes.uint8 }).reshape([BATCH, 1, 28, 28]), new Tensor(y)];
    },
  };
}

/** 8 Linear(512, 512) layers with relu between, batch 64, softmax cross-entropy over 512 classes, Adam. */
export function mlpWorkload(): Workload {
  const BATCH = 64;
  const WIDTH = 512;
  Tensor.manualSeed(0);
  const layers = Array.from({ length: 8 }, () => new Linear(WIDTH, WIDTH));
  const opt = new Adam(getParameters(layers), { lr: 0.001 });
  return {
    params: opt.params,
    step: (x, y) => {
      opt.zeroGrad();
      let h = x;
      layers.forEach((l, i) => {
        h = l.forward(h);
        if (i < layers.length - 1) h = h.relu();
      });
      const loss = h.sparseCategoricalCrossentropy(y);
      loss.backward();
      opt.step(loss);
      return loss;
    },
    batch: (i) => {
      const x = new Float32Array(BATCH * WIDTH).map((_, k) => Math.sin(k * 0.37 + i));
      const y = new Int32Array(BATCH).map((_, k) => (k * 7 + i) % WIDTH);
      return [new Tensor(x).reshape([BATCH, WIDTH]), new Tensor(y)];
    },
  };
}

const VOCAB = 256;
const DIM = 128;
const HEADS = 4;
const SEQ = 64;

/** A pre-norm transformer block: causal self-attention and a 4x gelu MLP, each added to the residual. */
class Block {
  ln1 = new LayerNorm(DIM);
  qkv = new Linear(DIM, 3 * DIM);
  out = new Linear(DIM, DIM);
  ln2 = new LayerNorm(DIM);
  up = new Linear(DIM, 4 * DIM);
  down = new Linear(4 * DIM, DIM);

  forward(x: Tensor): Tensor {
    const [b, t] = x.shape as [number, number, number];
    const heads = (u: Tensor) => u.reshape([b, t, HEADS, DIM / HEADS]).transpose(1, 2);
    const [q, k, v] = this.qkv.forward(this.ln1.forward(x)).chunk(3, -1).map(heads) as [
      Tensor,
      Tensor,
      Tensor,
    ];
    const attn = q.scaledDotProductAttention(k, v, { isCausal: true }).transpose(1, 2).reshape([b, t, DIM]);
    const h = x.add(this.out.forward(attn));
    return h.add(this.down.forward(this.up.forward(this.ln2.forward(h)).gelu()));
  }
}

/** A 2-layer transformer language model (d 128, 4 heads, seq 64, vocab 256), batch 8, next-token loss, Adam. */
export function transformerWorkload(): Workload {
  const BATCH = 8;
  Tensor.manualSeed(0);
  const tokens = new Embedding(VOCAB, DIM);
  const positions = new Embedding(SEQ, DIM);
  const blocks = [new Block(), new Block()];
  const lnF = new LayerNorm(DIM);
  const head = new Linear(DIM, VOCAB, { bias: false });
  const opt = new Adam(getParameters([tokens, positions, ...blocks, lnF, head]), { lr: 3e-4 });
  const where = Tensor.arange(SEQ).reshape([1, SEQ]);
  return {
    params: opt.params,
    step: (x, y) => {
      opt.zeroGrad();
      let h = tokens.forward(x).add(positions.forward(where));
      for (const block of blocks) h = block.forward(h);
      const loss = head.forward(lnF.forward(h)).sparseCategoricalCrossentropy(y);
      loss.backward();
      opt.step(loss);
      return loss;
    },
    batch: (i) => {
      const text = Int32Array.from({ length: BATCH * (SEQ + 1) }, (_, k) => (k * 37 + i * 11) % VOCAB);
      const all = new Tensor(text).reshape([BATCH, SEQ + 1]);
      return [all.get([], [0, SEQ]).contiguous(), all.get([], [1, SEQ + 1]).contiguous()];
    },
  };
}

export const WORKLOADS = { mnist: mnistWorkload, mlp: mlpWorkload, transformer: transformerWorkload };

export const TITLES: Record<keyof typeof WORKLOADS, string> = {
  mnist: 'beautiful_mnist (batch 128)',
  mlp: '8x512 MLP (batch 64)',
  transformer: 'transformer 2x128 (batch 8, seq 64)',
};
