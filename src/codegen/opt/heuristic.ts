// Hand-coded optimizations: the opts a kernel gets when none are given (NOOPT=1 turns them off).
import { AddrSpace, dtypes } from '../../dtype.ts';
import { ContextVar } from '../../helpers.ts';
import { ALU, AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { laneRange } from '../expand.ts';
import { contiguousLanes, stride, vectorDtype } from '../vectors.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';
import { applyOpts, type Opt, type Target } from './opts.ts';

export const NOOPT = new ContextVar('NOOPT', 0);
/** TC=0 keeps the heuristics from tensor cores (as tinygrad's TC); TC_OPT=2 lets them pad axes to the tile. */
export const TC = new ContextVar('TC', 1);
export const TC_OPT = new ContextVar('TC_OPT', 0);
/** Tensor cores that read float32 as tf32 (10 bits of mantissa) are chosen for float32 matmuls only when asked. */
export const ALLOW_TF32 = new ContextVar('ALLOW_TF32', 0);

/** Reduce loops at least this long are unrolled by UNROLL_BY, so the sum of each step's copies overlaps the next. */
const UNROLL_FROM = 16;
const UNROLL_BY = 4;
/** A reduce's UNROLL at least this wide becomes the lanes under UPCASTs (codegen/expand.ts's WIDE_UNROLL). */
const WIDE_LANES = 8;

/** At most this many value nodes (buffer, address, load, ops) in a reduced value: a plain sum, max or mean. */
const SMALL_BODY = 4;

/**
 * The reduce loops worth unrolling: plain reductions over loads with no gate and no division in their index
 * math. Bigger bodies (conv windows, masked loads) are left to the optimizer to come: copying their index
 * math four times may cost more than the overlapped sums save.
 */
function unrollable(ast: UOp): Set<UOp> {
  const out = new Set<UOp>();
  for (const u of ast.toposort()) {
    if (u.op !== Ops.REDUCE) continue;
    const body = u.src[0]!.toposort().filter((x) => x.dtype !== dtypes.index && x.op !== Ops.CONST);
    const plain = body.every((x) => x.op !== Ops.WHERE && !(x.op === Ops.LOAD && x.src.length > 1));
    const indexMath = u.src[0]!.toposort().some((x) => x.op === Ops.IDIV || x.op === Ops.MOD);
    if (plain && !indexMath && body.length <= SMALL_BODY) for (const r of u.src.slice(1)) out.add(r);
  }
  return out;
}

/** Kernels with fewer iterations than this run on one thread: starting threads costs microseconds. */
const THREAD_FROM = 1 << 16;

/** The largest of the factors that divides n. */
const dividing = (n: number, factors: readonly number[]) => factors.find((f) => n % f === 0);

/**
 * Lane counts for vectors of this dtype that fit one of the target's vector registers, widest first: a wider
 * vector type is split into several registers, and gcc moves its halves through memory (a 1024^3 matmul in
 * 16-lane vectors ran at 15 GFLOP/s on AVX2, in pairs of 8-lane vectors at 130).
 */
const laneCounts = (target: Target, itemsize: number) =>
  [16, 8, 4].filter((f) => f * itemsize <= target.vectorBytes);

const isLoop = (r: UOp) => {
  const { type } = r.argOf(Ops.RANGE);
  return type === AxisType.LOOP || type === AxisType.GLOBAL;
};

/** The two loads a sum of products multiplies (matmul, conv), if the kernel reduces one. */
function productLoads(ast: UOp): [UOp, UOp] | undefined {
  const loadOf = (u: UOp) => (u.op === Ops.CAST ? u.src[0]! : u);
  for (const r of ast.toposort()) {
    if (r.op !== Ops.REDUCE || r.argOf(Ops.REDUCE).op !== Ops.ADD) continue;
    for (const m of r.src[0]!.toposort()) {
      const [a, b] = m.src.map(loadOf);
      if (m.op === Ops.MUL && a?.op === Ops.LOAD && b?.op === Ops.LOAD) return [a, b];
    }
  }
  return undefined;
}

/**
 * The two operands of a sum of products: the sides of the product the sum takes where each holds a load, so
 * that elementwise math fused on a load (the relu of the layer before a matmul, the relu's mask on a
 * gradient) is an operand too; else the two loads a product inside it multiplies.
 */
function productOperands(ast: UOp): [UOp, UOp] | undefined {
  const hasLoad = (u: UOp) => u.toposort().some((x) => x.op === Ops.LOAD);
  for (const r of ast.toposort()) {
    if (r.op !== Ops.REDUCE || r.argOf(Ops.REDUCE).op !== Ops.ADD) continue;
    let m = r.src[0]!;
    while (m.op === Ops.CAST) m = m.src[0]!;
    if (m.op === Ops.MUL && m.src.every(hasLoad)) return [m.src[0]!, m.src[1]!];
  }
  return productLoads(ast);
}

/** Whether an operand is a load as it is (or cast), not math on loads. */
const isLoad = (u: UOp) => (u.op === Ops.CAST ? u.src[0]! : u).op === Ops.LOAD;

/** Whether a value (a load, an operand) depends on range r. */
const reads = (u: UOp, r: UOp) => u.toposort().includes(r);
const address = (load: UOp) => load.src[0]!.src[1]!;
/** The loads of an operand that read range r. */
const loadsReading = (operand: UOp, r: UOp) =>
  operand.toposort().filter((u) => u.op === Ops.LOAD && reads(address(u), r));

/**
 * Register tiling of a sum of products: the innermost output axis that only one operand reads becomes vector
 * lanes (one, two or four vectors of them; that operand's vectors are reused by every row), and an output
 * axis that operand does not read becomes rows (each row's scalar is reused by every lane), as many as half
 * the vector registers hold.
 */
function tile(ast: UOp, target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const ranges = kernelRanges(ast);
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  const lane = loops.filter((r) => reads(operands[0], r) !== reads(operands[1], r)).at(-1);
  if (lane === undefined) return [];
  const vector = reads(operands[0], lane) ? operands[0] : operands[1];
  const vectorLoads = loadsReading(vector, lane);
  const lanes = dividing(constSize(lane)!, laneCounts(target, vector.dtype.itemsize));
  // lanes that are not contiguous would gather (matrix-vector products reduce in lanes instead)
  if (lanes === undefined || !vectorLoads.every((l) => contiguousLanes(address(l), lane, lanes))) return [];
  const row = loops
    .filter((r) => r !== lane && !reads(vector, r))
    .sort((a, b) => constSize(b)! - constSize(a)!)[0];
  const splits: { r: UOp; factor: number; target: AxisType }[] = [];
  const upcast = (r: UOp, factor: number) => splits.push({ r, factor, target: AxisType.UPCAST });
  // half the registers hold accumulators, two vectors of lanes where 4 rows of them fit: on AVX-512 8 rows of
  // 2 x 16 lanes, on AVX2 4 rows of 2 x 8 (both measured best); four where each row's value is computed (the
  // relu of the layer before), so that it is computed for more columns at a time
  const budget = (target.registers * 4) / vector.dtype.itemsize / 2;
  const rowOperand = vector === operands[0] ? operands[1] : operands[0];
  const want = budget < 4 * 2 * lanes ? 1 : isLoad(rowOperand) ? 2 : Math.min(4, budget / (4 * lanes));
  upcast(lane, lanes);
  // the vectors from the lane axis, else from another axis only the vector operand reads (a panel's)
  const along =
    dividing(
      constSize(lane)! / lanes,
      [4, 2].filter((f) => f <= want),
    ) ?? 1;
  if (along > 1) upcast(lane, along);
  const beside = loops.filter((r) => r !== lane && reads(vector, r) && !reads(rowOperand, r)).at(-1);
  const more =
    (beside &&
      dividing(
        constSize(beside)!,
        [4, 2].filter((f) => f * along <= want),
      )) ??
    1;
  if (more > 1) upcast(beside!, more);
  let tile = lanes * along * more;
  const rows =
    row &&
    dividing(
      constSize(row)!,
      [16, 8, 4, 2].filter((f) => f * tile <= budget),
    );
  if (row !== undefined && rows !== undefined) {
    upcast(row, rows);
    tile *= rows;
  }
  // a small window (a conv's kernel) is unrolled whole, and where it slides along an output axis two
  // neighbours on that axis share most of their loads
  const windows = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE && (constSize(r) ?? 9) <= 4);
  for (const r of windows) splits.push({ r, factor: constSize(r)!, target: AxisType.UNROLL });
  const step = (r: UOp) => stride(address(vectorLoads[0]!), r);
  const slide = loops.find(
    (r) =>
      r !== lane &&
      r !== row &&
      constSize(r)! % 2 === 0 &&
      windows.some((w) => step(w) !== 0 && step(w) === step(r)),
  );
  const paired = slide !== undefined && tile * 2 <= budget;
  if (paired) upcast(slide, 2);
  // a split renumbers the axes after it: later axes are split first (a lane axis' lanes before its pairs)
  const order = splits
    .map((x, i) => ({ ...x, i }))
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r) || a.i - b.i);
  const opts: Opt[] = order.map(({ r, factor, target }) => ({
    op: 'SPLIT',
    axis: ranges.indexOf(r),
    factor,
    target,
  }));
  const columns = lanes * along * more * (paired ? 2 : 1);
  if (columns <= (rows ?? 1) || footprint(ast, vector) <= CACHE_BYTES) return opts;
  const tiled = applyOpts(ast, opts, target);
  return [...opts, ...rowsInnermost(tiled, productOperands(tiled)![operands.indexOf(vector)]!)];
}

/** A block that fits this stays in cache between sweeps: the smaller L2 of the machines measured (AMD znver3). */
const CACHE_BYTES = 512 * 1024;

/** The bytes a load reads over the whole kernel: its dtype by the sizes of the ranges its address uses. */
const footprint = (ast: UOp, operand: UOp) =>
  kernelRanges(ast)
    .filter((r) => reads(operand, r))
    .reduce((n, r) => n * (constSize(r) ?? 1), operand.dtype.itemsize);

/**
 * SWAPs that move the loops the vector load does not read (the rows) inside the ones it reads, keeping each
 * group's order. A tile of r rows by c columns reads a block of each load along the whole reduce; whichever
 * load's loops run outside keeps its block in cache while the inner loops sweep the other load. Rows inside,
 * the row load streams once per column block (M*K*N/c values); rows outside, the vector load streams once per
 * row block (M*K*N/r), unless all of it fits in cache. So the rows go inside when c > r and the vector load
 * does not fit: a 2048^3 matmul's 8x32 tile ran at 290 GFLOP/s so and 230 the other way, 4096^3 at 270 and
 * 120; a conv's 16x16 tile (its window's loads shared by neighbours) was faster as it was.
 */
function rowsInnermost(ast: UOp, vector: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  const loops = ranges.filter(isLoop);
  const want = [...loops.filter((r) => reads(vector, r)), ...loops.filter((r) => !reads(vector, r))];
  const at = loops.map((r) => ranges.indexOf(r));
  const now = [...loops];
  const opts: Opt[] = [];
  want.forEach((r, i) => {
    const j = now.indexOf(r);
    if (j === i) return;
    opts.push({ op: 'SWAP', axis: at[i]!, other: at[j]! });
    [now[i], now[j]] = [now[j]!, now[i]!];
  });
  return opts;
}

/** Copies of each operand in a tile across lanes of the reduce, where both are loads (4 x 4 ran as 8 x 2). */
const REDUCE_TILE = 4;

/**
 * Register tiling of a sum of products that reads contiguously only along its innermost reduce axis (A @ B^T:
 * the transposed operand, as a layer's input gradient reads the forward's weight panels): that axis becomes
 * vector lanes (an UNROLL of at least 8, which codegen makes the lanes under UPCASTs), and an output axis only
 * one operand reads is upcast, so each vector of the other is used by every copy. Each copy sums its own
 * vector, added up after the loop, in half the vector registers: 4 x 4 copies of two loads; where one operand
 * is computed (the gradient through a relu's mask), all of them copies of the loaded one, so each computed
 * vector serves them all. A 64x512 @ (512x512)^T input gradient on one AVX-512 core: 2.2 ms with the lanes
 * alone, 0.6 tiled 4 x 4; through a relu's mask 3.2 ms 4 x 4, 1.9 8 x 2, 1.4 16 x 1.
 */
function reduceTile(ast: UOp, target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const ranges = kernelRanges(ast);
  const inner = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE).at(-1);
  if (inner === undefined) return [];
  const loads = ast.toposort().filter((u) => u.op === Ops.LOAD && reads(address(u), inner));
  const itemsize = Math.max(...operands.map((o) => o.dtype.itemsize));
  const wide = laneCounts(target, itemsize).filter((f) => f >= WIDE_LANES);
  const lanes = dividing(constSize(inner) ?? 0, wide);
  if (lanes === undefined || !loads.length || !loads.every((l) => contiguousLanes(address(l), inner, lanes)))
    return [];
  let sums = (target.registers * 4) / itemsize / lanes / 2;
  const computed = operands.filter((o) => !isLoad(o));
  const copies: [UOp, UOp, number][] =
    computed.length === 1
      ? [[operands.find(isLoad)!, computed[0]!, sums]]
      : [
          [operands[0], operands[1], REDUCE_TILE],
          [operands[1], operands[0], REDUCE_TILE],
        ];
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  const splits: { r: UOp; factor: number; target: AxisType }[] = [
    { r: inner, factor: lanes, target: AxisType.UNROLL },
  ];
  for (const [mine, other, most] of copies) {
    const r = loops.filter((x) => reads(mine, x) && !reads(other, x)).at(-1);
    const factor =
      r &&
      dividing(
        constSize(r)!,
        [16, 8, 4, 2].filter((f) => f <= Math.min(sums, most)),
      );
    if (factor === undefined) continue;
    splits.push({ r: r!, factor, target: AxisType.UPCAST });
    sums /= factor;
  }
  // a split renumbers the axes after it: later axes first
  return splits
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r))
    .map(({ r, factor, target }) => ({ op: 'SPLIT', axis: ranges.indexOf(r), factor, target }));
}

/** Copies in a tile of scalars, at most 8 along one axis (8 x 2 ran faster than 4 x 4 and 16 x 1). */
const COPY_TILE = 16;

/** The ops computing a value (not its index math): what an operand costs each time it is read. */
const cost = (u: UOp) => u.toposort().filter((x) => x.dtype !== dtypes.index && ALU.has(x.op)).length;

/**
 * Copies of a sum of products that no vector rule fits (a conv's gradients: NCHW rows of 20 or 6, operands
 * computed through pooling, batch norm and a relu): an output axis only the cheaper operand reads is upcast,
 * so that each value of the costlier one serves its copies, then one only the costlier reads. beautiful_mnist
 * at batch 64 on one core: conv2's weight gradient 10.5 s without copies, 4.0 s 4 x 4, 2.1 s 8 x 2; a 3x3
 * conv's 1.1 s to 0.29 s.
 */
function copyTile(ast: UOp, _target: Target): Opt[] {
  const operands = productOperands(ast);
  if (operands === undefined) return [];
  const [cheap, costly] = cost(operands[0]) <= cost(operands[1]) ? operands : [operands[1], operands[0]];
  const ranges = kernelRanges(ast);
  const loops = ranges.filter((r) => isLoop(r) && constSize(r) !== undefined);
  const splits: { r: UOp; factor: number }[] = [];
  let room = COPY_TILE;
  for (const [mine, other] of [
    [cheap, costly],
    [costly, cheap],
  ] as const) {
    const only = loops.filter((x) => reads(mine, x) && !reads(other, x));
    const fits = (x: UOp) =>
      dividing(
        constSize(x)!,
        [8, 4, 2].filter((f) => f <= room),
      );
    const r = only.filter((x) => fits(x) !== undefined).sort((a, b) => fits(b)! - fits(a)!)[0];
    if (r === undefined) continue;
    splits.push({ r, factor: fits(r)! });
    room /= fits(r)!;
  }
  return splits
    .sort((a, b) => ranges.indexOf(b.r) - ranges.indexOf(a.r))
    .map(({ r, factor }) => ({ op: 'SPLIT', axis: ranges.indexOf(r), factor, target: AxisType.UPCAST }));
}

/** Ops the C renderer computes on whole vectors: a kernel of only these (and loads, stores) gains from lanes. */
const VECTOR_ARITHMETIC: ReadonlySet<Ops> = new Set([
  Ops.ADD,
  Ops.SUB,
  Ops.MUL,
  Ops.NEG,
  Ops.MULACC,
  Ops.DIV,
  Ops.RECIP,
  Ops.MAX,
  Ops.EXP2,
]);

/** Whether every value of an elementwise kernel is plain arithmetic on a vector type. */
const plainArithmetic = (ast: UOp) =>
  ast
    .toposort()
    .every(
      (u) =>
        u.dtype === dtypes.index ||
        !(ALU.has(u.op) || u.op === Ops.LOAD) ||
        ((VECTOR_ARITHMETIC.has(u.op) || u.op === Ops.LOAD) && vectorDtype(u.dtype)),
    );

/**
 * Vector lanes along the innermost output axis when every load that reads it and the store move contiguous
 * memory there: the partial results of a split sum, a reduction over the outer axis of a matrix, and
 * elementwise kernels of plain arithmetic (the panel copy of a matmul: 3.5 ms for 16 MiB as a loop of 16,
 * 1 ms as vectors). Each step then moves whole vectors.
 */
function outputLanes(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const inner = ranges.filter(isLoop).at(-1);
  const nodes = ast.toposort();
  const reduces = nodes.some((u) => u.op === Ops.REDUCE);
  if (inner === undefined || (!reduces && !plainArithmetic(ast))) return [];
  const moves = nodes.filter((u) => (u.op === Ops.LOAD || u.op === Ops.STORE) && reads(u, inner));
  const itemsize = Math.max(...moves.map((u) => (u.op === Ops.STORE ? u.src[1]! : u).dtype.itemsize));
  const lanes = dividing(constSize(inner) ?? 0, laneCounts(target, itemsize));
  if (
    lanes === undefined ||
    !moves.some((u) => u.op === Ops.LOAD) ||
    !moves.every((u) => contiguousLanes(address(u), inner, lanes))
  )
    return [];
  return [{ op: 'SPLIT', axis: ranges.indexOf(inner), factor: lanes, target: AxisType.UPCAST }];
}

/**
 * Vector lanes along the innermost reduce axis when every load reads it contiguously (a matrix-vector
 * product, a sum along rows): each lane sums its own elements, and the lanes are added after the loop.
 */
function unrollLanes(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const inner = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE).at(-1);
  if (inner === undefined) return [];
  const loads = ast.toposort().filter((u) => u.op === Ops.LOAD && reads(u, inner));
  if (loads.length === 0) return [];
  const itemsize = Math.max(...loads.map((l) => l.dtype.itemsize));
  const lanes = dividing(constSize(inner) ?? 0, laneCounts(target, itemsize));
  if (lanes === undefined) return [];
  if (!loads.every((l) => contiguousLanes(address(l), inner, lanes)) || constSize(inner)! < 4 * lanes)
    return [];
  const axis = ranges.indexOf(inner);
  const split = { op: 'SPLIT', axis, factor: lanes, target: AxisType.UNROLL } as const;
  // and four vectors a step, so the adds into the accumulator do not wait on each other
  const steps = constSize(inner)! / lanes;
  return steps % UNROLL_BY === 0 && steps >= UNROLL_FROM ? [split, { ...split, factor: UNROLL_BY }] : [split];
}

/** Loops outside a THREAD loop may repeat its parallel region at most this often (each costs microseconds). */
const MAX_REGIONS = 16;

/**
 * The outermost loop axis that divides among the threads split so, when the kernel is big enough to pay for
 * them (a batch of 3 on 2 threads: the next axis, its parallel region entered 3 times).
 */
function threads(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  const work = ranges.reduce((n, r) => n * (constSize(r) ?? 1), 1);
  if (target.threads < 2 || work < THREAD_FROM) return [];
  const counts = Array.from({ length: target.threads - 1 }, (_, i) => target.threads - i);
  let regions = 1;
  for (const [axis, r] of ranges.entries()) {
    const n = constSize(r);
    if (!isLoop(r) || n === undefined || regions > MAX_REGIONS) return [];
    const factor = dividing(n, counts);
    if (factor !== undefined) return [{ op: 'SPLIT', axis, factor, target: AxisType.THREAD, top: true }];
    regions *= n;
  }
  return [];
}

/**
 * TC on the innermost reduce axis where it is legal: the first of the target's tensor cores that takes the
 * kernel's dtypes (tinygrad's hand-coded optimizations also try TC first).
 */
function tensorCores(ast: UOp, target: Target): Opt[] {
  if (!TC.value) return [];
  const ranges = kernelRanges(ast);
  for (let axis = ranges.length - 1; axis >= 0; axis--) {
    if (rangeArg(ranges[axis]!).type !== AxisType.REDUCE) continue;
    for (const [tc, core] of target.tensorCores.entries()) {
      if (core.tf32 && !ALLOW_TF32.value) continue;
      const opt: Opt = { op: 'TC', axis, tc, opt: TC_OPT.value, mode: 1 };
      try {
        return [opt, ...tileUpcasts(applyOpts(ast, [opt], target))];
      } catch {
        // not this tensor core
      }
    }
  }
  return [];
}

/**
 * Output tiles a lane computes along each tile axis TC left: 4 where the axis has a multiple of 4 and at least
 * 8 tiles (tinygrad's hand-coded TC opts upcast M and N by 4 too), else 2 where it has an even count of at least
 * 4 (half stay workgroups). Each WMMA operand fragment a lane loads then feeds 4 (or 2) instructions: a 4 x 4
 * tile loads half the operand bytes per WMMA a 2 x 2 one does.
 */
function tileUpcasts(ast: UOp): Opt[] {
  const wmma = ast.toposort().find((u) => u.op === Ops.WMMA)!;
  // TC's tiles of M and N: the output axes one operand reads and the other does not
  const tiles = kernelRanges(ast).flatMap((r, axis) =>
    isLoop(r) &&
    (constSize(r) ?? 1) % 2 === 0 &&
    constSize(r)! >= 4 &&
    wmma.src[0]!.toposort().includes(r) !== wmma.src[1]!.toposort().includes(r)
      ? [axis]
      : [],
  );
  // a split adds an axis after the one split: later axes first keeps the numbers
  return tiles.reverse().map((axis) => {
    const n = constSize(kernelRanges(ast)[axis]!)!;
    return { op: 'SPLIT', axis, factor: n % 4 === 0 && n >= 8 ? 4 : 2, target: AxisType.UPCAST };
  });
}

/** Threads a GPU workgroup gets from the heuristics, at most, and the LOCAL factors they try, largest first. */
const LOCAL_THREADS = 128;
const LOCAL_FACTORS = [32, 16, 8, 4, 2];

/** A kernel with at most this many outputs shares its reduction among the threads of a group (GROUP_REDUCE). */
const GROUP_OUTPUTS = 2048;
const GROUP_FACTORS = [64, 32, 16, 8];

/**
 * GPU workgroups. Few outputs over a long reduction: the threads of a group share the reduction (GROUP_REDUCE
 * of the innermost reduce axis long enough). Then LOCAL splits of up to three output axes, innermost first (neighbouring threads
 * access neighbouring memory), within the threads left.
 */
function workgroups(ast: UOp, target: Target): Opt[] {
  const opts: Opt[] = [];
  let ranges = kernelRanges(ast);
  // a tensor core's warp and a coalescing GROUP_REDUCE (coalescedReduce) are threads of the group already
  const shared = ranges.filter((r) => SHARED_AXES.has(rangeArg(r).type));
  let threads = shared.reduce((n, r) => n * constSize(r)!, 1);
  const most = Math.min(LOCAL_THREADS, target.grid!.maxThreads);
  const budget = () => most / threads;
  const outputs = ranges.reduce(
    (n, r) => (rangeArg(r).type === AxisType.GLOBAL ? n * (constSize(r) ?? GROUP_OUTPUTS) : n),
    1,
  );
  // the innermost reduce axis long enough to share (each thread keeps at least 4 of its values)
  const groupOf = (r: UOp) => {
    const n = rangeArg(r).type === AxisType.REDUCE ? (constSize(r) ?? 0) : 0;
    return dividing(
      n,
      GROUP_FACTORS.filter((f) => f <= budget() && f * 4 <= n),
    );
  };
  let reduce = ranges.length - 1;
  while (reduce >= 0 && groupOf(ranges[reduce]!) === undefined) reduce--;
  const group = reduce < 0 ? undefined : groupOf(ranges[reduce]!);
  if (outputs <= GROUP_OUTPUTS && group !== undefined && shared.length === 0) {
    opts.push({ op: 'SPLIT', axis: reduce, factor: group, target: AxisType.GROUP_REDUCE });
    threads *= group;
    ranges = kernelRanges(applyOpts(ast, opts, target));
  }
  // a split adds a range after the one split, so going from the innermost axis outwards keeps axis numbers;
  // a second pass fills the group where the first left it small (one output axis: 32 threads, then 4 x 32)
  let made = 0;
  for (let pass = 0; pass < 2 && threads < most; pass++)
    for (let axis = ranges.length - 1; axis >= 0 && made < 3; axis--) {
      const n = constSize(ranges[axis]!);
      if (rangeArg(ranges[axis]!).type !== AxisType.GLOBAL || n === undefined) continue;
      const factor = dividing(
        n,
        LOCAL_FACTORS.filter((f) => f <= budget()),
      );
      if (factor === undefined) continue;
      opts.push({ op: 'SPLIT', axis, factor, target: AxisType.LOCAL });
      threads *= factor;
      made++;
      ranges = kernelRanges(applyOpts(ast, opts, target));
    }
  return opts;
}

const SHARED_AXES: ReadonlySet<AxisType> = new Set([AxisType.WARP, AxisType.GROUP_REDUCE]);

/** A reduce axis at least this long may be shared by threads so that a warp reads along it; at most a warp's. */
const COALESCE_FROM = 8;
const WARP_THREADS = 32;

/** The global loads of a kernel (not accumulators or shared memory). */
const globalLoads = (ast: UOp) =>
  ast.toposort().filter((u) => u.op === Ops.LOAD && u.src[0]!.addrspace === AddrSpace.GLOBAL);

/**
 * Reads along a reduce axis on a GPU. LOCAL axes are output axes, so neighbouring threads read neighbouring
 * memory only where some output axis is contiguous in the loads. A conv's weight gradient reads
 * x[b, ci, y + ky, x + kx] into outputs (co, ci, ky, kx): contiguous only along the reduce axis x (and the
 * output kx, 5 long), so threads along ci were 576 floats apart, 32 sectors a warp's request. Where a load
 * reads the innermost reduce axis contiguously and none reads an output axis a LOCAL split could take so, the
 * threads of a group share that axis (GROUP_REDUCE by its largest divisor up to a warp): a warp then reads a
 * run of consecutive elements (other loads, a pooled gradient read at x / 2, are no farther apart than
 * along an output axis).
 */
function coalescedReduce(ast: UOp, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  if (ranges.some((r) => rangeArg(r).type === AxisType.WARP)) return [];
  const r = ranges.filter((x) => rangeArg(x).type === AxisType.REDUCE).at(-1);
  const axis = r === undefined ? -1 : ranges.indexOf(r);
  const n = r === undefined ? undefined : constSize(r);
  if (r === undefined || n === undefined || n < COALESCE_FROM) return [];
  // loads in the reduce loops: one before them (a per-channel bias or scale, read contiguously along an
  // output axis) is read once a thread, however its threads are laid out
  const reduces = ranges.filter((x) => rangeArg(x).type === AxisType.REDUCE);
  const loads = globalLoads(ast).filter((l) => reduces.some((x) => reads(l, x)));
  if (!loads.some((l) => stride(address(l), r) === 1)) return [];
  const localAxis = (o: UOp) =>
    rangeArg(o).type === AxisType.GLOBAL && dividing(constSize(o) ?? 0, LOCAL_FACTORS) !== undefined;
  if (ranges.some((o) => localAxis(o) && loads.some((l) => stride(address(l), o) === 1))) return [];
  const most = Math.min(WARP_THREADS, LOCAL_THREADS, target.grid!.maxThreads);
  const factor = Array.from({ length: most }, (_, i) => most - i).find((f) => n % f === 0)!;
  return factor < COALESCE_FROM ? [] : [{ op: 'SPLIT', axis, factor, target: AxisType.GROUP_REDUCE }];
}

/** A GPU kernel keeps at least this many workgroups after its register tiles (132 SMs on an H100, several each). */
const TILE_MIN_GROUPS = 1024;
const GPU_TILE = 4;

/**
 * Register tiles on a GPU: each thread computes GPU_TILE outputs along the innermost workgroup axis (an
 * elementwise kernel: fewer, fuller threads) or GPU_TILE x GPU_TILE along the two innermost (a matmul or conv:
 * each loaded value is used four times from a register), where enough workgroups remain. The LOCAL axes stay
 * innermost, so each step of a thread's tile is still a coalesced row of the group. BEAM on an H100 chose such
 * tiles (a 4096^3 float32 matmul: 5.4 TFLOP/s with LOCAL axes alone, 27 with 8 x 4 tiles).
 */
function gpuTiles(ast: UOp): Opt[] {
  const ranges = kernelRanges(ast);
  if (ranges.some((r) => rangeArg(r).type === AxisType.WARP)) return [];
  let groups = ranges.reduce(
    (n, r) => (rangeArg(r).type === AxisType.GLOBAL ? n * (constSize(r) ?? 1) : n),
    1,
  );
  if (ranges.some((r) => rangeArg(r).type === AxisType.GROUP_REDUCE)) return sidedTiles(ast, groups);
  const reduces = ranges.some((r) => rangeArg(r).type === AxisType.REDUCE);
  if (reduces && productLoads(ast) === undefined) return [];
  const opts: Opt[] = [];
  // innermost first: a split adds its range after the one split, so outer axis numbers stay
  for (let axis = ranges.length - 1; axis >= 0 && opts.length < (reduces ? 2 : 1); axis--) {
    const n = constSize(ranges[axis]!);
    if (rangeArg(ranges[axis]!).type !== AxisType.GLOBAL || n === undefined || n % GPU_TILE !== 0) continue;
    if (groups / GPU_TILE < TILE_MIN_GROUPS) break;
    opts.push({ op: 'SPLIT', axis, factor: GPU_TILE, target: AxisType.UPCAST });
    groups /= GPU_TILE;
  }
  return reduces && opts.length < 2 ? [] : opts;
}

/**
 * Register tiles of a sum of products whose threads share the reduce (coalescedReduce): GPU_TILE outputs along
 * an output axis that only one factor reads, for each factor, so that each value a thread computes is used
 * GPU_TILE times. A conv's weight gradient behind BatchNorm and relu recomputes both factors per product (the
 * gradient, 15 ops, for every ci, ky, kx; the activation for every co): 30 ops a multiply-add, instruction-bound
 * on an H100 (beautiful_mnist's 5x5 one: 6.3 ms, 2.6 ms with co x ci tiles of 4 x 4).
 */
function sidedTiles(ast: UOp, groups: number): Opt[] {
  const sides = productOperands(ast);
  if (sides === undefined || groups / GPU_TILE ** 2 < TILE_MIN_GROUPS) return [];
  const ranges = kernelRanges(ast);
  // the innermost output axis that side reads and the other does not
  const only = (side: UOp, other: UOp) => {
    for (let axis = ranges.length - 1; axis >= 0; axis--) {
      const r = ranges[axis]!;
      const n = constSize(r);
      if (rangeArg(r).type !== AxisType.GLOBAL || n === undefined || n % GPU_TILE !== 0) continue;
      if (reads(side, r) && !reads(other, r)) return axis;
    }
    return -1;
  };
  const axes = [only(sides[0], sides[1]), only(sides[1], sides[0])];
  if (axes.some((a) => a < 0)) return [];
  // a split adds its range after the one split: the later axis first keeps the other's number
  return axes
    .sort((a, b) => b - a)
    .map((axis) => ({ op: 'SPLIT', axis, factor: GPU_TILE, target: AxisType.UPCAST }));
}

/** Plain reduce loops unrolled by UNROLL_BY (scalar copies whose sum overlaps the next step's). */
function unrolls(ast: UOp): Opt[] {
  const opts: Opt[] = [];
  const candidates = unrollable(ast);
  kernelRanges(ast).forEach((r, i) => {
    const n = r.src[0]!.op === Ops.CONST ? Number(r.src[0]!.constValue) : 0;
    if (
      candidates.has(r) &&
      r.argOf(Ops.RANGE).type === AxisType.REDUCE &&
      n >= UNROLL_FROM &&
      n % UNROLL_BY === 0
    )
      // each split adds a range after this one, so later axes move by one per opt made
      opts.push({ op: 'SPLIT', axis: i + opts.length, factor: UNROLL_BY, target: AxisType.UNROLL });
  });
  return opts;
}

/** Vector lanes on the CPU: the first of these rules that applies. */
const VECTOR_RULES = [tile, reduceTile, outputLanes, unrollLanes, copyTile];

/** Tensor-core sums of products with at least this many multiply-adds stage their operands (256^3). */
const STAGE_FROM = 1 << 24;
/** K-tiles of a WMMA a staged tile holds: 32 elements of K between BARRIERs. */
const STAGE_TILES = 2;

/**
 * STAGE (src/codegen/opt/stage.ts) on the reduce axis of a big matmul after TC (one reduce axis), split by
 * UNROLL so that each tile holds STAGE_TILES WMMA steps of K (fewer BARRIERs), where the tiles fit the
 * target's local memory; else unsplit; else none. The workgroup then reads each operand element from global
 * memory once instead of once per warp that uses it: a 64 x 128 block (4 x 4 WMMAs a warp, 4 warps) moves
 * 0.023 bytes a flop from global memory where its warps alone moved 0.047. (Float32 kernels are left to
 * BEAM: their 4 x 16 thread tiles issue as many shared loads as global ones.)
 */
function stage(ast: UOp, work: number, target: Target): Opt[] {
  const ranges = kernelRanges(ast);
  // one reduce axis (a matmul's K): a conv's window loops would stage a small tile a step
  const reduces = ranges.filter((r) => rangeArg(r).type === AxisType.REDUCE);
  if (work < STAGE_FROM || reduces.length !== 1) return [];
  const axis = ranges.indexOf(reduces[0]!);
  const staged: Opt = { op: 'STAGE', axis };
  const unroll: Opt = { op: 'SPLIT', axis, factor: STAGE_TILES, target: AxisType.UNROLL };
  for (const opts of [[unroll, staged], [staged]]) {
    try {
      applyOpts(ast, opts, target);
      return opts;
    } catch {
      // tiles too big for local memory, or not a multiple of the group's threads
    }
  }
  return [];
}

/**
 * At most this many ops in a kernel's body once its UPCAST and UNROLL axes are expanded. A register tile copies
 * every op that depends on a tiled axis: a matmul's 8 x 32 tile copies a multiply-add (about 600 ops), but the
 * transformer's attention backward recomputes exp2 of each masked score inside its sum, and a 16 x 16 tile of
 * that body rendered 350-590 KB of C, each 4-6 s of gcc CPU (a vectorized 3x3 conv tile: about 1500 ops).
 */
export const MAX_BODY_OPS = 2048;
/** Ops that render as many (the C renderer's exp2 is a polynomial of about 20), counted as that many. */
const OP_COST: ReadonlyMap<Ops, number> = new Map([
  [Ops.EXP2, 20],
  [Ops.LOG2, 20],
  [Ops.SIN, 20],
]);

const expands = (r: UOp) => {
  const { type } = rangeArg(r);
  return type === AxisType.UPCAST || type === AxisType.UNROLL;
};

/**
 * The ops a kernel's body emits once expanded: each value op once per combination of the UPCAST and UNROLL
 * axes it depends on (a reduce's sum once per combination of its operand's). On a target with vectors, the
 * lane axis' copies are one vector op, except where an op reads a condition that varies by lane: the
 * lowering computes it and what it reads lane by lane (src/codegen/vectors.ts), a causal mask's scores say.
 */
export function expandedOps(ast: UOp, target: Target): number {
  const expanding = kernelRanges(ast).filter(expands);
  const bit = new Map(expanding.map((r, i) => [r, 1 << i]));
  const masks = new Map<UOp, number>();
  const nodes = ast.toposort();
  for (const u of nodes) {
    let mask = bit.get(u) ?? 0;
    if (u.op === Ops.REDUCE) {
      mask = masks.get(u.src[0]!)!;
      for (const r of u.src.slice(1)) mask &= ~(bit.get(r) ?? 0);
    } else for (const s of u.src) mask |= masks.get(s) ?? 0;
    masks.set(u, mask);
  }
  const lanes = target.vectors ? laneRange(ast) : undefined;
  const laneBit = lanes === undefined ? 0 : bit.get(lanes)!;
  const byLane = (u: UOp) => (masks.get(u)! & laneBit) !== 0;
  const scalar = new Set<UOp>();
  for (const u of nodes)
    if (u.src.some((s) => s.dtype === dtypes.bool && byLane(s)))
      for (const x of u.toposort()) if (byLane(x)) scalar.add(x);
  const copies = (u: UOp, mask: number) =>
    expanding.reduce((n, r, i) => {
      const b = 1 << i;
      return mask & b && (b !== laneBit || scalar.has(u)) ? n * constSize(r)! : n;
    }, 1);
  let ops = 0;
  for (const u of nodes) {
    if (u.op === Ops.REDUCE) ops += copies(u.src[0]!, masks.get(u.src[0]!)!);
    else if ((ALU.has(u.op) || u.op === Ops.LOAD) && u.dtype !== dtypes.index)
      ops += copies(u, masks.get(u)!) * (OP_COST.get(u.op) ?? 1);
  }
  return ops;
}

/**
 * opts with their register tiles shrunk until the expanded body has at most MAX_BODY_OPS ops: the UPCAST or
 * UNROLL split of the largest factor is halved (the axes stay as they are) while one is more than 2.
 */
export function capBody(ast: UOp, opts: Opt[], target: Target): Opt[] {
  let out = opts;
  for (;;) {
    const splits = out.flatMap((o, i) =>
      o.op === 'SPLIT' && (o.target === AxisType.UPCAST || o.target === AxisType.UNROLL) && o.factor > 2
        ? [i]
        : [],
    );
    if (splits.length === 0 || expandedOps(applyOpts(ast, out, target), target) <= MAX_BODY_OPS) return out;
    // the largest factor, the last of equals (the lanes' split comes before its rows')
    const factor = (i: number) => (out[i] as Extract<Opt, { op: 'SPLIT' }>).factor;
    const at = splits.reduce((a, i) => (factor(i) >= factor(a) ? i : a));
    out = out.map((o, i) => (i === at && o.op === 'SPLIT' ? { ...o, factor: o.factor / 2 } : o));
  }
}

/** The opts a kernel gets for the target (see uncappedOpts), with their register tiles capped by capBody. */
export function handCodedOpts(ast: UOp, target: Target): Opt[] {
  return capBody(ast, uncappedOpts(ast, target), target);
}

/** The opts for the target: threads, then vector lanes (the first rule that applies), then unrolls. */
function uncappedOpts(ast: UOp, target: Target): Opt[] {
  if (NOOPT.value) return [];
  if (target.grid !== undefined) {
    const tc = tensorCores(ast, target);
    // else each thread computes a vector of outputs where its loads and store are contiguous (float4 on CUDA)
    const vectors = tc.length ? tc : target.vectors ? outputLanes(ast, target) : [];
    const lanes = vectors.length ? vectors : coalescedReduce(ast, target);
    const groups = [...lanes, ...workgroups(applyOpts(ast, lanes, target), target)];
    const grid = tc.length ? groups : [...groups, ...gpuTiles(applyOpts(ast, groups, target))];
    const unrolled = [...grid, ...unrolls(applyOpts(ast, grid, target))];
    if (!tc.length) return unrolled;
    const work = kernelRanges(ast).reduce((n, r) => n * (constSize(r) ?? 1), 1);
    return [...unrolled, ...stage(applyOpts(ast, unrolled, target), work, target)];
  }
  const opts = [...threads(ast, target)];
  const threaded = applyOpts(ast, opts, target);
  if (target.vectors)
    for (const rule of VECTOR_RULES) {
      const lanes = rule(threaded, target);
      opts.push(...lanes);
      if (lanes.length) break;
    }
  const unrolled = opts.some((o) => o.op === 'SPLIT' && o.target === AxisType.UNROLL);
  return unrolled ? opts : [...opts, ...unrolls(applyOpts(ast, opts, target))];
}
