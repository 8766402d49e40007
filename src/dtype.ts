// Data types: scalars, vectors and pointers, the promotion lattice, and the mapping to TypedArrays.

export enum AddrSpace {
  GLOBAL = 'GLOBAL',
  LOCAL = 'LOCAL',
  REG = 'REG',
}

export type DTypeKind = 'bool' | 'int' | 'uint' | 'float' | 'index' | 'void';

/** A constant's value. 64-bit integers outside the safe-integer range are bigints; everything else is a number. */
export type ConstValue = number | bigint | boolean;

/**
 * A data type. Instances are interned: two equal dtypes are the same object, so `===` compares them.
 * Scalars live in `dtypes`; `vec(n)` and `ptr(...)` derive vector and pointer types.
 */
export class DType {
  private vecCache: Map<number, DType> | undefined;
  private ptrCache: Map<string, PtrDType> | undefined;

  protected constructor(
    /** numpy-style name: `float32`, `int64`, `bool`; vectors add `x<count>` (`float32x4`). */
    readonly name: string,
    readonly kind: DTypeKind,
    /** Bytes per element (for a vector, of the whole vector). */
    readonly itemsize: number,
    /** Vector width; 1 for scalars and pointers. */
    readonly count: number,
    /** The element type of a vector; the dtype itself for scalars. */
    readonly scalar: DType | undefined,
  ) {}

  /** @internal */
  static makeScalar(name: string, kind: DTypeKind, itemsize: number): DType {
    return new DType(name, kind, itemsize, 1, undefined);
  }

  get base(): DType {
    return this.scalar ?? this;
  }
  get isFloat(): boolean {
    return this.kind === 'float';
  }
  /** Integer in the broad sense: signed, unsigned or index. */
  get isInt(): boolean {
    return this.kind === 'int' || this.kind === 'uint' || this.kind === 'index';
  }
  get isUnsigned(): boolean {
    return this.kind === 'uint';
  }
  get isSigned(): boolean {
    return this.kind === 'int' || this.kind === 'index' || this.kind === 'float';
  }
  get isBool(): boolean {
    return this.kind === 'bool';
  }
  get isVector(): boolean {
    return this.count > 1;
  }
  get isPtr(): boolean {
    return false;
  }

  /** Smallest finite value (integers of 64 bits are rounded to the nearest double). */
  get min(): number {
    return scalarRange(this.base)[0];
  }
  /** Largest finite value (integers of 64 bits are rounded to the nearest double). */
  get max(): number {
    return scalarRange(this.base)[1];
  }

  vec(count: number): DType {
    if (!Number.isInteger(count) || count < 1)
      throw new Error(`DType.vec: count must be a positive integer, got ${count}`);
    if (count === 1) return this.base;
    if (this.count !== 1 || this.kind === 'void') throw new Error(`DType.vec: cannot vectorize ${this.name}`);
    this.vecCache ??= new Map();
    let v = this.vecCache.get(count);
    if (v === undefined) {
      v = new DType(`${this.name}x${count}`, this.kind, this.itemsize * count, count, this);
      this.vecCache.set(count, v);
    }
    return v;
  }

  /** A pointer to `size` elements of this dtype (-1: unknown size) in `addrspace`. */
  ptr(size = -1, addrspace: AddrSpace = AddrSpace.GLOBAL): PtrDType {
    const key = `${size}|${addrspace}`;
    this.ptrCache ??= new Map();
    let p = this.ptrCache.get(key);
    if (p === undefined) {
      p = PtrDType.make(this, size, addrspace);
      this.ptrCache.set(key, p);
    }
    return p;
  }

  toString(): string {
    return this.name;
  }
}

export class PtrDType extends DType {
  private constructor(
    readonly pointee: DType,
    readonly size: number,
    readonly addrspace: AddrSpace,
  ) {
    const where = addrspace === AddrSpace.GLOBAL ? '' : ` ${addrspace.toLowerCase()}`;
    super(`${pointee.name}*${size >= 0 ? `[${size}]` : ''}${where}`, pointee.kind, 8, 1, undefined);
  }
  /** @internal */
  static make(pointee: DType, size: number, addrspace: AddrSpace): PtrDType {
    return new PtrDType(pointee, size, addrspace);
  }
  override get isPtr(): boolean {
    return true;
  }
}

const s = DType.makeScalar;
export const dtypes = {
  void: s('void', 'void', 0),
  bool: s('bool', 'bool', 1),
  int8: s('int8', 'int', 1),
  int16: s('int16', 'int', 2),
  int32: s('int32', 'int', 4),
  int64: s('int64', 'int', 8),
  uint8: s('uint8', 'uint', 1),
  uint16: s('uint16', 'uint', 2),
  uint32: s('uint32', 'uint', 4),
  uint64: s('uint64', 'uint', 8),
  float16: s('float16', 'float', 2),
  bfloat16: s('bfloat16', 'float', 2),
  float32: s('float32', 'float', 4),
  float64: s('float64', 'float', 8),
  /** The type of index arithmetic: an integer wide enough for any address (rendered as the target's size type). */
  index: s('index', 'index', 8),
} as const;

export type ScalarName = keyof typeof dtypes;
export const scalarDTypes: readonly DType[] = Object.values(dtypes);

/** A dtype as the Tensor API takes it: the DType or its name ('float32', 'int64', ...). */
export type DTypeLike = DType | Exclude<ScalarName, 'void' | 'index'>;

const valueDTypes = new Map<string, DType>(
  Object.values(dtypes)
    .filter((d) => d !== dtypes.void && d !== dtypes.index)
    .map((d) => [d.name, d]),
);

/** The DType a DTypeLike names; anything else throws, naming `op` and the valid names. */
export function toDType(op: string, d: DTypeLike): DType {
  if (d instanceof DType) return d;
  const found = typeof d === 'string' ? valueDTypes.get(d) : undefined;
  if (found !== undefined) return found;
  const given = typeof d === 'string' ? `'${d}'` : String(d);
  throw new Error(
    `${op}: unknown dtype ${given}; give a DType or one of ${[...valueDTypes.keys()].join(', ')}`,
  );
}

export function dtypeByName(name: string): DType {
  const d = (dtypes as Record<string, DType>)[name];
  if (d === undefined)
    throw new Error(`unknown dtype '${name}': valid names are ${Object.keys(dtypes).join(', ')}`);
  return d;
}

function scalarRange(d: DType): readonly [number, number] {
  switch (d.kind) {
    case 'bool':
      return [0, 1];
    case 'int':
    case 'index': {
      const bits = d.itemsize * 8;
      return [-(2 ** (bits - 1)), 2 ** (bits - 1) - 1];
    }
    case 'uint':
      return [0, 2 ** (d.itemsize * 8) - 1];
    case 'float':
      return [-Infinity, Infinity];
    default:
      throw new Error(`dtype ${d.name} has no value range`);
  }
}

// ---------------------------------------------------------------------------------------------------
// Promotion lattice (tinygrad's promo_lattice, after JAX's). An edge a -> b means a's values fit in b:
//   bool -> int8, uint8
//   int8 -> int16 -> int32 -> int64;   uintN -> uint(2N) and int(2N) (uint8 -> int16, ...)
//   int64, uint64 -> index (the type of index arithmetic sits above every storable integer)
//   index -> float16, bfloat16 (an integer meeting a float becomes that float)
//   float16, bfloat16 -> float32 -> float64
// promote(a, b) is the least common upper bound; every pair has exactly one. No storable integer holds both
// a signed integer and uint64: they meet at index, and promote gives the default float, float32, there
// instead (tinygrad's weakfloat, which is float32 once stored). float16 + bfloat16 gives float32.
// That one rule costs associativity where a float16, bfloat16 or index joins later: (int8 + uint64) + float16
// is float32 + float16 = float32, int8 + (uint64 + float16) is float16. promoteAll takes the bound of the whole
// set at once (float16 there), so its answer does not depend on the order.

const {
  bool,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  index,
} = dtypes;
const latticeParents = new Map<DType, readonly DType[]>([
  [bool, [int8, uint8]],
  [int8, [int16]],
  [int16, [int32]],
  [int32, [int64]],
  [int64, [index]],
  [uint8, [int16, uint16]],
  [uint16, [int32, uint32]],
  [uint32, [int64, uint64]],
  [uint64, [index]],
  [index, [float16, bfloat16]],
  [float16, [float32]],
  [bfloat16, [float32]],
  [float32, [float64]],
  [float64, []],
]);

/** The float a mixed signed/uint64 operation computes in (tinygrad's and PyTorch's default float). */
const defaultFloat = float32;

function upperSet(d: DType): Set<DType> {
  const out = new Set<DType>([d]);
  for (const x of out) for (const p of latticeParents.get(x) ?? []) out.add(p);
  return out;
}
const upperSets = new Map([...latticeParents.keys()].map((d) => [d, upperSet(d)]));

/** The least upper bound of ds in the lattice, or defaultFloat where storable integers meet at index. */
function leastUpper(op: string, ds: readonly DType[]): DType {
  for (const d of ds)
    if (!upperSets.has(d))
      throw new Error(
        `${op}: no common dtype for ${ds.map((x) => x.name).join(' and ')}; only scalar dtypes promote`,
      );
  const common = [...upperSets.get(ds[0]!)!].filter((c) => ds.every((d) => upperSets.get(d)!.has(c)));
  // the lattice gives every set one minimal common bound: the one below all the others
  const lub = common.find((c) => common.every((o) => upperSets.get(c)!.has(o)))!;
  return lub === index && !ds.includes(index) ? defaultFloat : lub;
}

const promoteCache = new Map<DType, Map<DType, DType>>();

/** The dtype two operands are promoted to before a binary op (see the lattice above). */
export function promote(a: DType, b: DType): DType {
  if (a === b && upperSets.has(a)) return a;
  let row = promoteCache.get(a);
  if (row === undefined) promoteCache.set(a, (row = new Map()));
  let r = row.get(b);
  if (r === undefined) row.set(b, (r = leastUpper('promote', [a, b])));
  return r;
}

/** The common dtype of any number of dtypes: their least upper bound taken at once (see the lattice above). */
export function promoteAll(...ds: DType[]): DType {
  if (ds.length === 0) throw new Error('promoteAll: needs at least one dtype');
  return ds.length <= 2 ? promote(ds[0]!, ds.at(-1)!) : leastUpper('promoteAll', ds);
}

/**
 * The dtype sum() accumulates in (tinygrad's sum_acc_dtype): bool and signed integers in at least int32,
 * unsigned ones in at least uint32, floats in at least float32. sum() of float16 and bfloat16 casts the
 * result back to the input's dtype; integers keep the wider one.
 */
export function sumAccDType(d: DType): DType {
  if (d.isUnsigned) return promote(d, uint32);
  if (d.isInt || d.isBool) return promote(d, int32);
  return promote(d, float32);
}

/**
 * The dtype sum() gives for `count` elements of d: an integer or bool sum is int32 (uint32 if unsigned) when
 * count times d's largest magnitude fits it, so no input of that length can wrap (counting a mask stays
 * int32), and int64 (uint64) otherwise, as numpy and PyTorch give for int32. A float sum keeps its dtype
 * (float16 and bfloat16 accumulate in float32, sumAccDType).
 */
export function sumDType(d: DType, count: number): DType {
  if (d.isFloat) return d;
  const narrow = sumAccDType(d);
  if (narrow.itemsize > 4) return narrow;
  const fits = count * d.max <= narrow.max && count * d.min >= narrow.min;
  return fits ? narrow : d.isUnsigned ? dtypes.uint64 : dtypes.int64;
}

/**
 * tinygrad's sum dtype (sumAccDType, a float keeping its own): what sums add in whose result is cast back or
 * keeps its operands' dtype: matmul, einsum, conv, one-hot selections, arange's prefix sum.
 */
export function narrowSumDType(d: DType): DType {
  return d.isFloat ? d : sumAccDType(d);
}

/** The dtype prod() gives: integers and bools multiply in 64 bits (as PyTorch), which wrap as C's do. */
export function prodDType(d: DType): DType {
  if (d.isUnsigned) return dtypes.uint64;
  if (d.isInt || d.isBool) return dtypes.int64;
  return d;
}

// ---------------------------------------------------------------------------------------------------
// Exact narrow-float rounding (round to nearest, ties to even), straight from a double so that no
// double rounding through float32 happens.

function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Rounds x to a binary float with `mant` stored mantissa bits and normal exponents in [emin, emax]. */
function roundToFloat(x: number, mant: number, emin: number, emax: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  const ulp = 2 ** (Math.max(e, emin) - mant);
  const r = roundHalfEven(a / ulp) * ulp;
  const maxFinite = (2 - 2 ** -mant) * 2 ** emax;
  return Math.sign(x) * (r > maxFinite ? Infinity : r);
}

export function roundFloat16(x: number): number {
  return roundToFloat(x, 10, -14, 15);
}
export function roundBFloat16(x: number): number {
  return roundToFloat(x, 7, -126, 127);
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of x, rounded to nearest even. */
export function float16Bits(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const r = roundFloat16(x);
  const sign = r < 0 || Object.is(r, -0) ? 0x8000 : 0;
  const a = Math.abs(r);
  if (a === Infinity) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | (a / 2 ** -24); // subnormal (or zero): a whole number of 2^-24 steps
  const e = Math.floor(Math.log2(a));
  return sign | ((e + 15) << 10) | ((a / 2 ** e - 1) * 1024);
}

export function float16FromBits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? Number.NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** bfloat16 bits of x (the top half of a float32), rounded to nearest even. */
export function bfloat16Bits(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  f32[0] = roundBFloat16(x); // exactly representable in float32
  return u32[0]! >>> 16;
}

export function bfloat16FromBits(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0]!;
}

// ---------------------------------------------------------------------------------------------------
// Constants: how a value is stored in a dtype (wrapping integers, rounding floats).

const INT64_SAFE = (v: bigint) =>
  v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER);

/** Normalizes a value to what `dtype` holds: booleans for bool, wrapped integers, rounded floats. */
export function truncate(dtype: DType, v: ConstValue): ConstValue {
  const d = dtype.base;
  switch (d.kind) {
    case 'bool':
      // nonzero is true, NaN included (as C and numpy convert it)
      return typeof v === 'bigint' ? v !== 0n : typeof v === 'number' ? v !== 0 : v;
    case 'float': {
      const x = Number(v);
      if (d === dtypes.float64) return x;
      if (d === dtypes.float32) return Math.fround(x);
      return d === dtypes.float16 ? roundFloat16(x) : roundBFloat16(x);
    }
    case 'int':
    case 'uint':
    case 'index': {
      let x: number | bigint = typeof v === 'boolean' ? Number(v) : v;
      if (typeof x === 'number') {
        if (Number.isNaN(x)) throw new Error(`cannot store NaN in ${d.name}`);
        if (!Number.isFinite(x)) throw new Error(`cannot store ${x} in ${d.name}`);
        x = Math.trunc(x);
      }
      return wrapInt(d, x);
    }
    default:
      throw new Error(`cannot make a constant of dtype ${d.name}`);
  }
}

function wrapInt(d: DType, x: number | bigint): number | bigint {
  const bits = d.itemsize * 8;
  if (bits <= 32 && typeof x === 'number') {
    if (d.kind === 'uint') return bits === 32 ? x >>> 0 : x & (2 ** bits - 1);
    return bits === 32 ? x | 0 : (x << (32 - bits)) >> (32 - bits);
  }
  // 64-bit (and index), or a bigint: exact through BigInt when the number is not safe
  if (typeof x === 'number' && Number.isSafeInteger(x)) {
    if (d.kind === 'uint' && x < 0) x = BigInt(x);
    else return x === 0 ? 0 : x; // normalizes -0
  }
  const big = d.kind === 'uint' ? BigInt.asUintN(bits, BigInt(x)) : BigInt.asIntN(bits, BigInt(x));
  return INT64_SAFE(big) ? Number(big) : big;
}

// ---------------------------------------------------------------------------------------------------
// TypedArrays. float16 and bfloat16 are stored as their bits in Uint16Array; bool as 0/1 in Uint8Array;
// 64-bit integers in BigInt arrays.

export type StorageArray =
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

type StorageCtor = {
  new (n: number): StorageArray;
  new (buf: ArrayBufferLike, offset?: number, length?: number): StorageArray;
};

const storageCtors = new Map<DType, StorageCtor>([
  [dtypes.bool, Uint8Array],
  [dtypes.int8, Int8Array],
  [dtypes.int16, Int16Array],
  [dtypes.int32, Int32Array],
  [dtypes.int64, BigInt64Array],
  [dtypes.uint8, Uint8Array],
  [dtypes.uint16, Uint16Array],
  [dtypes.uint32, Uint32Array],
  [dtypes.uint64, BigUint64Array],
  [dtypes.float16, Uint16Array],
  [dtypes.bfloat16, Uint16Array],
  [dtypes.float32, Float32Array],
  [dtypes.float64, Float64Array],
]);

function storageCtor(dtype: DType): StorageCtor {
  const c = storageCtors.get(dtype);
  if (c === undefined)
    throw new Error(
      `dtype ${dtype.name} has no TypedArray storage; storable dtypes are ${[...storageCtors.keys()].map((d) => d.name).join(', ')}`,
    );
  return c;
}

/** Throws, naming the storable dtypes, unless `dtype` has a TypedArray storage. */
export function checkStorage(dtype: DType): void {
  storageCtor(dtype);
}

/** A zero-filled storage array of n elements. */
export function allocStorage(dtype: DType, n: number): StorageArray {
  return new (storageCtor(dtype))(n);
}

/** A storage view of `dtype` over raw bytes. */
export function storageView(
  dtype: DType,
  buf: ArrayBufferLike,
  byteOffset = 0,
  length?: number,
): StorageArray {
  const C = storageCtor(dtype);
  return new C(buf, byteOffset, length ?? (buf.byteLength - byteOffset) / dtype.itemsize);
}

/** Writes a value into element i of a storage array, converting it as the dtype stores it. */
export function writeElement(dtype: DType, arr: StorageArray, i: number, v: ConstValue): void {
  if (dtype === dtypes.float16) arr[i] = float16Bits(Number(v));
  else if (dtype === dtypes.bfloat16) arr[i] = bfloat16Bits(Number(v));
  else if (arr instanceof BigInt64Array || arr instanceof BigUint64Array) arr[i] = BigInt(truncate(dtype, v));
  else arr[i] = Number(truncate(dtype, v));
}

/** Reads element i: booleans for bool, numbers for floats and ints up to 32 bits, numbers or bigints for 64-bit. */
export function readElement(dtype: DType, arr: StorageArray, i: number): ConstValue {
  const raw = arr[i]!;
  if (dtype === dtypes.float16) return float16FromBits(raw as number);
  if (dtype === dtypes.bfloat16) return bfloat16FromBits(raw as number);
  if (dtype === dtypes.bool) return raw !== 0;
  if (typeof raw === 'bigint') return INT64_SAFE(raw) ? Number(raw) : raw;
  return raw;
}

/** Converts plain values to a new storage array of `dtype`. */
export function toStorage(dtype: DType, values: ArrayLike<ConstValue>): StorageArray {
  const out = allocStorage(dtype, values.length);
  for (let i = 0; i < values.length; i++) writeElement(dtype, out, i, values[i]!);
  return out;
}

/** Decodes a storage array into plain values. */
export function fromStorage(dtype: DType, arr: StorageArray): ConstValue[] {
  const out = new Array<ConstValue>(arr.length);
  for (let i = 0; i < arr.length; i++) out[i] = readElement(dtype, arr, i);
  return out;
}

/** The dtype a TypedArray holds natively (a Uint16Array is uint16, not float16; a Uint8Array is uint8). */
export function dtypeOfArray(arr: ArrayBufferView): DType {
  const d = nativeDTypes.find(([C]) => arr instanceof C);
  if (d === undefined) throw new Error(`no dtype holds a ${arr.constructor.name}`);
  return d[1];
}
const nativeDTypes: readonly [StorageCtor, DType][] = [
  [Int8Array, dtypes.int8],
  [Int16Array, dtypes.int16],
  [Int32Array, dtypes.int32],
  [BigInt64Array, dtypes.int64],
  [Uint8Array, dtypes.uint8],
  [Uint16Array, dtypes.uint16],
  [Uint32Array, dtypes.uint32],
  [BigUint64Array, dtypes.uint64],
  [Float32Array, dtypes.float32],
  [Float64Array, dtypes.float64],
];
