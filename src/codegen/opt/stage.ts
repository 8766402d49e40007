// The STAGE opt: the operands of a sum of products (a matmul, a conv) go through LOCAL memory. Each iteration of
// the staged reduce axis, the workgroup copies the block of each operand its threads read (a rectangle of the
// buffer: rows of a row-major matrix) into a LOCAL tile, every thread copying 16-byte vectors of it so that
// neighbouring threads read neighbouring memory; after a BARRIER the threads read their elements from the tile.
// An operand read by many threads of the group (A by every warp along N) then leaves global memory once. The
// tiles are double-buffered by the parity of the iteration (counting the reduce loops around the staged one), so
// one BARRIER an iteration orders both hazards: a thread writes a buffer only after every thread passed the
// BARRIER that follows the last reads of it. SIMT checks both in CI (test/codegen/stage.test.ts). Synchronous
// copies are loaded an iteration ahead into registers, so that a copy's latency hides behind the products; with a
// depth, the copies are asynchronous (cp.async) and run that many iterations ahead through more buffers.
// A tile whose threads read several of its rows at one column (A of a float32 matmul) is stored column by column.
// Tile rows are padded by 16 bytes, so that the rows a warp reads together start in different banks; or, where
// asked (`swizzle`) and a row of 16-bit elements is a power of two of 16-byte chunks, unpadded and XOR-swizzled
// (ParamArg.swizzle), which also spreads a warp's copies of short rows (a 64-byte row of A's K) over all banks.
// A warpgroup tensor core's swizzled tile whose rows are wider than 128 bytes (B of wgmma m64n128 / m64n256) is
// kept in blocks of 64 columns, each block's rows together, as the core's matrix descriptor reads it (the blocks
// its leading byte offset apart).
import { AddrSpace, dtypes } from '../../dtype.ts';
import { positionOf, tensorCoreNamed } from '../../runtime/tensor-cores.ts';
import { AxisType, Ops, type Swizzle } from '../../uop/ops.ts';
import { substitute } from '../../uop/pattern.ts';
import { UOp } from '../../uop/uop.ts';
import { affine } from '../affine.ts';
import { rangesOf } from '../scope.ts';
import { constSize, kernelRanges, rangeArg } from './axes.ts';

/** Axis types whose iterations a workgroup's threads or registers cover: a block of the kernel's work. */
const BLOCK: ReadonlySet<AxisType> = new Set([
  AxisType.LOCAL,
  AxisType.WARP,
  AxisType.UPCAST,
  AxisType.UNROLL,
]);
/** Axis types whose iterations are the threads of a workgroup, the last one fastest. */
const THREADS: ReadonlySet<AxisType> = new Set([AxisType.LOCAL, AxisType.WARP]);
/** Loops around a sum of products, which a register holding its copies starts over in. */
const AROUND: ReadonlySet<AxisType> = new Set([AxisType.LOOP, AxisType.REDUCE]);
/** Bytes each thread copies at once (ld.global.v4, st.shared.v4). */
const COPY_BYTES = 16;
/** Bytes one asynchronous copy (cp.async) moves. */
const ASYNC_BYTES: ReadonlySet<number> = new Set([4, 8, 16]);
/** Elements of a row of the 128-byte swizzle, the widest a warpgroup tensor core's descriptor reads (16-bit). */
const DESCRIPTOR_ROW = 64;
/** Bytes added to each row of a tile, so that the rows a warp reads together start in different banks. */
const ROW_PAD_BYTES = 16;

const sum = (terms: Iterable<[UOp, number]>, constant = 0): UOp => {
  let out: UOp | undefined;
  for (const [t, c] of terms) {
    const term = c === 1 ? t : t.mul(c);
    out = out === undefined ? term : out.add(term);
  }
  return out === undefined ? UOp.index(constant) : constant === 0 ? out : out.add(constant);
};

/** One load's address: the part the block shares (its base) and the part over the block's axes. */
interface Address {
  load: UOp;
  base: Map<UOp, number>;
  block: Map<UOp, number>;
  constant: number;
}

/** A buffer's tile: rows of `cols` elements `stride` apart from base, copied into rows of `pitch` elements. */
interface Tile {
  buffer: UOp;
  base: UOp;
  stride: number;
  rows: number;
  cols: number;
  /** Elements a tile row (or a pair of rows, where `pairs`) takes in LOCAL memory, padding included. */
  pitch: number;
  vector: number;
  /**
   * Rows 2i and 2i + 1 interleaved, element by element: where a fragment holds an element and the one below it
   * (B of mma.m16n8k16: rows k and k + 1 of a column), so that the two are neighbours and load as one half2.
   */
  pairs: boolean;
  /** Unpadded rows (pitch = cols) in a swizzled layout, or undefined: padded rows. */
  swizzle: Swizzle | undefined;
  /**
   * Columns kept together, the tile's rows of one block before the next block's (element (r, c) at
   * (c / columnBlock) rows columnBlock + r columnBlock + c % columnBlock), or undefined: whole rows.
   */
  columnBlock: number | undefined;
  /**
   * Stored column by column (element (r, c) at c pitch + r, `pitch` then the elements a column takes): where each
   * thread reads several rows of one column at a time (readsDownColumns).
   */
  transposed: boolean;
  addresses: Address[];
}

/** Where an address's block part falls in a tile of rows `stride` apart: (row, column), both as sums. */
function place(a: Address, stride: number): [Map<UOp, number>, Map<UOp, number>, number, number] {
  const rows = new Map<UOp, number>();
  const cols = new Map<UOp, number>();
  for (const [t, c] of a.block) c >= stride ? rows.set(t, c / stride) : cols.set(t, c);
  return [rows, cols, Math.floor(a.constant / stride), a.constant % stride];
}

/** The extent of a sum of non-negative atoms: its largest value plus one. */
const extent = (terms: Map<UOp, number>, constant: number) =>
  [...terms].reduce((n, [t, c]) => n + c * t.vmax, constant) + 1;

interface Rectangle {
  stride: number;
  rows: number;
  cols: number;
}

/**
 * The rectangles of rows `stride` apart (a coefficient or a constant offset: the next row of a fragment, k + 1
 * of B) covering every address with the least area, the widest rows (vector copies) first.
 */
function rectangles(addresses: readonly Address[]): Rectangle[] {
  const strides = addresses.flatMap((a) => [...a.block.values(), ...(a.constant > 0 ? [a.constant] : [])]);
  const found: Rectangle[] = [];
  for (const stride of [...new Set(strides), Number.POSITIVE_INFINITY]) {
    let [rows, cols] = [1, 1];
    let fits = true;
    for (const a of addresses) {
      if ([...a.block.values()].some((c) => c >= stride && c % stride !== 0)) fits = false;
      const [r, c, r0, c0] = place(a, stride);
      rows = Math.max(rows, extent(r, r0));
      cols = Math.max(cols, extent(c, c0));
    }
    if (fits && cols <= stride) found.push({ stride, rows, cols });
  }
  const least = Math.min(...found.map((r) => r.rows * r.cols));
  return found.filter((r) => r.rows * r.cols === least).sort((x, y) => y.cols - x.cols);
}

/**
 * Whether an address's column (in a tile of rows `stride` apart) splits into a block of `width` columns and a
 * column inside it term by term: terms whose coefficient is a multiple of the width, and the others with the
 * constant's remainder staying inside one block.
 */
function splitsIntoBlocks(a: Address, stride: number, width: number): boolean {
  const [, cols, , c0] = place(a, stride);
  const inside = new Map([...cols].filter(([, c]) => c % width !== 0));
  return extent(inside, c0 % width) <= width;
}

/** Where a column (terms and a constant) of a tile in column blocks lies: its block's start and the column in it. */
function blockedColumn(t: Tile, [terms, constant]: [Map<UOp, number>, number]): UOp {
  const width = t.columnBlock!;
  const block = new Map<UOp, number>();
  const inside = new Map<UOp, number>();
  for (const [x, c] of terms)
    if (c % width === 0) block.set(x, (c / width) * t.rows * width);
    else inside.set(x, c);
  const start = Math.floor(constant / width) * t.rows * width;
  return sum(block, start).add(sum(inside, constant % width));
}

/** Whether a fragment (a STACK) holds an element and the one a row below it side by side, and row steps are even. */
function fragmentPairs(addresses: readonly Address[], stride: number, fragments: readonly UOp[]): boolean {
  if (!addresses.every((a) => [...a.block.values()].every((c) => c < stride || (c / stride) % 2 === 0)))
    return false;
  const at = new Map(addresses.map((a) => [a.load, a]));
  const sameTerms = (a: Address, b: Address) =>
    a.block.size === b.block.size && [...a.block].every(([t, c]) => b.block.get(t) === c);
  // elements 2i and 2i + 1 of a fragment: what src/codegen/neighbours.ts reads as one vector when neighbours
  return fragments.some((f) =>
    f.src.some((l, i) => {
      const [a, b] = [at.get(l), at.get(f.src[i + 1]!)];
      return i % 2 === 0 && a && b && sameTerms(a, b) && b.constant - a.constant === stride;
    }),
  );
}

/**
 * Whether the threads read a tile down its columns: only reduce axes step its columns, and a register axis steps
 * its rows one at a time (A of a float32 matmul, M by K, read as 4 rows of one k). Stored column by column, those
 * rows are neighbours that a thread loads as one vector; stored by rows, a thread loads each row's run of k
 * instead, as many vector loads, but the 4 x 4 products then take their operands from registers that ptxas
 * places in the same bank, and the scheduler waits on them (H100, 4096^3 float32: 40.6 -> 44.9 TFLOP/s, stalls
 * on dispatch 0.95 -> 0.44 cycles an instruction, by Nsight Compute).
 */
function readsDownColumns(addresses: readonly Address[], stride: number): boolean {
  const type = (t: UOp) => (t.op === Ops.RANGE ? rangeArg(t).type : undefined);
  const reduce = (t: UOp) => type(t) === AxisType.REDUCE || type(t) === AxisType.UNROLL;
  return addresses.every((a) => {
    const [rows, cols] = place(a, stride);
    return (
      [...cols.keys()].every(reduce) && [...rows].some(([t, c]) => c === 1 && type(t) === AxisType.UPCAST)
    );
  });
}

/** The staged loads of one buffer as a tile, or why they cannot be. */
function tileOf(
  buffer: UOp,
  loads: readonly UOp[],
  fragments: readonly UOp[],
  isBlock: (r: UOp) => boolean,
  threads: number,
  async: boolean,
  swizzle: boolean,
  /** Where a warpgroup tensor core reads the tile: the distance of its operand's rows in the buffer. */
  operandRows: number | undefined,
): Tile | string {
  const addresses: Address[] = [];
  for (const load of loads) {
    const lin = affine(load.src[0]!.src[1]!);
    if (lin === undefined) return 'an address is not a sum of multiples of index values';
    if (lin.constant < 0) return 'an address steps back by a constant (a padded window)';
    const a: Address = { load, base: new Map(), block: new Map(), constant: lin.constant };
    for (const [t, c] of lin.terms) {
      const ranges = t.toposort().filter((x) => x.op === Ops.RANGE);
      const inBlock = ranges.filter(isBlock);
      if (inBlock.length === 0) a.base.set(t, c);
      else if (inBlock.length === ranges.length && c > 0 && t.vmin >= 0) a.block.set(t, c);
      else return 'an address mixes the block axes with others, or steps backwards along them';
    }
    addresses.push(a);
  }
  const base = sum(addresses[0]!.base);
  if (addresses.some((a) => sum(a.base) !== base)) return "the loads' addresses differ outside the block";
  const { itemsize } = buffer.dtype;
  // an asynchronous copy moves whole runs of bytes: it cannot interleave two rows
  const paired = (r: Rectangle) =>
    !async &&
    itemsize === 2 &&
    r.rows % 2 === 0 &&
    r.stride !== Number.POSITIVE_INFINITY &&
    fragmentPairs(addresses, r.stride, fragments);
  // of the smallest rectangles, one whose fragments read row pairs where there is one, or whose rows are a
  // warpgroup tensor core's (a tile as wide as its matrix is also one long row, or rows of any width)
  const found = rectangles(addresses);
  const rect = found.find(paired) ?? found.find((r) => r.stride === operandRows) ?? found[0];
  if (rect === undefined) return 'its addresses form no rectangle of rows';
  const pairs = paired(rect);
  // the widest vector that divides the rows, as long as every thread gets one (a small tile: narrower ones);
  // rows in pairs copy half as wide a vector from each of two rows
  const bytes = pairs ? COPY_BYTES / 2 : COPY_BYTES;
  const widths = [bytes / itemsize, 8, 4, 2].filter(
    (v) => Number.isInteger(v) && v * itemsize <= bytes && rect.cols % v === 0,
  );
  const vector =
    widths.find((v) => (rect.rows * rect.cols) / v >= threads * (pairs ? 2 : 1)) ?? widths.at(-1) ?? 1;
  if (async && !ASYNC_BYTES.has(vector * itemsize))
    return `its rows copy ${vector * itemsize} bytes at once, and asynchronous copies move 4, 8 or 16`;
  // the copy stays inside what the loads read: its last element is no further than theirs
  const last =
    rect.stride === Number.POSITIVE_INFINITY ? rect.cols - 1 : (rect.rows - 1) * rect.stride + rect.cols - 1;
  const reach = Math.max(...loads.map((l) => l.src[0]!.src[1]!.vmax));
  if (base.vmax + last > reach) return 'its tile reaches beyond the elements the loads read';
  const chunk = COPY_BYTES / itemsize;
  const chunks = rect.cols / chunk;
  // tensor-core operands (16-bit), whose reads are matrix rows or element pairs inside a chunk: wider float32
  // vectors would span chunks that the swizzle moves apart
  const powerOfTwo = Number.isInteger(chunks) && (chunks & (chunks - 1)) === 0;
  const tile = { buffer, base, ...rect, vector, pairs, addresses, transposed: false };
  if (swizzle && itemsize === 2 && !pairs && rect.stride !== Number.POSITIVE_INFINITY && powerOfTwo) {
    // the descriptor's blocks of 64 columns start on 8-row groups (1024 bytes), where the swizzle repeats
    const blocked =
      operandRows !== undefined &&
      rect.cols > DESCRIPTOR_ROW &&
      rect.rows % 8 === 0 &&
      addresses.every((a) => splitsIntoBlocks(a, rect.stride, DESCRIPTOR_ROW));
    if (blocked)
      return {
        ...tile,
        pitch: rect.cols,
        swizzle: { row: DESCRIPTOR_ROW, chunk },
        columnBlock: DESCRIPTOR_ROW,
      };
    // 8 consecutive lines of at least 8 chunks (short rows: several a line) each put a chunk in another bank group
    const layout = { row: Math.max(rect.cols, 8 * chunk), chunk };
    return { ...tile, pitch: rect.cols, swizzle: layout, columnBlock: undefined };
  }
  const pad = Math.max(1, ROW_PAD_BYTES / itemsize);
  // a column-by-column copy stores element by element, which an asynchronous copy cannot
  if (
    !async &&
    !pairs &&
    operandRows === undefined &&
    rect.stride !== Number.POSITIVE_INFINITY &&
    readsDownColumns(addresses, rect.stride)
  )
    return { ...tile, pitch: rect.rows + pad, swizzle: undefined, columnBlock: undefined, transposed: true };
  const pitch = pairs ? 2 * (rect.cols + pad) : rect.cols + pad;
  return { ...tile, pitch, swizzle: undefined, columnBlock: undefined };
}

/**
 * The distance between the rows of each buffer that a warpgroup tensor core's operand reads (a STACK of loads, one
 * an element of the core's layout): the address step from its element (0, 0) to an element (r, 0) below, over r.
 */
function rowStrides(body: readonly UOp[]): Map<UOp, number> {
  const out = new Map<UOp, number>();
  for (const w of body) {
    const tc = w.op === Ops.WMMA ? tensorCoreNamed(w.argOf(Ops.WMMA).name) : undefined;
    if (!tc?.sharedOperands) continue;
    (['a', 'b'] as const).forEach((operand, i) => {
      const loads = w.src[i]!.src;
      if (w.src[i]!.op !== Ops.STACK || !loads.every((l) => l.op === Ops.LOAD && l.src[0]!.op === Ops.INDEX))
        return;
      const below = loads.findIndex((_, e) => {
        const [r, c] = positionOf(tc[operand], 0, e);
        return r > 0 && c === 0;
      });
      if (below < 0) return;
      const [first, other] = [loads[0]!, loads[below]!].map((l) => affine(l.src[0]!.src[1]!));
      if (first === undefined || other === undefined) return;
      const same =
        first.terms.size === other.terms.size && [...first.terms].every(([t, c]) => other.terms.get(t) === c);
      if (same)
        out.set(
          loads[0]!.src[0]!.src[0]!,
          (other.constant - first.constant) / positionOf(tc[operand], 0, below)[0],
        );
    });
  }
  return out;
}

/** What STAGE on reduce axis `axis` finds: the tiles, the loops and the group's threads; or why none. */
export interface StagePlan {
  /** The reduce loops around the staged one and it, outermost first: their iterations alternate the buffers. */
  loops: UOp[];
  tiles: Tile[];
  /** The workgroup's thread axes, outermost first. */
  threads: UOp[];
  /** Iterations the asynchronous copies run ahead (0: copies are synchronous, the tiles double-buffered). */
  depth: number;
  /** The sum of products whose loads the tiles replace. */
  reduce: UOp;
  bytes: number;
}

/** Each tile's buffers: two for synchronous copies; for copies `depth` iterations ahead, depth + 2 (see applyStage). */
const buffersOf = (depth: number) => (depth === 0 ? 2 : depth + 2);

export function stagePlan(ast: UOp, axis: number, depth = 0, swizzle = false): StagePlan | string {
  const ranges = kernelRanges(ast);
  const range = ranges[axis];
  if (range === undefined || rangeArg(range).type !== AxisType.REDUCE)
    return `axis ${axis} is not a REDUCE axis (STAGE copies what each of its iterations reads)`;
  const threads = ranges.filter((r) => THREADS.has(rangeArg(r).type));
  const count = threads.reduce((n, r) => n * constSize(r)!, 1);
  if (count < 2) return 'the kernel has no LOCAL or WARP axes (STAGE shares tiles among a group of threads)';
  if (ranges.some((r) => rangeArg(r).type === AxisType.GROUP_REDUCE))
    return 'the kernel has a GROUP_REDUCE axis, whose LOCAL memory STAGE does not share';
  // the block: thread and register axes, and the reduce loops inside the staged one
  const isBlock = (r: UOp) =>
    BLOCK.has(rangeArg(r).type) ||
    (rangeArg(r).type === AxisType.REDUCE && rangeArg(r).id > rangeArg(range).id);
  const reduce = ast.toposort().find((u) => u.op === Ops.REDUCE && u.src.includes(range));
  if (reduce === undefined) return `no reduce sums over axis ${axis}`;
  // a warpgroup tensor core reads its operands from the tiles itself: no thread reads row pairs of them
  const body = reduce.src[0]!.toposort();
  const sharedOperands = body.some(
    (u) => u.op === Ops.WMMA && tensorCoreNamed(u.argOf(Ops.WMMA).name)?.sharedOperands,
  );
  const fragments = sharedOperands ? [] : body.filter((u) => u.op === Ops.STACK);
  const operandRows = sharedOperands ? rowStrides(body) : new Map<UOp, number>();
  const byBuffer = new Map<UOp, UOp[]>();
  for (const u of reduce.src[0]!.toposort()) {
    if (u.op !== Ops.LOAD || !u.src[0]!.toposort().includes(range)) continue;
    const [buffer, at] = u.src[0]!.src as [UOp, UOp | undefined];
    if (u.src.length !== 1 || at === undefined || u.isVector || buffer.op !== Ops.PARAM)
      return 'a load over the axis is gated, a vector, or not from a kernel buffer';
    byBuffer.set(buffer, [...(byBuffer.get(buffer) ?? []), u]);
  }
  if (byBuffer.size === 0) return `no load reads axis ${axis}`;
  const tiles: Tile[] = [];
  for (const [buffer, loads] of byBuffer) {
    const rows = operandRows.get(buffer);
    const tile = tileOf(buffer, loads, fragments, isBlock, count, depth > 0, swizzle, rows);
    if (typeof tile === 'string') return `buffer ${buffer.argOf(Ops.PARAM).slot}: ${tile}`;
    tiles.push(tile);
  }
  const bytes = tiles.reduce((n, t) => n + buffersOf(depth) * tileSize(t) * t.buffer.dtype.itemsize, 0);
  const loops = reduce.src
    .slice(1)
    .filter((r) => rangeArg(r).type === AxisType.REDUCE && rangeArg(r).id <= rangeArg(range).id)
    .sort((a, b) => rangeArg(a).id - rangeArg(b).id);
  return { loops, tiles, threads, depth, bytes, reduce };
}

/** Elements of one of a tile's buffers. */
const tileSize = (t: Tile) => (t.transposed ? t.cols : t.pairs ? t.rows / 2 : t.rows) * t.pitch;

/** Where the tile holds (row, col), both sums: rows in pairs interleave their elements. */
function tileIndex(t: Tile, row: [Map<UOp, number>, number], column: [Map<UOp, number>, number]): UOp {
  if (t.transposed)
    return sum(...column)
      .mul(t.pitch)
      .add(sum(...row));
  if (t.columnBlock !== undefined)
    return sum(...row)
      .mul(t.columnBlock)
      .add(blockedColumn(t, column));
  const col = sum(...column);
  if (!t.pairs)
    return sum(...row)
      .mul(t.pitch)
      .add(col);
  // every row step is even (fragmentPairs), so the pair and the row within it split the terms
  const pair = sum(new Map([...row[0]].map(([x, c]) => [x, c / 2])), Math.floor(row[1] / 2));
  return pair
    .mul(t.pitch)
    .add(col.mul(2))
    .add(row[1] % 2);
}

const lanes = (n: number) =>
  UOp.make(Ops.VCONST, [], { values: Array.from({ length: n }, (_, i) => i), dtype: dtypes.index });

/**
 * The kernel with the plan's loads read from LOCAL tiles that the workgroup fills. Synchronous copies (depth 0)
 * fill buffer i % 2 in iteration i before its BARRIER, from registers loaded in iteration i - 1. Asynchronous ones
 * (depth d) are issued d iterations ahead: iteration i issues the copy of iteration i + d into buffer
 * (i + d) % (d + 2), whose last reads (iteration i - 2) every thread finished before the BARRIER of iteration
 * i - 1; its BARRIER first waits for all but the latest d rounds of copies, so that iteration i's have landed.
 * The first d iterations' tiles are copied synchronously in iteration 0 (a prologue inside the loop: the IR has no
 * statements before a loop that name its iterations).
 */
export function applyStage(ast: UOp, plan: StagePlan): UOp {
  const { threads, depth, loops } = plan;
  const count = threads.reduce((n, r) => n * constSize(r)!, 1);
  const thread = threads.reduce<UOp>((id, r) => id.mul(constSize(r)!).add(r), UOp.index(0));
  const firstSlot =
    Math.max(
      -1,
      ...ast
        .toposort()
        .filter((u) => u.op === Ops.PARAM && u.argOf(Ops.PARAM).addrspace === AddrSpace.LOCAL)
        .map((u) => u.argOf(Ops.PARAM).slot as number),
    ) + 1;
  // consecutive iterations (of the staged loop and the loops around it: a conv's window row inside its
  // channels) use the buffers in turn
  const iteration = loops.reduce<UOp | undefined>(
    (n, r) => (n === undefined ? r : n.mul(constSize(r)!).add(r)),
    undefined,
  )!;
  const total = loops.reduce((n, r) => n * constSize(r)!, 1);
  const buffers = buffersOf(depth);
  /** The loops' indices at flat iteration `at` (a constant or an expression), to move an address there. */
  const loopsAt = (at: UOp): Map<UOp, UOp> => {
    const out = new Map<UOp, UOp>();
    let inner = total;
    for (const r of loops) {
      inner /= constSize(r)!;
      out.set(r, at.idiv(inner).mod(constSize(r)!));
    }
    return out;
  };
  // registers that hold the next iteration's copies: numbered from 0 (accumulators come after them), each
  // filled before the loops (in every iteration of the loops around them)
  const around = [...rangesOf(plan.reduce)].filter((r) => AROUND.has(rangeArg(r).type));
  let registers = 0;
  const next = iteration.add(1);
  /**
   * Synchronous copies through registers: iteration i stores the chunks it holds (loaded in iteration i - 1, the
   * first before the loops) into buffer i % 2, then loads iteration i + 1's, whose latency its reads and products
   * hide (H100, 4096^3 float32, bench/gemm.ts: 45.0 -> 46.3 TFLOP/s; float16 1024^3 with tensor cores 80.9 ->
   * 92.7). The loads are ordered after the stores that read the register, and both before the BARRIER.
   */
  const heldCopies = (tile: Tile, local: UOp, at: UOp): UOp[] => {
    const first = substitute(tile.base, loopsAt(UOp.index(0)));
    const ahead = substitute(tile.base, loopsAt(next));
    const live = next.lt(total);
    const n = chunkLanes(tile);
    const whole = n === 1 ? UOp.index(0) : lanes(n);
    return chunksOf(tile, count, thread).flatMap((c) => {
      const reg = UOp.make(Ops.PARAM, [UOp.shapeVec([n])], {
        slot: registers++,
        dtype: tile.buffer.dtype,
        addrspace: AddrSpace.REG,
      });
      const home = around.length ? UOp.make(Ops.AFTER, [reg, ...around]) : reg;
      const init = UOp.make(Ops.STORE, [
        UOp.make(Ops.INDEX, [home, whole]),
        chunkValue(tile, first, c, c.gate),
      ]);
      const held = UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [reg, init, ...loops]), whole]);
      const put = chunkStores(tile, local, at, c, UOp.make(Ops.LOAD, [held]));
      const gate = c.gate ? c.gate.and(live) : live;
      const load = UOp.make(Ops.STORE, [
        UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [reg, init, ...loops, ...put]), whole]),
        chunkValue(tile, ahead, c, gate),
      ]);
      return [...put, load];
    });
  };
  const stores: UOp[] = [];
  const reads: [UOp, Address, UOp][] = [];
  plan.tiles.forEach((tile, i) => {
    const size = tileSize(tile);
    const local = UOp.make(Ops.PARAM, [UOp.shapeVec([buffers * size])], {
      slot: firstSlot + i,
      dtype: tile.buffer.dtype,
      addrspace: AddrSpace.LOCAL,
      swizzle: tile.swizzle,
    });
    if (depth === 0) stores.push(...heldCopies(tile, local, iteration.mod(2).mul(size)));
    else {
      const ahead = iteration.add(depth);
      const base = substitute(tile.base, loopsAt(ahead));
      const at = ahead.mod(buffers).mul(size);
      const live = ahead.lt(total);
      for (const s of copies(tile, local, base, at, count, thread))
        stores.push(UOp.make(Ops.STORE, withGate(s, live), { async: true }));
      const first = iteration.eq(UOp.index(0));
      for (let j = 0; j < depth; j++) {
        const prologue = substitute(tile.base, loopsAt(UOp.index(j)));
        for (const s of copies(tile, local, prologue, UOp.index(j * size), count, thread))
          stores.push(UOp.make(Ops.STORE, withGate(s, first)));
      }
    }
    for (const a of tile.addresses) {
      const [r, c, r0, c0] = place(a, tile.stride);
      reads.push([
        local,
        a,
        iteration
          .mod(buffers)
          .mul(size)
          .add(tileIndex(tile, [r, r0], [c, c0])),
      ]);
    }
  });
  // one BARRIER after all the tiles' copies
  const barrier = UOp.make(Ops.BARRIER, stores, depth === 0 ? null : { pending: depth });
  const replaced = new Map<UOp, UOp>();
  for (const [local, a, at] of reads)
    replaced.set(
      a.load,
      UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [UOp.make(Ops.AFTER, [local, barrier]), at])]),
    );
  return substitute(ast, replaced);
}

/** A copy's (index, value, gate?) with `gate` and-ed in, its load gated alike (that a thread skips it whole). */
function withGate(store: UOp, gate: UOp): UOp[] {
  const [target, value, old] = store.src as [UOp, UOp, UOp | undefined];
  const both = old === undefined ? gate : old.and(gate);
  const gateLoad = (v: UOp): UOp =>
    v.op === Ops.LOAD
      ? UOp.make(Ops.LOAD, [v.src[0]!, UOp.const(v.dtype.base, 0), both])
      : v.withSrc(v.src.map(gateLoad));
  return [target, gateLoad(value), both];
}

/** Where vector v of a row of a tile in column blocks lies after the row's start: its block's start and column. */
function blockOf(tile: Tile, v: UOp): UOp {
  const perBlock = tile.columnBlock! / tile.vector;
  return v
    .idiv(perBlock)
    .mul(tile.rows * tile.columnBlock!)
    .add(v.mod(perBlock).mul(tile.vector));
}

/** One vector of a tile's copy, the q-th (q = j * threads + thread), from `row` at `col`; `gate` in a partial round. */
interface Chunk {
  q: UOp;
  row: UOp;
  col: UOp;
  gate: UOp | undefined;
}

/** The vectors each thread copies of a tile, round by round: of one row, or of a pair of rows interleaved. */
function chunksOf(tile: Tile, count: number, thread: UOp): Chunk[] {
  const perRow = tile.cols / tile.vector;
  const total = ((tile.pairs ? tile.rows / 2 : tile.rows) * tile.cols) / tile.vector;
  const out: Chunk[] = [];
  for (let j = 0; j * count < total; j++) {
    const q = thread.add(j * count);
    // the last round may have fewer vectors than threads: the others skip it
    const gate = (j + 1) * count > total ? q.lt(total) : undefined;
    out.push({ q, row: q.idiv(perRow), col: q.mod(perRow).mul(tile.vector), gate });
  }
  return out;
}

const lanesOf = (x: UOp, n: number) => (n === 1 ? x : UOp.make(Ops.ADD, [x, lanes(n)]));

/** Lanes of a chunk's value: a vector, or two interleaved where rows pair. */
const chunkLanes = (tile: Tile) => (tile.pairs ? 2 * tile.vector : tile.vector);

/** What a chunk copies from the tile of the buffer at `base` (loads gated by `gate` where given). */
function chunkValue(tile: Tile, base: UOp, c: Chunk, gate: UOp | undefined): UOp {
  const { vector, stride } = tile;
  const read = (r: UOp) => {
    const from = base.add(stride === Number.POSITIVE_INFINITY ? c.col : r.mul(stride).add(c.col));
    const source = UOp.make(Ops.INDEX, [tile.buffer, lanesOf(from, vector)]);
    return UOp.make(Ops.LOAD, gate ? [source, UOp.const(tile.buffer.dtype, 0), gate] : [source]);
  };
  if (!tile.pairs) return read(c.row);
  const [even, odd] = [read(c.row.mul(2)), read(c.row.mul(2).add(1))];
  const lane = (v: UOp, i: number) => (vector === 1 ? v : UOp.make(Ops.INDEX, [v, UOp.index(i)]));
  return UOp.make(
    Ops.STACK,
    Array.from({ length: 2 * vector }, (_, i) => lane(i % 2 ? odd : even, i >> 1)),
  );
}

/** The stores of a chunk's `value` into `local` from element `at`: one vector, or (transposed) one an element. */
function chunkStores(tile: Tile, local: UOp, at: UOp, c: Chunk, value: UOp): UOp[] {
  const { pitch, vector, pairs } = tile;
  const store = (target: UOp, v: UOp) => UOp.make(Ops.STORE, c.gate ? [target, v, c.gate] : [target, v]);
  if (tile.transposed)
    return Array.from({ length: vector }, (_, i) =>
      store(
        UOp.make(Ops.INDEX, [local, at.add(c.col.add(i).mul(pitch)).add(c.row)]),
        vector === 1 ? value : UOp.make(Ops.INDEX, [value, UOp.index(i)]),
      ),
    );
  const perRow = tile.cols / vector;
  // (one product, so that the renderer sees the vector's alignment)
  const to =
    tile.columnBlock === undefined
      ? at.add(c.row.mul(pitch)).add(pairs ? c.q.mod(perRow).mul(2 * vector) : c.col)
      : at.add(c.row.mul(tile.columnBlock)).add(blockOf(tile, c.q.mod(perRow)));
  return [store(UOp.make(Ops.INDEX, [local, lanesOf(to, chunkLanes(tile))]), value)];
}

/** The stores that copy a tile of the buffer from `base` into `local` from element `at`. */
const copies = (tile: Tile, local: UOp, base: UOp, at: UOp, count: number, thread: UOp): UOp[] =>
  chunksOf(tile, count, thread).flatMap((c) =>
    chunkStores(tile, local, at, c, chunkValue(tile, base, c, c.gate)),
  );
