# tinygrad's figures for bench/firststep.ts: the same three training steps (CPU, Adam), timed the same way.
# Usage: PYTHONPATH=$TINYGRAD_PATH CACHEDB=<file> python3 bench/firststep_peer.py <mnist|mlp|transformer> <later>
import json, math, sys, time
from tinygrad import Tensor, dtypes, nn
from tinygrad.helpers import DEV
from tinygrad.nn.state import get_parameters

DEV.value = "CPU"
model, later = sys.argv[1], int(sys.argv[2])

class Net:  # examples/mnist-model.ts
  def __init__(self):
    self.c1, self.b1 = nn.Conv2d(1, 16, 3), nn.BatchNorm(16)
    self.c2, self.b2 = nn.Conv2d(16, 32, 3), nn.BatchNorm(32)
    self.l1 = nn.Linear(32 * 5 * 5, 10)
  def __call__(self, x):
    h = self.b1(self.c1(x)).relu().max_pool2d(2)
    g = self.b2(self.c2(h)).relu().max_pool2d(2)
    return self.l1(g.flatten(1))

class MLP:
  def __init__(self): self.layers = [nn.Linear(512, 512) for _ in range(8)]
  def __call__(self, x):
    for i, l in enumerate(self.layers): x = l(x).relu() if i < 7 else l(x)
    return x

VOCAB, DIM, HEADS, SEQ = 256, 128, 4, 64
class Block:
  def __init__(self):
    self.ln1, self.qkv, self.out = nn.LayerNorm(DIM), nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
    self.ln2, self.up, self.down = nn.LayerNorm(DIM), nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
  def __call__(self, x):
    b, t, _ = x.shape
    q, k, v = [u.reshape(b, t, HEADS, DIM // HEADS).transpose(1, 2) for u in self.qkv(self.ln1(x)).chunk(3, -1)]
    attn = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(b, t, DIM)
    h = x + self.out(attn)
    return h + self.down(self.up(self.ln2(h)).gelu())

class Transformer:
  def __init__(self):
    self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
    self.blocks, self.ln_f, self.head = [Block(), Block()], nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)
  def __call__(self, x):
    h = self.tokens(x) + self.positions(Tensor.arange(SEQ).reshape(1, SEQ))
    for b in self.blocks: h = b(h)
    return self.head(self.ln_f(h))

def batch(i):
  if model == "mnist":
    x = Tensor([(k * 31 + i * 7) % 256 for k in range(128 * 784)], dtype=dtypes.uint8).reshape(128, 1, 28, 28)
    return x.float() / 255, Tensor([(k + i) % 10 for k in range(128)])
  if model == "mlp":
    return Tensor([math.sin(k * 0.37 + i) for k in range(64 * 512)]).reshape(64, 512), Tensor([(k * 7 + i) % 512 for k in range(64)])
  text = Tensor([(k * 37 + i * 11) % VOCAB for k in range(8 * (SEQ + 1))]).reshape(8, SEQ + 1)
  return text[:, :SEQ].contiguous(), text[:, 1:].contiguous()

t = time.perf_counter()
Tensor.manual_seed(0)
net = {"mnist": Net, "mlp": MLP, "transformer": Transformer}[model]()
opt = nn.optim.Adam(get_parameters(net), lr=0.001)
Tensor.realize(*get_parameters(net))
init = time.perf_counter() - t
batches = [tuple(u.realize() for u in batch(i)) for i in range(later + 1)]

def step(x, y):
  with Tensor.train():
    opt.zero_grad()
    loss = net(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.item()

t = time.perf_counter()
step(*batches[0])
first = time.perf_counter() - t
t = time.perf_counter()
for b in batches[1:]: step(*b)
print(json.dumps({"init": init, "first": first, "later": (time.perf_counter() - t) / later, "compiler": 0}))
