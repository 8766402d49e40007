// Matrix loads: WMMA fragments read from LOCAL tiles in ldmatrix's layout become one warp-wide load (x4 for A,
// x2 transposed for B of a row-major tile, x4 for two of them); others stay scalar. SIMT runs the collective load (bits checked
// against the unstaged kernel in test/codegen/stage.test.ts); the CUDA source compiles with nvcc.
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import type { Opt } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { hasNvcc, nvccCompile } from '../renderer/nvcc.ts';

const target = targetOf(Device.get('SIMT'));
const kernel = scheduleOf([
  Tensor.empty([64, 64], { device: 'SIMT', dtype: dtypes.bfloat16 }).matmul(
    Tensor.empty([64, 64], { device: 'SIMT', dtype: dtypes.bfloat16 }),
  ),
]).kernels.at(-1)!;
// after TC the axes are M tiles, N tiles, K tiles, the warp
const opts = (depth?: number): Opt[] => [
  { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 },
  { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.LOCAL },
  { op: 'STAGE', axis: 3, ...(depth === undefined ? {} : { depth }) },
];
const matrixLoads = (linear: UOp) =>
  linear.src.flatMap((u) => {
    const m = u.op === Ops.LOAD ? u.argOf(Ops.LOAD)?.matrix : undefined;
    return m === undefined ? [] : [`${u.lanes}${m.trans ? 't' : ''}`];
  });

describe('matrix loads', () => {
  it("read A's fragments from its tile as x4; B's only from a row-major tile (async copies), transposed", () => {
    expect(matrixLoads(lowerKernel(kernel.ast, { target, opts: opts() }).linear)).toEqual(['8']);
    expect(matrixLoads(lowerKernel(kernel.ast, { target, opts: opts(1) }).linear).sort()).toEqual([
      '4t',
      '8',
    ]);
  });

  it('read two B fragments of neighbouring 8 columns as one x4, transposed, each taking half its lanes', () => {
    // N upcast by 2: each warp's two WMMAs a K step read B's columns n and n + 8
    const paired: Opt[] = [
      { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.LOCAL },
      { op: 'STAGE', axis: 4, depth: 1 },
    ];
    const { linear } = lowerKernel(kernel.ast, { target, opts: paired });
    expect(matrixLoads(linear).sort()).toEqual(['8', '8t']);
  });

  it('leave fragments read from global memory, or on a target without them, as scalar loads', () => {
    const unstaged = opts().slice(0, -1);
    expect(matrixLoads(lowerKernel(kernel.ast, { target, opts: unstaged }).linear)).toEqual([]);
    const without = { ...target, grid: { ...target.grid!, matrixLoads: false } };
    expect(matrixLoads(lowerKernel(kernel.ast, { target: without, opts: opts(1) }).linear)).toEqual([]);
  });

  it.skipIf(!hasNvcc)('compile with nvcc for sm_90a (ldmatrix, cp.async)', () => {
    const source = renderCUDA('ldsm', lowerKernel(kernel.ast, { target, opts: opts(2) }).linear);
    expect(source).toMatch(/tg_ldmatrix<tg_bfloat, 2, true>/);
    expect(source).toMatch(/cp\.async\.c[ag]\.shared\.global/);
    nvccCompile([source]);
  });
});
