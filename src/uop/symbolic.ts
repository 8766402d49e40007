// The symbolic simplifier: rewrite rules for index arithmetic that keep every value and never grow the graph.
import { dtypes } from '../dtype.ts';
import { execAlu, floorDiv, floorMod } from './alu.ts';
import { ALU, Ops } from './ops.ts';
import { graphRewrite, PatternMatcher, UPat } from './pattern.ts';
import { UOp, uopHooks } from './uop.ts';

// Integer rules reason about exact values; float arithmetic rounds, so floats only get exact rules.
const isIntLike = (u: UOp) => u.dtype.count === 1 && (u.dtype.isInt || u.dtype === dtypes.bool);
const isInt = (u: UOp) => u.dtype.count === 1 && u.dtype.isInt;
const intVar = (name: string) => new UPat({ name, where: isInt });
const posConst = (name: string) =>
  new UPat({
    op: Ops.CONST,
    name,
    where: (u) => typeof u.constValue === 'number' && (u.constValue as number) > 0,
  });
const cval = (u: UOp) => u.constValue as number;
const safe = (...xs: number[]) => xs.every(Number.isSafeInteger);
/** Division and comparison rules need the true integer value: no wrap-around may have happened in u. */
const unwrapped = (u: UOp) => u.dtype === dtypes.index || !(u.vmin <= u.dtype.min && u.vmax >= u.dtype.max);
const unwrappedVar = (name: string) => new UPat({ name, where: (u) => isInt(u) && unwrapped(u) });

// --- sums: a sum of terms, each a node times an integer coefficient, plus a constant --------------------

const MAX_TERMS = 256;

interface Sum {
  terms: UOp[];
  coefs: number[];
  konst: number;
  /** false when rebuilding would give the same node: no repeated term, one constant at most and it is last */
  changed: boolean;
}

/** Splits u into terms (walking through ADDs and constant MULs), or undefined if it is too large or not exact. */
function flatten(u: UOp): Sum | undefined {
  const sum: Sum = { terms: [], coefs: [], konst: 0, changed: false };
  const index = new Map<UOp, number>();
  const stack: UOp[] = [u];
  let consts = 0;
  while (stack.length) {
    const n = stack.pop()!;
    if (n.op === Ops.ADD) {
      if (n.src[1]!.op === Ops.ADD) sum.changed = true; // rebuilt sums lean left
      stack.push(n.src[1]!, n.src[0]!);
      continue;
    }
    if (n.op === Ops.CONST) {
      if (typeof n.constValue !== 'number') return undefined;
      sum.konst += cval(n);
      if (++consts > 1 || stack.length > 0) sum.changed = true;
      continue;
    }
    let term = n;
    let coef = 1;
    if (n.op === Ops.MUL) {
      const ci = n.src[1]!.op === Ops.CONST ? 1 : n.src[0]!.op === Ops.CONST ? 0 : -1;
      if (ci >= 0) {
        const c = n.src[ci]!.constValue;
        if (typeof c !== 'number') return undefined;
        term = n.src[1 - ci]!;
        coef = c;
        if (c === 0 || c === 1) sum.changed = true;
      }
    }
    const at = index.get(term);
    if (at === undefined) {
      if (sum.terms.length === MAX_TERMS) return undefined;
      index.set(term, sum.terms.length);
      sum.terms.push(term);
      sum.coefs.push(coef);
    } else {
      sum.coefs[at]! += coef;
      sum.changed = true;
    }
  }
  return safe(sum.konst, ...sum.coefs) ? sum : undefined;
}

/** Builds the sum left to right in term order, constant last; zero terms vanish. */
function build(like: UOp, sum: Sum): UOp {
  let out: UOp | undefined;
  for (let i = 0; i < sum.terms.length; i++) {
    const c = sum.coefs[i]!;
    if (c === 0) continue;
    const t = c === 1 ? sum.terms[i]! : sum.terms[i]!.mul(c);
    out = out === undefined ? t : out.add(t);
  }
  if (out === undefined) return like.constLike(sum.konst);
  return sum.konst === 0 ? out : out.add(sum.konst);
}

/**
 * Merges `x//c * k*c` with `x%c * k` into `x * k` (floor division and its remainder recombine), also where x
 * is itself a quotient y//a: `y//(a*c) * k*c` with `(y//a)%c * k` into `(y//a) * k`, as (y//a)//c is y//(a*c)
 * for positive a and c (a flattened (64, 3, 3) axis read as r%3 + (r//3)%3*3 + r//9*9 becomes r).
 */
function recombine(sum: Sum): void {
  const positive = (u: UOp) => u.op === Ops.CONST && typeof u.constValue === 'number' && cval(u) > 0;
  for (let i = 0; i < sum.terms.length; i++) {
    const d = sum.terms[i]!;
    if (d.op !== Ops.IDIV || d.src[1]!.op !== Ops.CONST || sum.coefs[i] === 0) continue;
    const [y, e] = [d.src[0]!, cval(d.src[1]!)];
    // the dividend x of a remainder x%c whose quotient x//c is y//e
    const dividend = (m: UOp): UOp | undefined => {
      if (m.op !== Ops.MOD || m.src[1]!.op !== Ops.CONST) return undefined;
      const x = m.src[0]!;
      if (x === y) return m.src[1] === d.src[1] ? x : undefined;
      const nested =
        positive(d.src[1]!) &&
        positive(m.src[1]!) &&
        x.op === Ops.IDIV &&
        x.src[0] === y &&
        positive(x.src[1]!) &&
        cval(x.src[1]!) * cval(m.src[1]!) === e;
      return nested ? x : undefined;
    };
    const j = sum.terms.findIndex(
      (m, j) =>
        dividend(m) !== undefined && sum.coefs[j] !== 0 && sum.coefs[i] === sum.coefs[j]! * cval(m.src[1]!),
    );
    if (j < 0) continue;
    const k = sum.coefs[j]!;
    const x = dividend(sum.terms[j]!)!;
    sum.coefs[i] = 0;
    sum.coefs[j] = 0;
    sum.terms.push(x);
    sum.coefs.push(k);
    sum.changed = true;
  }
}

// --- cost: a rewrite is taken only when it adds no more nodes than it frees --------------------------

const MAX_COST_WALK = 1024;

/** Nodes of u's graph, or undefined past the walk limit. */
function nodesOf(u: UOp): Set<UOp> | undefined {
  const seen = new Set<UOp>([u]);
  const stack = [u];
  while (stack.length) {
    for (const s of stack.pop()!.src)
      if (!seen.has(s)) {
        if (seen.size === MAX_COST_WALK) return undefined;
        seen.add(s);
        stack.push(s);
      }
  }
  return seen;
}

/**
 * What simplify() passes its rules: how many edges point at each node of the graph (a node replacing
 * others inherits their count). Rules used in other passes without it treat every node as unshared.
 */
export interface SimplifyCtx {
  uses?: Map<UOp, number>;
}

function countUses(root: UOp): Map<UOp, number> {
  const uses = new Map<UOp, number>();
  for (const u of root.toposort()) for (const s of u.src) uses.set(s, (uses.get(s) ?? 0) + 1);
  return uses;
}

/**
 * cand if it is a different node that adds no more nodes than replacing old frees, else undefined. A node
 * below old that is also used outside old's graph stays alive, and so does everything below it.
 */
function ifNotLarger(old: UOp, cand: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  if (cand === old) return undefined;
  const before = nodesOf(old);
  const after = nodesOf(cand);
  if (before === undefined || after === undefined) return undefined;
  const kept = new Set<UOp>();
  if (ctx?.uses !== undefined) {
    const inner = new Map<UOp, number>();
    for (const n of before) for (const s of n.src) inner.set(s, (inner.get(s) ?? 0) + 1);
    const stack = [...before].filter((n) => n !== old && (ctx.uses!.get(n) ?? 0) > (inner.get(n) ?? 0));
    while (stack.length) {
      const n = stack.pop()!;
      if (kept.has(n)) continue;
      kept.add(n);
      stack.push(...n.src);
    }
  }
  let added = 0;
  for (const n of after) if (!before.has(n)) added++;
  let freed = 0;
  for (const n of before) if (!after.has(n) && !kept.has(n)) freed++;
  return added <= freed ? cand : undefined;
}

// --- rule helpers -------------------------------------------------------------------------------------

function foldConstants(a: UOp): UOp | undefined {
  if (a.dtype.count !== 1) return undefined;
  const from = a.src[a.op === Ops.WHERE ? 1 : 0]!.dtype;
  const v = execAlu(
    a.op,
    from,
    a.src.map((s) => s.constValue),
    a.dtype,
  );
  return v === undefined ? undefined : UOp.const(a.dtype, v);
}

/** An integer node whose interval is one point is that constant. */
function foldInterval(a: UOp): UOp | undefined {
  if (!isIntLike(a) || a.op === Ops.CONST) return undefined;
  const lo = a.vmin;
  return lo === a.vmax && Number.isSafeInteger(lo) ? UOp.const(a.dtype, lo) : undefined;
}

function simplifySum(a: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const sum = flatten(a);
  if (sum === undefined) return undefined;
  recombine(sum);
  return sum.changed ? ifNotLarger(a, build(a, sum), ctx) : undefined;
}

/** (sum of terms) // c: terms whose coefficient c divides leave the division; a common factor cancels. */
function divideSum(x: UOp, c: number, node: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const out = dividedSum(x, c);
  return out === undefined ? undefined : ifNotLarger(node, out, ctx);
}

function dividedSum(x: UOp, c: number): UOp | undefined {
  if (!unwrapped(x)) return undefined;
  const sum = flatten(x);
  if (sum === undefined) return undefined;
  const quotient: Sum = { terms: [], coefs: [], konst: floorDiv(sum.konst, c), changed: true };
  const rest: Sum = { terms: [], coefs: [], konst: floorMod(sum.konst, c), changed: true };
  sum.terms.forEach((t, i) => {
    const k = sum.coefs[i]!;
    const into = k % c === 0 ? quotient : rest;
    into.terms.push(t);
    into.coefs.push(k % c === 0 ? k / c : k);
  });
  let divisor = c;
  const g = rest.coefs.reduce(gcd, c);
  if (quotient.terms.length === 0 && quotient.konst === 0 && g === 1 && !sum.changed) return undefined;
  if (g > 1) {
    rest.coefs = rest.coefs.map((k) => k / g);
    rest.konst = Math.floor(rest.konst / g);
    divisor = c / g;
  }
  const restExpr = build(x, rest);
  const q = build(x, quotient);
  // a part of a sum can wrap where the whole did not
  if (!unwrapped(restExpr) || !unwrapped(q)) return undefined;
  return rest.terms.length === 0 && rest.konst === 0 ? q : q.add(restExpr.idiv(divisor));
}

/** (sum of terms) % c: terms that c divides vanish; coefficients and the constant reduce modulo c. */
function modSum(x: UOp, c: number, node: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const out = reducedMod(x, c);
  return out === undefined ? undefined : ifNotLarger(node, out, ctx);
}

function reducedMod(x: UOp, c: number): UOp | undefined {
  if (!unwrapped(x)) return undefined;
  const sum = flatten(x);
  if (sum === undefined) return undefined;
  const coefs = sum.coefs.map((k) => floorMod(k, c));
  const konst = floorMod(sum.konst, c);
  if (!sum.changed && konst === sum.konst && coefs.every((k, i) => k === sum.coefs[i])) return undefined;
  sum.coefs = coefs;
  sum.konst = konst;
  const rest = build(x, sum);
  // reduced coefficients can be larger (-1 becomes c-1): the new sum must not wrap either
  return unwrapped(rest) ? rest.mod(c) : undefined;
}

/** x % c when x stays within one period [k*c, (k+1)*c): x - k*c. */
function modByRange(x: UOp, c: number, node: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const out = withinPeriod(x, c);
  return out === undefined ? undefined : ifNotLarger(node, out, ctx);
}

function withinPeriod(x: UOp, c: number): UOp | undefined {
  const k = Math.floor(x.vmin / c);
  if (k !== Math.floor(x.vmax / c) || !Number.isSafeInteger(k * c)) return undefined;
  return k === 0 ? x : x.add(-k * c);
}

/**
 * (sum // c1) % c2 in one step, judged by the size of the end result: the division alone can grow the
 * expression (a new constant c/c1) where the remainder then removes a term, as unflattening an index does.
 */
function divideThenMod(
  x: UOp,
  c1: number,
  c2: number,
  node: UOp,
  ctx: SimplifyCtx | undefined,
): UOp | undefined {
  const q = dividedSum(x, c1);
  const r = q && (reducedMod(q, c2) ?? q.mod(c2));
  const out = r?.op === Ops.MOD ? (withinPeriod(r.src[0]!, c2) ?? r) : r;
  return out === undefined ? undefined : ifNotLarger(node, out, ctx);
}

/**
 * x as g*y + z, with g > 1 a factor of c that some of x's coefficients share and z within [0, g): then
 * x % c is g*(y % (c/g)) + z and x // c is y // (c/g). A reshape's offset merged with a window's reads so,
 * (i*2n + r) % (2n*n) with r < n, where no coefficient is a multiple of c and modSum cannot help.
 */
function splitByFactor(x: UOp, c: number): { g: number; y: UOp; z: UOp } | undefined {
  if (!unwrapped(x)) return undefined;
  const sum = flatten(x);
  if (sum === undefined) return undefined;
  const factors = [...new Set(sum.coefs.map((k) => gcd(k, c)))].filter((g) => g > 1).sort((a, b) => b - a);
  for (const g of factors) {
    const y: Sum = { terms: [], coefs: [], konst: floorDiv(sum.konst, g), changed: true };
    const z: Sum = { terms: [], coefs: [], konst: floorMod(sum.konst, g), changed: true };
    sum.terms.forEach((t, i) => {
      const k = sum.coefs[i]!;
      const into = k % g === 0 ? y : z;
      into.terms.push(t);
      into.coefs.push(k % g === 0 ? k / g : k);
    });
    if (y.terms.length === 0) continue;
    const [yu, zu] = [build(x, y), build(x, z)];
    // a part of a sum can wrap where the whole did not
    if (zu.vmin >= 0 && zu.vmax < g && unwrapped(yu) && unwrapped(zu)) return { g, y: yu, z: zu };
  }
  return undefined;
}

function modByFactor(x: UOp, c: number, node: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const s = splitByFactor(x, c);
  if (s === undefined) return undefined;
  const high = s.y.mod(c / s.g).mul(s.g);
  const out = s.z.op === Ops.CONST && s.z.constValue === 0 ? high : high.add(s.z);
  return ifNotLarger(node, out, ctx);
}

function divideByFactor(x: UOp, c: number, node: UOp, ctx: SimplifyCtx | undefined): UOp | undefined {
  const s = splitByFactor(x, c);
  return s === undefined ? undefined : ifNotLarger(node, s.y.idiv(c / s.g), ctx);
}

/** max(s + a, s + b) of one sum s: the larger constant decides (bounds that a window and a pad both put). */
function maxOfShifted(x: UOp, y: UOp): UOp | undefined {
  if (!unwrapped(x) || !unwrapped(y)) return undefined;
  const [a, b] = [flatten(x), flatten(y)];
  if (a === undefined || b === undefined || a.terms.length !== b.terms.length) return undefined;
  const coef = new Map(a.terms.map((t, i) => [t, a.coefs[i]!]));
  if (!b.terms.every((t, i) => coef.get(t) === b.coefs[i])) return undefined;
  return a.konst >= b.konst ? x : y;
}

function gcd(a: number, b: number): number {
  a = Math.abs(a);
  b = Math.abs(b);
  while (b) [a, b] = [b, a % b];
  return a;
}

const x = intVar('x');
const y = intVar('y');
const c1 = UPat.cvar('c1');
const c2 = UPat.cvar('c2');
const anyX = UPat.var('x');
const ux = unwrappedVar('x');

const ifSafe = (k: number, f: (k: number) => UOp | undefined) => (safe(k) ? f(k) : undefined);

/** x < k with k held exactly by x's dtype. */
function fitsConst(x: UOp, k: number): UOp | undefined {
  return safe(k) && k >= x.dtype.min && k <= x.dtype.max ? x.lt(k) : undefined;
}
/** (x // a) // b = x // (a*b) for positive a, b when a*b fits the dtype. */
function divideTwice(x: UOp, ab: number): UOp | undefined {
  return safe(ab) && ab <= x.dtype.max ? x.idiv(ab) : undefined;
}

/** The simplifier's rules, in the order they are tried. */
export const symbolic = new PatternMatcher<SimplifyCtx | undefined>([
  // every operand constant: compute it
  [new UPat({ op: [...ALU], src: UPat.cvar(), name: 'a' }), ({ a }) => foldConstants(a!)],
  // an integer whose interval is one point (decided comparisons, x*0, x%1, dropped // and %)
  [new UPat({ op: [...ALU], name: 'a' }), ({ a }) => foldInterval(a!)],
  // identities
  [anyX.mul(1), ({ x }) => x],
  [new UPat({ name: 'x', where: isIntLike }).add(0), ({ x }) => x],
  [x.idiv(1), ({ x }) => x],
  [x.idiv(-1), ({ x }) => x!.mul(-1)],
  [new UPat({ op: [Ops.AND, Ops.OR, Ops.MAX], src: [anyX, anyX] }), ({ x }) => x],
  // x < x and x != x are false for integers (not for floats: NaN != NaN)
  [
    new UPat({ op: [Ops.CMPLT, Ops.CMPNE], src: [new UPat({ name: 'x', where: isIntLike }), anyX] }),
    () => UOp.const(dtypes.bool, false),
  ],
  [new UPat({ op: Ops.WHERE, src: [UPat.var(), anyX, anyX] }), ({ x }) => x],
  [
    new UPat({ op: Ops.WHERE, src: [UPat.cvar('c'), UPat.var('a'), UPat.var('b')] }),
    ({ c, a, b }) => (c!.constValue ? a : b),
  ],
  [
    UPat.var('c', dtypes.bool).where(UPat.const(true, dtypes.bool), UPat.const(false, dtypes.bool)),
    ({ c }) => c,
  ],
  // booleans: double negation, x != false, x & true
  [UPat.var('x', dtypes.bool).ne(true).ne(true), ({ x }) => x],
  [UPat.var('x', dtypes.bool).ne(false), ({ x }) => x],
  [UPat.var('x', dtypes.bool).and(true), ({ x }) => x],
  // max decided by intervals
  [
    new UPat({ op: Ops.MAX, src: [x, y] }),
    ({ x, y }) => (x!.vmin >= y!.vmax ? x : x!.vmax <= y!.vmin ? y : undefined),
  ],
  [new UPat({ op: Ops.MAX, src: [x, y] }), ({ x, y }) => maxOfShifted(x!, y!)],
  // constants move outward: (x*c1)*c2 -> x*(c1*c2), (x+c1)*c2 -> x*c2 + c1*c2
  [x.mul(c1).mul(c2), ({ x, c1, c2 }) => ifSafe(cval(c1!) * cval(c2!), (k) => x!.mul(k))],
  [
    x.add(c1).mul(c2).named('n'),
    ({ x, c1, c2, n }, ctx) => ifSafe(cval(c1!) * cval(c2!), (k) => ifNotLarger(n!, x!.mul(c2!).add(k), ctx)),
  ],
  // sums: like terms collect, constants fold and go last, x//c*c + x%c recombines to x
  [new UPat({ op: Ops.ADD, name: 'a', where: isInt }), ({ a }, ctx) => simplifySum(a!, ctx)],
  // floor division and remainder by a positive constant
  [x.idiv(posConst('c1')).idiv(posConst('c2')), ({ x, c1, c2 }) => divideTwice(x!, cval(c1!) * cval(c2!))],
  [
    new UPat({ op: Ops.IDIV, src: [x, posConst('c')], name: 'n' }),
    ({ x, c, n }, ctx) => divideSum(x!, cval(c!), n!, ctx),
  ],
  [
    new UPat({ op: Ops.IDIV, src: [x, posConst('c')], name: 'n' }),
    ({ x, c, n }, ctx) => divideByFactor(x!, cval(c!), n!, ctx),
  ],
  [
    x.idiv(posConst('c1')).mod(posConst('c2')).named('n'),
    ({ x, c1, c2, n }, ctx) => divideThenMod(x!, cval(c1!), cval(c2!), n!, ctx),
  ],
  [
    x.mod(posConst('c1')).mod(posConst('c2')),
    ({ x, c1, c2 }) => (cval(c1!) % cval(c2!) === 0 ? x!.mod(c2!) : undefined),
  ],
  [
    new UPat({ op: Ops.MOD, src: [x, posConst('c')], name: 'n' }),
    ({ x, c, n }, ctx) => modByRange(x!, cval(c!), n!, ctx),
  ],
  [
    new UPat({ op: Ops.MOD, src: [x, posConst('c')], name: 'n' }),
    ({ x, c, n }, ctx) => modSum(x!, cval(c!), n!, ctx),
  ],
  [
    new UPat({ op: Ops.MOD, src: [x, posConst('c')], name: 'n' }),
    ({ x, c, n }, ctx) => modByFactor(x!, cval(c!), n!, ctx),
  ],
  // comparisons against constants: move the constant across
  [
    ux.add(c1).named('s').lt(c2),
    ({ x, s, c1, c2 }) => (unwrapped(s!) ? fitsConst(x!, cval(c2!) - cval(c1!)) : undefined),
  ],
  [
    ux.mul(posConst('c1')).named('s').lt(c2),
    ({ x, s, c1, c2 }) => (unwrapped(s!) ? x!.lt(Math.ceil(cval(c2!) / cval(c1!))) : undefined),
  ],
  [ux.idiv(posConst('c1')).lt(c2), ({ x, c1, c2 }) => fitsConst(x!, cval(c2!) * cval(c1!))],
]);

/**
 * A kernel graph at a fixed point of the symbolic rules (without simplify's count of uses: rewrites are weighed
 * by the rewritten node's own graph). A pure rewrite: each node keeps its simplified form, which later passes and
 * kernels that share the node (index arithmetic over equal ranges) take without a walk.
 */
export const simplifyGraph = (u: UOp, name: string): UOp =>
  graphRewrite(u, symbolic, { name, ctx: {}, pure: true });

/** Simplifies u to a fixed point of the symbolic rules. */
export function simplify(u: UOp): UOp {
  const uses = countUses(u);
  return graphRewrite(u, symbolic, {
    name: 'symbolic',
    ctx: { uses },
    onReplace: (from, to) => uses.set(to, (uses.get(to) ?? 0) + (uses.get(from) ?? 0)),
  });
}

uopHooks.simplify = simplify;
