# numpy's figures for bench/ops.ts, measured the same way (best of a few runs); prints JSON.
import json, time
import numpy as np
from timing import best

rng = np.random.default_rng(0)
out = {}
for n in (512, 1024, 2048):
  a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
  out[f'matmul{n}'] = 2 * n**3 / best(lambda: a @ b, 1 if n >= 2048 else 3) / 1e9
n = 1 << 24
x = rng.random(n, dtype=np.float32); y = rng.random(n, dtype=np.float32)
out['fused'] = 3 * 4 * n / best(lambda: x * y + 1) / 1e9
s = rng.random(1 << 26, dtype=np.float32)
out['sum'] = 4 * (1 << 26) / best(lambda: s.sum()) / 1e9
dst = np.empty((1 << 26) - 16, dtype=np.float32)
out['copy'] = 8 * dst.size / best(lambda: np.copyto(dst, s[16:])) / 1e9
m = rng.random((4096, 1024), dtype=np.float32)
def softmax():
  e = np.exp(m - m.max(1, keepdims=True)); return e / e.sum(1, keepdims=True)
out['softmax'] = 2 * 4 * 4096 * 1024 / best(softmax) / 1e9
# conv2d as numpy can do it: im2col windows and one matmul
xi = rng.random((32, 64, 58, 58), dtype=np.float32); wi = rng.random((64, 64, 3, 3), dtype=np.float32)
def conv():
  cols = np.lib.stride_tricks.sliding_window_view(xi, (3, 3), axis=(2, 3))  # (32, 64, 56, 56, 3, 3)
  return np.einsum('bchwij,ocij->bohw', cols, wi, optimize=True)
out['conv2d'] = 2 * 32 * 64 * 56 * 56 * 64 * 9 / best(conv, 1) / 1e9
M, K, N = 32 * 56 * 56, 64 * 9, 64  # the matmul of conv2d's size
a = rng.random((M, K), dtype=np.float32); b = rng.random((K, N), dtype=np.float32)
out['convMatmul'] = 2 * M * K * N / best(lambda: a @ b, 1) / 1e9
print(json.dumps(out))
