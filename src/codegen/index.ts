// The codegen pipeline for one kernel, as a list of named passes: kernel AST in, LINEAR program out.
import { dtypes } from '../dtype.ts';
import { DEBUG } from '../helpers.ts';
import { AxisType, GroupOp, Ops } from '../uop/ops.ts';
import { verifyStage } from '../uop/spec.ts';
import { simplifyGraph } from '../uop/symbolic.ts';
import type { UOp } from '../uop/uop.ts';
import { reduceToAccumulators } from './accumulate.ts';
import { collapseReduces } from './collapse.ts';
import { contractMulAdds } from './contract.ts';
import { decompose } from './decompose.ts';
import { expandRanges, laneRange } from './expand.ts';
import { dropTrueGates, simplifyGatedAddresses, ungateSafeLoads } from './gates.ts';
import { gatherLoads } from './gather.ts';
import { gridIndices, groupReduces, oneShareBarrier, outputsToGlobal } from './grid.ts';
import { ifBlocks } from './if-blocks.ts';
import { matrixLoads } from './ldmatrix.ts';
import { linearize } from './linearize.ts';
import { vectorNeighbours } from './neighbours.ts';
import { handCodedOpts } from './opt/heuristic.ts';
import { applyOpts, CPU_TARGET, type Opt, type Target } from './opt/opts.ts';
import { swizzleLocals } from './swizzle.ts';
import { canonicalAddresses, lowerVectors } from './vectors.ts';
import { sharedOperands } from './wgmma-operands.ts';
import { widenSums } from './wide-sums.ts';
import { accumulateInWmma } from './wmma.ts';

export interface LoweredKernel {
  name: string;
  /** The name with each loop size coloured by its axis type (for DEBUG output). */
  display: string;
  linear: UOp;
  /** The opts applied, left to right. */
  opts: readonly Opt[];
  /** Arithmetic ops the kernel runs (index arithmetic excluded). */
  flops: number;
}

// ANSI colours of the axis types, as the spec's table gives them
const AXIS_COLOURS: Record<AxisType, string> = {
  GLOBAL: '34',
  LOCAL: '36',
  WARP: '96',
  THREAD: '94',
  LOOP: '37',
  REDUCE: '31',
  GROUP_REDUCE: '91',
  UPCAST: '33',
  UNROLL: '35',
};

function loops(ast: UOp): UOp[] {
  return ast
    .toposort()
    .filter((u) => u.op === Ops.RANGE)
    .sort((a, b) => a.argOf(Ops.RANGE).id - b.argOf(Ops.RANGE).id);
}
const sizeText = (r: UOp) => (r.src[0]!.op === Ops.CONST ? String(r.src[0]!.constValue) : 'n');
const typeOf = (r: UOp) => r.argOf(Ops.RANGE).type;

/** A kernel's name from its loops: E (elementwise) or r (reduce), then each loop's size. */
export function kernelName(ast: UOp, colour = false): string {
  const ranges = loops(ast);
  const kind = ranges.some((r) => typeOf(r) === AxisType.REDUCE) ? 'r' : 'E';
  const sizes = ranges.map((r) =>
    colour ? `\x1b[${AXIS_COLOURS[typeOf(r)]}m${sizeText(r)}\x1b[0m` : sizeText(r),
  );
  return [kind, ...sizes].join('_');
}

/** Threads of a warp, which runs a WMMA (every tensor core a device declares, runtime/tensor-cores.ts). */
const WARP = 32;

/**
 * Arithmetic ops executed: each op (each lane of a vector op) counted once per iteration of the loops around it
 * and once per thread of a GPU's grid (the product of its SPECIAL sizes); a WMMA as its multiplies and adds.
 */
function countFlops(linear: UOp): number {
  let trips = linear.src.reduce(
    (n, u) => (u.op === Ops.SPECIAL && u.src[0]!.op === Ops.CONST ? n * Number(u.src[0]!.constValue) : n),
    1,
  );
  let flops = 0;
  const stack: number[] = [];
  for (const u of linear.src) {
    if (u.op === Ops.RANGE) {
      const n = u.src[0]!.op === Ops.CONST ? Number(u.src[0]!.constValue) : 1;
      stack.push(n);
      trips *= n;
    } else if (u.op === Ops.END) for (let i = 1; i < u.src.length; i++) trips /= stack.pop() || 1;
    else if (
      u.dtype !== dtypes.index &&
      (GroupOp.Binary.has(u.op) || GroupOp.Unary.has(u.op) || GroupOp.Ternary.has(u.op))
    )
      flops += trips * (u.shape?.length === 1 ? Number(u.shape[0]) : 1); // a vector op does one per lane
    else if (u.op === Ops.WMMA) {
      // a warp's 32 threads (a warpgroup's 128) run one multiply-accumulate of N x M x K: each thread's share
      const { dims, threads = WARP } = u.argOf(Ops.WMMA);
      const [n, m, k] = dims;
      flops += (trips * 2 * n * m * k) / threads;
    }
  }
  return flops;
}

export interface LowerOptions {
  /** Ops the target cannot run: they are rebuilt from primitives (src/codegen/decompose.ts). */
  lacks?: ReadonlySet<Ops>;
  /** Kernel optimizations, left to right (src/codegen/opt/opts.ts); by default the hand-coded ones. */
  opts?: readonly Opt[];
  /** What the device has, for the opts and their legality (src/codegen/opt/opts.ts); by default a CPU. */
  target?: Target;
}

/** The kernel expanded with its innermost UPCAST as vector lanes, or why it cannot be. */
function expandLanes(ast: UOp, tensorCores: boolean): UOp | string {
  if (tensorCores) return "a WMMA's operands are vectors already";
  const lanes = laneRange(ast);
  if (lanes === undefined) return 'no UPCAST of 2, 4, 8 or 16 elements';
  try {
    return lowerVectors(expandRanges(ast, lanes));
  } catch (e) {
    // a shape that vectors cannot take (a scalar stored to lanes, say): scalar copies do instead
    return (e as Error).message;
  }
}

/** The kernel as the opts see it: indices simplified, what the target lacks decomposed, reduces collapsed, gathers loaded. */
export function optimizable(ast: UOp, opts: LowerOptions = {}): UOp {
  verifyStage(ast, 'kernel');
  let k = simplifyGraph(ast, 'simplify indices');
  k = simplifyGatedAddresses(k);
  // a GPU predicates a load for free; without a grid (the CPU's C, JS) a gated load is a branch
  if (opts.target?.grid === undefined) k = ungateSafeLoads(k);
  k = decompose(k, opts.lacks ?? new Set());
  k = collapseReduces(k);
  k = gatherLoads(k);
  return opts.target?.grid !== undefined ? outputsToGlobal(k) : k;
}

export function lowerKernel(ast: UOp, opts: LowerOptions = {}): LoweredKernel {
  const k = optimizable(ast, opts);
  const target = opts.target ?? CPU_TARGET;
  if (opts.opts !== undefined) return lowerWith(k, opts.opts, target);
  const applied = handCodedOpts(k, target);
  try {
    return lowerWith(k, applied, target);
  } catch (e) {
    if (!applied.some((o) => o.op === 'TC' && target.tensorCores[o.tc]?.sharedOperands)) throw e;
    // staged tiles a warpgroup's tensor cores cannot read (sharedOperands): the warps' cores instead
    const warps = { ...target, tensorCores: target.tensorCores.filter((c) => !c.sharedOperands) };
    return lowerWith(k, handCodedOpts(k, warps), warps);
  }
}

/** An optimizable kernel lowered with `applied` to a linear program. */
function lowerWith(optimizable: UOp, applied: readonly Opt[], target: Target): LoweredKernel {
  let k = applyOpts(optimizable, applied, target);
  if (target.grid !== undefined) k = groupReduces(k);
  const named = k; // named after the loops that remain
  k = widenSums(k);
  // TC is the only opt that makes WMMA
  const tensorCores = applied.some((o) => o.op === 'TC');
  const vectorized = target.vectors ? expandLanes(k, tensorCores) : 'the target has no vector types';
  if (typeof vectorized === 'string' && DEBUG.value >= 4)
    console.log(`${kernelName(named)}: scalar copies: ${vectorized}`);
  k = dropTrueGates(typeof vectorized === 'string' ? expandRanges(k) : vectorized);
  if (target.grid !== undefined) k = oneShareBarrier(k);
  // a tensor-core kernel's vectors are its WMMA operands and STAGE's copies, whose addresses the renderer reads
  if (tensorCores) k = canonicalAddresses(k);
  k = reduceToAccumulators(k, target.grid !== undefined);
  if (target.fusedMultiplyAdds) k = contractMulAdds(k);
  if (tensorCores) k = accumulateInWmma(k);
  if (tensorCores) k = sharedOperands(k);
  if (tensorCores && target.grid?.matrixLoads) k = matrixLoads(k);
  if (tensorCores) k = vectorNeighbours(k);
  // after the passes that read a tile's plain row-major addresses
  if (applied.some((o) => o.op === 'STAGE' && o.swizzle)) k = swizzleLocals(k);
  const rows = applied.find((o) => o.op === 'RASTER')?.rows;
  if (target.grid !== undefined) k = gridIndices(k, target.grid, rows);
  const linear = ifBlocks(linearize(k));
  verifyStage(linear, 'linear');
  return {
    name: kernelName(named),
    display: kernelName(named, true),
    linear,
    opts: applied,
    flops: countFlops(linear),
  };
}
