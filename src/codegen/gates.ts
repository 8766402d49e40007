// Addresses simplified under their gates: a gated load reads memory only where its gate holds, so its address
// may be simplified with the bounds the gate implies. A padded view's address wraps (x % size, since x may be
// -1 at the padding); within the gate's bounds the wrap is the identity and drops, which leaves an address
// that is affine in the loops (so its lanes can be one vector load). So are a gate's clauses where its other
// clauses hold, and a select's condition in the branch another select chooses where its condition holds. A gate
// that expand made constant true (an UPCAST copy inside the unpadded part) is dropped.
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

/** The bounds a gate puts on index expressions, where they narrow them. */
const narrowing = (gate: UOp) =>
  [...gateBounds(gate)].filter(([x, [lo, hi]]) => lo <= hi && (lo > x.vmin || hi < x.vmax));

/**
 * `u` simplified as if each bounded expression were a variable within its bounds; `u` as it is where it loads (a
 * gathered index, a value): a load's own gate simplified there would let it read where the outer gate fails, as
 * it runs wherever u is computed.
 */
function within(bounds: readonly [UOp, [number, number]][], u: UOp): UOp {
  if (bounds.length === 0 || u.toposort().some((x) => x.op === Ops.LOAD)) return u;
  const vars = new Map(bounds.map(([x, [lo, hi]], i) => [x, UOp.variable(`gate${i}`, lo, hi)]));
  const back = new Map([...vars].map(([x, v]) => [v, x]));
  return substitute(simplifyGraph(substitute(u, vars), 'under a gate'), back);
}

const isLeaf = (x: UOp) => x.op === Ops.RANGE || x.op === Ops.SPECIAL || x.op === Ops.PARAM;

/**
 * load with its address simplified within the bounds its gate implies: first those of loops and variables, then
 * those of the expressions over them, simplified within the first (a wrapped index, (x + y//10) % 11 < 10 with
 * y < 10, bounds x itself, whose wrap then drops).
 */
function underGate(load: UOp): UOp | undefined {
  const [index, alt, gate] = load.src as [UOp, UOp, UOp];
  const bounds = narrowing(gate);
  if (bounds.length === 0) return undefined;
  const leaves = bounds.filter(([x]) => isLeaf(x));
  const rest = bounds.flatMap(([x, b]): [UOp, [number, number]][] => {
    if (isLeaf(x)) return [];
    const y = within(leaves, x);
    return y.op === Ops.CONST ? [] : [[y, [Math.max(b[0], y.vmin), Math.min(b[1], y.vmax)]]];
  });
  const simplify = (i: UOp) => within(rest, within(leaves, i));
  const [buf, ...idx] = index.src as [UOp, ...UOp[]];
  const simplified = idx.map(simplify);
  if (simplified.every((s, k) => s === idx[k])) return undefined;
  return load.withSrc([index.withSrc([buf, ...simplified]), alt, gate]);
}

/** A condition simplified where `gate` holds (it is read only there), or undefined where nothing changes. */
function condition(cond: UOp, gate: UOp): UOp | undefined {
  const simplified = within(
    narrowing(gate).filter(([x]) => isLeaf(x)),
    cond,
  );
  return simplified === cond ? undefined : simplified;
}

const rules = new PatternMatcher([
  [
    new UPat({ op: Ops.LOAD, name: 'load' }),
    ({ load }) => (load!.src.length === 3 ? underGate(load!) : undefined),
  ],
  // each clause of a conjunction matters only where the other holds: a padded, pooled view's ((x + y//10) % 11 <
  // 10) & (y < 10) is (x < 10) & (y < 10)
  [
    new UPat({ op: Ops.AND, dtype: dtypes.bool, name: 'g' }),
    ({ g }) => {
      const [a, b] = g!.src as [UOp, UOp];
      const b2 = condition(b, a);
      const a2 = condition(a, b2 ?? b);
      return a2 === undefined && b2 === undefined ? undefined : (a2 ?? a).and(b2 ?? b);
    },
  ],
  // and a select's condition inside another's chosen branch, where the outer one holds
  [
    new UPat({ op: Ops.WHERE, src: [UPat.var('c'), new UPat({ op: Ops.WHERE, name: 'w' }), UPat.var('z')] }),
    ({ c, w, z }) => {
      const d = condition(w!.src[0]!, c!);
      return d === undefined ? undefined : c!.where(w!.withSrc([d, w!.src[1]!, w!.src[2]!]), z!);
    },
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
