// Speed of the compiler's hot loop: hash-consed UOp construction and symbolic simplification.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dtypes, UOp } from '../src/index.ts';

/** mulberry32: a small seeded PRNG so every run simplifies the same expressions. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const vars = [
  UOp.variable('gidx0', 0, 255),
  UOp.variable('gidx1', 0, 63),
  UOp.variable('lidx0', 0, 15),
  UOp.variable('ridx0', 0, 2),
  UOp.variable('n', 1, 1024),
];

/** A random index expression of the kinds kernels make: sums of scaled terms, //, %, comparisons, where. */
function randomExpr(next: () => number, depth: number): UOp {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  if (depth === 0 || next() < 0.2)
    return next() < 0.75 ? vars[int(0, vars.length - 1)]! : UOp.const(dtypes.index, int(-8, 64));
  const a = randomExpr(next, depth - 1);
  switch (int(0, 7)) {
    case 0:
    case 1:
      return a.add(randomExpr(next, depth - 1));
    case 2:
      return a.mul(int(1, 16));
    case 3:
      return a.idiv(int(1, 16));
    case 4:
      return a.mod(int(1, 16));
    case 5:
      return a.sub(randomExpr(next, depth - 1));
    case 6:
      return a.lt(randomExpr(next, depth - 1)).where(a, UOp.const(dtypes.index, 0));
    default:
      return a.maximum(randomExpr(next, depth - 1));
  }
}

function time<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

const rows: [string, number, number][] = [];
const tick = () => new Promise((r) => setTimeout(r, 0));

// construction of new nodes: chains of distinct adds, in batches so the weak table can let go between them
const N = 1_000_000;
const BATCH = 50_000;
let built = 0;
let ms = 0;
for (let b = 0; b < N / BATCH; b++) {
  const base = UOp.variable('x', 0, 1 << 20);
  const [, t] = time(() => {
    let u = base;
    for (let i = 0; i < BATCH; i++) u = u.add(UOp.const(dtypes.index, b * BATCH + i));
    return u;
  });
  built += BATCH * 2; // an ADD and a CONST per step
  ms += t;
  await tick();
}
rows.push(['construct new nodes', built, ms]);

// construction that hits the table: rebuilding an existing graph
{
  const base = UOp.variable('x', 0, 1 << 20);
  const keep: UOp[] = [];
  let u = base;
  for (let i = 0; i < BATCH; i++) keep.push((u = u.add(UOp.const(dtypes.index, i))));
  const [, t] = time(() => {
    let v = base;
    for (let r = 0; r < 10; r++) {
      v = base;
      for (let i = 0; i < BATCH; i++) v = v.add(UOp.const(dtypes.index, i));
    }
    return v;
  });
  rows.push(['construct existing nodes', BATCH * 2 * 10, t]);
}

// simplification of a fixed seeded set of expressions; best of three runs (the set is rebuilt each time and
// the previous one released, so every run starts from the same state)
{
  let best = Infinity;
  let inputNodes = 0;
  let outputNodes = 0;
  for (let run = 0; run < 3; run++) {
    const next = rng(20261122);
    const exprs = Array.from({ length: 10_000 }, () => randomExpr(next, 6));
    inputNodes = exprs.reduce((n, e) => n + e.toposort().length, 0);
    const [out, t] = time(() => exprs.map((e) => e.simplify()));
    outputNodes = out.reduce((n, e) => n + e.toposort().length, 0);
    best = Math.min(best, t);
    await tick();
  }
  rows.push(['simplify 10,000 expressions', 10_000, best]);
  console.log(
    `simplified ${inputNodes} nodes to ${outputNodes} (${((outputNodes / inputNodes) * 100).toFixed(1)}%)`,
  );
}

// the peer: tinygrad on the same workload, when a checkout is given (TINYGRAD_PATH) or installed
const peer = runPeer();

console.log('');
const head = `${'what (count: nodes, or expressions)'.padEnd(44)} ${'count'.padStart(10)} ${'ms'.padStart(9)} ${'per second'.padStart(12)}`;
console.log(peer ? `${head} ${'tinygrad'.padStart(10)} ${'ratio'.padStart(7)}` : head);
const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
for (const [what, n, t] of rows) {
  const rate = (n / t) * 1000;
  const line = `${what.padEnd(44)} ${String(n).padStart(10)} ${t.toFixed(1).padStart(9)} ${fmt(rate).padStart(12)}`;
  const p = peer?.[what];
  console.log(
    p === undefined ? line : `${line} ${fmt(p).padStart(10)} ${`${(rate / p).toFixed(1)}x`.padStart(7)}`,
  );
}
if (peer === undefined)
  console.log('\n(peer: set TINYGRAD_PATH to a tinygrad checkout to measure it in the same run)');

function runPeer(): Record<string, number> | undefined {
  const env = { ...process.env, PYTHONPATH: process.env.TINYGRAD_PATH ?? process.env.PYTHONPATH ?? '' };
  const script = fileURLToPath(new URL('./rewrite_peer.py', import.meta.url));
  const r = spawnSync('python3', [script], { env, encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  return JSON.parse(r.stdout) as Record<string, number>;
}
