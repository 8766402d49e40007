// Linearize: orders a kernel's nodes into a LINEAR program. Each END opens its RANGEs, outermost first;
// a node is placed in the outermost loop that has all the ranges it needs (so loop-invariant work is hoisted).
import { Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

/** Loops nest in the order of their axis ids (what SWAP changes). */
const axisId = (r: UOp) => r.argOf(Ops.RANGE).id;

export function linearize(sink: UOp): UOp {
  const out: UOp[] = [];
  const done = new Set<UOp>();
  const fits = (u: UOp, open: ReadonlySet<UOp>) => {
    for (const r of rangesOf(u)) if (!open.has(r)) return false;
    return true;
  };

  /** Emits every node below root (sources first) that the open loops can hold. */
  function emitFrom(root: UOp, open: ReadonlySet<UOp>): void {
    // the walk's stack as two arrays (node, next source to visit): no pair allocated per node
    const nodes: UOp[] = [root];
    const next: number[] = [0];
    const visited = new Set<UOp>();
    while (nodes.length) {
      const top = nodes.length - 1;
      const u = nodes[top]!;
      const i = next[top]!;
      if (done.has(u) || u.op === Ops.RANGE) {
        nodes.pop();
        next.pop();
        continue;
      }
      if (u.op === Ops.END) {
        nodes.pop();
        next.pop();
        if (fits(u, open)) emitLoop(u, open);
        else if (!visited.has(u)) {
          // its body can't run here, but what the body needs from these loops can
          visited.add(u);
          nodes.push(u.src[0]!);
          next.push(0);
        }
        continue;
      }
      if (i < u.src.length) {
        next[top] = i + 1;
        const s = u.src[i]!;
        if (!done.has(s) && !visited.has(s)) {
          nodes.push(s);
          next.push(0);
        }
        continue;
      }
      nodes.pop();
      next.pop();
      visited.add(u);
      if (fits(u, open) && sourcesDone(u)) {
        out.push(u);
        done.add(u);
      }
    }
  }

  const sourcesDone = (u: UOp) => {
    for (const s of u.src) if (!done.has(s)) return false;
    return true;
  };

  function emitLoop(end: UOp, open: ReadonlySet<UOp>): void {
    const [body, ...ranges] = end.src as [UOp, ...UOp[]];
    const inner = new Set(open);
    const order = [...ranges].sort((a, b) => axisId(a) - axisId(b));
    for (const r of order) {
      emitFrom(r.src[0]!, inner);
      emitFrom(body, inner); // hoist what does not need this loop
      out.push(r);
      done.add(r);
      inner.add(r);
    }
    emitFrom(body, inner);
    out.push(end); // one END closes all its loops, innermost first
    done.add(end);
  }

  for (const s of sink.src) emitFrom(s, new Set());
  return UOp.make(Ops.LINEAR, out);
}
