// The system C compiler: finding it (CC, else clang, else gcc) and compiling kernel source to a shared library.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { delimiter, join } from 'node:path';
import { ContextVar, sha256 } from '../helpers.ts';
import { numberedSource, type UnitKernel, unitSource } from './backend.ts';
import { CompilerRuns } from './compile-worker.ts';
import { readCachedText, writeCachedText } from './diskcache.ts';

/** The C compiler command (words split on spaces, as make does); empty: gcc or clang (see findCompiler). */
export const CC = new ContextVar<string>('CC', '');

/**
 * -O2, not -O3: what -O3 adds our kernels do not use (they carry their own vector types, and the optimizer
 * unrolls what pays) but for the complete unrolling of short loops that gcc keeps with -fpeel-loops (GCC_FLAGS),
 * and it costs compiler CPU (first-step units, min of 2 interleaved on the 2-core machine: MNIST CNN 2.32 s at
 * -O3, 1.85 s at -O2 -fpeel-loops; MLP 1.30, 1.19; transformer 5.68, 5.32). A kernel's quick build
 * (src/runtime/cc-upgrades.ts) is -Og: a third of -O2's compiler CPU (the three models' first-step units: MNIST
 * CNN 0.63 s against 2.10, transformer 0.92 against 3.30) for steps about a quarter slower (docs/compiling.md, Tiers).
 */
export type Level = '-O2' | '-Og';
export const CFLAGS: readonly string[] = [
  '-march=native',
  '-shared',
  '-fPIC',
  '-Wall',
  // 64-byte vector arguments of the helper functions are fine without AVX-512: no ABI crosses a library
  '-Wno-psabi',
  '-Werror=implicit-function-declaration',
  // integers wrap, as the IR says and the JS backend does (without it gcc optimizes through overflow)
  '-fwrapv',
  // the kernels' FMAs are the IR's (src/codegen/contract.ts), the same at every optimization level
  '-ffp-contract=off',
  // sqrt is an instruction, with no call to libm to set errno for a negative argument (at -Og, every sqrt
  // called libm); the results are the same bits
  '-fno-math-errno',
];
/**
 * gcc 12's loop vectorizer miscompiles kernels with AVX2 and AVX-512 (test/runtime/cc.test.ts has two); our
 * kernels carry their own vector types where lanes pay, so only scalar loops lose it. -fpeel-loops unrolls short
 * loops (3x3 and 5x5 windows) completely, as -O3 does: without it (1.42, 1.16, 4.96 s above) beautiful_mnist's
 * small pooling and conv-gradient kernels ran 2-4x slower. -fira-region=one allocates a kernel's registers
 * over the whole function, not loop by loop: a tenth of gcc's CPU (the transformer step's 134 kernels one by
 * one: 7.52 -> 7.05 s; its first step's compilers: 3.71, 4.00 -> 3.39, 3.42 s) at the same kernel speed (DEBUG=2,
 * sum of each launch's min over 20 steps: transformer 21.4 -> 21.3 ms, MLP 11.3 -> 11.1, MNIST CNN 23.1 -> 22.8;
 * no kernel more than 11% slower). --param=max-combine-insns=2 lets the RTL combiner try pairs of instructions,
 * not also triples and quadruples: beautiful_mnist's first-step kernels in one unit took 2.55 -> 2.22 s of gcc
 * CPU (its 3x3 max-pool backward kernel, 0.6 s alone, spent 44% of it combining), the MLP's and transformer's
 * the same; losses and parameters after 4 steps of all three bit for bit the same, kernel times within noise.
 * clang has none of these flags.
 */
const GCC_FLAGS: readonly string[] = [
  '-fno-tree-loop-vectorize',
  '-fpeel-loops',
  '-fira-region=one',
  '--param=max-combine-insns=2',
];
/**
 * float16 arithmetic computes in float and rounds to float16 after every op, as on hosts without native
 * halves (and as the JS device does), so a kernel's bits do not depend on the host. With AVX512-FP16 (Sapphire
 * Rapids), gcc 12 computes _Float16 natively and contracts a multiply and an add into one float16 FMA, and its
 * SLP vectorizer drops float -> _Float16 -> float round trips (a cast to float16 had no effect).
 */
const NO_NATIVE_HALF: readonly string[] = ['-mno-avx512fp16'];
export const LDFLAGS: readonly string[] = ['-lm'];

/**
 * THREAD loops run on OpenMP threads. -z nodelete keeps the library loaded until exit: a gcc OpenMP library
 * that koffi unloads crashes Node at exit.
 */
const OPENMP_FLAGS: readonly string[] = ['-fopenmp', '-Wl,-z,nodelete'];

export interface CCompiler {
  /** The command and its leading arguments. */
  readonly argv: readonly string[];
  /** The first line of `--version`, part of the cache key. */
  readonly version: string;
  /** The compiler builds OpenMP code (clang needs libomp installed for it). */
  readonly openmp: boolean;
  /** It has a half type: _Float16 (gcc 12+, clang 15+ on x86), or __fp16 (clang, ARM). */
  readonly halves: boolean;
  /** -march=native gives it float16 arithmetic instructions (AVX512-FP16), which NO_NATIVE_HALF turns off. */
  readonly nativeHalf: boolean;
}

/**
 * Whether a build at `level` runs THREAD loops on OpenMP threads. A quick build (-Og) does not where a single
 * compiler runs beside the main thread's rendering (two cores or fewer; src/runtime/cc-upgrades.ts): OpenMP's
 * parallel regions are a sixth of -Og's compiler CPU, which is then the first step's critical path (the
 * transformer's, two interleaved rounds on the 2-core VM: 1.34, 1.41 -> 1.24, 1.27 s), and two threads gain a
 * first step's kernels at most half their 50-100 ms. With more cores the compilers keep up and threads pay.
 */
const threaded = (cc: CCompiler, level: Level): boolean =>
  cc.openmp && (level === '-O2' || compilerJobs() > 2);

/** Every flag a kernel compiles with, at the optimization level `level`. */
export const compileFlags = (cc: CCompiler, level: Level = '-O2'): readonly string[] => [
  level,
  ...CFLAGS,
  ...(cc.version.includes('clang') ? [] : GCC_FLAGS),
  ...(threaded(cc, level) ? OPENMP_FLAGS : []),
  ...(cc.nativeHalf ? NO_NATIVE_HALF : []),
];

const found = new Map<string, CCompiler | Error>();

/**
 * The C compiler that CC names, else the first of gcc and clang that builds OpenMP code, else the first that
 * runs (clang without libomp would leave THREAD loops serial); detected once per CC setting. Throws if none
 * runs.
 */
export function findCompiler(): CCompiler {
  const cc = CC.value.trim();
  let c = found.get(cc);
  if (c === undefined) {
    const candidates = cc === '' ? [['gcc'], ['clang']] : [cc.split(/\s+/)];
    let first: CCompiler | undefined;
    for (const argv of candidates) {
      const x = probeCached(argv);
      first ??= x;
      if (x?.openmp) {
        c = x;
        break;
      }
    }
    c ??=
      first ??
      new Error(
        cc === ''
          ? 'CPU: no C compiler found: neither gcc nor clang runs; install one or set CC'
          : `CPU: the C compiler CC=${cc} does not run (\`${cc} --version\` failed)`,
      );
    found.set(cc, c);
  }
  if (c instanceof Error) throw c;
  return c;
}

/**
 * The identity of the executable a command runs (as execvp finds it on PATH): its path, size and change time; undefined
 * where there is none.
 */
function executable(command: string): [string, number, number] | undefined {
  const dirs = command.includes('/')
    ? ['']
    : (process.env.PATH ?? '').split(delimiter).filter((d) => d !== '');
  for (const dir of dirs) {
    const path = dir === '' ? command : join(dir, command);
    try {
      accessSync(path, constants.X_OK);
      const file = statSync(path);
      if (file.isFile()) return [path, file.size, file.ctimeMs];
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * probeVersion's answer, kept in the disk cache under the compiler executable's identity and the host's processor:
 * the three probes cost 60-120 ms of every process on the 2-core VM. Only a compiler that builds OpenMP code is
 * kept, so that one that did not is asked again (libgomp or libomp installed since).
 */
function probeCached(argv: string[]): CCompiler | undefined {
  const identity = executable(argv[0]!);
  const key =
    identity === undefined
      ? undefined
      : sha256(
          JSON.stringify(['cc-probe', argv, identity, CFLAGS, OPENMP_FLAGS, cpus()[0]?.model ?? 'unknown']),
        );
  const kept = key === undefined ? undefined : readCachedText(key, '.json');
  if (kept !== undefined) return { ...(JSON.parse(kept) as CCompiler), argv };
  const probed = probeVersion(argv);
  if (key !== undefined && probed?.openmp) writeCachedText(key, '.json', JSON.stringify(probed));
  return probed;
}

function probeVersion(argv: string[]): CCompiler | undefined {
  const r = spawnSync(argv[0]!, [...argv.slice(1), '--version'], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const omp = spawnSync(
    argv[0]!,
    [...argv.slice(1), ...CFLAGS, ...OPENMP_FLAGS, '-x', 'c', '-', '-o', '/dev/null'],
    {
      input: 'void f(int* x) {\n#pragma omp parallel for\n  for (int i = 0; i < 2; i++) x[i] = i;\n}\n',
      encoding: 'utf8',
    },
  );
  // one preprocessor run for what the host's -march gives: the half type src/renderer/c.ts picks, AVX512-FP16
  const macros = predefinedMacros(argv);
  return {
    argv,
    version: r.stdout.split('\n')[0]!.trim(),
    openmp: omp.status === 0,
    halves: /#define (__FLT16_MAX__|__clang__|__ARM_FP16_FORMAT_IEEE) /.test(macros),
    nativeHalf: /\b__AVX512FP16__\b/.test(macros),
  };
}

/** The compiler's predefined macros for this -march (the host's by default), as `#define` lines. */
function predefinedMacros(argv: readonly string[], march = 'native'): string {
  const r = spawnSync(argv[0]!, [...argv.slice(1), `-march=${march}`, '-dM', '-E', '-x', 'c', '/dev/null'], {
    encoding: 'utf8',
  });
  return r.status === 0 ? r.stdout : '';
}

/** Whether the compiler, for this -march, computes float16 with AVX512-FP16 instructions. */
export const hasNativeHalf = (argv: readonly string[], march: string): boolean =>
  /\b__AVX512FP16__\b/.test(predefinedMacros(argv, march));

const failure = (cc: CCompiler, names: string, why: string, source: string) =>
  new Error(
    `CPU: kernel ${names} does not compile with ${cc.argv.join(' ')}:\n${why}\n--- source ---\n${numberedSource(source)}`,
  );

// the renderers promise code that compiles cleanly under -Wall: a warning is a bug worth seeing
function warnAbout(cc: CCompiler, names: string, stderr: string): void {
  if (stderr.trim() !== '') console.warn(`CPU: kernel ${names}: ${cc.argv.join(' ')} warns:\n${stderr}`);
}

/**
 * Kernels per translation unit at most. A gcc 12 process costs 30-40 ms of CPU more than its kernels do (the
 * transformer step's 113 kernels: 8.1 s one per process, 4.8 s in one unit), so units hold several (UnitBuilds).
 */
export const CC_BATCH = new ContextVar('CC_BATCH', 64);
/** Compiler processes at once; 0: one per core. */
export const CC_JOBS = new ContextVar('CC_JOBS', 0);

/** Kernels compiled together into the shared library `out`. */
export interface Unit {
  readonly kernels: readonly UnitKernel[];
  readonly out: string;
}

/** Compiler processes at once: CC_JOBS, else one per core. */
export const compilerJobs = (): number => CC_JOBS.value || availableParallelism();

// a kernel this big takes seconds: alone in its unit, the other lanes go on with the rest
const UNIT_BYTES = 256 * 1024;

/** Starts compiling `unit` at `level` in `runs`; returns the run's slot. */
export function startUnit(runs: CompilerRuns, cc: CCompiler, { kernels, out }: Unit, level: Level): number {
  writeFileSync(`${out}.c`, unitSource(kernels));
  const argv = [...cc.argv, ...compileFlags(cc, level), '-x', 'c', `${out}.c`, '-o', out, ...LDFLAGS];
  return runs.start({ argv, stderr: `${out}.err` });
}

/** A unit's outcome: undefined where its library built, else the compiler's Error. */
export interface Built<K extends UnitKernel> extends Unit {
  readonly kernels: K[];
  readonly error: Error | undefined;
}

/**
 * How units are cut, by optimization level. first: a unit started while kernels are still being rendered holds
 * this many at least (fewer waste a process). share: what is left at the end is shared out in units of this much
 * C at least: a compiler process costs 30 ms of CPU beyond its kernels, more than splitting a few small kernels
 * between two lanes gains (halving the rest each time a lane freed left units of 2 kernels and 1 at the end of
 * every batch). queued: while every lane is busy, a unit is queued once this much C waits (units taken only as
 * lanes free would grow with how far the compilers fell behind, and the last would run long after the last
 * kernel came). -Og's kernels cost a third as much, so its units are twice as large for the same process cost
 * (the transformer's first step on the 2-core VM, three interleaved rounds: 1.60, 1.61, 1.68 s -> 1.43, 1.33, 1.45).
 */
const UNIT_SIZES: Record<Level, { first: number; share: number; queued: number }> = {
  '-O2': { first: 4, share: 32 * 1024, queued: 128 * 1024 },
  '-Og': { first: 8, share: 64 * 1024, queued: 256 * 1024 },
};

/**
 * Compiles kernels as they are added, in the background, in units of several kernels (UNIT_SIZES): while
 * `first` or more are still to come, a unit starts whenever a compiler lane is free and `first` kernels wait, or
 * is queued once `queued` bytes of C wait, so that the compilers work while the caller renders the next kernels
 * (on one lane fewer: the caller keeps a core, as a compiler in its place slows the rendering that feeds them all;
 * on the 2-core VM the transformer's last kernel was rendered at 1.29 s into its first step, now at 1.00-1.03);
 * `finish` shares what is left between the lanes as they free, by bytes of source, `share` at least (no less
 * left behind). A unit holds at most CC_BATCH kernels and its lane's share
 * of the `count` that may come; a kernel of over UNIT_BYTES is alone (docs/compiling.md says what this
 * gains). `finish` waits for all; a unit that failed is built again kernel by kernel, so that each error is its
 * kernel's own. `libraryOf` names a unit's library.
 */
export class UnitBuilds<K extends UnitKernel> {
  private readonly lanes = compilerJobs();
  private readonly most: number;
  private readonly runs: CompilerRuns;
  private readonly started: { unit: Unit & { kernels: K[] }; slot: number }[] = [];
  private next: K[] = [];
  private bytes = 0;
  /** Kernels still to come. */
  private left: number;

  constructor(
    private readonly cc: CCompiler,
    count: number,
    private readonly libraryOf: (kernels: readonly K[]) => string,
    /** Kernels per unit, where not the rule above: every unit holds this many (the last fewer). */
    private readonly fixed?: number,
    private readonly level: Level = '-O2',
  ) {
    this.most = fixed ?? Math.max(1, Math.min(CC_BATCH.value, Math.ceil(count / this.lanes)));
    this.runs = new CompilerRuns(count, fixed === undefined ? Math.max(1, this.lanes - 1) : this.lanes);
    this.left = count;
  }

  add(kernel: K): void {
    if (this.next.length >= this.most || this.bytes + kernel.source.length > UNIT_BYTES) this.startNext();
    this.next.push(kernel);
    this.bytes += kernel.source.length;
    this.left--;
    const { first, queued } = UNIT_SIZES[this.level];
    // with fewer than `first` kernels to come, what waits is left to finish, which shares it out with them:
    // started or queued, it left the last kernels a process of their own (beautiful_mnist's step: one kernel of
    // 4 KB after a unit of 130 KB; the MLP's: one of 5 KB after a unit of 4 kernels)
    if (
      this.fixed === undefined &&
      this.left >= first &&
      ((this.next.length >= first && this.runs.laneFree()) || this.bytes >= queued)
    )
      this.startNext();
  }

  finish(): Built<K>[] {
    this.runs.setLanes(this.lanes);
    while (this.next.length > 0) {
      if (this.fixed !== undefined) {
        this.startNext(this.most);
        continue;
      }
      // a lane's share of what is left: the lanes busy now take theirs when they free
      this.runs.waitForLane();
      const least = UNIT_SIZES[this.level].share;
      const share = Math.max(this.bytes / this.lanes, least);
      let take = 0;
      let b = 0;
      for (; take < this.next.length && (take === 0 || b < share); take++)
        b += this.next[take]!.source.length;
      // nor is less than a share left behind for a unit of its own (the transformer step's last unit was one
      // kernel of 6 KB, a process of its own at the very end)
      this.startNext(this.bytes - b < least ? this.next.length : take);
    }
    const built = this.started.map(({ unit, slot }) => ({ ...unit, error: this.outcome(unit, slot) }));
    const failed = built.filter((u) => u.error !== undefined && u.kernels.length > 1);
    if (failed.length === 0) return built;
    const kernels = failed.flatMap((u) => u.kernels);
    const alone = new UnitBuilds(this.cc, kernels.length, this.libraryOf, 1, this.level);
    for (const k of kernels) alone.add(k);
    return [...built.filter((u) => !failed.includes(u)), ...alone.finish()];
  }

  /** Starts a unit of the first `take` kernels waiting (all by default). */
  private startNext(take = this.next.length): void {
    if (take === 0) return;
    const kernels = this.next.slice(0, take);
    this.next = this.next.slice(take);
    this.bytes = this.next.reduce((n, k) => n + k.source.length, 0);
    const unit = { kernels, out: this.libraryOf(kernels) };
    this.started.push({ unit, slot: startUnit(this.runs, this.cc, unit, this.level) });
  }

  private outcome({ kernels, out }: Unit, slot: number): Error | undefined {
    const state = this.runs.wait(slot);
    const stderr = existsSync(`${out}.err`) ? readFileSync(`${out}.err`, 'utf8').trim() : '';
    const names = kernels.map((k) => k.name).join(', ');
    if (state === 'ok') {
      warnAbout(this.cc, names, stderr);
      return undefined;
    }
    const why =
      state === 'not started'
        ? `the compiler did not start: ${stderr}`
        : stderr || 'the compiler failed without a message';
    return failure(this.cc, names, why, kernels.length === 1 ? kernels[0]!.source : unitSource(kernels));
  }
}
