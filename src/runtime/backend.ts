// What every device provides: an allocator, a compiler from kernel source to Program, and Programs that run.

import { type DType, dtypes, scalarDTypes } from '../dtype.ts';
import type { Ops } from '../uop/ops.ts';
import type { Allocator } from './allocator.ts';
import type { DeviceBuffer } from './buffer.ts';
import type { TensorCore } from './tensor-cores.ts';

/**
 * A device kind, as registered (src/runtime/device.ts registerDevice: CPU, CUDA, DISK, JS, NULL, SIMT here); a
 * device name is a kind, optionally with an index (`CPU:1`).
 */
export type DeviceKind = string;

/**
 * A source language kernels are rendered in, with a renderer registered for it (src/engine/compile.ts
 * registerRenderer: C, CUDA, JS, SIMT here).
 */
export type KernelLanguage = string;

const NONE: ReadonlySet<Ops> = new Set();
/** Every dtype a tensor may have. */
export const ALL_DTYPES: ReadonlySet<DType> = new Set(
  scalarDTypes.filter((d) => d !== dtypes.void && d !== dtypes.index),
);

/** A compiled kernel. */
export interface Program {
  readonly name: string;
  readonly device: string;
  /** The build that runs where it is not the optimized one (the CPU's quick build, src/runtime/cc-upgrades.ts). */
  readonly tier?: string;
  /**
   * Runs the kernel on `bufs` (in the order of its data0, data1, ... parameters) and the int32 values `vals`
   * (var0, var1, ...). Returns the seconds the kernel took when `timed`, else 0.
   */
  run(bufs: readonly DeviceBuffer[], vals?: readonly number[], timed?: boolean): number;
}

/** A device: its memory and its compiler. Get one through `Device.get(name)`. */
export abstract class Backend {
  constructor(
    readonly name: string,
    readonly kind: DeviceKind,
    readonly allocator: Allocator,
  ) {}

  /** Compiles the kernel `name` from `source`; a source that does not compile throws, showing it. */
  abstract compile(name: string, source: string): Program;

  /** How many threads a kernel's THREAD loop may run on. */
  threads(): number {
    return 1;
  }

  /** How many 32-bit values the processor's vector registers hold (sizes register tiles). */
  registers(): number {
    return 128;
  }

  /** Bytes of one vector register: the widest vector worth rendering (wider ones are split, and spill). */
  vectorBytes(): number {
    return 32;
  }

  /** The language its compiler takes kernels in; undefined where it only holds data (files) and runs none. */
  abstract language(): KernelLanguage | undefined;

  /**
   * A GPU's workgroups: the most threads in one, the bytes of memory they share and the most workgroups in the
   * grid's second and third dimensions (the first has 2^31 - 1). Undefined for a device whose kernels are loops
   * (a CPU); defined, kernels run on a grid of workgroups (src/codegen/grid.ts).
   */
  workgroups():
    | {
        maxThreads: number;
        localBytes: number;
        maxOuterGroups?: number;
        /** Global-to-shared copies that complete asynchronously (cp.async). */
        asyncCopies?: boolean;
        /** Warp-wide matrix loads of tensor-core fragments (ldmatrix). */
        matrixLoads?: boolean;
      }
    | undefined {
    return undefined;
  }

  /** Elementwise ops its kernels cannot compute: codegen rebuilds them from primitives (src/codegen/decompose.ts). */
  lacks(): ReadonlySet<Ops> {
    return NONE;
  }

  /** The dtypes its tensors may have: a tensor of another is refused where it is made (src/tensor/validate.ts). */
  dtypes(): ReadonlySet<DType> {
    return ALL_DTYPES;
  }

  /**
   * The most arguments one kernel may take: its buffers (output, inputs, lifted constants) and symbolic
   * variables. The schedule cuts kernels that would read more (src/schedule/bound.ts); constants are lifted
   * only while they fit (src/engine/lift.ts).
   */
  maxBuffers(): number {
    return Number.POSITIVE_INFINITY;
  }

  /** Whether its compiler contracts no multiply and add of its own, so the IR places FMAs (src/codegen/contract.ts). */
  fusedMultiplyAdds(): boolean {
    return false;
  }

  /** Whether its kernels have vector types, so the optimizer may give them lanes. */
  vectorTypes(): boolean {
    return true;
  }

  /** Its warp-level matrix multiply instructions (src/runtime/tensor-cores.ts), which the TC opt uses; none by default. */
  tensorCores(): readonly TensorCore[] {
    return [];
  }

  /** Whether a big matmul should read its right operand in panels (one copy, as BLAS packs): pays with caches. */
  matmulPanels(): boolean {
    return false;
  }

  /**
   * Compiles several kernels, each as compile would (a device may run its compiler on several at once, or
   * compile several in one unit); a failure, or a kernel function that throws, is its Error. The engine
   * compiles a plan's new kernels so, as functions that render them when called: a device that compiles in
   * the background calls each once it has started compiling the ones before.
   */
  compileMany(kernels: readonly KernelInput[], _opts: CompileOptions = {}): (Program | Error)[] {
    return kernels.map((input) => {
      try {
        const { name, source } = typeof input === 'function' ? input() : input;
        return this.compile(name, source);
      } catch (e) {
        return e as Error;
      }
    });
  }

  /** Waits until the kernels and copies issued so far are done (a GPU runs them after launch returns). */
  synchronize(): void {}

  /**
   * Recorded launches as one graph the device replays at once (with some buffers swapped for others: a JIT's
   * new inputs), or undefined where it has none, and each launch runs alone.
   */
  graph(_launches: readonly RecordedLaunch[]): GraphReplay | undefined {
    return undefined;
  }

  /** Resolves once the work issued so far is done, leaving the event loop free while it runs. */
  async idle(): Promise<void> {}

  /** What besides the source decides the compiled code (compiler, flags, host), for caches of results; the kind where nothing does. */
  compilerKey(): string {
    return this.kind;
  }
}

let plans = 0;
/**
 * Called as a schedule's launches (or a JIT's replay) begin: a program can tell a kernel run again by a later
 * step from one a step launches twice, and what its launches take per step (the CPU's tiers rebuild only the
 * first, by that: src/runtime/cc-upgrades.ts).
 */
export function planStarts(): void {
  plans++;
}
/** How many plans have begun. */
export const plansStarted = (): number => plans;

/** A kernel launch a JIT recorded: the program and the buffers it ran on. */
export interface RecordedLaunch {
  program: Program;
  bufs: readonly DeviceBuffer[];
}

/** Replays a graph's launches with `swap`'s buffers in place of the recorded ones it maps. */
export type GraphReplay = (swap: ReadonlyMap<DeviceBuffer, DeviceBuffer>) => void;

export interface KernelSource {
  name: string;
  source: string;
}

/** A kernel to compile, or a function giving it (rendering it) when called. */
export type KernelInput = KernelSource | (() => KernelSource);

export interface CompileOptions {
  /** Trial kernels (BEAM's candidates): run a few times and dropped, so not worth caching. */
  trial?: boolean;
}

/** Throws unless every buffer lives on `backend` (a pointer into another device's memory would crash). */
export function checkBuffers(backend: Backend, kernel: string, bufs: readonly DeviceBuffer[]): void {
  for (let i = 0; i < bufs.length; i++)
    if (bufs[i]!.backend !== backend)
      throw new Error(
        `kernel ${kernel} on ${backend.name}: buffer ${i} (data${i}) is on ${bufs[i]!.device}; every buffer must be on ${backend.name}`,
      );
}

/** A source listing with line numbers, for compiler errors. */
export function numberedSource(source: string): string {
  const lines = source.split('\n');
  const width = String(lines.length).length;
  return lines.map((line, i) => `${String(i + 1).padStart(width)} | ${line}`).join('\n');
}

/** A kernel in a unit of several: its function is renamed to `symbol` (two kernels may share a name). */
export interface UnitKernel {
  readonly name: string;
  readonly source: string;
  readonly symbol: string;
}

/**
 * One translation unit of several kernels' sources (C, or CUDA C), each function renamed to its symbol, its lines
 * numbered from 1 as in its own source. The C renderer guards what kernels share (src/renderer/c.ts `once`), so
 * each helper is defined once.
 */
export const unitSource = (kernels: readonly UnitKernel[]): string =>
  kernels.map((k) => `#define ${k.name} ${k.symbol}\n#line 1\n${k.source}\n#undef ${k.name}\n`).join('');

/** Seconds since `start` (a performance.now() reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}
