// Vectors to what the C target supports. After a lane range is expanded, values of shape (k,) are vectors.
// Their addresses are put in one form, INDEX(buf, base + VCONST(offsets)) with a scalar base (lane 0's
// address), from which the renderer picks a vector load or store (offsets 0..k-1) or one access per lane.
// A kernel whose vectors fall outside what this supports is expanded with scalar copies instead.
import { type DType, dtypes } from '../dtype.ts';
import { type ArgOf, GroupOp, Ops } from '../uop/ops.ts';
import { graphRewrite, substitute } from '../uop/pattern.ts';
import { symbolic } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';

/** Element types of vector values: C vector extensions compute on these as the scalar code does. */
const VECTOR_DTYPES: ReadonlySet<DType> = new Set([
  dtypes.float32,
  dtypes.float64,
  dtypes.int32,
  dtypes.uint32,
  dtypes.int64,
  dtypes.uint64,
]);

const isVector = (u: UOp) => u.shape !== null && u.shape.length === 1;
const lanesOf = (u: UOp) => (u.arg as ArgOf<Ops.VCONST>).values.map(Number);

/** Lane j of an index expression as lane 0's value plus offsets[j], when it is affine in the lanes. */
function laneOffsets(idx: UOp): number[] | undefined {
  const offsets = new Map<UOp, number[] | undefined>();
  for (const u of idx.toposort()) {
    const [a, b] = u.src.map((s) => offsets.get(s));
    let o: number[] | undefined;
    if (!isVector(u)) o = [0];
    else if (u.op === Ops.VCONST) o = lanesOf(u);
    else if ((u.op === Ops.ADD || u.op === Ops.SUB) && a && b) {
      const sign = u.op === Ops.ADD ? 1 : -1;
      const k = Math.max(a.length, b.length);
      o = Array.from({ length: k }, (_, j) => (a[j] ?? a[0]!) + sign * (b[j] ?? b[0]!));
    } else if (u.op === Ops.MUL && a && b) {
      const c = u.src.find((s) => s.op === Ops.CONST);
      if (c !== undefined) o = (c === u.src[0] ? b : a).map((x) => x * Number(c.constValue));
    }
    offsets.set(u, o);
  }
  const out = offsets.get(idx);
  return out === undefined ? undefined : out.map((x) => x - out[0]!);
}

/** idx in the form base + VCONST(offsets), or undefined when it is not affine in the lanes. */
function canonicalAddress(idx: UOp): UOp | undefined {
  const offsets = laneOffsets(idx);
  if (offsets === undefined) return undefined;
  const lane0 = new Map(
    idx.toposort().flatMap((u) => (u.op === Ops.VCONST ? [[u, UOp.index(lanesOf(u)[0]!)] as const] : [])),
  );
  const base = graphRewrite(substitute(idx, lane0), symbolic, { name: 'lane 0 address', ctx: {} });
  return UOp.make(Ops.ADD, [base, UOp.make(Ops.VCONST, [], { values: offsets, dtype: dtypes.index })]);
}

/** Why the kernel's vectors are not supported, or the kernel with canonical vector addresses. */
export function lowerVectors(ast: UOp): UOp | string {
  const addresses = new Map<UOp, UOp>();
  for (const u of ast.toposort()) {
    if ((u.op === Ops.LOAD || u.op === Ops.STORE) && u.src[2] !== undefined && isVector(u.src[2]))
      return 'a load or store gate differs between lanes';
    if (u.op === Ops.INDEX && u.src.length === 2 && isVector(u.src[1]!)) {
      const address = canonicalAddress(u.src[1]!);
      if (address === undefined) return 'an address is not affine in the lanes';
      addresses.set(u, u.withSrc([u.src[0]!, address]));
      continue;
    }
    const value =
      u.op === Ops.LOAD || u.op === Ops.REDUCE || GroupOp.Unary.has(u.op) || GroupOp.Binary.has(u.op);
    if (
      (value || GroupOp.Ternary.has(u.op)) &&
      isVector(u) &&
      u.dtype !== dtypes.index &&
      !VECTOR_DTYPES.has(u.dtype)
    )
      return `a vector of ${u.dtype.name}`;
  }
  const out = substitute(ast, addresses);
  // index vectors are addresses only: anything else computing with the lanes (a cast of them, say) is not
  const canonical = new Set([...addresses.values()].map((i) => i.src[1]!));
  for (const u of out.toposort())
    if (
      u.dtype === dtypes.index &&
      isVector(u) &&
      u.op !== Ops.VCONST &&
      u.op !== Ops.STACK &&
      !canonical.has(u)
    )
      return `${Ops[u.op]} computes with the lane index`;
  return out;
}
