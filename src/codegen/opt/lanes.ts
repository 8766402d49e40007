// Vector lanes along a kernel's innermost output axis (CPU vectors, CUDA's float4).
import { dtypes } from '../../dtype.ts';
import { ALU, AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { contiguousLanes, vectorDtype } from '../vectors.ts';
import { constSize, kernelRanges } from './axes.ts';
import { address, dividing, isLoop, reads } from './operands.ts';
import type { Opt, Target } from './opts.ts';

/**
 * Lane counts for vectors of this dtype that fit one of the target's vector registers, widest first: a wider
 * vector type is split into several registers, and gcc moves its halves through memory (a 1024^3 matmul in
 * 16-lane vectors ran at 15 GFLOP/s on AVX2, in pairs of 8-lane vectors at 130).
 */
export const laneCounts = (target: Target, itemsize: number) =>
  [16, 8, 4].filter((f) => f * itemsize <= target.vectorBytes);

/** Ops the C renderer computes on whole vectors: a kernel of only these (and loads, stores) gains from lanes. */
const VECTOR_ARITHMETIC: ReadonlySet<Ops> = new Set([
  Ops.ADD,
  Ops.SUB,
  Ops.MUL,
  Ops.NEG,
  Ops.MULACC,
  Ops.DIV,
  Ops.RECIP,
  Ops.MAX,
  Ops.EXP2,
]);

/** Whether every value of an elementwise kernel is plain arithmetic on a vector type. */
const plainArithmetic = (ast: UOp) =>
  ast
    .toposort()
    .every(
      (u) =>
        u.dtype === dtypes.index ||
        !(ALU.has(u.op) || u.op === Ops.LOAD) ||
        ((VECTOR_ARITHMETIC.has(u.op) || u.op === Ops.LOAD) && vectorDtype(u.dtype)),
    );

/**
 * Vector lanes along the innermost output axis when every load that reads it and the store move contiguous
 * memory there: the partial results of a split sum, a reduction over the outer axis of a matrix, and
 * elementwise kernels of plain arithmetic (the panel copy of a matmul: 3.5 ms for 16 MiB as a loop of 16,
 * 1 ms as vectors). Each step then moves whole vectors.
 */
export function outputLanes(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const inner = ranges.filter(isLoop).at(-1);
  const nodes = ast.toposort();
  const reduces = nodes.some((u) => u.op === Ops.REDUCE);
  if (inner === undefined || (!reduces && !plainArithmetic(ast))) return [];
  const moves = nodes.filter((u) => (u.op === Ops.LOAD || u.op === Ops.STORE) && reads(u, inner));
  const itemsize = Math.max(...moves.map((u) => (u.op === Ops.STORE ? u.src[1]! : u).dtype.itemsize));
  const lanes = dividing(constSize(inner) ?? 0, laneCounts(target, itemsize));
  if (
    lanes === undefined ||
    !moves.some((u) => u.op === Ops.LOAD) ||
    !moves.every((u) => contiguousLanes(address(u), inner, lanes))
  )
    return [];
  return [{ op: 'SPLIT', axis: ranges.indexOf(inner), factor: lanes, target: AxisType.UPCAST }];
}
