// The UOp: one hash-consed node type for tensor graphs, kernels and linear programs.
import { AddrSpace, type ConstValue, type DType, dtypes, truncate } from '../dtype.ts';
import { SPEC, sha256 } from '../helpers.ts';
import { axisOf } from './axis.ts';
import { identityHash, insert, internedCount, lookup } from './intern.ts';
import { intervalOf } from './interval.ts';
import { type Arg, type ArgOf, AxisType, type Device, GroupOp, Ops, opName, type Tag } from './ops.ts';
import { deriveDType, deriveShape, type Shape, type sint } from './shape.ts';

export type { Shape, sint };

/** A UOp whose op is known, so its arg has the op's type. */
export type OpNode<O extends Ops> = UOp & { readonly op: O; readonly arg: ArgOf<O> };

type Operand = UOp | ConstValue;

let nextId = 0;
/** Toposorts so far: each marks the nodes it reaches with its number. */
let visits = 0;

/** Hooks filled in by modules that UOp needs but that are built on top of it. */
export const uopHooks: {
  simplify?: (u: UOp) => UOp;
  verifyNode?: (u: UOp) => void;
} = {};

export class UOp {
  /** Creation order; unique within the process (use `key` for a key that is stable across processes). */
  readonly id: number;
  readonly dtype: DType;
  /** The shape; null for nodes without one (tuples, sinks, loop ends). Sizes are numbers or index UOps. */
  readonly shape: Shape | null;
  /** @internal interval [vmin, vmax], computed on first use */
  _range: readonly [number, number] | undefined = undefined;
  /** @internal shard axis (null: none), computed on first use */
  _axis: number | null | undefined = undefined;
  /** @internal the arg's content text ('' for null and CONST args) */
  _argKey = '';
  /** @internal content key, computed on first use */
  _key: string | undefined = undefined;
  /** @internal device (null: none), computed on first use */
  _device: Device | null | undefined = undefined;
  /** @internal address space (null: none), computed on first use */
  _addrspace: AddrSpace | null | undefined = undefined;
  /** @internal the sizes a STACK/VCONST holds when used as a shape */
  _sizes: readonly sint[] | undefined = undefined;
  /** @internal the last toposort that reached this node (a mark, not a set: the walk is the hot loop of every pass) */
  _visit = 0;
  /** @internal the spec stages (a bit each, src/uop/spec.ts) that found this node and all under it valid */
  _valid = 0;
  /** @internal the rule table of the last pure graphRewrite that reached this node, and what it rewrote it to */
  _rewrittenBy: object | undefined = undefined;
  _rewritten: UOp | undefined = undefined;

  private constructor(
    readonly op: Ops,
    readonly src: readonly UOp[],
    readonly arg: Arg,
    readonly tag: Tag,
    dtype: DType,
    shape: Shape | null,
  ) {
    this.id = nextId++;
    this.dtype = dtype;
    this.shape = shape;
  }

  /** The one way to build a node: equal (op, src, arg, tag) give the same object. */
  static make<O extends Ops>(
    op: O,
    src: readonly UOp[] = [],
    arg: ArgOf<O> = null as ArgOf<O>,
    tag: Tag = null,
  ): UOp {
    return UOp.makeKeyed(op, src, arg, arg === null || op === Ops.CONST ? '' : argKey(op, arg), tag);
  }

  /** @internal make, for an arg whose key text is known (a node's own, when only its sources change). */
  static makeKeyed(op: Ops, src: readonly UOp[], arg: Arg, aKey: string, tag: Tag, fresh = false): UOp {
    const h = identityHash(op, src, arg, aKey, tag);
    const hit = lookup(h, op, src, arg, aKey, tag);
    if (hit !== undefined) return hit;
    const dtype = deriveDType(op, src, arg);
    const shape = deriveShape(op, src, arg, dtype);
    const kept = fresh || Object.isFrozen(src) ? src : src.slice();
    const u = new UOp(op, Object.freeze(kept), arg, tag, dtype, shape);
    u._argKey = aKey;
    // verify before caching, so that building an invalid node again is refused again
    if (SPEC.value >= 2) uopHooks.verifyNode?.(u);
    insert(h, u);
    return u;
  }

  /** How many nodes the hash-cons table holds (live or awaiting collection). */
  static tableSize(): number {
    return internedCount();
  }

  isOp<O extends Ops>(op: O): this is OpNode<O> {
    return this.op === op;
  }

  /** The arg, typed for `op` (or `or`); a node of another op throws, where a cast would read the wrong arg. */
  argOf<O extends Ops>(op: O, or?: O): ArgOf<O> {
    if (this.op !== op && this.op !== or)
      throw new Error(
        `${opName(this.op)} node read as ${opName(op)}${or === undefined ? '' : ` or ${opName(or)}`}`,
      );
    return this.arg as ArgOf<O>;
  }

  replace(changes: { op?: Ops; src?: readonly UOp[]; arg?: Arg; tag?: Tag }): UOp {
    const op = changes.op ?? this.op;
    const src = changes.src ?? this.src;
    const tag = changes.tag === undefined ? this.tag : changes.tag;
    // the arg's key text is the node's own where neither the arg nor the op (which keys CONST args apart) change
    if (changes.arg === undefined && op === this.op)
      return UOp.makeKeyed(op, src, this.arg, this._argKey, tag);
    return UOp.make(op, src, (changes.arg === undefined ? this.arg : changes.arg) as never, tag);
  }
  /** The first n sources as a new array, to go on with other sources (V8 slices a frozen array ~10x slower). */
  srcHead(n: number): UOp[] {
    const head: UOp[] = [];
    for (let i = 0; i < n; i++) head.push(this.src[i]!);
    return head;
  }
  /**
   * This node with each source replaced by its entry in `map` (one without an entry stays): the node itself where
   * none changed, so that a rebuild allocates a source list only where one did.
   */
  withSourcesFrom(map: ReadonlyMap<UOp, UOp>): UOp {
    let src: UOp[] | undefined;
    for (let i = 0; i < this.src.length; i++) {
      const s = map.get(this.src[i]!) ?? this.src[i]!;
      if (s !== this.src[i] && src === undefined) src = this.srcHead(i);
      src?.push(s);
    }
    return src === undefined ? this : this.withFreshSrc(src);
  }
  withSrc(src: readonly UOp[]): UOp {
    return UOp.makeKeyed(this.op, src, this.arg, this._argKey, this.tag);
  }
  /** @internal withSrc of a new array that no one else holds: the node keeps it (frozen) instead of a copy. */
  withFreshSrc(src: UOp[]): UOp {
    return UOp.makeKeyed(this.op, src, this.arg, this._argKey, this.tag, true);
  }
  withTag(tag: Tag): UOp {
    return tag === this.tag ? this : UOp.makeKeyed(this.op, this.src, this.arg, this._argKey, tag);
  }

  // --- constructors ---------------------------------------------------------------------------------

  static const(dtype: DType, value: ConstValue): UOp {
    return UOp.make(Ops.CONST, [], { value: truncate(dtype, value), dtype });
  }
  /** A symbolic integer in [min, max]: a PARAM of shape () named by its slot. */
  static variable(name: string, min: number, max: number, dtype: DType = dtypes.index): UOp {
    if (!(min <= max)) throw new Error(`UOp.variable ${name}: min ${min} must not exceed max ${max}`);
    return UOp.make(Ops.PARAM, [UOp.shapeVec([]), UOp.const(dtype, min), UOp.const(dtype, max)], {
      slot: name,
      dtype,
    });
  }
  static range(bound: sint, id: number, type: AxisType = AxisType.LOOP): UOp {
    return UOp.make(Ops.RANGE, [UOp.index(bound)], { id, type });
  }
  static sink(...srcs: UOp[]): UOp {
    return UOp.make(Ops.SINK, srcs);
  }
  /** An index-typed value: a number becomes a CONST, a UOp passes through. */
  static index(v: sint): UOp {
    return typeof v === 'number' ? UOp.const(dtypes.index, v) : v;
  }
  /** A shape as the spec carries it in src: a STACK of index scalars. */
  static shapeVec(shape: readonly sint[]): UOp {
    const slot = shapeSlot(shape);
    if (slot < 0) return UOp.make(Ops.STACK, shape.map(UOp.index));
    const hit = shapeVecs[slot];
    if (hit !== undefined && sameSizes(hit.sizes, shape)) return hit;
    return (shapeVecs[slot] = UOp.make(Ops.STACK, shape.map(UOp.index)));
  }
  static buffer(slot: number, dtype: DType, shape: readonly sint[], device: Device = 'CPU'): UOp {
    const arg = { slot, dtype, device, addrspace: AddrSpace.GLOBAL };
    // (every realize makes one: its sources, a new array, are kept without a copy)
    return UOp.makeKeyed(Ops.BUFFER, [UOp.shapeVec(shape)], arg, argKey(Ops.BUFFER, arg), null, true);
  }
  static param(slot: number, dtype: DType, shape: readonly sint[], device?: Device): UOp {
    return UOp.make(
      Ops.PARAM,
      [UOp.shapeVec(shape)],
      device === undefined ? { slot, dtype } : { slot, dtype, device },
    );
  }

  // --- derived properties ---------------------------------------------------------------------------

  get ndim(): number {
    return this.shape?.length ?? 0;
  }
  /** In a kernel once ranges are expanded: whether this is a vector (shape (n,)) rather than a scalar. */
  get isVector(): boolean {
    return this.shape !== null && this.shape.length === 1;
  }
  /** In a kernel once ranges are expanded: a vector's lanes, 1 for a scalar. */
  get lanes(): number {
    return this.isVector ? Number(this.shape![0]) : 1;
  }
  /** The device: a name, a tuple of names, or null for device-free nodes (constants, ranges). */
  get device(): Device | null {
    return this._device !== undefined ? this._device : computeBottomUp(this, deviceSlot);
  }
  get addrspace(): AddrSpace | null {
    return this._addrspace !== undefined ? this._addrspace : computeBottomUp(this, addrspaceSlot);
  }
  /** Lower bound of the values this node can take (interval analysis). */
  get vmin(): number {
    return (this._range ?? computeBottomUp(this, rangeSlot))[0];
  }
  /** Upper bound of the values this node can take (interval analysis). */
  get vmax(): number {
    return (this._range ?? computeBottomUp(this, rangeSlot))[1];
  }
  /** The shard axis of a multi-device value, or null. */
  get axis(): number | null {
    return this._axis !== undefined ? this._axis : computeBottomUp(this, axisSlot);
  }
  /** A content key: the same for equal graphs in every process, for use by caches. */
  get key(): string {
    return this._key ?? computeBottomUp(this, keySlot);
  }
  /** The sizes held by a shape vector (STACK of index scalars or VCONST). */
  get sizes(): readonly sint[] {
    return (this._sizes ??= sizesOf(this));
  }
  /** A CONST's value. */
  get constValue(): ConstValue {
    if (this.op !== Ops.CONST) throw new Error(`constValue of a ${opName(this.op)}; only CONST has one`);
    return this.argOf(Ops.CONST).value;
  }

  /**
   * Every node this one depends on, itself last, sources before users (no recursion); with `stop`, the nodes it
   * picks are left out, and what is only under them.
   */
  toposort(stop?: (u: UOp) => boolean): UOp[] {
    const visit = ++visits;
    const out: UOp[] = [];
    if (stop?.(this)) return out;
    const nodes: UOp[] = [this];
    const next: number[] = [0];
    this._visit = visit;
    while (nodes.length) {
      const top = nodes.length - 1;
      const u = nodes[top]!;
      const i = next[top]!;
      if (i < u.src.length) {
        next[top] = i + 1;
        const s = u.src[i]!;
        if (s._visit !== visit && (stop === undefined || !stop(s))) {
          s._visit = visit;
          nodes.push(s);
          next.push(0);
        }
      } else {
        nodes.pop();
        next.pop();
        out.push(u);
      }
    }
    return out;
  }

  simplify(): UOp {
    if (uopHooks.simplify === undefined) throw new Error('UOp.simplify: import tsgrad from src/index.ts');
    return uopHooks.simplify(this);
  }

  // --- arithmetic (shared with Tensor): builds primitives, decomposing as the spec says ---------------

  /** A constant of this node's dtype (broadcasts against any shape). */
  constLike(v: ConstValue): UOp {
    return UOp.const(this.dtype.base, v);
  }
  private operand(op: string | Ops, y: Operand): UOp {
    if (!(y instanceof UOp)) return this.constLike(y);
    if (y.dtype !== this.dtype)
      throw new Error(
        `${typeof op === 'string' ? op : opName(op)}: operand dtypes differ (${this.dtype.name} and ${y.dtype.name}); cast one of them so both match`,
      );
    return y;
  }
  alu(op: Ops, ...ys: Operand[]): UOp {
    return UOp.make(op, [this, ...ys.map((y) => this.operand(op, y))]);
  }
  /** alu of one operand, without a list of them: index arithmetic builds many. */
  private binary(op: Ops, y: Operand): UOp {
    return UOp.make(op, [this, this.operand(op, y)]);
  }

  add(y: Operand): UOp {
    return this.binary(Ops.ADD, y);
  }
  mul(y: Operand): UOp {
    return this.binary(Ops.MUL, y);
  }
  sub(y: Operand): UOp {
    return this.add(y instanceof UOp ? this.operand('SUB', y).neg() : negate(this.dtype, y));
  }
  neg(): UOp {
    return this.dtype === dtypes.bool ? this.logicalNot() : this.mul(-1);
  }
  /** True division: a * (1/b), for floats. */
  div(y: Operand): UOp {
    if (!this.dtype.isFloat)
      throw new Error(
        `DIV: true division needs a float dtype, got ${this.dtype.name}; use idiv for integers`,
      );
    return this.mul(this.operand('DIV', y).recip());
  }
  /** Floor division. */
  idiv(y: Operand): UOp {
    return this.binary(Ops.IDIV, y);
  }
  /** Remainder with the divisor's sign (matches idiv's floor). */
  mod(y: Operand): UOp {
    return this.binary(Ops.MOD, y);
  }
  recip(): UOp {
    return UOp.make(Ops.RECIP, [this]);
  }
  trunc(): UOp {
    return UOp.make(Ops.TRUNC, [this]);
  }
  maximum(y: Operand): UOp {
    return this.binary(Ops.MAX, y);
  }
  minimum(y: Operand): UOp {
    const b = this.operand('MIN', y);
    if (this.dtype.isUnsigned || this.dtype.isBool) return this.lt(b).where(this, b);
    return this.neg().maximum(b.neg()).neg();
  }
  lt(y: Operand): UOp {
    return this.binary(Ops.CMPLT, y);
  }
  gt(y: Operand): UOp {
    return this.operand('CMPGT', y).lt(this);
  }
  le(y: Operand): UOp {
    return this.gt(y).logicalNot();
  }
  ge(y: Operand): UOp {
    return this.lt(y).logicalNot();
  }
  ne(y: Operand): UOp {
    return this.binary(Ops.CMPNE, y);
  }
  eq(y: Operand): UOp {
    return this.ne(y).logicalNot();
  }
  /** Boolean negation: CMPNE(x, true). */
  logicalNot(): UOp {
    if (this.dtype !== dtypes.bool) throw new Error(`NOT: needs a bool operand, got ${this.dtype.name}`);
    return this.ne(true);
  }
  and(y: Operand): UOp {
    return this.alu(Ops.AND, y);
  }
  or(y: Operand): UOp {
    return this.alu(Ops.OR, y);
  }
  xor(y: Operand): UOp {
    return this.alu(Ops.XOR, y);
  }
  shl(y: Operand): UOp {
    return this.alu(Ops.SHL, y);
  }
  shr(y: Operand): UOp {
    return this.alu(Ops.SHR, y);
  }
  /** this ? a : b, elementwise. `this` must be bool. */
  where(a: Operand, b: Operand): UOp {
    const x = a instanceof UOp ? a : b instanceof UOp ? UOp.const(b.dtype, a) : null;
    if (x === null) throw new Error('WHERE: at least one branch must be a UOp to give the result a dtype');
    const y = b instanceof UOp ? b : UOp.const(x.dtype, b);
    return UOp.make(Ops.WHERE, [this, x, y]);
  }
  cast(dtype: DType): UOp {
    return dtype === this.dtype ? this : UOp.make(Ops.CAST, [this], dtype);
  }
  bitcast(dtype: DType): UOp {
    return dtype === this.dtype ? this : UOp.make(Ops.BITCAST, [this], dtype);
  }

  // --- movement -------------------------------------------------------------------------------------

  reshape(shape: readonly sint[]): UOp {
    return UOp.make(Ops.RESHAPE, [this, UOp.shapeVec(shape)]);
  }
  expand(shape: readonly sint[]): UOp {
    return UOp.make(Ops.EXPAND, [this, UOp.shapeVec(shape)]);
  }
  permute(order: readonly number[]): UOp {
    return UOp.make(Ops.PERMUTE, [this], order);
  }
  flip(axes: readonly boolean[]): UOp {
    return UOp.make(Ops.FLIP, [this], axes);
  }
  /** Place this at `offset` inside a zero-filled result of `shape`. */
  pad(offset: readonly sint[], shape: readonly sint[]): UOp {
    return UOp.make(Ops.PAD, [this, UOp.shapeVec(offset), UOp.shapeVec(shape)]);
  }
  /** Keep `shape[k]` elements starting at `offset[k]` along each axis. */
  shrink(offset: readonly sint[], shape: readonly sint[]): UOp {
    return UOp.make(Ops.SHRINK, [this, UOp.shapeVec(offset), UOp.shapeVec(shape)]);
  }
  index(...idx: UOp[]): UOp {
    return UOp.make(Ops.INDEX, [this, ...idx]);
  }
  reduce(op: ArgOf<Ops.REDUCE>['op'], axes: readonly number[]): UOp {
    return UOp.make(Ops.REDUCE, [this], { op, axes });
  }

  toString(): string {
    const arg = this.arg === null ? '' : `, ${argKey(this.op, this.arg)}`;
    return `UOp(${opName(this.op)}, ${this.dtype.name}, [${this.src.map((s) => s.id).join(', ')}]${arg})`;
  }
}

// Shape vectors of number sizes, recently made, held strongly (they hold no buffers): every movement op and every
// buffer an eager call makes builds one, a node per size, and the same few shapes come back call after call.
const SHAPE_VECS = 256;
const shapeVecs = new Array<UOp | undefined>(SHAPE_VECS);

/** Where shapeVecs keeps a shape of number sizes (a hash of them), or -1 for a symbolic shape. */
function shapeSlot(shape: readonly sint[]): number {
  let h = shape.length;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i];
    if (typeof d !== 'number') return -1;
    h = Math.imul(h ^ d, 0x9e3779b1) ^ (h >>> 16);
  }
  return h & (SHAPE_VECS - 1);
}

function sameSizes(a: readonly sint[], b: readonly sint[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

function negate(dtype: DType, v: ConstValue): ConstValue {
  if (typeof v === 'bigint') return -v;
  if (typeof v === 'boolean') throw new Error(`SUB: cannot subtract a boolean from ${dtype.name}`);
  return -v;
}

// --- arg keys: content-stable text for each arg, used in the hash-cons key and the content key -------

function valueKey(v: unknown): string {
  if (v === null || v === undefined) return '';
  switch (typeof v) {
    case 'number':
      return Object.is(v, -0) ? '-0' : String(v);
    case 'bigint':
      return `${v}n`;
    case 'boolean':
      return v ? 'true' : 'false';
    case 'string':
      return JSON.stringify(v);
    case 'object': {
      if (Array.isArray(v)) return `[${v.map(valueKey).join(',')}]`;
      if (v instanceof Uint8Array)
        return `bytes:${Array.from(v, (b) => b.toString(16).padStart(2, '0')).join('')}`;
      if ('name' in v && 'itemsize' in v) return (v as DType).name;
      // an undefined field is the same arg as an absent one
      const keys = Object.keys(v)
        .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
        .sort();
      return `{${keys.map((k) => `${k}:${valueKey((v as Record<string, unknown>)[k])}`).join(',')}}`;
    }
    default:
      throw new Error(`cannot key a ${typeof v} arg`);
  }
}

/** A tag as key text: strings quoted, so that tag 1 and tag '1' differ. */
function tagKey(tag: Tag): string {
  return tag === null ? '' : typeof tag === 'string' ? JSON.stringify(tag) : String(tag);
}

// The args of the nodes every realize makes (its result BUFFERs, callify's PARAMs), every reduce and every kernel's
// ranges are keyed from their fields in name order, as valueKey keys any object, without listing and sorting the
// names each time.
// (the record lists every field of the arg's type, so that a field added to it cannot be left out of its key)
const fieldsOf = <A>(fields: Record<keyof A, true>): readonly string[] => Object.keys(fields).sort();
const ARG_FIELDS: Partial<Record<Ops, readonly string[]>> = {
  [Ops.BUFFER]: fieldsOf<ArgOf<Ops.BUFFER>>({ slot: true, dtype: true, device: true, addrspace: true }),
  [Ops.PARAM]: fieldsOf<ArgOf<Ops.PARAM>>({
    slot: true,
    dtype: true,
    device: true,
    addrspace: true,
    swizzle: true,
  }),
  [Ops.REDUCE]: fieldsOf<ArgOf<Ops.REDUCE>>({ op: true, axes: true }),
  [Ops.RANGE]: fieldsOf<ArgOf<Ops.RANGE>>({ id: true, type: true }),
};

function fieldsKey(arg: Record<string, unknown>, fields: readonly string[]): string {
  let text = '';
  for (const f of fields) {
    const v = arg[f];
    if (v !== undefined) text += `${text === '' ? '' : ','}${f}:${valueKey(v)}`;
  }
  return `{${text}}`;
}

/**
 * The key text of the BUFFER args every realize makes, fieldsKey's: all but the slot (the last field in name
 * order) are the same for every buffer of a dtype on a device, so that part is made once per pair.
 */
const bufferKeyHeads = new Map<DType, Map<string, string>>();
function bufferArgKey(arg: ArgOf<Ops.BUFFER>): string {
  const { dtype, device } = arg;
  if (typeof device !== 'string' || typeof arg.slot !== 'number')
    return fieldsKey(arg as unknown as Record<string, unknown>, ARG_FIELDS[Ops.BUFFER]!);
  let heads = bufferKeyHeads.get(dtype);
  if (heads === undefined) bufferKeyHeads.set(dtype, (heads = new Map()));
  const tag = `${arg.addrspace}|${device}`;
  let head = heads.get(tag);
  if (head === undefined) {
    // fieldsKey of slot 0 ends `slot:0}`: what comes before is the head
    head = fieldsKey({ ...arg, slot: 0 }, ARG_FIELDS[Ops.BUFFER]!).slice(0, -2);
    heads.set(tag, head);
  }
  return `${head}${valueKey(arg.slot)}}`;
}

export function argKey(op: Ops, arg: Arg): string {
  if (arg === null) return '';
  if (op === Ops.CONST) {
    const c = arg as ArgOf<Ops.CONST>;
    return `${c.dtype.name}:${valueKey(c.value)}`;
  }
  if (op === Ops.BUFFER) return bufferArgKey(arg as ArgOf<Ops.BUFFER>);
  // fieldsKey's text, field by field (a reduce in every sum, matmul and mean)
  if (op === Ops.REDUCE) {
    const { axes, op: reduceOp } = arg as ArgOf<Ops.REDUCE>;
    return `{axes:${valueKey(axes)},op:${valueKey(reduceOp)}}`;
  }
  const fields = ARG_FIELDS[op];
  return fields === undefined ? valueKey(arg) : fieldsKey(arg as unknown as Record<string, unknown>, fields);
}

// --- device and address space ------------------------------------------------------------------------

function deviceOf(u: UOp): Device | null {
  switch (u.op) {
    case Ops.BUFFER:
      return u.argOf(Ops.BUFFER).device;
    case Ops.PARAM:
      return u.argOf(Ops.PARAM).device ?? null;
    case Ops.COPY:
      return u.arg as Device;
    case Ops.LOAD:
      return u.argOf(Ops.LOAD)?.device ?? u.src[0]!._device!;
    case Ops.CONST:
    case Ops.VCONST:
    case Ops.RANGE:
    case Ops.SPECIAL:
    case Ops.BINARY:
      return null;
    case Ops.FUNCTION:
    case Ops.CALL:
      return u.src[1]?._device ?? null;
    default: {
      // the first source that lives on a device (constants broadcast onto any device)
      for (const s of u.src) {
        const d = s._device!;
        if (d !== null) return d;
      }
      return null;
    }
  }
}

function addrspaceOf(u: UOp): AddrSpace | null {
  switch (u.op) {
    case Ops.BUFFER:
      return u.argOf(Ops.BUFFER).addrspace;
    case Ops.PARAM:
      return u.argOf(Ops.PARAM).addrspace ?? AddrSpace.GLOBAL;
    case Ops.LOAD:
      return u.argOf(Ops.LOAD)?.addrspace ?? AddrSpace.GLOBAL;
    case Ops.BUFFERVIEW:
    case Ops.INDEX:
    case Ops.AFTER:
      return u.src[0]!._addrspace!;
    default:
      // (a STACK may have no sources: the empty shape)
      return GroupOp.Movement.has(u.op) ? (u.src[0]?._addrspace ?? null) : null;
  }
}

function sizesOf(u: UOp): readonly sint[] {
  if (u.op === Ops.VCONST) return u.argOf(Ops.VCONST).values.map(Number);
  if (u.op !== Ops.STACK)
    throw new Error(`a shape operand must be a STACK or VCONST of index values, got ${opName(u.op)}`);
  return u.src.map((s) => (s.op === Ops.CONST ? Number(s.constValue) : s));
}

// --- lazily derived properties, computed bottom-up without recursion ----------------------------------

/** A lazily computed field of UOp: undefined until computed from the node and its sources' values. */
type LazyField = '_range' | '_axis' | '_device' | '_addrspace' | '_key';
interface Slot<F extends LazyField> {
  field: F;
  compute(u: UOp): Exclude<UOp[F], undefined>;
}
const rangeSlot: Slot<'_range'> = { field: '_range', compute: intervalOf };
const axisSlot: Slot<'_axis'> = { field: '_axis', compute: axisOf };
const deviceSlot: Slot<'_device'> = { field: '_device', compute: deviceOf };
const addrspaceSlot: Slot<'_addrspace'> = { field: '_addrspace', compute: addrspaceOf };
const keySlot: Slot<'_key'> = { field: '_key', compute: contentKey };

function computeBottomUp<F extends LazyField>(root: UOp, slot: Slot<F>): Exclude<UOp[F], undefined> {
  const f = slot.field;
  const stack: UOp[] = [root];
  while (stack.length) {
    const u = stack[stack.length - 1]!;
    if (u[f] !== undefined) {
      stack.pop();
      continue;
    }
    let ready = true;
    for (const s of u.src)
      if (s[f] === undefined) {
        stack.push(s);
        ready = false;
      }
    if (ready) {
      (u as Record<F, unknown>)[f] = slot.compute(u);
      stack.pop();
    }
  }
  return root[f] as Exclude<UOp[F], undefined>;
}

function contentKey(u: UOp): string {
  let text = `${opName(u.op)}|${argKey(u.op, u.arg)}|${tagKey(u.tag)}`;
  for (const s of u.src) text += `|${s._key}`;
  return sha256(text);
}
