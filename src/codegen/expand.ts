// Expand: UPCAST and UNROLL ranges are replaced by their values, replicating what depends on them. An UPCAST
// range closed by an END becomes a GROUP of copies of the END's body (several stores per iteration); an
// UNROLL range of a REDUCE becomes copies of the reduced value combined by the reduce op. On a target with
// vector types one UPCAST or UNROLL range (the lane range) becomes a VCONST of its values instead of copies:
// what depends on it becomes a vector, a value of shape (k,).
import { dtypes } from '../dtype.ts';
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substituteEach, UPat } from '../uop/pattern.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';

const expands = (r: UOp) => {
  const { type } = r.argOf(Ops.RANGE);
  return (type === AxisType.UPCAST || type === AxisType.UNROLL) && r.src[0]!.op === Ops.CONST;
};

interface Ctx {
  nextId: number;
  /** The range that becomes a vector of lanes, if any. */
  lanes?: UOp;
}

/**
 * body with the ranges set to every combination of their values, first range slowest (the lane range set to
 * all its values at once). Loops an END closes inside the body get fresh ranges in every copy but the first:
 * a loop is one RANGE node, run once. Reduce loops stay shared, so the copies' reductions run in one loop.
 */
function copies(body: UOp, ranges: readonly UOp[], ctx: Ctx): UOp[] {
  let maps = [new Map<UOp, UOp>()];
  for (const r of ranges) {
    const n = Number(r.src[0]!.constValue);
    if (r === ctx.lanes) {
      const lanes = UOp.make(Ops.VCONST, [], {
        values: Array.from({ length: n }, (_, i) => i),
        dtype: dtypes.index,
      });
      for (const m of maps) m.set(r, lanes);
    } else maps = maps.flatMap((m) => Array.from({ length: n }, (_, v) => new Map(m).set(r, UOp.index(v))));
  }
  const inner = body.toposort().flatMap((u) => (u.op === Ops.END ? u.src.slice(1) : []));
  maps.forEach((m, i) => {
    if (i > 0) for (const r of inner) m.set(r, UOp.range(r.src[0]!, ctx.nextId++, r.argOf(Ops.RANGE).type));
  });
  return substituteEach(body, maps);
}

/** u (an END or REDUCE) with its expandable ranges removed and its body copied over their values. */
function expand(u: UOp, ctx: Ctx): UOp | undefined {
  const [body, ...ranges] = u.src as [UOp, ...UOp[]];
  const gone = ranges.filter(expands);
  if (gone.length === 0) return undefined;
  const kept = ranges.filter((r) => !expands(r));
  const bodies = copies(body, gone, ctx);
  if (u.op === Ops.REDUCE) {
    const { op } = u.argOf(Ops.REDUCE);
    const value = bodies.reduce((acc, b) => acc.alu(op, b));
    const reduced = kept.length ? u.withSrc([value, ...kept]) : value;
    if (ctx.lanes === undefined || !gone.includes(ctx.lanes)) return reduced;
    // lanes of a reduce: each lane reduced on its own, then the lanes combined
    const n = Number(ctx.lanes.src[0]!.constValue);
    return Array.from({ length: n }, (_, j) => UOp.make(Ops.INDEX, [reduced, UOp.index(j)])).reduce((a, b) =>
      a.alu(op, b),
    );
  }
  const group = bodies.length === 1 ? bodies[0]! : UOp.make(Ops.GROUP, bodies);
  return kept.length ? u.withSrc([group, ...kept]) : group;
}

const rules = new PatternMatcher<Ctx>([
  [new UPat({ op: [Ops.END, Ops.REDUCE], name: 'u' }), ({ u }, ctx) => expand(u!, ctx)],
]);

/** Vector widths a lane range may have. */
const LANE_COUNTS: ReadonlySet<number> = new Set([2, 4, 8, 16]);

/** A reduce's UNROLL at least this long is made lanes even under UPCASTs (unrolls for overlap are shorter). */
const WIDE_UNROLL = 8;

/**
 * The range to make lanes of, if its size is a vector width: the last (innermost) UNROLL a REDUCE closes when
 * it is WIDE_UNROLL or longer (a sum of products contiguous only along the reduce: each UPCAST copy sums its
 * own vector of lanes, combined after the loop), else the innermost UPCAST an END closes, else the last UNROLL.
 */
export function laneRange(ast: UOp): UOp | undefined {
  const closed = (op: Ops, type: AxisType) =>
    ast
      .toposort()
      .flatMap((u) => (u.op === op ? u.src.slice(1) : []))
      .filter((r) => r.argOf(Ops.RANGE).type === type && expands(r))
      .sort((a, b) => b.argOf(Ops.RANGE).id - a.argOf(Ops.RANGE).id)[0];
  const size = (r: UOp) => Number(r.src[0]!.constValue);
  const unroll = closed(Ops.REDUCE, AxisType.UNROLL);
  const wide = unroll !== undefined && size(unroll) >= WIDE_UNROLL ? unroll : undefined;
  const last = wide ?? closed(Ops.END, AxisType.UPCAST) ?? unroll;
  return last !== undefined && LANE_COUNTS.has(size(last)) ? last : undefined;
}

/** Expands UPCAST and UNROLL ranges (lanes: the range to turn into a vector), then folds what they leave. */
export function expandRanges(ast: UOp, lanes?: UOp): UOp {
  const ids = ast.toposort().flatMap((u) => (u.op === Ops.RANGE ? [u.argOf(Ops.RANGE).id] : []));
  const ctx: Ctx = { nextId: Math.max(-1, ...ids) + 1, lanes };
  const out = graphRewrite(ast, rules, { name: 'expand', ctx });
  return out === ast ? ast : simplifyGraph(out, 'simplify after expand');
}
