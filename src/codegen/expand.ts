// Expand: UPCAST and UNROLL ranges are replaced by their values, replicating what depends on them. An UPCAST
// range closed by an END becomes a GROUP of copies of the END's body (several stores per iteration); an
// UNROLL range of a REDUCE becomes copies of the reduced value combined by the reduce op. Our C and JS
// renderers have no vector types yet, so the copies are scalars: what devectorize would make of vectors.
import { type ArgOf, AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { symbolic } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

const expands = (r: UOp) => {
  const { type } = r.arg as ArgOf<Ops.RANGE>;
  return (type === AxisType.UPCAST || type === AxisType.UNROLL) && r.src[0]!.op === Ops.CONST;
};

interface Ctx {
  nextId: number;
}

/**
 * body with the ranges set to every combination of their values, first range slowest. Loops closed inside
 * the body get fresh ranges in every copy but the first: a loop is one RANGE node, run once.
 */
function copies(body: UOp, ranges: readonly UOp[], ctx: Ctx): UOp[] {
  let maps = [new Map<UOp, UOp>()];
  for (const r of ranges) {
    const n = Number(r.src[0]!.constValue);
    maps = maps.flatMap((m) => Array.from({ length: n }, (_, v) => new Map(m).set(r, UOp.index(v))));
  }
  const open = rangesOf(body);
  const inner = body.toposort().filter((u) => u.op === Ops.RANGE && !open.has(u) && !ranges.includes(u));
  return maps.map((m, i) => {
    if (i > 0)
      for (const r of inner) m.set(r, UOp.range(r.src[0]!, ctx.nextId++, (r.arg as ArgOf<Ops.RANGE>).type));
    return substitute(body, m);
  });
}

/** u (an END or REDUCE) with its expandable ranges removed and its body copied over their values. */
function expand(u: UOp, ctx: Ctx): UOp | undefined {
  const [body, ...ranges] = u.src as [UOp, ...UOp[]];
  const gone = ranges.filter(expands);
  if (gone.length === 0) return undefined;
  const kept = ranges.filter((r) => !expands(r));
  const bodies = copies(body, gone, ctx);
  if (u.op === Ops.REDUCE) {
    const { op } = u.arg as ArgOf<Ops.REDUCE>;
    const value = bodies.reduce((acc, b) => acc.alu(op, b));
    return kept.length ? u.withSrc([value, ...kept]) : value;
  }
  const group = bodies.length === 1 ? bodies[0]! : UOp.make(Ops.GROUP, bodies);
  return kept.length ? u.withSrc([group, ...kept]) : group;
}

const rules = new PatternMatcher<Ctx>([
  [new UPat({ op: [Ops.END, Ops.REDUCE], name: 'u' }), ({ u }, ctx) => expand(u!, ctx)],
]);

/** Expands UPCAST and UNROLL ranges, then folds the constants they leave in indices. */
export function expandRanges(ast: UOp): UOp {
  const ids = ast.toposort().flatMap((u) => (u.op === Ops.RANGE ? [(u.arg as ArgOf<Ops.RANGE>).id] : []));
  const out = graphRewrite(ast, rules, { name: 'expand', ctx: { nextId: Math.max(-1, ...ids) + 1 } });
  return out === ast ? ast : graphRewrite(out, symbolic, { name: 'simplify after expand', ctx: {} });
}
