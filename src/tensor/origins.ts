// Autograd across realize: the graph each realized buffer was computed from, kept while gradients may still
// flow through it, and a write count per buffer so that no gradient reads values an assign has replaced since.
import { isReleased } from '../engine/buffers.ts';
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { fmtShape } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';
import { gradientPath } from './autograd.ts';

interface Origin {
  graph: UOp;
  /**
   * The write counts, when the graph ran, of the buffers it read (and of others of the same realize: held
   * weakly, so they keep no buffer alive).
   */
  counts: WeakMap<UOp, number>;
}

// Keyed by BUFFER node, so an origin (and the buffers its graph reads) lives exactly as long as the node,
// which is as long as a tensor or a graph holds the realized value. Disposing the tensor keeps the origin:
// a graph that read the freed buffer can still take gradients through what it was computed from.
const origins = new WeakMap<UOp, Origin>();
const writes = new WeakMap<UOp, number>();
/** How many times a buffer has been written since it was made (realized assigns, JIT replays). */
export const writeCount = (buf: UOp): number => writes.get(buf) ?? 0;

/** The value a realize computes for a tensor's graph: an assign's (STORE's) value, else the graph itself. */
function computedValue(graph: UOp): UOp {
  return graph.op === Ops.AFTER ? graph.src[1]!.src[1]! : graph;
}

/** Whether `node` occurs in `graph` (a search that stops when it finds it). */
function occursIn(node: UOp, graph: UOp): boolean {
  const seen = new Set<UOp>();
  const stack = [graph];
  while (stack.length) {
    const u = stack.pop()!;
    if (u === node) return true;
    for (const s of u.src)
      if (!seen.has(s)) {
        seen.add(s);
        stack.push(s);
      }
  }
  return false;
}

/**
 * Before a realize: for each graph (undefined: a tensor that is itself a gradient target), the origin its
 * result will have, if a gradient can flow from it to one of `targets` (the buffers of tensors with
 * requiresGrad) directly or through buffers that have origins. An assign whose value reads its own buffer
 * (an optimizer's moments, a running mean) gets none: the origin would read the value it replaces. One walk
 * over all the graphs; the write counts are shared by the origins of one realize.
 */
export function originsOf(
  graphs: readonly (UOp | undefined)[],
  targets: ReadonlySet<UOp>,
): (Origin | undefined)[] {
  const values = graphs.map((g) => (g === undefined || g.op === Ops.BUFFER ? undefined : computedValue(g)));
  const live = values.filter((v) => v !== undefined);
  if (live.length === 0) return [];
  const order = UOp.sink(...live).toposort();
  const onPath = gradientPath(order, (u) => targets.has(u) || origins.has(u));
  let counts: WeakMap<UOp, number> | undefined;
  return values.map((value, i) => {
    const graph = graphs[i]!;
    if (value === undefined || !onPath.has(value)) return undefined;
    if (graph.op === Ops.AFTER && occursIn(graph.src[0]!, value)) return undefined;
    if (counts === undefined) {
      counts = new WeakMap();
      for (const u of order) if (u.op === Ops.BUFFER) counts.set(u, writeCount(u));
    }
    return { graph: value, counts };
  });
}

/**
 * After a realize: each buffer it created, and each buffer an assign wrote, gets the origin found before it
 * (or loses an old one), and an assign's buffer counts one more write. A result that is an input of its
 * graph (the graph was a view of a buffer) keeps that buffer's origin.
 */
export function noteRealized(
  graphs: readonly UOp[],
  results: readonly UOp[],
  created: ReadonlySet<UOp>,
  found: readonly (Origin | undefined)[] | undefined,
): void {
  graphs.forEach((graph, i) => {
    const buf = results[i]!;
    const assigned = graph.op === Ops.AFTER && buf.op === Ops.BUFFER;
    if (!assigned && !created.has(buf)) return;
    if (assigned) writes.set(buf, writeCount(buf) + 1);
    const origin = found?.[i];
    if (origin !== undefined) origins.set(buf, origin);
    // (a buffer this realize created is new: it has no origin to lose)
    else if (assigned) origins.delete(buf);
  });
}

/** A buffer written by other means than a realize of a graph (a JIT replay): one more write, no origin. */
export function noteOverwritten(buf: UOp): void {
  writes.set(buf, writeCount(buf) + 1);
  origins.delete(buf);
}

/**
 * root with every buffer that has an origin replaced by the graph it was computed from, again and again
 * until none is left, except the buffers in `keep` (the gradient targets themselves). Also gives the way
 * back: each graph that was put in, to the buffer that holds its value, so that a gradient graph reads
 * realized values instead of computing them again. Throws, naming `op`, if an assign has written a buffer
 * since a graph put in read it (the gradient would read the new values).
 */
export function throughOrigins(
  op: string,
  root: UOp,
  keep: ReadonlySet<UOp>,
): { root: UOp; realized: Map<UOp, UOp> } {
  const realized = new Map<UOp, UOp>();
  for (;;) {
    const expand = new Map<UOp, UOp>();
    for (const u of root.toposort()) {
      const origin = u.op === Ops.BUFFER && !keep.has(u) ? origins.get(u) : undefined;
      if (origin === undefined) continue;
      for (const buf of origin.graph.toposort())
        if (buf.op === Ops.BUFFER && writeCount(buf) !== origin.counts.get(buf))
          throw new Error(
            `${op}: the loss was computed from a buffer ${fmtShape(buf.shape)} ${buf.dtype.name} that assign() has written since (an optimizer step?), so its gradient would use the new values; take gradients before writing the tensors the loss was computed from`,
          );
      expand.set(u, origin.graph);
      // a disposed tensor's buffer is gone: the gradient computes its value again
      if (!isReleased(u)) realized.set(origin.graph, u);
    }
    if (expand.size === 0) return { root, realized };
    root = substitute(root, expand);
  }
}
