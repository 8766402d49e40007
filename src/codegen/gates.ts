// Addresses simplified under their gates: a gated load reads memory only where its gate holds, so its address
// may be simplified with the bounds the gate implies. A padded view's address wraps (x % size, since x may be
// -1 at the padding); within the gate's bounds the wrap is the identity and drops, which leaves an address
// that is affine in the loops (so its lanes can be one vector load). A gate that expand made constant true
// (an UPCAST copy inside the unpadded part) is dropped.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import { UOp } from '../uop/uop.ts';

type Bounds = Map<UOp, [number, number]>;

const constant = (u: UOp) => (u.op === Ops.CONST ? Number(u.constValue) : undefined);

/** The bounds an AND of `x < c` and `(x < c) != true` clauses puts on index expressions x. */
function gateBounds(gate: UOp): Bounds {
  const bounds: Bounds = new Map();
  const narrow = (x: UOp, lo: number, hi: number) => {
    const [l, h] = bounds.get(x) ?? [x.vmin, x.vmax];
    bounds.set(x, [Math.max(l, lo), Math.min(h, hi)]);
  };
  const stack = [gate];
  while (stack.length) {
    const g = stack.pop()!;
    const [a, b] = g.src as [UOp, UOp];
    if (g.op === Ops.AND) stack.push(a, b);
    else if (g.op === Ops.CMPLT && a.dtype === dtypes.index && constant(b) !== undefined)
      narrow(a, -Infinity, constant(b)! - 1);
    else if (g.op === Ops.CMPNE && b.op === Ops.CONST && b.constValue === true && a.op === Ops.CMPLT) {
      const [x, c] = a.src as [UOp, UOp];
      if (x.dtype === dtypes.index && constant(c) !== undefined) narrow(x, constant(c)!, Infinity);
    }
  }
  return bounds;
}

/** load with its address simplified as if each bounded expression were a variable within its bounds. */
function underGate(load: UOp): UOp | undefined {
  const [index, alt, gate] = load.src as [UOp, UOp, UOp];
  const bounds = [...gateBounds(gate)].filter(([x, [lo, hi]]) => lo <= hi && (lo > x.vmin || hi < x.vmax));
  if (bounds.length === 0) return undefined;
  const vars = new Map(bounds.map(([x, [lo, hi]], i) => [x, UOp.variable(`gate${i}`, lo, hi)]));
  const back = new Map([...vars].map(([x, v]) => [v, x]));
  const simplify = (i: UOp) => substitute(simplifyGraph(substitute(i, vars), 'address under its gate'), back);
  const [buf, ...idx] = index.src as [UOp, ...UOp[]];
  const simplified = idx.map(simplify);
  if (simplified.every((s, k) => s === idx[k])) return undefined;
  return load.withSrc([index.withSrc([buf, ...simplified]), alt, gate]);
}

const rules = new PatternMatcher([
  [
    new UPat({ op: Ops.LOAD, name: 'load' }),
    ({ load }) => (load!.src.length === 3 ? underGate(load!) : undefined),
  ],
]);

export function simplifyGatedAddresses(ast: UOp): UOp {
  return graphRewrite(ast, rules, { name: 'addresses under their gates', ctx: {} });
}

const isTrue = (u: UOp | undefined) => u?.op === Ops.CONST && u.constValue === true;

const trueGates = new PatternMatcher([
  [
    new UPat({ op: [Ops.LOAD, Ops.STORE], name: 'x' }),
    ({ x }) =>
      isTrue(x!.src[2]) ? x!.withSrc(x!.op === Ops.LOAD ? [x!.src[0]!] : x!.src.slice(0, 2)) : undefined,
  ],
]);

export function dropTrueGates(ast: UOp): UOp {
  // a walk to find one is cheaper than a rewrite of the expanded kernel, which most kernels need not
  const gated = (u: UOp) => (u.op === Ops.LOAD || u.op === Ops.STORE) && isTrue(u.src[2]);
  if (!ast.toposort().some(gated)) return ast;
  return graphRewrite(ast, trueGates, { name: 'gates that always hold', ctx: {} });
}

/**
 * A gated load whose address is in its buffer for every value of the loops loads unconditionally, and its gate
 * selects the value: it no longer waits on the gate, so it leaves the loops its address does not depend on (a
 * padded conv's per-channel values), and the select is a blend where a gated load was a branch.
 */
function ungated(load: UOp): UOp | undefined {
  const [index, alt, gate] = load.src as [UOp, UOp, UOp];
  const [buf, idx] = index.src as [UOp, UOp];
  if (buf.op !== Ops.PARAM || index.src.length !== 2 || idx.isVector) return undefined;
  const size = buf.shape?.[0];
  if (typeof size !== 'number' || idx.vmin < 0 || idx.vmax >= size) return undefined;
  return gate.where(load.withSrc([index]), alt);
}

const safeLoads = new PatternMatcher([
  [
    new UPat({ op: Ops.LOAD, name: 'load' }),
    ({ load }) => (load!.src.length === 3 ? ungated(load!) : undefined),
  ],
]);

export function ungateSafeLoads(ast: UOp): UOp {
  if (!ast.toposort().some((u) => u.op === Ops.LOAD && u.src.length === 3)) return ast;
  return graphRewrite(ast, safeLoads, { name: 'loads that cannot fault', ctx: {} });
}
