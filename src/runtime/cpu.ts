// The CPU device: C kernels built by the system compiler, cached on disk, loaded through koffi, run on host memory.
import { readFileSync, rmSync } from 'node:fs';
import { arch, availableParallelism, cpus, platform } from 'node:os';
import { join } from 'node:path';
import type { LibraryHandle } from 'koffi';
import { type DType, dtypes } from '../dtype.ts';
import { ContextVar, HOST_BUFFER_ALIGN, sha256 } from '../helpers.ts';
import { LRU } from '../lru.ts';
import { HostAllocator, type HostMemory } from './allocator.ts';
import {
  ALL_DTYPES,
  Backend,
  type CompileOptions,
  checkBuffers,
  type KernelInput,
  type KernelLanguage,
  type KernelSource,
  type Program,
  secondsSince,
} from './backend.ts';
import type { DeviceBuffer } from './buffer.ts';
import { type CCompiler, compileFlags, findCompiler, LDFLAGS, type Level, UnitBuilds } from './cc.ts';
import { CC_TIERS, compilersRebuilding, type Keyed, Upgrade, waitForRebuilds } from './cc-upgrades.ts';
import { cachedFile, makeBuildDir, publishFile } from './diskcache.ts';
import { koffi } from './koffi.ts';

// -march=native makes code for this host's processor: a cache shared between machines must not mix them
let hostCpu: string | undefined;

/** Vector registers by the flag /proc/cpuinfo lists for them, widest first; with none, plain SSE's 16 of 16 bytes. */
const VECTOR_UNITS = [
  { flag: 'avx512f', count: 32, bytes: 64 },
  { flag: 'avx2', count: 16, bytes: 32 },
  { flag: 'asimd', count: 32, bytes: 16 }, // arm64's NEON
] as const;
let vectorUnit: { count: number; bytes: number } | undefined;

/** The host's vector registers; without /proc/cpuinfo (macOS), NEON on arm64, else AVX2. */
function hostVectors(): { count: number; bytes: number } {
  if (vectorUnit !== undefined) return vectorUnit;
  if (platform() !== 'linux') return (vectorUnit = VECTOR_UNITS[arch() === 'arm64' ? 2 : 1]);
  const flags = readFileSync('/proc/cpuinfo', 'utf8');
  vectorUnit = VECTOR_UNITS.find((u) => new RegExp(`\\b${u.flag}\\b`).test(flags)) ?? {
    count: 16,
    bytes: 16,
  };
  return vectorUnit;
}

/** Threads of a THREAD loop; 0: one per core. Ignored (1) when the compiler has no OpenMP. */
export const THREADS = new ContextVar('THREADS', 0);

/**
 * A loaded library; its programs hold it, and it is unloaded once neither they nor the cache do. A quick build
 * (CC_TIERS) has each kernel's optimized build to come, by symbol.
 */
interface Library {
  handle: LibraryHandle;
  upgrades?: Map<string, Upgrade<Library>>;
}
// dlclose counts: loading a path again after its Library was dropped gives a handle of its own, unloaded apart
const unloadWhenDropped = new FinalizationRegistry<LibraryHandle>((handle) => handle.unload());

function loaded(handle: LibraryHandle): Library {
  const lib: Library = { handle };
  unloadWhenDropped.register(lib, handle);
  return lib;
}

const WITHOUT_HALVES: ReadonlySet<DType> = new Set([...ALL_DTYPES].filter((d) => d !== dtypes.float16));

export class CPUBackend extends Backend {
  // loaded libraries by content key, the most recently used (a program cached elsewhere keeps its own loaded)
  private readonly libraries = new LRU<string, Library>();

  constructor(name: string) {
    super(name, 'CPU', new HostAllocator(name, HOST_BUFFER_ALIGN, (bytes) => Number(koffi().address(bytes))));
  }

  language(): KernelLanguage {
    return 'C';
  }

  override threads(): number {
    return findCompiler().openmp ? THREADS.value || availableParallelism() : 1;
  }

  override registers(): number {
    const { count, bytes } = hostVectors();
    return (count * bytes) / 4;
  }

  override vectorBytes(): number {
    return hostVectors().bytes;
  }

  // -ffp-contract=off (src/runtime/cc.ts): the kernels' FMAs are MULACCs
  override fusedMultiplyAdds(): boolean {
    return true;
  }

  override matmulPanels(): boolean {
    return true;
  }

  // a kernel is a koffi call, which takes at most 64 arguments
  override maxBuffers(): number {
    return 64;
  }

  // float16 is the compiler's half type (src/renderer/c.ts); gcc before 12 on x86 has none. Without a compiler
  // at all, compiling says so, for every dtype.
  override dtypes(): ReadonlySet<DType> {
    try {
      return findCompiler().halves ? ALL_DTYPES : WITHOUT_HALVES;
    } catch {
      return ALL_DTYPES;
    }
  }

  override compilerKey(level: Level = '-O2'): string {
    const cc = findCompiler();
    hostCpu ??= cpus()[0]?.model ?? 'unknown';
    return JSON.stringify([cc.argv, cc.version, compileFlags(cc, level), LDFLAGS, hostCpu]);
  }

  compile(name: string, source: string): Program {
    const [program] = this.compileMany([{ name, source }]);
    if (program instanceof Error) throw program;
    return program!;
  }

  /**
   * Builds the kernels not already loaded or in the disk cache together: in translation units of several
   * kernels (src/runtime/cc.ts unitsOf), several compilers at once. Each kernel is cached on disk under its
   * own content key (its unit's library, linked), so a later run that changes one kernel compiles one; a
   * unit that fails is built again kernel by kernel, so that each error names its own kernel. With CC_TIERS
   * new kernels build at -Og and are rebuilt at -O2 in the background (src/runtime/cc-upgrades.ts); a run that
   * finds only a kernel's quick build on disk loads it and rebuilds it the same way. Trial kernels
   * (BEAM's candidates) are neither cached on disk nor kept here, and are unloaded once their programs are
   * dropped (OpenMP builds stay loaded: -z nodelete).
   */
  override compileMany(kernels: readonly KernelInput[], opts: CompileOptions = {}): (Program | Error)[] {
    const cc = findCompiler();
    const compiler = this.compilerKey();
    // BEAM's trials time the optimized build, once no rebuild competes for the cores (or runs their loops on one
    // thread)
    if (opts.trial) waitForRebuilds();
    const quick = !opts.trial && CC_TIERS.value > 0;
    const quickCompiler = quick ? this.compilerKey('-Og') : '';
    const results: (Program | Error)[] = new Array(kernels.length);
    // the kernels being built, once per content key, with the positions of the results they give
    const building = new Map<string, Job>();
    // made when the first unit starts: a warm start, every kernel found, touches no directory
    let build: { dir: string; cached: boolean } | undefined;
    try {
      // libraries are named by content: dlopen returns a library still loaded from the same path (OpenMP
      // builds stay loaded), and a temporary directory's name may come again
      const libraryOf = (unit: readonly Job[]) =>
        join((build ??= makeBuildDir()).dir, `${sha256(unit.map((k) => k.key).join()).slice(0, 32)}.so`);
      const builds = new UnitBuilds(cc, kernels.length, libraryOf, undefined, quick ? '-Og' : '-O2');
      kernels.forEach((input, i) => {
        let kernel: KernelSource;
        try {
          kernel = typeof input === 'function' ? input() : input;
        } catch (e) {
          results[i] = e as Error;
          return;
        }
        const { name, source } = kernel;
        const key = sha256(JSON.stringify([source, compiler, LIBRARY_FORMAT]));
        // the symbol is the content's, whichever unit or tier holds it, so a library on disk is read the same way
        const symbol = `${name}_${key.slice(0, 16)}`;
        let lib = opts.trial ? undefined : (this.libraries.get(key) ?? this.fromDisk(key));
        // hashed only where no optimized build is found
        const quickKey =
          lib === undefined && quick ? sha256(JSON.stringify([source, quickCompiler, LIBRARY_FORMAT])) : key;
        if (lib === undefined && quick) {
          lib = this.libraries.get(quickKey) ?? this.fromDisk(quickKey);
          if (lib !== undefined) this.upgradeFrom(lib, { name, source, symbol, key }, cc);
        }
        if (lib !== undefined) results[i] = new CPUProgram(this, name, symbol, lib);
        else if (building.has(key)) building.get(key)!.at.push(i);
        else {
          const job = { name, source, symbol, key, cachedAs: quickKey, at: [i] };
          building.set(key, job);
          builds.add(job);
        }
      });
      const built = builds.finish();
      for (const { kernels: unit, out, error } of built) {
        let lib: Library | Error | undefined = error;
        if (lib === undefined)
          try {
            const keys = unit.map((k) => k.cachedAs);
            const path = build!.cached && !opts.trial ? publishFile(out, keys, '.so')[0]! : out;
            lib = loaded(koffi().load(path));
            if (quick) for (const k of unit) this.upgradeFrom(lib, k, cc);
          } catch (e) {
            lib = e as Error;
          }
        for (const k of unit) {
          if (!(lib instanceof Error) && !opts.trial) this.libraries.set(k.cachedAs, lib);
          for (const i of k.at)
            results[i] = lib instanceof Error ? lib : new CPUProgram(this, k.name, k.symbol, lib);
        }
      }
      return results;
    } finally {
      if (build !== undefined) rmSync(build.dir, { recursive: true, force: true });
    }
  }

  /** Gives a kernel of a quick build, built now or found on disk, its optimized build to come (once). */
  private upgradeFrom(lib: Library, kernel: Keyed, cc: CCompiler): void {
    lib.upgrades ??= new Map();
    // the kernel alone, not a build's Job around it (whose result positions the upgrade would keep alive)
    const { name, source, symbol, key } = kernel;
    if (!lib.upgrades.has(symbol))
      lib.upgrades.set(symbol, new Upgrade({ name, source, symbol, key }, cc, this.optimized));
  }

  /** Loads an optimized build of kernels whose quick build runs (CC_TIERS), for the programs to take up. */
  private readonly optimized = (path: string, kernels: readonly { key: string }[]): Library => {
    const lib = loaded(koffi().load(path));
    for (const k of kernels) this.libraries.set(k.key, lib);
    return lib;
  };

  /** The library of a kernel built in an earlier run, from the disk cache. */
  private fromDisk(key: string): Library | undefined {
    const path = cachedFile(key, '.so');
    if (path === undefined) return undefined;
    const lib = loaded(koffi().load(path));
    this.libraries.set(key, lib);
    return lib;
  }
}

/**
 * While optimized builds compile (src/runtime/cc-upgrades.ts), THREAD loops run on the cores they leave: OpenMP's
 * nthreads-var, which caps each parallel loop's team (tg_team in src/renderer/c.ts), is one lower for each compiler
 * running.
 * A team's threads spin at each loop's end until all are done, so a thread a compiler displaced held up the whole
 * team: on the 2-core VM beautiful_mnist's steps took 100-340 ms instead of 40 at -Og with teams of two beside a
 * compiler (its first 60 steps with an empty cache: 4.3-4.6 s, 3.1 s without tiers).
 */
let openmp: { set: (threads: number) => void; threads: number } | null | undefined;
let team = 0;
function teamWhile(compilers: number): void {
  // the runtime is looked up once a compiler first runs beside the kernels
  if (openmp === null || (openmp === undefined && compilers === 0)) return;
  if (openmp === undefined)
    try {
      const cc = findCompiler();
      if (!cc.openmp) throw new Error('no OpenMP');
      // the runtime the kernels link, already loaded by them: dlopen gives the same instance
      const runtime = koffi().load(cc.version.includes('clang') ? 'libomp.so' : 'libgomp.so.1');
      const threads = runtime.func('omp_get_max_threads', 'int', [])() as number;
      openmp = { set: runtime.func('omp_set_num_threads', 'void', ['int']), threads };
      team = threads;
    } catch {
      openmp = null;
      return;
    }
  const threads = Math.max(1, openmp.threads - compilers);
  if (threads === team) return;
  openmp.set(threads);
  team = threads;
}

/** Part of a kernel's cache key: libraries of format 1 exported the kernel under its own name, not its symbol. */
const LIBRARY_FORMAT = 2;

/** A kernel to build: the key its build is cached under (its quick build's, CC_TIERS) and the results it gives. */
type Job = Keyed & { cachedAs: string; at: number[] };

class CPUProgram implements Program {
  private fn: ((...args: number[]) => void) | undefined;
  /** Its optimized build to come, while it runs from its quick build (CC_TIERS). */
  private upgrade: Upgrade<Library> | undefined;
  private nbufs = -1;
  private nvars = -1;

  constructor(
    private readonly backend: CPUBackend,
    readonly name: string,
    /** The function's name in the library (see compileMany). */
    private readonly symbol: string,
    private lib: Library,
  ) {
    this.upgrade = lib.upgrades?.get(symbol);
  }

  get device(): string {
    return this.backend.name;
  }

  /** '-Og' while the kernel runs from its quick build (CC_TIERS). */
  get tier(): string | undefined {
    return this.upgrade === undefined ? undefined : '-Og';
  }

  run(bufs: readonly DeviceBuffer[], vals: readonly number[] = [], timed = false): number {
    checkBuffers(this.backend, this.name, bufs);
    const optimized = this.upgrade?.take();
    if (optimized !== undefined) {
      this.lib = optimized;
      this.upgrade = undefined;
      this.fn = undefined;
    }
    const fn = this.bind(bufs.length, vals.length);
    // pointers go as uintptr_t numbers: a call costs half of passing TypedArrays, and the
    // ArrayBuffers behind them never move while the DeviceBuffers hold them
    teamWhile(compilersRebuilding());
    const args = new Array<number>(bufs.length + vals.length);
    for (let i = 0; i < bufs.length; i++) args[i] = (bufs[i]!.memory as HostMemory).address;
    for (let i = 0; i < vals.length; i++) args[bufs.length + i] = vals[i]!;
    // a quick build's launches are timed: what they take decides when its rebuild is due
    const start = timed || this.upgrade !== undefined ? performance.now() : 0;
    fn(...args);
    const seconds = start === 0 ? 0 : secondsSince(start);
    this.upgrade?.ran(seconds);
    return timed ? seconds : 0;
  }

  /** The function with the prototype `void name(void* x nbufs, int32 x nvars)`, made on first use. */
  private bind(nbufs: number, nvars: number): (...args: number[]) => void {
    if (this.fn === undefined || nbufs !== this.nbufs || nvars !== this.nvars) {
      const types = [...Array<string>(nbufs).fill('uintptr_t'), ...Array<string>(nvars).fill('int32_t')];
      try {
        this.fn = this.lib.handle.func(this.symbol, 'void', types);
      } catch (e) {
        throw new Error(
          `CPU: kernel ${this.name}: ${(e as Error).message}; its source must define void ${this.name}(...)`,
        );
      }
      this.nbufs = nbufs;
      this.nvars = nvars;
    }
    return this.fn;
  }
}
