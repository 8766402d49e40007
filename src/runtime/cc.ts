// The system C compiler: finding it (CC, else clang, else gcc) and compiling kernel source to a shared library.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { ContextVar } from '../helpers.ts';
import { numberedSource } from './backend.ts';

/** The C compiler command (words split on spaces, as make does); empty: gcc or clang (see findCompiler). */
export const CC = new ContextVar<string>('CC', '');

export const CFLAGS: readonly string[] = [
  '-O3',
  '-march=native',
  '-shared',
  '-fPIC',
  '-Wall',
  // 64-byte vector arguments of the helper functions are fine without AVX-512: no ABI crosses a library
  '-Wno-psabi',
  '-Werror=implicit-function-declaration',
  // integers wrap, as the IR says and the JS backend does (without it gcc optimizes through overflow)
  '-fwrapv',
];
/**
 * gcc 12's loop vectorizer miscompiles kernels with AVX2 and AVX-512 (test/runtime/cc.test.ts has two); our
 * kernels carry their own vector types where lanes pay, so only scalar loops lose it. clang has no such flag.
 */
const GCC_FLAGS: readonly string[] = ['-fno-tree-loop-vectorize'];
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
}

/** Every flag a kernel compiles with. */
export const compileFlags = (cc: CCompiler): readonly string[] => [
  ...CFLAGS,
  ...(cc.version.includes('clang') ? [] : GCC_FLAGS),
  ...(cc.openmp ? OPENMP_FLAGS : []),
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
      const x = probeVersion(argv);
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
  return { argv, version: r.stdout.split('\n')[0]!.trim(), openmp: omp.status === 0 };
}

const failure = (cc: CCompiler, names: string, why: string, source: string) =>
  new Error(
    `CPU: kernel ${names} does not compile with ${cc.argv.join(' ')}:\n${why}\n--- source ---\n${numberedSource(source)}`,
  );

// the renderers promise code that compiles cleanly under -Wall: a warning is a bug worth seeing
function warnAbout(cc: CCompiler, names: string, stderr: string): void {
  if (stderr.trim() !== '') console.warn(`CPU: kernel ${names}: ${cc.argv.join(' ')} warns:\n${stderr}`);
}

/**
 * Kernels per translation unit at most. A gcc process costs about 170 ms of CPU before its first kernel and
 * about 30 ms per kernel after (bench/compile_batch.ts), so units are as big as the cores allow.
 */
export const CC_BATCH = new ContextVar('CC_BATCH', 64);
/** Compiler processes at once; 0: one per core. */
export const CC_JOBS = new ContextVar('CC_JOBS', 0);

/** A kernel of a translation unit: its source defines `name`, which the unit exports as `symbol`. */
export interface UnitKernel {
  readonly name: string;
  readonly source: string;
  readonly symbol: string;
}

/** Kernels compiled together into the shared library `out`. */
export interface Unit {
  readonly kernels: readonly UnitKernel[];
  readonly out: string;
}

/**
 * One translation unit of several kernels' sources: each function is renamed to its symbol (two kernels may
 * share a name) and its lines are numbered from 1 as in its own source. The C renderer guards what kernels
 * share (src/renderer/c.ts `once`), so each helper is defined once.
 */
export const unitSource = (kernels: readonly UnitKernel[]): string =>
  kernels.map((k) => `#define ${k.name} ${k.symbol}\n#line 1\n${k.source}\n#undef ${k.name}\n`).join('');

/**
 * Groups kernels into units for `lanes` compilers: as many units as lanes where there are kernels enough, at
 * most CC_BATCH kernels each, and a kernel of more than UNIT_BYTES of source alone (it takes seconds: the
 * other lanes go on with the rest).
 */
export function unitsOf<K extends { source: string }>(kernels: readonly K[], lanes: number): K[][] {
  const most = Math.max(1, Math.min(CC_BATCH.value, Math.ceil(kernels.length / lanes)));
  const units: K[][] = [];
  let bytes = 0;
  for (const k of kernels) {
    const last = units.at(-1);
    if (last === undefined || last.length >= most || bytes + k.source.length > UNIT_BYTES) {
      units.push([k]);
      bytes = k.source.length;
    } else {
      last.push(k);
      bytes += k.source.length;
    }
  }
  return units;
}
const UNIT_BYTES = 256 * 1024;

/** Compiler processes at once: CC_JOBS, else one per core. */
export const compilerJobs = (): number => CC_JOBS.value || availableParallelism();

const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Compiles each unit into its shared library, `compilerJobs()` compilers at once (one shell runs them in lanes,
 * the biggest units first, each to the lane with the least source). Sources, messages and status files go
 * beside each out. Returns, per unit, undefined when it built, else an Error with the compiler's message and
 * the source (of its one kernel, or of the whole unit).
 */
export function compileUnits(cc: CCompiler, units: readonly Unit[]): (Error | undefined)[] {
  const lanes = Array.from({ length: Math.min(compilerJobs(), units.length) }, () => ({
    bytes: 0,
    cmds: [] as string[],
  }));
  const sources = units.map((u) => (u.kernels.length === 1 ? u.kernels[0]!.source : unitSource(u.kernels)));
  const order = units.map((_, i) => i).sort((a, b) => sources[b]!.length - sources[a]!.length);
  for (const i of order) {
    const { out, kernels } = units[i]!;
    writeFileSync(`${out}.c`, unitSource(kernels));
    const argv = [...cc.argv, ...compileFlags(cc), '-x', 'c', `${out}.c`, '-o', out, ...LDFLAGS].map(
      shellWord,
    );
    const [err, status] = [`${out}.err`, `${out}.status`].map(shellWord);
    const lane = lanes.reduce((a, b) => (b.bytes < a.bytes ? b : a));
    lane.cmds.push(`${argv.join(' ')} </dev/null 2>${err}; echo $? >${status}`);
    lane.bytes += sources[i]!.length;
  }
  // the script goes in on stdin: a long one would exceed the size limit of one argument
  const script = `${lanes.map(({ cmds }) => `(\n${cmds.join('\n')}\n) &`).join('\n')}\nwait\n`;
  const r = spawnSync('sh', ['-s'], { input: script, encoding: 'utf8' });
  return units.map(({ kernels, out }, i) => {
    const read = (ext: string) =>
      existsSync(out + ext) ? readFileSync(out + ext, 'utf8').trim() : undefined;
    const [status, stderr] = [read('.status'), read('.err') ?? ''];
    const names = kernels.map((k) => k.name).join(', ');
    if (status === '0') {
      warnAbout(cc, names, stderr);
      return undefined;
    }
    const why =
      status === undefined
        ? `the batch shell did not run it (${r.error?.message ?? r.stderr.trim()})`
        : stderr || `exit status ${status}`;
    return failure(cc, names, why, sources[i]!);
  });
}
