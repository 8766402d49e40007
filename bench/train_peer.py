# Peers of bench/train.ts, JSON out: numpy's square f32 matmul GFLOP/s (the yardstick for kernel rates), the
# 8x512 MLP step (batch 64, forward and backward) written by hand in numpy, and, where TINYGRAD_PATH is set,
# tinygrad's beautiful_mnist train step (its model and Adam, batch 512, random images of MNIST's shape: the
# speed does not depend on the pixels) timed over a few JIT-replayed steps after warm-up.
# Usage: python3 bench/train_peer.py MNIST_STEPS
import json, os, sys, time
import numpy as np
from timing import best

rng = np.random.default_rng(0)
out = {}
n = 1024
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
out['matmul_gflops'] = 2 * n**3 / best(lambda: a @ b, 5) / 1e9

# the MLP step: 8 layers h = relu(h @ W + b) (no relu after the last), loss = mean squared error to a target
LAYERS, WIDTH, BATCH = 8, 512, 64
Ws = [rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH) for _ in range(LAYERS)]
bs = [np.zeros(WIDTH, np.float32) for _ in range(LAYERS)]
x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
target = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)

def mlp_step():
  hs = [x]
  for i in range(LAYERS):
    z = hs[-1] @ Ws[i] + bs[i]
    hs.append(np.maximum(z, 0) if i < LAYERS - 1 else z)
  dy = (hs[-1] - target) * np.float32(2 / (BATCH * WIDTH))
  grads = []
  for i in reversed(range(LAYERS)):
    if i < LAYERS - 1: dy = dy * (hs[i + 1] > 0)
    grads.append((hs[i].T @ dy, dy.sum(0)))
    dy = dy @ Ws[i].T
  return grads

out['mlp_ms'] = best(mlp_step, 20) * 1000

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
if os.environ.get('TINYGRAD_PATH') and steps > 0:
  sys.path.insert(0, os.environ['TINYGRAD_PATH'])
  from tinygrad import Tensor, TinyJit, nn, Context
  class Model:
    def __init__(self):
      self.layers = [
        nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
        nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
        lambda x: x.flatten(1), nn.Linear(576, 10)]
    def __call__(self, x): return x.sequential(self.layers)
  Tensor.manual_seed(0)
  X = Tensor(rng.random((60000, 1, 28, 28), dtype=np.float32) * 255).realize()
  Y = Tensor(rng.integers(0, 10, 60000).astype(np.int32)).realize()
  model = Model()
  opt = nn.optim.Adam(nn.state.get_parameters(model))
  @TinyJit
  @Context(TRAINING=1)
  def train_step():
    opt.zero_grad()
    samples = Tensor.randint(512, high=X.shape[0])
    loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
    return loss.realize(*opt.schedule_step())
  for _ in range(3): train_step().item()  # capture
  t0 = time.perf_counter()
  for _ in range(steps): train_step().item()
  out['tinygrad_mnist_step_ms'] = (time.perf_counter() - t0) / steps * 1000
print(json.dumps(out))
