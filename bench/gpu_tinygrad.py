# tinygrad's figures for bench/gpu.ts (its CUDA device, default opts), the same rows timed the same way (median,
# synchronized), printed as JSON. Needs TINYGRAD_PATH (a tinygrad checkout) on sys.path.
import json, os, sys, time
sys.path.insert(0, os.environ['TINYGRAD_PATH'])
os.environ.setdefault('DEV', 'CUDA')
from tinygrad import Tensor, Device, dtypes, TinyJit

dev = Device[Device.DEFAULT]

def time_it(fn, runs=10):
    # through TinyJit, so that Python's scheduling (about a millisecond a call) is not timed as the kernel
    jitted = TinyJit(lambda: fn().realize())
    for _ in range(3): jitted()
    dev.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter(); jitted(); dev.synchronize(); times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2]

out = {}
N = 1 << 28
x = Tensor.rand(N).realize(); y = Tensor.rand(N).realize()
out['copy 2^28 f32 (neg)'] = 8 * N / time_it(lambda: -x) / 1e9
out['x*y+1 2^28 f32'] = 12 * N / time_it(lambda: x * y + 1) / 1e9
out['sum 2^28 f32'] = 4 * N / time_it(lambda: x.sum()) / 1e9
del x, y
for n, dt, name in [(4096, dtypes.float32, 'float32'), (4096, dtypes.float16, 'float16'), (4096, dtypes.bfloat16, 'bfloat16'), (8192, dtypes.float16, 'float16'), (8192, dtypes.bfloat16, 'bfloat16')]:
    a = Tensor.rand(n, n).cast(dt).realize(); b = Tensor.rand(n, n).cast(dt).realize()
    out[f'matmul {n}^3 {name}'] = 2 * n**3 / time_it(lambda: a @ b, 3 if n >= 8192 else 5) / 1e12
x = Tensor.rand(1024).realize()
runs = 200
(x + 1).realize(); dev.synchronize(); t0 = time.perf_counter()
for _ in range(runs): (x + 1).realize()
dev.synchronize()
out['x+1 on 1024 (realize call)'] = (time.perf_counter() - t0) / runs * 1e6
@TinyJit
def step(a):
    for _ in range(16): a = (a + 1).contiguous()
    return a.realize()
for _ in range(3): step(x)
dev.synchronize(); t0 = time.perf_counter()
for _ in range(runs): step(x)
dev.synchronize()
out['jit replay, per kernel'] = (time.perf_counter() - t0) / runs / 16 * 1e6
print(json.dumps(out))
