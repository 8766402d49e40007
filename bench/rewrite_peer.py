# The peer figures for bench/rewrite.ts: tinygrad's UOp construction and simplify on the same workload.
# Run by bench/rewrite.ts when tinygrad is importable (set TINYGRAD_PATH to a checkout); prints JSON.
import json, sys, time

from tinygrad.uop.ops import UOp

M = 0xFFFFFFFF

def rng(seed):
  s = seed & M
  def next_():
    nonlocal s
    s = (s + 0x6D2B79F5) & M
    t = s
    t = ((t ^ (t >> 15)) * (t | 1)) & M
    t = (t ^ ((t + (((t ^ (t >> 7)) * (t | 61)) & M)) & M)) & M
    return ((t ^ (t >> 14)) & M) / 2**32
  return next_

VARS = [UOp.variable('gidx0', 0, 255), UOp.variable('gidx1', 0, 63), UOp.variable('lidx0', 0, 15),
        UOp.variable('ridx0', 0, 2), UOp.variable('n', 1, 1024)]

def const(v): return UOp.const(v, VARS[0].dtype)

# the same draws in the same order as randomExpr in bench/rewrite.ts, so both simplify the same expressions
def random_expr(nxt, depth):
  def rint(lo, hi): return lo + int(nxt() * (hi - lo + 1))
  if depth == 0 or nxt() < 0.2:
    return VARS[rint(0, len(VARS) - 1)] if nxt() < 0.75 else const(rint(-8, 64))
  a = random_expr(nxt, depth - 1)
  k = rint(0, 7)
  if k in (0, 1): return a + random_expr(nxt, depth - 1)
  if k == 2: return a * rint(1, 16)
  if k == 3: return a // rint(1, 16)
  if k == 4: return a % rint(1, 16)
  if k == 5: return a - random_expr(nxt, depth - 1)
  if k == 6: return (a < random_expr(nxt, depth - 1)).where(a, const(0))
  return a.maximum(random_expr(nxt, depth - 1))

def main():
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
  out = {}
  base = UOp.variable('x', 0, 1 << 20)
  t0 = time.perf_counter()
  u = base
  for i in range(n): u = u + const(i)
  out['construct new nodes'] = 2 * n / (time.perf_counter() - t0)
  t0 = time.perf_counter()
  v = base
  for i in range(n): v = v + const(i)
  out['construct existing nodes'] = 2 * n / (time.perf_counter() - t0)
  del u, v
  best = float('inf')
  for _ in range(3):
    nxt = rng(20261122)
    exprs = [random_expr(nxt, 6) for _ in range(10_000)]
    t0 = time.perf_counter()
    for e in exprs: e.simplify()
    best = min(best, time.perf_counter() - t0)
  out['simplify 10,000 expressions'] = 10_000 / best
  print(json.dumps(out))

if __name__ == '__main__': main()
