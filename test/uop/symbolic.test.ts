// The symbolic simplifier: each named rewrite, and a property test that simplification keeps values and never grows.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DType, dtypes, Ops, UOp } from '../../src/index.ts';
import { evaluate } from './evaluate.ts';

const x = UOp.variable('x', 0, 10);
const y = UOp.variable('y', 0, 3);
const z = UOp.variable('z', -5, 5);
const size = (u: UOp) => u.toposort().length;

describe('named rewrites', () => {
  it('folds constants with dtype wrap-around', () => {
    expect(UOp.const(dtypes.index, 3).mul(4).add(2).simplify()).toBe(UOp.const(dtypes.index, 14));
    expect(UOp.const(dtypes.int8, 100).add(100).simplify()).toBe(UOp.const(dtypes.int8, -56));
    expect(UOp.const(dtypes.index, -7).idiv(2).simplify()).toBe(UOp.const(dtypes.index, -4));
    expect(UOp.const(dtypes.index, -7).mod(2).simplify()).toBe(UOp.const(dtypes.index, 1));
    expect(UOp.const(dtypes.float32, 0.1).add(0.2).simplify().constValue).toBe(
      Math.fround(Math.fround(0.1) + Math.fround(0.2)),
    );
  });
  it('applies the identities', () => {
    expect(x.add(0).simplify()).toBe(x);
    expect(x.mul(1).simplify()).toBe(x);
    expect(x.mul(0).simplify()).toBe(UOp.const(dtypes.index, 0));
    expect(x.idiv(1).simplify()).toBe(x);
    expect(x.mod(1).simplify()).toBe(UOp.const(dtypes.index, 0));
    expect(x.neg().neg().simplify()).toBe(x);
    const b = x.lt(y);
    expect(b.logicalNot().logicalNot().simplify()).toBe(b);
  });
  it('keeps float rules exact', () => {
    const f = UOp.param(0, dtypes.float32, []);
    expect(f.mul(1).simplify()).toBe(f);
    expect(f.add(0).simplify()).toBe(f.add(0)); // -0 + 0 is +0
    expect(f.mul(0).simplify()).toBe(f.mul(0)); // NaN * 0 is NaN
  });
  it('collects like terms and moves constants last', () => {
    expect(x.mul(2).add(x.mul(3)).simplify()).toBe(x.mul(5));
    expect(x.add(3).add(y).add(4).simplify()).toBe(x.add(y).add(7));
    expect(x.sub(x).simplify()).toBe(UOp.const(dtypes.index, 0));
    expect(x.mul(3).add(y).sub(x.mul(3)).simplify()).toBe(y);
  });
  it('folds (x*c+d)//c and (x*c+d)%c', () => {
    expect(x.mul(4).add(y).idiv(4).simplify()).toBe(x);
    expect(x.mul(4).add(y).mod(4).simplify()).toBe(y);
    expect(z.mul(4).add(7).idiv(4).simplify()).toBe(z.add(1));
    expect(z.mul(4).add(7).mod(4).simplify()).toBe(UOp.const(dtypes.index, 3));
    expect(x.mul(6).add(y.mul(4)).idiv(8).simplify()).toBe(x.mul(3).add(y.mul(2)).idiv(4));
  });
  it('splits off a factor of the divisor that the low part stays under: (4x + y) % 8, (4x + y) // 8', () => {
    // y < 4: 4x + y is 4 * x + y exactly, so the remainder by 8 keeps y and x's parity, the quotient x//2
    expect(x.mul(4).add(y).mod(8).simplify()).toBe(x.mod(2).mul(4).add(y));
    expect(x.mul(4).add(y).idiv(8).simplify()).toBe(x.idiv(2));
    // a reshape's offset merged with a window's: (i*2n + r) % (2n*n), r < n
    const i = UOp.variable('i', 0, 2 ** 26 - 1);
    const r = UOp.variable('r', 0, 8191);
    expect(
      i
        .mul(16384)
        .add(r)
        .mod(16384 * 8192)
        .simplify(),
    ).toBe(i.mod(8192).mul(16384).add(r));
    const v = UOp.variable('v', 0, 5);
    expect(x.mul(4).add(v).mod(8).simplify()).toBe(x.mul(4).add(v).mod(8)); // v reaches 4: kept
  });
  it('max of one sum shifted by two constants is the larger', () => {
    expect(x.mul(3).add(y).add(2).maximum(x.mul(3).add(y).add(7)).simplify()).toBe(x.mul(3).add(y).add(7));
  });
  it('recombines x//c*c + x%c', () => {
    expect(x.idiv(4).mul(4).add(x.mod(4)).simplify()).toBe(x);
    expect(x.mod(4).add(y).add(x.idiv(4).mul(4)).simplify()).toBe(y.add(x));
  });
  it('recombines a flattened axis read by quotients of quotients: r%3 + (r//3)%3*3 + r//9*9', () => {
    const r = UOp.variable('r', 0, 575);
    expect(r.mod(3).add(r.idiv(3).mod(3).mul(3)).add(r.idiv(9).mul(9)).simplify()).toBe(r);
    expect(r.idiv(3).mod(3).add(r.idiv(9).mul(3)).simplify()).toBe(r.idiv(3));
    // (r//3)%4 with r//9: 9 is not 3 * 4, so they stay apart
    const apart = r.idiv(3).mod(4).add(r.idiv(9).mul(4));
    expect(apart.simplify()).toBe(apart.simplify());
    expect(apart.simplify().op).toBe(Ops.ADD);
  });
  it('drops // and % and decides comparisons from bounds', () => {
    expect(y.mod(4).simplify()).toBe(y);
    expect(y.idiv(4).simplify()).toBe(UOp.const(dtypes.index, 0));
    expect(x.add(20).mod(10).simplify()).toBe(x.add(20).mod(10).simplify()); // spans two periods: kept
    expect(UOp.variable('w', 12, 17).mod(10).simplify()).toBe(UOp.variable('w', 12, 17).add(-10));
    expect(x.lt(11).simplify()).toBe(UOp.const(dtypes.bool, true));
    expect(x.lt(0).simplify()).toBe(UOp.const(dtypes.bool, false));
    expect(x.ne(-1).simplify()).toBe(UOp.const(dtypes.bool, true));
    expect(x.add(y).ne(x.add(y)).simplify()).toBe(UOp.const(dtypes.bool, false));
    const f = UOp.param(0, dtypes.float32, []);
    expect(f.ne(f).simplify()).toBe(f.ne(f)); // NaN != NaN
    expect(x.add(1).lt(5).simplify()).toBe(x.lt(4));
    expect(x.mul(4).lt(10).simplify()).toBe(x.lt(3));
  });
  it('folds where', () => {
    expect(x.lt(11).where(x, y).simplify()).toBe(x);
    expect(x.lt(y).where(z, z).simplify()).toBe(z);
    expect(UOp.const(dtypes.bool, false).where(x, y).simplify()).toBe(y);
  });
  it('does not fold integer division by zero', () => {
    const e = UOp.const(dtypes.int32, 1).idiv(0);
    expect(e.simplify()).toBe(e);
  });
  it('respects int32 wrap-around', () => {
    const v = UOp.variable('v', 0, 2 ** 31 - 1, dtypes.int32);
    // v*4 can wrap, so (v*4+1)//4 is not v
    expect(v.mul(4).add(1).idiv(4).simplify().op).toBe(Ops.IDIV);
  });
});

// --- property: random expressions over bounded variables --------------------------------------------

interface VarSpec {
  name: string;
  min: number;
  max: number;
}
/** Index variables, and int32 ones near the limits so that wrap-around happens. */
const FAMILIES: { dtype: DType; vars: VarSpec[]; scale: number }[] = [
  {
    dtype: dtypes.index,
    scale: 1,
    vars: [
      { name: 'a', min: 0, max: 7 },
      { name: 'b', min: -4, max: 4 },
      { name: 'c', min: 1, max: 20 },
      { name: 'd', min: 0, max: 1 },
    ],
  },
  {
    dtype: dtypes.int32,
    scale: 2 ** 27,
    vars: [
      { name: 'p', min: 0, max: 2 ** 31 - 1 },
      { name: 'q', min: -(2 ** 31), max: 2 ** 31 - 1 },
      { name: 'r', min: -100, max: 100 },
      { name: 's', min: 2 ** 30, max: 2 ** 30 + 7 },
    ],
  },
];
const VARS = FAMILIES[0]!.vars;

type Expr =
  | { kind: 'leaf'; v: number }
  | { kind: 'const'; c: number }
  | { kind: 'op'; op: string; a: Expr; b: Expr; k: number };

const exprArb: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ kind: fc.constant('leaf' as const), v: fc.integer({ min: 0, max: VARS.length - 1 }) }),
    fc.record({ kind: fc.constant('const' as const), c: fc.integer({ min: -9, max: 9 }) }),
    fc.record({
      kind: fc.constant('op' as const),
      op: fc.constantFrom(
        'add',
        'sub',
        'mul',
        'mulc',
        'idiv',
        'mod',
        'max',
        'min',
        'neg',
        'where',
        'lt',
        'bool',
      ),
      a: tie('e'),
      b: tie('e'),
      k: fc.integer({ min: 1, max: 12 }),
    }),
  ),
})).e;

function build(e: Expr, fam = FAMILIES[0]!): UOp {
  const konst = (v: number) => UOp.const(fam.dtype, v);
  if (e.kind === 'leaf')
    return UOp.variable(fam.vars[e.v]!.name, fam.vars[e.v]!.min, fam.vars[e.v]!.max, fam.dtype);
  if (e.kind === 'const') return konst(e.c * fam.scale);
  const a = build(e.a, fam);
  const b = build(e.b, fam);
  switch (e.op) {
    case 'add':
      return a.add(b);
    case 'sub':
      return a.sub(b);
    case 'mul':
      return a.mul(b);
    case 'mulc':
      return a.mul(e.k);
    case 'idiv':
      return a.idiv(e.k);
    case 'mod':
      return a.mod(e.k);
    case 'max':
      return a.maximum(b);
    case 'min':
      return a.minimum(b);
    case 'neg':
      return a.neg();
    case 'where':
      return a.lt(b).where(a, b.add(e.k));
    case 'bool':
      return boolExpr(a, b, e.k).where(konst(e.k % 2), konst(1 - (e.k % 2)));
    default:
      return a.lt(b).where(konst(e.k), a);
  }
}

/** Comparisons joined by boolean ops, so the bool rules (double negation, x != false, ...) get exercised. */
function boolExpr(a: UOp, b: UOp, k: number): UOp {
  const p = a.lt(b);
  const q = a.ne(k);
  switch (k % 6) {
    case 0:
      return p.logicalNot().logicalNot();
    case 1:
      return p.and(q);
    case 2:
      return p.or(q.logicalNot());
    case 3:
      return p.ne(false).xor(q);
    case 4:
      return p.eq(q);
    default:
      return p.and(true).or(false);
  }
}

const assignments = (vars: VarSpec[]) =>
  fc.array(fc.tuple(...vars.map((v) => fc.integer({ min: v.min, max: v.max }))), {
    minLength: 8,
    maxLength: 8,
  });

describe('property: simplify', () => {
  for (const fam of FAMILIES)
    it(`keeps the value for every sampled assignment and never adds nodes (${fam.dtype.name})`, () => {
      fc.assert(
        fc.property(exprArb, assignments(fam.vars), (e, samples) => {
          const u = build(e, fam);
          const s = u.simplify();
          expect(size(s)).toBeLessThanOrEqual(size(u));
          for (const vals of [...samples, fam.vars.map((v) => v.min), fam.vars.map((v) => v.max)]) {
            const env = Object.fromEntries(fam.vars.map((v, i) => [v.name, vals[i]!]));
            const got = evaluate(s, env);
            expect(got).toBe(evaluate(u, env));
            expect(Number(got)).toBeGreaterThanOrEqual(s.vmin);
            expect(Number(got)).toBeLessThanOrEqual(s.vmax);
          }
        }),
        { numRuns: 1500, seed: 20261122 },
      );
    });
});
