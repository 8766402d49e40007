// The walk every source renderer shares: names for the instructions of a LINEAR program, loops, loads and
// stores; a Language supplies the text of each construct.
import { AddrSpace, type ConstValue, type DType, dtypes } from '../dtype.ts';
import { AxisType, GroupOp, Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

export interface KernelParam {
  slot: number;
  dtype: DType;
  /** The kernel stores into it. */
  written: boolean;
}

/** What a target language writes for each construct. Expressions come back parenthesized where needed. */
export interface Language {
  readonly name: string;
  /** A whole kernel from its name, buffer parameters and body lines. */
  kernel(name: string, params: readonly KernelParam[], body: readonly string[]): string;
  constant(v: ConstValue, dtype: DType): string;
  /** An elementwise op on rendered operands; `u` gives access to dtypes and bounds. */
  alu(u: UOp, args: readonly string[]): string;
  /** An element of buffer `buf` (`data{slot}`, or a GPU's `temp{slot}`), as a value of its dtype. */
  read(buf: string, index: string, dtype: DType): string;
  /** Writes a value into an element of buffer `buf`. */
  write(buf: string, index: string, value: string, dtype: DType): string;
  /** A variable holding expr: a vector when lanes > 1; mutable for an accumulator. */
  declare(name: string, dtype: DType, expr: string, lanes: number, mutable?: boolean): string;
  assign(name: string, expr: string): string;
  /** A loop; its iterations run in parallel threads when `parallel` (a THREAD axis). */
  loopOpen(name: string, bound: string, parallel: boolean): string;
  readonly loopClose: string;
  when(gate: string, statement: string): string;
  /** Vector values, on targets with vector types (values of shape (k,) reach the renderer only there). */
  readonly vector?: VectorLanguage;
  /** Workgroups, on GPUs (kernels lowered for a target with a grid, src/codegen/grid.ts). */
  readonly gpu?: GpuLanguage;
  /** A tensor core's D = A * B + C on rendered vector operands, on targets that have tensor cores. */
  wmma?(u: UOp, args: readonly string[]): string;
}

export interface GpuLanguage {
  /** The index a SPECIAL names: `gidx0` (workgroup) or `lidx0` (thread in the workgroup). */
  special(name: string): string;
  /** Declares `name`, a buffer of `size` elements shared by the threads of a workgroup. */
  local(name: string, dtype: DType, size: number): string;
  /** Waits for every thread of the workgroup (and makes their LOCAL writes visible). */
  readonly barrier: string;
  /** Starts copying `bytes` from global address `from` to shared address `to` (cp.async), on GPUs that can. */
  asyncCopy?(to: string, from: string, bytes: number): string;
  /** A warp's matrix load (LoadArg.matrix) of `lanes` elements a lane, from shared address `from`. */
  matrixLoad?(dtype: DType, lanes: number, trans: boolean, from: string): string;
  /** Ends the thread's round of asynchronous copies and waits until at most `pending` rounds are in flight. */
  asyncWait?(pending: number): string;
  /** A statement after each loop (CUDA: waiting for the tensor cores' asynchronous multiplies). */
  readonly afterLoop?: string;
}

export interface VectorLanguage {
  /** Bytes every buffer's start is aligned to: a vector at an index that is a multiple of its lanes is too. */
  readonly alignment: number;
  /** The k consecutive elements of buffer `buf` from `index`; `aligned`: the address is a vector's multiple. */
  read(buf: string, index: string, dtype: DType, lanes: number, aligned: boolean): string;
  write(buf: string, index: string, value: string, dtype: DType, lanes: number, aligned: boolean): string;
  /** A vector of the given elements. */
  of(dtype: DType, parts: readonly string[]): string;
  /** Element j of a vector. */
  lane(vector: string, j: number): string;
}

/**
 * Where an INDEX points: element `index` of a buffer (a kernel parameter, or a GPU workgroup's LOCAL buffer)
 * with lane offsets for a vector, or a register variable (declared by the first store into it).
 */
type Place =
  | {
      kind: 'global';
      buf: string;
      /** The kernel parameter's slot; undefined for a LOCAL buffer. */
      slot?: number;
      index: string;
      dtype: DType;
      lanes?: readonly number[];
      aligned?: boolean;
    }
  | { kind: 'reg'; acc: UOp };

/** Whether index expression u is provably a multiple of k (by its shape: constants, sums and products). */
function multipleOf(u: UOp, k: number): boolean {
  if (u.op === Ops.CONST) return Number(u.constValue) % k === 0;
  if (u.op === Ops.MUL) return u.src.some((s) => multipleOf(s, k));
  if (u.op === Ops.ADD || u.op === Ops.SUB) return u.src.every((s) => multipleOf(s, k));
  // a swizzled LOCAL address (src/codegen/swizzle.ts): XOR keeps the low bits both sides share
  if (u.op === Ops.XOR) return (k & (k - 1)) === 0 && u.src.every((s) => multipleOf(s, k));
  return false;
}

const vconst = (u: UOp) => u.argOf(Ops.VCONST).values.map(Number);

/** Renders a LINEAR program as one kernel named `name`. */
export function render(lang: Language, name: string, linear: UOp): string {
  const names = new Map<UOp, string>();
  const places = new Map<UOp, Place>();
  const params = new Map<number, KernelParam>();
  const lines: string[] = [];
  let depth = 1;
  const counters = new Map<string, number>();
  const fresh = (prefix: string) => {
    const n = counters.get(prefix) ?? 0;
    counters.set(prefix, n + 1);
    return `${prefix}${n}`;
  };
  const emit = (line: string) => lines.push(`${'  '.repeat(depth)}${line}`);
  const ref = (u: UOp): string => {
    if (u.op === Ops.CONST) return lang.constant(u.constValue, u.dtype);
    const n = names.get(u);
    if (n === undefined)
      throw new Error(`render ${lang.name}: ${opName(u.op)} #${u.id} is used before it is computed`);
    return n;
  };
  const bufferOf = (u: UOp): UOp => (u.op === Ops.AFTER ? bufferOf(u.src[0]!) : u);
  const place = (idx: UOp): Place => {
    const p = places.get(idx);
    if (p === undefined) throw new Error(`render ${lang.name}: LOAD/STORE must go through an INDEX`);
    return p;
  };
  const gpu = () => {
    if (lang.gpu === undefined) throw new Error(`render ${lang.name}: the target has no workgroups`);
    return lang.gpu;
  };
  const localName = (slot: number) => `temp${slot}`;
  // the loads that asynchronous copies read, where the language has them: the copy reads memory, not registers
  const asyncLoads = new Set(
    lang.gpu?.asyncCopy === undefined
      ? []
      : linear.src.filter((u) => u.op === Ops.STORE && u.argOf(Ops.STORE)?.async).map((u) => u.src[1]!),
  );
  /** The address of a place's first element; its lanes, if any, consecutive and (where `aligned`) a vector's. */
  const pointer = (p: Place, what: string, aligned = true) => {
    if (p.kind !== 'global' || (p.lanes !== undefined && (!consecutive(p.lanes) || (aligned && !p.aligned))))
      throw new Error(
        `render ${lang.name}: a ${what} is not one ${aligned ? 'aligned ' : ''}vector in memory`,
      );
    return `(${p.buf}+${p.index})`;
  };
  const vec = () => {
    if (lang.vector === undefined) throw new Error(`render ${lang.name}: the target has no vector types`);
    return lang.vector;
  };
  const consecutive = (lanes: readonly number[]) => lanes.every((o, j) => o === j);
  const at = (index: string, offset: number) => (offset === 0 ? index : `${index}+${offset}`);
  const readPlace = (p: Place): string => {
    if (p.kind === 'reg') return ref(p.acc);
    if (p.lanes === undefined) return lang.read(p.buf, p.index, p.dtype);
    if (consecutive(p.lanes)) return vec().read(p.buf, p.index, p.dtype, p.lanes.length, p.aligned === true);
    return vec().of(
      p.dtype,
      p.lanes.map((o) => lang.read(p.buf, at(p.index, o), p.dtype)),
    );
  };
  const writePlace = (p: Place & { kind: 'global' }, value: string): string => {
    if (p.lanes === undefined) return lang.write(p.buf, p.index, value, p.dtype);
    if (consecutive(p.lanes))
      return vec().write(p.buf, p.index, value, p.dtype, p.lanes.length, p.aligned === true);
    return `{ ${p.lanes.map((o, j) => lang.write(p.buf, at(p.index, o), vec().lane(value, j), p.dtype)).join(' ')} }`;
  };
  /** A scalar operand spread over the lanes of a vector. */
  const spread = (u: UOp, lanes: number): string =>
    u.isVector || lanes === 1 ? ref(u) : vec().of(u.dtype, Array<string>(lanes).fill(ref(u)));

  for (const u of linear.src) {
    switch (u.op) {
      case Ops.CONST:
      case Ops.VCONST: // lanes of vector addresses, read by INDEX
        continue;
      case Ops.STACK: {
        // index STACKs are shapes; a STACK of values is a vector (an accumulator's start)
        if (u.dtype === dtypes.index) continue;
        const n = fresh('vec');
        names.set(u, n);
        emit(lang.declare(n, u.dtype, vec().of(u.dtype, u.src.map(ref)), u.src.length));
        continue;
      }
      case Ops.PARAM: {
        const a = u.argOf(Ops.PARAM);
        if (a.addrspace === AddrSpace.REG) continue;
        if (a.addrspace === AddrSpace.LOCAL) {
          emit(gpu().local(localName(a.slot as number), a.dtype, Number(u.src[0]!.sizes[0])));
          continue;
        }
        if (typeof a.slot === 'number') params.set(a.slot, { slot: a.slot, dtype: a.dtype, written: false });
        else throw new Error(`render ${lang.name}: symbolic variables are not supported yet (${a.slot})`);
        continue;
      }
      case Ops.AFTER:
        continue;
      case Ops.INDEX: {
        const buf = bufferOf(u.src[0]!);
        if (buf.op !== Ops.PARAM) {
          // a lane of a vector value (src/codegen/expand.ts combines a reduce's lanes this way)
          const n = fresh('alu');
          names.set(u, n);
          emit(lang.declare(n, u.dtype, vec().lane(ref(buf), Number(u.src[1]!.constValue)), 1));
          continue;
        }
        const a = buf.argOf(Ops.PARAM);
        const i = u.src[1]!;
        const local = a.addrspace === AddrSpace.LOCAL;
        const named = local
          ? { buf: localName(a.slot as number) }
          : { buf: `data${a.slot as number}`, slot: a.slot as number };
        if (a.addrspace === AddrSpace.REG) places.set(u, { kind: 'reg', acc: buf });
        // a vector address is base + VCONST(offsets) (src/codegen/vectors.ts)
        else if (i.isVector) {
          const lanes = vconst(i.src[1]!);
          const bytes = lanes.length * a.dtype.itemsize;
          places.set(u, {
            kind: 'global',
            ...named,
            index: ref(i.src[0]!),
            dtype: a.dtype,
            lanes,
            aligned: bytes <= vec().alignment && multipleOf(i.src[0]!, lanes.length),
          });
        } else places.set(u, { kind: 'global', ...named, index: ref(i), dtype: a.dtype });
        continue;
      }
      case Ops.LOAD: {
        const p = place(u.src[0]!);
        if (asyncLoads.has(u)) {
          places.set(u, p); // the copy's source (its gate is the copy's)
          continue;
        }
        if (u.argOf(Ops.LOAD)?.tile !== undefined) {
          // the tensor core reads the tile itself: its operand is the tile's address (its alignment the tile's:
          // wider than any vector)
          names.set(u, `(${pointer(p, 'warpgroup tile', false)})`);
          continue;
        }
        const matrix = u.argOf(Ops.LOAD)?.matrix;
        if (matrix !== undefined) {
          if (gpu().matrixLoad === undefined)
            throw new Error(`render ${lang.name}: the target has no matrix loads`);
          const n = fresh('val');
          names.set(u, n);
          const value = gpu().matrixLoad!(u.dtype.base, u.lanes, matrix.trans, pointer(p, 'matrix row'));
          emit(lang.declare(n, u.dtype, value, u.lanes));
          continue;
        }
        const lanes = u.lanes;
        const value =
          u.src.length === 3
            ? `(${ref(u.src[2]!)} ? ${readPlace(p)} : ${spread(u.src[1]!, lanes)})`
            : readPlace(p);
        const n = fresh('val');
        names.set(u, n);
        emit(lang.declare(n, u.dtype, value, lanes));
        continue;
      }
      case Ops.STORE: {
        const p = place(u.src[0]!);
        if (asyncLoads.has(u.src[1]!)) {
          // the copy runs under the store's gate: STAGE gates its load alike (src/codegen/opt/stage.ts withGate)
          const from = pointer(place(u.src[1]!), "copy's source");
          const bytes = u.src[1]!.lanes * u.src[1]!.dtype.base.itemsize;
          const copy = gpu().asyncCopy!(pointer(p, "copy's target"), from, bytes);
          emit(u.src.length === 3 ? lang.when(ref(u.src[2]!), copy) : copy);
          continue;
        }
        const value = ref(u.src[1]!);
        let statement: string;
        if (p.kind === 'global') {
          if (p.slot !== undefined) params.get(p.slot)!.written = true;
          statement = writePlace(p, value);
        } else if (names.has(p.acc)) statement = lang.assign(ref(p.acc), value);
        else {
          // the first store initializes the accumulator: declared here, in the scope of the loops around it
          const n = fresh('acc');
          names.set(p.acc, n);
          emit(lang.declare(n, u.src[1]!.dtype, value, u.src[0]!.lanes, true));
          continue;
        }
        emit(u.src.length === 3 ? lang.when(ref(u.src[2]!), statement) : statement);
        continue;
      }
      case Ops.RANGE: {
        const { id, type } = u.argOf(Ops.RANGE);
        const n = `ridx${id}`;
        names.set(u, n);
        for (const line of lang.loopOpen(n, ref(u.src[0]!), type === AxisType.THREAD).split('\n')) emit(line);
        depth++;
        continue;
      }
      case Ops.GROUP: // only orders the stores expand made: they are already emitted
        continue;
      case Ops.SPECIAL: {
        const n = u.argOf(Ops.SPECIAL);
        names.set(u, n);
        emit(lang.declare(n, u.dtype, gpu().special(n), 1));
        continue;
      }
      case Ops.BARRIER: {
        const pending = u.argOf(Ops.BARRIER)?.pending;
        if (pending !== undefined && gpu().asyncWait !== undefined) emit(gpu().asyncWait!(pending));
        emit(gpu().barrier);
        continue;
      }
      case Ops.WMMA: {
        if (lang.wmma === undefined)
          throw new Error(`render ${lang.name}: the target has no tensor cores (${u.argOf(Ops.WMMA).name})`);
        const n = fresh('wmma');
        names.set(u, n);
        emit(lang.declare(n, u.dtype, lang.wmma(u, u.src.map(ref)), u.lanes));
        continue;
      }
      case Ops.IF:
        emit(`if (${ref(u.src[0]!)}) {`);
        depth++;
        continue;
      case Ops.ENDIF:
        depth--;
        emit('}');
        continue;
      case Ops.END:
        for (let i = 1; i < u.src.length; i++) {
          depth--;
          emit(lang.loopClose);
          if (lang.gpu?.afterLoop !== undefined) emit(lang.gpu.afterLoop);
        }
        continue;
    }
    // BITCAST is a movement op in the spec, but in a kernel it reinterprets one scalar: an elementwise op
    if (
      GroupOp.Unary.has(u.op) ||
      GroupOp.Binary.has(u.op) ||
      GroupOp.Ternary.has(u.op) ||
      u.op === Ops.BITCAST
    ) {
      // index vectors are addresses (base + lanes), rendered by the INDEX that reads them
      if (u.dtype === dtypes.index && u.isVector) continue;
      const n = fresh('alu');
      names.set(u, n);
      emit(lang.declare(n, u.dtype, lang.alu(u, u.src.map(ref)), u.lanes));
      continue;
    }
    throw new Error(`render ${lang.name}: no rendering for ${opName(u.op)}`);
  }
  const ordered = [...params.values()].sort((a, b) => a.slot - b.slot);
  return lang.kernel(name, ordered, lines);
}

/** Whether both operands of an integer IDIV/MOD are provably non-negative (then / and % are floor ops). */
export const nonNegativeDivision = (u: UOp) => u.src[0]!.vmin >= 0 && u.src[1]!.vmin > 0;

/** The largest value an index expression of the program takes (to pick the index type). */
export function maxIndex(linear: UOp): number {
  let m = 0;
  for (const u of linear.src)
    if (u.dtype === dtypes.index) m = Math.max(m, Math.abs(u.vmin), Math.abs(u.vmax));
  return m;
}
