// NVRTC compile time for a batch of new kernels, one at a time and on worker threads (compileMany), with an
// empty cubin cache each: what a new model's first step waits for. Usage: npx tsx bench/nvrtc_batch.ts [N]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lowerKernel } from '../src/codegen/index.ts';
import { CPU_TARGET, type Target } from '../src/codegen/opt/opts.ts';
import { scheduleOf } from '../src/engine/realize.ts';
import { Context, Device, Tensor } from '../src/index.ts';
import { renderCUDA } from '../src/renderer/c.ts';

const n = Number(process.argv[2] ?? 32);
const cuda = Device.get('CUDA');
const target: Target = { ...CPU_TARGET, threads: 1, vectors: false, grid: cuda.workgroups() };
/** n distinct kernels: elementwise chains and reductions of different sizes. */
const kernels = Array.from({ length: n }, (_, i) => {
  const x = Tensor.empty([64 + i, 96], { device: 'CUDA' });
  const t =
    i % 2
      ? x
          .exp()
          .mul(i + 1)
          .sum(1)
      : x.relu().add(i).softmax(1);
  return scheduleOf([t]).kernels.map((k) => {
    const { name, linear } = lowerKernel(k.ast, { target });
    return { name, source: renderCUDA(name, linear) };
  });
}).flat();
const time = (f: () => void) => {
  const t0 = performance.now();
  f();
  return (performance.now() - t0) / 1000;
};
const fresh = () => ({ CACHEDIR: mkdtempSync(join(tmpdir(), 'tsgrad-bench-')) });
// each run's sources differ by a comment, so that neither finds the other's modules loaded
const run = (tag: string) => kernels.map((k) => ({ name: k.name, source: `${k.source}// ${tag}\n` }));
const one = Context.with(fresh(), () =>
  time(() => {
    for (const k of run('one')) cuda.compile(k.name, k.source);
  }),
);
const many = Context.with(fresh(), () => time(() => cuda.compileMany(run('many'))));
console.log(
  `${kernels.length} kernels, empty cache: one at a time ${one.toFixed(2)} s, compileMany ${many.toFixed(2)} s`,
);
