// Bounded kernels: a fused expression too long for a compiler (a chain of 100,000 adds) is cut into kernels of
// bounded size by realizing intermediates, as marking them contiguous would. gcc's time grows faster than
// linearly in a kernel's dependent statements and its parser crashes near 100,000; V8 gives every local a
// register of one stack frame.
import { ContextVar } from '../helpers.ts';
import { ALU, Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** The longest chain of dependent elementwise ops one kernel may compute (0: unbounded). */
export const KERNEL_DEPTH = new ContextVar('KERNEL_DEPTH', 2000);
/** The most elementwise ops one kernel may compute (0: unbounded). */
export const KERNEL_OPS = new ContextVar('KERNEL_OPS', 8000);
/**
 * A value of more elementwise ops than this that several ops read is realized (0: never): every kernel reading
 * it would compute it again (a chain that sums itself at every step would recompute its whole past each time).
 */
export const KERNEL_SHARED_OPS = new ContextVar('KERNEL_SHARED_OPS', 256);

/** Nodes whose value a kernel reads from memory or knows: a kernel's expression starts at them. */
const STARTS = new Set([Ops.BUFFER, Ops.PARAM, Ops.CONST, Ops.CONTIGUOUS, Ops.AFTER]);

/** A node whose value can be realized: one with a shape of known sizes. */
const realizable = (u: UOp) => u.shape?.every((d) => typeof d === 'number') === true;

/**
 * The graph with intermediates realized (wrapped in CONTIGUOUS) wherever a kernel would otherwise compute a
 * chain of more than KERNEL_DEPTH dependent elementwise ops, or more than KERNEL_OPS of them, and where a value
 * of more than KERNEL_SHARED_OPS ops has several readers. Reduces and
 * movement ops are counted as if they fused with what they read, so the bounds may cut early, never late;
 * ordinary kernels (a conv, an MLP step, attention) stay far below them.
 */
export function boundKernels(sink: UOp): UOp {
  const maxDepth = KERNEL_DEPTH.value || Infinity;
  const maxOps = KERNEL_OPS.value || Infinity;
  const maxShared = KERNEL_SHARED_OPS.value || Infinity;
  const depth = new Map<UOp, number>();
  // ops under a node: a sum over its sources, which counts a shared source once per path; a shared value
  // of more than KERNEL_SHARED_OPS ops is realized, so the sum stays near the number of distinct ops
  const ops = new Map<UOp, number>();
  const cut = new Set<UOp>();
  const order = sink.toposort();
  const readers = new Map<UOp, number>();
  for (const u of order)
    for (let i = 0; i < u.src.length; i++)
      if (u.src.indexOf(u.src[i]!) === i) readers.set(u.src[i]!, (readers.get(u.src[i]!) ?? 0) + 1);
  const measure = (u: UOp): [number, number] => {
    if (STARTS.has(u.op)) return [0, 0];
    const own = ALU.has(u.op) ? 1 : 0;
    let d = 0;
    let n = own;
    for (let i = 0; i < u.src.length; i++) {
      const s = u.src[i]!;
      if (cut.has(s) || u.src.indexOf(s) < i) continue;
      d = Math.max(d, depth.get(s)!);
      n += ops.get(s)!;
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
    depth.set(u, d);
    ops.set(u, n);
    if (n > maxShared && (readers.get(u) ?? 0) > 1 && realizable(u)) cut.add(u);
  }
  return realizeCuts(sink, cut);
}

/** The graph with each cut node (and everything under it, cuts below included) realized. */
function realizeCuts(sink: UOp, cut: ReadonlySet<UOp>): UOp {
  if (cut.size === 0) return sink;
  const rebuilt = new Map<UOp, UOp>();
  for (const u of sink.toposort()) {
    let src: UOp[] | undefined;
    for (let i = 0; i < u.src.length; i++) {
      const s = rebuilt.get(u.src[i]!)!;
      if (s !== u.src[i] && src === undefined) src = u.src.slice(0, i);
      src?.push(s);
    }
    const v = src === undefined ? u : u.withSrc(src);
    rebuilt.set(u, cut.has(u) ? UOp.make(Ops.CONTIGUOUS, [v]) : v);
  }
  return rebuilt.get(sink)!;
}
