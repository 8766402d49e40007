// Pattern rewriting: UPat (patterns over UOps), PatternMatcher (rule tables), graphRewrite (fixed point).
import type { ConstValue, DType } from '../dtype.ts';
import { DEBUG } from '../helpers.ts';
import { GroupOp, OP_COUNT, Ops, opName } from './ops.ts';
import type { UOp } from './uop.ts';

/** Named captures of a match: `({ x, c }) => ...`. */
export type Captures = Record<string, UOp>;
export type RewriteFn<C> = (m: Captures, ctx: C) => UOp | undefined | null;

// A compiled pattern matches u, binds names in m, then calls k to match the rest of the enclosing
// pattern; on failure it unbinds what it bound. Continuations make the search complete: a later
// conflict can send an earlier any-order match back to try its other orders.
type Cont = () => boolean;
type Matcher = (u: UOp, b: Bindings, k: Cont) => boolean;
const accept: Cont = () => true;

// While matching, names are bound in numbered slots of one shared array (cheaper than adding and deleting
// object keys); a successful match copies its names into a fresh Captures object and clears its slots.
type Bindings = (UOp | undefined)[];
const bindings: Bindings = [];
const slots = new Map<string, number>();
function slotOf(name: string): number {
  let slot = slots.get(name);
  if (slot === undefined) slots.set(name, (slot = slots.size));
  return slot;
}

/** The names a pattern binds, with their slots. */
function namesOf(p: UPat, out = new Map<string, number>()): Map<string, number> {
  if (p.opts.name !== undefined) out.set(p.opts.name, slotOf(p.opts.name));
  const src = p.opts.src;
  if (src instanceof UPat) namesOf(src, out);
  else for (const x of src ?? []) namesOf(x, out);
  if (p instanceof AnyUPat) for (const a of p.alts) namesOf(a, out);
  return out;
}

/** Set while a match runs: a predicate that itself rewrites (re-entry) gets its own slots. */
let matching = false;

function takeCaptures(names: ReadonlyMap<string, number>, b: Bindings): Captures {
  const m: Captures = {};
  for (const [name, slot] of names) {
    const u = b[slot];
    if (u === undefined) continue; // a name in an alternative that did not match
    m[name] = u;
    b[slot] = undefined;
  }
  return m;
}

/** Runs a compiled pattern on u; the captures, or undefined. */
function runMatch(match: Matcher, names: ReadonlyMap<string, number>, u: UOp): Captures | undefined {
  const reentered = matching;
  const b = reentered ? [] : bindings;
  matching = true;
  try {
    return match(u, b, accept) ? takeCaptures(names, b) : undefined;
  } finally {
    matching = reentered;
  }
}

export interface UPatOptions {
  /** One op or a set of ops; omitted: any op. */
  op?: Ops | readonly Ops[];
  dtype?: DType | readonly DType[];
  /** An array matches the sources in order; one UPat matches every source (any number of them). */
  src?: readonly UPat[] | UPat;
  /** With an array `src`, also try the sources in every other order (for commutative ops). */
  anyOrder?: boolean;
  /** With an array `src`, allow extra sources after the listed ones. */
  allowMore?: boolean;
  /** The arg must equal this (deep equality). */
  arg?: unknown;
  /** Capture the node under this name; a name used twice must bind the same node. */
  name?: string;
  /** An extra test on the node. */
  where?: (u: UOp) => boolean;
}

export class UPat {
  readonly ops: ReadonlySet<Ops> | undefined;
  readonly opts: UPatOptions;
  private compiled: Matcher | undefined;
  private names: ReadonlyMap<string, number> | undefined;

  constructor(opts: UPatOptions = {}) {
    this.opts = opts;
    this.ops = opts.op === undefined ? undefined : new Set(typeof opts.op === 'number' ? [opts.op] : opts.op);
  }

  /** Any node. */
  static var(name?: string, dtype?: DType | readonly DType[]): UPat {
    return new UPat({ name, dtype });
  }
  /** A CONST. */
  static cvar(name?: string, dtype?: DType | readonly DType[]): UPat {
    return new UPat({ op: Ops.CONST, name, dtype });
  }
  /** A CONST with this value (of any dtype when dtype is omitted). */
  static const(value: ConstValue, dtype?: DType, name?: string): UPat {
    return new UPat({
      op: Ops.CONST,
      dtype,
      name,
      where: (u) => sameValue(u.argOf(Ops.CONST).value, value),
    });
  }
  static op(op: Ops | readonly Ops[], src?: readonly UPat[] | UPat, name?: string): UPat {
    return new UPat({ op, src, name });
  }
  /** The first of several patterns that matches. */
  static any(...alts: UPat[]): UPat {
    return new AnyUPat(alts);
  }

  named(name: string): UPat {
    return new UPat({ ...this.opts, name });
  }

  // Builders mirroring UOp's arithmetic; commutative ops match their sources in either order.
  private bin(op: Ops, y: UPat | ConstValue): UPat {
    const other = y instanceof UPat ? y : UPat.const(y);
    return new UPat({ op, src: [this, other], anyOrder: GroupOp.Commutative.has(op) });
  }
  add(y: UPat | ConstValue): UPat {
    return this.bin(Ops.ADD, y);
  }
  mul(y: UPat | ConstValue): UPat {
    return this.bin(Ops.MUL, y);
  }
  idiv(y: UPat | ConstValue): UPat {
    return this.bin(Ops.IDIV, y);
  }
  mod(y: UPat | ConstValue): UPat {
    return this.bin(Ops.MOD, y);
  }
  maximum(y: UPat | ConstValue): UPat {
    return this.bin(Ops.MAX, y);
  }
  lt(y: UPat | ConstValue): UPat {
    return this.bin(Ops.CMPLT, y);
  }
  ne(y: UPat | ConstValue): UPat {
    return this.bin(Ops.CMPNE, y);
  }
  and(y: UPat | ConstValue): UPat {
    return this.bin(Ops.AND, y);
  }
  or(y: UPat | ConstValue): UPat {
    return this.bin(Ops.OR, y);
  }
  where(a: UPat, b: UPat): UPat {
    return new UPat({ op: Ops.WHERE, src: [this, a, b] });
  }
  cast(dtype?: DType): UPat {
    return new UPat({ op: Ops.CAST, src: [this], arg: dtype });
  }

  /** Matches u alone; returns the captures, or undefined. */
  match(u: UOp): Captures | undefined {
    return runMatch(this.matcher(), (this.names ??= namesOf(this)), u);
  }

  /** @internal */
  matcher(): Matcher {
    return (this.compiled ??= this.compile());
  }

  protected compile(): Matcher {
    const { dtype, arg, name, where, src, anyOrder, allowMore } = this.opts;
    const ops = this.ops;
    const op1 = ops?.size === 1 ? [...ops][0] : undefined;
    const dts =
      dtype === undefined ? undefined : Array.isArray(dtype) ? (dtype as readonly DType[]) : [dtype as DType];
    const hasArg = 'arg' in this.opts && arg !== undefined;
    const test = (u: UOp): boolean =>
      (op1 !== undefined ? u.op === op1 : ops === undefined || ops.has(u.op)) &&
      (dts === undefined || dts.includes(u.dtype) || dts.includes(u.dtype.base)) &&
      (!hasArg || sameArg(u.arg, arg)) &&
      (where === undefined || where(u));
    const srcs =
      src === undefined ? undefined : src instanceof UPat ? src.matcher() : src.map((p) => p.matcher());
    const matchSrc = buildSrcMatcher(srcs, anyOrder === true, allowMore === true);
    return bindName(name, (u, m, k) => test(u) && matchSrc(u.src, m, k));
  }

  toString(): string {
    const o = this.opts;
    const ops = this.ops === undefined ? 'any' : [...this.ops].map(opName).join('|');
    const src =
      o.src === undefined
        ? ''
        : o.src instanceof UPat
          ? ` [${o.src}...]`
          : ` [${o.src.map(String).join(', ')}]`;
    return `${o.name === undefined ? '' : `${o.name}=`}${ops}${src}`;
  }
}

/** Binds `name` to the node (or checks an earlier binding) around `inner`; unbinds on failure. */
function bindName(name: string | undefined, inner: Matcher): Matcher {
  if (name === undefined) return inner;
  const slot = slotOf(name);
  return (u, b, k) => {
    const prev = b[slot];
    if (prev !== undefined) return prev === u && inner(u, b, k);
    b[slot] = u;
    if (inner(u, b, k)) return true;
    b[slot] = undefined;
    return false;
  };
}

class AnyUPat extends UPat {
  constructor(
    readonly alts: readonly UPat[],
    name?: string,
  ) {
    super({ name });
  }
  protected override compile(): Matcher {
    const ms = this.alts.map((a) => a.matcher());
    return bindName(this.opts.name, (u, m, k) => ms.some((f) => f(u, m, k)));
  }
  // a plain UPat built from this one's (empty) options would match anything
  override named(name: string): UPat {
    return new AnyUPat(this.alts, name);
  }
  override toString(): string {
    return `${this.opts.name === undefined ? '' : `${this.opts.name}=`}any(${this.alts.join(', ')})`;
  }
}

type SrcMatcher = (src: readonly UOp[], b: Bindings, k: Cont) => boolean;

function buildSrcMatcher(
  srcs: Matcher | Matcher[] | undefined,
  anyOrder: boolean,
  allowMore: boolean,
): SrcMatcher {
  if (srcs === undefined) return (_s, _m, k) => k();
  if (!Array.isArray(srcs)) {
    const each = srcs;
    const from = (s: readonly UOp[], i: number, m: Bindings, k: Cont): boolean =>
      i === s.length ? k() : each(s[i]!, m, () => from(s, i + 1, m, k));
    return (s, m, k) => from(s, 0, m, k);
  }
  const n = srcs.length;
  const lenOk = (s: readonly UOp[]) => s.length === n || (allowMore && s.length > n);
  if (!anyOrder || n < 2) return (s, m, k) => lenOk(s) && inOrder(srcs, s, 0, m, k);
  const orders = permutations(srcs);
  return (s, m, k) => lenOk(s) && orders.some((ps) => inOrder(ps, s, 0, m, k));
}

// The hot loop of matching: a top-level function, as a named closure made per call costs a name definition
// under tsx (esbuild's keepNames); the last source matches straight into k.
function inOrder(ps: readonly Matcher[], s: readonly UOp[], i: number, m: Bindings, k: Cont): boolean {
  if (i === ps.length) return k();
  if (i === ps.length - 1) return ps[i]!(s[i]!, m, k);
  return ps[i]!(s[i]!, m, () => inOrder(ps, s, i + 1, m, k));
}

function permutations<T>(xs: readonly T[]): T[][] {
  if (xs.length <= 1) return [xs.slice()];
  const out: T[][] = [];
  xs.forEach((x, i) => {
    for (const rest of permutations([...xs.slice(0, i), ...xs.slice(i + 1)])) out.push([x, ...rest]);
  });
  return out;
}

function sameValue(a: ConstValue, b: ConstValue): boolean {
  return (
    a === b || (typeof a !== typeof b && Number(a) === Number(b)) || (Number.isNaN(a) && Number.isNaN(b))
  );
}

function sameArg(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b))
    return (
      Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameArg(x, b[i]))
    );
  if (typeof a === 'object' && typeof b === 'object' && a !== null && b !== null) {
    const ka = Object.keys(a);
    return (
      ka.length === Object.keys(b).length &&
      ka.every((k) => sameArg((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
    );
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------

interface Rule<C> {
  pat: UPat;
  fn: RewriteFn<C>;
  match: Matcher;
  names: ReadonlyMap<string, number>;
}

/** A table of rules, dispatched by op. Tables compose with `concat`. */
export class PatternMatcher<C = unknown> {
  readonly rules: readonly Rule<C>[];
  private readonly byOp: Rule<C>[][];

  constructor(rules: readonly (readonly [UPat, RewriteFn<C>])[] | readonly Rule<C>[]) {
    this.rules = rules.map((r) =>
      Array.isArray(r)
        ? { pat: r[0], fn: r[1], match: r[0].matcher(), names: namesOf(r[0]) }
        : (r as Rule<C>),
    );
    this.byOp = Array.from({ length: OP_COUNT }, () => []);
    for (const r of this.rules) {
      const ops = r.pat.ops ?? (r.pat instanceof AnyUPat ? unionOps(r.pat.alts) : undefined);
      for (let op = 0; op < OP_COUNT; op++) if (ops === undefined || ops.has(op)) this.byOp[op]!.push(r);
    }
  }

  concat<D>(...others: PatternMatcher<D>[]): PatternMatcher<C & D> {
    return new PatternMatcher<C & D>([
      ...(this.rules as Rule<C & D>[]),
      ...others.flatMap((o) => o.rules as Rule<C & D>[]),
    ]);
  }

  /** The first rule's rewrite of u (rules that give back u or nothing do not count), or undefined. */
  rewrite(u: UOp, ctx: C): UOp | undefined {
    const rules = this.byOp[u.op]!;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      const m = runMatch(r.match, r.names, u);
      if (m === undefined) continue;
      const out = r.fn(m, ctx);
      if (out !== undefined && out !== null && out !== u) return out;
    }
    return undefined;
  }
}

function unionOps(pats: readonly UPat[]): ReadonlySet<Ops> | undefined {
  const out = new Set<Ops>();
  for (const p of pats) {
    const ops = p instanceof AnyUPat ? unionOps(p.alts) : p.ops;
    if (ops === undefined) return undefined;
    for (const o of ops) out.add(o);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------

export interface RewriteOptions<C> {
  ctx?: C;
  /** Match a node (to a fixed point) before its sources are visited; default: after its sources. */
  bottomUp?: boolean;
  /** The pass's name, for DEBUG output and tracing. */
  name?: string;
  /** Told each time a node of the graph is replaced by its (final) rewrite. */
  onReplace?: (from: UOp, to: UOp) => void;
  /**
   * The rules read nothing but the node they match (not ctx, not the order of rewrites), so a node's rewrite is
   * the same in every graph: each node remembers it, and later pure rewrites with the same table (other passes,
   * other kernels with the same index arithmetic) take it without a walk.
   */
  pure?: boolean;
}

/** Called after each named pass (for a visualizer); set with `setRewriteTracer`. */
export type RewriteTracer = (name: string, before: UOp, after: UOp) => void;
let tracer: RewriteTracer | undefined;
export function setRewriteTracer(t: RewriteTracer | undefined): void {
  tracer = t;
}

const MAX_REWRITES_PER_NODE = 10_000;

/** Rewrites `root` until no rule applies anywhere, without recursion. */
export function graphRewrite<C>(root: UOp, pm: PatternMatcher<C>, opts: RewriteOptions<C> = {}): UOp {
  const ctx = opts.ctx as C;
  const name = opts.name ?? 'rewrite';
  const t0 = DEBUG.value >= 5 ? performance.now() : 0;
  const done = new Map<UOp, UOp>();
  // A frame rewrites `node`. Stage 0: (bottom-up: match it) and visit its sources. Stage 1: rebuild it
  // from rewritten sources and match it. Stage 2: it became `next`; its result is next's result.
  const nodes: UOp[] = [root];
  const cur: UOp[] = [root];
  const stage: number[] = [0];
  const next: (UOp | undefined)[] = [undefined];
  // Two started frames of one node mean its result depends on itself: with deterministic rules the stack
  // would grow forever. The stack is scanned for that each time its depth doubles (amortized O(1) a push).
  let checkAt = 1 << 16;
  const checkCycle = () => {
    const started = new Set<UOp>();
    for (let i = 0; i < nodes.length; i++) {
      if (stage[i] === 0) continue;
      const u = nodes[i]!;
      if (started.has(u))
        throw new Error(
          `graphRewrite ${name}: no fixed point: a ${opName(u.op)} is rewritten into a graph that needs it`,
        );
      started.add(u);
    }
    checkAt = nodes.length * 2;
  };
  const push = (u: UOp) => {
    nodes.push(u);
    cur.push(u);
    stage.push(0);
    next.push(undefined);
    if (nodes.length >= checkAt) checkCycle();
  };
  const onReplace = opts.onReplace;
  const pure = opts.pure === true;
  const pop = () => {
    nodes.pop();
    cur.pop();
    stage.pop();
    next.pop();
  };
  const finish = (u: UOp, result: UOp) => {
    if (onReplace !== undefined && u !== result && !done.has(u)) onReplace(u, result);
    if (pure) {
      u._rewrittenBy = result._rewrittenBy = pm;
      u._rewritten = result;
      result._rewritten = result;
    }
    done.set(u, result);
    if (result !== u) done.set(result, result);
    pop();
  };
  while (nodes.length) {
    const top = nodes.length - 1;
    const n = nodes[top]!;
    const st = stage[top]!;
    if (st === 0 && pure && n._rewrittenBy === pm) {
      finish(n, n._rewritten!);
      continue;
    }
    // (another frame of the same node finished first)
    if (st !== 2 && done.has(n)) {
      pop();
      continue;
    }
    if (st === 0) {
      let u = n;
      if (opts.bottomUp) u = fixedPoint(u, pm, ctx, name);
      cur[top] = u;
      stage[top] = 1;
      for (let i = u.src.length - 1; i >= 0; i--) if (!done.has(u.src[i]!)) push(u.src[i]!);
    } else if (st === 1) {
      const u = cur[top]!;
      // a new source list only once a source changed: most nodes a pass visits keep theirs
      const fresh = u.withSourcesFrom(done);
      const rebuilt = fresh !== u ? fresh : opts.bottomUp ? undefined : pm.rewrite(u, ctx);
      if (rebuilt === undefined) finish(n, u);
      else {
        stage[top] = 2;
        next[top] = rebuilt;
        push(rebuilt);
      }
    } else finish(n, done.get(next[top]!)!);
  }
  const out = done.get(root)!;
  if (t0) console.log(`graphRewrite ${name}: ${(performance.now() - t0).toFixed(2)} ms`);
  tracer?.(name, root, out);
  return out;
}

function fixedPoint<C>(u: UOp, pm: PatternMatcher<C>, ctx: C, name: string): UOp {
  for (let i = 0; i < MAX_REWRITES_PER_NODE; i++) {
    const r = pm.rewrite(u, ctx);
    if (r === undefined) return u;
    u = r;
  }
  throw new Error(
    `graphRewrite ${name}: no fixed point after ${MAX_REWRITES_PER_NODE} rewrites of ${opName(u.op)}`,
  );
}

/**
 * Replaces nodes by the map, everywhere below root, all at once: only nodes of the original graph are
 * replaced, never nodes inside a replacement, so `x -> x + 1` and swaps (`x -> y, y -> x`) work.
 */
export function substitute(root: UOp, map: ReadonlyMap<UOp, UOp>): UOp {
  if (map.size === 0) return root;
  const result = rebuilt(root.toposort(), map).get(root)!;
  tracer?.('substitute', root, result);
  return result;
}

/** The nodes of `order` (sources first) rebuilt with `map`'s replacements; a source outside `order` stays. */
function rebuilt(order: readonly UOp[], map: ReadonlyMap<UOp, UOp>): Map<UOp, UOp> {
  const out = new Map<UOp, UOp>();
  for (const u of order) {
    const r = map.get(u);
    if (r !== undefined) {
      out.set(u, r);
      continue;
    }
    out.set(u, u.withSourcesFrom(out));
  }
  return out;
}

/**
 * `substitute(root, m)` for each map of `maps`, sharing one walk: only the nodes that reach a key of some map
 * are rebuilt per map (expand's copies of a loop body differ in their ranges and what uses them).
 */
export function substituteEach(root: UOp, maps: readonly ReadonlyMap<UOp, UOp>[]): UOp[] {
  const keys = new Set<UOp>();
  for (const m of maps) for (const k of m.keys()) keys.add(k);
  // the nodes that reach a key, sources first
  const reaching = new Set<UOp>();
  const order: UOp[] = [];
  for (const u of root.toposort()) {
    let reaches = keys.has(u);
    for (let i = 0; i < u.src.length && !reaches; i++) reaches = reaching.has(u.src[i]!);
    if (!reaches) continue;
    reaching.add(u);
    order.push(u);
  }
  return maps.map((m) => {
    if (!reaching.has(root)) return root;
    const result = rebuilt(order, m).get(root)!;
    tracer?.('substitute', root, result);
    return result;
  });
}
