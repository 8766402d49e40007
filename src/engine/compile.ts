// The program stage: a kernel's AST is optimized and lowered (src/codegen), rendered for its device and
// compiled, once per kernel content, device and opts in force.
import { lowerKernel } from '../codegen/index.ts';
import { NOOPT } from '../codegen/opt/heuristic.ts';
import { ALLOW_TF32, TC, TC_OPT } from '../codegen/opt/heuristic-gpu.ts';
import { CPU_TARGET, printOpts, type Target } from '../codegen/opt/opts.ts';
import { BEAM, beamSearch } from '../codegen/opt/search.ts';
import { ContextVar, DEBUG, type SettingValue, sha256 } from '../helpers.ts';
import { LRU } from '../lru.ts';
import { renderC, renderCUDA } from '../renderer/c.ts';
import { renderJS } from '../renderer/js.ts';
import { renderSIMT } from '../renderer/simt.ts';
import type { Backend, KernelLanguage, Program } from '../runtime/backend.ts';
import { Device } from '../runtime/device.ts';
import type { Ops } from '../uop/ops.ts';
import { printLinear, toCode } from '../uop/print.ts';
import type { UOp } from '../uop/uop.ts';
import { LIFT } from './lift.ts';

type Renderer = (name: string, linear: UOp) => string;

/** Source renderers by the language a device compiles, and what DEBUG=4 shows where that source is not for reading. */
const RENDERERS = new Map<KernelLanguage, { render: Renderer; readable?: Renderer }>([
  ['C', { render: renderC }],
  ['CUDA', { render: renderCUDA }],
  ['JS', { render: renderJS }],
  ['SIMT', { render: renderSIMT, readable: renderCUDA }],
]);

/**
 * Adds the renderer of a language: with its device's registerDevice line, what a new backend registers (its
 * Backend.language() names the language).
 */
export function registerRenderer(language: KernelLanguage, render: Renderer, readable?: Renderer): void {
  RENDERERS.set(language, { render, readable });
}

/**
 * Observers of the kernels rendered in one language, called with each one's linear program and kernel AST: the
 * tests compile every kernel the SIMT target gets as CUDA C with nvcc (test/setup.ts, scripts/nvcc-kernels.ts);
 * bench/train.ts tells sums of products from other kernels.
 */
export const renderObservers = new Map<KernelLanguage, (name: string, linear: UOp, ast: UOp) => void>();

/** What the kernel optimizer may use on a device. */
export const targetOf = (backend: Backend): Target => ({
  ...CPU_TARGET,
  threads: backend.threads(),
  vectors: backend.vectorTypes(),
  registers: backend.registers(),
  vectorBytes: backend.vectorBytes(),
  grid: backend.workgroups(),
  tensorCores: backend.tensorCores(),
  fusedMultiplyAdds: backend.fusedMultiplyAdds(),
});

/** What decides the opts a kernel gets on a device and which constants lift, for the program and plan caches' keys. */
export const optsKey = (backend: Backend) =>
  `${NOOPT.value}|${BEAM.value}|${LIFT.value}|${backend.threads()}|${TC.value}${TC_OPT.value}${ALLOW_TF32.value}`;

export interface Compiled {
  program: Program;
  display: string;
  flops: number;
}

const programs = new LRU<string, Compiled>();
let built = 0;

/** Programs built since the process started (a compile each, or a load from the disk cache) and programs cached. */
export const programStats = (): { built: number; cached: number } => ({ built, cached: programs.size });

const keyOf = (ast: UOp, device: string, backend: Backend) =>
  // the optimizations in force are part of what a kernel compiles to
  `${device}|${optsKey(backend)}|${ast.key}`;

/** Opts (searched where BEAM asks, else hand-coded), lowering, render, compile: a kernel's program, cached. */
export function compileKernel(ast: UOp, device: string): Compiled {
  const p = programs.get(keyOf(ast, device, Device.get(device)));
  return p ?? compileKernels([ast], device)[0]!;
}

/**
 * The programs of several kernels: those not cached are lowered and rendered one by one, then compiled
 * together (`Backend.compileMany`: the device decides how, in parallel or several to a unit). Throws the
 * first kernel's error where one does not compile; the others are cached all the same.
 */
export function compileKernels(asts: readonly UOp[], device: string): Compiled[] {
  const backend = Device.get(device);
  const keys = asts.map((ast) => keyOf(ast, device, backend));
  const results = keys.map((key) => programs.get(key));
  const missing = new Map<string, UOp>();
  asts.forEach((ast, i) => {
    if (results[i] === undefined) missing.set(keys[i]!, ast);
  });
  if (missing.size === 0) return results as Compiled[];
  // each is lowered when the device asks for it: one compiling in the background overlaps the two; the kernels
  // lowered are stored together once the last one is (while the compilers still run)
  const t0 = performance.now();
  const lowered: Lowered[] = [];
  const stored = new Map<string, string>();
  let left = missing.size;
  const store = () => {
    if (stored.size > 0) loweringStore.write(stored);
    stored.clear();
  };
  let compiled: (Program | Error)[];
  try {
    const asts = [...missing.values()];
    const lowering = loweringOf(asts, device, backend, stored);
    compiled = backend.compileMany(
      asts.map((_, i) => () => {
        lowered[i] = lowering(i);
        if (--left === 0) store();
        return lowered[i];
      }),
    );
  } finally {
    store();
  }
  const made = new Map<string, Compiled>();
  let error: Error | undefined;
  [...missing.keys()].forEach((key, i) => {
    const program = compiled[i]!;
    if (program instanceof Error) error ??= program;
    else {
      const { display, flops } = lowered[i]!;
      made.set(key, { program, display, flops });
      programs.set(key, made.get(key)!);
      built++;
    }
  });
  if (DEBUG.value >= 1)
    console.log(
      `compile: ${missing.size} kernel(s) for ${device} in ${(performance.now() - t0).toFixed(2)} ms`,
    );
  if (error !== undefined) throw error;
  return keys.map((key, i) => results[i] ?? made.get(key)!);
}

/** A kernel lowered and rendered: its name and source for the device, and what DEBUG=2 shows of it. */
export interface Lowered {
  name: string;
  source: string;
  display: string;
  flops: number;
}

/**
 * Where lowered kernels outlive the process: the disk cache under Node, keyed also by the library's own code
 * (src/node.ts sets it); none in a browser.
 */
export const loweringStore: {
  read(key: string): string | undefined;
  /** Stores several lowered kernels (key to text) at once: one file for all of them (src/node.ts). */
  write(entries: ReadonlyMap<string, string>): void;
} = {
  read: () => undefined,
  write: () => {},
};

/** What lowering a kernel takes besides its AST, as plain data (another thread lowers from it: lowerThreads). */
export interface LowerJob {
  language: KernelLanguage;
  target: Target;
  lacks: Ops[];
  /** Every setting but DEBUG, by name. */
  settings: [string, SettingValue][];
}

/**
 * Kernels lowered on other threads, the same way (src/runtime/lower-threads.ts sets it under Node): `start` takes
 * a batch's new kernels, or declines it; `take(i)` gives kernel i's lowering, waiting for it or lowering kernels
 * no thread has taken yet with `here` meanwhile.
 */
export const lowerThreads: {
  start?(
    asts: readonly UOp[],
    job: LowerJob,
    here: (i: number) => Lowered,
  ): { take(i: number): Lowered } | undefined;
} = {};

// another thread lowers with these renderers only: one registered by the program is not in its modules
const BUILT_IN = new Set<Renderer>([renderC, renderCUDA, renderJS, renderSIMT]);

/**
 * Each of `asts`' lowering, by position: the kernel lowered by an earlier process with the same device target
 * and settings (every ContextVar but DEBUG), else lowered now (on other threads where lowerThreads takes the
 * batch) and added to `stored` (written by compileKernels): a warm start skips the optimizer, the lowering and
 * the renderer (the transformer step's 114 kernels took 2.4 s of CPU there, about all of its warm first step's
 * lead on later steps). DEBUG=3 and above lower anew, as they print what lowering does, and so do kernels whose
 * language has a render observer (it gets the linear program, which is not stored).
 */
function loweringOf(
  asts: readonly UOp[],
  device: string,
  backend: Backend,
  stored: Map<string, string>,
): (i: number) => Lowered {
  // first: a device without a renderer is refused even where a kernel was stored when it had one
  const { render } = rendererOf(device, backend);
  const language = backend.language()!;
  if (DEBUG.value >= 3 || renderObservers.has(language)) return (i) => lower(asts[i]!, device, backend);
  const settings = [...ContextVar.registry].flatMap(([name, v]): [string, SettingValue][] =>
    name === 'DEBUG' ? [] : [[name, v.value]],
  );
  const target = targetOf(backend);
  const lacks = [...backend.lacks()];
  const keys = asts.map((ast) =>
    sha256(JSON.stringify([ast.key, language, renderKey(render), target, lacks, settings])),
  );
  const texts = keys.map((key) => loweringStore.read(key));
  // the new kernels' positions among asts, and theirs among the new
  const fresh = asts.flatMap((_, i) => (texts[i] === undefined ? [i] : []));
  const at = new Map(fresh.map((i, j) => [i, j]));
  const elsewhere =
    fresh.length > 1 && BUILT_IN.has(render) && !(BEAM.value > 0 && !NOOPT.value)
      ? lowerThreads.start?.(
          fresh.map((i) => asts[i]!),
          { language, target, lacks, settings },
          (j) => lower(asts[fresh[j]!]!, device, backend),
        )
      : undefined;
  return (i) => {
    const text = texts[i];
    if (text !== undefined) return JSON.parse(text) as Lowered;
    const made = elsewhere?.take(at.get(i)!) ?? lower(asts[i]!, device, backend);
    stored.set(keys[i]!, JSON.stringify(made));
    return made;
  };
}

/** The renderer of the device's kernel language; a device that runs no kernels, or has none registered, is refused. */
function rendererOf(device: string, backend: Backend): { render: Renderer; readable?: Renderer } {
  const language = backend.language();
  if (language === undefined)
    throw new Error(
      `device ${device} holds data only and runs no kernels: move the tensor first (.to('CPU'))`,
    );
  const renderer = RENDERERS.get(language);
  if (renderer === undefined)
    throw new Error(
      `device ${device} compiles ${language}, for which no renderer is registered (registerRenderer); registered: ${[...RENDERERS.keys()].join(', ')}`,
    );
  return renderer;
}

const renderKeys = new WeakMap<Renderer, string>();
/** What tells renderers apart in the stored kernels' keys: a hash of the function's source (one registered anew). */
const renderKey = (render: Renderer) => {
  let key = renderKeys.get(render);
  if (key === undefined) renderKeys.set(render, (key = sha256(render.toString())));
  return key;
};

/** A kernel lowered and rendered on another thread, from its LowerJob (src/runtime/lower-thread.ts). */
export function lowerFromJob(ast: UOp, job: LowerJob): Lowered {
  const { render } = RENDERERS.get(job.language)!;
  const { name, linear, display, flops } = lowerKernel(ast, {
    target: job.target,
    lacks: new Set(job.lacks),
  });
  return { name, source: render(name, linear), display, flops };
}

/** A kernel lowered for its device and rendered (what DEBUG shows at 3 to 6 is printed here). */
function lower(ast: UOp, device: string, backend: Backend): Lowered {
  const { render, readable } = rendererOf(device, backend);
  const target = targetOf(backend);
  const lacks = backend.lacks();
  const searched =
    BEAM.value > 0 && !NOOPT.value
      ? beamSearch(ast, backend, render, BEAM.value, { target, lacks })
      : undefined;
  const { name, linear, display, flops, opts } = lowerKernel(ast, { target, lacks, opts: searched });
  const source = render(name, linear);
  renderObservers.get(backend.language()!)?.(name, linear, ast);
  if (DEBUG.value >= 5) console.log(toCode(ast));
  if (DEBUG.value >= 6) console.log(printLinear(linear));
  if (DEBUG.value >= 4) console.log(readable?.(name, linear) ?? source);
  if (DEBUG.value >= 3) console.log(`${display}: ${opts.length ? printOpts(opts) : 'no opts'}`);
  return { name, source, display, flops };
}
