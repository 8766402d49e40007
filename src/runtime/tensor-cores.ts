// Tensor cores: warp-level matrix multiply-accumulate instructions (D = A * B + C) as a device declares them,
// with the element layout of each operand across the 32 lanes of a warp, as NVIDIA's PTX ISA documents for
// mma.sync.aligned.m16n8k16 (f16, bf16) and m16n8k8 (tf32), and Hopper's warpgroup wgmma.m64nNk16. Codegen
// builds WMMA ops from them, the SIMT emulator runs them and the CUDA renderer writes them as mma.sync or wgmma.
import { type DType, dtypes } from '../dtype.ts';

/**
 * Where a lane's elements of one operand sit in its matrix. Positions are bit fields: bit b of the lane id
 * adds `lane[b]` to (row, column) and bit e of the element's number adds `element[e]`; every layout in the
 * PTX ISA is of this form (groupID = lane >> 2, threadID_in_group = lane & 3).
 */
export interface OperandLayout {
  /** [row, column] added by each of the 5 bits of the lane id, lowest first. */
  lane: readonly (readonly [number, number])[];
  /** [row, column] added by each bit of the element's number within the lane, lowest first. */
  element: readonly (readonly [number, number])[];
}

export interface TensorCore {
  /** Names the instruction: `WMMA_16_8_16_half_float`. */
  name: string;
  /** D (m x n) = A (m x k) * B (k x n) + C. */
  m: number;
  n: number;
  k: number;
  dtypeIn: DType;
  dtypeOut: DType;
  /** Threads that run one instruction together: a warp. */
  threads: number;
  /** tf32: the float32 inputs are read with 10 bits of mantissa (rounded to nearest, ties away from zero). */
  tf32?: true;
  /**
   * A and B are read by the tensor core from LOCAL tiles of rows of 64 elements in the 128-byte swizzle (wgmma's
   * matrix descriptors): A row-major (K-major), B row-major too (MN-major), B's columns past 64 in further blocks
   * of 64 columns (the descriptor's leading byte offset apart). Their layouts below then only say which elements
   * each thread stands for (src/codegen/wgmma-operands.ts).
   */
  sharedOperands?: true;
  a: OperandLayout;
  b: OperandLayout;
  /** C and D. */
  c: OperandLayout;
}

/** Elements of an operand each lane holds. */
export const elementsOf = (layout: OperandLayout) => 2 ** layout.element.length;

/** The (row, column) of element i of lane `lane` in an operand. */
export function positionOf(layout: OperandLayout, lane: number, i: number): [number, number] {
  let [row, col] = [0, 0];
  const add = (bits: readonly (readonly [number, number])[], v: number) =>
    bits.forEach(([r, c], b) => {
      if ((v >> b) & 1) [row, col] = [row + r, col + c];
    });
  add(layout.lane, lane);
  add(layout.element, i);
  return [row, col];
}

// groupID (lane bits 2-4) picks the row of C and A, the column of B; threadID_in_group (bits 0-1) the pair
const GROUP_ROWS = [
  [1, 0],
  [2, 0],
  [4, 0],
] as const;
const PAIR_COLUMNS = [
  [0, 2],
  [0, 4],
] as const;
/** C and D of m16n8: row groupID (+8 for c2, c3), column threadID_in_group * 2 (+1 for c1, c3). */
const C_16x8: OperandLayout = {
  lane: [...PAIR_COLUMNS, ...GROUP_ROWS],
  element: [
    [0, 1],
    [8, 0],
  ],
};
/** B of k16: row threadID_in_group * 2 (+1 for b1, b3; +8 for b2, b3), column groupID. */
const B_K16: OperandLayout = {
  lane: [
    [2, 0],
    [4, 0],
    [0, 1],
    [0, 2],
    [0, 4],
  ],
  element: [
    [1, 0],
    [8, 0],
  ],
};
/** A of m16k16: row groupID (+8 for a2, a3, a6, a7), column threadID_in_group * 2 (+1 odd; +8 for a4..a7). */
const A_16x16: OperandLayout = {
  lane: C_16x8.lane,
  element: [
    [0, 1],
    [8, 0],
    [0, 8],
  ],
};

const mma16816 = (dtypeIn: DType): TensorCore => ({
  name: `WMMA_16_8_16_${dtypeIn.name}_float32`,
  m: 16,
  n: 8,
  k: 16,
  dtypeIn,
  dtypeOut: dtypes.float32,
  threads: 32,
  a: A_16x16,
  b: B_K16,
  c: C_16x8,
});

/** m16n8k8 tf32: A row groupID (+8 for a1, a3), column threadID_in_group (+4 for a2, a3); B row threadID_in_group (+4 for b1), column groupID. */
const MMA_1688_TF32: TensorCore = {
  name: 'WMMA_16_8_8_tf32_float32',
  m: 16,
  n: 8,
  k: 8,
  dtypeIn: dtypes.float32,
  dtypeOut: dtypes.float32,
  threads: 32,
  tf32: true,
  a: {
    lane: [[0, 1], [0, 2], ...GROUP_ROWS],
    element: [
      [8, 0],
      [0, 4],
    ],
  },
  b: {
    lane: [
      [1, 0],
      [2, 0],
      [0, 1],
      [0, 2],
      [0, 4],
    ],
    element: [[4, 0]],
  },
  c: C_16x8,
};

/** [row, column] bits adding 64, 128, .. columns: a warpgroup core n columns wide has log2(n / 64) of them. */
const wideColumns = (n: number) => Array.from({ length: Math.log2(n / 64) }, (_, i) => [0, 64 << i] as const);

/**
 * wgmma.m64nNk16 (Hopper, sm_90a) for N = 64, 128, 256: a warpgroup of 4 warps, A and B from shared memory. D (the
 * PTX ISA's wgmma D fragment): warp w holds rows 16w.. 16w + 15 as mma.sync's m16n8 C, repeated for the N / 8
 * column blocks of 8 (registers 4j.. 4j + 3 in block j). A and B's layouts are the register form's (A as
 * mma.sync's per warp; B a warp's 8 columns per block of 16 rows, as mma.sync's B, repeated every 64 columns).
 */
const wgmma = (n: number, dtypeIn: DType): TensorCore => ({
  name: `WGMMA_64_${n}_16_${dtypeIn.name}_float32`,
  m: 64,
  n,
  k: 16,
  dtypeIn,
  dtypeOut: dtypes.float32,
  threads: 128,
  sharedOperands: true,
  a: { lane: [...A_16x16.lane, [16, 0], [32, 0]], element: A_16x16.element },
  b: { lane: [...B_K16.lane, [0, 8], [0, 16]], element: [...B_K16.element, [0, 32], ...wideColumns(n)] },
  c: {
    lane: [...C_16x8.lane, [16, 0], [32, 0]],
    element: [...C_16x8.element, [0, 8], [0, 16], [0, 32], ...wideColumns(n)],
  },
});

/**
 * Hopper's (sm_90a) warpgroup tensor cores: f16 and bf16 in, f32 accumulate, 64, 128 and 256 columns wide (the
 * narrowest first: what a search for any warpgroup core of a dtype finds).
 */
export const HOPPER_TENSOR_CORES: readonly TensorCore[] = [64, 128, 256].flatMap((n) => [
  wgmma(n, dtypes.float16),
  wgmma(n, dtypes.bfloat16),
]);

/** NVIDIA's tensor cores from sm_80 (A100, H100): f16 and bf16 in, f32 accumulate; tf32 (float32 rounded to 10 bits of mantissa). */
export const NVIDIA_TENSOR_CORES: readonly TensorCore[] = [
  mma16816(dtypes.float16),
  mma16816(dtypes.bfloat16),
  MMA_1688_TF32,
];

/** x rounded to tf32 as cvt.rna.tf32.f32 does: 10 bits of mantissa, to nearest, ties away from zero. */
export function roundTF32(x: number): number {
  if (!Number.isFinite(x)) return x;
  const bits = new Float32Array([x]);
  const u = new Uint32Array(bits.buffer);
  u[0] = ((u[0]! + 0x1000) & 0xffffe000) >>> 0;
  return bits[0]!;
}

/** The tensor core of that name, of any device's. */
export const tensorCoreNamed = (name: string): TensorCore | undefined =>
  [...NVIDIA_TENSOR_CORES, ...HOPPER_TENSOR_CORES].find((tc) => tc.name === name);
