// What the heuristics ask of a kernel: its loops, the operands of its sum of products, the ranges a value reads.
import { AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';

/** The largest of the factors that divides n. */
export const dividing = (n: number, factors: readonly number[]) => factors.find((f) => n % f === 0);

export const isLoop = (r: UOp) => {
  const { type } = r.argOf(Ops.RANGE);
  return type === AxisType.LOOP || type === AxisType.GLOBAL;
};

/** The two loads a sum of products multiplies (matmul, conv), if the kernel reduces one. */
export function productLoads(ast: UOp): [UOp, UOp] | undefined {
  const loadOf = (u: UOp) => (u.op === Ops.CAST ? u.src[0]! : u);
  for (const r of ast.toposort()) {
    if (r.op !== Ops.REDUCE || r.argOf(Ops.REDUCE).op !== Ops.ADD) continue;
    for (const m of r.src[0]!.toposort()) {
      const [a, b] = m.src.map(loadOf);
      if (m.op === Ops.MUL && a?.op === Ops.LOAD && b?.op === Ops.LOAD) return [a, b];
    }
  }
  return undefined;
}

/**
 * The two operands of a sum of products: the sides of the product the sum takes where each holds a load, so
 * that elementwise math fused on a load (the relu of the layer before a matmul, the relu's mask on a
 * gradient) is an operand too; else the two loads a product inside it multiplies.
 */
export function productOperands(ast: UOp): [UOp, UOp] | undefined {
  const hasLoad = (u: UOp) => u.toposort().some((x) => x.op === Ops.LOAD);
  for (const r of ast.toposort()) {
    if (r.op !== Ops.REDUCE || r.argOf(Ops.REDUCE).op !== Ops.ADD) continue;
    let m = r.src[0]!;
    while (m.op === Ops.CAST) m = m.src[0]!;
    if (m.op === Ops.MUL && m.src.every(hasLoad)) return [m.src[0]!, m.src[1]!];
  }
  return productLoads(ast);
}

/** Whether an operand is a load as it is (or cast), not math on loads. */
export const isLoad = (u: UOp) => (u.op === Ops.CAST ? u.src[0]! : u).op === Ops.LOAD;

/** Whether a value (a load, an operand) depends on range r. */
export const reads = (u: UOp, r: UOp) => u.toposort().includes(r);
export const address = (load: UOp) => load.src[0]!.src[1]!;
/** The loads of an operand that read range r. */
export const loadsReading = (operand: UOp, r: UOp) =>
  operand.toposort().filter((u) => u.op === Ops.LOAD && reads(address(u), r));
