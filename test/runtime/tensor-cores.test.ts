// The tensor cores' element layouts against the formulas of NVIDIA's PTX ISA ("Matrix Fragments for mma.m16n8k16"
// and "mma.m16n8k8", groupID = lane >> 2, threadID_in_group = lane % 4), written out here independently of the
// bit-field tables, and SIMT's WMMA on a hand-written program against a float64 matrix product.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { bufferData, deviceBuffer } from '../../src/engine/buffers.ts';
import { Device } from '../../src/runtime/device.ts';
import type { SimtInstruction } from '../../src/runtime/simt.ts';
import {
  elementsOf,
  NVIDIA_TENSOR_CORES,
  type OperandLayout,
  positionOf,
  roundTF32,
} from '../../src/runtime/tensor-cores.ts';
import { Tensor } from '../../src/tensor/index.ts';

type Formula = (g: number, t: number, i: number) => [number, number];
const PTX: Record<string, { a: Formula; b: Formula; c: Formula }> = {
  k16: {
    a: (g, t, i) => [i < 2 || (i >= 4 && i < 6) ? g : g + 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)],
    b: (g, t, i) => [t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g],
    c: (g, t, i) => [i < 2 ? g : g + 8, t * 2 + (i & 1)],
  },
  tf32: {
    a: (g, t, i) => [i === 0 || i === 2 ? g : g + 8, i < 2 ? t : t + 4],
    b: (g, t, i) => [i === 0 ? t : t + 4, g],
    c: (g, t, i) => [i < 2 ? g : g + 8, t * 2 + (i & 1)],
  },
};

const positions = (layout: OperandLayout) =>
  Array.from({ length: 32 }, (_, lane) =>
    Array.from({ length: elementsOf(layout) }, (_, i) => positionOf(layout, lane, i)),
  );
const formula = (f: Formula, elements: number) =>
  Array.from({ length: 32 }, (_, lane) =>
    Array.from({ length: elements }, (_, i) => f(lane >> 2, lane % 4, i)),
  );

describe('tensor core layouts', () => {
  for (const tc of NVIDIA_TENSOR_CORES) {
    it(`${tc.name}: A, B and C elements sit where the PTX ISA says, each element of a matrix once`, () => {
      const ptx = PTX[tc.tf32 ? 'tf32' : 'k16']!;
      for (const [layout, f, rows, cols] of [
        [tc.a, ptx.a, tc.m, tc.k],
        [tc.b, ptx.b, tc.k, tc.n],
        [tc.c, ptx.c, tc.m, tc.n],
      ] as const) {
        expect(positions(layout)).toEqual(formula(f, elementsOf(layout)));
        const seen = new Set(
          positions(layout)
            .flat()
            .map(([r, c]) => r * cols + c),
        );
        expect(seen.size).toBe(rows * cols);
      }
    });
  }

  it('rounds float32 to tf32 to nearest, ties away from zero', () => {
    expect(roundTF32(1 + 2 ** -11)).toBe(1 + 2 ** -10); // a tie rounds away
    expect(roundTF32(1 + 2 ** -12)).toBe(1);
    expect(roundTF32(-(1 + 3 * 2 ** -11))).toBe(-(1 + 2 * 2 ** -10));
    expect(roundTF32(Number.NaN)).toBeNaN();
  });
});

describe('SIMT WMMA', () => {
  it("multiplies a warp's 16x16 A by 16x8 B into C as m16n8k16 float16 gathers them from the lanes", () => {
    const tc = NVIDIA_TENSOR_CORES[0]!;
    const A = Array.from({ length: 256 }, (_, i) => ((i * 7) % 13) - 6);
    const B = Array.from({ length: 128 }, (_, i) => ((i * 5) % 11) - 5);
    // each lane loads its elements of A (8), B (4), multiplies, and stores its 4 of D at lane * 4 + i
    const ins: SimtInstruction[] = [
      ['CONST', 'index', [], { value: 32 }], // 0
      ['SPECIAL', 'index', [0], { name: 'lidx0' }], // 1
      ['PARAM', 'float32', [], { slot: 0, dtype: 'float32', addrspace: 'GLOBAL', size: 128 }], // 2 D by lane
      ['PARAM', 'float16', [], { slot: 1, dtype: 'float16', addrspace: 'GLOBAL', size: 256 }], // 3 A by lane
      ['PARAM', 'float16', [], { slot: 2, dtype: 'float16', addrspace: 'GLOBAL', size: 128 }], // 4 B by lane
    ] as SimtInstruction[];
    // A and B arrive per lane: element i of lane l at (l * elements + i), laid out by the host below
    const gather = (buf: number, count: number): number => {
      const start = ins.length;
      ins.push(['CONST', 'index', [], { value: count }]);
      ins.push(['MUL', 'index', [1, start]]);
      const loads: number[] = [];
      for (let i = 0; i < count; i++) {
        ins.push(['CONST', 'index', [], { value: i }]);
        ins.push(['ADD', 'index', [start + 1, ins.length - 1]]);
        ins.push(['INDEX', 'float16', [buf, ins.length - 1]]);
        ins.push(['LOAD', 'float16', [ins.length - 1]]);
        loads.push(ins.length - 1);
      }
      ins.push(['STACK', 'float16', loads, { lanes: count }]);
      return ins.length - 1;
    };
    const a = gather(3, 8);
    const b = gather(4, 4);
    const zero = ins.length;
    ins.push(['CONST', 'float32', [], { value: 0 }]);
    ins.push(['STACK', 'float32', [zero, zero, zero, zero], { lanes: 4 }]);
    ins.push(['WMMA', 'float32', [a, b, zero + 1], { tensorCore: tc.name, lanes: 4 }]);
    const d = ins.length - 1;
    ins.push(['CONST', 'index', [], { value: 4 }]);
    ins.push(['MUL', 'index', [1, ins.length - 1]]);
    ins.push(['VCONST', 'index', [], { values: [0, 1, 2, 3] }]);
    ins.push(['ADD', 'index', [ins.length - 2, ins.length - 1], { lanes: 4 }]);
    ins.push(['INDEX', 'float32', [2, ins.length - 1]]);
    ins.push(['STORE', 'void', [ins.length - 1, d]]);
    const perLane = (m: number[], layout: OperandLayout, cols: number) =>
      Array.from({ length: 32 }, (_, l) =>
        Array.from({ length: elementsOf(layout) }, (_, i) => {
          const [r, c] = positionOf(layout, l, i);
          return m[r * cols + c]!;
        }),
      ).flat();
    const program = Device.get('SIMT').compile('k', JSON.stringify({ name: 'k', instructions: ins }));
    const bufs = [
      Tensor.zeros([128], { device: 'SIMT' }).realize(),
      new Tensor(perLane(A, tc.a, 16), { device: 'SIMT' }).cast(dtypes.float16).realize(),
      new Tensor(perLane(B, tc.b, 8), { device: 'SIMT' }).cast(dtypes.float16).realize(),
    ].map((t) => t.uop);
    program.run(bufs.map(deviceBuffer));
    const got = Array.from(bufferData(bufs[0]!) as Float32Array);
    const want = Array.from({ length: 32 }, (_, l) =>
      Array.from({ length: 4 }, (_, i) => {
        const [r, c] = positionOf(tc.c, l, i);
        return Array.from({ length: 16 }, (_, k) => A[r * 16 + k]! * B[k * 8 + c]!).reduce((x, y) => x + y);
      }),
    ).flat();
    expect(got).toEqual(want);
  });
});
