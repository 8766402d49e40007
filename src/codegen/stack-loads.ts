// A STACK of scalar loads (a tensor core's operand fragment: its elements gathered lane by lane) reads pairs or
// quads of neighbouring elements of one buffer where the operand's layout puts them side by side (the A
// fragment of mma.m16n8k16 holds columns c and c+1 of a row-major matrix): each run becomes one vector load
// (half2 on CUDA) whose lanes fill the STACK, so a warp moves 4 bytes a load instead of 2.
import { dtypes } from '../dtype.ts';
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { affine, type Linear } from './affine.ts';

/** Vector loads at most this wide: the widest run a fragment has (and one ld.v2 of float32, 8 bytes). */
const RUNS = [4, 2];

/** The buffer and address of an ungated scalar load, or undefined. */
function plainLoad(u: UOp): [UOp, UOp] | undefined {
  if (u.op !== Ops.LOAD || u.src.length !== 1 || u.isVector) return undefined;
  const at = u.src[0]!;
  return at.op === Ops.INDEX && at.src.length === 2 ? [at.src[0]!, at.src[1]!] : undefined;
}

/** Whether two affine forms have the same terms (equal but for their constants). */
function sameTerms(a: Linear, b: Linear): boolean {
  if (a.terms.size !== b.terms.size) return false;
  for (const [t, c] of a.terms) if (b.terms.get(t) !== c) return false;
  return true;
}

/** Whether elements [j, j + n) of the STACK load consecutive addresses of one buffer. */
function run(elements: readonly UOp[], j: number, n: number): boolean {
  const first = plainLoad(elements[j]!);
  if (first === undefined || j + n > elements.length) return false;
  for (let i = 1; i < n; i++) {
    const next = plainLoad(elements[j + i]!);
    if (next === undefined || next[0] !== first[0]) return false;
    const [a, b] = [affine(first[1]), affine(next[1])];
    if (a === undefined || b === undefined || !sameTerms(a, b) || b.constant - a.constant !== i) return false;
  }
  return true;
}

/** The STACK with its runs of neighbouring loads as vector loads, or undefined where it has none. */
function vectorRuns(stack: UOp): UOp | undefined {
  const elements = stack.src;
  const out: UOp[] = [];
  let changed = false;
  for (let j = 0; j < elements.length; ) {
    const n = RUNS.find((k) => j % k === 0 && run(elements, j, k));
    if (n === undefined) {
      out.push(elements[j++]!);
      continue;
    }
    const [buf, base] = plainLoad(elements[j]!)!;
    const offsets = UOp.make(Ops.VCONST, [], {
      values: Array.from({ length: n }, (_, i) => i),
      dtype: dtypes.index,
    });
    const load = UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [buf, UOp.make(Ops.ADD, [base, offsets])])]);
    for (let i = 0; i < n; i++) out.push(UOp.make(Ops.INDEX, [load, UOp.index(i)]));
    j += n;
    changed = true;
  }
  return changed ? stack.withSrc(out) : undefined;
}

const rules = new PatternMatcher([[new UPat({ op: Ops.STACK, name: 's' }), ({ s }) => vectorRuns(s!)]]);

/** The kernel with its STACKs' runs of neighbouring scalar loads read as vector loads. */
export function stackLoads(ast: UOp): UOp {
  return graphRewrite(ast, rules, { name: 'stacked loads as vectors' });
}
