# PyTorch eager's figures for bench/steps_gpu.ts: the same two training steps (beautiful_mnist's model at batch
# 512, an 8x512 MLP at batch 64, Adam), the mean step time over the given steps and the kernels of one step from
# torch.profiler (CUDA time per kernel name), printed as JSON on the last line.
import json, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
dev = 'cuda'
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

def beautiful():
  torch.manual_seed(0)
  train_x = torch.rand(60000, 1, 28, 28, device=dev)
  train_y = torch.randint(0, 10, (60000,), device=dev)
  model = nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(576, 10)).to(dev)
  opt = torch.optim.Adam(model.parameters())
  def step():
    samples = torch.randint(0, 60000, (512,), device=dev)
    opt.zero_grad()
    loss = F.cross_entropy(model(train_x[samples]), train_y[samples])
    loss.backward()
    opt.step()
  return step

def mlp():
  torch.manual_seed(0)
  layers = []
  for i in range(8): layers += [nn.Linear(512, 512)] + ([nn.ReLU()] if i < 7 else [])
  model = nn.Sequential(*layers).to(dev)
  opt = torch.optim.Adam(model.parameters(), lr=0.001)
  x = torch.randn(64, 512, device=dev)
  def step():
    opt.zero_grad()
    loss = F.cross_entropy(model(x), torch.randint(0, 512, (64,), device=dev))
    loss.backward()
    opt.step()
  return step

def measure(step):
  for _ in range(3): step()
  torch.cuda.synchronize(); t0 = time.perf_counter()
  for _ in range(STEPS): step()
  torch.cuda.synchronize()
  seconds = (time.perf_counter() - t0) / STEPS
  with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    step(); torch.cuda.synchronize()
  rows = [(e.key, e.device_time_total / 1e6) for e in prof.key_averages() if e.device_time_total > 0]
  rows.sort(key=lambda r: -r[1])
  return {'step': seconds, 'kernels': rows[:12]}

print(json.dumps({'mnist': measure(beautiful()), 'mlp': measure(mlp())}))
