# What the numpy peer scripts share: best-of-n timing, as bench/timing.ts times ours.
import time

def best(fn, runs=3):
  fn()
  t = float('inf')
  for _ in range(runs):
    t0 = time.perf_counter(); fn(); t = min(t, time.perf_counter() - t0)
  return t
