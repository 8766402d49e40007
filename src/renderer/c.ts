// C for the CPU backend (one function per kernel, compiled by the system compiler), and CUDA C, the same C
// as a GPU kernel over workgroups.

import { exp2Series } from '../codegen/decompose.ts';
import { MASK_OPS, maskNot, maskWidth } from '../codegen/vectors.ts';
import { AddrSpace, type DType, dtypes } from '../dtype.ts';
import { HOST_BUFFER_ALIGN } from '../helpers.ts';
import { tensorCoreNamed } from '../runtime/tensor-cores.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { type GpuLanguage, type Language, maxIndex, nonNegativeDivision, render } from './render.ts';

/**
 * The C type of a value. bfloat16 values live in floats (rounded after every op): gcc 12 has no __bf16 arithmetic
 * (CUDA's are their bits: see Dialect.bfloat16).
 */
const C_TYPES = new Map<DType, string>([
  [dtypes.bool, '_Bool'],
  [dtypes.int8, 'signed char'],
  [dtypes.int16, 'short'],
  [dtypes.int32, 'int'],
  [dtypes.int64, 'long long'],
  [dtypes.uint8, 'unsigned char'],
  [dtypes.uint16, 'unsigned short'],
  [dtypes.uint32, 'unsigned int'],
  [dtypes.uint64, 'unsigned long long'],
  [dtypes.float16, 'tg_half'],
  [dtypes.bfloat16, 'float'],
  [dtypes.float32, 'float'],
  [dtypes.float64, 'double'],
]);

/** float functions take an f suffix, double ones none; float16 and bfloat16 compute through float. */
const mathSuffix = (d: DType) => (d === dtypes.float64 ? '' : 'f');

function floatLiteral(v: number, d: DType): string {
  if (Number.isNaN(v)) return 'NAN';
  if (v === Infinity) return 'INFINITY';
  if (v === -Infinity) return '(-INFINITY)';
  let text = Object.is(v, -0) ? '-0.0' : String(v);
  if (!/[.e]/.test(text)) text += '.0';
  if (d !== dtypes.float64) text += 'f';
  return v < 0 || Object.is(v, -0) ? `(${text})` : text;
}

function intLiteral(v: number | bigint | boolean, d: DType, indexType: string): string {
  if (d === dtypes.bool) return v ? '1' : '0';
  const n = BigInt(v);
  // -2^63 has no literal: its magnitude does not fit a long long
  if (n === -(2n ** 63n)) return '(-9223372036854775807ll-1)';
  const suffix =
    d === dtypes.uint64
      ? 'ull'
      : d === dtypes.int64 || (d === dtypes.index && indexType !== 'int')
        ? 'll'
        : d === dtypes.uint32
          ? 'u'
          : '';
  return n < 0n ? `(${n}${suffix})` : `${n}${suffix}`;
}

/** The unsigned type of the same width (shifts of negative values are defined there). */
const UNSIGNED: Record<string, string> = { int: 'unsigned int', 'long long': 'unsigned long long' };

/** Ops whose C operators work on vectors lane by lane (DIV and RECIP are float only). */
const VECTOR_OPERATORS: ReadonlySet<Ops> = new Set([
  Ops.ADD,
  Ops.SUB,
  Ops.MUL,
  Ops.DIV,
  Ops.NEG,
  Ops.MULACC,
  Ops.RECIP,
]);

/** What CUDA C changes in the C a CPU compiler takes: the kernel's declaration, the prelude, workgroups. */
interface Dialect {
  name: string;
  declare(name: string, args: readonly string[]): string;
  restrict: string;
  /** The boolean type: C's _Bool, C++'s bool. */
  bool: string;
  /** A float16 constant: C's float literal converts where used; CUDA's half has no mixed arithmetic. */
  half(literal: string): string;
  /** A float16 product that no add may fuse with (so that it rounds as the CPU's does), where one is needed. */
  halfMul?: string;
  /** The bits of `x`, a `from`, as a `to` (C: a statement expression; NVRTC has none in device code). */
  bitcast(x: string, from: string, to: string): string;
  prelude: string;
  /** What only a kernel of float16 values needs, before the prelude (CUDA's half: a header NVRTC parses anew). */
  halfPrelude?: string;
  /** Workgroups; LOCAL buffers are declared as the dialect's shared arrays of the C element type. */
  gpu?: Omit<GpuLanguage, 'local'> & {
    /** Declares a LOCAL buffer of `size` elements of C type `type`; by default a static __shared__ array. */
    local?: (name: string, type: string, size: number) => string;
  };
  /** Bytes every buffer's start is aligned to (vector loads at multiples of their size are aligned). */
  alignment: number;
  /**
   * The max of a float and a constant where the dialect's compiler needs a form of its own (else `a>b||a!=a ?
   * a : b`): gcc makes that a branch on a > b, which a relu's inputs mispredict half the time.
   */
  floatMax?: (a: string, b: string) => string;
  /** How vectors are written: GCC's vector extensions (C), or CUDA's C++ (a struct of lanes, see CUDA_VECTORS). */
  vectors: VectorDialect;
  /**
   * The FMA function (float64's name; float32's ends in f) a MULACC of float32 or float64 calls: the compiler
   * contracts nothing of its own (gcc's -ffp-contract=off, NVRTC's --fmad=false; src/codegen/contract.ts), so a
   * kernel's bits depend neither on its optimization level nor on what else its kernel computes.
   */
  fma?: string;
  /**
   * The type of bfloat16 values where the dialect has one holding their bits (CUDA's tg_bfloat: it converts to
   * float for arithmetic and rounds a float assigned to it), so that loads, stores and tensor-core operands move
   * bits; else (C) they are floats rounded after every op, and their bits only in memory.
   */
  bfloat16?: string;
}

/** The vector constructs that differ between GCC's C and CUDA's C++. */
interface VectorDialect {
  typedef(name: string, element: string, lanes: number, bytes: number): string;
  /** A vector of the given lanes. */
  of(type: string, parts: readonly string[]): string;
  /** Whether a cast converts whole vectors and MAX/EXP2 have vector helpers (else they are computed lane by lane). */
  wholeOps: boolean;
  read(type: string, address: string, aligned: boolean): string;
  write(type: string, address: string, value: string, aligned: boolean): string;
}

/** A vector's address in a buffer, marked aligned to the vector's size where it is. */
const assumeAligned = (at: string, aligned: boolean, type: string) =>
  aligned ? `__builtin_assume_aligned(${at}, sizeof(${type}))` : at;

const GCC_VECTORS: VectorDialect = {
  typedef: (name, element, _lanes, bytes) =>
    `typedef ${element} ${name} __attribute__((vector_size(${bytes})));`,
  of: (t, parts) => `((${t}){${parts.join(', ')}})`,
  wholeOps: true,
  // memcpy: gcc makes it one vector move, aligned where the address is (assume_aligned says so)
  read: (t, at, aligned) =>
    `__extension__({ ${t} v_; __builtin_memcpy(&v_, ${assumeAligned(at, aligned, t)}, sizeof v_); v_; })`,
  write: (t, at, value, aligned) =>
    `{ ${t} v_ = ${value}; __builtin_memcpy(${assumeAligned(at, aligned, t)}, &v_, sizeof v_); }`,
};

// CUDA C++ has no vector arithmetic (float4 is a struct without operators) and nvcc no vector_size: a vector is
// a struct of lanes whose operators work lane by lane, aligned to its size up to 16 bytes so that an aligned
// load or store of one is a single ld/st.v2/v4; an unaligned one moves lane by lane (a GPU faults on it).
const CUDA_VECTOR_PRELUDE = `
template <typename T> struct tg_id { typedef T type; };
template <typename T, int N> struct alignas(sizeof(T) * N > 16 ? 16 : sizeof(T) * N) tg_vec {
  T v[N];
  __device__ T &operator[](int i) { return v[i]; }
  __device__ const T &operator[](int i) const { return v[i]; }
};
#define TG_VEC_OP(op) \
  template <typename T, int N> __device__ inline tg_vec<T, N> operator op(tg_vec<T, N> a, tg_vec<T, N> b) { \
    tg_vec<T, N> r; for (int i = 0; i < N; i++) r[i] = a[i] op b[i]; return r; } \
  template <typename T, int N> __device__ inline tg_vec<T, N> operator op(tg_vec<T, N> a, typename tg_id<T>::type b) { \
    tg_vec<T, N> r; for (int i = 0; i < N; i++) r[i] = a[i] op b; return r; } \
  template <typename T, int N> __device__ inline tg_vec<T, N> operator op(typename tg_id<T>::type a, tg_vec<T, N> b) { \
    tg_vec<T, N> r; for (int i = 0; i < N; i++) r[i] = a op b[i]; return r; }
TG_VEC_OP(+) TG_VEC_OP(-) TG_VEC_OP(*) TG_VEC_OP(/)
template <typename T, int N> __device__ inline tg_vec<T, N> operator-(tg_vec<T, N> a) {
  tg_vec<T, N> r; for (int i = 0; i < N; i++) r[i] = -a[i]; return r; }
// ldmatrix: N 8 x 8 matrices of 16-bit elements, each lane's address a row's start (LoadArg.matrix)
template <typename T, int N, bool Trans> __device__ inline tg_vec<T, 2 * N> tg_ldmatrix(const T* p) {
  unsigned r[4], a = (unsigned)__cvta_generic_to_shared(p);
  if (N == 4 && Trans) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  if (N == 4 && !Trans) asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  if (N == 2 && Trans) asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  if (N == 2 && !Trans) asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  tg_vec<T, 2 * N> v;
  for (int i = 0; i < N; i++) reinterpret_cast<unsigned*>(&v)[i] = r[i];
  return v;
}`;

// A bfloat16 value as its bits: arithmetic sees the float it converts to (exactly, a shift), and a float assigned
// to it (every op's result is declared as one) rounds to nearest even. Moving one (a load, a store, a tile copy,
// a tensor-core operand) moves 16 bits, as a half does. Trivial, so that __shared__ arrays of it may exist.
const CUDA_BFLOAT = `
struct tg_bfloat {
  unsigned short bits;
  tg_bfloat() = default;
  __device__ tg_bfloat(float f) : bits(tg_float_to_bf16(f)) {}
  __device__ operator float() const { return tg_bf16_to_float(bits); }
};`;

const CUDA_VECTORS: VectorDialect = {
  typedef: (name, element, lanes) => `typedef tg_vec<${element}, ${lanes}> ${name};`,
  of: (t, parts) => `${t}{${parts.join(', ')}}`,
  wholeOps: false,
  read: (t, at) => `(*(const ${t}*)(${at}))`,
  write: (t, at, value) => `*(${t}*)(${at}) = ${value};`,
};

function cLanguage(indexType: string, dialect: Dialect = C_DIALECT): Language {
  /** Vector typedefs the kernel uses, by name. */
  const vectorTypes = new Map<string, string>();
  const vectorType = (d: DType, lanes: number): string => {
    const name = `tg_${type(d).replace(/^tg_/, '').replace(/ /g, '_')}${lanes}`;
    if (!vectorTypes.has(name)) {
      const bytes = lanes * d.itemsize;
      vectorTypes.set(name, dialect.vectors.typedef(name, type(d), lanes, bytes));
    }
    return name;
  };
  /** Vector functions the kernel uses (MAX, float EXP2, FMA: see vectorHelper), by name, after the typedefs. */
  const helpers = new Map<string, string>();
  /** A tensor core's instruction as a call of a function defined on first use (CUDA: mma.sync, see WMMA_PTX). */
  const wmma = (u: UOp, a: readonly string[]): string => {
    const { name } = u.argOf(Ops.WMMA);
    const fn = `tg_${name}`;
    const shared = tensorCoreNamed(name)?.sharedOperands;
    if (!helpers.has(fn)) {
      const [ta, tb, tc] = u.src.map((s) => vectorType(s.dtype, s.lanes)) as [string, string, string];
      if (shared) {
        helpers.set('tg_wgmma_descriptor', WGMMA_DESCRIPTOR);
        helpers.set(fn, wgmmaFunction(fn, u, tc));
      } else helpers.set(fn, wmmaFunction(fn, u, ta, tb, tc));
    }
    if (!shared) return `${fn}(${a.join(', ')})`;
    // A and B's tiles as matrix descriptors, with the distance of their blocks of 64 columns in bytes (16 where
    // the operand has one block: the field is then unused)
    const descriptors = u.src.slice(0, 2).map((s, i) => {
      const leading = s.argOf(Ops.LOAD)?.tile?.leading;
      return `tg_wgmma_descriptor(${a[i]}, ${leading === undefined ? 16 : leading * s.dtype.itemsize})`;
    });
    return `${fn}(${[...descriptors, a[2]].join(', ')})`;
  };
  /** A MULACC this dialect writes as an FMA call. */
  const fused = (u: UOp) => u.op === Ops.MULACC && dialect.fma !== undefined && FMA_TYPES.has(u.dtype.base);
  /** The name of a vector function computing u, defined on first use; undefined: u is computed per lane. */
  const vectorHelper = (u: UOp): string | undefined => {
    const lanes = u.lanes;
    if (!dialect.vectors.wholeOps || (u.op === Ops.EXP2 && u.dtype !== dtypes.float32)) return undefined;
    const t = vectorType(u.dtype, lanes);
    if (fused(u)) {
      const name = `tg_fma_${t.slice(3)}`;
      if (!helpers.has(name)) helpers.set(name, x86Helper(name, t, u.dtype.base, lanes, X86_FMA, 'fma'));
      return name;
    }
    if (u.op === Ops.SQRT && FMA_TYPES.has(u.dtype.base)) {
      const name = `tg_sqrt_${t.slice(3)}`;
      if (!helpers.has(name)) helpers.set(name, x86Helper(name, t, u.dtype.base, lanes, X86_SQRT, 'sqrt'));
      return name;
    }
    if (u.op !== Ops.MAX && u.op !== Ops.EXP2) return undefined;
    const name = `tg_${u.op === Ops.MAX ? 'max' : 'exp2'}_${t}`;
    const mask = vectorType(u.dtype.itemsize === 8 ? dtypes.int64 : dtypes.int32, lanes);
    if (!helpers.has(name))
      helpers.set(
        name,
        u.op === Ops.MAX ? vectorMax(name, t, mask, u.dtype.isFloat) : vectorExp2(name, t, mask),
      );
    return name;
  };
  /** Whether bfloat16 values are floats here (rounded after every op, converted where memory holds their bits). */
  const bf16AsFloat = (d: DType) => d === dtypes.bfloat16 && dialect.bfloat16 === undefined;
  const type = (d: DType): string => {
    if (d === dtypes.index) return indexType;
    if (d === dtypes.bool) return dialect.bool;
    if (d === dtypes.bfloat16 && dialect.bfloat16 !== undefined) return dialect.bfloat16;
    const t = C_TYPES.get(d);
    if (t === undefined)
      throw new Error(
        `CPU: dtype ${d.name} is not supported; supported: ${[...C_TYPES.keys()].map((x) => x.name).join(', ')}`,
      );
    return t;
  };
  /** The element type of a buffer: bfloat16 is stored as its bits. */
  const storage = (d: DType) => (bf16AsFloat(d) ? 'unsigned short' : type(d));
  const fn = (name: string, d: DType) => `${name}${mathSuffix(d)}`;
  /** The helper family for floor division: narrower integers promote to int. */
  const helper = (d: DType) => {
    if (d === dtypes.uint64) return 'ull';
    if (d === dtypes.uint32) return 'uint';
    return type(d) === 'long long' ? 'll' : 'int';
  };
  /** The C type an integer computes in after the usual promotions. */
  const promoted = (d: DType) => (type(d).includes('long long') ? 'long long' : 'int');
  const bitcast = (x: string, from: DType, to: DType): string => {
    // bfloat16 values that are floats: reinterpret their bits, not the float
    const src = bf16AsFloat(from) ? `tg_float_to_bf16(${x})` : x;
    const bits = dialect.bitcast(src, storage(from), storage(to));
    return bf16AsFloat(to) ? `tg_bf16_to_float(${bits})` : bits;
  };
  const expr = (u: UOp, a: readonly string[]): string => {
    const d = u.src[0]!.dtype;
    switch (u.op) {
      // on bools, + and * are or and and (gcc warns about * in a boolean context)
      case Ops.ADD:
        return d === dtypes.bool ? `(${a[0]}||${a[1]})` : `(${a[0]}+${a[1]})`;
      case Ops.SUB:
        return `(${a[0]}-${a[1]})`;
      case Ops.MUL:
        if (d === dtypes.float16 && dialect.halfMul) return `${dialect.halfMul}(${a[0]}, ${a[1]})`;
        return d === dtypes.bool ? `(${a[0]}&&${a[1]})` : `(${a[0]}*${a[1]})`;
      case Ops.DIV:
        return `(${a[0]}/${a[1]})`;
      case Ops.NEG:
        return `(-${a[0]})`;
      case Ops.MAX:
        // NaN in either operand gives NaN, as numpy's maximum does
        if (!d.isFloat) return `((${a[0]}>${a[1]})?${a[0]}:${a[1]})`;
        // against a constant (a relu, a clamp) which operand wins is the data's coin flip; a running max (a
        // reduce's, softmax's) rarely changes, and there a predicted branch keeps the maxes from chaining
        if (dialect.floatMax !== undefined && u.src.some((s) => s.op === Ops.CONST))
          return dialect.floatMax(a[0]!, a[1]!);
        return `((${a[0]}>${a[1]}||${a[0]}!=${a[0]})?${a[0]}:${a[1]})`;
      case Ops.IDIV:
        return nonNegativeDivision(u) ? `(${a[0]}/${a[1]})` : `tg_floordiv_${helper(d)}(${a[0]}, ${a[1]})`;
      case Ops.MOD:
        return nonNegativeDivision(u) ? `(${a[0]}%${a[1]})` : `tg_floormod_${helper(d)}(${a[0]}, ${a[1]})`;
      case Ops.CMPLT:
        return `(${a[0]}<${a[1]})`;
      case Ops.CMPNE:
        return `(${a[0]}!=${a[1]})`;
      case Ops.CMPEQ:
        return `(${a[0]}==${a[1]})`;
      case Ops.AND:
        return `(${a[0]}&${a[1]})`;
      case Ops.OR:
        return `(${a[0]}|${a[1]})`;
      case Ops.XOR:
        return `(${a[0]}^${a[1]})`;
      case Ops.SHL: {
        // a negative signed value shifts as its unsigned bits (C leaves it undefined)
        if (d.isUnsigned || d === dtypes.bool) return `(${a[0]}<<${a[1]})`;
        const t = promoted(d);
        return `((${t})((${UNSIGNED[t]})${a[0]}<<${a[1]}))`;
      }
      case Ops.SHR:
        return `(${a[0]}>>${a[1]})`;
      case Ops.WHERE:
        return `(${a[0]}?${a[1]}:${a[2]})`;
      case Ops.RECIP:
        return `(${d === dtypes.float16 ? dialect.half(floatLiteral(1, d)) : floatLiteral(1, d)}/${a[0]})`;
      case Ops.TRUNC:
        return d.isFloat ? `${fn('trunc', d)}(${a[0]})` : a[0]!;
      case Ops.SQRT:
        return `${fn('sqrt', d)}(${a[0]})`;
      case Ops.EXP2:
        return d === dtypes.float64 ? `exp2(${a[0]})` : `tg_exp2f(${a[0]})`;
      case Ops.LOG2:
        return `${fn('log2', d)}(${a[0]})`;
      case Ops.SIN:
        return `${fn('sin', d)}(${a[0]})`;
      case Ops.POW:
        return `${fn('pow', d)}(${a[0]}, ${a[1]})`;
      case Ops.MULACC:
        return fused(u) ? `${fn(dialect.fma!, d)}(${a[0]}, ${a[1]}, ${a[2]})` : `(${a[0]}*${a[1]}+${a[2]})`;
      case Ops.CAST:
        return `((${type(u.dtype)})${a[0]})`;
      case Ops.BITCAST:
        return bitcast(a[0]!, d, u.dtype);
    }
    throw new Error(`CPU: no C for ${opName(u.op)}`);
  };
  /** A vector op: C's operator when it has one (a scalar operand spreads over the lanes), else lane by lane. */
  const vectorExpr = (u: UOp, a: readonly string[]): string => {
    if (VECTOR_OPERATORS.has(u.op) && !fused(u)) return expr(u, a);
    const lanes = u.lanes;
    if (dialect.vectors.wholeOps) {
      if (u.op === Ops.CAST && u.src[0]!.lanes > 1)
        return `__builtin_convertvector(${a[0]}, ${vectorType(u.dtype, lanes)})`;
      const whole = (i: number) =>
        u.src[i]!.lanes > 1 ? a[i]! : spreadScalar(a[i]!, vectorType(u.src[i]!.dtype, lanes));
      // a comparison of vectors is a mask (all-ones or zero integers as wide as its operands' lanes), and a
      // select by it takes the bits of one value or the other (src/codegen/vectors.ts keeps only these)
      // masks combine bit by bit; not is the complement (a mask's true is all ones, so != 1 would not do)
      if (maskNot(u) && maskWidth(u) !== undefined) return `(~${a[0]})`;
      if (MASK_OPS.has(u.op) || (u.dtype === dtypes.bool && maskWidth(u) !== undefined))
        return expr(u, [whole(0), whole(1)]);
      if (u.op === Ops.WHERE && u.src[0]!.lanes > 1) {
        const mask = vectorType(u.dtype.itemsize === 8 ? dtypes.int64 : dtypes.int32, lanes);
        const [c, x, y] = [`((${mask})${a[0]})`, `(${mask})${whole(1)}`, `(${mask})${whole(2)}`];
        return `((${vectorType(u.dtype, lanes)})((${c}&${x})|(~${c}&${y})))`;
      }
      // one condition for all lanes picks a whole vector (lane by lane, -Og branched on every lane)
      if (u.op === Ops.WHERE && u.dtype !== dtypes.bool) return `(${a[0]}?${whole(1)}:${whole(2)})`;
    }
    const helper = vectorHelper(u);
    const spread = (x: string, i: number) =>
      u.src[i]!.lanes > 1 ? x : spreadScalar(x, vectorType(u.dtype, lanes));
    if (helper !== undefined) return `${helper}(${a.map(spread).join(', ')})`;
    const parts = Array.from({ length: lanes }, (_, j) =>
      expr(
        u,
        a.map((x, i) => (u.src[i]!.lanes > 1 ? `${x}[${j}]` : x)),
      ),
    );
    return dialect.vectors.of(vectorType(u.dtype, lanes), parts);
  };
  return {
    name: dialect.name,
    kernel: (name, params, body) => {
      const args = params.map(
        (p) => `${p.written ? '' : 'const '}${storage(p.dtype)}* ${dialect.restrict} data${p.slot}`,
      );
      const typedefs = [...vectorTypes, ...helpers].map(([n, t]) => once(n, t)).join('');
      const code = `${typedefs}${dialect.declare(name, args)} {\n${body.join('\n')}\n}\n`;
      const half =
        dialect.halfPrelude !== undefined && HALF_USE.test(code) ? once('tg_half', dialect.halfPrelude) : '';
      return `${half}${once('tg_prelude', dialect.prelude)}${code}`;
    },
    ...(dialect.gpu === undefined
      ? {}
      : {
          // aligned as a vector, which may load or store it whole
          gpu: {
            ...dialect.gpu,
            local: (n, d, size) =>
              dialect.gpu!.local?.(n, storage(d), size) ??
              `__shared__ __align__(16) ${storage(d)} ${n}[${size}];`,
          },
          wmma,
        }),
    constant: (v, d) => {
      if (!d.isFloat) return intLiteral(v, d, indexType);
      const literal = floatLiteral(Number(v), d);
      if (d === dtypes.bfloat16 && dialect.bfloat16 !== undefined) return `${dialect.bfloat16}(${literal})`;
      return d === dtypes.float16 ? dialect.half(literal) : literal;
    },
    alu: (u, a) => {
      if (u.lanes > 1) return vectorExpr(u, a);
      const e = expr(u, a);
      // a bfloat16 result is rounded to bfloat16 (bitcasts and comparisons give exact values); a tg_bfloat
      // rounds the float it is declared from
      return bf16AsFloat(u.dtype) && u.op !== Ops.BITCAST ? `tg_bf16_round(${e})` : e;
    },
    read: (buf, index, d) => (bf16AsFloat(d) ? `tg_bf16_to_float(${buf}[${index}])` : `${buf}[${index}]`),
    write: (buf, index, value, d) =>
      `${buf}[${index}] = ${bf16AsFloat(d) ? `tg_float_to_bf16(${value})` : value};`,
    // a mask's integer lanes are as wide as the values compared: its type is the comparison's
    declare: (name, d, expr, lanes) =>
      `${lanes === 1 ? type(d) : d === dtypes.bool && dialect.vectors.wholeOps ? `__typeof__(${expr})` : vectorType(d, lanes)} ${name} = ${expr};`,
    assign: (name, expr) => `${name} = ${expr};`,
    // one thread per iteration, at most as many as the host leaves the kernels (tg_team); a compiler without
    // OpenMP (no _OPENMP) runs the loop serially
    loopOpen: (name, bound, parallel) =>
      `${parallel ? `#ifdef _OPENMP\n#pragma omp parallel for num_threads(tg_team(${bound}))\n#endif\n` : ''}for (${indexType} ${name} = 0; ${name} < ${bound}; ${name}++) {`,
    loopClose: '}',
    when: (gate, statement) => `if (${gate}) ${statement}`,
    vector: {
      alignment: dialect.alignment,
      read: (buf, index, d, lanes, aligned) => {
        // bfloat16 lanes that are floats in registers are their bits in memory: converted lane by lane
        if (bf16AsFloat(d))
          return dialect.vectors.of(
            vectorType(d, lanes),
            Array.from({ length: lanes }, (_, j) => `tg_bf16_to_float(${buf}[${index}+${j}])`),
          );
        if (!aligned && !dialect.vectors.wholeOps)
          return dialect.vectors.of(
            vectorType(d, lanes),
            Array.from({ length: lanes }, (_, j) => `${buf}[${index}+${j}]`),
          );
        return dialect.vectors.read(vectorType(d, lanes), `${buf}+${index}`, aligned);
      },
      write: (buf, index, value, d, lanes, aligned) => {
        if (bf16AsFloat(d)) {
          const v = `v_${lanes}`;
          const parts = Array.from(
            { length: lanes },
            (_, j) => `${buf}[${index}+${j}] = tg_float_to_bf16(${v}[${j}]);`,
          );
          return `{ ${vectorType(d, lanes)} ${v} = ${value}; ${parts.join(' ')} }`;
        }
        if (!aligned && !dialect.vectors.wholeOps) {
          const v = `v_${lanes}`;
          const parts = Array.from({ length: lanes }, (_, j) => `${buf}[${index}+${j}] = ${v}[${j}];`);
          return `{ ${vectorType(d, lanes)} ${v} = ${value}; ${parts.join(' ')} }`;
        }
        return dialect.vectors.write(vectorType(d, lanes), `${buf}+${index}`, value, aligned);
      },
      of: (d, parts) => dialect.vectors.of(vectorType(d, parts.length), parts),
      lane: (v, j) => `${v}[${j}]`,
    },
  };
}

/**
 * How the C helpers are declared: inlined at every optimization level, as -Og (a kernel's quick build,
 * src/runtime/cc-upgrades.ts) inlines nothing of its own and would call an FMA or an exp2 per element.
 */
const INLINE = 'static inline __attribute__((always_inline))';

/**
 * A definition kernels share (the prelude, a vector type or helper), guarded so that several kernels' sources
 * concatenate into one translation unit (the CPU device compiles them in batches) with each defined once.
 */
const once = (name: string, text: string) =>
  `#ifndef ${name.toUpperCase()}_DEFINED\n#define ${name.toUpperCase()}_DEFINED\n${text}\n#endif\n`;

// Floor division and its remainder, defined everywhere as numpy defines them: C's / and % truncate, and
// trap on a zero divisor and on INT_MIN / -1 (x / 0 is 0 here, INT_MIN / -1 wraps to INT_MIN).
const signedHelpers = ([n, t, u]: readonly [string, string, string]) => `
${INLINE} ${t} tg_floordiv_${n}(${t} a, ${t} b) {
  if (b == 0) return 0;
  if (b == -1) return (${t})(0 - (${u})a);
  ${t} q = a / b; return q - ((a % b != 0) && ((a < 0) != (b < 0)));
}
${INLINE} ${t} tg_floormod_${n}(${t} a, ${t} b) {
  if (b == 0 || b == -1) return 0;
  ${t} r = a % b; return r + ((r != 0) && ((r < 0) != (b < 0))) * b;
}`;
const unsignedHelpers = ([n, t]: readonly [string, string]) => `
${INLINE} ${t} tg_floordiv_${n}(${t} a, ${t} b) { return b == 0 ? 0 : a / b; }
${INLINE} ${t} tg_floormod_${n}(${t} a, ${t} b) { return b == 0 ? 0 : a % b; }`;

// bfloat16 is the top half of a float32; rounding to it is to nearest, ties to even, with NaN kept NaN
const BF16_HELPERS = `
${INLINE} float tg_bf16_to_float(unsigned short b) {
  unsigned int u = (unsigned int)b << 16; float f; __builtin_memcpy(&f, &u, sizeof f); return f;
}
${INLINE} unsigned short tg_float_to_bf16(float f) {
  unsigned int u; __builtin_memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
${INLINE} float tg_bf16_round(float f) { return tg_bf16_to_float(tg_float_to_bf16(f)); }`;

// mma.sync takes A and B in 32-bit registers: two float16 or bfloat16 values each (the lower-numbered element in
// the low half), or one tf32 (a float32 rounded to 10 bits of mantissa by cvt.rna); C and D are float32 registers
const WMMA_PTX: Record<
  string,
  { type: string; perRegister: number; pack: (x: string, y: string) => string }
> = {
  float16: {
    type: 'f16',
    perRegister: 2,
    pack: (x, y) => `((unsigned)__half_as_ushort(${x}) | ((unsigned)__half_as_ushort(${y}) << 16))`,
  },
  bfloat16: {
    type: 'bf16',
    perRegister: 2,
    // tg_bfloat: the operands' bits, exact bfloat16 already
    pack: (x, y) => `((unsigned)${x}.bits | ((unsigned)${y}.bits << 16))`,
  },
  float32: { type: 'tf32', perRegister: 1, pack: (x) => `tg_tf32(${x})` },
};

/** A device function running one tensor core instruction: D = A * B + C for the warp, as inline PTX. */
function wmmaFunction(fn: string, u: UOp, ta: string, tb: string, tc: string): string {
  const { dims, dtypeIn } = u.argOf(Ops.WMMA);
  const [n, m, k] = dims;
  const ptx = WMMA_PTX[dtypeIn.name];
  if (ptx === undefined) throw new Error(`render CUDA: no mma.sync for ${dtypeIn.name} inputs (${fn})`);
  const registers = (v: string, lanes: number) =>
    Array.from({ length: lanes / ptx.perRegister }, (_, r) =>
      ptx.pack(`${v}[${r * ptx.perRegister}]`, `${v}[${r * ptx.perRegister + 1}]`),
    );
  const [a, b] = [registers('a', u.src[0]!.lanes), registers('b', u.src[1]!.lanes)];
  const d = u.lanes;
  let next = 0;
  const operands = (count: number) => `{${Array.from({ length: count }, () => `%${next++}`).join(', ')}}`;
  const [dOps, aOps, bOps] = [operands(d), operands(a.length), operands(b.length)];
  const outputs = Array.from({ length: d }, (_, i) => `"+f"(c[${i}])`).join(', ');
  const inputs = [...a, ...b].map((r) => `"r"(${r})`).join(', ');
  const tf32 =
    ptx.type === 'tf32'
      ? '  auto tg_tf32 = [](float x) { unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; };\n'
      : '';
  return `static __device__ inline ${tc} ${fn}(${ta} a, ${tb} b, ${tc} c) {
${tf32}  asm volatile("mma.sync.aligned.m${m}n${n}k${k}.row.col.f32.${ptx.type}.${ptx.type}.f32 ${dOps}, ${aOps}, ${bOps}, ${dOps};"
    : ${outputs}
    : ${inputs});
  return c;
}`;
}

/** Waits for the warpgroup's wgmmas: before each barrier (the next copies overwrite tiles) and after each loop. */
const WGMMA_WAIT = 'asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");';

/**
 * A matrix descriptor of shared memory in the 128-byte swizzle whose 8-row groups are 1024 bytes apart (the stride
 * byte offset) and whose blocks of 64 columns are `leading` bytes apart (the leading byte offset); both fields
 * count 16 bytes.
 */
const WGMMA_DESCRIPTOR = `static __device__ inline unsigned long long tg_wgmma_descriptor(const void* p, unsigned leading) {
  const unsigned long long at = (unsigned)__cvta_generic_to_shared(p);
  return (at & 0x3FFFF) >> 4 | (unsigned long long)(leading >> 4) << 16 | (1024ull >> 4) << 32 | 1ull << 62;
}`;

/**
 * A device function starting one warpgroup tensor core instruction (wgmma, sm_90a; WGMMA_WAIT waits for it): A
 * and B read from shared memory through descriptors (WGMMA_DESCRIPTOR, src/codegen/wgmma-operands.ts), B MN-major
 * (trans-b); C and D float32 registers.
 */
function wgmmaFunction(fn: string, u: UOp, tc: string): string {
  const { dims, dtypeIn } = u.argOf(Ops.WMMA);
  const [n, m, k] = dims;
  const ptx = WMMA_PTX[dtypeIn.name];
  if (ptx === undefined || ptx.type === 'tf32')
    throw new Error(`render CUDA: no wgmma for ${dtypeIn.name} inputs (${fn})`);
  const d = u.lanes;
  const registers = Array.from({ length: d }, (_, i) => `%${i}`).join(', ');
  const outputs = Array.from({ length: d }, (_, i) => `"+f"(c[${i}])`).join(', ');
  return `static __device__ inline ${tc} ${fn}(unsigned long long a, unsigned long long b, ${tc} c) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"
    "wgmma.mma_async.sync.aligned.m${m}n${n}k${k}.f32.${ptx.type}.${ptx.type} {${registers}}, %${d}, %${d + 1}, p, 1, 1, 0, 1;\\n}"
    : ${outputs}
    : "l"(a), "l"(b));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  return c;
}`;
}

/** A scalar over the lanes of vector type t: it minus a vector of zeros (plus zeros would turn -0 into +0). */
const spreadScalar = (x: string, t: string) => `(${x} - (${t}){})`;

/**
 * max(a, b) of vectors as the scalar MAX computes it (NaN in a gives NaN), one compare and a blend; integers
 * have no NaN (gcc warns of the self-comparison).
 */
const vectorMax = (
  name: string,
  t: string,
  mask: string,
  nan: boolean,
) => `${INLINE} ${t} ${name}(${t} a, ${t} b) {
  ${mask} k = (a > b)${nan ? ' | (a != a)' : ''};
  return (${t})((k & (${mask})a) | (~k & (${mask})b));
}`;

const FMA_TYPES: ReadonlySet<DType> = new Set([dtypes.float32, dtypes.float64]);

// x86's vector builtins by element and lanes (what immintrin.h's _mm*_fmadd_p* and _mm*_sqrt_p* call, without its
// 30,000 lines of parsing); elsewhere the op per lane, which gcc's -O2 makes one vector instruction again and -Og
// (a kernel's quick build) does not
type X86Builtins = Record<string, { guard: string; call: string }>;
const X86_FMA: X86Builtins = {
  float4: { guard: '__FMA__', call: '__builtin_ia32_vfmaddps(a, b, c)' },
  float8: { guard: '__FMA__', call: '__builtin_ia32_vfmaddps256(a, b, c)' },
  float16: { guard: '__AVX512F__', call: '__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)' },
  double2: { guard: '__FMA__', call: '__builtin_ia32_vfmaddpd(a, b, c)' },
  double4: { guard: '__FMA__', call: '__builtin_ia32_vfmaddpd256(a, b, c)' },
  double8: { guard: '__AVX512F__', call: '__builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4)' },
};
const X86_SQRT: X86Builtins = {
  float4: { guard: '__SSE__', call: '__builtin_ia32_sqrtps(a)' },
  float8: { guard: '__AVX__', call: '__builtin_ia32_sqrtps256(a)' },
  float16: { guard: '__AVX512F__', call: '__builtin_ia32_sqrtps512_mask(a, a, (unsigned short)-1, 4)' },
  double2: { guard: '__SSE2__', call: '__builtin_ia32_sqrtpd(a)' },
  double4: { guard: '__AVX__', call: '__builtin_ia32_sqrtpd256(a)' },
  double8: { guard: '__AVX512F__', call: '__builtin_ia32_sqrtpd512_mask(a, a, (unsigned char)-1, 4)' },
};
/** The vector function `name` of the float vector type t: x86's builtin where the target has one, else per lane. */
const x86Helper = (
  name: string,
  t: string,
  element: DType,
  lanes: number,
  builtins: X86Builtins,
  op: string,
) => {
  const params = op === 'fma' ? ['a', 'b', 'c'] : ['a'];
  const lane = (i: number) =>
    `__builtin_${op}${mathSuffix(element)}(${params.map((p) => `${p}[${i}]`).join(', ')})`;
  const lanewise = `(${t}){${Array.from({ length: lanes }, (_, i) => lane(i)).join(', ')}}`;
  const x86 = builtins[`${element === dtypes.float64 ? 'double' : 'float'}${lanes}`];
  const body =
    x86 === undefined
      ? `  return ${lanewise};`
      : `#if defined(${x86.guard})\n  return ${x86.call};\n#else\n  return ${lanewise};\n#endif`;
  return `${INLINE} ${t} ${name}(${params.map((p) => `${t} ${p}`).join(', ')}) {\n${body}\n}`;
};

// 2^x for floats as the decomposition builds it (src/codegen/decompose.ts): x clamped to where the result
// is neither infinite nor zero, x = n + r with |r| <= 1/2, a Taylor series of 2^r, times 2^n in two halves
// (so that a subnormal result rounds once); within 1 ulp, faster than libm's exp2f, and it vectorizes. The
// vector form is the same arithmetic with masks for the branches: lanes and scalars agree bit for bit.
const EXP2_SERIES = exp2Series(7).map((c) => floatLiteral(Math.fround(c), dtypes.float32));
const exp2Horner = (zero: string) =>
  EXP2_SERIES.slice(0, -1).reduceRight(
    (acc, c) => `${acc}\n  p = p * r + ${c};`,
    `p = ${zero}${EXP2_SERIES.at(-1)};`,
  );
const EXP2_HELPER = `
${INLINE} float tg_exp2f(float x) {
  float c = x != x ? 0.0f : x < -151.0f ? -151.0f : x > 129.0f ? 129.0f : x;
  float n = (c + 12582912.0f) - 12582912.0f, r = c - n, p;
  ${exp2Horner('')}
  int k = (int)n, h = k >> 1, b1 = (h + 127) << 23, b2 = (k - h + 127) << 23;
  float s1, s2; __builtin_memcpy(&s1, &b1, sizeof s1); __builtin_memcpy(&s2, &b2, sizeof s2);
  return x != x ? x : p * s1 * s2;
}`;
const vectorExp2 = (name: string, t: string, mask: string) => `${INLINE} ${t} ${name}(${t} x) {
  ${mask} nan = x != x, lo, hi;
  ${t} c = (${t})(~nan & (${mask})x);
  lo = c < -151.0f; c = (${t})((lo & (${mask})((${t}){} - 151.0f)) | (~lo & (${mask})c));
  hi = c > 129.0f; c = (${t})((hi & (${mask})((${t}){} + 129.0f)) | (~hi & (${mask})c));
  ${t} n = (c + 12582912.0f) - 12582912.0f, r = c - n, p;
  ${exp2Horner(`(${t}){} + `)}
  ${mask} k = __builtin_convertvector(n, ${mask}), h = k >> 1;
  ${t} s1 = (${t})((h + 127) << 23), s2 = (${t})((k - h + 127) << 23);
  return (${t})((nan & (${mask})x) | (~nan & (${mask})(p * s1 * s2)));
}`;

// float16 is _Float16 where the compiler has it (gcc 12+, clang 15+ on x86), else clang's (or ARM's) __fp16,
// which is only stored: its arithmetic runs in float and rounds when assigned, as _Float16's does without native
// halves; a compiler with neither compiles the other dtypes (the CPU device refuses float16 there)
const HALF = `
#ifdef __FLT16_MAX__
typedef _Float16 tg_half;
#elif defined(__clang__) || defined(__ARM_FP16_FORMAT_IEEE)
typedef __fp16 tg_half;
#endif`;

// What kernels use of math.h, declared: the compiler knows these as built-ins, as it does through math.h, whose
// 1,100 lines cost each translation unit about 6 ms of gcc's CPU (a unit holds many kernels;
// docs/compiling.md)
const LIBM = `#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
${['sqrt', 'trunc', 'log2', 'sin'].map((f) => `float ${f}f(float); double ${f}(double);`).join('\n')}
float powf(float, float); double pow(double, double); double exp2(double);`;

const PRELUDE = `${LIBM}${HALF}${signedHelpers(['int', 'int', 'unsigned int'])}${signedHelpers([
  'll',
  'long long',
  'unsigned long long',
])}${unsignedHelpers(['uint', 'unsigned int'])}${unsignedHelpers(['ull', 'unsigned long long'])}${BF16_HELPERS}${EXP2_HELPER}`;

// A parallel loop's team: a thread per iteration, at most OpenMP's nthreads-var, which the CPU device lowers
// while compilers take cores (src/runtime/cpu.ts teamWhile)
const OPENMP_TEAM = `
#ifdef _OPENMP
int omp_get_max_threads(void);
${INLINE} int tg_team(int n) { int m = omp_get_max_threads(); return n < m ? n : m; }
#endif`;

const C_DIALECT: Dialect = {
  name: 'C',
  declare: (name, args) => `void ${name}(${args.join(', ')})`,
  restrict: 'restrict',
  bool: '_Bool',
  half: (literal) => literal,
  bitcast: (x, from, to) =>
    `__extension__({ ${from} s_ = ${x}; ${to} t_; __builtin_memcpy(&t_, &s_, sizeof t_); t_; })`,
  prelude: `${PRELUDE}${OPENMP_TEAM}`,
  vectors: GCC_VECTORS,
  fma: '__builtin_fma',
  alignment: HOST_BUFFER_ALIGN,
  // a NaN test the branch predictor always gets right, then a select gcc makes a maxss or a blend
  floatMax: (a, b) => `((${a}!=${a})?${a}:((${a}>${b})?${a}:${b}))`,
};

/** The index type: int where every index fits. */
const indexTypeOf = (linear: UOp) => (maxIndex(linear) < 2 ** 31 ? 'int' : 'long long');

/**
 * A kernel that moves this many elements or fewer (elementsMoved) keeps its loops rolled (`#pragma GCC unroll 1`):
 * -fpeel-loops (src/runtime/cc.ts) unrolls short loops completely, which pays in a conv's 3x3 windows but not in
 * a kernel of a microsecond, where it only costs the compiler's CPU (docs/compiling.md has figures).
 */
export const ROLLED_ELEMENTS = 1 << 16;

/**
 * The elements a kernel's loads and stores move in all, its accumulators' included (Infinity where a loop's bound
 * is a variable): each one's lanes times the iterations of the loops around it.
 */
export function elementsMoved(linear: UOp): number {
  const iterations = [1];
  let n = 0;
  for (const u of linear.src) {
    if (u.op === Ops.RANGE) {
      const bound = u.src[0]!.op === Ops.CONST ? Number(u.src[0]!.constValue) : Infinity;
      iterations.push(iterations.at(-1)! * bound);
    } else if (u.op === Ops.END) iterations.length -= u.src.length - 1;
    else if (u.op === Ops.LOAD || u.op === Ops.STORE)
      n += (u.op === Ops.LOAD ? u : u.src[1]!).lanes * iterations.at(-1)!;
  }
  return n;
}

/** The language with each serial loop kept rolled; a parallel loop takes no pragma between it and OpenMP's. */
const rolled = (lang: Language): Language => ({
  ...lang,
  loopOpen: (name, bound, parallel) =>
    `${parallel ? '' : '#pragma GCC unroll 1\n'}${lang.loopOpen(name, bound, parallel)}`,
});

/** A kernel's C source. */
export function renderC(name: string, linear: UOp): string {
  const lang = cLanguage(indexTypeOf(linear));
  return render(elementsMoved(linear) <= ROLLED_ELEMENTS ? rolled(lang) : lang, name, linear);
}

// CUDA C: the same C, its helpers device functions, float16 as CUDA's half. NVRTC has CUDA's math functions
// built in but neither math.h, whose two constants are defined here, nor __builtin_memcpy, which bit casts use
// (a copy of a register's bytes, which compiles to a move).
/** A kernel's code (its prelude aside) that names the half type or calls a half intrinsic. */
const HALF_USE = /\btg_half\b|\b__h[a-z0-9_]*\(/;
// cuda_fp16.h costs NVRTC about 15 ms a kernel on the H100's host (a third of a small kernel's compile), so only
// kernels of float16 values include it
const CUDA_HALF_PRELUDE = `#include <cuda_fp16.h>
typedef half tg_half;
`;
const CUDA_PRELUDE = `#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
static __device__ inline void tg_memcpy(void* d, const void* s, unsigned long long n) {
  for (unsigned long long i = 0; i < n; i++) ((char*)d)[i] = ((const char*)s)[i];
}
#define __builtin_memcpy tg_memcpy
template <class T, class F> static __device__ inline T tg_bitcast(F f) { T t; tg_memcpy(&t, &f, sizeof t); return t; }
${PRELUDE.replace(LIBM, '')
  .replace(HALF, '')
  .replaceAll(INLINE, 'static __device__ inline')}${CUDA_BFLOAT}${CUDA_VECTOR_PRELUDE}`;
const AXES = 'xyz';

/** The sizes of a kernel's grid (gidx) and of its workgroups (lidx), x y z: 1 where a dimension is unused. */
function launchDims(name: string, linear: UOp): { grid: number[]; block: number[] } {
  const grid = [1, 1, 1];
  const block = [1, 1, 1];
  for (const u of linear.src) {
    if (u.op !== Ops.SPECIAL) continue;
    const special = u.argOf(Ops.SPECIAL);
    if (u.src[0]!.op !== Ops.CONST)
      throw new Error(
        `render CUDA: kernel ${name}: ${special}'s size depends on a variable, which is not supported yet`,
      );
    (special.startsWith('g') ? grid : block)[Number(special.at(-1))] = Number(u.src[0]!.constValue);
  }
  return { grid, block };
}

/** Shared memory a kernel may declare statically; more is dynamic, which the launch asks for. */
const STATIC_SHARED = 48 * 1024;

/**
 * Where each LOCAL buffer starts in dynamic shared memory (`align` bytes aligned) and the bytes in all, where they
 * take more than a static declaration may; else undefined.
 */
function dynamicShared(
  linear: UOp,
  align: number,
): { offsets: Map<string, number>; bytes: number } | undefined {
  const offsets = new Map<string, number>();
  let bytes = 0;
  for (const u of linear.src) {
    if (u.op !== Ops.PARAM || u.argOf(Ops.PARAM).addrspace !== AddrSpace.LOCAL) continue;
    offsets.set(`temp${u.argOf(Ops.PARAM).slot as number}`, bytes);
    bytes += Math.ceil((Number(u.src[0]!.sizes[0]) * u.argOf(Ops.PARAM).dtype.itemsize) / align) * align;
  }
  return bytes > STATIC_SHARED ? { offsets, bytes } : undefined;
}

/**
 * `__launch_bounds__`'s arguments: the block's threads, and for 256-thread kernels without tensor cores two
 * blocks a multiprocessor, so that ptxas keeps them within 128 registers a thread (65536 an SM): float32
 * register blocks (src/codegen/opt/register-blocks.ts) took 130 and ran one block an SM. On the H100, 4096^3
 * float32 39.0 -> 42.0 TFLOP/s; beautiful_mnist's step kernels 8.71 -> 8.53 ms (bench/gemm.ts, steps_gpu.ts).
 * Tensor-core kernels keep their registers (230 a thread for 64 x 64 warp tiles).
 */
function launchBounds(threads: number, linear: UOp): string {
  return threads === 256 && !linear.src.some((u) => u.op === Ops.WMMA) ? `${threads}, 2` : `${threads}`;
}

/**
 * A kernel's CUDA C source: a __global__ function launched on the grid its SPECIALs name, which its first line
 * states for the CUDA device with the buffers it writes and the dynamic shared memory it needs, where its LOCAL
 * buffers take more than 48 KiB (`// launch grid X Y Z block X Y Z writes 0 shared 98304`).
 */
export function renderCUDA(name: string, linear: UOp): string {
  const { grid, block } = launchDims(name, linear);
  // tiles a warpgroup tensor core reads: from 1024-byte boundaries (where the 128-byte swizzle repeats), and
  // written by ordinary stores or cp.async, which the tensor cores' async proxy sees after a proxy fence
  const tiles = linear.src.some((u) => u.op === Ops.LOAD && u.argOf(Ops.LOAD)?.tile !== undefined);
  const align = tiles ? 1024 : 16;
  const shared = dynamicShared(linear, align);
  const threads = block[0]! * block[1]! * block[2]!;
  let writes: string[] = [];
  const dialect: Dialect = {
    name: 'CUDA',
    declare: (n, args) => {
      writes = args.flatMap((a) => (a.startsWith('const ') ? [] : (/\bdata(\d+)$/.exec(a)?.slice(1) ?? [])));
      return `extern "C" __global__ void __launch_bounds__(${launchBounds(threads, linear)}) ${n}(${args.join(', ')})`;
    },
    restrict: '__restrict__',
    bool: 'bool',
    half: (literal) => `((tg_half)${literal})`,
    halfMul: '__hmul_rn',
    bitcast: (x, from, to) => `tg_bitcast<${to}, ${from}>(${x})`,
    prelude: CUDA_PRELUDE,
    halfPrelude: CUDA_HALF_PRELUDE,
    vectors: CUDA_VECTORS,
    fma: 'fma',
    bfloat16: 'tg_bfloat',
    // cudaMalloc's allocations are aligned to 256 bytes; 16 is the widest load (float4)
    alignment: 16,
    gpu: {
      special: (n) => `${n.startsWith('g') ? 'blockIdx' : 'threadIdx'}.${AXES[Number(n.at(-1))]}`,
      barrier: tiles
        ? `${WGMMA_WAIT} asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); __syncthreads();`
        : '__syncthreads();',
      ...(tiles ? { afterLoop: WGMMA_WAIT } : {}),
      local:
        shared === undefined
          ? (n: string, type: string, size: number) => `__shared__ __align__(${align}) ${type} ${n}[${size}];`
          : (n: string, type: string) =>
              `${shared.offsets.get(n) === 0 ? `extern __shared__ __align__(${align}) unsigned char tg_shared[]; ` : ''}${type}* ${n} = (${type}*)(tg_shared + ${shared.offsets.get(n)});`,
      matrixLoad: (dtype, lanes, trans, from) =>
        `tg_ldmatrix<${dtype === dtypes.bfloat16 ? 'tg_bfloat' : 'tg_half'}, ${lanes / 2}, ${trans}>(${from})`,
      // .cg (through L2 only) takes 16 bytes alone
      asyncCopy: (to, from, bytes) =>
        `asm volatile("cp.async.${bytes === 16 ? 'cg' : 'ca'}.shared.global [%0], [%1], ${bytes};" :: "r"((unsigned)__cvta_generic_to_shared(${to})), "l"(${from}));`,
      asyncWait: (pending) =>
        `asm volatile("cp.async.commit_group;"); asm volatile("cp.async.wait_group ${pending};" ::: "memory");`,
    },
  };
  const source = render(cLanguage(indexTypeOf(linear), dialect), name, linear);
  const dynamic = shared === undefined ? '' : ` shared ${shared.bytes}`;
  return `// launch grid ${grid.join(' ')} block ${block.join(' ')} writes ${writes.join(' ')}${dynamic}\n${source}`;
}
