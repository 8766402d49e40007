// Which loops a kernel node lives in: the RANGEs it depends on that no END or REDUCE below it has closed.
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

const cache = new WeakMap<UOp, ReadonlySet<UOp>>();
const NONE: ReadonlySet<UOp> = new Set();

/** The open RANGEs u depends on (computed for its whole graph, without recursion, and cached). */
export function rangesOf(root: UOp): ReadonlySet<UOp> {
  const hit = cache.get(root);
  if (hit !== undefined) return hit;
  for (const u of root.toposort()) {
    if (cache.has(u)) continue;
    let out: Set<UOp> | undefined;
    const add = (rs: ReadonlySet<UOp>) => {
      if (rs.size === 0) return;
      out ??= new Set();
      for (const r of rs) out.add(r);
    };
    for (const s of u.src) add(cache.get(s)!);
    if (u.op === Ops.RANGE) (out ??= new Set()).add(u);
    // END closes its ranges; REDUCE closes the ranges after its value
    if ((u.op === Ops.END || u.op === Ops.REDUCE) && out !== undefined)
      for (const r of u.src.slice(1)) out.delete(r);
    cache.set(u, out === undefined || out.size === 0 ? NONE : out);
  }
  return cache.get(root)!;
}
