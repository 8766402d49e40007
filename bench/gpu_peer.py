# PyTorch's figures for bench/gpu.ts, the same rows timed the same way (median, synchronized), printed as JSON.
import json, time
import torch

torch.backends.cuda.matmul.allow_tf32 = False  # float32 matmuls as float32 (cuBLAS without TF32)
dev = 'cuda'

def time_it(fn, runs=10):
    for _ in range(20): fn()  # as bench/gpu.ts warms up
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2]

out = {}
N = 1 << 28
x = torch.rand(N, device=dev); y = torch.rand(N, device=dev)
out['copy 2^28 f32 (neg)'] = 8 * N / time_it(lambda: x.neg()) / 1e9
out['x*y+1 2^28 f32'] = 12 * N / time_it(lambda: x * y + 1) / 1e9
out['sum 2^28 f32'] = 4 * N / time_it(lambda: x.sum()) / 1e9
del x, y
host = torch.ones(1 << 28, dtype=torch.uint8)  # pageable memory, as the tsgrad rows use
gpu = torch.empty(1 << 28, dtype=torch.uint8, device=dev)
out['copy host->GPU 256 MiB'] = (1 << 28) / time_it(lambda: gpu.copy_(host), 5) / 1e9
out['copy GPU->host 256 MiB'] = (1 << 28) / time_it(lambda: host.copy_(gpu), 5) / 1e9
del host, gpu
for n, dt, name in [(4096, torch.float32, 'float32'), (4096, torch.float16, 'float16'), (4096, torch.bfloat16, 'bfloat16'), (8192, torch.float16, 'float16'), (8192, torch.bfloat16, 'bfloat16')]:
    a = torch.rand(n, n, device=dev, dtype=dt); b = torch.rand(n, n, device=dev, dtype=dt)
    out[f'matmul {n}^3 {name}'] = 2 * n**3 / time_it(lambda: a @ b, 3 if n >= 8192 else 5) / 1e12
x = torch.rand(1024, device=dev)
runs = 200
x + 1; torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(runs): x + 1
torch.cuda.synchronize()
out['x+1 on 1024 (realize call)'] = (time.perf_counter() - t0) / runs * 1e6
g = torch.cuda.CUDAGraph()  # torch's replay: 16 kernels captured in a CUDA graph
with torch.cuda.graph(g):
    y = x
    for _ in range(16): y = y + 1
for _ in range(3): g.replay()
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(runs): g.replay()
torch.cuda.synchronize()
out['jit replay, per kernel'] = (time.perf_counter() - t0) / runs / 16 * 1e6
print(json.dumps(out))
