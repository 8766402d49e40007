// Which loops a kernel node lives in: the RANGEs it depends on that no END or REDUCE below it has closed.
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

const cache = new WeakMap<UOp, ReadonlySet<UOp>>();
const NONE: ReadonlySet<UOp> = new Set();

/**
 * The open RANGEs u depends on (computed for its whole graph, without recursion, and cached). A node whose
 * ranges are those of a source shares that source's set: most nodes add or close none.
 */
export function rangesOf(root: UOp): ReadonlySet<UOp> {
  const hit = cache.get(root);
  if (hit !== undefined) return hit;
  // sources first, stopping at nodes whose sets are known: the REDUCEs of one kernel share most of their graph
  const stack: UOp[] = [root];
  while (stack.length) {
    const u = stack[stack.length - 1]!;
    if (cache.has(u)) {
      stack.pop();
      continue;
    }
    let ready = true;
    for (const s of u.src)
      if (!cache.has(s)) {
        stack.push(s);
        ready = false;
      }
    if (!ready) continue;
    stack.pop();
    let base = NONE; // the ranges so far, shared with a source until one adds to them
    let own: Set<UOp> | undefined;
    for (const s of u.src) {
      const rs = cache.get(s)!;
      if (rs === base || rs.size === 0) continue;
      if (own === undefined) {
        if (base.size === 0) {
          base = rs;
          continue;
        }
        if (subset(rs, base)) continue;
        own = new Set(base);
      }
      for (const r of rs) own.add(r);
    }
    if (u.op === Ops.RANGE) (own ??= new Set(base)).add(u);
    // END closes its ranges; REDUCE closes the ranges after its value
    if (u.op === Ops.END || u.op === Ops.REDUCE)
      for (let i = 1; i < u.src.length; i++)
        if ((own ?? base).has(u.src[i]!)) (own ??= new Set(base)).delete(u.src[i]!);
    const out = own ?? base;
    cache.set(u, out.size === 0 ? NONE : out);
  }
  return cache.get(root)!;
}

function subset(a: ReadonlySet<UOp>, b: ReadonlySet<UOp>): boolean {
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
