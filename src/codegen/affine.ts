// Index expressions as affine forms: a sum of atoms (subexpressions that are not sums or constant multiples:
// a range, lane / 4) times integer coefficients, plus a constant. Hash-consing makes equal atoms one node, so
// two addresses that differ by a constant have the same terms.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

/** A sum of atoms times coefficients, plus a constant. */
export interface Linear {
  terms: Map<UOp, number>;
  constant: number;
}

/** u as a sum of atoms times coefficients plus a constant, or undefined where it is not (a vector, say). */
export function affine(u: UOp): Linear | undefined {
  if (u.op === Ops.CONST) return { terms: new Map(), constant: Number(u.constValue) };
  if (u.op === Ops.ADD) {
    const [a, b] = u.src.map(affine);
    if (a === undefined || b === undefined) return undefined;
    for (const [t, c] of b.terms) a.terms.set(t, (a.terms.get(t) ?? 0) + c);
    return { terms: a.terms, constant: a.constant + b.constant };
  }
  const c = u.op === Ops.MUL ? u.src.find((s) => s.op === Ops.CONST) : undefined;
  if (c !== undefined) {
    const x = affine(u.src[0] === c ? u.src[1]! : u.src[0]!);
    if (x === undefined) return undefined;
    const k = Number(c.constValue);
    for (const [t, v] of x.terms) x.terms.set(t, v * k);
    return { terms: x.terms, constant: x.constant * k };
  }
  return u.dtype === dtypes.index && !u.isVector ? { terms: new Map([[u, 1]]), constant: 0 } : undefined;
}
