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

const failure = (cc: CCompiler, name: string, why: string, source: string) =>
  new Error(
    `CPU: kernel ${name} does not compile with ${cc.argv.join(' ')}:\n${why}\n--- source ---\n${numberedSource(source)}`,
  );

// the renderers promise code that compiles cleanly under -Wall: a warning is a bug worth seeing
function warnAbout(cc: CCompiler, name: string, stderr: string): void {
  if (stderr.trim() !== '') console.warn(`CPU: kernel ${name}: ${cc.argv.join(' ')} warns:\n${stderr}`);
}

/** Compiles C `source` into the shared library `out`; a failure throws with the listing and the compiler's message. */
export function compileC(cc: CCompiler, name: string, source: string, out: string): void {
  const args = [...cc.argv.slice(1), ...compileFlags(cc), '-x', 'c', '-', '-o', out, ...LDFLAGS];
  const r = spawnSync(cc.argv[0]!, args, { input: source, encoding: 'utf8' });
  if (r.status !== 0)
    throw failure(
      cc,
      name,
      r.error?.message ?? (r.stderr.trim() || `exit status ${r.status ?? r.signal}`),
      source,
    );
  warnAbout(cc, name, r.stderr);
}

const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Compiles each kernel into its shared library `out`, several compilers at once (one shell runs them in
 * `parallel` lanes, round robin). Sources, messages and status files go beside each out. Returns, per kernel,
 * undefined when it built, else the Error compileC would have thrown.
 */
export function compileCMany(
  cc: CCompiler,
  kernels: readonly { name: string; source: string; out: string }[],
  parallel = availableParallelism(),
): (Error | undefined)[] {
  const lanes: string[][] = Array.from({ length: Math.min(parallel, kernels.length) }, () => []);
  kernels.forEach(({ source, out }, i) => {
    writeFileSync(`${out}.c`, source);
    const argv = [...cc.argv, ...compileFlags(cc), '-x', 'c', `${out}.c`, '-o', out, ...LDFLAGS].map(
      shellWord,
    );
    const [err, status] = [`${out}.err`, `${out}.status`].map(shellWord);
    lanes[i % lanes.length]!.push(`${argv.join(' ')} </dev/null 2>${err}; echo $? >${status}`);
  });
  // the script goes in on stdin: a long one would exceed the size limit of one argument
  const script = `${lanes.map((cmds) => `(\n${cmds.join('\n')}\n) &`).join('\n')}\nwait\n`;
  const r = spawnSync('sh', ['-s'], { input: script, encoding: 'utf8' });
  return kernels.map(({ name, source, out }) => {
    const read = (ext: string) =>
      existsSync(out + ext) ? readFileSync(out + ext, 'utf8').trim() : undefined;
    const [status, stderr] = [read('.status'), read('.err') ?? ''];
    if (status === '0') {
      warnAbout(cc, name, stderr);
      return undefined;
    }
    const why =
      status === undefined
        ? `the batch shell did not run it (${r.error?.message ?? r.stderr.trim()})`
        : stderr || `exit status ${status}`;
    return failure(cc, name, why, source);
  });
}
