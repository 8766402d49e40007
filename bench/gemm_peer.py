# cuBLAS (through PyTorch) beside bench/gemm.ts: one matmul timed as ours is, by events around each run, the
# median of 7 after a warm-up. Usage: python3 bench/gemm_peer.py N dtype ...  (float32 with TF32 off)
import sys
import torch

torch.backends.cuda.matmul.allow_tf32 = False
args = sys.argv[1:]
for n, name in zip(args[::2], args[1::2]):
    n = int(n)
    a, b = (torch.randn(n, n, device='cuda', dtype=getattr(torch, name)) / 2 for _ in range(2))
    a @ b
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); a @ b; end.record(); end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    print(f'torch {name} {n}^3 {2 * n**3 / sorted(times)[3] / 1e12:7.1f} TFLOP/s')
