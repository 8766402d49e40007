// A kernel's axes (its RANGEs in id order) and the rewrites of them that opts are made of: split one in two,
// pad one to a multiple, swap two. Legality is checked by the caller (opts.ts); these only rewrite.
import { type AxisType, Ops } from '../../uop/ops.ts';
import { substitute } from '../../uop/pattern.ts';
import { UOp } from '../../uop/uop.ts';
import { reduceIdentity } from '../accumulate.ts';
import { rangesOf } from '../scope.ts';

export const rangeArg = (r: UOp) => r.argOf(Ops.RANGE);

/** The number of iterations of a range with a constant bound; undefined for a symbolic one. */
export const constSize = (r: UOp): number | undefined =>
  r.src[0]!.op === Ops.CONST ? Number(r.src[0]!.constValue) : undefined;

// the heuristics ask for one kernel's ranges many times: each ask was a walk of the whole kernel
const rangesByKernel = new WeakMap<UOp, readonly UOp[]>();

/** The kernel's ranges in id order, which is loop order: what an opt's axis counts. */
export function kernelRanges(ast: UOp): UOp[] {
  let ranges = rangesByKernel.get(ast);
  if (ranges === undefined) {
    ranges = ast
      .toposort()
      .filter((u) => u.op === Ops.RANGE)
      .sort((a, b) => rangeArg(a).id - rangeArg(b).id);
    rangesByKernel.set(ast, ranges);
  }
  return ranges.slice();
}

/** ast with range r replaced by (outer, inner) in END and REDUCE lists and by expr elsewhere. */
function replaceRange(ast: UOp, r: UOp, outer: UOp, inner: UOp, expr: UOp, renumber: Map<UOp, UOp>): UOp {
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
    // a new source list only where a source changed (most nodes of a kernel keep theirs)
    const closes = u.op === Ops.END || u.op === Ops.REDUCE;
    let src: UOp[] | undefined;
    for (let i = 0; i < u.src.length; i++) {
      const s = u.src[i]!;
      if (closes && i > 0 && s === r) {
        src ??= u.srcHead(i);
        src.push(outer, inner);
        continue;
      }
      const x = out.get(s)!;
      if (x !== s && src === undefined) src = u.srcHead(i);
      src?.push(x);
    }
    out.set(u, src === undefined ? u : u.withFreshSrc(src));
  }
  return out.get(ast)!;
}

/**
 * Axis `axis` of size n becomes (n/factor, factor), or (factor, n/factor) when top; the part of size factor
 * gets type target. The outer part is axis `axis`, the inner one `axis + 1`; later axes move up by one.
 */
export function splitAxis(ast: UOp, axis: number, factor: number, target: AxisType, top: boolean): UOp {
  const ranges = kernelRanges(ast);
  const r = ranges[axis]!;
  const n = constSize(r)!;
  const type = rangeArg(r).type;
  // ids are renumbered in order so the two parts sit where r was
  const renumber = new Map<UOp, UOp>();
  const idOf = (i: number) => (i < axis ? i : i + 1);
  ranges.forEach((x, i) => {
    if (x !== r && rangeArg(x).id !== idOf(i))
      renumber.set(x, UOp.range(x.src[0]!, idOf(i), rangeArg(x).type));
  });
  const [outer, inner] = top
    ? [UOp.range(factor, axis, target), UOp.range(n / factor, axis + 1, type)]
    : [UOp.range(n / factor, axis, type), UOp.range(factor, axis + 1, target)];
  const expr = outer.mul(constSize(inner)!).add(inner);
  return replaceRange(ast, r, outer, inner, expr, renumber);
}

/**
 * Axis `axis` of size n runs to the next multiple of `multiple` instead. The extra iterations must do nothing:
 * loads whose address depends on the axis read 0 there instead of memory, stores that depend on it are
 * skipped, and a reduction over it sees its identity (0 for a sum, -inf for a max) in place of the value.
 * What the padding computes from its zeros is thrown away, and cannot trap: the renderers make an integer
 * division by 0 give 0 unless the divisor is provably positive.
 */
export function padAxis(ast: UOp, axis: number, multiple: number): UOp {
  const r = kernelRanges(ast)[axis]!;
  const n = constSize(r)!;
  const padded = UOp.range(Math.ceil(n / multiple) * multiple, rangeArg(r).id, rangeArg(r).type);
  const valid = padded.lt(n);
  const gated = (g: UOp | undefined) => (g === undefined ? valid : g.and(valid));
  const k = substitute(ast, new Map([[r, padded]]));
  const out = new Map<UOp, UOp>();
  for (const u of k.toposort()) {
    let src = u.src.map((s) => out.get(s)!);
    if (u.op === Ops.LOAD && rangesOf(u.src[0]!).has(padded))
      src = [src[0]!, src[1] ?? u.constLike(0), gated(src[2])];
    else if (u.op === Ops.STORE && rangesOf(u).has(padded)) src = [src[0]!, src[1]!, gated(src[2])];
    else if (u.op === Ops.REDUCE && u.src.indexOf(padded) > 0) {
      const { op } = u.argOf(Ops.REDUCE);
      src = [valid.where(src[0]!, reduceIdentity(op, u.dtype)), ...src.slice(1)];
    }
    out.set(u, src.every((s, i) => s === u.src[i]) ? u : u.withSrc(src));
  }
  return out.get(k)!;
}

/** Axes i and j trade ids, so each runs where the other did in loop order. */
export function swapAxes(ast: UOp, i: number, j: number): UOp {
  const ranges = kernelRanges(ast);
  const [a, b] = [ranges[i]!, ranges[j]!];
  return substitute(
    ast,
    new Map([
      [a, UOp.range(a.src[0]!, rangeArg(b).id, rangeArg(a).type)],
      [b, UOp.range(b.src[0]!, rangeArg(a).id, rangeArg(b).type)],
    ]),
  );
}
