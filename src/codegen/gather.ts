// Gather loads: a sum over a range r of `e == f(r) ? v(r) : 0`, where e does not change with r (an index read
// from memory) and f is r plus constants, picks at most one term: v at the r with f(r) == e. The tensor-level
// gather (indexSelect, get with index tensors, gather, Embedding) is such a one-hot masked sum; here its loop
// becomes one load at a computed address. An out-of-range e selects nothing (0), as the sum did; e is clamped
// into range before it becomes an address, so that no lane reads outside the buffer.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import type { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

const uses = (u: UOp, r: UOp) => rangesOf(u).has(r);
const isConst = (u: UOp) => u.op === Ops.CONST;
const fits = (u: UOp) => u.vmin >= u.dtype.min && u.vmax <= u.dtype.max;

/**
 * Whether f is r through integer casts and additions of constants, none of which wraps: then f is increasing
 * with step 1, and f(r) == e has one solution in [0, n) exactly when vmin(f) <= e <= vmax(f).
 */
function isShiftOf(f: UOp, r: UOp): boolean {
  for (let u = f; ; ) {
    if (u === r) return true;
    if (!u.dtype.isInt || !fits(u)) return false;
    if (u.op === Ops.CAST && u.src[0]!.dtype.isInt) u = u.src[0]!;
    else if (u.op === Ops.ADD && isConst(u.src[1]!)) u = u.src[0]!;
    else if (u.op === Ops.ADD && isConst(u.src[0]!)) u = u.src[1]!;
    else return false;
  }
}

/** The r that `clause` selects, clamped into [0, n), with the condition that it selects one; or undefined. */
function solve(clause: UOp, r: UOp): { at: UOp; valid: UOp } | undefined {
  // a == b is CMPNE(CMPNE(a, b), true)
  if (clause.op !== Ops.CMPNE || clause.src[1]!.op !== Ops.CONST || clause.src[1]!.constValue !== true)
    return;
  const ne = clause.src[0]!;
  if (ne.op !== Ops.CMPNE || !ne.src[0]!.dtype.isInt) return;
  const [a, b] = ne.src as [UOp, UOp];
  if (uses(a, r) === uses(b, r)) return;
  const [f, e] = uses(a, r) ? [a, b] : [b, a];
  // f's values must be e's too, so that e is compared with them without wrapping
  if (!isShiftOf(f, r) || f.vmin < e.dtype.min || f.vmax > e.dtype.max) return;
  const lo = e.constLike(f.vmin);
  const hi = e.constLike(f.vmax);
  const valid = e.lt(lo).logicalNot().and(hi.lt(e).logicalNot());
  // clamped in e's own dtype, so that a wide index cannot wrap when it becomes an address
  const at = e.maximum(lo).minimum(hi).cast(dtypes.index).sub(f.vmin);
  return { at, valid };
}

/** The clauses of a conjunction: AND and WHERE(a, b, false). */
function clausesOf(gate: UOp): UOp[] {
  const out: UOp[] = [];
  const stack = [gate];
  while (stack.length) {
    const g = stack.pop()!;
    if (g.op === Ops.AND && g.dtype === dtypes.bool) stack.push(g.src[0]!, g.src[1]!);
    else if (g.op === Ops.WHERE && g.src[2]!.op === Ops.CONST && g.src[2]!.constValue === false)
      stack.push(g.src[0]!, g.src[1]!);
    else out.push(g);
  }
  return out;
}

/** The value of a sum over r of `gates ? v : 0` (under casts) when one gate selects one r, else undefined. */
function pickOver(value: UOp, r: UOp): UOp | undefined {
  const casts: UOp[] = [];
  const gates: UOp[] = [];
  let v = value;
  for (;;) {
    if (v.op === Ops.CAST) casts.push(v);
    else if (v.op === Ops.WHERE && isConst(v.src[2]!) && Number(v.src[2]!.constValue) === 0)
      gates.push(v.src[0]!);
    else break;
    v = v.src[v.op === Ops.CAST ? 0 : 1]!;
  }
  if (gates.length === 0) return undefined;
  const clauses = gates.flatMap(clausesOf);
  for (const [k, clause] of clauses.entries()) {
    const sol = solve(clause, r);
    if (sol === undefined) continue;
    const at = new Map([[r, sol.at]]);
    const rest = clauses.filter((_, j) => j !== k).map((c) => substitute(c, at));
    let picked = substitute(v, at);
    for (const c of casts.reverse()) picked = picked.cast(c.dtype);
    const gate = rest.reduce((g, c) => g.and(c), sol.valid);
    return gate.where(picked, picked.constLike(0));
  }
  return undefined;
}

function pick(red: UOp): UOp | undefined {
  if (red.argOf(Ops.REDUCE).op !== Ops.ADD) return undefined;
  const [value, ...ranges] = red.src as [UOp, ...UOp[]];
  for (const r of ranges) {
    const picked = pickOver(value, r);
    if (picked === undefined) continue;
    const rest = ranges.filter((x) => x !== r);
    return rest.length ? red.withSrc([picked, ...rest]) : picked;
  }
  return undefined;
}

const rules = new PatternMatcher([[new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }) => pick(r!)]]);

/** Replaces one-hot masked sums over a range by loads at the selected position. */
export function gatherLoads(ast: UOp): UOp {
  const out = graphRewrite(ast, rules, { name: 'gather loads' });
  return out === ast ? ast : simplifyGraph(out, 'simplify after gather');
}
