# numpy's (OpenBLAS) f32 matmul GFLOP/s for bench/matmul.ts, measured the same way; sizes as arguments, JSON out.
import json, sys, time
import numpy as np
from timing import best

rng = np.random.default_rng(0)
out = {}
for n in map(int, sys.argv[1:]):
  a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
  out[str(n)] = 2 * n**3 / best(lambda: a @ b, 3 if n >= 2048 else 5) / 1e9
print(json.dumps(out))
