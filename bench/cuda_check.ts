// Writes the CUDA C of GPU-style kernels (the SIMT target's) with their inputs and expected outputs, for
// bench/cuda_check.py to compile with nvcc and run on a GPU through the driver API: the generated CUDA checked on
// hardware before the CUDA device exists. Usage: npx tsx bench/cuda_check.ts OUTDIR
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lowerKernel } from '../src/codegen/index.ts';
import type { Opt } from '../src/codegen/opt/opts.ts';
import { dtypes } from '../src/dtype.ts';
import { bufferData } from '../src/engine/buffers.ts';
import { targetOf } from '../src/engine/compile.ts';
import { bake } from '../src/engine/lift.ts';
import { Context } from '../src/helpers.ts';
import { renderCUDA } from '../src/renderer/c.ts';
import { Device } from '../src/runtime/device.ts';
import { planOf, toFunction } from '../src/schedule/index.ts';
import { Tensor } from '../src/tensor/index.ts';
import { AxisType, Ops } from '../src/uop/ops.ts';

const out = process.argv[2] ?? 'cuda-check';
mkdirSync(out, { recursive: true });
// the SIMT device's target: workgroups, float4-style vectors, NVIDIA's tensor cores
const target = targetOf(Device.get('SIMT'));

/** Seeded inputs on a device, realized (so their data is a buffer the plan reads). */
const input = (shape: number[], d: string, dtype = dtypes.float32, scale = 4) => {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + shape.length) * scale);
  return new Tensor(v, { device: d }).cast(dtype).reshape(shape).realize();
};

const PROGRAMS: Record<string, (d: string) => Tensor> = {
  elementwise: (d) =>
    input([6, 40], d)
      .mul(0.5)
      .exp2()
      .sub(input([40], d))
      .abs()
      .sqrt()
      .sin(),
  matmul: (d) =>
    input([64, 48], d)
      .matmul(input([48, 32], d))
      .relu(),
  'big sum': (d) => input([65536], d).sum(),
  softmax: (d) => input([16, 1000], d).softmax(1),
  conv: (d) => input([2, 3, 12, 12], d).conv2d(input([8, 3, 3, 3], d), undefined, { padding: 1 }),
  'max pool': (d) => input([2, 4, 16, 16], d).maxPool2d(),
  layernorm: (d) => input([32, 256], d).layernorm(),
  float16: (d) => input([8, 64], d, dtypes.float16).mul(0.25).add(1).sum(1),
  'int32 floor div': (d) => input([300], d, dtypes.int32, 100).div(7, { roundingMode: 'floor' }).mul(3),
  argmax: (d) => input([12, 300], d).argmax(1),
  gather: (d) => input([5, 6], d).gather(1, input([5, 4], d, dtypes.int32, 3).abs()),
  'vector elementwise': (d) =>
    input([64, 256], d)
      .mul(input([256], d))
      .add(input([64, 1], d))
      .maximum(0),
  'matmul f16 tc': (d) =>
    input([128, 96], d, dtypes.float16, 1).matmul(input([96, 64], d, dtypes.float16, 1)),
  'matmul bf16 tc': (d) =>
    input([64, 128], d, dtypes.bfloat16, 1).matmul(input([128, 40], d, dtypes.bfloat16, 1)),
  'matmul tf32 tc': (d) =>
    input([64, 64], d, dtypes.float32, 1).matmul(input([64, 32], d, dtypes.float32, 1)),
  'matmul f16 tc tiled': (d) =>
    input([64, 64], d, dtypes.float16, 1).matmul(input([64, 32], d, dtypes.float16, 1)),
  'conv f16 tc': (d) =>
    input([2, 16, 8, 16], d, dtypes.float16, 1).conv2d(
      input([16, 16, 3, 3], d, dtypes.float16, 1),
      undefined,
      {
        padding: 1,
      },
    ),
};

/** Settings a program's kernels are lowered under, and its tolerance where the tensor core's precision sets it. */
const SETTINGS: Record<
  string,
  { context?: Record<string, number>; tolerance?: number; opcode?: string; opts?: Opt[] }
> = {
  'vector elementwise': { opcode: 'tg_float4' },
  'matmul f16 tc': { opcode: 'mma.sync' },
  'matmul bf16 tc': { opcode: 'mma.sync', tolerance: 1e-2 },
  // float32 inputs rounded to tf32 (10 bits of mantissa): relative errors near 2^-11
  'matmul tf32 tc': { context: { ALLOW_TF32: 1 }, opcode: 'mma.sync', tolerance: 5e-3 },
  'conv f16 tc': { opcode: 'mma.sync' },
  // as BEAM finds them: two warps a group each way, two output tiles a lane each way, two K tiles a step
  'matmul f16 tc tiled': {
    opcode: 'mma.sync',
    opts: [
      { op: 'TC', axis: 2, tc: 0, opt: 0, mode: 1 },
      { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 0, factor: 2, target: AxisType.LOCAL },
      { op: 'SPLIT', axis: 1, factor: 2, target: AxisType.UPCAST },
      { op: 'SPLIT', axis: 5, factor: 2, target: AxisType.UNROLL },
      { op: 'SPLIT', axis: 4, factor: 2, target: AxisType.UPCAST },
    ],
  },
};

const manifest: unknown[] = [];
const b64 = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
for (const [program, f] of Object.entries(PROGRAMS)) {
  const want = f('JS').realize();
  const t = f('SIMT');
  const { body, inputs, values } = toFunction([t.uop], () => {
    throw new Error('no function calls here');
  });
  const simt = Device.get('SIMT');
  const plan = planOf(body, inputs.length, 'SIMT', { gpu: true, maxBuffers: simt.maxBuffers() });
  const buffers = [
    ...inputs.map((b) => ({
      dtype: b.dtype.name,
      size: Number(b.shape!.reduce((x, y) => Number(x) * Number(y), 1)),
      data: b64(bufferData(b)),
    })),
    ...plan.created.map((c) => ({ dtype: c.dtype.name, size: c.shape.reduce((x, y) => x * y, 1) })),
  ];
  const settings = SETTINGS[program] ?? {};
  const sources: string[] = [];
  const kernels = plan.steps.map((step, i) => {
    const { name, linear } = Context.with(settings.context ?? {}, () =>
      lowerKernel(bake(step.ast, values), { target, opts: settings.opts }),
    );
    const unique = `${name}_${program.replace(/\W+/g, '_')}_${i}`;
    const source = renderCUDA(unique, linear);
    sources.push(source);
    writeFileSync(join(out, `${unique}.cu`), source);
    const dims = (prefix: string) =>
      [0, 1, 2].map((d) => {
        const s = linear.src.find((u) => u.op === Ops.SPECIAL && u.arg === `${prefix}${d}`);
        return s === undefined ? 1 : Number(s.src[0]!.constValue);
      });
    return { name: unique, refs: step.refs, grid: dims('gidx'), block: dims('lidx') };
  });
  // the program is here for what it exercises: fail early where the kernels lost it
  if (settings.opcode !== undefined && !sources.some((x) => x.includes(settings.opcode!)))
    throw new Error(`${program}: no kernel uses ${settings.opcode}`);
  manifest.push({
    program,
    tolerance: settings.tolerance,
    buffers,
    kernels,
    output: plan.outputs[0],
    expected: { dtype: want.dtype.name, data: b64(want.dataSync() as ArrayBufferView) },
  });
  console.log(`${program}: ${kernels.length} kernel(s)`);
}
writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest));
