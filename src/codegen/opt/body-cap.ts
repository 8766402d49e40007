// The cap on a kernel's expanded body: register tiles shrink until it renders to a size compilers take quickly.
import { dtypes } from '../../dtype.ts';
import { ALU, AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { laneRange } from '../expand.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';
import { applyOpts, type Opt, type Target } from './opts.ts';

/**
 * At most this many ops in a kernel's body once its UPCAST and UNROLL axes are expanded. A register tile copies
 * every op that depends on a tiled axis: a matmul's 8 x 32 tile copies a multiply-add (about 600 ops), but the
 * transformer's attention backward recomputes exp2 of each masked score inside its sum, and a 16 x 16 tile of
 * that body rendered 350-590 KB of C, each 4-6 s of gcc CPU (a vectorized 3x3 conv tile: about 1500 ops).
 */
export const MAX_BODY_OPS = 2048;
/** Ops that render as many (the C renderer's exp2 is a polynomial of about 20), counted as that many. */
const OP_COST: ReadonlyMap<Ops, number> = new Map([
  [Ops.EXP2, 20],
  [Ops.LOG2, 20],
  [Ops.SIN, 20],
]);

const expands = (r: UOp) => {
  const { type } = rangeArg(r);
  return type === AxisType.UPCAST || type === AxisType.UNROLL;
};

/**
 * The ops a kernel's body emits once expanded: each value op once per combination of the UPCAST and UNROLL
 * axes it depends on (a reduce's sum once per combination of its operand's). On a target with vectors, the
 * lane axis' copies are one vector op, except where an op reads a condition that varies by lane: the
 * lowering computes it and what it reads lane by lane (src/codegen/vectors.ts), a causal mask's scores say.
 */
export function expandedOps(ast: UOp, target: Target): number {
  const expanding = kernelRanges(ast).filter(expands);
  const bit = new Map(expanding.map((r, i) => [r, 1 << i]));
  const masks = new Map<UOp, number>();
  const nodes = ast.toposort();
  for (const u of nodes) {
    let mask = bit.get(u) ?? 0;
    if (u.op === Ops.REDUCE) {
      mask = masks.get(u.src[0]!)!;
      for (const r of u.src.slice(1)) mask &= ~(bit.get(r) ?? 0);
    } else for (const s of u.src) mask |= masks.get(s) ?? 0;
    masks.set(u, mask);
  }
  const lanes = target.vectors ? laneRange(ast) : undefined;
  const laneBit = lanes === undefined ? 0 : bit.get(lanes)!;
  const byLane = (u: UOp) => (masks.get(u)! & laneBit) !== 0;
  const scalar = new Set<UOp>();
  for (const u of nodes)
    if (u.src.some((s) => s.dtype === dtypes.bool && byLane(s)))
      for (const x of u.toposort()) if (byLane(x)) scalar.add(x);
  const copies = (u: UOp, mask: number) =>
    expanding.reduce((n, r, i) => {
      const b = 1 << i;
      return mask & b && (b !== laneBit || scalar.has(u)) ? n * constSize(r)! : n;
    }, 1);
  let ops = 0;
  for (const u of nodes) {
    if (u.op === Ops.REDUCE) ops += copies(u.src[0]!, masks.get(u.src[0]!)!);
    else if ((ALU.has(u.op) || u.op === Ops.LOAD) && u.dtype !== dtypes.index)
      ops += copies(u, masks.get(u)!) * (OP_COST.get(u.op) ?? 1);
  }
  return ops;
}

/**
 * opts with their register tiles shrunk until the expanded body has at most MAX_BODY_OPS ops: the UPCAST or
 * UNROLL split of the largest factor is halved (the axes stay as they are) while one is more than 2.
 */
export function capBody(ast: UOp, opts: Opt[], target: Target): Opt[] {
  let out = opts;
  for (;;) {
    const splits = out.flatMap((o, i) =>
      o.op === 'SPLIT' && (o.target === AxisType.UPCAST || o.target === AxisType.UNROLL) && o.factor > 2
        ? [i]
        : [],
    );
    if (splits.length === 0 || expandedOps(applyOpts(ast, out, target), target) <= MAX_BODY_OPS) return out;
    // the largest factor, the last of equals (the lanes' split comes before its rows')
    const factor = (i: number) => (out[i] as Extract<Opt, { op: 'SPLIT' }>).factor;
    const at = splits.reduce((a, i) => (factor(i) >= factor(a) ? i : a));
    out = out.map((o, i) => (i === at && o.op === 'SPLIT' ? { ...o, factor: o.factor / 2 } : o));
  }
}
