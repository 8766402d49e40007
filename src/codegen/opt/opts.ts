// Kernel optimizations (the spec's OptOps) as transforms of a kernel AST's ranges; SPLIT only for now.
import { type ArgOf, AxisType, axisLetter, Ops } from '../../uop/ops.ts';
import { UOp } from '../../uop/uop.ts';

/** SPLIT: range `axis` (an index into the kernel's ranges sorted by id) of size n becomes (n/factor, factor),
 * or (factor, n/factor) when top; the sub-range of size factor gets the target type. */
export type Opt = { op: 'SPLIT'; axis: number; factor: number; target: AxisType; top?: boolean };

/** Which axis types a split may target, from which types (the spec's "Split from" column). */
const SPLIT_FROM: Partial<Record<AxisType, readonly AxisType[]>> = {
  [AxisType.UPCAST]: [AxisType.GLOBAL, AxisType.LOCAL, AxisType.LOOP],
  [AxisType.UNROLL]: [AxisType.REDUCE, AxisType.GROUP_REDUCE],
};

/** Expanded axes become registers: a larger factor would only spill. */
const MAX_REGISTER_FACTOR = 16;

const rangeArg = (r: UOp) => r.arg as ArgOf<Ops.RANGE>;

/** The kernel's ranges in id order: what an opt's axis counts. */
export function kernelRanges(ast: UOp): UOp[] {
  return ast
    .toposort()
    .filter((u) => u.op === Ops.RANGE)
    .sort((a, b) => rangeArg(a).id - rangeArg(b).id);
}

const describeAxes = (ranges: readonly UOp[]) =>
  ranges
    .map(
      (r, i) =>
        `${i}:${axisLetter[rangeArg(r).type]}${r.src[0]!.op === Ops.CONST ? r.src[0]!.constValue : 'n'}`,
    )
    .join(' ');

export const describeOpt = (o: Opt) =>
  `${o.op}(axis ${o.axis}, factor ${o.factor}, ${o.target}${o.top ? ', top' : ''})`;

/** Why opt cannot apply to these ranges, or undefined when it can. */
function illegal(o: Opt, ranges: readonly UOp[]): string | undefined {
  const r = ranges[o.axis];
  if (r === undefined) return `axis ${o.axis} does not exist`;
  const from = SPLIT_FROM[o.target];
  if (from === undefined) return `split target ${o.target} is not supported yet (UPCAST and UNROLL are)`;
  const type = rangeArg(r).type;
  if (!from.includes(type)) return `${o.target} splits ${from.join(', ')} axes, not ${type}`;
  if (r.src[0]!.op !== Ops.CONST) return 'the axis size is symbolic';
  const n = Number(r.src[0]!.constValue);
  if (!Number.isInteger(o.factor) || o.factor < 2)
    return `factor ${o.factor} must be an integer of at least 2`;
  if (n % o.factor !== 0) return `factor ${o.factor} does not divide the axis size ${n}`;
  if (o.factor > MAX_REGISTER_FACTOR)
    return `factor ${o.factor} exceeds the register limit of ${MAX_REGISTER_FACTOR} for ${o.target}`;
  return undefined;
}

/** Rebuilds ast with range r replaced by (outer, inner) in END and REDUCE lists and by expr elsewhere. */
function splitRange(ast: UOp, r: UOp, outer: UOp, inner: UOp, expr: UOp, renumber: Map<UOp, UOp>): UOp {
  const out = new Map<UOp, UOp>();
  for (const u of ast.toposort()) {
    if (u === r) {
      out.set(u, expr);
      continue;
    }
    const renamed = renumber.get(u);
    if (renamed !== undefined) {
      out.set(u, renamed);
      continue;
    }
    let src = u.src.map((s) => out.get(s)!);
    if (u.op === Ops.END || u.op === Ops.REDUCE)
      src = [src[0]!, ...u.src.slice(1).flatMap((s, i) => (s === r ? [outer, inner] : [src[i + 1]!]))];
    out.set(u, src.every((s, i) => s === u.src[i]) ? u : u.withSrc(src));
  }
  return out.get(ast)!;
}

function applySplit(ast: UOp, o: Opt): UOp {
  const ranges = kernelRanges(ast);
  const why = illegal(o, ranges);
  if (why !== undefined)
    throw new Error(`opt ${describeOpt(o)} is illegal: ${why}; kernel axes: ${describeAxes(ranges)}`);
  const r = ranges[o.axis]!;
  const n = Number(r.src[0]!.constValue);
  const type = rangeArg(r).type;
  // ids are renumbered in order so the two parts sit where r was: axis i is the outer part, i + 1 the inner
  const renumber = new Map<UOp, UOp>();
  const idOf = (i: number) => (i < o.axis ? i : i + 1);
  ranges.forEach((x, i) => {
    if (x !== r && rangeArg(x).id !== idOf(i))
      renumber.set(x, UOp.range(x.src[0]!, idOf(i), rangeArg(x).type));
  });
  const [outer, inner] = o.top
    ? [UOp.range(o.factor, o.axis, o.target), UOp.range(n / o.factor, o.axis + 1, type)]
    : [UOp.range(n / o.factor, o.axis, type), UOp.range(o.factor, o.axis + 1, o.target)];
  const expr = outer.mul(Number(inner.src[0]!.constValue)).add(inner);
  return splitRange(ast, r, outer, inner, expr, renumber);
}

/** Applies opts left to right; an illegal one throws an Error saying why. */
export function applyOpts(ast: UOp, opts: readonly Opt[]): UOp {
  return opts.reduce(applySplit, ast);
}
