// Bounded kernels: a fused expression too long for a compiler (a chain of 100,000 adds) is cut into kernels of
// bounded size by realizing intermediates, as marking them contiguous would. gcc -O3 takes about 0.2 ms per
// dependent statement up to ~8,000 of them, then grows faster (16,000: 0.4 ms each), and crashes near 100,000;
// V8 gives every local of a JS kernel a slot of one stack frame.
import { ContextVar } from '../helpers.ts';
import { ALU, GroupOp, Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** The longest chain of dependent elementwise ops one kernel may compute (0: unbounded); 2000 to 4000 compile fastest per op. */
export const KERNEL_DEPTH = new ContextVar('KERNEL_DEPTH', 2000);
/** The most elementwise ops one kernel may compute (0: unbounded). */
export const KERNEL_OPS = new ContextVar('KERNEL_OPS', 8000);
/**
 * A value of more elementwise ops than this that a reduce and other ops read is realized (0: never): the reduce's
 * kernel and its readers' would each compute it (a chain that sums itself at every step would recompute its
 * whole past each time).
 */
export const KERNEL_SHARED_OPS = new ContextVar('KERNEL_SHARED_OPS', 256);

/**
 * A cap on the arguments of one kernel below its device's (Backend.maxBuffers: the CPU's koffi calls take 64);
 * 0: the device's alone.
 */
export const KERNEL_BUFFERS = new ContextVar('KERNEL_BUFFERS', 0);

/** Nodes whose value a kernel reads from memory or knows: a kernel's expression starts at them. */
const STARTS = new Set([Ops.BUFFER, Ops.PARAM, Ops.CONST, Ops.CONTIGUOUS, Ops.AFTER]);

/** A node whose value can be realized: one with a shape of known sizes. */
const realizable = (u: UOp) => u.shape?.every((d) => typeof d === 'number') === true;

/**
 * The graph with intermediates realized (wrapped in CONTIGUOUS) wherever a kernel would otherwise compute a
 * chain of more than KERNEL_DEPTH dependent elementwise ops, or more than KERNEL_OPS of them, or take more than
 * maxArgs arguments (its output, the buffers and variables it reads; constants are lifted only while they fit,
 * src/engine/lift.ts), and where a value
 * of more than KERNEL_SHARED_OPS ops is read by a reduce and by other ops. Reduces and movement ops are counted
 * as if they fused with what they read, so the depth bound may cut early, never late; ordinary kernels (a conv,
 * an MLP step, attention) stay far below the bounds.
 */
export function boundKernels(sink: UOp, maxArgs: number): UOp {
  const maxDepth = KERNEL_DEPTH.value || Infinity;
  const maxOps = KERNEL_OPS.value || Infinity;
  const maxShared = KERNEL_SHARED_OPS.value || Infinity;
  // one argument is the output
  const maxBuffers = Math.min(maxArgs, KERNEL_BUFFERS.value || Infinity) - 1;
  // the arguments a node's kernel reads (a source's set is shared where a node adds none)
  const buffers = new Map<UOp, ReadonlySet<UOp>>();
  const NONE: ReadonlySet<UOp> = new Set();
  const read = (u: UOp): ReadonlySet<UOp> => {
    if (u.op === Ops.CONST) return NONE;
    if (STARTS.has(u.op)) return new Set([u]);
    let out: ReadonlySet<UOp> = NONE;
    for (const s of u.src) {
      const b = cut.has(s) ? new Set([s]) : buffers.get(s)!;
      if (b.size === 0 || b === out) continue;
      if (out.size === 0) out = b;
      else if (![...b].every((x) => out.has(x))) out = new Set([...out, ...b]);
    }
    return out;
  };
  const depth = new Map<UOp, number>();
  // ops under a node: each node's ops are shared among its readers, so no op is counted twice (a sum over
  // paths would grow exponentially with sharing); shared values are counted short, the depth stays exact
  const ops = new Map<UOp, number>();
  const cut = new Set<UOp>();
  const order = sink.toposort();
  const readers = new Map<UOp, number>();
  for (const u of order)
    for (let i = 0; i < u.src.length; i++)
      if (u.src.indexOf(u.src[i]!) === i) readers.set(u.src[i]!, (readers.get(u.src[i]!) ?? 0) + 1);
  // values a reduce reads (through views)
  const reduced = new Set<UOp>();
  for (const u of order)
    if (u.op === Ops.REDUCE) {
      let x = u.src[0]!;
      while (GroupOp.Movement.has(x.op)) x = x.src[0]!;
      reduced.add(x);
    }
  const measure = (u: UOp): [number, number] => {
    if (STARTS.has(u.op)) return [0, 0];
    const own = ALU.has(u.op) ? 1 : 0;
    let d = 0;
    let n = own;
    for (let i = 0; i < u.src.length; i++) {
      const s = u.src[i]!;
      if (cut.has(s) || u.src.indexOf(s) < i) continue;
      d = Math.max(d, depth.get(s)!);
      n += ops.get(s)! / readers.get(s)!;
    }
    return [d + own, n];
  };
  for (const u of order) {
    let [d, n] = measure(u);
    // an op past a bound reads its largest sources from memory instead
    if (ALU.has(u.op) && (d > maxDepth || n > maxOps)) {
      const bySize = u.src.filter((s) => realizable(s) && ops.get(s)! > 0);
      bySize.sort((a, b) => ops.get(b)! - ops.get(a)! || depth.get(b)! - depth.get(a)!);
      for (const s of bySize) {
        if (d <= maxDepth && n <= maxOps) break;
        cut.add(s);
        [d, n] = measure(u);
      }
    }
    let b = read(u);
    // a kernel past the buffer bound reads its sources that read the most buffers as one buffer each
    if (b.size > maxBuffers) {
      const bySize = u.src.filter((s) => realizable(s) && !cut.has(s) && buffers.get(s)!.size > 1);
      bySize.sort((x, y) => buffers.get(y)!.size - buffers.get(x)!.size);
      for (const s of bySize) {
        if (b.size <= maxBuffers) break;
        cut.add(s);
        b = read(u);
      }
      [d, n] = measure(u);
    }
    buffers.set(u, b);
    depth.set(u, d);
    ops.set(u, n);
    if (n > maxShared && readers.get(u)! > 1 && reduced.has(u) && realizable(u)) cut.add(u);
  }
  return realizeCuts(sink, cut);
}

/** The graph with each cut node (and everything under it, cuts below included) realized. */
function realizeCuts(sink: UOp, cut: ReadonlySet<UOp>): UOp {
  if (cut.size === 0) return sink;
  const rebuilt = new Map<UOp, UOp>();
  for (const u of sink.toposort()) {
    const v = u.withSourcesFrom(rebuilt);
    rebuilt.set(u, cut.has(u) ? UOp.make(Ops.CONTIGUOUS, [v]) : v);
  }
  return rebuilt.get(sink)!;
}
