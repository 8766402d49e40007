// The SIMT device: an emulated GPU in JavaScript, so that GPU-style kernels (workgroups of threads, SPECIAL
// indices, LOCAL memory, BARRIER, IF/ENDIF, vector values, WMMA) run and are checked in CI without a GPU. The
// threads of a workgroup step through the LINEAR program together, one instruction at a time for all of them, as a
// GPU's do; an IF masks the threads whose gate is false; a WMMA gathers its operands from the 32 lanes of each warp
// by the tensor core's documented layout. It checks what a GPU leaves undefined: loads and stores outside a
// buffer, a BARRIER or WMMA that not every thread of the group reaches, loop bounds that differ between threads,
// and races on LOCAL memory: a thread reading or writing an element another thread wrote or read since the last
// BARRIER (threads of a real GPU run in any order between barriers).
import {
  type AddrSpace,
  type ConstValue,
  type DType,
  dtypeByName,
  dtypes,
  readElement,
  type StorageArray,
  toStorage,
  writeElement,
} from '../dtype.ts';
import { execAlu, floorDiv, floorMod } from '../uop/alu.ts';
import { Ops, type Swizzle } from '../uop/ops.ts';
import { HostAllocator } from './allocator.ts';
import { Backend, checkBuffers, type KernelLanguage, type Program, secondsSince } from './backend.ts';
import type { DeviceBuffer } from './buffer.ts';
import {
  elementsOf,
  HOPPER_TENSOR_CORES,
  NVIDIA_TENSOR_CORES,
  type OperandLayout,
  positionOf,
  roundTF32,
  type TensorCore,
  tensorCoreNamed,
} from './tensor-cores.ts';

// what src/renderer/simt.ts writes
/** One instruction: its op's name, dtype name, the positions of its sources in the list, and its arg. */
export type SimtInstruction = [op: string, dtype: string, src: number[], arg?: SimtArg];
export type SimtArg =
  | { value: string | number | boolean }
  | { slot: number; dtype: string; addrspace: AddrSpace; size: number }
  | { name: string }
  | { id: number }
  /** A vector value: each thread holds `lanes` elements. */
  | { lanes: number }
  | { values: (string | number | boolean)[] }
  /** A warp-level multiply by the named tensor core (one of SIMTBackend's tensorCores()). */
  | { tensorCore: string; lanes: number }
  /** A warp's matrix load (LoadArg.matrix): each lane's address starts a row of the 8 x 8 matrices. */
  | { lanes: number; transposed: boolean }
  /** A warpgroup tensor core's operand read from a LOCAL tile (LoadArg.tile) through its buffer's swizzle. */
  | { lanes: number; tile: { operand: 'a' | 'b'; tensorCore: string; leading?: number }; swizzle: Swizzle };

export interface SimtProgram {
  name: string;
  instructions: SimtInstruction[];
}

export class SIMTBackend extends Backend {
  constructor(name: string) {
    super(name, 'SIMT', new HostAllocator(name));
  }

  language(): KernelLanguage {
    return 'SIMT';
  }

  compile(name: string, source: string): Program {
    return new SIMTProgram(this, name, JSON.parse(source) as SimtProgram);
  }

  // as a small GPU's (CUDA allows 1024 threads and 48 KiB of static shared memory; tests stay small)
  override workgroups() {
    // asynchronous copies run as plain ones, which is one of the orders a GPU may take
    return { maxThreads: 256, localBytes: 48 * 1024, asyncCopies: true, matrixLoads: true };
  }

  // as CUDA's, so that its kernels are CUDA's: the IR places the FMAs (the emulator rounds a MULACC's product and
  // its sum, as JS does)
  override fusedMultiplyAdds(): boolean {
    return true;
  }

  // as CUDA's widest load (float4): each thread's vectors
  override vectorBytes(): number {
    return 16;
  }

  override tensorCores(): readonly TensorCore[] {
    // Hopper's warpgroup cores after the warp's, which TC picks first where it may choose
    return [...NVIDIA_TENSOR_CORES, ...HOPPER_TENSOR_CORES];
  }

  // as CUDA's kernel parameters from 12.1 on (32,764 bytes of 8-byte pointers), so its schedules are CUDA's
  override maxBuffers(): number {
    return 4095;
  }
}

/** A warp's width: the threads whose loads one memory request serves. */
const WARP = 32;
/** The unit a GPU's memory moves: a load touching more distinct sectors than its bytes need wastes bandwidth. */
const SECTOR_BYTES = 32;

/** What a kernel's global loads touched, per LOAD instruction: warp requests, distinct sectors, useful bytes. */
export interface LoadSectors {
  kernel: string;
  /** The LOAD's position in the program. */
  pc: number;
  requests: number;
  sectors: number;
  /** Distinct bytes each request read, summed (threads reading one element count it once). */
  bytes: number;
}

/** How much of each kernel a sector count runs: the first `groups` workgroups, each loop `trips` times. */
export interface Sampling {
  groups: number;
  trips: number;
}

let sampling: (Sampling & { loads: Map<string, LoadSectors> }) | undefined;

/**
 * Runs fn with SIMT kernels sampled (only some workgroups, loops cut short: their results are wrong) and
 * counts the distinct 32-byte sectors each warp's global loads touch: how coalesced the kernels' reads are.
 */
export function countSectors(fn: () => void, limits: Sampling): LoadSectors[] {
  const outer = sampling;
  sampling = { ...limits, loads: new Map() };
  try {
    fn();
    return [...sampling.loads.values()];
  } finally {
    sampling = outer;
  }
}

/** Adds one LOAD's requests: each warp's active threads' elements, as distinct sectors and bytes. */
function noteSectors(
  kernel: string,
  pc: number,
  itemsize: number,
  at: (t: number) => number[] | undefined,
  count: number,
) {
  const key = `${kernel}:${pc}`;
  let rec = sampling!.loads.get(key);
  if (rec === undefined) sampling!.loads.set(key, (rec = { kernel, pc, requests: 0, sectors: 0, bytes: 0 }));
  for (let w = 0; w < count; w += WARP) {
    const sectors = new Set<number>();
    const elements = new Set<number>();
    for (let t = w; t < Math.min(count, w + WARP); t++)
      for (const a of at(t) ?? []) {
        sectors.add(Math.floor((a * itemsize) / SECTOR_BYTES));
        elements.add(a);
      }
    if (elements.size === 0) continue;
    rec.requests++;
    rec.sectors += sectors.size;
    rec.bytes += elements.size * itemsize;
  }
}

type V = ConstValue;
/** One value per thread of the workgroup (for a vector value, each is an array of its lanes). */
type Lanes = V[];
const lanesOf = (x: Lanes, t: number) => x[t] as unknown as V[];

/** An instruction, decoded once at compile time. */
interface Step {
  op: Ops;
  dtype: DType;
  src: number[];
  /** The dtype ALU semantics are taken in (the operands'; a WHERE's value operands'). */
  operand: DType;
  value?: V;
  special?: { kind: 'gidx' | 'lidx'; dim: number };
  memory?: { slot: number; dtype: DType; space: 'GLOBAL' | 'LOCAL' | 'REG'; size: number; plain: boolean };
  /** The op on plain numbers, where its dtype has a fast form; else execAlu computes it. */
  fast?: Fast;
  /** Elements of a vector value per thread; 1 for a scalar. */
  lanes: number;
  /** A VCONST's values. */
  vector?: V[];
  /** An INDEX of a vector value (not of memory): the lane it reads. */
  lane?: number;
  tensorCore?: TensorCore;
  /** A matrix load's layout: whether each lane gets a column pair rather than a row pair. */
  transposed?: boolean;
  /** A tile load's operand layout, its buffer's swizzle and the distance of its blocks of 64 columns. */
  tile?: { layout: OperandLayout; threads: number; swizzle: Swizzle; leading: number | undefined };
}

// Fast forms of the commonest ops, computing exactly what execAlu does (src/uop/alu.ts) without its generality:
// the emulator runs the Tensor suite, and most of its time is index arithmetic and float math.
type Fast = (a: number, b: number, c: number) => V;
const COMPARE: Partial<Record<Ops, Fast>> = {
  [Ops.CMPLT]: (a, b) => a < b,
  [Ops.CMPNE]: (a, b) => a !== b,
  [Ops.WHERE]: (c, a, b) => (c ? a : b),
  // (a > b || a is NaN) ? a : b, as the renderers compute it
  [Ops.MAX]: (a, b) => (a > b || Number.isNaN(a) ? a : b),
};
const round = (f: (x: number) => number) => (x: number) => Math.fround(f(x));
const FAST = new Map<DType, Partial<Record<Ops, Fast>>>([
  [
    dtypes.float32,
    {
      ...COMPARE,
      [Ops.ADD]: (a, b) => Math.fround(a + b),
      [Ops.MUL]: (a, b) => Math.fround(a * b),
      [Ops.RECIP]: round((a) => 1 / a),
      [Ops.SQRT]: round(Math.sqrt),
      [Ops.EXP2]: round((a) => 2 ** a),
      [Ops.LOG2]: round(Math.log2),
      [Ops.SIN]: round(Math.sin),
      [Ops.TRUNC]: Math.trunc,
    },
  ],
  [
    dtypes.float64,
    {
      ...COMPARE,
      [Ops.ADD]: (a, b) => a + b,
      [Ops.MUL]: (a, b) => a * b,
      [Ops.RECIP]: (a) => 1 / a,
      [Ops.SQRT]: Math.sqrt,
      [Ops.EXP2]: (a) => 2 ** a,
      [Ops.LOG2]: Math.log2,
      [Ops.SIN]: Math.sin,
      [Ops.TRUNC]: Math.trunc,
    },
  ],
  [
    dtypes.int32,
    {
      ...COMPARE,
      [Ops.ADD]: (a, b) => (a + b) | 0,
      [Ops.MUL]: Math.imul,
      // an integer division by 0 is 0, as the renderers define it
      [Ops.IDIV]: (a, b) => (b === 0 ? 0 : floorDiv(a, b) | 0),
      [Ops.MOD]: (a, b) => (b === 0 ? 0 : floorMod(a, b) | 0),
      [Ops.AND]: (a, b) => a & b,
      [Ops.OR]: (a, b) => a | b,
      [Ops.XOR]: (a, b) => a ^ b,
    },
  ],
  [
    dtypes.index,
    {
      ...COMPARE,
      [Ops.ADD]: (a, b) => a + b,
      [Ops.MUL]: (a, b) => a * b,
      [Ops.IDIV]: (a, b) => (b === 0 ? 0 : floorDiv(a, b)),
      [Ops.MOD]: (a, b) => (b === 0 ? 0 : floorMod(a, b)),
    },
  ],
  [
    dtypes.bool,
    {
      [Ops.CMPNE]: (a, b) => a !== b,
      [Ops.WHERE]: (c, a, b) => (c ? a : b),
      [Ops.AND]: (a, b) => Boolean(a && b),
      [Ops.OR]: (a, b) => Boolean(a || b),
    },
  ],
]);
/** Index values are numbers while they are safe integers; wider ones fall back to execAlu's bigints. */
const SAFE_INDEX = 2 ** 52;

const OPS = new Map(Object.entries(Ops).filter((e): e is [string, Ops] => typeof e[1] === 'number'));

function decode(name: string, [op, dtype, src, arg]: SimtInstruction, steps: readonly Step[]): Step {
  const code = OPS.get(op);
  if (code === undefined) throw new Error(`SIMT: kernel ${name}: unknown instruction ${op}`);
  const d = dtypeByName(dtype);
  const first = src[0] === undefined ? undefined : steps[src[0]];
  const operand = code === Ops.WHERE ? d : (first?.dtype ?? d);
  const step: Step = { op: code, dtype: d, src, operand, fast: FAST.get(operand)?.[code], lanes: 1 };
  const parse = (v: string | number | boolean): V =>
    typeof v !== 'string' ? v : d.isFloat ? Number(v) : BigInt(v);
  if (arg !== undefined && 'value' in arg) step.value = parse(arg.value);
  if (arg !== undefined && 'lanes' in arg) step.lanes = arg.lanes;
  if (arg !== undefined && 'values' in arg) {
    step.vector = arg.values.map(parse);
    step.lanes = arg.values.length;
  }
  if (arg !== undefined && 'transposed' in arg) step.transposed = arg.transposed;
  const core = (named: string) => {
    const tc = tensorCoreNamed(named);
    if (tc === undefined) throw new Error(`SIMT: kernel ${name}: no tensor core ${named}`);
    return tc;
  };
  if (arg !== undefined && 'tensorCore' in arg) step.tensorCore = core(arg.tensorCore);
  if (arg !== undefined && 'tile' in arg) {
    const tc = core(arg.tile.tensorCore);
    step.tile = {
      layout: tc[arg.tile.operand],
      threads: tc.threads,
      swizzle: arg.swizzle,
      leading: arg.tile.leading,
    };
  }
  if (code === Ops.INDEX && first !== undefined && !isBuffer(first, steps))
    step.lane = Number(steps[src[1]!]!.value);
  if (arg !== undefined && 'slot' in arg) {
    const stored = dtypeByName(arg.dtype);
    step.memory = {
      slot: arg.slot,
      dtype: stored,
      space: arg.addrspace as 'GLOBAL' | 'LOCAL' | 'REG',
      size: arg.size,
      // elements a typed array holds as the values themselves (not float16 bits, bools as bytes, bigints)
      plain:
        ![dtypes.float16, dtypes.bfloat16, dtypes.bool].includes(stored) &&
        !(stored.isInt && stored.itemsize === 8),
    };
  }
  if (arg !== undefined && 'name' in arg) {
    const m = /^(gidx|lidx)(\d)$/.exec(arg.name);
    if (m === null) throw new Error(`SIMT: kernel ${name}: a SPECIAL is gidxN or lidxN, got ${arg.name}`);
    step.special = { kind: m[1] as 'gidx' | 'lidx', dim: Number(m[2]) };
  }
  return step;
}

/** Whether step s is a buffer (a PARAM with memory, possibly behind AFTERs). */
function isBuffer(s: Step, steps: readonly Step[]): boolean {
  let x = s;
  while (x.op === Ops.AFTER) x = steps[x.src[0]!]!;
  return x.memory !== undefined;
}

/** The grid: workgroups per dimension (gidx bounds) and threads per workgroup (lidx bounds). */
function gridOf(steps: readonly Step[]): { groups: number[]; threads: number[] } {
  const groups = [1, 1, 1];
  const threads = [1, 1, 1];
  for (const s of steps) {
    if (s.special === undefined) continue;
    const bound = steps[s.src[0]!]?.value;
    if (typeof bound !== 'number') throw new Error('SIMT: a SPECIAL needs a constant bound');
    (s.special.kind === 'gidx' ? groups : threads)[s.special.dim] = bound;
  }
  return { groups, threads };
}

/** For each element of a LOCAL buffer: the thread that last wrote and read it, and in which interval. */
interface Hazards {
  writer: Int32Array;
  writeEpoch: Int32Array;
  reader: Int32Array;
  readEpoch: Int32Array;
}
/** Several threads read the element. */
const MANY = -2;
const newHazards = (n: number): Hazards => ({
  writer: new Int32Array(n),
  writeEpoch: new Int32Array(n).fill(-1),
  reader: new Int32Array(n),
  readEpoch: new Int32Array(n).fill(-1),
});

const safeIndices = (lanes: Lanes) =>
  lanes.every((v) => typeof v !== 'bigint' && Math.abs(v as number) < SAFE_INDEX);

class SIMTProgram implements Program {
  private readonly steps: Step[] = [];
  private readonly grid: { groups: number[]; threads: number[] };
  /** Where each RANGE's END is, and each IF's ENDIF (to skip a block no thread enters). */
  private readonly ends = new Map<number, number>();

  constructor(
    private readonly backend: SIMTBackend,
    readonly name: string,
    program: SimtProgram,
  ) {
    for (const ins of program.instructions) this.steps.push(decode(name, ins, this.steps));
    this.grid = gridOf(this.steps);
    const open: number[] = [];
    this.steps.forEach((s, i) => {
      if (s.op === Ops.RANGE || s.op === Ops.IF) open.push(i);
      if (s.op === Ops.ENDIF) this.ends.set(open.pop()!, i);
      if (s.op === Ops.END) for (let k = 1; k < s.src.length; k++) this.ends.set(open.pop()!, i);
    });
  }

  get device(): string {
    return this.backend.name;
  }

  run(bufs: readonly DeviceBuffer[], _vals: readonly number[] = [], timed = false): number {
    checkBuffers(this.backend, this.name, bufs);
    const start = timed ? performance.now() : 0;
    const globals = bufs.map((b) => b.view());
    const [gx, gy, gz] = this.grid.groups as [number, number, number];
    let left = sampling?.groups ?? Infinity;
    for (let z = 0; z < gz; z++)
      for (let y = 0; y < gy; y++)
        for (let x = 0; x < gx && left-- > 0; x++) this.runGroup(globals, [x, y, z]);
    return timed ? secondsSince(start) : 0;
  }

  private fail(pc: number, what: string): never {
    throw new Error(`SIMT: kernel ${this.name}, instruction ${pc} (${Ops[this.steps[pc]!.op]}): ${what}`);
  }

  /** Runs one workgroup: every thread of it through the program together. */
  private runGroup(globals: readonly StorageArray[], group: readonly number[]): void {
    const [tx, ty] = this.grid.threads as [number, number, number];
    const count = this.grid.threads.reduce((a, b) => a * b, 1);
    const lid = (t: number, dim: number) =>
      dim === 0 ? t % tx : dim === 1 ? Math.floor(t / tx) % ty : Math.floor(t / (tx * ty));
    const steps = this.steps;
    const values: (Lanes | undefined)[] = new Array(steps.length);
    // LOCAL memory is the group's; REG memory (accumulators) is each thread's
    const memory = new Map<number, StorageArray | V[]>();
    // who last wrote and read each LOCAL element, and in which interval between BARRIERs (a race otherwise)
    const hazards = new Map<number, Hazards>();
    let epoch = 0;
    const uniform = (v: V): Lanes => new Array<V>(count).fill(v);
    let mask: boolean[] = new Array<boolean>(count).fill(true);
    const masks: boolean[][] = [];
    const loops: { pc: number; i: number; bound: number }[] = [];
    const bufferOf = (pc: number): number => {
      let p = pc;
      while (steps[p]!.op === Ops.AFTER) p = steps[p]!.src[0]!;
      return p;
    };
    const place = (indexPc: number) => {
      const ix = steps[indexPc]!;
      if (ix.op !== Ops.INDEX) this.fail(indexPc, 'a LOAD or STORE goes through an INDEX');
      const bufPc = bufferOf(ix.src[0]!);
      const mem = steps[bufPc]!.memory;
      if (mem === undefined) this.fail(indexPc, 'an INDEX into something other than a buffer');
      let data = memory.get(bufPc);
      if (data === undefined) {
        if (mem.space === 'GLOBAL') {
          data = globals[mem.slot];
          if (data === undefined) this.fail(bufPc, `no buffer passed for data${mem.slot}`);
        } else
          data =
            mem.space === 'LOCAL'
              ? toStorage(mem.dtype, new Array(mem.size).fill(0))
              : new Array<V>(mem.size * count);
        memory.set(bufPc, data);
        if (mem.space === 'LOCAL') hazards.set(bufPc, newHazards(mem.size));
      }
      const width = steps[ix.src[1]!]!.lanes;
      return { mem, data, idx: values[ix.src[1]!]!, width, hazard: hazards.get(bufPc) };
    };
    /** Element i of a buffer for thread t; accumulators live per thread. */
    const address = (mem: NonNullable<Step['memory']>, i: V, t: number, pc: number): number => {
      const k = Number(i);
      if (!(k >= 0 && k < mem.size))
        this.fail(
          pc,
          `thread ${t} of group ${group.join(',')} reaches element ${k} of a ${mem.space} buffer of ${mem.size} (data${mem.slot})`,
        );
      return mem.space === 'REG' ? t * mem.size + k : k;
    };

    for (let pc = 0; pc < steps.length; pc++) {
      const s = steps[pc]!;
      const arg = (k: number) => values[s.src[k]!]!;
      switch (s.op) {
        case Ops.CONST:
          values[pc] = uniform(s.value!);
          continue;
        case Ops.PARAM:
        case Ops.GROUP:
        case Ops.AFTER:
          continue;
        case Ops.SPECIAL: {
          const { kind, dim } = s.special!;
          values[pc] =
            kind === 'gidx' ? uniform(group[dim]!) : Array.from({ length: count }, (_, t) => lid(t, dim));
          continue;
        }
        case Ops.VCONST:
          values[pc] = uniform(s.vector as unknown as V);
          continue;
        case Ops.STACK:
          // an index STACK is a shape; a STACK of values is a vector
          if (s.dtype !== dtypes.index)
            values[pc] = Array.from(
              { length: count },
              (_, t) => s.src.map((k) => values[k]![t]!) as unknown as V,
            );
          continue;
        case Ops.INDEX:
          if (s.lane !== undefined) {
            const v = arg(0);
            values[pc] = Array.from({ length: count }, (_, t) => lanesOf(v, t)[s.lane!]!);
          }
          continue;
        case Ops.LOAD: {
          const { mem, data, idx, width, hazard } = place(s.src[0]!);
          const alt = s.src.length === 3 ? arg(1) : undefined;
          const altLanes = s.src.length === 3 && steps[s.src[1]!]!.lanes > 1;
          const gate = s.src.length === 3 ? arg(2) : undefined;
          const read = (i: V, t: number, off: boolean, j: number): V => {
            if (off) return (altLanes ? lanesOf(alt!, t)[j] : alt?.[t]) ?? 0;
            const at = address(mem, i, t, pc);
            if (mem.space === 'REG') return (data as V[])[at]!;
            if (hazard !== undefined) this.noteRead(hazard, at, t, epoch, pc);
            return mem.plain ? (data as StorageArray)[at]! : readElement(mem.dtype, data as StorageArray, at);
          };
          const out = new Array<V>(count);
          if (s.tile !== undefined) {
            values[pc] = this.tileLoad(pc, s.tile, width, count, mask, idx, (at, t) => read(at, t, false, 0));
            continue;
          }
          if (s.transposed !== undefined) {
            values[pc] = this.matrixLoad(
              pc,
              s.transposed,
              width,
              count,
              mask,
              (t) => Number(lanesOf(idx, t)[0]),
              (at, t) => read(at, t, false, 0),
            );
            continue;
          }
          if (sampling !== undefined && mem.space === 'GLOBAL')
            noteSectors(
              this.name,
              pc,
              mem.dtype.itemsize,
              (t) =>
                !mask[t] || (gate !== undefined && !gate[t])
                  ? undefined
                  : width > 1
                    ? lanesOf(idx, t).map(Number)
                    : [Number(idx[t])],
              count,
            );
          for (let t = 0; t < count; t++) {
            const off = !mask[t] || (gate !== undefined && !gate[t]);
            out[t] =
              width > 1
                ? (lanesOf(idx, t).map((i, j) => read(i, t, off, j)) as unknown as V)
                : read(idx[t]!, t, off, 0);
          }
          values[pc] = out;
          continue;
        }
        case Ops.STORE: {
          const { mem, data, idx, width, hazard } = place(s.src[0]!);
          const value = arg(1);
          const gate = s.src.length === 3 ? arg(2) : undefined;
          const write = (i: V, v: V, t: number) => {
            const at = address(mem, i, t, pc);
            if (hazard !== undefined) this.noteWrite(hazard, at, t, epoch, pc);
            if (mem.space === 'REG') (data as V[])[at] = v;
            else if (mem.plain) (data as StorageArray)[at] = v as number;
            else writeElement(mem.dtype, data as StorageArray, at, v);
          };
          for (let t = 0; t < count; t++) {
            if (!mask[t] || (gate !== undefined && !gate[t])) continue;
            if (width === 1) write(idx[t]!, value[t]!, t);
            else {
              const [at, v] = [lanesOf(idx, t), lanesOf(value, t)];
              for (let j = 0; j < width; j++) write(at[j]!, v[j]!, t);
            }
          }
          continue;
        }
        case Ops.WMMA:
          if (mask.includes(false))
            this.fail(pc, 'a WMMA inside a branch that not every thread of the group takes');
          values[pc] = this.wmma(pc, s.tensorCore!, arg(0), arg(1), arg(2), count);
          continue;
        case Ops.RANGE: {
          const bound = Number(arg(0)[0]);
          if (arg(0).some((b) => Number(b) !== bound))
            this.fail(pc, 'the loop bound differs between threads');
          if (bound <= 0) {
            pc = this.ends.get(pc)!;
            continue;
          }
          loops.push({ pc, i: 0, bound });
          values[pc] = uniform(0);
          continue;
        }
        case Ops.END: {
          // closes the innermost loops, one per range it names: the first unfinished one goes round again
          let again = false;
          for (let k = 1; k < s.src.length && !again; k++) {
            const loop = loops[loops.length - 1]!;
            if (++loop.i < Math.min(loop.bound, sampling?.trips ?? Infinity)) {
              values[loop.pc] = uniform(loop.i);
              pc = loop.pc;
              again = true;
            } else loops.pop();
          }
          continue;
        }
        case Ops.IF: {
          masks.push(mask);
          const gate = arg(0);
          mask = mask.map((m, t) => m && Boolean(gate[t]));
          if (!mask.includes(true)) {
            pc = this.ends.get(pc)! - 1; // the ENDIF restores the mask
          }
          continue;
        }
        case Ops.ENDIF:
          mask = masks.pop()!;
          continue;
        case Ops.BARRIER:
          epoch++;
          if (mask.includes(false))
            this.fail(pc, 'a BARRIER inside a branch that not every thread of the group takes');
          continue;
      }
      values[pc] = this.alu(
        pc,
        s,
        s.src.map((k) => values[k]!),
        count,
        mask,
      );
    }
  }

  /** A read of LOCAL element `at` by thread t: another thread's write since the last BARRIER is a race. */
  private noteRead(h: Hazards, at: number, t: number, epoch: number, pc: number): void {
    if (h.writeEpoch[at] === epoch && h.writer[at] !== t)
      this.fail(
        pc,
        `thread ${t} reads LOCAL element ${at}, which thread ${h.writer[at]} wrote with no BARRIER between (a race)`,
      );
    h.reader[at] = h.readEpoch[at] === epoch && h.reader[at] !== t ? MANY : t;
    h.readEpoch[at] = epoch;
  }

  /** A write of LOCAL element `at` by thread t: another thread's read or write since the last BARRIER is a race. */
  private noteWrite(h: Hazards, at: number, t: number, epoch: number, pc: number): void {
    if (h.writeEpoch[at] === epoch && h.writer[at] !== t)
      this.fail(
        pc,
        `threads ${h.writer[at]} and ${t} write LOCAL element ${at} with no BARRIER between (a race)`,
      );
    if (h.readEpoch[at] === epoch && h.reader[at] !== t)
      this.fail(
        pc,
        `thread ${t} writes LOCAL element ${at}, which ${h.reader[at] === MANY ? 'other threads' : `thread ${h.reader[at]}`} read with no BARRIER between (a race)`,
      );
    h.writer[at] = t;
    h.writeEpoch[at] = epoch;
  }

  /**
   * A matrix load (ldmatrix) for every warp of the group: lane L's address starts row L of the 8 x 8 matrices,
   * and lane T gets row T / 4, columns 2 (T % 4) + e of each (transposed: rows 2 (T % 4) + e of column T / 4).
   */
  private matrixLoad(
    pc: number,
    transposed: boolean,
    lanes: number,
    count: number,
    mask: readonly boolean[],
    rowOf: (t: number) => number,
    read: (at: number, t: number) => V,
  ): Lanes {
    if (count % WARP !== 0 || mask.includes(false))
      this.fail(pc, `a matrix load needs whole warps of ${WARP} threads, all active; the group has ${count}`);
    const out = new Array<V>(count);
    for (let t = 0; t < count; t++) {
      const [w, T] = [t - (t % WARP), t % WARP];
      out[t] = Array.from({ length: lanes }, (_, i) => {
        const [j, e] = [i >> 1, i & 1];
        const [r, c] = transposed ? [2 * (T % 4) + e, T >> 2] : [T >> 2, 2 * (T % 4) + e];
        return read(rowOf(w + 8 * j + r) + c, t);
      }) as unknown as V;
    }
    return out;
  }

  /**
   * A warpgroup tensor core's operand for every warpgroup: thread T of it gets its elements of the core's layout,
   * element (r, c) read at x = start + (c / 64) leading + 64 r + c % 64 through the swizzle (x ^ ((x / row) % 8) *
   * chunk), as the hardware reads a descriptor's tile (`leading`: its leading byte offset, over the element size);
   * the start, the first address of the warpgroup's first thread, must be every thread's and lie on a multiple of
   * 8 rows of the swizzle.
   */
  private tileLoad(
    pc: number,
    tile: NonNullable<Step['tile']>,
    lanes: number,
    count: number,
    mask: readonly boolean[],
    idx: Lanes,
    read: (at: number, t: number) => V,
  ): Lanes {
    const { layout, threads, swizzle, leading } = tile;
    if (count % threads !== 0 || mask.includes(false))
      this.fail(
        pc,
        `a warpgroup operand needs whole warpgroups of ${threads} threads, all active; the group has ${count}`,
      );
    const out = new Array<V>(count);
    for (let g = 0; g < count; g += threads) {
      const start = Number(lanesOf(idx, g)[0]);
      if (start % (8 * swizzle.row) >= swizzle.row)
        this.fail(
          pc,
          `a warpgroup operand's tile starts at element ${start}, not on a multiple of 8 rows of ${swizzle.row}`,
        );
      for (let T = 0; T < threads; T++) {
        if (Number(lanesOf(idx, g + T)[0]) !== start)
          this.fail(
            pc,
            `threads ${g} and ${g + T} of a warpgroup give its operand different tiles (${start}, ${Number(lanesOf(idx, g + T)[0])})`,
          );
        out[g + T] = Array.from({ length: lanes }, (_, i) => {
          const [r, c] = positionOf(layout, T, i);
          if (c >= 64 && leading === undefined)
            this.fail(
              pc,
              `a warpgroup operand's column ${c} lies past its first 64, and it has no leading byte offset`,
            );
          const x = start + Math.floor(c / 64) * (leading ?? 0) + r * 64 + (c % 64);
          return read(x ^ ((Math.floor(x / swizzle.row) % 8) * swizzle.chunk), g + T);
        }) as unknown as V;
      }
    }
    return out;
  }

  /**
   * D = A * B + C for every warp of the group: the lanes' elements gathered into matrices by the tensor core's
   * layout, products in float64 (exact for float16, bfloat16 and tf32 inputs), each sum rounded to float32.
   */
  private wmma(pc: number, tc: TensorCore, a: Lanes, b: Lanes, c: Lanes, count: number): Lanes {
    if (count % tc.threads !== 0)
      this.fail(pc, `a WMMA needs whole warps of ${tc.threads} threads; the group has ${count}`);
    const read = tc.tf32 ? roundTF32 : (x: number) => x;
    const out = new Array<V>(count);
    const matrix = (rows: number, cols: number) =>
      Array.from({ length: rows }, () => new Array<number>(cols).fill(0));
    for (let w = 0; w < count; w += tc.threads) {
      const [A, B, C] = [matrix(tc.m, tc.k), matrix(tc.k, tc.n), matrix(tc.m, tc.n)];
      for (let lane = 0; lane < tc.threads; lane++) {
        const gather = (m: number[][], layout: TensorCore['a'], v: Lanes, f: (x: number) => number) => {
          for (let i = 0; i < elementsOf(layout); i++) {
            const [r, col] = positionOf(layout, lane, i);
            m[r]![col] = f(Number(lanesOf(v, w + lane)[i]));
          }
        };
        gather(A, tc.a, a, read);
        gather(B, tc.b, b, read);
        gather(C, tc.c, c, (x) => x);
      }
      for (let lane = 0; lane < tc.threads; lane++) {
        const d = Array.from({ length: elementsOf(tc.c) }, (_, i) => {
          const [r, col] = positionOf(tc.c, lane, i);
          let sum = C[r]![col]!;
          for (let k = 0; k < tc.k; k++) sum += A[r]![k]! * B[k]![col]!;
          return Math.fround(sum);
        });
        out[w + lane] = d as unknown as V;
      }
    }
    return out;
  }

  /** An elementwise op for every thread; an op with no value on a thread that runs it is an error. */
  private alu(pc: number, s: Step, args: Lanes[], count: number, mask: boolean[]): Lanes {
    if (s.lanes > 1) return this.vectorAlu(pc, s, args, count, mask);
    const out = new Array<V>(count);
    const [a, b, c] = args as [Lanes, Lanes | undefined, Lanes | undefined];
    if (s.fast !== undefined && (s.operand !== dtypes.index || args.every(safeIndices))) {
      const f = s.fast;
      for (let t = 0; t < count; t++) out[t] = f(a[t] as number, b?.[t] as number, c?.[t] as number);
      return out;
    }
    const operands = new Array<V>(args.length);
    for (let t = 0; t < count; t++) {
      for (let k = 0; k < args.length; k++) operands[k] = args[k]![t]!;
      const v = execAlu(s.op, s.operand, operands, s.dtype);
      if (v === undefined) {
        // the renderers define an integer division by 0 as 0; C leaves a float-to-int cast of NaN or infinity
        // undefined, where the emulator gives 0 too
        if (s.op === Ops.CAST || s.op === Ops.IDIV || s.op === Ops.MOD || !mask[t]) out[t] = 0;
        else this.fail(pc, `thread ${t} computes ${Ops[s.op]} of ${operands.join(', ')}, which has no value`);
      } else out[t] = v;
    }
    return out;
  }

  /** A vector op: the scalar op on each lane, a scalar operand read by every lane. */
  private vectorAlu(pc: number, s: Step, args: Lanes[], count: number, mask: boolean[]): Lanes {
    const vector = s.src.map((k) => this.steps[k]!.lanes > 1);
    const lane = (j: number): Lanes[] =>
      args.map((x, k) => (vector[k] ? Array.from({ length: count }, (_, t) => lanesOf(x, t)[j]!) : x));
    const scalar: Step = { ...s, lanes: 1 };
    const perLane = Array.from({ length: s.lanes }, (_, j) => this.alu(pc, scalar, lane(j), count, mask));
    return Array.from({ length: count }, (_, t) => perLane.map((l) => l[t]!) as unknown as V);
  }
}
