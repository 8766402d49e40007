// Tensor-core operand fragments read from LOCAL tiles as one warp-wide matrix load (ldmatrix on CUDA) where the
// fragment's elements, lane by lane, are exactly what the instruction hands each lane: a STACK of scalar loads
// whose addresses, evaluated for the 32 lanes of the WARP axis, place 8 x 8 matrices of 16-bit elements with
// rows of 8 consecutive elements, 16 bytes aligned. One instruction then replaces 4 (B) or 8 (A) scalar loads
// (8 for two B fragments of neighbouring columns), and B reads row-major tiles (transposed) where it needed row
// pairs interleaved (src/codegen/opt/stage.ts).
import { dtypes } from '../dtype.ts';
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { simplify } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';
import { affine } from './affine.ts';

const WARP = 32;
/** Elements in a matrix row: 16 bytes of 16-bit elements. */
const ROW = 8;

const isWarp = (r: UOp) => r.op === Ops.RANGE && r.argOf(Ops.RANGE).type === AxisType.WARP;

/**
 * Each fragment element's address for each of the `lanes` lanes, less the part no lane changes (`rest`, the same
 * for all), or undefined where an address is not affine or mixes the lane with other indices.
 */
export function laneOffsets(
  loads: readonly UOp[],
  lane: UOp,
  lanes = WARP,
): { rest: Map<UOp, number>; at: number[][] } | undefined {
  let rest: Map<UOp, number> | undefined;
  const at: number[][] = [];
  const values = new Map<UOp, number[]>();
  const valuesOf = (t: UOp) => {
    let v = values.get(t);
    if (v === undefined) {
      v = Array.from({ length: lanes }, (_, T) => {
        const x = simplify(substitute(t, new Map([[lane, UOp.index(T)]])));
        return x.op === Ops.CONST ? Number(x.constValue) : Number.NaN;
      });
      values.set(t, v);
    }
    return v;
  };
  for (const l of loads) {
    const lin = affine(l.src[0]!.src[1]!);
    if (lin === undefined) return undefined;
    const own = new Map<UOp, number>();
    const offsets = new Array<number>(lanes).fill(lin.constant);
    for (const [t, c] of lin.terms) {
      const ranges = t.toposort().filter((x) => x.op === Ops.RANGE);
      if (!ranges.includes(lane)) own.set(t, c);
      else if (ranges.length > 1) return undefined;
      else for (const [T, v] of valuesOf(t).entries()) offsets[T]! += c * v;
    }
    if (offsets.some((o) => !Number.isInteger(o))) return undefined;
    if (rest === undefined) rest = own;
    else if (rest.size !== own.size || [...own].some(([t, c]) => rest!.get(t) !== c)) return undefined;
    at.push(offsets);
  }
  return { rest: rest!, at };
}

/** Where row R of the matrices starts, if the offsets are the layout ldmatrix gives (`trans` or not); else undefined. */
function rowStarts(at: readonly number[][], trans: boolean): number[] | undefined {
  const row = (R: number) => {
    const [j, r] = [R >> 3, R & 7];
    return trans ? at[2 * j + (r & 1)]![r >> 1]! : at[2 * j]![4 * r]!;
  };
  for (let i = 0; i < at.length; i++)
    for (let T = 0; T < WARP; T++) {
      const [j, e] = [i >> 1, i & 1];
      const want = trans ? row(8 * j + 2 * (T % 4) + e) + (T >> 2) : row(8 * j + (T >> 2)) + 2 * (T % 4) + e;
      if (at[i]![T] !== want) return undefined;
    }
  const rows = Array.from({ length: 4 * at.length }, (_, R) => row(R));
  return rows.every((r) => r % ROW === 0) ? rows : undefined;
}

/** A STACK of 4 or 8 scalar LOCAL loads of 16-bit elements as one matrix load, where its layout is ldmatrix's. */
function matrixLoad(stack: UOp): UOp | undefined {
  const loads = stack.src;
  if (![4, 8].includes(loads.length) || stack.dtype.itemsize !== 2) return undefined;
  if (
    !loads.every((l) => l.op === Ops.LOAD && l.src.length === 1 && !l.isVector && l.src[0]!.op === Ops.INDEX)
  )
    return undefined;
  const buf = loads[0]!.src[0]!.src[0]!;
  if (buf.addrspace !== 'LOCAL' || loads.some((l) => l.src[0]!.src[0] !== buf)) return undefined;
  const lane = loads[0]!.src[0]!.src[1]!.toposort().find(isWarp);
  if (lane === undefined || lane.src[0]!.op !== Ops.CONST || Number(lane.src[0]!.constValue) !== WARP)
    return undefined;
  const found = laneOffsets(loads, lane);
  if (found === undefined || [...found.rest.values()].some((c) => c % ROW !== 0)) return undefined;
  for (const trans of [false, true]) {
    const rows = rowStarts(found.at, trans);
    if (rows === undefined) continue;
    // row R's start as lane R's address: r0 + (R % 8) s + ((R / 8) % 2) u + (R / 16) v, where the rows are so
    const [s, u, v] = [
      rows[1]! - rows[0]!,
      rows[8]! - rows[0]!,
      rows[16] === undefined ? 0 : rows[16]! - rows[0]!,
    ];
    if (rows.some((r, R) => r !== rows[0]! + (R % 8) * s + ((R >> 3) & 1) * u + (R >> 4) * v)) continue;
    let at = lane.mod(8).mul(s).add(lane.idiv(8).mod(2).mul(u)).add(rows[0]!);
    if (v !== 0) at = at.add(lane.idiv(16).mul(v));
    for (const [t, c] of found.rest) at = at.add(t.mul(c));
    const offsets = UOp.make(Ops.VCONST, [], {
      values: Array.from({ length: loads.length }, (_, i) => i),
      dtype: dtypes.index,
    });
    const index = UOp.make(Ops.INDEX, [buf, UOp.make(Ops.ADD, [at, offsets])]);
    return UOp.make(Ops.LOAD, [index], { matrix: { trans } });
  }
  return undefined;
}

/** Each fragment's matrix load (or the fragment), as many WMMAs share one. */
type Seen = Map<UOp, UOp>;

/** Lanes `from` .. `from + n - 1` of a vector value, as a fragment. */
const lanesOf = (v: UOp, from: number, n: number) =>
  UOp.make(
    Ops.STACK,
    Array.from({ length: n }, (_, i) => UOp.make(Ops.INDEX, [v, UOp.index(from + i)])),
  );

/**
 * Every WMMA operand fragment's matrix load. Two fragments of two 8 x 8 matrices each (B of m16n8k16: the two
 * halves of K for 8 columns) whose four matrices are one x4 load's layout (the next 8 columns) share it, each
 * taking its half of the lanes: half the instructions, and one lane address where there were two.
 */
function fragmentLoads(k: UOp): Seen {
  const seen: Seen = new Map();
  const pairable: UOp[] = [];
  for (const w of k.toposort())
    if (w.op === Ops.WMMA)
      for (const s of w.src.slice(0, 2))
        if (s.op === Ops.STACK && !seen.has(s)) {
          const load = matrixLoad(s);
          seen.set(s, load ?? s);
          if (load !== undefined && s.src.length === 4) pairable.push(s);
        }
  const paired = new Set<UOp>();
  for (const f of pairable) {
    if (paired.has(f)) continue;
    for (const g of pairable) {
      if (g === f || paired.has(g)) continue;
      const both = matrixLoad(UOp.make(Ops.STACK, [...f.src, ...g.src]));
      if (both === undefined) continue;
      seen.set(f, lanesOf(both, 0, 4));
      seen.set(g, lanesOf(both, 4, 4));
      paired.add(f).add(g);
      break;
    }
  }
  return seen;
}

const fragments = new PatternMatcher<Seen>([
  [
    new UPat({ op: Ops.WMMA, name: 'w' }),
    ({ w }, seen) => {
      const src = w!.src.map((s, i) => (i < 2 ? (seen.get(s) ?? s) : s));
      return src.some((s, i) => s !== w!.src[i]) ? w!.withSrc(src) : undefined;
    },
  ],
]);

/** The kernel with its WMMA operands that are ldmatrix's layout read by matrix loads. */
export function matrixLoads(k: UOp): UOp {
  return graphRewrite(k, fragments, { name: 'matrix loads', ctx: fragmentLoads(k) });
}
