// The ops of the one IR, grouped as the spec groups them, with the type of each op's `arg`.
import type { AddrSpace, ConstValue, DType } from '../dtype.ts';

export enum Ops {
  // source: leaves
  BUFFER,
  BUFFERVIEW,
  PARAM,
  CONST,
  VCONST,
  BINARY,
  // movement: views, indexing and reinterpretation, no arithmetic
  PERMUTE,
  FLIP,
  RESHAPE,
  EXPAND,
  PAD,
  SHRINK,
  INDEX,
  STACK,
  BITCAST,
  REPLICATED,
  // reduce
  REDUCE,
  // call: function abstraction
  FUNCTION,
  CALL,
  TUPLE,
  GETTUPLE,
  // load/store: the only ops that move data between devices or address spaces, or write it
  LOAD,
  COPY,
  STORE,
  // ordering
  RANGE,
  END,
  AFTER,
  GROUP,
  SINK,
  LINEAR,
  // elementwise primitives
  RECIP,
  TRUNC,
  CAST,
  ADD,
  MUL,
  MAX,
  MOD,
  IDIV,
  CMPLT,
  CMPNE,
  XOR,
  OR,
  AND,
  SHR,
  SHL,
  WHERE,
  // elementwise ops defined by a decomposition into the primitives
  NEG,
  SUB,
  DIV,
  CMPGT,
  CMPGE,
  CMPLE,
  CMPEQ,
  NOT,
  EXP2,
  LOG2,
  SIN,
  SQRT,
  POW,
  MULACC,
  THREEFRY,
  // markers: identity on data
  CONTIGUOUS,
  CONTIGUOUSBACKWARD,
  DETACH,
  // codegen: generated-code primitives, not part of tensor graphs
  BARRIER,
  SPECIAL,
  IF,
  ENDIF,
  WMMA,
  CUSTOM,
  ATOMICADD,
}

export const OP_COUNT = Object.keys(Ops).length / 2;

/** Op names by op, for printing (`Ops[op]` also works). */
export const opName = (op: Ops): string => Ops[op]!;

const set = (...ops: Ops[]): ReadonlySet<Ops> => new Set(ops);

/** The spec's groups. */
export const GroupOp = {
  Source: set(Ops.BUFFER, Ops.BUFFERVIEW, Ops.PARAM, Ops.CONST, Ops.VCONST, Ops.BINARY),
  Movement: set(
    Ops.PERMUTE,
    Ops.FLIP,
    Ops.RESHAPE,
    Ops.EXPAND,
    Ops.PAD,
    Ops.SHRINK,
    Ops.INDEX,
    Ops.STACK,
    Ops.BITCAST,
    Ops.REPLICATED,
  ),
  Reduce: set(Ops.REDUCE),
  Call: set(Ops.FUNCTION, Ops.CALL, Ops.TUPLE, Ops.GETTUPLE),
  LoadStore: set(Ops.LOAD, Ops.COPY, Ops.STORE),
  Ordering: set(Ops.RANGE, Ops.END, Ops.AFTER, Ops.GROUP, Ops.SINK, Ops.LINEAR),
  Unary: set(Ops.RECIP, Ops.TRUNC, Ops.CAST, Ops.NEG, Ops.NOT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT),
  Binary: set(
    Ops.ADD,
    Ops.MUL,
    Ops.MAX,
    Ops.MOD,
    Ops.IDIV,
    Ops.CMPLT,
    Ops.CMPNE,
    Ops.XOR,
    Ops.OR,
    Ops.AND,
    Ops.SHR,
    Ops.SHL,
    Ops.SUB,
    Ops.DIV,
    Ops.CMPGT,
    Ops.CMPGE,
    Ops.CMPLE,
    Ops.CMPEQ,
    Ops.POW,
    Ops.THREEFRY,
  ),
  Ternary: set(Ops.WHERE, Ops.MULACC),
  /** Elementwise ops that are not primitives: each has a decomposition in the spec. */
  Decomposed: set(
    Ops.NEG,
    Ops.SUB,
    Ops.DIV,
    Ops.CMPGT,
    Ops.CMPGE,
    Ops.CMPLE,
    Ops.CMPEQ,
    Ops.NOT,
    Ops.EXP2,
    Ops.LOG2,
    Ops.SIN,
    Ops.SQRT,
    Ops.POW,
    Ops.MULACC,
    Ops.THREEFRY,
  ),
  Marker: set(Ops.CONTIGUOUS, Ops.CONTIGUOUSBACKWARD, Ops.DETACH),
  Codegen: set(Ops.BARRIER, Ops.SPECIAL, Ops.IF, Ops.ENDIF, Ops.WMMA, Ops.CUSTOM, Ops.ATOMICADD),
  /** Comparisons: their result is bool. */
  Comparison: set(Ops.CMPLT, Ops.CMPNE, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ),
  /** Binary ops whose operands can be swapped. */
  Commutative: set(Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.OR, Ops.AND),
  /** Ops that may repeat freely in a reduction tree. */
  Associative: set(Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR),
  /** Ops whose operands are integers (or bools). */
  IntegerOnly: set(Ops.MOD, Ops.IDIV, Ops.XOR, Ops.OR, Ops.AND, Ops.SHR, Ops.SHL, Ops.THREEFRY),
};

/** Every elementwise op: unary, binary and ternary, primitive or decomposed. */
export const ALU: ReadonlySet<Ops> = new Set([...GroupOp.Unary, ...GroupOp.Binary, ...GroupOp.Ternary]);

/** Ops that exist only in kernels and linear programs: a tensor graph holds every other op. */
export const KERNEL_ONLY_OPS = [
  Ops.RANGE,
  Ops.END,
  Ops.LINEAR,
  Ops.BARRIER,
  Ops.SPECIAL,
  Ops.IF,
  Ops.ENDIF,
  Ops.WMMA,
  Ops.CUSTOM,
  Ops.ATOMICADD,
] as const;
export type TensorGraphOp = Exclude<Ops, (typeof KERNEL_ONLY_OPS)[number]>;
const kernelOnly: ReadonlySet<Ops> = new Set(KERNEL_ONLY_OPS);
export const isTensorGraphOp = (op: Ops): op is TensorGraphOp => !kernelOnly.has(op);

/** The ops a REDUCE may reduce with. */
export type ReduceOp = Ops.ADD | Ops.MAX | Ops.MUL;

/** How a kernel range is executed. Letters and colours are used in kernel names. */
export enum AxisType {
  GLOBAL = 'GLOBAL',
  LOCAL = 'LOCAL',
  WARP = 'WARP',
  THREAD = 'THREAD',
  LOOP = 'LOOP',
  REDUCE = 'REDUCE',
  GROUP_REDUCE = 'GROUP_REDUCE',
  UPCAST = 'UPCAST',
  UNROLL = 'UNROLL',
}

export const axisLetter: Record<AxisType, string> = {
  GLOBAL: 'g',
  LOCAL: 'l',
  WARP: 'w',
  THREAD: 't',
  LOOP: 'L',
  REDUCE: 'R',
  GROUP_REDUCE: 'G',
  UPCAST: 'u',
  UNROLL: 'r',
};

/** A device name (`CPU`, `CUDA:1`) or a tuple of names for a tensor spread over several devices. */
export type Device = string | readonly string[];

export interface BufferArg {
  slot: number;
  dtype: DType;
  device: Device;
  addrspace: AddrSpace;
}
export interface BufferViewArg {
  size: number;
  dtype: DType;
  offset: number;
}
/**
 * A LOCAL buffer's XOR swizzle: element x lives at x ^ (((x / row) % 8) * chunk), so that 16-byte chunks (`chunk`
 * elements) of 8 consecutive lines of `row` elements fall in 8 different bank groups (src/codegen/swizzle.ts).
 */
export interface Swizzle {
  row: number;
  chunk: number;
}
export interface ParamArg {
  /** A function parameter's position; for a symbolic variable, its name. */
  slot: number | string;
  dtype: DType;
  device?: Device;
  addrspace?: AddrSpace;
  /** A LOCAL buffer's layout, where STAGE swizzles its tile. */
  swizzle?: Swizzle;
}
export interface ConstArg {
  value: ConstValue;
  dtype: DType;
}
export interface VConstArg {
  values: readonly ConstValue[];
  dtype: DType;
}
export interface ReduceArg {
  op: ReduceOp;
  axes: readonly number[];
}
export interface LoadArg {
  device?: Device;
  addrspace?: AddrSpace;
  /**
   * A warp's load of 8 x 8 matrices of 16-bit elements from LOCAL memory (ldmatrix): lane L's address (the
   * INDEX's base; its offsets 0.. are the row's first elements) starts row L of the matrices, 16 bytes aligned,
   * and lane T gets two elements of each matrix j: row T / 4, columns 2 (T % 4) and 2 (T % 4) + 1, or
   * (`trans`) rows 2 (T % 4) and 2 (T % 4) + 1 of column T / 4. As many matrices as half the load's lanes.
   */
  matrix?: { trans: boolean };
  /**
   * A warpgroup tensor core's operand (`a` or `b` of the named core, TensorCore.sharedOperands), which the tensor
   * core reads from LOCAL memory itself: the INDEX's first address is the operand tile's element (0, 0), the same
   * for the 128 threads, whose element (r, c) is (c / 64) leading + r * 64 + c % 64 further, through the buffer's
   * swizzle. Each thread's value is its elements of the core's layout (what the SIMT emulator gives it); CUDA
   * passes a matrix descriptor of the address, with `leading` as its leading byte offset.
   */
  tile?: {
    operand: 'a' | 'b';
    tensorCore: string;
    /** Elements from one block of 64 columns to the next, where the operand is wider than 64 columns. */
    leading?: number;
  };
}
/** A STORE into LOCAL memory of a GLOBAL load that may land late (cp.async): by the next BARRIER that waits. */
export interface StoreArg {
  async: true;
}
/** A BARRIER that first waits for the thread's asynchronous copies, all but the `pending` latest rounds of them. */
export interface BarrierArg {
  pending: number;
}
export interface RangeArg {
  /** Distinguishes ranges with the same bound; also their order in a kernel. */
  id: number;
  type: AxisType;
}
export interface WmmaArg {
  name: string;
  /** (N, M, K) of one warp-level multiply. */
  dims: readonly [number, number, number];
  dtypeIn: DType;
  dtypeOut: DType;
  device: string;
  /** Threads that run it together: a warp's 32 where absent, a warpgroup's 128. */
  threads?: number;
}
export interface CustomArg {
  fmt: string;
  dtype: DType;
}

/** The arg of each op; ops not listed take `null`. */
export interface ArgTypes {
  [Ops.BUFFER]: BufferArg;
  [Ops.BUFFERVIEW]: BufferViewArg;
  [Ops.PARAM]: ParamArg;
  [Ops.CONST]: ConstArg;
  [Ops.VCONST]: VConstArg;
  [Ops.BINARY]: Uint8Array;
  [Ops.PERMUTE]: readonly number[];
  [Ops.FLIP]: readonly boolean[];
  [Ops.BITCAST]: DType;
  [Ops.REPLICATED]: readonly number[];
  [Ops.REDUCE]: ReduceArg;
  [Ops.GETTUPLE]: number;
  [Ops.LOAD]: LoadArg | null;
  [Ops.STORE]: StoreArg | null;
  [Ops.BARRIER]: BarrierArg | null;
  [Ops.COPY]: Device;
  [Ops.RANGE]: RangeArg;
  [Ops.CAST]: DType;
  [Ops.SPECIAL]: string;
  [Ops.WMMA]: WmmaArg;
  [Ops.CUSTOM]: CustomArg;
}

export type ArgOf<O extends Ops> = O extends keyof ArgTypes ? ArgTypes[O] : null;
export type Arg = ArgTypes[keyof ArgTypes] | null;

/** `tag` is free for a pass to mark nodes while it works; it takes part in identity. */
export type Tag = string | number | null;
