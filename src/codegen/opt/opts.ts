// Kernel optimizations (the spec's OptOps): what each opt is, when it is legal on a target, and applying a
// list of them to a kernel AST. The range rewrites themselves are in axes.ts.

import type { TensorCore } from '../../runtime/tensor-cores.ts';
import { AxisType, axisLetter } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { groupShareBytes } from '../grid.ts';
import { constSize, kernelRanges, padAxis, rangeArg, splitAxis, swapAxes } from './axes.ts';
import { applyStage, type StagePlan, stagePlan } from './stage.ts';
import { applyTensorCore, matchTensorCore, TC_PADS, tileProblem } from './tc.ts';

/** An opt's `axis` counts the kernel's ranges in id order (kernelRanges), as they are when the opt applies. */
export type Opt =
  /** Axis of size n becomes (n/factor, factor), or (factor, n/factor) when top; the factor part gets target. */
  | { op: 'SPLIT'; axis: number; factor: number; target: AxisType; top?: boolean }
  /** The axis runs to the next multiple of `multiple`; the extra iterations are masked off. */
  | { op: 'PADTO'; axis: number; multiple: number }
  /** Axes `axis` and `other` trade places in loop order. */
  | { op: 'SWAP'; axis: number; other: number }
  /** No LOCAL or GROUP_REDUCE axis may be made after this. */
  | { op: 'NOLOCALS' }
  /**
   * Tensor cores on reduce axis `axis` (src/codegen/opt/tc.ts): `tc` picks one of the target's tensorCores (-1:
   * the first whose dtypes fit), `opt` 0 or 1 needs axes that are multiples of its tile and 2 pads them to it,
   * `mode` 1 is its instructions (tinygrad's emulation modes 2 and 3 are not supported).
   */
  | { op: 'TC'; axis: number; tc: number; opt: number; mode: number }
  /**
   * The loads over reduce axis `axis` read tiles the workgroup copies into LOCAL memory each iteration
   * (src/codegen/opt/stage.ts). The last opt: it tiles by the workgroup the opts before it made. `depth` >= 1
   * copies asynchronously, that many iterations ahead (on targets with asyncCopies); 0 or none: synchronously.
   * `swizzle` lays 16-bit tiles out unpadded and XOR-swizzled where their rows are a power of two of 16-byte chunks.
   */
  | { op: 'STAGE'; axis: number; depth?: number; swizzle?: boolean }
  /**
   * The grid's two GLOBAL axes (outer, inner) run as one dimension of workgroups in bands of `rows` outer
   * indices, down each band's column before the next (src/codegen/grid.ts): the workgroups a GPU runs together
   * then read a squarer set of a matmul's A rows and B columns, which L2 keeps. No opt after it changes a GLOBAL
   * axis.
   */
  | { op: 'RASTER'; rows: number };

/** A GPU's grid of workgroups: output axes run as workgroups (GLOBAL) and as threads of one (LOCAL). */
export interface Grid {
  /** Threads in one workgroup, at most: the LOCAL axes' sizes multiply. */
  maxThreads: number;
  /** Bytes of workgroup-shared memory, where LOCAL and GROUP_REDUCE axes combine their values. */
  localBytes: number;
  /** Workgroups in the grid's second and third dimensions, at most (CUDA's 65535 where not given). */
  maxOuterGroups?: number;
  /** Copies from global into shared memory that complete asynchronously (cp.async, sm_80 on): STAGE's depth. */
  asyncCopies?: boolean;
  /** Warp-wide loads of tensor-core fragments from shared memory (ldmatrix, sm_75 on): src/codegen/ldmatrix.ts. */
  matrixLoads?: boolean;
}

/** What legality needs to know about the device a kernel is for. */
export interface Target {
  /** Workgroups with shared memory (a GPU), or undefined for a CPU: LOCAL and GROUP_REDUCE axes need them. */
  grid?: Grid;
  /** Warp-level matrix multiply instructions, which TC uses (src/runtime/tensor-cores.ts). */
  tensorCores: readonly TensorCore[];
  /** The largest factor of one UPCAST or UNROLL split: its copies live in registers, and more would spill. */
  maxUpcast: number;
  /** Threads a kernel may run on: the product of its THREAD axes' sizes is at most this. */
  threads: number;
  /** Vector types: the innermost UPCAST axis may become the lanes of vectors (src/codegen/vectors.ts). */
  vectors: boolean;
  /** 32-bit values the vector registers hold (16 AVX2 registers of 8: 128), for the size of register tiles. */
  registers: number;
  /** Bytes of one vector register (AVX2 32, AVX-512 64): wider vectors would be split into several, and spill. */
  vectorBytes: number;
  /** Its compiler contracts no multiply and add of its own: the IR places FMAs (src/codegen/contract.ts). */
  fusedMultiplyAdds?: boolean;
}

/** A CPU without vector types (the JS device): no local memory, no tensor cores. Devices set their thread count. */
export const CPU_TARGET: Target = {
  tensorCores: [],
  maxUpcast: 16,
  threads: 8,
  vectors: false,
  registers: 128,
  vectorBytes: 32,
};

export function printOpt(o: Opt): string {
  switch (o.op) {
    case 'SPLIT':
      return `SPLIT(${o.axis},${o.factor},${o.target}${o.top ? ',top' : ''})`;
    case 'PADTO':
      return `PADTO(${o.axis},${o.multiple})`;
    case 'SWAP':
      return `SWAP(${o.axis},${o.other})`;
    case 'NOLOCALS':
      return 'NOLOCALS';
    case 'TC':
      return `TC(${o.axis},${o.tc},${o.opt},${o.mode})`;
    case 'RASTER':
      return `RASTER(${o.rows})`;
    case 'STAGE': {
      const depth = o.depth || o.swizzle ? [o.depth ?? 0] : [];
      return `STAGE(${[o.axis, ...depth, ...(o.swizzle ? ['swizzle'] : [])].join(',')})`;
    }
  }
}

/** An opt list as one line, e.g. `SPLIT(1,4,UPCAST) PADTO(0,32) SWAP(0,1)`. */
export const printOpts = (opts: readonly Opt[]): string => opts.map(printOpt).join(' ');

const describeAxes = (ranges: readonly UOp[]) =>
  ranges.map((r, i) => `${i}:${axisLetter[rangeArg(r).type]}${constSize(r) ?? 'n'}`).join(' ');

/** What a SPLIT can make, from which axis types (the spec's "Split from"), and which part it must be. */
interface SplitRule {
  from: readonly AxisType[];
  /** outer: the new axis must be the top part; inner: the bottom part; either: both are fine. */
  part: 'outer' | 'inner' | 'either';
  /** The new axis lives in local memory. */
  local?: true;
  /** The new axis becomes copies in registers (at most maxUpcast of them per split). */
  registers?: true;
}
const { GLOBAL, LOCAL, LOOP, REDUCE, GROUP_REDUCE, THREAD, UPCAST, UNROLL } = AxisType;
const SPLITS: Partial<Record<AxisType, SplitRule>> = {
  [LOCAL]: { from: [GLOBAL, LOOP], part: 'inner', local: true },
  // each thread takes a contiguous block of the axis
  [THREAD]: { from: [GLOBAL, LOOP], part: 'outer' },
  [GROUP_REDUCE]: { from: [REDUCE], part: 'either', local: true },
  // the spec makes these inner (vectorizable); an outer one is still correct, since expansion copies either
  [UPCAST]: { from: [GLOBAL, LOCAL, LOOP], part: 'either', registers: true },
  [UNROLL]: { from: [REDUCE, GROUP_REDUCE], part: 'either', registers: true },
};

/** Axis types whose iterations are the threads of a workgroup. */
const LOCAL_TYPES: ReadonlySet<AxisType> = new Set([LOCAL, GROUP_REDUCE, AxisType.WARP]);

/** Axis types PADTO pads: split parts are padded before the split, where one mask covers them all. */
const PADDABLE: readonly AxisType[] = [GLOBAL, LOOP, REDUCE];
/** Padding may at most double an axis: beyond that most of the work would be masked off. */
const MAX_PAD_GROWTH = 2;

/** Axis types SWAP reorders, by class: loops of one class trade places, never a loop and a reduce. */
const SWAP_CLASS: Partial<Record<AxisType, string>> = {
  [GLOBAL]: 'loop',
  [LOOP]: 'loop',
  [REDUCE]: 'reduce',
};

interface Kernel {
  ast: UOp;
  ranges: readonly UOp[];
  target: Target;
  /** the opt is the list's first */
  first: boolean;
  /** NOLOCALS came earlier in the list */
  noLocals: boolean;
  /** RASTER came earlier in the list */
  raster: boolean;
}

const isGlobal = (k: Kernel, axis: number) => rangeArg(k.ranges[axis]!).type === GLOBAL;
/** Why an opt on these axes is illegal after RASTER, which laid out the GLOBAL axes it found. */
const rasterFixed = (k: Kernel, ...axes: number[]) =>
  k.raster && axes.some((a) => isGlobal(k, a)) ? 'RASTER came earlier, so the GLOBAL axes stay' : undefined;

const axisError = (k: Kernel, axis: number) =>
  Number.isInteger(axis) && k.ranges[axis] !== undefined ? undefined : `axis ${axis} does not exist`;

function splitIllegal(o: Extract<Opt, { op: 'SPLIT' }>, k: Kernel): string | undefined {
  const missing = axisError(k, o.axis);
  if (missing !== undefined) return missing;
  if (o.target === AxisType.WARP) return 'WARP axes are made by TC, not by SPLIT';
  const rule = SPLITS[o.target];
  if (rule === undefined)
    return `${o.target} is not a split target (those are ${Object.keys(SPLITS).join(', ')})`;
  if (rule.local && k.target.grid === undefined)
    return `${o.target} axes need local memory, which the target does not have`;
  if (rule.local && k.noLocals) return `NOLOCALS came earlier, so no ${o.target} axis may be made`;
  const fixed = rasterFixed(k, o.axis);
  if (fixed !== undefined) return fixed;
  if (o.target === GROUP_REDUCE && k.ranges.some((r) => rangeArg(r).type === AxisType.WARP))
    return "GROUP_REDUCE does not share a tensor core's sums (the kernel has a WARP axis)";
  const r = k.ranges[o.axis]!;
  const type = rangeArg(r).type;
  if (!rule.from.includes(type)) return `${o.target} splits ${rule.from.join(', ')} axes, not ${type}`;
  if (rule.part === 'outer' && !o.top) return `a ${o.target} axis is the outer part of its split (top: true)`;
  if (rule.part === 'inner' && o.top) return `a ${o.target} axis is the inner part of its split (top: false)`;
  const n = constSize(r);
  if (n === undefined) return 'the axis size is symbolic';
  if (!Number.isInteger(o.factor) || o.factor < 2)
    return `factor ${o.factor} must be an integer of at least 2`;
  if (n % o.factor !== 0) return `factor ${o.factor} does not divide the axis size ${n}`;
  if (rule.registers && o.factor > k.target.maxUpcast)
    return `factor ${o.factor} exceeds the register limit of ${k.target.maxUpcast} for ${o.target}`;
  if (o.target === THREAD) {
    const threads = k.ranges.reduce(
      (p, x) => (rangeArg(x).type === THREAD ? p * constSize(x)! : p),
      o.factor,
    );
    if (threads > k.target.threads)
      return `${threads} threads exceed the target's ${k.target.threads} (the THREAD axes' sizes multiply)`;
  }
  if (rule.local) {
    const threads = k.ranges.reduce(
      (p, x) => (LOCAL_TYPES.has(rangeArg(x).type) ? p * constSize(x)! : p),
      o.factor,
    );
    if (threads > k.target.grid!.maxThreads)
      return `${threads} threads in a workgroup exceed the target's ${k.target.grid!.maxThreads} (the LOCAL, GROUP_REDUCE and WARP axes' sizes multiply)`;
  }
  return undefined;
}

function padIllegal(o: Extract<Opt, { op: 'PADTO' }>, k: Kernel): string | undefined {
  const missing = axisError(k, o.axis);
  if (missing !== undefined) return missing;
  const r = k.ranges[o.axis]!;
  const type = rangeArg(r).type;
  if (!PADDABLE.includes(type))
    return `PADTO pads ${PADDABLE.join(', ')} axes, not ${type} (pad an axis before splitting it)`;
  const fixed = rasterFixed(k, o.axis);
  if (fixed !== undefined) return fixed;
  const n = constSize(r);
  if (n === undefined) return 'the axis size is symbolic';
  if (!Number.isInteger(o.multiple) || o.multiple < 2)
    return `multiple ${o.multiple} must be an integer of at least 2`;
  if (n % o.multiple === 0) return `the axis size ${n} is already a multiple of ${o.multiple}`;
  const padded = Math.ceil(n / o.multiple) * o.multiple;
  if (padded > MAX_PAD_GROWTH * n)
    return `padding the axis from ${n} to ${padded} more than doubles it (at most ${MAX_PAD_GROWTH * n})`;
  return undefined;
}

function swapIllegal(o: Extract<Opt, { op: 'SWAP' }>, k: Kernel): string | undefined {
  const missing = axisError(k, o.axis) ?? axisError(k, o.other);
  if (missing !== undefined) return missing;
  if (o.axis === o.other) return `it swaps axis ${o.axis} with itself`;
  const [a, b] = [rangeArg(k.ranges[o.axis]!).type, rangeArg(k.ranges[o.other]!).type];
  const [ca, cb] = [SWAP_CLASS[a], SWAP_CLASS[b]];
  if (ca === undefined || cb === undefined || ca !== cb)
    return `SWAP reorders two loop axes (GLOBAL, LOOP) or two REDUCE axes, not ${a} and ${b}`;
  return rasterFixed(k, o.axis, o.other);
}

function rasterIllegal(o: Extract<Opt, { op: 'RASTER' }>, k: Kernel): string | undefined {
  if (k.target.grid === undefined) return 'the target has no grid of workgroups';
  if (k.raster) return 'RASTER came earlier already';
  const global = k.ranges.filter((r) => rangeArg(r).type === GLOBAL);
  if (global.length !== 2 || global.some((r) => (constSize(r) ?? 0) < 2))
    return 'it orders exactly two GLOBAL axes, of constant sizes of at least 2';
  const outer = constSize(global[0]!)!;
  if (!Number.isInteger(o.rows) || o.rows < 2 || outer % o.rows !== 0)
    return `rows ${o.rows} must be an integer of at least 2 that divides the outer GLOBAL axis's ${outer}`;
  return undefined;
}

function noLocalsIllegal(k: Kernel): string | undefined {
  if (k.target.grid === undefined)
    return 'the target has no local memory, so there are no local axes to turn off';
  if (k.noLocals) return 'NOLOCALS came earlier already';
  const local = k.ranges.filter((r) => rangeArg(r).type === LOCAL || rangeArg(r).type === GROUP_REDUCE);
  if (local.length > 0)
    return `the kernel has local axes already (${local.map((r) => k.ranges.indexOf(r)).join(', ')})`;
  return undefined;
}

function tcIllegal(o: Extract<Opt, { op: 'TC' }>, k: Kernel): string | undefined {
  if (!k.first) return 'TC must be the first opt';
  if (k.target.tensorCores.length === 0 || k.target.grid === undefined)
    return 'the target has no tensor cores';
  if (o.mode !== 1) return `mode ${o.mode} is not supported (1: the tensor core's instructions)`;
  if (!Number.isInteger(o.opt) || o.opt < 0 || o.opt > TC_PADS)
    return `opt ${o.opt} must be 0 or 1 (axes are multiples of the tile) or ${TC_PADS} (pads them)`;
  const match = matchTensorCore(k.ast, o.axis, o.tc, k.target.tensorCores);
  if (typeof match === 'string') return match;
  if (match.tc.threads > k.target.grid.maxThreads)
    return `a warp of ${match.tc.threads} threads exceeds the target's ${k.target.grid.maxThreads} per workgroup`;
  return tileProblem(match, o.opt);
}

function stageIllegal(o: Extract<Opt, { op: 'STAGE' }>, k: Kernel): string | undefined {
  if (k.target.grid === undefined) return 'the target has no local memory';
  const missing = axisError(k, o.axis);
  if (missing !== undefined) return missing;
  const depth = o.depth ?? 0;
  if (!Number.isInteger(depth) || depth < 0 || depth > 4)
    return `depth ${depth} is not an integer from 0 to 4`;
  if (depth > 0 && !k.target.grid.asyncCopies)
    return 'the target has no asynchronous copies (depth must be 0)';
  const plan = stagePlan(k.ast, o.axis, depth, o.swizzle ?? false);
  if (typeof plan === 'string') return plan;
  if (plan.bytes > k.target.grid.localBytes)
    return `its tiles take ${plan.bytes} bytes of local memory, more than the target's ${k.target.grid.localBytes}`;
  return undefined;
}

/** Why opt cannot apply to the kernel, or undefined when it can. */
function illegal(o: Opt, k: Kernel): string | undefined {
  switch (o.op) {
    case 'SPLIT':
      return splitIllegal(o, k);
    case 'PADTO':
      return padIllegal(o, k);
    case 'SWAP':
      return swapIllegal(o, k);
    case 'NOLOCALS':
      return noLocalsIllegal(k);
    case 'TC':
      return tcIllegal(o, k);
    case 'STAGE':
      return stageIllegal(o, k);
    case 'RASTER':
      return rasterIllegal(o, k);
  }
}

function apply(ast: UOp, o: Opt, target: Target): UOp {
  switch (o.op) {
    case 'SPLIT':
      return splitAxis(ast, o.axis, o.factor, o.target, o.top ?? false);
    case 'PADTO':
      return padAxis(ast, o.axis, o.multiple);
    case 'SWAP':
      return swapAxes(ast, o.axis, o.other);
    case 'TC':
      return applyTensorCore(ast, o.axis, o.tc, o.opt, target.tensorCores);
    case 'STAGE':
      return applyStage(ast, stagePlan(ast, o.axis, o.depth ?? 0, o.swizzle ?? false) as StagePlan);
    case 'NOLOCALS': // only restricts the opts after it
    case 'RASTER': // read where the grid is laid out (gridIndices)
      return ast;
  }
}

/** A kernel with a prefix of an opt list applied, and what the opts after it are checked against. */
interface Applied {
  k: UOp;
  ranges: UOp[];
  noLocals: boolean;
  raster: boolean;
}

// The heuristics probe growing opt lists of one kernel (each mostly a prefix of the next) before lowerKernel
// applies the chosen one: the prefixes applied to the last kernel are kept, so that each opt applies once.
let lastKernel: { ast: UOp; target: Target; prefixes: Map<string, Applied> } | undefined;

/**
 * Applies a kernel's opt list left to right; an illegal opt throws an Error saying why. The list is the
 * kernel's whole list: "TC comes first" and NOLOCALS are checked within it.
 */
export function applyOpts(ast: UOp, opts: readonly Opt[], target: Target = CPU_TARGET): UOp {
  if (lastKernel?.ast !== ast || lastKernel.target !== target)
    lastKernel = { ast, target, prefixes: new Map() };
  const { prefixes } = lastKernel;
  let at: Applied = { k: ast, ranges: kernelRanges(ast), noLocals: false, raster: false };
  let key = '';
  for (const [i, o] of opts.entries()) {
    key += `${printOpt(o)} `;
    const hit = prefixes.get(key);
    if (hit !== undefined) {
      at = hit;
      continue;
    }
    const { k, ranges, noLocals, raster } = at;
    const why =
      i > 0 && opts[i - 1]!.op === 'STAGE'
        ? 'STAGE must be the last opt'
        : illegal(o, { ast: k, ranges, target, first: i === 0, noLocals, raster });
    if (why !== undefined)
      throw new Error(`opt ${printOpt(o)} is illegal: ${why}; kernel axes: ${describeAxes(ranges)}`);
    const next = apply(k, o, target);
    const nextRanges = kernelRanges(next);
    // a split of a LOCAL, UPCAST or GROUP_REDUCE axis multiplies the slots GROUP_REDUCE shares take
    const local = target.grid?.localBytes;
    const shares = local === undefined || o.op !== 'SPLIT' ? 0 : groupShareBytes(next, nextRanges);
    if (shares > local!)
      throw new Error(
        `opt ${printOpt(o)} is illegal: its GROUP_REDUCE shares take ${shares} bytes of local memory, more than the target's ${local}; kernel axes: ${describeAxes(nextRanges)}`,
      );
    at = {
      k: next,
      ranges: nextRanges,
      noLocals: noLocals || o.op === 'NOLOCALS',
      raster: raster || o.op === 'RASTER',
    };
    prefixes.set(key, at);
  }
  return at.k;
}
