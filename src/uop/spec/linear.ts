// Spec rules of a linearized kernel: a LINEAR listing every instruction in execution order.
import { Ops } from '../ops.ts';
import { UPat } from '../pattern.ts';
import type { UOp } from '../uop.ts';
import { form, gateProblem, type Problem, ref, refs, type SpecRule } from './common.ts';
import { codegenRules } from './kernel.ts';

/** Instructions in order: sources first, blocks (RANGE..END, IF..ENDIF) properly nested and closed. */
function linearOrder(u: UOp): Problem {
  const pos = new Map<UOp, number>();
  for (const [i, x] of u.src.entries()) {
    const first = pos.get(x);
    if (first !== undefined) return `${ref(x)} appears twice in the list (at ${first} and ${i})`;
    pos.set(x, i);
  }
  const open: UOp[] = [];
  for (const [i, x] of u.src.entries()) {
    if (x.op === Ops.LINEAR) return `instruction ${i} is a nested LINEAR; a LINEAR lists instructions only`;
    for (const s of x.src) {
      const p = pos.get(s);
      if (p === undefined) return `instruction ${i} (${ref(x)}) uses ${ref(s)}, which is not in the list`;
      if (p > i)
        return `instruction ${i} (${ref(x)}) uses ${ref(s)}, which comes later (at ${p}); sources must come first`;
    }
    if (x.op === Ops.RANGE || x.op === Ops.IF) open.push(x);
    else if (x.op === Ops.END || x.op === Ops.ENDIF) {
      const closes = x.op === Ops.END ? x.src.slice(1) : x.src;
      const innermost = open.slice(Math.max(0, open.length - closes.length));
      if (closes.some((c) => !innermost.includes(c)))
        return `instruction ${i} (${ref(x)}) closes ${refs(closes)}, but the innermost open block${innermost.length === 1 ? ' is' : 's are'} ${innermost.length ? refs(innermost) : 'none'}`;
      open.length -= closes.length;
    }
  }
  if (open.length > 0)
    return `${refs(open)} ${open.length === 1 ? 'is' : 'are'} never closed (a RANGE needs a later END, an IF a later ENDIF)`;
}

export const linearSpec: readonly SpecRule[] = [
  ...codegenRules,
  ['if', form(Ops.IF, ['gate']), (u) => gateProblem(u.src[0])],
  ['endif', new UPat({ op: Ops.ENDIF, src: [UPat.op(Ops.IF)] }), () => undefined],
  ['linear', form(Ops.LINEAR), linearOrder],
];
