// Long lazy chains: time per stage of realizing N chained adds (x = x.add(1), N times) on JS and CPU, of a
// gradient through N chained multiplies, and of deep and wide graphs of other shapes on JS (N leaves summed
// pairwise, N alternating pads and shrinks, N reshapes, N flips and permutes, cat of N pieces).
// `npx tsx bench/deep.ts [N ...]`; kernels compile with the disk cache off, so every run pays the compiler; a
// chain of x.add(1) is cut (src/schedule/bound.ts) into one 2000-add kernel repeated, which compiles once per
// process (so only the first CPU row shows gcc's time).
import { lowerKernel } from '../src/codegen/index.ts';
import { Context } from '../src/helpers.ts';
import { Tensor } from '../src/index.ts';
import { renderC } from '../src/renderer/c.ts';
import { renderJS } from '../src/renderer/js.ts';
import { Device } from '../src/runtime/device.ts';
import { boundKernels } from '../src/schedule/bound.ts';
import { foldViews } from '../src/schedule/fold-views.ts';
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
  const [bounded, bound] = time(() =>
    boundKernels(splitReduces(foldViews(body)), Device.get(device).maxBuffers()),
  );
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

/** The n distinct leaves x * i summed pairwise: a graph 2n nodes wide and log2(n) deep. */
function tree(x: Tensor, n: number): Tensor {
  let level = Array.from({ length: n }, (_, i) => x.mul(i));
  while (level.length > 1) {
    const next: Tensor[] = [];
    for (let i = 0; i < level.length; i += 2)
      next.push(level[i + 1] ? level[i]!.add(level[i + 1]!) : level[i]!);
    level = next;
  }
  return level[0]!;
}

/** Graphs of other shapes, each built from N ops or leaves, and the value each must give. */
const SHAPES: Record<string, (n: number) => [Tensor, (v: unknown) => boolean]> = {
  'N leaves summed pairwise': (n) => [
    tree(Tensor.ones([4], { dtype: 'float64' }).contiguous().realize(), n),
    (v) => (v as number[])[0] === (n * (n - 1)) / 2,
  ],
  'N pads and shrinks': (n) => {
    let x = Tensor.arange(4).add(1).contiguous().realize();
    for (let i = 0; i < n; i++) x = i % 2 === 0 ? x.pad([[1, 1]]) : x.shrink([i % 4 === 1 ? [0, 4] : [2, 6]]);
    return [x.add(0), (v) => (v as number[]).length === 4];
  },
  'N reshapes': (n) => {
    let x = Tensor.arange(6).contiguous().realize();
    for (let i = 0; i < n; i++) x = x.reshape(i % 3 === 0 ? [6] : i % 3 === 1 ? [2, 3] : [3, 2]);
    return [x.add(0), (v) => JSON.stringify(v).includes('5')];
  },
  'N flips and permutes': (n) => {
    let x = Tensor.arange(6).reshape([2, 3]).contiguous().realize();
    for (let i = 0; i < n; i++) x = i % 2 ? x.permute([1, 0]) : x.flip(0);
    return [x.add(0), (v) => JSON.stringify(v).includes('5')];
  },
  'cat of N pieces': (n) => [
    Tensor.cat(Array.from({ length: n }, (_, i) => Tensor.full([2], i))),
    (v) => (v as number[]).at(-1) === n - 1,
  ],
};

/** Build and realize each graph shape at n on JS. */
function shapes(n: number): Record<string, number | string>[] {
  Device.default = 'JS';
  return Object.entries(SHAPES).map(([graph, make]) => {
    const [[x, check], build] = time(() => make(n));
    const [value, realize] = time(() => x.tolist());
    if (!check(value)) throw new Error(`${graph} at ${n} gave ${JSON.stringify(value).slice(0, 80)}`);
    return { graph, N: n, 'build ms': build.toFixed(0), 'realize ms': realize.toFixed(0) };
  });
}

const devices = ['JS', 'CPU'].filter((d) => d !== 'CPU' || Device.get(d).language() === 'C');
Context.with({ CACHELEVEL: 0 }, () => {
  console.log(`chains of N adds, ms per stage (${devices.join(', ')})`);
  console.table(devices.flatMap((d) => ns.map((n) => stages(d, n))));
  console.log('backward() through N multiplies, ms');
  console.table(devices.flatMap((d) => ns.map((n) => gradient(d, n))));
  console.log('deep and wide graphs of N ops or leaves on JS, ms');
  console.table(ns.flatMap(shapes));
});
