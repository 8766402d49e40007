// Neighbouring scalar accesses as vector accesses. A STACK of scalar loads (a tensor core's operand fragment:
// its elements gathered lane by lane) reads pairs or quads of neighbouring elements of one buffer where the
// operand's layout puts them side by side (the A fragment of mma.m16n8k16 holds columns c and c+1 of a
// row-major matrix): each run becomes one vector load (half2 on CUDA) whose lanes fill the STACK. A GROUP of
// scalar stores does the same with its runs (a lane's c0, c1 of a WMMA's result: one half2 store).
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { affine, type Linear } from './affine.ts';

/** Vector accesses at most this wide: the widest run a fragment has (and one ld.v2 of float32, 8 bytes). */
const RUNS = [4, 2];

/** The buffer and address of an ungated scalar load or store, or undefined. */
function plainAccess(u: UOp): [UOp, UOp] | undefined {
  if (u.op === Ops.LOAD ? u.src.length !== 1 || u.isVector : u.op !== Ops.STORE || u.src.length !== 2)
    return undefined;
  if (u.op === Ops.STORE && u.src[1]!.isVector) return undefined;
  const at = u.src[0]!;
  return at.op === Ops.INDEX && at.src.length === 2 && !at.src[1]!.isVector
    ? [at.src[0]!, at.src[1]!]
    : undefined;
}

/** Whether two affine forms have the same terms (equal but for their constants). */
function sameTerms(a: Linear, b: Linear): boolean {
  if (a.terms.size !== b.terms.size) return false;
  for (const [t, c] of a.terms) if (b.terms.get(t) !== c) return false;
  return true;
}

/** Whether elements [j, j + n) are loads (or stores) of consecutive addresses of one buffer. */
function run(elements: readonly UOp[], j: number, n: number): boolean {
  const first = plainAccess(elements[j]!);
  if (first === undefined || j + n > elements.length) return false;
  for (let i = 1; i < n; i++) {
    const next = plainAccess(elements[j + i]!);
    if (next === undefined || elements[j + i]!.op !== elements[j]!.op || next[0] !== first[0]) return false;
    const [a, b] = [affine(first[1]), affine(next[1])];
    if (a === undefined || b === undefined || !sameTerms(a, b) || b.constant - a.constant !== i) return false;
  }
  return true;
}

const offsets = (n: number) =>
  UOp.make(Ops.VCONST, [], { values: Array.from({ length: n }, (_, i) => i), dtype: dtypes.index });

/** One vector access for the run of n scalar ones: a load's lanes for the STACK, or one store of theirs. */
function vectorAccess(run: readonly UOp[]): UOp[] {
  const [buf, base] = plainAccess(run[0]!)!;
  const at = UOp.make(Ops.INDEX, [buf, UOp.make(Ops.ADD, [base, offsets(run.length)])]);
  if (run[0]!.op === Ops.STORE)
    return [
      UOp.make(Ops.STORE, [
        at,
        UOp.make(
          Ops.STACK,
          run.map((s) => s.src[1]!),
        ),
      ]),
    ];
  const load = UOp.make(Ops.LOAD, [at]);
  return run.map((_, i) => UOp.make(Ops.INDEX, [load, UOp.index(i)]));
}

/** The STACK's (or GROUP's) runs of neighbouring loads (stores) as vector ones; undefined where it has none. */
function vectorRuns(u: UOp): UOp | undefined {
  const elements = u.src;
  const out: UOp[] = [];
  let changed = false;
  for (let j = 0; j < elements.length; ) {
    const n = RUNS.find((k) => j % k === 0 && run(elements, j, k));
    if (n === undefined) {
      out.push(elements[j++]!);
      continue;
    }
    out.push(...vectorAccess(elements.slice(j, j + n)));
    j += n;
    changed = true;
  }
  return changed ? u.withSrc(out) : undefined;
}

const rules = new PatternMatcher([
  [new UPat({ op: Ops.STACK, name: 's' }), ({ s }) => vectorRuns(s!)],
  [new UPat({ op: Ops.GROUP, name: 'g' }), ({ g }) => vectorRuns(g!)],
]);

/** The kernel with its STACKs' (GROUPs') runs of neighbouring scalar loads (stores) as vector accesses. */
export function vectorNeighbours(ast: UOp): UOp {
  return graphRewrite(ast, rules, { name: 'neighbouring accesses as vectors' });
}
