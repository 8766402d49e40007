// Long lazy chains: time per stage of realizing N chained adds (x = x.add(1), N times) on JS and CPU, and of a
// gradient through N chained multiplies. `npx tsx bench/deep.ts [N ...]`; kernels compile with the disk
// cache off, so every run pays the compiler; a chain of x.add(1) is cut (src/schedule/bound.ts) into one
// 2000-add kernel repeated, which compiles once per process (so only the first CPU row shows gcc's time).
import { lowerKernel } from '../src/codegen/index.ts';
import { Context } from '../src/helpers.ts';
import { Tensor } from '../src/index.ts';
import { renderC } from '../src/renderer/c.ts';
import { renderJS } from '../src/renderer/js.ts';
import { Device } from '../src/runtime/device.ts';
import { boundKernels } from '../src/schedule/bound.ts';
import { toFunction } from '../src/schedule/index.ts';
import { rangeify } from '../src/schedule/rangeify.ts';
import { splitReduces } from '../src/schedule/split.ts';

const sizes = process.argv.slice(2).map(Number);
const ns = sizes.length ? sizes : [10_000, 20_000, 50_000, 100_000];

function time<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

const chain = (n: number) => {
  let x = Tensor.zeros([4]).contiguous().realize();
  for (let i = 0; i < n; i++) x = x.add(1);
  return x;
};

/** Each stage of realize, timed apart (the engine runs them the same way), then a realize of its own. */
function stages(device: string, n: number): Record<string, number | string> {
  Device.default = device;
  const [x, build] = time(() => chain(n));
  const [{ body }, callify] = time(() =>
    toFunction([x.uop], () => {
      throw new Error('no calls here');
    }),
  );
  const [bounded, bound] = time(() => boundKernels(splitReduces(body)));
  const [schedule, rangeified] = time(() => rangeify(bounded.src, () => device));
  const backend = Device.get(device);
  const render = device === 'CPU' ? renderC : renderJS;
  let lower = 0;
  let rendered = 0;
  let compile = 0;
  for (const k of schedule.kernels) {
    const [lowered, tl] = time(() => lowerKernel(k.ast));
    const [source, tr] = time(() => render(lowered.name, lowered.linear));
    const [, tc] = time(() => backend.compile(lowered.name, source));
    lower += tl;
    rendered += tr;
    compile += tc;
  }
  const [value, total] = time(() => x.tolist() as number[]);
  if (value[0] !== n) throw new Error(`chain of ${n} adds gave ${value[0]}`);
  const ms = (t: number) => t.toFixed(0);
  return {
    device,
    N: n,
    kernels: schedule.kernels.length,
    build: ms(build),
    callify: ms(callify),
    bound: ms(bound),
    rangeify: ms(rangeified),
    lower: ms(lower),
    render: ms(rendered),
    compile: ms(compile),
    'realize (all stages)': ms(total),
  };
}

/** backward() through n chained multiplies, then the gradient realized. */
function gradient(device: string, n: number): Record<string, number | string> {
  Device.default = device;
  const w = Tensor.ones([4], { requiresGrad: true });
  const [loss, build] = time(() => {
    let x = w;
    for (let i = 0; i < n; i++) x = x.mul(1);
    return x.sum();
  });
  const [, backward] = time(() => loss.backward());
  const [g, realize] = time(() => w.grad!.tolist() as number[]);
  if (g[0] !== 1) throw new Error(`gradient through ${n} multiplies by 1 gave ${g[0]}`);
  return {
    device,
    N: n,
    build: build.toFixed(0),
    backward: backward.toFixed(0),
    realize: realize.toFixed(0),
  };
}

const devices = ['JS', 'CPU'].filter((d) => d !== 'CPU' || Device.get(d).language() === 'C');
Context.with({ CACHELEVEL: 0 }, () => {
  console.log(`chains of N adds, ms per stage (${devices.join(', ')})`);
  console.table(devices.flatMap((d) => ns.map((n) => stages(d, n))));
  console.log('backward() through N multiplies, ms');
  console.table(devices.flatMap((d) => ns.map((n) => gradient(d, n))));
});
