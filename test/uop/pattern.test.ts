// Pattern rewriting: UPat matching, PatternMatcher dispatch and composition, graphRewrite and substitute.
import { afterEach, describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { GroupOp, Ops } from '../../src/uop/ops.ts';
import {
  type Captures,
  graphRewrite,
  PatternMatcher,
  type RewriteFn,
  setRewriteTracer,
  substitute,
  UPat,
} from '../../src/uop/pattern.ts';
import { UOp } from '../../src/uop/uop.ts';

const { int32, int64, float32, index } = dtypes;
// Leaves: variables (their min/max are CONST 0 and CONST 1000, so rules below avoid those values).
const x = UOp.variable('x', 0, 1000);
const y = UOp.variable('y', 0, 1000);
const z = UOp.variable('z', 0, 1000);
const ic = (v: number) => UOp.const(index, v);
const f = UOp.param(0, float32, [2, 3]);

/** A UPat whose compiled matcher counts its calls, to observe dispatch. */
class SpyPat extends UPat {
  calls = 0;
  override matcher(): ReturnType<UPat['matcher']> {
    const inner = super.matcher();
    return (u, m, k) => {
      this.calls++;
      return inner(u, m, k);
    };
  }
}

const keys = (m: Captures | undefined) => (m === undefined ? undefined : Object.keys(m).sort());
const ops = (root: UOp) => root.toposort().map((u) => u.op);

afterEach(() => setRewriteTracer(undefined));

describe('UPat: op, dtype, arg', () => {
  it('matches by one op and by a set of ops', () => {
    expect(UPat.op(Ops.ADD).match(x.add(y))).toEqual({});
    expect(UPat.op(Ops.ADD).match(x.mul(y))).toBeUndefined();
    const addOrMul = UPat.op([Ops.ADD, Ops.MUL]);
    expect(addOrMul.match(x.add(y))).toBeDefined();
    expect(addOrMul.match(x.mul(y))).toBeDefined();
    expect(addOrMul.match(x.maximum(y))).toBeUndefined();
    const binary = new UPat({ op: [...GroupOp.Binary] });
    expect(binary.match(x.idiv(y))).toBeDefined();
    expect(binary.match(x)).toBeUndefined();
    // no op: anything
    expect(UPat.var('v').match(x)).toEqual({ v: x });
    expect(UPat.var('v').match(ic(5))).toEqual({ v: ic(5) });
  });

  it('matches by dtype, a list of dtypes, and a vector dtype by its base', () => {
    const c32 = UOp.const(int32, 3);
    const cf = UOp.const(float32, 3);
    expect(UPat.var('v', int32).match(c32)).toEqual({ v: c32 });
    expect(UPat.var('v', int32).match(cf)).toBeUndefined();
    expect(UPat.var('v', int32).match(UOp.const(int64, 3))).toBeUndefined();
    expect(UPat.var('v', [int64, float32]).match(cf)).toBeDefined();
    expect(UPat.var('v', [int64, float32]).match(c32)).toBeUndefined();
    const vec = UOp.const(float32.vec(4), 1);
    expect(vec.dtype).toBe(float32.vec(4));
    expect(UPat.var('v', float32).match(vec)).toBeDefined();
    expect(UPat.var('v', float32.vec(4)).match(vec)).toBeDefined();
    // but not the other way round, nor another width
    expect(UPat.var('v', float32.vec(4)).match(cf)).toBeUndefined();
    expect(UPat.var('v', float32.vec(2)).match(vec)).toBeUndefined();
    expect(UPat.var('v', int32).match(vec)).toBeUndefined();
  });

  it('matches by arg with deep equality', () => {
    const perm = f.permute([1, 0]);
    expect(new UPat({ op: Ops.PERMUTE, arg: [1, 0] }).match(perm)).toBeDefined();
    expect(new UPat({ op: Ops.PERMUTE, arg: [0, 1] }).match(perm)).toBeUndefined();
    expect(new UPat({ op: Ops.PERMUTE, arg: [1, 0, 2] }).match(perm)).toBeUndefined();
    // an array-like object is not an array
    expect(new UPat({ op: Ops.PERMUTE, arg: { 0: 1, 1: 0 } }).match(perm)).toBeUndefined();
    const red = f.reduce(Ops.ADD, [0]);
    expect(new UPat({ arg: { op: Ops.ADD, axes: [0] } }).match(red)).toBeDefined();
    expect(new UPat({ arg: { axes: [0], op: Ops.ADD } }).match(red)).toBeDefined();
    expect(new UPat({ arg: { op: Ops.ADD, axes: [1] } }).match(red)).toBeUndefined();
    expect(new UPat({ arg: { op: Ops.MAX, axes: [0] } }).match(red)).toBeUndefined();
    expect(new UPat({ arg: { op: Ops.ADD } }).match(red)).toBeUndefined();
    expect(new UPat({ arg: { op: Ops.ADD, axes: [0], keep: true } }).match(red)).toBeUndefined();
    // CONST args hold a dtype
    const c = UOp.const(int32, 3);
    expect(new UPat({ op: Ops.CONST, arg: { value: 3, dtype: int32 } }).match(c)).toBeDefined();
    expect(new UPat({ op: Ops.CONST, arg: { value: 3, dtype: int64 } }).match(c)).toBeUndefined();
    expect(new UPat({ op: Ops.CONST, arg: { value: 4, dtype: int32 } }).match(c)).toBeUndefined();
    // DType args (CAST) compare by identity
    const cast = c.cast(float32);
    expect(new UPat({ op: Ops.CAST, arg: float32 }).match(cast)).toBeDefined();
    expect(new UPat({ op: Ops.CAST, arg: dtypes.float16 }).match(cast)).toBeUndefined();
    expect(new UPat({ op: Ops.CAST, arg: dtypes.bfloat16 }).match(c.cast(dtypes.float16))).toBeUndefined();
    expect(UPat.var('v').cast(float32).match(cast)).toEqual({ v: c });
    expect(UPat.var('v').cast(int64).match(cast)).toBeUndefined();
    expect(UPat.var('v').cast().match(cast)).toEqual({ v: c });
    // an omitted arg matches any arg
    expect(new UPat({ op: Ops.PERMUTE }).match(perm)).toBeDefined();
  });

  it('UPat.const matches a value in any dtype unless one is given', () => {
    expect(UPat.const(3).match(UOp.const(int32, 3))).toBeDefined();
    expect(UPat.const(3).match(UOp.const(float32, 3))).toBeDefined();
    expect(UPat.const(3).match(UOp.const(int32, 4))).toBeUndefined();
    expect(UPat.const(3, int32).match(UOp.const(float32, 3))).toBeUndefined();
    expect(UPat.const(3, int32, 'c').match(UOp.const(int32, 3))).toEqual({ c: UOp.const(int32, 3) });
    expect(UPat.const(Number.NaN).match(UOp.const(float32, Number.NaN))).toBeDefined();
    expect(UPat.const(3).match(x)).toBeUndefined();
    expect(UPat.cvar('c').match(ic(7))).toEqual({ c: ic(7) });
    expect(UPat.cvar('c', int32).match(ic(7))).toBeUndefined();
  });

  it('checks where predicates, on the node, after the op test', () => {
    const seen: UOp[] = [];
    const big = new UPat({
      op: Ops.CONST,
      name: 'c',
      where: (u) => {
        seen.push(u);
        return (u.constValue as number) > 5;
      },
    });
    expect(big.match(ic(7))).toEqual({ c: ic(7) });
    expect(big.match(ic(3))).toBeUndefined();
    expect(big.match(x)).toBeUndefined();
    expect(seen).toEqual([ic(7), ic(3)]);
    // inside a larger pattern
    const p = UPat.var('x').add(big);
    expect(p.match(x.add(7))).toEqual({ x, c: ic(7) });
    expect(p.match(x.add(3))).toBeUndefined();
  });
});

describe('UPat: sources', () => {
  it('matches sources in order, with the exact count', () => {
    const p = UPat.op(Ops.CMPLT, [UPat.var('x'), UPat.cvar('c')]);
    expect(p.match(x.lt(3))).toEqual({ x, c: ic(3) });
    expect(p.match(ic(3).lt(x))).toBeUndefined();
    // the lt builder is not commutative
    expect(UPat.var('x').lt(UPat.cvar('c')).match(ic(3).lt(x))).toBeUndefined();
    const two = new UPat({ src: [UPat.var(), UPat.var()] });
    expect(two.match(x.add(y))).toBeDefined();
    expect(two.match(x.lt(1).where(y, z))).toBeUndefined();
    expect(two.match(ic(2).cast(int32))).toBeUndefined();
    expect(new UPat({ src: [] }).match(ic(2))).toBeDefined();
    expect(new UPat({ src: [] }).match(x.add(y))).toBeUndefined();
  });

  it('allowMore accepts extra sources after the listed ones, never fewer', () => {
    const p = new UPat({ op: Ops.SINK, src: [UPat.var('a'), UPat.var('b')], allowMore: true });
    expect(p.match(UOp.sink(x, y))).toEqual({ a: x, b: y });
    expect(p.match(UOp.sink(x, y, z))).toEqual({ a: x, b: y });
    expect(p.match(UOp.sink(x))).toBeUndefined();
    const ordered = new UPat({ op: Ops.SINK, src: [UPat.cvar('c')], allowMore: true });
    expect(ordered.match(UOp.sink(ic(2), x))).toBeDefined();
    expect(ordered.match(UOp.sink(x, ic(2)))).toBeUndefined();
  });

  it('matches any order for commutative ops, with the same captures', () => {
    const p = new UPat({ op: Ops.ADD, src: [UPat.var('x'), UPat.cvar('c')], anyOrder: true });
    expect(p.match(x.add(3))).toEqual({ x, c: ic(3) });
    expect(p.match(ic(3).add(x))).toEqual({ x, c: ic(3) });
    expect(p.match(x.add(y))).toBeUndefined();
    // builders of commutative ops are any-order
    expect(UPat.var('x').mul(UPat.cvar('c')).match(ic(3).mul(x))).toEqual({ x, c: ic(3) });
    expect(UPat.var('x').add(2).match(ic(2).add(x))).toEqual({ x });
    expect(UPat.var('x').add(2).match(ic(3).add(x))).toBeUndefined();
  });

  it('any order tries every permutation of three sources', () => {
    const p = new UPat({
      op: Ops.SINK,
      src: [UPat.cvar('c'), UPat.op(Ops.MUL, undefined, 'm'), UPat.op(Ops.ADD, undefined, 'a')],
      anyOrder: true,
    });
    const a = x.add(y);
    const m = x.mul(y);
    const c = ic(4);
    for (const order of [
      [c, m, a],
      [c, a, m],
      [m, c, a],
      [m, a, c],
      [a, c, m],
      [a, m, c],
    ])
      expect(p.match(UOp.sink(...order))).toEqual({ c, m, a });
    expect(p.match(UOp.sink(a, m, a))).toBeUndefined();
  });

  it('a name used twice binds one node; only the second order matches', () => {
    const xx = UPat.var('x').add(UPat.var('x'));
    expect(xx.match(x.add(x))).toEqual({ x });
    expect(xx.match(x.add(y))).toBeUndefined();
    // x + x*c in either order: for (x*3) + x the first order binds x to x*3 and must undo it
    const p = UPat.var('x').add(UPat.var('x').mul(UPat.cvar('c')));
    expect(p.match(x.mul(3).add(x))).toEqual({ x, c: ic(3) });
    expect(p.match(x.add(x.mul(3)))).toEqual({ x, c: ic(3) });
    expect(p.match(y.mul(3).add(x))).toBeUndefined();
  });

  it('backtracks into a nested any-order match when a later source conflicts', () => {
    // ADD(MUL(x, y) in any order, x) on ADD(MUL(x, y), y): the inner first binds x=x, the outer needs x=y
    const inner = new UPat({ op: Ops.MUL, src: [UPat.var('x'), UPat.var('y')], anyOrder: true });
    const p = UPat.op(Ops.ADD, [inner, UPat.var('x')]);
    expect(p.match(x.mul(y).add(y))).toEqual({ x: y, y: x });
    expect(p.match(x.mul(y).add(x))).toEqual({ x, y });
    expect(p.match(x.mul(y).add(z))).toBeUndefined();
    // the same with the outer any-order too, the MUL second
    const q = new UPat({ op: Ops.ADD, src: [inner, UPat.var('x')], anyOrder: true });
    expect(q.match(y.add(x.mul(y)))).toEqual({ x: y, y: x });
    // two levels down: the conflict is found at the root's last source
    const deep = UPat.op(Ops.SINK, [
      new UPat({ op: Ops.ADD, src: [inner, UPat.var('w')], anyOrder: true }),
      UPat.var('w'),
      UPat.var('y'),
    ]);
    expect(deep.match(UOp.sink(z.add(x.mul(y)), z, x))).toEqual({ x: y, y: x, w: z });
    expect(deep.match(UOp.sink(z.add(x.mul(y)), z, y))).toEqual({ x, y, w: z });
    expect(deep.match(UOp.sink(z.add(x.mul(y)), z, z))).toBeUndefined();
  });

  it('one UPat as src matches every source, any number of them', () => {
    const consts = UPat.op(Ops.SINK, UPat.cvar());
    expect(consts.match(UOp.sink(ic(1), ic(2), ic(3)))).toBeDefined();
    expect(consts.match(UOp.sink(ic(1)))).toBeDefined();
    expect(consts.match(UOp.sink())).toBeDefined();
    expect(consts.match(UOp.sink(ic(1), x, ic(3)))).toBeUndefined();
    // a name in the repeated pattern binds every source to the same node
    const same = UPat.op(Ops.SINK, UPat.var('v'));
    expect(same.match(UOp.sink(x, x, x))).toEqual({ v: x });
    expect(same.match(UOp.sink(x, x, y))).toBeUndefined();
  });

  it('a failed branch leaves no captures behind', () => {
    const p = UPat.any(
      UPat.op(Ops.ADD, [UPat.var('p'), UPat.op(Ops.MUL)]),
      UPat.op(Ops.ADD, [UPat.var('q'), UPat.var('r')]),
    );
    expect(p.match(x.add(y))).toEqual({ q: x, r: y });
    expect(keys(p.match(x.add(y.mul(z))))).toEqual(['p']);
    // an any-order match that fails after binding its first source
    const named = new UPat({ op: Ops.ADD, src: [UPat.var('a'), UPat.const(9)], anyOrder: true, name: 'n' });
    const outer = UPat.any(UPat.op(Ops.SINK, [named]), UPat.op(Ops.SINK, [UPat.var('s')]));
    expect(outer.match(UOp.sink(x.add(y)))).toEqual({ s: x.add(y) });
  });
});

describe('UPat.any', () => {
  it('takes the first alternative that matches, with its captures', () => {
    const p = UPat.any(UPat.cvar('c'), UPat.op(Ops.ADD, [UPat.var('a'), UPat.var('b')]), UPat.var('v'));
    expect(p.match(ic(2))).toEqual({ c: ic(2) });
    expect(p.match(x.add(y))).toEqual({ a: x, b: y });
    expect(p.match(x.mul(y))).toEqual({ v: x.mul(y) });
    expect(UPat.any(UPat.op(Ops.ADD), UPat.op(Ops.MUL)).match(x.maximum(y))).toBeUndefined();
  });

  it('tries the next alternative when a later part of the pattern conflicts', () => {
    // ADD(MUL(x, _) | MUL(_, x), x) on ADD(MUL(x, y), y): only the second alternative agrees
    const p = UPat.op(Ops.ADD, [
      UPat.any(UPat.op(Ops.MUL, [UPat.var('x'), UPat.var()]), UPat.op(Ops.MUL, [UPat.var(), UPat.var('x')])),
      UPat.var('x'),
    ]);
    expect(p.match(x.mul(y).add(y))).toEqual({ x: y });
    expect(p.match(x.mul(y).add(x))).toEqual({ x });
    expect(p.match(x.mul(y).add(z))).toBeUndefined();
  });

  it('named() keeps the alternatives and binds the node', () => {
    const p = UPat.any(UPat.op(Ops.ADD), UPat.op(Ops.MUL)).named('n');
    expect(p.match(x.add(y))).toEqual({ n: x.add(y) });
    expect(p.match(x.mul(y))).toEqual({ n: x.mul(y) });
    expect(p.match(ic(1))).toBeUndefined();
    // the name takes part in consistency checks
    const twice = UPat.op(Ops.SINK, [p, UPat.var('n')]);
    expect(twice.match(UOp.sink(x.add(y), x.add(y)))).toBeDefined();
    expect(twice.match(UOp.sink(x.add(y), x.mul(y)))).toBeUndefined();
    // and it still dispatches only on ADD and MUL
    let calls = 0;
    const pm = new PatternMatcher([
      [
        p,
        () => {
          calls++;
          return undefined;
        },
      ],
    ]);
    pm.rewrite(x.maximum(y), undefined);
    pm.rewrite(x.add(y), undefined);
    expect(calls).toBe(1);
  });

  it('named() keeps the other options of a plain UPat', () => {
    const p = UPat.var('x').add(UPat.cvar('c')).named('s');
    expect(p.match(ic(3).add(x))).toEqual({ s: ic(3).add(x), x, c: ic(3) });
    expect(p.match(x.mul(3))).toBeUndefined();
  });

  it('prints patterns readably', () => {
    const s = String(UPat.var('x').add(UPat.cvar('c')).named('s'));
    expect(s).toContain('s=ADD');
    expect(s).toContain('c=CONST');
    expect(String(UPat.any(UPat.op(Ops.ADD), UPat.op(Ops.MUL)))).toBe('any(ADD, MUL)');
  });
});

describe('PatternMatcher', () => {
  it('dispatches by op: a rule for ADD never runs its matcher on MUL', () => {
    const addPat = new SpyPat({ op: Ops.ADD, name: 'a' });
    const anyPat = new SpyPat({ name: 'u' });
    const altA = new SpyPat({ op: Ops.MAX });
    const altB = new SpyPat({ op: Ops.CMPLT });
    const pm = new PatternMatcher<undefined>([
      [addPat, () => ic(1)],
      [UPat.any(altA, altB), () => ic(2)],
      [anyPat, () => undefined],
    ]);
    expect(pm.rewrite(x.mul(y), undefined)).toBeUndefined();
    expect(addPat.calls).toBe(0);
    expect(altA.calls + altB.calls).toBe(0);
    expect(anyPat.calls).toBe(1);
    expect(pm.rewrite(x.add(y), undefined)).toBe(ic(1));
    expect(addPat.calls).toBe(1);
    // UPat.any dispatches on the union of its alternatives' ops, then tries them in order
    expect(pm.rewrite(x.lt(y), undefined)).toBe(ic(2));
    expect(altA.calls).toBe(1);
    expect(altB.calls).toBe(1);
    expect(anyPat.calls).toBe(1);
  });

  it('first matching rule wins; later rules run when earlier ones do not match', () => {
    const pm = new PatternMatcher([
      [UPat.var('x').add(UPat.const(0)), ({ x }) => x!],
      [UPat.var('x').add(UPat.var('y')), () => ic(99)],
    ]);
    expect(pm.rewrite(x.add(0), undefined)).toBe(x);
    expect(pm.rewrite(x.add(y), undefined)).toBe(ic(99));
    const swapped = new PatternMatcher([pm.rules[1]!, pm.rules[0]!]);
    expect(swapped.rewrite(x.add(0), undefined)).toBe(ic(99));
  });

  it('a rule giving undefined, null or the same node does not count', () => {
    const tried: string[] = [];
    const rule =
      (label: string, out: (u: UOp) => UOp | undefined | null): RewriteFn<unknown> =>
      ({ u }) => {
        tried.push(label);
        return out(u!);
      };
    const u = new UPat({ op: Ops.ADD, name: 'u' });
    const pm = new PatternMatcher([
      [u, rule('undefined', () => undefined)],
      [u, rule('null', () => null)],
      [u, rule('same', (n) => n)],
      [u, rule('last', () => ic(5))],
    ]);
    expect(pm.rewrite(x.add(y), undefined)).toBe(ic(5));
    expect(tried).toEqual(['undefined', 'null', 'same', 'last']);
    const none = new PatternMatcher([[u, rule('same', (n) => n)]]);
    expect(none.rewrite(x.add(y), undefined)).toBeUndefined();
    // graphRewrite stops too
    expect(graphRewrite(x.add(y), none)).toBe(x.add(y));
  });

  it('concat composes tables and keeps their order', () => {
    const a = new PatternMatcher([[UPat.op(Ops.ADD), () => ic(1)]]);
    const b = new PatternMatcher([
      [UPat.op(Ops.ADD), () => ic(2)],
      [UPat.op(Ops.MUL), () => ic(3)],
    ]);
    const c = new PatternMatcher([[UPat.op([Ops.MUL, Ops.MAX]), () => ic(4)]]);
    const abc = a.concat(b, c);
    expect(abc.rewrite(x.add(y), undefined)).toBe(ic(1));
    expect(abc.rewrite(x.mul(y), undefined)).toBe(ic(3));
    expect(abc.rewrite(x.maximum(y), undefined)).toBe(ic(4));
    expect(abc.rules.length).toBe(4);
    const ba = b.concat(a);
    expect(ba.rewrite(x.add(y), undefined)).toBe(ic(2));
    const ca = c.concat(a, b);
    expect(ca.rewrite(x.mul(y), undefined)).toBe(ic(4));
    // the parts are unchanged
    expect(a.rules.length).toBe(1);
    expect(a.rewrite(x.mul(y), undefined)).toBeUndefined();
  });

  it('passes ctx to rules', () => {
    interface Ctx {
      seen: UOp[];
      bump: number;
    }
    const pm = new PatternMatcher<Ctx>([
      [
        UPat.cvar('c', index),
        ({ c }, ctx) => {
          ctx.seen.push(c!);
          const v = c!.constValue as number;
          return v === 5 ? ic(v + ctx.bump) : undefined;
        },
      ],
    ]);
    const ctx: Ctx = { seen: [], bump: 10 };
    expect(pm.rewrite(ic(5), ctx)).toBe(ic(15));
    expect(ctx.seen).toEqual([ic(5)]);
    const out = graphRewrite(x.add(5), pm, { ctx: { seen: [], bump: 20 } });
    expect(out).toBe(x.add(25));
    const ctx2: Ctx = { seen: [], bump: 1 };
    graphRewrite(x.add(5), pm, { ctx: ctx2 });
    // CONST 0 and 1000 inside x, then 5, then the new 6
    expect(new Set(ctx2.seen)).toEqual(new Set([ic(0), ic(1000), ic(5), ic(6)]));
  });

  it('a table of hundreds of rules dispatches each node to the right rule', () => {
    const binops = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.IDIV, Ops.MOD];
    const rules: [UPat, RewriteFn<unknown>][] = [];
    const marks = new Map<string, UOp>();
    for (let i = 0; i < 300; i++) {
      const op = binops[i % binops.length]!;
      const k = 2000 + i;
      // rule i: OP(x, CONST k) -> CONST(10000 + i)
      const out = ic(10000 + i);
      rules.push([UPat.op(op, [UPat.var('x'), UPat.const(k)]), () => out]);
      marks.set(`${op}:${k}`, out);
    }
    // a catch-all that must never win over a specific rule, and a shadowed duplicate of rule 0
    rules.push([UPat.op(binops), () => ic(-1)]);
    rules.push([UPat.op(Ops.ADD, [UPat.var('x'), UPat.const(2000)]), () => ic(-2)]);
    const pm = new PatternMatcher(rules);
    expect(pm.rules.length).toBe(302);
    for (let i = 0; i < 300; i++) {
      const op = binops[i % binops.length]!;
      const k = 2000 + i;
      expect(pm.rewrite(x.alu(op, k), undefined)).toBe(marks.get(`${op}:${k}`));
      // the same constant under another op falls through to the catch-all
      const other = binops[(i + 1) % binops.length]!;
      expect(pm.rewrite(x.alu(other, k), undefined)).toBe(ic(-1));
    }
    expect(pm.rewrite(x.cast(float32), undefined)).toBeUndefined();
  });
});

describe('graphRewrite', () => {
  // CONST 1 -> 2 -> 3; MAX(a, b) -> a + 1; ADD(a, 3) -> MUL(a, 3)
  const chain = new PatternMatcher([
    [UPat.const(1, index), () => ic(2)],
    [UPat.const(2, index), () => ic(3)],
    [UPat.var('a').maximum(UPat.var('b')), ({ a }) => a!.add(1)],
    [UPat.op(Ops.ADD, [UPat.var('a'), UPat.const(3)]), ({ a }) => a!.mul(3)],
  ]);

  it('returns the root itself when nothing matches', () => {
    const root = x.add(y).mul(z);
    expect(graphRewrite(root, chain)).toBe(root);
    expect(graphRewrite(root, chain, { bottomUp: true })).toBe(root);
  });

  it('rewrites sources first, then rebuilds and rewrites users, to a fixed point', () => {
    // x + 1: the CONST becomes 3 (two rules), the rebuilt ADD(x, 3) becomes MUL(x, 3)
    expect(graphRewrite(x.add(1), chain)).toBe(x.mul(3));
    // a rule's output is rewritten too, including the new nodes inside it
    expect(graphRewrite(x.maximum(y), chain)).toBe(x.mul(3));
    expect(graphRewrite(UOp.sink(x.maximum(y), y.add(2)), chain)).toBe(UOp.sink(x.mul(3), y.mul(3)));
    // bottomUp mode also takes every node, and every node a rule makes, to a fixed point
    expect(graphRewrite(x.add(1), chain, { bottomUp: true })).toBe(x.mul(3));
    expect(graphRewrite(x.maximum(y), chain, { bottomUp: true })).toBe(x.mul(3));
  });

  it('visits each node after its sources by default, before them in bottomUp mode', () => {
    const logger = (order: UOp[], p: UPat) =>
      new PatternMatcher([
        [
          p,
          ({ u }) => {
            order.push(u!);
            return undefined;
          },
        ],
      ]);
    // default mode: every node once, after all of its sources, also in a DAG
    const dag = UOp.sink(x.add(y).mul(z), x.add(y).maximum(ic(7)));
    const order: UOp[] = [];
    expect(graphRewrite(dag, logger(order, UPat.var('u')))).toBe(dag);
    const all = dag.toposort();
    expect(order.length).toBe(all.length);
    expect(new Set(order).size).toBe(all.length);
    const pos = new Map(order.map((u, i) => [u, i]));
    for (const u of all) for (const s of u.src) expect(pos.get(s)!).toBeLessThan(pos.get(u)!);
    // bottomUp mode: a node before its sources (a tree of ALU nodes, so no source was reached earlier)
    const tree = UOp.sink(x.add(y).mul(z.maximum(x)), y.mul(3).add(z));
    const alu = new UPat({ op: [Ops.SINK, Ops.ADD, Ops.MUL, Ops.MAX], name: 'u' });
    const down: UOp[] = [];
    expect(graphRewrite(tree, logger(down, alu), { bottomUp: true })).toBe(tree);
    expect(down[0]).toBe(tree);
    expect(down.length).toBe(6);
    const at = new Map(down.map((u, i) => [u, i]));
    for (const u of down) for (const s of u.src) if (at.has(s)) expect(at.get(u)!).toBeLessThan(at.get(s)!);
    // the same table in default mode sees the root last
    const up: UOp[] = [];
    graphRewrite(tree, logger(up, alu));
    expect(up.at(-1)).toBe(tree);
    expect(new Set(up)).toEqual(new Set(down));
  });

  it('bottomUp matches a node before its sources change, so the two modes differ', () => {
    // CONST 5 -> 6; ADD(a, 5) -> MUL(a, 5)
    const pm = new PatternMatcher([
      [UPat.const(5, index), () => ic(6)],
      [UPat.op(Ops.ADD, [UPat.var('a'), UPat.const(5)]), ({ a }) => a!.mul(5)],
    ]);
    // default: the CONST is rewritten first, so the ADD no longer matches
    expect(graphRewrite(x.add(5), pm)).toBe(x.add(6));
    // bottomUp: the ADD matches first, then its sources are rewritten
    expect(graphRewrite(x.add(5), pm, { bottomUp: true })).toBe(x.mul(6));
    // in bottomUp mode a node rebuilt from rewritten sources is matched again
    const pm2 = new PatternMatcher([
      [UPat.const(5, index), () => ic(6)],
      [UPat.op(Ops.ADD, [UPat.var('a'), UPat.const(6)]), ({ a }) => a!.mul(6)],
    ]);
    expect(graphRewrite(x.add(5), pm2, { bottomUp: true })).toBe(x.mul(6));
  });

  it('rewrites a shared subgraph once', () => {
    const s = x.add(y);
    const root = UOp.sink(s.mul(2), s.maximum(z), s.add(s), UOp.sink(s, s.mul(2)));
    for (const bottomUp of [false, true]) {
      let calls = 0;
      const pm = new PatternMatcher([
        [
          new UPat({ op: Ops.ADD, src: [UPat.var('a'), UPat.var('b')], where: (u) => u === s }),
          ({ a, b }) => {
            calls++;
            return a!.mul(b!);
          },
        ],
      ]);
      const t = x.mul(y);
      const out = graphRewrite(root, pm, { bottomUp, name: 'shared' });
      expect(out).toBe(UOp.sink(t.mul(2), t.maximum(z), t.add(t), UOp.sink(t, t.mul(2))));
      expect(calls).toBe(1);
    }
  });

  it('rewrites a 200,000-node chain without a stack overflow, in both modes', () => {
    const n = 200_000;
    let u = x;
    for (let i = 0; i < n; i++) u = u.add(1);
    // the leaf changes, so every node of the chain is rebuilt
    const pm = new PatternMatcher([[new UPat({ op: Ops.PARAM, where: (p) => p === x }), () => y]]);
    const out = graphRewrite(u, pm);
    let v = out;
    let adds = 0;
    for (; v.op === Ops.ADD; v = v.src[0]!) adds++;
    expect(adds).toBe(n);
    expect(v).toBe(y);
    // bottomUp mode gives the same graph (hash-consing makes it the same object)
    expect(graphRewrite(u, pm, { bottomUp: true })).toBe(out);
    // substitute walks the whole chain too (here only the top changes)
    expect(substitute(u, new Map([[u.src[0]!, z]]))).toBe(z.add(1));
    // a rule at every node, matched before (bottomUp) or after its sources, on a shorter chain
    const m = 5000;
    let w = x;
    for (let i = 0; i < m; i++) w = w.add(1);
    const tick = new PatternMatcher([[UPat.var('a').add(1), ({ a }) => a!.add(2)]]);
    const twos = graphRewrite(w, tick);
    expect(graphRewrite(w, tick, { bottomUp: true })).toBe(twos);
    let sum = 0;
    for (v = twos; v.op === Ops.ADD; v = v.src[0]!) sum += v.src[1]!.constValue as number;
    expect(sum).toBe(2 * m);
  }, 60_000);

  it('hands the pass name to the tracer', () => {
    const calls: [string, UOp, UOp][] = [];
    setRewriteTracer((name, before, after) => calls.push([name, before, after]));
    const root = x.add(1);
    const out = graphRewrite(root, chain, { name: 'fold-consts' });
    expect(calls).toEqual([['fold-consts', root, out]]);
    graphRewrite(root, chain);
    expect(calls.length).toBe(2);
    expect(typeof calls[1]![0]).toBe('string');
    substitute(root, new Map([[x, y]]));
    expect(calls[2]![0]).toBe('substitute');
    setRewriteTracer(undefined);
    graphRewrite(root, chain, { name: 'untraced' });
    expect(calls.length).toBe(3);
  });

  it('raises "no fixed point" for an endless rewrite in bottomUp mode', () => {
    const pingPong = new PatternMatcher([
      [UPat.const(7, index), () => ic(8)],
      [UPat.const(8, index), () => ic(7)],
    ]);
    expect(() => graphRewrite(x.add(7), pingPong, { bottomUp: true, name: 'pp' })).toThrow(
      /graphRewrite pp: no fixed point/,
    );
  });

  it('raises "no fixed point" for an endless rewrite in default mode', () => {
    const pingPong = new PatternMatcher([
      [UPat.const(7, index), () => ic(8)],
      [UPat.const(8, index), () => ic(7)],
    ]);
    expect(() => graphRewrite(x.add(7), pingPong, { name: 'pp' })).toThrow(/graphRewrite pp: no fixed point/);
    // a node that rewrites into a graph containing itself
    const grow = new PatternMatcher([
      [UPat.var('v').maximum(UPat.var('w')), ({ v, w }) => v!.maximum(w!).add(0)],
    ]);
    expect(() => graphRewrite(x.maximum(y), grow)).toThrow(/no fixed point/);
    expect(() => graphRewrite(x.maximum(y), grow, { bottomUp: true })).toThrow(/no fixed point/);
  });
});

describe('substitute', () => {
  it('replaces nodes everywhere below the root, including shared and deep uses', () => {
    const s = x.add(y);
    const root = UOp.sink(s.mul(z), s, z.add(s.maximum(x)));
    const t = z.mul(2);
    expect(substitute(root, new Map([[s, t]]))).toBe(UOp.sink(t.mul(z), t, z.add(t.maximum(x))));
    // replacing a leaf rebuilds every user
    expect(substitute(root, new Map([[x, z]]))).toBe(
      UOp.sink(z.add(y).mul(z), z.add(y), z.add(z.add(y).maximum(z))),
    );
    expect(substitute(root, new Map())).toBe(root);
    expect(substitute(root, new Map([[ic(12345), x]]))).toBe(root);
    expect(ops(substitute(x.add(y), new Map([[x.add(y), ic(3)]])))).toEqual([Ops.CONST]);
  });

  it('replaces the original nodes only: the replacement may contain the node it replaces', () => {
    expect(substitute(x.mul(2), new Map([[x, x.add(1)]]))).toBe(x.add(1).mul(2));
    // a swap
    expect(
      substitute(
        x.sub(y),
        new Map([
          [x, y],
          [y, x],
        ]),
      ),
    ).toBe(y.sub(x));
  });
});
