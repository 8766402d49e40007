// Tensor: the lazy front end. Every op builds UOps; nothing runs until data is asked for.

import {
  type ConstValue,
  type DType,
  type DTypeLike,
  dtypeOfArray,
  dtypes,
  fromStorage,
  narrowSumDType,
  prodDType,
  promote,
  type StorageArray,
  sumDType,
  toDType,
  toStorage,
  truncate,
} from '../dtype.ts';
import { bufferData, holdBuffer, letGoOfBuffer, setBufferData } from '../engine/buffers.ts';
import { realize } from '../engine/realize.ts';
import { prod } from '../helpers.ts';
import { Device } from '../runtime/device.ts';
import { assignMade } from '../schedule/callify.ts';
import { newBuffer } from '../schedule/rangeify.ts';
import { GroupOp, Ops, type ReduceOp } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';
import { noteAssigned, noteMade } from './frames.ts';
import {
  broadcastShape,
  broadcastUOp,
  castUOp,
  gradModeOf,
  productSumUOp,
  reduceUOp,
  shapesEqual,
  sumUOp,
} from './op-nodes.ts';
import { noteRealized, originsOf } from './origins.ts';
import {
  checkAxes,
  checkDType,
  checkFinites,
  checkOptions,
  checkScalar,
  checkShape,
  deviceOf,
  isAxes,
  isSize,
  shown,
} from './validate.ts';
import { isBufferBase, viewChain, viewsBuffer, writeThrough } from './write-through.ts';

/** Nested arrays of numbers or booleans, as `tolist()` gives them back. */
export type NestedArray = ConstValue | readonly NestedArray[];
export type TensorData = NestedArray | ArrayBufferView;

/** The JS types a scalar operand may have (ConstValue's). */
const SCALAR_TYPES: ReadonlySet<string> = new Set(['number', 'boolean', 'bigint']);

/** Sizes given as one array or as separate numbers (`reshape([2, 3])` or `reshape(2, 3)`). */
type Sizes = [readonly number[]] | number[];

function sizes(op: string, args: Sizes): readonly number[] {
  const list = args.length === 1 && Array.isArray(args[0]) ? (args[0] as readonly number[]) : args;
  if (!list.every((d) => typeof d === 'number'))
    throw new Error(
      `${op}: give sizes as one array or as numbers, e.g. ${op}([2, 3]) or ${op}(2, 3), got ${shown(args)}`,
    );
  return list as readonly number[];
}

/** @internal opts.dtype as a DType, undefined if not given; an unknown name throws, naming op. */
export function dtypeOption(op: string, opts: TensorOptions): DType | undefined {
  checkOptions(op, opts);
  return opts.dtype === undefined ? undefined : toDType(op, opts.dtype);
}

export interface TensorOptions {
  /** A DType or its name: `dtypes.int64` or 'int64'. */
  dtype?: DTypeLike;
  device?: string;
  /** Track gradients for this tensor (used by autograd). */
  requiresGrad?: boolean;
}

const LOG2_E = Math.log2(Math.E);
const LN_2 = Math.LN2;

function shapeOf(data: NestedArray): number[] {
  const shape: number[] = [];
  let d: NestedArray = data;
  while (Array.isArray(d)) {
    shape.push(d.length);
    d = d[0] as NestedArray;
  }
  return shape;
}

function flatten(
  data: NestedArray,
  shape: readonly number[],
  out: ConstValue[] = [],
  depth = 0,
): ConstValue[] {
  if (depth === shape.length) {
    if (Array.isArray(data))
      throw new Error(`Tensor: ragged nested array; expected shape (${shape.join(', ')})`);
    if (!SCALAR_TYPES.has(typeof data))
      throw new Error(
        `Tensor: element ${positionOf(out.length, shape)} is ${shown(data)}; elements must be numbers, booleans or bigints (in nested arrays, or a TypedArray)`,
      );
    out.push(data as ConstValue);
    return out;
  }
  if (!Array.isArray(data) || data.length !== shape[depth])
    throw new Error(`Tensor: ragged nested array at depth ${depth}; expected shape (${shape.join(', ')})`);
  for (const x of data) flatten(x, shape, out, depth + 1);
  return out;
}

/** The flat index i in a shape, as the index list an error shows: [1, 0]. */
function positionOf(i: number, shape: readonly number[]): string {
  const at = shape.map(() => 0);
  for (let d = shape.length - 1; d >= 0; d--) {
    at[d] = i % shape[d]!;
    i = Math.floor(i / shape[d]!);
  }
  return `[${at.join(', ')}]`;
}

const isTypedArray = (x: unknown): x is ArrayBufferView => ArrayBuffer.isView(x) && !(x instanceof DataView);

/**
 * The dtype JS values suggest: bool for booleans; for integers int32, or int64 where one is a bigint or
 * outside int32; float32 otherwise.
 */
export function defaultDType(values: readonly ConstValue[]): DType {
  if (values.length && values.every((v) => typeof v === 'boolean')) return dtypes.bool;
  if (values.every((v) => typeof v === 'bigint' || Number.isInteger(v) || typeof v === 'boolean'))
    return values.some((v) => typeof v === 'bigint' || outOfRange(dtypes.int32, v))
      ? dtypes.int64
      : dtypes.int32;
  return dtypes.float32;
}

/** An integer dtype's range, exactly (64-bit bounds are past 2^53). */
function intRange(dtype: DType): [bigint, bigint] {
  const bits = BigInt(dtype.itemsize * 8);
  return dtype.isUnsigned ? [0n, (1n << bits) - 1n] : [-(1n << (bits - 1n)), (1n << (bits - 1n)) - 1n];
}

/** Whether an integer value lies outside an integer dtype's range (a fraction truncates, as a cast does). */
function outOfRange(dtype: DType, v: ConstValue): boolean {
  if (!dtype.isInt || dtype === dtypes.index || typeof v === 'boolean') return false;
  if (typeof v === 'number' && !Number.isInteger(v)) return false;
  const [lo, hi] = intRange(dtype);
  const b = BigInt(v);
  return b < lo || b > hi;
}

/**
 * Where a JS value lies against an integer dtype's range: -1 below, 1 above, 0 inside (or not an integer, or
 * not an integer dtype). Numbers inside 2^53 compare as numbers, the rest exactly as bigints.
 */
function sideOfRange(dtype: DType, v: ConstValue): -1 | 0 | 1 {
  if (dtype === dtypes.index) return 0;
  if (typeof v === 'number' && Math.abs(v) <= Number.MAX_SAFE_INTEGER && dtype.itemsize < 8)
    return v < dtype.min ? -1 : v > dtype.max ? 1 : 0;
  if (!outOfRange(dtype, v)) return 0;
  return BigInt(v) < 0n ? -1 : 1;
}

/** Throws, naming op, if a JS value does not fit the integer dtype it would be stored in: nothing wraps unasked. */
function checkFits(op: string, dtype: DType, values: ArrayLike<ConstValue>): void {
  for (let i = 0; i < values.length; i++)
    if (outOfRange(dtype, values[i]!)) {
      const [lo, hi] = intRange(dtype);
      throw new Error(
        `${op}: the value ${BigInt(values[i]!)} does not fit ${dtype.name} (${lo}..${hi}); give a wider dtype (cast() wraps, on purpose)`,
      );
    }
}

/** The BUFFER node a tensor's value lives in: the node itself, or the buffer a pending assign writes. */
const bufferOf = (u: UOp): UOp | undefined =>
  u.op === Ops.BUFFER ? u : u.op === Ops.AFTER && u.src[0]!.op === Ops.BUFFER ? u.src[0] : undefined;

/**
 * The tensors of Tensor.deferredInit whose values are not computed yet: the first read of any of them, or the
 * next realize, computes them all (realizeDeferred).
 */
const deferred = new Set<Tensor>();

/** @internal Every tensor that has required gradients, held weakly: backward() looks for them in the loss's graph. */
export const gradTracked = new Set<WeakRef<Tensor>>();
const untrack = new FinalizationRegistry<WeakRef<Tensor>>((ref) => gradTracked.delete(ref));

/** The buffers (or lazy graphs) of the live tensors with requiresGrad: where gradients are wanted. */
function gradTargets(): Set<UOp> {
  const targets = new Set<UOp>();
  for (const ref of gradTracked) {
    const t = ref.deref();
    if (t?.requiresGrad) targets.add(t.uop.op === Ops.AFTER ? t.uop.src[0]! : t.uop);
  }
  return targets;
}

/** A new BUFFER holding the data. */
function bufferFrom(data: TensorData, dtype: DType | undefined, device: string): UOp {
  let values: ArrayLike<ConstValue>;
  let shape: number[];
  if (isTypedArray(data)) {
    const native = dtypeOfArray(data);
    dtype ??= native;
    // an array already in the dtype's storage goes in as it is (a dataset's millions of elements)
    if (dtype === native) {
      const buf = newBuffer([(data as StorageArray).length], dtype, device);
      setBufferData(buf, data as StorageArray);
      return buf;
    }
    values = data as unknown as ArrayLike<ConstValue>;
    shape = [values.length];
  } else {
    shape = shapeOf(data);
    const flat = flatten(data, shape);
    dtype ??= defaultDType(flat);
    values = flat;
  }
  checkFits('Tensor', dtype, values);
  const buf = newBuffer(shape, dtype, device);
  setBufferData(buf, toStorage(dtype, values));
  return buf;
}

/**
 * @internal A creation function whose `requiresGrad` option (in its argument number `at`) marks the tensor it
 * returns, not the tensors that tensor is built from.
 */
export function marksResult<A extends unknown[]>(
  at: number,
  f: (...args: A) => Tensor,
): (...args: A) => Tensor {
  return (...args: A) => {
    const opts = args[at] as TensorOptions | undefined;
    if (!opts?.requiresGrad) return f(...args);
    const inner = [...args] as A;
    inner[at] = { ...opts, requiresGrad: false };
    const t = f(...inner);
    t.requiresGrad = true;
    return t;
  };
}

/** A constant tensor of shape, for the public op `op` (full, zeros, ones). */
function filled(
  op: string,
  shape: readonly number[],
  value: ConstValue,
  opts: TensorOptions,
  dtype = dtypeOption(op, opts) ?? defaultDType([value]),
): Tensor {
  checkShape(op, shape);
  checkScalar(op, 'the value', value);
  checkFits(op, dtype, [value]);
  const c = UOp.const(dtype, value);
  return new Tensor(c.reshape(shape.map(() => 1)).expand(shape), opts);
}

/**
 * Runs the schedule; memory the allocator cannot give (a RangeError from inside) becomes an error naming the
 * tensors asked for, their shapes and sizes, so that the op that made them can be found.
 */
function realizeNamingShapes(tensors: readonly Tensor[]): ReturnType<typeof realize> {
  try {
    return realize(tensors);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    const asked = tensors
      .map(
        (t) => `(${t.shape.join(', ')}) ${t.dtype.name} on ${t.device} (${t.numel * t.dtype.itemsize} bytes)`,
      )
      .join(', ');
    throw new Error(
      `out of memory computing ${asked} and the buffers it needs: ${e.message}; use smaller shapes, or realize parts in turn`,
    );
  }
}

/** How pad fills: a constant, the mirror image without the edge, the edge repeated, or the other end. */
export type PadMode = 'constant' | 'reflect' | 'replicate' | 'circular';
const PAD_MODES: readonly string[] = ['constant', 'reflect', 'replicate', 'circular'];
export interface PadOptions {
  mode?: PadMode;
  /** The fill of mode 'constant' (default 0). */
  value?: number;
}

export class Tensor {
  static readonly float32 = dtypes.float32;
  static readonly int32 = dtypes.int32;
  static readonly bool = dtypes.bool;
  readonly device: string;
  private _uop: UOp | undefined;
  // what dispose() left behind, for the error a later use throws
  private disposedAs = '';
  private _requiresGrad = false;
  private gradRef: WeakRef<Tensor> | undefined;
  /** The lazy tensor this one is a view of (movement ops over its graph): assign writes through to it. */
  private viewOf: Tensor | undefined;
  /** Whether this tensor's value waits in `deferred` (its graph is the deferred write). */
  private initPending = false;

  constructor(data: TensorData | UOp, opts: TensorOptions = {}) {
    if (data instanceof UOp) {
      // an op's result (wrap) or fromUOp: built by the library
      this.device = Device.canonicalize(opts.device ?? Device.default);
      checkDType(undefined, data.dtype, this.device);
      this.uop = data;
    } else {
      checkOptions('Tensor', opts);
      this.device = deviceOf('Tensor', opts.device ?? Device.default);
      const uop = bufferFrom(data, dtypeOption('Tensor', opts), this.device);
      checkDType('Tensor', uop.dtype, this.device);
      this.uop = uop;
    }
    // a tensor starts without (an op's result skips the setter: every op of an eager call makes one)
    const requiresGrad = opts.requiresGrad ?? false;
    if (requiresGrad !== false) this.requiresGrad = requiresGrad;
    noteMade(this);
  }

  /** The graph this tensor stands for (a BUFFER once realized); a deferred initial value is computed first. */
  get uop(): UOp {
    if (this.initPending) Tensor.realizeDeferred();
    return this.graph;
  }
  /** The graph as it is, a deferred initial value's write included: for what its shape and dtype say. */
  private get graph(): UOp {
    if (this._uop === undefined)
      throw new Error(`${this.disposedAs}: tensor was disposed; it cannot be used after dispose()`);
    return this._uop;
  }
  set uop(u: UOp) {
    // the tensor holds the buffer its value lives in (see holdBuffer)
    const was = this._uop && bufferOf(this._uop);
    const now = bufferOf(u);
    if (was !== now) {
      if (now !== undefined) holdBuffer(now);
      if (was !== undefined) letGoOfBuffer(was, false);
    }
    this._uop = u;
    // realized, it is no view any more (and holds no graph of the tensor it viewed)
    if (u.op === Ops.BUFFER) this.viewOf = undefined;
  }

  /** Whether dispose() was called. */
  get disposed(): boolean {
    return this._uop === undefined;
  }

  /**
   * Frees this tensor's buffer now, back to the allocator for reuse, instead of when the tensor is garbage
   * collected. The tensor gives its buffer up: using it afterwards throws, and so does realizing any graph
   * that still reads the buffer (a tensor built from this one and not yet realized, a JIT whose captured
   * kernels use it). A buffer that other undisposed tensors hold too (a view realized as the same buffer,
   * a JIT's output) stays until the last of them is disposed. An unrealized tensor only drops its graph.
   */
  dispose(): void {
    const u = this._uop;
    if (u === undefined) return;
    this.initPending = false;
    deferred.delete(this);
    this.disposedAs = `Tensor (${u.shape!.join(', ')}) ${u.dtype.name} on ${this.device}`;
    // a pending assign (AFTER) writes into the tensor's own buffer, which goes too
    const buf = bufferOf(u);
    if (buf !== undefined) letGoOfBuffer(buf, true);
    // a Tensor.fromFile tensor lets its file close (src/tensor/disk.ts)
    if (Device.get(this.device).language() === undefined) this.releaseFile();
    this._uop = undefined;
    this._requiresGrad = false; // backward() looks at every tensor with requiresGrad
  }

  /** dispose(), for `using` declarations: `{ using y = x.mul(2).realize(); ... }` frees y's buffer at the `}`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Whether backward() fills this tensor's `.grad`. */
  get requiresGrad(): boolean {
    return this._requiresGrad;
  }
  set requiresGrad(on: boolean) {
    if (typeof on !== 'boolean') throw new Error(`requiresGrad: must be true or false, got ${shown(on)}`);
    if (on && !this.dtype.isFloat)
      throw new Error(
        `requiresGrad: gradients need a float tensor, this one is ${this.dtype.name}; create it with { dtype: dtypes.float32 }`,
      );
    if (on && this.gradRef === undefined) {
      // a graph without buffers (zeros, ones, arange, ...) is the same node as every equal constant elsewhere
      // (hash-consing), so such a tensor gets a buffer of its own: its gradient must be its alone
      if (!this.graph.toposort().some((u) => u.op === Ops.BUFFER)) this.realize();
      this.gradRef = new WeakRef(this);
      gradTracked.add(this.gradRef);
      untrack.register(this, this.gradRef);
    }
    this._requiresGrad = on;
  }

  static fromUOp(u: UOp, device: string): Tensor {
    return new Tensor(u, { device });
  }

  get shape(): number[] {
    return this.graph.shape!.map((d) => {
      if (typeof d !== 'number') throw new Error('Tensor.shape: symbolic shapes are not supported yet');
      return d;
    });
  }
  get dtype(): DType {
    return this.graph.dtype;
  }
  get ndim(): number {
    return this.graph.shape!.length;
  }
  get numel(): number {
    return prod(this.shape);
  }

  // --- creation ---------------------------------------------------------------------------------------

  /**
   * A tensor in a buffer of its own that takes `value` later: when any such tensor is first read (an op, a
   * realize, its data) or anything is realized, all of them are computed together, in one realize per
   * device. A model's parameters and an optimizer's state are made so: one schedule and one batch of
   * compiles for all of them instead of one each. The values are those `value` would have now (random
   * tensors draw at creation).
   */
  static deferredInit(value: Tensor): Tensor {
    checkTensor('Tensor.deferredInit', 'the value', value);
    const buf = newBuffer(value.shape, value.dtype, value.device);
    const t = new Tensor(UOp.make(Ops.AFTER, [buf, UOp.make(Ops.STORE, [buf, value.uop])]), {
      device: value.device,
    });
    t.initPending = true;
    deferred.add(t);
    return t;
  }
  /** Computes every deferred initial value not computed yet (Tensor.deferredInit), one realize per device. */
  static realizeDeferred(): void {
    if (deferred.size === 0) return;
    const byDevice = new Map<string, Tensor[]>();
    for (const t of deferred) {
      t.initPending = false;
      const group = byDevice.get(t.device);
      if (group === undefined) byDevice.set(t.device, [t]);
      else group.push(t);
    }
    deferred.clear();
    for (const [first, ...rest] of byDevice.values()) first!.realize(...rest);
  }

  static full(shape: readonly number[], value: ConstValue, opts: TensorOptions = {}): Tensor {
    return filled('Tensor.full', shape, value, opts);
  }
  static zeros(shape: readonly number[], opts: TensorOptions = {}): Tensor {
    return filled('Tensor.zeros', shape, 0, opts, dtypeOption('Tensor.zeros', opts) ?? dtypes.float32);
  }
  static ones(shape: readonly number[], opts: TensorOptions = {}): Tensor {
    return filled('Tensor.ones', shape, 1, opts, dtypeOption('Tensor.ones', opts) ?? dtypes.float32);
  }
  /** [start, stop) by step, built as the spec's prefix sum of ones. */
  static arange(start: number, stop?: number, step = 1, opts: TensorOptions = {}): Tensor {
    if (stop === undefined) [start, stop] = [0, start];
    checkFinites('Tensor.arange', { start, stop, step });
    if (step === 0) throw new Error(`Tensor.arange: step must not be 0 (from ${start} to ${stop})`);
    const n = Math.max(0, Math.ceil((stop - start) / step));
    if (!isSize(n))
      throw new Error(
        `Tensor.arange: [${start}, ${stop}) by ${step} has ${n} elements; at most 2^53 - 1 fit a shape`,
      );
    const dtype =
      dtypeOption('Tensor.arange', opts) ??
      ([start, stop, step].every(Number.isInteger) ? dtypes.int32 : dtypes.float32);
    // requiresGrad marks the result, not the tensor it is built from
    const inner = { ...opts, dtype, requiresGrad: false };
    // a prefix sum too long for one window goes in blocks (cumsum): over whole blocks only, every block's
    // total is the same constant, so the loops that count still collapse (src/codegen/collapse.ts)
    const len = windowFits(n) ? n : Math.ceil(n / CUMSUM_BLOCK) * CUMSUM_BLOCK;
    const sums = n === 0 ? undefined : Tensor.full([len], step, inner).cumsum(0, narrowSumDType(dtype));
    const t =
      sums === undefined
        ? new Tensor([], inner)
        : (len === n ? sums : sums.shrink([[0, n]])).add(start - step).cast(dtype);
    t.requiresGrad = opts.requiresGrad ?? false;
    return t;
  }

  // --- reading ------------------------------------------------------------------------------------------

  /**
   * Computes this tensor's value (and the others', in one schedule); each one's graph becomes the buffer
   * holding it. A value a gradient may flow through (it depends on a tensor with requiresGrad) keeps its
   * graph for backward() beside the buffer, for as long as the buffer lives.
   */
  realize(...others: Tensor[]): this {
    Tensor.realizeDeferred();
    const tensors = others.length === 0 ? [this] : [this, ...others];
    const graphs = tensors.map((t) => t.uop);
    const found =
      gradTracked.size === 0
        ? undefined
        : originsOf(
            tensors.map((t, i) => (t.requiresGrad ? undefined : graphs[i])),
            gradTargets(),
          );
    const created = realizeNamingShapes(tensors);
    noteRealized(
      graphs,
      tensors.map((t) => t.uop),
      created,
      found,
    );
    return this;
  }

  /** The data as a TypedArray in the dtype's storage (float16 as bits, bool as 0/1). */
  dataSync(): StorageArray {
    this.realize();
    return bufferData(this.uop).slice() as StorageArray;
  }
  /** The data, as dataSync, once the device has computed it: a GPU's work leaves the event loop free meanwhile. */
  async data(): Promise<StorageArray> {
    this.realize();
    await Device.get(this.device).idle();
    return this.dataSync();
  }
  tolist(): NestedArray {
    const flat = fromStorage(this.dtype, this.dataSync());
    const build = (dim: number, offset: number): NestedArray => {
      if (dim === this.ndim) return flat[offset]!;
      const stride = prod(this.shape.slice(dim + 1));
      return Array.from({ length: this.shape[dim]! }, (_, i) => build(dim + 1, offset + i * stride));
    };
    return build(0, 0);
  }
  item(): ConstValue {
    if (this.numel !== 1)
      throw new Error(`Tensor.item: needs one element, the tensor has shape (${this.shape.join(', ')})`);
    return fromStorage(this.dtype, this.dataSync())[0]!;
  }

  // --- elementwise --------------------------------------------------------------------------------------

  /** @internal A tensor of this one's device over u (for op families in other files). */
  wrap(u: UOp): Tensor {
    const t = new Tensor(gradModeOf(u), { device: this.device });
    // a view (movement ops) of this lazy tensor remembers it: assign writes through (a view of a buffer finds it)
    // (wrap runs for every op: the cheap test first)
    if (
      GroupOp.Movement.has(u.op) &&
      !isBufferBase(this.uop) &&
      viewChain(u, (x) => x === this.uop) !== undefined &&
      !viewsBuffer(this.uop)
    )
      t.viewOf = this;
    return t;
  }

  /** The dtype a JS scalar takes next to this tensor: the tensor's, unless the scalar needs more (2.5 beside ints). */
  /** @internal */
  scalarDType(y: ConstValue): DType {
    if (typeof y === 'boolean') return this.dtype;
    if (typeof y === 'number' && !Number.isInteger(y))
      return this.dtype.isFloat ? this.dtype : dtypes.float32;
    if (this.dtype !== dtypes.bool) return this.dtype;
    // an integer beside bools: int32, or int64 where int32 cannot hold it (tinygrad's weakint does the same)
    return y >= dtypes.int32.min && y <= dtypes.int32.max ? dtypes.int32 : dtypes.int64;
  }

  /** @internal A scalar as a tensor beside this one; a tensor checked to be on this device. */
  toTensor(op: string, y: Tensor | ConstValue): Tensor {
    return y instanceof Tensor ? onDevice(this, op, y) : this.wrap(scalarUOp(this, op, y));
  }

  /**
   * Both operands broadcast to one shape and promoted to one dtype: the nodes `cast(dtype).broadcastTo(shape)`
   * of each would hold, built without a tensor for each step (every binary op of an eager call builds them).
   */
  /** @internal */
  operands(op: string, y: Tensor | ConstValue): [UOp, UOp] {
    const a = this.uop;
    const b = y instanceof Tensor ? onDevice(this, op, y).uop : scalarUOp(this, op, y);
    const dtype = promote(a.dtype, b.dtype);
    if (dtype !== a.dtype || dtype !== b.dtype) checkDType(undefined, dtype, this.device);
    const shape = broadcastShape(op, a.shape as number[], b.shape as number[]);
    return [broadcastUOp(castUOp(a, dtype), shape), broadcastUOp(castUOp(b, dtype), shape)];
  }

  /** @internal An elementwise op of two operands after broadcasting and promotion. */
  binary(op: string, y: Tensor | ConstValue, f: (a: UOp, b: UOp) => UOp): Tensor {
    const [a, b] = this.operands(op, y);
    return this.wrap(f(a, b));
  }

  add(y: Tensor | ConstValue): Tensor {
    return this.binary('add', y, (a, b) => a.add(b));
  }
  sub(y: Tensor | ConstValue): Tensor {
    return this.binary('sub', y, (a, b) => a.sub(b));
  }
  mul(y: Tensor | ConstValue): Tensor {
    return this.binary('mul', y, (a, b) => a.mul(b));
  }
  div(y: Tensor | ConstValue): Tensor {
    const x = this.dtype.isFloat ? this : this.cast(dtypes.float32);
    return x.binary('div', y, (a, b) =>
      a.dtype.isFloat ? a.div(b) : a.cast(dtypes.float32).div(b.cast(dtypes.float32)),
    );
  }
  maximum(y: Tensor | ConstValue): Tensor {
    return this.binary('maximum', y, (a, b) => a.maximum(b));
  }
  minimum(y: Tensor | ConstValue): Tensor {
    return this.binary('minimum', y, (a, b) => a.minimum(b));
  }
  lt(y: Tensor | ConstValue): Tensor {
    return this.beyondRange(y, true, false) ?? this.binary('lt', y, (a, b) => a.lt(b));
  }
  gt(y: Tensor | ConstValue): Tensor {
    return this.beyondRange(y, false, true) ?? this.binary('gt', y, (a, b) => a.gt(b));
  }
  // the spec's NOT(b < a) is true for NaN; floats need (a < b) | (a == b) to make NaN compare false
  le(y: Tensor | ConstValue): Tensor {
    return (
      this.beyondRange(y, true, false) ??
      this.binary('le', y, (a, b) => (a.dtype.isFloat ? a.lt(b).or(a.eq(b)) : a.le(b)))
    );
  }
  ge(y: Tensor | ConstValue): Tensor {
    return (
      this.beyondRange(y, false, true) ??
      this.binary('ge', y, (a, b) => (a.dtype.isFloat ? b.lt(a).or(a.eq(b)) : a.ge(b)))
    );
  }
  eq(y: Tensor | ConstValue): Tensor {
    return this.beyondRange(y, false, false) ?? this.binary('eq', y, (a, b) => a.eq(b));
  }
  ne(y: Tensor | ConstValue): Tensor {
    return this.beyondRange(y, true, true) ?? this.binary('ne', y, (a, b) => a.ne(b));
  }
  /**
   * A comparison of this integer tensor with a JS integer outside its dtype: every element gives the same
   * answer (`above` when y is above the range, `below` under it), as numpy 2 compares. Else undefined.
   */
  private beyondRange(y: Tensor | ConstValue, above: boolean, below: boolean): Tensor | undefined {
    if (y instanceof Tensor || !this.dtype.isInt || this.dtype === dtypes.bool) return undefined;
    const side = sideOfRange(this.dtype, y);
    if (side === 0) return undefined;
    return this.wrap(
      UOp.const(dtypes.bool, side > 0 ? above : below)
        .reshape(this.shape.map(() => 1))
        .expand(this.shape),
    );
  }
  /** cond ? x : y, elementwise; `this` is the condition. */
  where(x: Tensor | ConstValue, y: Tensor | ConstValue): Tensor {
    for (const v of [x, y]) if (!(v instanceof Tensor)) checkScalar('where', 'a value', v);
    const a =
      x instanceof Tensor
        ? x
        : y instanceof Tensor
          ? y.toTensor('where', x)
          : this.wrap(UOp.const(defaultDType([x, y]), x));
    this.toTensor('where', a);
    const [xs, ys] = a.operands('where', y);
    const shape = broadcastShape('where', this.shape, xs.shape as number[]);
    const cond = this.cast(dtypes.bool).broadcastTo(shape);
    return this.wrap(
      cond.uop.where(this.wrap(xs).broadcastTo(shape).uop, this.wrap(ys).broadcastTo(shape).uop),
    );
  }

  neg(): Tensor {
    return this.wrap(this.uop.neg());
  }
  /** @internal This tensor, cast to float32 unless it is already a float (the dtype of float math). */
  toFloat(): Tensor {
    return this.dtype.isFloat ? this : this.cast(dtypes.float32);
  }
  float(): Tensor {
    return this.cast(dtypes.float32);
  }
  half(): Tensor {
    return this.cast(dtypes.float16);
  }
  int(): Tensor {
    return this.cast(dtypes.int32);
  }
  bool(): Tensor {
    return this.cast(dtypes.bool);
  }
  reciprocal(): Tensor {
    const x = this.toFloat();
    return x.wrap(x.uop.recip());
  }
  sqrt(): Tensor {
    const x = this.toFloat();
    return x.wrap(UOp.make(Ops.SQRT, [x.uop]));
  }
  exp2(): Tensor {
    const x = this.toFloat();
    return x.wrap(UOp.make(Ops.EXP2, [x.uop]));
  }
  log2(): Tensor {
    const x = this.toFloat();
    return x.wrap(UOp.make(Ops.LOG2, [x.uop]));
  }
  exp(): Tensor {
    return this.toFloat().mul(LOG2_E).exp2();
  }
  log(): Tensor {
    return this.log2().mul(LN_2);
  }
  sin(): Tensor {
    const x = this.toFloat();
    return x.wrap(UOp.make(Ops.SIN, [x.uop]));
  }
  relu(): Tensor {
    return this.maximum(0);
  }
  /** 1 / (1 + exp(-x)) from e = exp(-|x|), which never overflows: no inf meets a 0 in the gradient. */
  sigmoid(): Tensor {
    const x = this.toFloat();
    const e = x.abs().neg().exp();
    const r = e.add(1).reciprocal();
    return x.ge(0).where(r, e.mul(r));
  }
  abs(): Tensor {
    return this.maximum(this.neg());
  }
  square(): Tensor {
    return this.mul(this);
  }
  /** This tensor's values as another dtype (a DType or its name: 'float16'). */
  cast(dtype: DTypeLike): Tensor {
    const d = toDType('cast', dtype);
    return d === this.dtype ? this : this.wrap(this.uop.cast(d));
  }

  // --- movement -----------------------------------------------------------------------------------------

  /** @internal A possibly negative axis as an index in [0, ndim). */
  axis(a: number, ndim = this.ndim): number {
    const x = a < 0 ? a + ndim : a;
    if (!(Number.isInteger(x) && x >= 0 && x < ndim))
      throw new Error(
        `axis ${a} is out of range for shape (${this.shape.join(', ')}): valid axes are ${-ndim}..${ndim - 1}`,
      );
    return x;
  }

  /** The same elements in another shape; one size may be -1 (inferred). Sizes as an array or as arguments. */
  reshape(shape: readonly number[]): Tensor;
  reshape(...shape: number[]): Tensor;
  reshape(...args: Sizes): Tensor {
    const shape = sizes('reshape', args);
    const infer = shape.indexOf(-1);
    if (!shape.every((d, i) => isSize(d) || i === infer))
      throw new Error(
        `reshape: shape (${shape.join(', ')}) needs non-negative integer sizes (below 2^53, so that offsets are exact) and at most one -1 (inferred), for (${this.shape.join(', ')})`,
      );
    let s = [...shape];
    if (infer >= 0) {
      const known = prod(s.filter((_, i) => i !== infer));
      if (known === 0 || this.numel % known !== 0)
        throw new Error(`reshape: cannot infer -1 in (${shape.join(', ')}) for ${this.numel} elements`);
      s = s.map((d, i) => (i === infer ? this.numel / known : d));
    }
    return shapesEqual(s, this.shape) ? this : this.wrap(this.uop.reshape(s));
  }
  permute(order: readonly number[]): Tensor;
  permute(...order: number[]): Tensor;
  permute(...args: Sizes): Tensor {
    const order = sizes('permute', args);
    if (order.length !== this.ndim)
      throw new Error(`permute: needs an order of all ${this.ndim} axes, got (${order.join(', ')})`);
    return this.wrap(this.uop.permute(order.map((a) => this.axis(a))));
  }
  /** Broadcasts to shape (-1 keeps a size). Sizes as an array or as arguments. */
  expand(shape: readonly number[]): Tensor;
  expand(...shape: number[]): Tensor;
  expand(...args: Sizes): Tensor {
    const shape = sizes('expand', args);
    if (!shape.every((d) => isSize(d) || d === -1))
      throw new Error(
        `expand: shape (${shape.join(', ')}) needs non-negative integer sizes, or -1 to keep a size, for (${this.shape.join(', ')})`,
      );
    return this.broadcastTo(
      shape.map((d, i) => (d === -1 ? this.shape[i - (shape.length - this.ndim)]! : d)),
    );
  }
  /** Reshapes to the broadcast rank (new axes in front) and expands. */
  broadcastTo(shape: readonly number[]): Tensor {
    if (!Array.isArray(shape)) checkShape('broadcastTo', shape);
    if (shapesEqual(shape, this.shape)) return this;
    checkShape('broadcastTo', shape);
    const padded = [...new Array(Math.max(0, shape.length - this.ndim)).fill(1), ...this.shape];
    // named here, with the shape asked for, rather than by the internal EXPAND
    if (shape.length < this.ndim || padded.some((d, i) => d !== 1 && d !== shape[i]))
      throw new Error(
        `broadcastTo: cannot broadcast (${this.shape.join(', ')}) to (${shape.join(', ')}): only size-1 axes (and new leading ones) can grow`,
      );
    return this.wrap(broadcastUOp(this.uop, shape));
  }
  /**
   * Pads with [before, after] elements per axis: one pair for every axis (`[[1, 1], [0, 2]]`), or PyTorch's
   * flat form, pairs from the last axis backward (`[left, right, top, bottom]`; fewer pairs than axes leave
   * the leading axes alone). A negative count removes elements. The second argument is the constant value
   * or `{ mode, value }`: 'constant' fills with value (default 0); 'reflect' mirrors without repeating the
   * edge (each count below the axis size); 'replicate' repeats the edge; 'circular' wraps around (each count
   * at most the axis size). Other modes remove first, then pad what is left.
   */
  pad(padding: readonly (readonly [number, number])[], opts?: number | PadOptions): Tensor;
  pad(padding: readonly number[], opts?: number | PadOptions): Tensor;
  pad(
    padding: readonly number[] | readonly (readonly [number, number])[],
    opts?: number | PadOptions,
  ): Tensor {
    const pairs = this.padPairs(padding);
    const { mode = 'constant', value } = typeof opts === 'number' ? { value: opts } : (opts ?? {});
    if (!PAD_MODES.includes(mode))
      throw new Error(
        `pad: unknown mode '${mode}'; valid modes are ${PAD_MODES.map((m) => `'${m}'`).join(', ')}`,
      );
    if (mode !== 'constant' && value !== undefined)
      throw new Error(`pad: mode '${mode}' takes no value (got ${value}); only 'constant' fills with one`);
    if (pairs.some(([before, after]) => before < 0 || after < 0)) {
      const short = this.shape.findIndex((d, i) => d + pairs[i]![0] + pairs[i]![1] < 0);
      if (short >= 0)
        throw new Error(
          `pad: [${pairs[short]!.join(', ')}] removes more than the ${this.shape[short]} elements of axis ${short} of shape (${this.shape.join(', ')})`,
        );
      const grown = pairs.map(([b, a]): [number, number] => [Math.max(b, 0), Math.max(a, 0)]);
      const kept = (x: Tensor) =>
        pairs.map(([b, a], i): [number, number] => [Math.max(-b, 0), x.shape[i]! - Math.max(-a, 0)]);
      if (mode === 'constant') {
        const x = this.pad(grown, value);
        return x.shrink(kept(x));
      }
      // the other modes pad what is left after removing
      return this.shrink(kept(this)).pad(grown, { mode });
    }
    if (mode !== 'constant')
      return pairs.reduce<Tensor>((x, pair, axis) => x.padEdges(mode, axis, pair), this);
    const shape = this.shape.map((d, i) => d + pairs[i]![0] + pairs[i]![1]);
    const offset = pairs.map((p) => p[0]);
    const padded = this.wrap(this.uop.pad(offset, shape));
    if (value === undefined || value === 0) return padded;
    const mask = this.wrap(
      UOp.const(dtypes.bool, true)
        .reshape(this.shape.map(() => 1))
        .expand(this.shape)
        .pad(offset, shape),
    );
    return mask.where(padded, value);
  }
  /** pad's argument as one [before, after] pair per axis, or an error naming what would be valid. */
  private padPairs(padding: readonly number[] | readonly (readonly [number, number])[]): [number, number][] {
    const shown = `${JSON.stringify(padding)} for shape (${this.shape.join(', ')})`;
    if (!Array.isArray(padding))
      throw new Error(`pad: the padding must be an array of [before, after] pairs, got ${shown}`);
    const flat = padding.every((p) => typeof p === 'number');
    if (flat ? padding.length % 2 !== 0 || padding.length > 2 * this.ndim : padding.length !== this.ndim)
      throw new Error(
        `pad: ${shown} should be ${this.ndim} [before, after] pairs, or a flat list of at most ${this.ndim} pairs from the last axis backward`,
      );
    const pairs = flat
      ? this.shape.map((_, i): [number, number] => {
          const j = this.ndim - 1 - i;
          return 2 * j < padding.length ? [padding[2 * j] as number, padding[2 * j + 1] as number] : [0, 0];
        })
      : (padding as readonly unknown[]).map((p) =>
          Array.isArray(p) && p.length === 2 ? [p[0], p[1]] : [NaN, NaN],
        );
    if (!pairs.flat().every(Number.isInteger))
      throw new Error(`pad: ${shown} should hold integer counts, as [before, after] pairs or a flat list`);
    return pairs as [number, number][];
  }
  /** One axis padded by reflecting, repeating or wrapping its elements, joined with cat. */
  private padEdges(
    mode: Exclude<PadMode, 'constant'>,
    axis: number,
    [before, after]: [number, number],
  ): Tensor {
    if (before === 0 && after === 0) return this;
    const n = this.shape[axis]!;
    const limit = mode === 'reflect' ? n - 1 : mode === 'circular' ? n : n > 0 ? Infinity : 0;
    if (before > limit || after > limit)
      throw new Error(
        `pad: mode '${mode}' pads axis ${axis} of shape (${this.shape.join(', ')}) by [${before}, ${after}]; ${mode === 'replicate' ? 'an empty axis has no edge to repeat' : `each count must be ${mode === 'reflect' ? 'below' : 'at most'} its size ${n}`}`,
      );
    const part = (start: number, end: number) =>
      this.shrink(this.shape.map((d, i) => (i === axis ? [start, end] : [0, d])));
    const edge = (start: number, count: number) =>
      part(start, start + 1).expand(this.shape.map((d, i) => (i === axis ? count : d)));
    const sides =
      mode === 'reflect'
        ? [part(1, before + 1).flip(axis), part(n - 1 - after, n - 1).flip(axis)]
        : mode === 'circular'
          ? [part(n - before, n), part(0, after)]
          : [edge(0, before), edge(n - 1, after)];
    return Tensor.cat([sides[0]!, this, sides[1]!], axis);
  }
  /** Keeps [start, end) of each axis. */
  shrink(ranges: readonly (readonly [number, number])[]): Tensor {
    if (
      !Array.isArray(ranges) ||
      ranges.length !== this.ndim ||
      !ranges.every((r) => Array.isArray(r) && isSize(r[0]) && isSize(r[1]) && r[0] <= r[1])
    )
      throw new Error(
        `shrink: ${shown(ranges)} should be ${this.ndim} [start, end] pairs of integers with 0 <= start <= end, for shape (${this.shape.join(', ')})`,
      );
    return this.wrap(
      this.uop.shrink(
        ranges.map((r) => r[0]),
        ranges.map((r) => r[1] - r[0]),
      ),
    );
  }
  flip(axes: number | readonly number[]): Tensor {
    checkAxes('flip', axes);
    const set = new Set((typeof axes === 'number' ? [axes] : axes).map((a) => this.axis(a)));
    return this.wrap(this.uop.flip(this.shape.map((_, i) => set.has(i))));
  }
  /** The transpose of a matrix (its last two axes swapped). */
  get T(): Tensor {
    return this.transpose();
  }
  transpose(d0 = -2, d1 = -1): Tensor {
    const order = this.shape.map((_, i) => i);
    const [a, b] = [this.axis(d0), this.axis(d1)];
    [order[a], order[b]] = [order[b]!, order[a]!];
    return this.permute(order);
  }
  flatten(start = 0, end = -1): Tensor {
    const [s, e] = [this.axis(start), this.axis(end)];
    return this.reshape([
      ...this.shape.slice(0, s),
      prod(this.shape.slice(s, e + 1)),
      ...this.shape.slice(e + 1),
    ]);
  }
  unsqueeze(dim: number): Tensor {
    const d = this.axis(dim, this.ndim + 1);
    return this.reshape([...this.shape.slice(0, d), 1, ...this.shape.slice(d)]);
  }
  contiguous(): Tensor {
    return this.wrap(UOp.make(Ops.CONTIGUOUS, [this.uop]));
  }
  /**
   * Sets this tensor's value to `value`, lazily. A realized tensor keeps its buffer: the value is written
   * into it (the spec's assign, STORE then AFTER), so kernels captured by a JIT see the update. A view
   * (movement ops) of a realized tensor writes through to its buffer at once, and a view of a lazy tensor
   * gives that tensor the new graph (src/tensor/write-through.ts).
   */
  assign(value: Tensor | ConstValue): this {
    if (!(value instanceof Tensor)) checkScalar('assign', 'the value', value);
    const v =
      value instanceof Tensor ? value : this.wrap(UOp.const(this.dtype, value)).broadcastTo(this.shape);
    if (v.device !== this.device || v.dtype !== this.dtype || !shapesEqual(v.shape, this.shape))
      throw new Error(
        `assign: the value is (${v.shape.join(', ')}) ${v.dtype.name} on ${v.device}, the tensor (${this.shape.join(', ')}) ${this.dtype.name} on ${this.device}; cast, reshape or move the value first`,
      );
    const through = writeThrough(this.uop, v.uop, this.viewOf?.uop);
    if (through !== undefined) {
      const { base, value: newBase, written, padded } = through;
      // a view over padding has elements no buffer holds: a write there would be lost
      if (padded && Number(this.wrap(written).sum().item()) !== this.numel)
        throw new Error(
          `assign: the view (${this.shape.join(', ')}) reaches into padding outside the buffer it views; assign to the part within it`,
        );
      if (isBufferBase(base)) {
        // a view of a buffer: the buffer takes the write now, so every tensor over it sees the new values
        const buf = base.op === Ops.AFTER ? base.src[0]! : base;
        this.wrap(assignMade(UOp.make(Ops.AFTER, [buf, UOp.make(Ops.STORE, [buf, newBase])]))).realize();
      } else {
        // a view of a lazy tensor: that tensor takes the write (through to what it views, in turn), and this
        // view is seen over its new graph
        const of = this.viewOf!;
        of.assign(of.wrap(newBase));
        this.uop = substitute(this.uop, new Map([[base, of.uop]]));
      }
      return this;
    }
    if (this.viewOf !== undefined)
      throw new Error(
        `assign: the tensor this view (${this.shape.join(', ')}) was made from has been realized or assigned since, so the write cannot reach it; make the view again from it`,
      );
    const buf = this.uop.op === Ops.AFTER ? this.uop.src[0]! : this.uop;
    this.uop =
      buf.op === Ops.BUFFER
        ? assignMade(UOp.make(Ops.AFTER, [buf, UOp.make(Ops.STORE, [buf, v.uop])]))
        : v.uop;
    noteAssigned(this);
    return this;
  }

  /** A copy in a buffer of its own. */
  clone(): Tensor {
    return this.contiguous();
  }
  /**
   * This tensor on another device (its value is computed first, then copied). A DISK tensor (a view of
   * Tensor.fromFile) is copied lazily instead: its bytes are read when the copy is first used.
   */
  to(device: string): Tensor {
    const target = deviceOf('to', device);
    if (target === this.device) return this;
    checkDType('to', this.dtype, target); // an unknown device fails here too, before anything runs
    if (Device.get(this.device).language() === undefined) return this.fromDisk(target);
    this.realize();
    const buf = newBuffer(this.shape, this.dtype, target);
    setBufferData(buf, bufferData(this.uop));
    return new Tensor(buf, { device: target });
  }

  // --- reduce -------------------------------------------------------------------------------------------

  /** @internal */
  reduceOp(op: ReduceOp, axis?: number | readonly number[], keepdim = false): Tensor {
    return this.wrap(reduceUOp(this.uop, op, this.reduceAxes(axis), keepdim));
  }
  /** @internal The axes a reduce along `axis` folds (all when undefined), checked. */
  reduceAxes(axis?: number | readonly number[]): number[] {
    if (axis !== undefined && !isAxes(axis))
      throw new Error(`axes must be a number or an array of numbers, got ${shown(axis)}`);
    return axis === undefined
      ? this.shape.map((_, i) => i)
      : (typeof axis === 'number' ? [axis] : axis).map((a) => this.axis(a));
  }
  /**
   * Sum along the axes. Without a dtype, the result is sumDType's: a bool or integer sum is int32 (uint32)
   * when no input of its length can overflow that, else int64 (uint64); float16 and bfloat16 add up in float32
   * and come back in their own dtype. A dtype given is what the elements are cast to and the sum returns.
   */
  sum(axis?: number | readonly number[], keepdim = false, dtype?: DTypeLike): Tensor {
    const axes = this.reduceAxes(axis);
    const u = this.uop;
    const shape = u.shape as readonly number[];
    const out =
      dtype === undefined
        ? sumDType(
            u.dtype,
            axes.reduce((n, a) => n * shape[a]!, 1),
          )
        : toDType('sum', dtype);
    return this.wrap(sumUOp(u, axes, keepdim, out, this.device));
  }
  /** Product along the axes: bools and integers multiply in int64 (uint64 if unsigned), wrapping as C's. */
  prod(axis?: number | readonly number[], keepdim = false, dtype?: DTypeLike): Tensor {
    const out = dtype === undefined ? prodDType(this.dtype) : toDType('prod', dtype);
    return this.cast(out).reduceOp(Ops.MUL, axis, keepdim);
  }
  max(axis?: number | readonly number[], keepdim = false): Tensor {
    return this.reduceOp(Ops.MAX, axis, keepdim);
  }
  min(axis?: number | readonly number[], keepdim = false): Tensor {
    if (this.dtype.isFloat) return this.neg().max(axis, keepdim).neg();
    // ~x reverses the order of every integer (and bool) without overflowing, as -x does at the edges
    const flip = (t: Tensor) => t.wrap(t.uop.xor(truncate(t.dtype, -1)));
    return flip(flip(this).max(axis, keepdim));
  }
  mean(axis?: number | readonly number[], keepdim = false): Tensor {
    const s = this.toFloat().sum(axis, keepdim);
    return s.div(this.numel / Math.max(1, s.numel));
  }

  /**
   * Running sum along an axis, built as the spec's prefix sum: pad, tile, trim into windows, reduce. A window
   * does n^2 work: a long axis of values read from memory goes in blocks of SCAN_BLOCK (about 256n), as the
   * other scans do; a value computed from constants alone (arange's ones) keeps one window, whose loop
   * collapses to a count, up to what one window view holds (blockedCumsum).
   */
  cumsum(axis = 0, dtype?: DTypeLike): Tensor {
    // a scalar scans as one element (axis 0 or -1, as PyTorch)
    if (this.ndim === 0) return this.reshape([1]).cumsum(this.axis(axis, 1), dtype).reshape([]);
    const a = this.axis(axis);
    if (a !== this.ndim - 1) return this.transpose(a, -1).cumsum(-1, dtype).transpose(a, -1);
    const n = this.shape[a]!;
    // the dtype of a sum of the whole axis holds every prefix
    const out = dtype === undefined ? sumDType(this.dtype, n) : toDType('cumsum', dtype);
    const values = this.cast(out);
    if (n === 0) return values;
    if (!windowFits(n)) return blockedCumsum(values);
    if (n > 2 * SCAN_BLOCK && !fromConstants(values)) return blockedCumsum(values, SCAN_BLOCK);
    const lead = this.shape.slice(0, -1);
    const x = values.pad([...lead.map(() => [0, 0] as [number, number]), [n - 1, 0]]);
    const tiled = x
      .unsqueeze(-2)
      .expand([...lead, n + 1, 2 * n - 1])
      .reshape([...lead, (n + 1) * (2 * n - 1)])
      .shrink([...lead.map((d) => [0, d] as [number, number]), [0, 2 * n * n]])
      .reshape([...lead, n, 2 * n])
      .shrink([...lead.map((d) => [0, d] as [number, number]), [0, n], [0, n]]);
    return tiled.sum(-1, false, out);
  }

  /** Matrix product, as the spec's gemm: broadcast multiply then sum over the shared axis. */
  matmul(w: Tensor): Tensor {
    const xs = this.shape;
    const ws = w.shape;
    if (xs.length < 1 || ws.length < 1) throw new Error('matmul: both operands need at least one axis');
    if (xs[xs.length - 1] !== ws[Math.max(0, ws.length - 2)])
      throw new Error(
        `matmul: inner sizes differ: (${xs.join(', ')}) @ (${ws.join(', ')}); the last axis of the first must equal the ${ws.length > 1 ? 'second-to-last' : 'only'} axis of the second`,
      );
    const x = xs.length === 1 ? this.unsqueeze(0) : this;
    const other = onDevice(this, 'mul', w);
    const y = ws.length === 1 ? other.unsqueeze(-1) : other;
    // small integers add up in int32; the product keeps its operands' dtype, as in tinygrad
    // (built as nodes, one tensor for the result, where no panels are read: an eager matmul's host work)
    let out = readsPanels(x, y)
      ? panelProduct(x, y).cast(promote(x.dtype, y.dtype)).uop
      : productSumUOp(x.uop, y.uop, narrowSumDType, this.device);
    // a vector operand's axis goes again (both: a scalar, as numpy's)
    const sizes = out.shape as readonly number[];
    if (xs.length === 1) out = out.reshape([...sizes.slice(0, -2), ...sizes.slice(-1)]);
    if (ws.length === 1) out = out.reshape((out.shape as readonly number[]).slice(0, -1));
    return this.wrap(out);
  }

  toString(): string {
    if (this._uop === undefined) return `<${this.disposedAs}, disposed>`;
    return `<Tensor shape=(${this.shape.join(', ')}) dtype=${this.dtype.name} device=${this.device}>`;
  }
}

/**
 * Whether cumsum's window view of an n-long axis, (n + 1) * (2n - 1) elements flat, has offsets that JS
 * numbers hold exactly. Past 2^53 (from n = 2^26) the view's size rounds and its offsets become bigints the
 * simplifier leaves alone, so the window's bounds never read as linear in the reduce range and the
 * counting loop does not collapse: arange(2^26) was an O(n^2) kernel. RESHAPE now refuses such views.
 */
const windowFits = (n: number) => (n + 1) * (2 * n - 1) <= Number.MAX_SAFE_INTEGER;
/** The block length of a prefix sum over an axis too long for one window. */
const CUMSUM_BLOCK = 1 << 13;
/** The block length of a running sum of values (not a constant) along an axis longer than twice it. */
const SCAN_BLOCK = 256;

/** Whether t is computed from constants alone (arange's ones, counts of them): no loop of its reads memory. */
const fromConstants = (t: Tensor) => !t.uop.toposort().some((u) => u.op === Ops.BUFFER || u.op === Ops.PARAM);

/**
 * @internal The running sum along the last axis in blocks (zeros pad the axis to whole blocks): the running
 * sum within each block plus the total of the blocks before it, itself a running sum over the block totals.
 * Each window spans one block or the list of blocks, never the whole axis.
 */
export function blockedCumsum(x: Tensor, block = CUMSUM_BLOCK): Tensor {
  const n = x.shape[x.ndim - 1]!;
  const lead = x.shape.slice(0, -1);
  const keep = lead.map((d) => [0, d] as [number, number]);
  const blocks = Math.ceil(n / block);
  const padded =
    blocks * block === n
      ? x
      : x.pad([...keep.map(() => [0, 0] as [number, number]), [0, blocks * block - n]]);
  const split = padded.reshape([...lead, blocks, block]);
  // the totals shifted one block later (a zero first, the last dropped) sum to the total before each block
  // x already has the result's dtype: every partial sum keeps it
  const before = split
    .sum(-1, false, x.dtype)
    .pad([...keep.map(() => [0, 0] as [number, number]), [1, 0]])
    .shrink([...keep, [0, blocks]])
    .cumsum(-1, x.dtype);
  const out = split
    .cumsum(-1, x.dtype)
    .add(before.unsqueeze(-1))
    .reshape([...lead, blocks * block]);
  return blocks * block === n ? out : out.shrink([...keep, [0, n]]);
}

/** Columns of a panel: one 64-byte cache line of float32, and the lanes of the kernel's vectors. */
const PANEL = 16;
/** Products smaller than this (multiply-adds) are not worth the copy. */
const PANELS_FROM = 1 << 21;

/** Whether x @ y reads y in panels: a device that gains by it, whole panels, rows of x to share each panel. */
function readsPanels(x: Tensor, y: Tensor): boolean {
  if (!Device.get(x.device).matmulPanels()) return false;
  const [m, k] = x.shape.slice(-2) as [number, number];
  const n = y.shape[y.ndim - 1]!;
  return n % PANEL === 0 && m >= PANEL && m * n * k >= PANELS_FROM;
}

/**
 * x @ y with y copied into panels of PANEL columns, each contiguous along the shared axis (as BLAS packs
 * it): a step of the sum then reads one cache line of y instead of a row a whole row-stride away, which
 * misses the cache and the TLB on every step. The copy costs k*n against the product's m*k*n.
 */
function panelProduct(x: Tensor, y: Tensor): Tensor {
  const [k, n] = y.shape.slice(-2) as [number, number];
  const lead = y.shape.slice(0, -2);
  const at = (i: number) => lead.length + i;
  const panels = y
    .reshape([...lead, k, n / PANEL, PANEL])
    .permute([...lead.map((_, i) => i), at(1), at(0), at(2)])
    .contiguous(); // (..., n/PANEL, k, PANEL)
  const product = x.unsqueeze(-2).unsqueeze(-1).mul(panels.unsqueeze(-4));
  const out = product.sum(-2, false, narrowSumDType(product.dtype)); // (..., m, n/PANEL, PANEL)
  return out.reshape([...out.shape.slice(0, -2), n]);
}

/** @internal Throws unless x is a Tensor (on like's device, when given), naming op and the argument. */
export function checkTensor(op: string, what: string, x: unknown, like?: Tensor): asserts x is Tensor {
  if (!(x instanceof Tensor)) throw new Error(`${op}: ${what} must be a Tensor, got ${shown(x)}`);
  if (like !== undefined && x.device !== like.device)
    throw new Error(
      `${op}: ${what} is on ${x.device}, the tensor on ${like.device}; move one with .to(device)`,
    );
}

/** A scalar as the constant node it is beside tensor x, or an error naming op. */
function scalarUOp(x: Tensor, op: string, y: ConstValue): UOp {
  if (!SCALAR_TYPES.has(typeof y))
    throw new Error(
      `${op}: an operand must be a Tensor or a number, boolean or bigint, got ${Array.isArray(y) ? 'an array (make it a tensor: new Tensor([...]))' : typeof y}`,
    );
  const dtype = x.scalarDType(y);
  // numpy 2 and PyTorch refuse a Python int outside the tensor's dtype rather than wrap it
  if (dtype.isInt && sideOfRange(dtype, y) !== 0) {
    const [lo, hi] = intRange(dtype);
    throw new Error(
      `${op}: the number ${y} does not fit the tensor's dtype ${dtype.name} (${lo}..${hi}); cast the tensor to a wider dtype first (or the number, through a tensor, to wrap it)`,
    );
  }
  return gradModeOf(UOp.const(dtype, y));
}

/** y, checked to be on x's device. */
function onDevice(x: Tensor, op: string, y: Tensor): Tensor {
  if (y.device !== x.device)
    throw new Error(`${op}: operands are on ${x.device} and ${y.device}; move one with .to(device)`);
  return y;
}
