// The grid of a GPU kernel: its output loops are not loops there. Each GLOBAL axis is the index of a
// workgroup and each LOCAL axis the index of a thread within one, read from a SPECIAL (gidxN, lidxN). Dimension
// 0 is the innermost axis, as on GPUs, where neighbouring threads of dimension 0 access neighbouring memory.
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

/** GPUs index workgroups and their threads in three dimensions; further axes share the last one. */
const DIMS = 3;

const rangesOf = (ast: UOp, type: AxisType) =>
  ast.toposort().filter((u) => u.op === Ops.RANGE && u.argOf(Ops.RANGE).type === type);

/** The kernel with its output loops as GLOBAL axes: what a GPU target's opts split into workgroups and threads. */
export function outputsToGlobal(ast: UOp): UOp {
  const loops = rangesOf(ast, AxisType.LOOP);
  return substitute(
    ast,
    new Map(loops.map((r) => [r, UOp.range(r.src[0]!, r.argOf(Ops.RANGE).id, AxisType.GLOBAL)])),
  );
}

/** a * b for sizes, folded where both are constants. */
const times = (a: UOp, b: UOp) =>
  a.op === Ops.CONST && b.op === Ops.CONST
    ? UOp.index(Number(a.constValue) * Number(b.constValue))
    : a.mul(b);

/** SPECIAL indices standing for ranges (outermost first) of one kind: `prefix` 0 for the innermost. */
function specials(ranges: readonly UOp[], prefix: string, to: Map<UOp, UOp>): void {
  const inner = [...ranges].reverse();
  inner.slice(0, DIMS - 1).forEach((r, d) => {
    to.set(r, UOp.make(Ops.SPECIAL, [r.src[0]!], `${prefix}${d}`));
  });
  const [last, ...more] = inner.slice(DIMS - 1);
  if (last === undefined) return;
  const name = `${prefix}${DIMS - 1}`;
  if (more.length === 0) {
    to.set(last, UOp.make(Ops.SPECIAL, [last.src[0]!], name));
    return;
  }
  // the last dimension counts through all the remaining axes, the innermost of them fastest
  const merged = [last, ...more];
  const sizes = merged.map((r) => r.src[0]!);
  const special = UOp.make(Ops.SPECIAL, [sizes.reduce(times)], name);
  let stride: UOp | undefined;
  merged.forEach((r, k) => {
    to.set(r, (stride === undefined ? special : special.idiv(stride)).mod(sizes[k]!));
    stride = stride === undefined ? sizes[k]! : times(stride, sizes[k]!);
  });
}

const isRange = (u: UOp) => u.op === Ops.RANGE;

// an END closes only loops; an AFTER waits only for effects (a SPECIAL is no loop it runs inside)
const dropIndices = new PatternMatcher([
  [
    new UPat({ op: Ops.END, name: 'e' }),
    ({ e }) => {
      const [body, ...ranges] = e!.src as [UOp, ...UOp[]];
      const loops = ranges.filter(isRange);
      if (loops.length === ranges.length) return undefined;
      return loops.length ? UOp.make(Ops.END, [body, ...loops]) : body;
    },
  ],
  [
    new UPat({ op: Ops.AFTER, name: 'a' }),
    ({ a }) => {
      const [buf, ...deps] = a!.src as [UOp, ...UOp[]];
      const kept = deps.filter((d) => isRange(d) || d.dtype.name !== 'index');
      if (kept.length === deps.length) return undefined;
      return kept.length ? UOp.make(Ops.AFTER, [buf, ...kept]) : buf;
    },
  ],
]);

/** The kernel with its GLOBAL and LOCAL ranges read from SPECIAL workgroup and thread indices. */
export function gridIndices(ast: UOp): UOp {
  const to = new Map<UOp, UOp>();
  const byId = (a: UOp, b: UOp) => a.argOf(Ops.RANGE).id - b.argOf(Ops.RANGE).id;
  specials(rangesOf(ast, AxisType.GLOBAL).sort(byId), 'gidx', to);
  specials(rangesOf(ast, AxisType.LOCAL).sort(byId), 'lidx', to);
  if (to.size === 0) return ast;
  return graphRewrite(substitute(ast, to), dropIndices, { name: 'grid indices' });
}
