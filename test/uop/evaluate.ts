// A reference interpreter for scalar UOp expressions over named variables, for tests.
import type { ConstValue } from '../../src/dtype.ts';
import { execAlu } from '../../src/uop/alu.ts';
import { type ArgOf, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';

export function evaluate(root: UOp, vars: Record<string, number>): ConstValue {
  const val = new Map<UOp, ConstValue>();
  for (const u of root.toposort()) {
    if (u.op === Ops.CONST) val.set(u, u.constValue);
    else if (u.op === Ops.PARAM) {
      const v = vars[(u.arg as ArgOf<Ops.PARAM>).slot as string];
      if (v === undefined)
        throw new Error(`no value for variable ${String((u.arg as ArgOf<Ops.PARAM>).slot)}`);
      val.set(u, v);
    } else if (u.op === Ops.STACK) val.set(u, 0);
    else {
      const from = u.src[u.op === Ops.WHERE ? 1 : 0]!.dtype;
      const r = execAlu(
        u.op,
        from,
        u.src.map((s) => val.get(s)!),
        u.dtype,
      );
      if (r === undefined) throw new Error(`cannot evaluate ${Ops[u.op]}`);
      val.set(u, r);
    }
  }
  return val.get(root)!;
}
