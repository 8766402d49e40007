// Function resolution: each GETTUPLE of a FUNCTION becomes that element of the body with PARAM k replaced by
// the call's argument k, so scheduling and autograd see plain tensor graphs (the spec's resolution of @function);
// a CALL (a compiled fn) is instead lowered by realize to the buffers of its separately realized results.
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

/** A FUNCTION's or CALL's body (its TUPLE) with its parameters bound to args (by default the call's). */
export function bindBody(call: UOp, args: readonly UOp[] = call.src.slice(1)): UOp {
  const body = call.src[0]!;
  const bound = new Map<UOp, UOp>();
  for (const u of body.toposort()) {
    const slot = u.op === Ops.PARAM ? u.argOf(Ops.PARAM).slot : undefined;
    // a string slot names a symbolic variable, which is no parameter of the function
    if (typeof slot === 'number') bound.set(u, args[slot]!);
  }
  return substitute(body, bound);
}

/** Realizes a CALL's results, giving one BUFFER per element of its body. */
export type LowerCall = (call: UOp) => readonly UOp[];

// Sources are rewritten before their users, so a function called inside another body is inlined before
// that body: a PARAM being bound always belongs to the function whose GETTUPLE is matched.
const resolver = new PatternMatcher<LowerCall | undefined>([
  [
    new UPat({
      op: Ops.GETTUPLE,
      src: [new UPat({ op: [Ops.FUNCTION, Ops.CALL], name: 'call' })],
      name: 'get',
    }),
    ({ call, get }, lower) => {
      const i = get!.arg as number;
      return call!.op === Ops.CALL && lower !== undefined ? lower(call!)[i]! : bindBody(call!).src[i]!;
    },
  ],
]);

/**
 * The roots with every function call inlined; roots without calls come back as they are. With lowerCall
 * (realize), each CALL's results become the buffers it gives; without (autograd, tracing), a CALL is
 * inlined like a FUNCTION, so gradients flow through it (its backward graph recomputes the body inline).
 */
export function resolveFunctions(roots: readonly UOp[], lowerCall?: LowerCall): UOp[] {
  const sink = UOp.sink(...roots);
  if (!sink.toposort().some((u) => u.op === Ops.FUNCTION || u.op === Ops.CALL)) return [...roots];
  return [...graphRewrite(sink, resolver, { name: 'resolve functions', ctx: lowerCall }).src];
}
