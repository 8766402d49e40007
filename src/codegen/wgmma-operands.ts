// Warpgroup tensor cores (wgmma, TensorCore.sharedOperands) read A and B from LOCAL memory themselves, through a
// matrix descriptor: the address of the operand's first element, in a tile of rows of 64 16-bit elements (128
// bytes) in the hardware's 128-byte swizzle. A WMMA operand that is a STACK of scalar loads from a LOCAL tile
// STAGE swizzled so (rows of 64, chunks of 8: the same XOR where the tile starts on 1024 bytes), whose addresses,
// evaluated for the 128 threads, are the core's layout laid out from one start (element (r, c) at start + 64 r +
// c), becomes one tile LOAD (LoadArg.tile) of that start. The hardware swizzles from the start's 8-row group, so
// every part of it but the column must be a multiple of 8 rows. An operand wider than a row (B of m64n128,
// m64n256) continues in further blocks of 64 columns, each the same distance after the previous one (STAGE keeps
// such tiles so): that distance is the descriptor's leading byte offset (LoadArg.tile.leading).
import { AddrSpace, dtypes } from '../dtype.ts';
import { positionOf, type TensorCore, tensorCoreNamed } from '../runtime/tensor-cores.ts';
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { laneOffsets } from './ldmatrix.ts';

/** Elements of a tile row: 128 bytes of 16-bit elements. */
const ROW = 64;
/** Elements of the 8 rows the swizzle permutes together. */
const SWIZZLE_ROWS = 8 * ROW;

const localParam = (buf: UOp) => {
  const p = buf.op === Ops.AFTER ? buf.src[0]! : buf;
  return p.op === Ops.PARAM && p.argOf(Ops.PARAM).addrspace === AddrSpace.LOCAL ? p : undefined;
};

/** Operand `operand` of a WMMA by `tc` as a tile LOAD, where its loads are the tile's layout; else undefined. */
function tileLoad(stack: UOp, tc: TensorCore, operand: 'a' | 'b'): UOp | undefined {
  const loads = stack.src;
  if (
    stack.op !== Ops.STACK ||
    !loads.every((l) => l.op === Ops.LOAD && l.src.length === 1 && !l.isVector && l.src[0]!.op === Ops.INDEX)
  )
    return undefined;
  const buf = loads[0]!.src[0]!.src[0]!;
  const swizzle = localParam(buf)?.argOf(Ops.PARAM).swizzle;
  if (swizzle?.row !== ROW || swizzle.chunk !== 8 || loads.some((l) => l.src[0]!.src[0] !== buf))
    return undefined;
  const lane = loads[0]!.src[0]!.src[1]!.toposort().find(
    (r) => r.op === Ops.RANGE && r.argOf(Ops.RANGE).type === AxisType.WARP,
  );
  if (lane === undefined || lane.src[0]!.op !== Ops.CONST || Number(lane.src[0]!.constValue) !== tc.threads)
    return undefined;
  const found = laneOffsets(loads, lane, tc.threads);
  if (found === undefined) return undefined;
  const start = found.at[0]![0]!;
  const layout = tc[operand];
  // the blocks' distance, from the first element past the first block
  let leading: number | undefined;
  for (let i = 0; i < loads.length && leading === undefined; i++) {
    const [r, c] = positionOf(layout, 0, i);
    if (c >= ROW) leading = (found.at[i]![0]! - start - r * ROW - (c % ROW)) / Math.floor(c / ROW);
  }
  for (let i = 0; i < loads.length; i++)
    for (let T = 0; T < tc.threads; T++) {
      const [r, c] = positionOf(layout, T, i);
      const block = Math.floor(c / ROW);
      if (found.at[i]![T] !== start + block * (leading ?? 0) + r * ROW + (c % ROW)) return undefined;
    }
  if ([...found.rest.values()].some((c) => c % SWIZZLE_ROWS !== 0) || start % SWIZZLE_ROWS >= ROW)
    return undefined;
  // blocks on 8-row groups, after the first (a descriptor's leading byte offset is positive)
  if (leading !== undefined && (leading <= 0 || leading % SWIZZLE_ROWS !== 0)) return undefined;
  let at = UOp.index(start);
  for (const [t, c] of found.rest) at = at.add(t.mul(c));
  const offsets = UOp.make(Ops.VCONST, [], {
    values: Array.from({ length: loads.length }, (_, i) => i),
    dtype: dtypes.index,
  });
  return UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [buf, UOp.make(Ops.ADD, [at, offsets])])], {
    tile: { operand, tensorCore: tc.name, ...(leading === undefined ? {} : { leading }) },
  });
}

const rules = new PatternMatcher([
  [
    new UPat({ op: Ops.WMMA, name: 'w' }),
    ({ w }) => {
      const tc = tensorCoreNamed(w!.argOf(Ops.WMMA).name);
      if (!tc?.sharedOperands || w!.src.slice(0, 2).some((s) => s.op !== Ops.STACK)) return undefined;
      const [a, b] = [tileLoad(w!.src[0]!, tc, 'a'), tileLoad(w!.src[1]!, tc, 'b')];
      if (a === undefined || b === undefined)
        throw new Error(
          `${tc.name}: its A and B must be read from LOCAL tiles of rows of 64 elements in the 128-byte swizzle, starting on a multiple of 8 rows, wider operands in blocks of 64 columns (STAGE with swizzle, K slabs of 64)`,
        );
      return w!.withSrc([a, b, w!.src[2]!]);
    },
  ],
]);

/** The kernel with its warpgroup tensor cores' operands read from their LOCAL tiles. */
export function sharedOperands(k: UOp): UOp {
  return graphRewrite(k, rules, { name: 'warpgroup operands' });
}
