// STAGE's swizzled tiles: every address into a LOCAL buffer with a swizzle (ParamArg.swizzle) moves to where its
// layout keeps the element. The pass runs after matrix loads are found (src/codegen/ldmatrix.ts reads the tile's
// plain row-major addresses); the swizzle maps 16-byte chunks to 16-byte chunks, so that a vector inside one
// chunk, and a matrix load's row, stay whole. A warpgroup tensor core's tile load (LoadArg.tile) stays at its tile's
// start, from which the hardware swizzles (on a multiple of 8 rows, where the XOR moves nothing).
import { AddrSpace } from '../dtype.ts';
import { Ops, opName, type Swizzle } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { affine } from './affine.ts';

const swizzleOf = (buf: UOp): Swizzle | undefined => {
  const b = buf.op === Ops.AFTER ? buf.src[0]! : buf;
  return b.op === Ops.PARAM && b.argOf(Ops.PARAM).addrspace === AddrSpace.LOCAL
    ? b.argOf(Ops.PARAM).swizzle
    : undefined;
};

/**
 * Element x's place, x ^ (((x / row) % 8) * chunk). The swizzle reads and writes only the bits below 8 rows, so
 * the terms of x that are multiples of 8 rows (a buffer's offset, a workgroup's row block) stay outside it, and
 * the XOR sees only the few terms that vary along a warp.
 */
function place(x: UOp, { row, chunk }: Swizzle): UOp {
  const period = 8 * row;
  const lin = affine(x);
  const outside: UOp[] = [];
  let inside = x;
  if (lin !== undefined && lin.constant >= 0 && [...lin.terms].every(([t, c]) => c > 0 && t.vmin >= 0)) {
    const high = lin.constant - (lin.constant % period);
    if (high > 0) outside.push(UOp.index(high));
    const terms: UOp[] = [];
    for (const [t, c] of lin.terms) (c % period === 0 ? outside : terms).push(c === 1 ? t : t.mul(c));
    if (lin.constant % period > 0 || terms.length === 0) terms.push(UOp.index(lin.constant % period));
    inside = terms.reduce((a, b) => a.add(b));
  }
  return [inside.xor(inside.idiv(row).mod(8).mul(chunk)), ...outside].reduce((a, b) => a.add(b));
}

/** Offsets 0, 1, .. n - 1 (a vector's lanes after its first element's address). */
const isLanes = (u: UOp) =>
  u.op === Ops.VCONST && u.argOf(Ops.VCONST).values.every((v, i) => Number(v) === i);

function swizzled(index: UOp, s: Swizzle): UOp {
  const [buf, at, ...rest] = index.src as [UOp, UOp, ...UOp[]];
  if (!at.isVector) return index.withSrc([buf, place(at, s), ...rest]);
  // a vector of elements in one chunk, or a matrix load's rows (each lane's address a row's start)
  const [first, lanes] = at.op === Ops.ADD ? (at.src as [UOp, UOp]) : [undefined, undefined];
  if (first === undefined || !isLanes(lanes!) || first.isVector || lanes!.lanes > s.chunk)
    throw new Error(
      `swizzle: a vector address into a swizzled LOCAL buffer must be x + [0..n) with n <= ${s.chunk}, got ${opName(at.op)}`,
    );
  return index.withSrc([buf, UOp.make(Ops.ADD, [place(first, s), lanes!]), ...rest]);
}

interface Placed {
  /** Each swizzled INDEX the pass made, that it does not move again. */
  done: Set<UOp>;
  /** The addresses of tile loads, which stay. */
  tileStarts: ReadonlySet<UOp>;
}

const rules = new PatternMatcher<Placed>([
  [
    new UPat({ op: Ops.INDEX, name: 'x' }),
    ({ x }, placed) => {
      const s = placed.done.has(x!) || placed.tileStarts.has(x!.src[1]!) ? undefined : swizzleOf(x!.src[0]!);
      if (s === undefined) return undefined;
      const out = swizzled(x!, s);
      placed.done.add(out);
      return out;
    },
  ],
]);

/** The kernel with its swizzled LOCAL buffers' addresses placed by their layout. */
export function swizzleLocals(k: UOp): UOp {
  const tileStarts = new Set(
    k
      .toposort()
      .filter((u) => u.op === Ops.LOAD && u.argOf(Ops.LOAD)?.tile !== undefined)
      .map((u) => u.src[0]!.src[1]!),
  );
  return graphRewrite(k, rules, { name: 'swizzled tiles', ctx: { done: new Set<UOp>(), tileStarts } });
}
