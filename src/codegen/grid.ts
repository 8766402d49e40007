// The grid of a GPU kernel: its output loops are not loops there. Each GLOBAL axis is the index of a
// workgroup and each LOCAL axis the index of a thread within one, read from a SPECIAL (gidxN, lidxN). Dimension
// 0 is the innermost axis, as on GPUs, where neighbouring threads of dimension 0 access neighbouring memory.
// A GROUP_REDUCE axis is a thread index too: each thread reduces its share, and the shares meet in LOCAL memory.
import { AddrSpace } from '../dtype.ts';
import { AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, substitute, UPat } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { constSize, kernelRanges, rangeArg } from './opt/axes.ts';
import type { Grid } from './opt/opts.ts';
import { rangesOf } from './scope.ts';

/** GPUs index workgroups and their threads in three dimensions; further axes share the last one. */
const DIMS = 3;

const rangesOfType = (ast: UOp, type: AxisType) =>
  ast.toposort().filter((u) => u.op === Ops.RANGE && u.argOf(Ops.RANGE).type === type);

/** The kernel with its output loops as GLOBAL axes: what a GPU target's opts split into workgroups and threads. */
export function outputsToGlobal(ast: UOp): UOp {
  const loops = rangesOfType(ast, AxisType.LOOP);
  return substitute(
    ast,
    new Map(loops.map((r) => [r, UOp.range(r.src[0]!, r.argOf(Ops.RANGE).id, AxisType.GLOBAL)])),
  );
}

/** a * b for sizes, folded where both are constants. */
const times = (a: UOp, b: UOp) =>
  a.op === Ops.CONST && b.op === Ops.CONST
    ? UOp.index(Number(a.constValue) * Number(b.constValue))
    : a.mul(b);

/** SPECIAL indices standing for ranges (outermost first) of one kind, in `dims` dimensions: 0 the innermost. */
function specials(ranges: readonly UOp[], prefix: string, to: Map<UOp, UOp>, dims = DIMS): void {
  const inner = [...ranges].reverse();
  inner.slice(0, dims - 1).forEach((r, d) => {
    to.set(r, UOp.make(Ops.SPECIAL, [r.src[0]!], `${prefix}${d}`));
  });
  const [last, ...more] = inner.slice(dims - 1);
  if (last === undefined) return;
  const name = `${prefix}${dims - 1}`;
  if (more.length === 0) {
    to.set(last, UOp.make(Ops.SPECIAL, [last.src[0]!], name));
    return;
  }
  // the last dimension counts through all the remaining axes, the innermost of them fastest
  const merged = [last, ...more];
  const sizes = merged.map((r) => r.src[0]!);
  const special = UOp.make(Ops.SPECIAL, [sizes.reduce(times)], name);
  let stride: UOp | undefined;
  merged.forEach((r, k) => {
    to.set(r, (stride === undefined ? special : special.idiv(stride)).mod(sizes[k]!));
    stride = stride === undefined ? sizes[k]! : times(stride, sizes[k]!);
  });
}

const isRange = (u: UOp) => u.op === Ops.RANGE;

// an END closes only loops; an AFTER waits only for effects (a SPECIAL is no loop it runs inside)
const dropIndices = new PatternMatcher([
  [
    new UPat({ op: Ops.END, name: 'e' }),
    ({ e }) => {
      const [body, ...ranges] = e!.src as [UOp, ...UOp[]];
      const loops = ranges.filter(isRange);
      if (loops.length === ranges.length) return undefined;
      return loops.length ? UOp.make(Ops.END, [body, ...loops]) : body;
    },
  ],
  [
    new UPat({ op: Ops.AFTER, name: 'a' }),
    ({ a }) => {
      const [buf, ...deps] = a!.src as [UOp, ...UOp[]];
      const kept = deps.filter((d) => isRange(d) || d.dtype.name !== 'index');
      if (kept.length === deps.length) return undefined;
      return kept.length ? UOp.make(Ops.AFTER, [buf, ...kept]) : buf;
    },
  ],
]);

/** The most workgroups a GPU's grid has in its second and third dimensions where the target does not say (CUDA's). */
const MAX_OUTER_GROUPS = 65535;

/** Whether GLOBAL ranges (outermost first) fit the grid's outer dimensions; else they all go in the first. */
function fitsOuterDims(ranges: readonly UOp[], most: number): boolean {
  const outer = [...ranges].reverse().slice(1);
  const second = outer.length ? constSize(outer[0]!) : 1;
  const third = outer.slice(1).reduce<number | undefined>((n, r) => {
    const size = constSize(r);
    return n === undefined || size === undefined ? undefined : n * size;
  }, 1);
  return second !== undefined && third !== undefined && second <= most && third <= most;
}

/**
 * Two GLOBAL ranges (outer, inner) read from one workgroup index g that walks bands of `rows` outer indices (the
 * RASTER opt): band g / (rows * inner), down its column (g % (rows * inner)) / rows, at row g % rows of it.
 */
function raster([outer, inner]: readonly UOp[], rows: number, to: Map<UOp, UOp>): void {
  const band = rows * constSize(inner!)!;
  const g = UOp.make(Ops.SPECIAL, [UOp.index(constSize(outer!)! * constSize(inner!)!)], 'gidx0');
  to.set(outer!, g.idiv(band).mul(rows).add(g.mod(rows)));
  to.set(inner!, g.mod(band).idiv(rows));
}

/**
 * The kernel with its GLOBAL and LOCAL ranges read from SPECIAL workgroup and thread indices; the GLOBAL ones in
 * bands of `rows` (RASTER) where given.
 */
export function gridIndices(ast: UOp, grid?: Grid, rows?: number): UOp {
  const to = new Map<UOp, UOp>();
  const byId = (a: UOp, b: UOp) => a.argOf(Ops.RANGE).id - b.argOf(Ops.RANGE).id;
  const global = rangesOfType(ast, AxisType.GLOBAL).sort(byId);
  if (rows !== undefined) raster(global, rows, to);
  else
    specials(global, 'gidx', to, fitsOuterDims(global, grid?.maxOuterGroups ?? MAX_OUTER_GROUPS) ? DIMS : 1);
  // a GROUP_REDUCE axis is a thread of the group too; a WARP axis (TC's lanes) is dimension 0 whole, so that its
  // 32 threads are the consecutive thread ids a warp is made of
  specials(
    [
      ...[...rangesOfType(ast, AxisType.LOCAL), ...rangesOfType(ast, AxisType.GROUP_REDUCE)].sort(byId),
      ...rangesOfType(ast, AxisType.WARP),
    ],
    'lidx',
    to,
  );
  if (to.size === 0) return ast;
  const indexed = graphRewrite(substitute(ast, to), dropIndices, { name: 'grid indices' });
  const threads = indexed
    .toposort()
    .filter((u) => u.op === Ops.SPECIAL && u.argOf(Ops.SPECIAL).startsWith('l'));
  return threads.length
    ? graphRewrite(indexed, oneWriter, { ctx: threads, name: 'one writer per element' })
    : indexed;
}

/**
 * A store to memory whose address does not depend on some thread index is made by every thread along it, with
 * the same value (a GROUP_REDUCE's result): only thread 0 along those indices stores.
 */
function gateStore(store: UOp, threads: readonly UOp[]): UOp | undefined {
  const [at, value, gate] = store.src as [UOp, UOp, UOp | undefined];
  const param = at.src[0]!.op === Ops.AFTER ? at.src[0]!.src[0]! : at.src[0]!;
  if (param.op !== Ops.PARAM || param.argOf(Ops.PARAM).addrspace !== AddrSpace.GLOBAL) return undefined;
  const uses = new Set(at.src[1]!.toposort());
  const idle = threads.filter((t) => !uses.has(t) && (gate === undefined || !gate.toposort().includes(t)));
  if (idle.length === 0) return undefined;
  const first = idle.map((t) => t.eq(UOp.index(0))).reduce((a, b) => a.and(b));
  return UOp.make(Ops.STORE, [at, value, gate === undefined ? first : gate.and(first)]);
}

const oneWriter = new PatternMatcher<readonly UOp[]>([
  [new UPat({ op: Ops.STORE, name: 's' }), ({ s }, threads) => gateStore(s!, threads)],
]);

/** Thread axes a partial result is kept apart by in LOCAL memory: every thread and UPCAST copy has its slot. */
const SLOT_AXES: ReadonlySet<AxisType> = new Set([AxisType.LOCAL, AxisType.UPCAST, AxisType.GROUP_REDUCE]);

interface GroupCtx {
  nextRange: number;
  nextBuffer: number;
  /** The kernel's LOCAL axes: every thread has its slot, also where its share does not depend on its index. */
  threads: readonly UOp[];
}

/**
 * The axes a share is stored apart by. Threads whose shares are equal (a factor that does not read their axis)
 * still store apart: one slot written by several threads is a race, however equal the values.
 */
function shareSlots(share: UOp, threads: readonly UOp[]): UOp[] {
  return [...new Set([...rangesOf(share), ...threads])]
    .filter((x) => SLOT_AXES.has(rangeArg(x).type))
    .sort((a, b) => rangeArg(a).id - rangeArg(b).id);
}

const isGroupAxis = (r: UOp) => rangeArg(r).type === AxisType.GROUP_REDUCE;

/**
 * Bytes of LOCAL memory the kernel's reduces over GROUP_REDUCE axes store their shares in, one buffer each
 * (`ranges`: the kernel's, kernelRanges).
 */
export function groupShareBytes(ast: UOp, ranges: readonly UOp[]): number {
  if (!ranges.some(isGroupAxis)) return 0;
  const threads = ranges.filter((r) => rangeArg(r).type === AxisType.LOCAL);
  let bytes = 0;
  for (const r of ast.toposort()) {
    if (r.op !== Ops.REDUCE || !r.src.slice(1).some(isGroupAxis)) continue;
    // the reduced value's other axes are REDUCE and UNROLL ones, which no slot is kept apart by
    const slots = shareSlots(r.src[0]!, threads);
    bytes += slots.reduce((n, x) => n * constSize(x)!, r.dtype.itemsize);
  }
  return bytes;
}

/** Row-major offset of the ranges' indices (constant sizes: opts split only those). */
function offsetOf(ranges: readonly UOp[], index: readonly UOp[]): UOp {
  let offset: UOp | undefined;
  let stride = 1;
  for (let k = ranges.length - 1; k >= 0; k--) {
    const term = stride === 1 ? index[k]! : index[k]!.mul(stride);
    offset = offset === undefined ? term : offset.add(term);
    stride *= constSize(ranges[k]!)!;
  }
  return offset ?? UOp.index(0);
}

/**
 * A reduce over GROUP_REDUCE axes in two steps: each thread reduces its share over the other axes and stores it
 * in LOCAL memory; after a BARRIER every thread reduces the shares of its group (the same value in each).
 */
function groupReduce(r: UOp, ctx: GroupCtx): UOp | undefined {
  const [value, ...ranges] = r.src as [UOp, ...UOp[]];
  const group = ranges.filter(isGroupAxis);
  if (group.length === 0) return undefined;
  const own = ranges.filter((x) => !group.includes(x));
  const share = own.length ? UOp.make(Ops.REDUCE, [value, ...own], r.argOf(Ops.REDUCE)) : value;
  const slots = shareSlots(share, ctx.threads);
  const size = slots.reduce((n, x) => n * constSize(x)!, 1);
  const shares = UOp.make(Ops.PARAM, [UOp.shapeVec([size])], {
    slot: ctx.nextBuffer++,
    dtype: r.dtype,
    addrspace: AddrSpace.LOCAL,
  });
  const stored = UOp.make(Ops.STORE, [UOp.make(Ops.INDEX, [shares, offsetOf(slots, slots)]), share]);
  const barrier = UOp.make(Ops.BARRIER, [stored]);
  const reads = group.map((g) => UOp.range(g.src[0]!, ctx.nextRange++, AxisType.REDUCE));
  const readAt = slots.map((x) => reads[group.indexOf(x)] ?? x);
  const load = UOp.make(Ops.LOAD, [
    UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [shares, barrier]), offsetOf(slots, readAt)]),
  ]);
  return UOp.make(Ops.REDUCE, [load, ...reads], r.argOf(Ops.REDUCE));
}

const groupRules = new PatternMatcher<GroupCtx>([
  [new UPat({ op: Ops.REDUCE, name: 'r' }), ({ r }, ctx) => groupReduce(r!, ctx)],
]);

/** The kernel with its reduces over GROUP_REDUCE axes combined through LOCAL memory. */
export function groupReduces(ast: UOp): UOp {
  const ranges = kernelRanges(ast);
  if (!ranges.some(isGroupAxis)) return ast;
  const ctx = {
    nextRange: Math.max(...ranges.map((r) => rangeArg(r).id)) + 1,
    nextBuffer: 0,
    threads: ranges.filter((r) => rangeArg(r).type === AxisType.LOCAL),
  };
  return graphRewrite(ast, groupRules, { ctx, name: 'group reduces' });
}

/** The LOCAL buffer a plain STORE writes, if it writes one. */
function localTarget(store: UOp): UOp | undefined {
  if (store.op !== Ops.STORE || store.arg !== null) return undefined;
  const at = store.src[0]!;
  return at.op === Ops.INDEX && at.src[0]!.addrspace === AddrSpace.LOCAL ? at.src[0]! : undefined;
}

const sameRanges = (a: ReadonlySet<UOp>, b: ReadonlySet<UOp>) =>
  a.size === b.size && [...a].every((r) => b.has(r));

/**
 * The kernel with one BARRIER for the shares of a register tile: expanded, each UPCAST copy of a group's reduce
 * stored its share and waited at its own BARRIER (80 a thread for a 4 x 4 x 5 tile). Barriers after plain stores
 * to one LOCAL buffer in the same loops become one after all of them, where no such store needs a load that one
 * of them orders (a later copy's share never reads an earlier copy's combine).
 */
export function oneShareBarrier(ast: UOp): UOp {
  const byBuffer = new Map<UOp, UOp[]>();
  for (const u of ast.toposort()) {
    if (u.op !== Ops.BARRIER || u.arg !== null || u.src.length !== 1) continue;
    const buffer = localTarget(u.src[0]!);
    if (buffer === undefined) continue;
    const same = byBuffer.get(buffer);
    if (same === undefined) byBuffer.set(buffer, [u]);
    else same.push(u);
  }
  const to = new Map<UOp, UOp>();
  for (const barriers of byBuffer.values()) {
    if (barriers.length < 2) continue;
    const stores = barriers.map((b) => b.src[0]!);
    const scope = rangesOf(stores[0]!);
    if (!stores.every((s) => sameRanges(rangesOf(s), scope))) continue;
    const waited = new Set(barriers);
    const below = UOp.sink(...stores).toposort();
    if (below.some((x) => waited.has(x))) continue;
    const one = UOp.make(Ops.BARRIER, stores);
    for (const b of barriers) to.set(b, one);
  }
  return to.size ? substitute(ast, to) : ast;
}
