// Function resolution: each GETTUPLE of a FUNCTION becomes that element of the body with PARAM k replaced by
// the call's argument k, so scheduling and autograd see plain tensor graphs (the spec's resolution of @function).
import { type ArgOf, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

/** Element `index` of a FUNCTION's body with its parameters bound to the call's arguments. */
function inline(call: UOp, index: number): UOp {
  const args = call.src.slice(1);
  const element = call.src[0]!.src[index]!;
  const bound = new Map<UOp, UOp>();
  for (const u of element.toposort()) {
    const slot = u.op === Ops.PARAM ? (u.arg as ArgOf<Ops.PARAM>).slot : undefined;
    // a string slot names a symbolic variable, which is no parameter of the function
    if (typeof slot === 'number') bound.set(u, args[slot]!);
  }
  return substitute(element, bound);
}

// Sources are rewritten before their users, so a function called inside another body is inlined before
// that body: a PARAM being bound always belongs to the function whose GETTUPLE is matched.
const resolver = new PatternMatcher([
  [
    new UPat({ op: Ops.GETTUPLE, src: [new UPat({ op: Ops.FUNCTION, name: 'call' })], name: 'get' }),
    ({ call, get }) => inline(call!, get!.arg as number),
  ],
]);

/** The roots with every function call inlined; roots without calls come back as they are. */
export function resolveFunctions(roots: readonly UOp[]): UOp[] {
  const sink = UOp.sink(...roots);
  if (!sink.toposort().some((u) => u.op === Ops.FUNCTION)) return [...roots];
  return [...graphRewrite(sink, resolver, { name: 'resolve functions' }).src];
}
