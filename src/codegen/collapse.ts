// Reduce collapse: a sum over a range of a value that does not change with it, gated by bounds on the range,
// is the value times the number of indices within the bounds. This makes the spec's arange (a prefix sum of
// ones) and one-hot masks cost O(1) per element instead of a loop. A reduce over an empty range is its identity
// (its value may read memory that does not exist: a sum over a zero-size axis).
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';
import { reduceIdentity } from './accumulate.ts';
import { rangesOf } from './scope.ts';

const uses = (u: UOp, r: UOp) => rangesOf(u).has(r);
const index = (v: number) => UOp.const(dtypes.index, v);

/** e as coef*r + rest, when e is a sum in which r appears only as r or r*const. */
function linearIn(e: UOp, r: UOp): { coef: number; rest: UOp } | undefined {
  let coef = 0;
  let rest = index(0);
  const stack = [e];
  while (stack.length) {
    const t = stack.pop()!;
    if (!uses(t, r)) rest = rest.add(t);
    else if (t === r) coef += 1;
    else if (t.op === Ops.ADD) stack.push(t.src[0]!, t.src[1]!);
    else if (t.op === Ops.MUL && t.src[0] === r && t.src[1]!.op === Ops.CONST)
      coef += Number(t.src[1]!.constValue);
    else return undefined;
  }
  return { coef, rest };
}

interface Bounds {
  /** lo <= r < hi */
  lo: UOp;
  hi: UOp;
  /** the gate's parts that do not involve r */
  other: UOp[];
}

/** The range bounds a gate puts on r, or undefined when it is not a conjunction of linear comparisons. */
function boundsOf(gate: UOp, r: UOp, out: Bounds): boolean {
  if (!uses(gate, r)) {
    out.other.push(gate);
    return true;
  }
  if (gate.op === Ops.AND) return boundsOf(gate.src[0]!, r, out) && boundsOf(gate.src[1]!, r, out);
  // r + rest < c  (or c < r + rest), possibly negated as CMPNE(cmp, true)
  const negated = gate.op === Ops.CMPNE && gate.src[1]!.op === Ops.CONST && gate.src[1]!.constValue === true;
  const cmp = negated ? gate.src[0]! : gate;
  if (cmp.op !== Ops.CMPLT || cmp.src[0]!.dtype !== dtypes.index) return false;
  const [a, b] = cmp.src as [UOp, UOp];
  const left = uses(a, r);
  if (left === uses(b, r)) return false;
  const lin = linearIn(left ? a : b, r);
  if (lin === undefined || Math.abs(lin.coef) !== 1) return false;
  const c = left ? b : a;
  // left, coef 1: r < c - rest;  right, coef -1: r < rest - c;  left, coef -1: r >= rest - c + 1;
  // right, coef 1: r >= c - rest + 1.  Negation turns r < k into r >= k and back.
  let upper = left === (lin.coef === 1);
  const k = upper
    ? left
      ? c.sub(lin.rest)
      : lin.rest.sub(c)
    : left
      ? lin.rest.sub(c).add(1)
      : c.sub(lin.rest).add(1);
  if (negated) upper = !upper;
  if (upper) out.hi = out.hi.minimum(k);
  else out.lo = out.lo.maximum(k);
  return true;
}

const isEmpty = (r: UOp) => r.src[0]!.op === Ops.CONST && Number(r.src[0]!.constValue) === 0;

/** The sum of value over range r as a count times the value, when the value does not change with r. */
function countOver(value: UOp, r: UOp): UOp | undefined {
  const n = r.src[0]!;
  // nested gates (a window over a padded value) are one conjunction
  const gates: UOp[] = [];
  let v = value;
  while (v.op === Ops.WHERE && v.src[2]!.op === Ops.CONST && Number(v.src[2]!.constValue) === 0) {
    gates.push(v.src[0]!);
    v = v.src[1]!;
  }
  if (uses(v, r)) return undefined;
  const b: Bounds = { lo: index(0), hi: n, other: [] };
  if (!gates.every((g) => boundsOf(g, r, b))) return undefined;
  const count = b.hi.sub(b.lo).maximum(0);
  const total = v.mul(count.cast(v.dtype));
  return b.other.reduce((acc, g) => g.where(acc, acc.constLike(0)), total);
}

function collapse(red: UOp): UOp | undefined {
  const { op } = red.argOf(Ops.REDUCE);
  if (red.src.slice(1).some(isEmpty)) return reduceIdentity(op, red.dtype);
  if (op !== Ops.ADD) return undefined;
  const [value, ...ranges] = red.src as [UOp, ...UOp[]];
  // one range at a time: a sum of ones over (n, m) is a count over both
  for (const r of ranges) {
    const total = countOver(value, r);
    if (total === undefined) continue;
    const rest = ranges.filter((x) => x !== r);
    return rest.length ? red.withSrc([total, ...rest]) : total;
  }
  return undefined;
}

const rules = new PatternMatcher([[new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }) => collapse(r!)]]);

/** Removes the loops of reduces that count indices, then simplifies what is left. */
export function collapseReduces(ast: UOp): UOp {
  const out = graphRewrite(ast, rules, { name: 'collapse counting reduces' });
  return out === ast ? ast : simplifyGraph(out, 'simplify after collapse');
}
