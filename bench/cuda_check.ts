// Writes the CUDA C of GPU-style kernels (the SIMT target's) with their inputs and expected outputs, for
// bench/cuda_check.py to compile with nvcc and run on a GPU through the driver API: the generated CUDA checked on
// hardware before the CUDA device exists. Usage: npx tsx bench/cuda_check.ts OUTDIR
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lowerKernel } from '../src/codegen/index.ts';
import { CPU_TARGET, type Target } from '../src/codegen/opt/opts.ts';
import { dtypes } from '../src/dtype.ts';
import { bufferData } from '../src/engine/buffers.ts';
import { bake } from '../src/engine/lift.ts';
import { renderCUDA } from '../src/renderer/c.ts';
import { Device } from '../src/runtime/device.ts';
import { planOf, toFunction } from '../src/schedule/index.ts';
import { Tensor } from '../src/tensor/index.ts';
import { Ops } from '../src/uop/ops.ts';

const out = process.argv[2] ?? 'cuda-check';
mkdirSync(out, { recursive: true });
const target: Target = { ...CPU_TARGET, threads: 1, vectors: false, grid: Device.get('SIMT').workgroups() };

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
};

const manifest: unknown[] = [];
const b64 = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
for (const [program, f] of Object.entries(PROGRAMS)) {
  const want = f('JS').realize();
  const t = f('SIMT');
  const { body, inputs, values } = toFunction([t.uop], () => {
    throw new Error('no function calls here');
  });
  const plan = planOf(body, inputs.length, 'SIMT', true);
  const buffers = [
    ...inputs.map((b) => ({
      dtype: b.dtype.name,
      size: Number(b.shape!.reduce((x, y) => Number(x) * Number(y), 1)),
      data: b64(bufferData(b)),
    })),
    ...plan.created.map((c) => ({ dtype: c.dtype.name, size: c.shape.reduce((x, y) => x * y, 1) })),
  ];
  const kernels = plan.steps.map((step, i) => {
    const { name, linear } = lowerKernel(bake(step.ast, values), { target });
    const unique = `${name}_${program.replace(/\W+/g, '_')}_${i}`;
    writeFileSync(join(out, `${unique}.cu`), renderCUDA(unique, linear));
    const dims = (prefix: string) =>
      [0, 1, 2].map((d) => {
        const s = linear.src.find((u) => u.op === Ops.SPECIAL && u.arg === `${prefix}${d}`);
        return s === undefined ? 1 : Number(s.src[0]!.constValue);
      });
    return { name: unique, refs: step.refs, grid: dims('gidx'), block: dims('lidx') };
  });
  manifest.push({
    program,
    buffers,
    kernels,
    output: plan.outputs[0],
    expected: { dtype: want.dtype.name, data: b64(want.dataSync() as ArrayBufferView) },
  });
  console.log(`${program}: ${kernels.length} kernel(s)`);
}
writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest));
