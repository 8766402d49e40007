// Wide sums: a float32 sum whose accumulators each add more than CHUNK values, and that streams its input, adds
// chunks of CHUNK values in float32 and the chunks in float64, rounding once at the end. A long sum so keeps
// float32 accuracy at any length (one float32 accumulator loses up to one rounding per add, and stalls at 2^24 on
// ones), for one conversion and one wide add per chunk: 16 adds per float32 accumulator, as numpy's pairwise
// sum has (8 accumulators over blocks of 128). Streaming means each element is read once: a sum of products that
// reuses its loads (matmul, conv) keeps float32, as BLAS does. A loop with no divisor to chunk by adds every
// value in float64. A GPU group's combine of its threads' shares (LOCAL memory, at most GROUP_SHARES of them)
// keeps float32: each share is a partial sum already, and the wide copies of a thread's register tile held a
// double per output (beautiful_mnist's 5x5 weight gradient, 80 outputs a thread: 255 registers, 128 without).
import { AddrSpace, dtypes } from '../dtype.ts';
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { rangesOf } from './scope.ts';

/** Accumulators that add at most this many values in turn keep float32 (a chunk of a long sum is this long). */
const CHUNK = 16;
/** A group's combine of at most this many shares keeps float32 (the heuristics' largest group: 64 threads). */
const GROUP_SHARES = 64;

const sizeOf = (r: UOp) => (r.src[0]!.op === Ops.CONST ? Number(r.src[0]!.constValue) : undefined);

/** How many values each accumulator adds in turn: the iterations of the reduce's loops (not its unrolled copies). */
function chainLength(loops: readonly UOp[]): number {
  return loops.reduce((n, r) => n * (sizeOf(r) ?? Number.POSITIVE_INFINITY), 1);
}

/** Whether every load the reduce's loops read is read once: it depends on all the loops around it. */
function streams(r: UOp): boolean {
  const own = r.src.slice(1);
  const outer = rangesOf(r);
  for (const u of r.src[0]!.toposort()) {
    if (u.op !== Ops.LOAD) continue;
    const at = rangesOf(u);
    if (!own.some((x) => at.has(x))) continue; // read once per output, outside the loop
    for (const x of outer) if (!at.has(x)) return false;
  }
  return true;
}

/** A GPU group's combine: its value is a load of the shares its threads stored in LOCAL memory. */
const combinesShares = (r: UOp) =>
  r.src[0]!.op === Ops.LOAD && r.src[0]!.src[0]!.addrspace === AddrSpace.LOCAL;

interface Ctx {
  nextId: number;
}

function widen(r: UOp, ctx: Ctx): UOp | undefined {
  if (r.dtype !== dtypes.float32 || r.argOf(Ops.REDUCE).op !== Ops.ADD || r.src[0]!.op === Ops.WMMA)
    return undefined;
  const [value, ...ranges] = r.src as [UOp, ...UOp[]];
  const loops = ranges.filter((x) => x.argOf(Ops.RANGE).type === AxisType.REDUCE);
  const chain = chainLength(loops);
  if (chain <= CHUNK || (chain <= GROUP_SHARES && combinesShares(r)) || !streams(r)) return undefined;
  // the innermost loop splits into chunks; the unrolled copies stay with the outer sum, so each copy (and each
  // vector lane) has its own float32 chunk accumulator
  const inner = loops.reduce((a, b) => (b.argOf(Ops.RANGE).id > a.argOf(Ops.RANGE).id ? b : a));
  const n = sizeOf(inner) ?? 0;
  const rest = ranges.filter((x) => x !== inner);
  const wide = (part: UOp, loops: readonly UOp[]) =>
    r.withSrc([part.cast(dtypes.float64), ...loops]).cast(dtypes.float32);
  // a short innermost loop is a chunk as it is
  if (n > 0 && n <= CHUNK) return wide(r.withSrc([value, inner]), rest);
  let chunk = CHUNK;
  while (chunk > 1 && n % chunk !== 0) chunk--;
  if (chunk < 8) return r.withSrc([value.cast(dtypes.float64), ...ranges]).cast(dtypes.float32);
  const outer = UOp.range(n / chunk, ctx.nextId++, AxisType.REDUCE);
  const within = UOp.range(chunk, ctx.nextId++, AxisType.REDUCE);
  const chunked = substitute(value, new Map([[inner, outer.mul(chunk).add(within)]]));
  return wide(r.withSrc([chunked, within]), [outer, ...rest]);
}

const rules = new PatternMatcher<Ctx>([
  [new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }, ctx) => widen(r!, ctx)],
]);

/** The kernel with its long streaming float32 sums added in float32 chunks and float64 across chunks. */
export function widenSums(ast: UOp): UOp {
  const ids = ast.toposort().flatMap((u) => (u.op === Ops.RANGE ? [u.argOf(Ops.RANGE).id] : []));
  return graphRewrite(ast, rules, { name: 'widen long sums', ctx: { nextId: Math.max(-1, ...ids) + 1 } });
}
