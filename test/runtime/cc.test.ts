// The kernel compile flags against miscompiles seen in the system compiler (gcc 12.2's loop vectorizer),
// float16 arithmetic that does not depend on the host's instruction set, and how kernels are grouped into units.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET } from '../../src/codegen/opt/opts.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderC } from '../../src/renderer/c.ts';
import { compileFlags, findCompiler, hasNativeHalf, type Level, UnitBuilds } from '../../src/runtime/cc.ts';
import { Tensor } from '../../src/tensor/index.ts';

/** Builds `source` as a program with the kernels' flags (an executable instead of a library) and runs it. */
function run(source: string): string {
  const cc = findCompiler();
  const exe = join(mkdtempSync(join(tmpdir(), 'tsgrad-cc-')), 'a.out');
  const flags = compileFlags(cc).filter((f) => f !== '-shared' && f !== '-fPIC');
  const build = spawnSync(cc.argv[0]!, [...cc.argv.slice(1), ...flags, '-x', 'c', '-', '-o', exe], {
    input: source,
  });
  expect(build.status, String(build.stderr)).toBe(0);
  return String(spawnSync(exe).stdout).trim();
}

/** The assembly gcc or clang makes of `source` at `level` for the CPU `march`, with the kernels' other flags. */
function assembly(source: string, level: Level, march: string): string {
  const cc = findCompiler();
  const flags = compileFlags(cc, level)
    .filter((f) => f !== '-shared' && f !== '-fopenmp' && !f.startsWith('-Wl'))
    .map((f) => (f === '-march=native' ? `-march=${march}` : f));
  const r = spawnSync(cc.argv[0]!, [...cc.argv.slice(1), ...flags, '-S', '-x', 'c', '-', '-o', '-'], {
    input: source,
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

describe('kernel compile flags', () => {
  // as a scatter's kernel: gcc -O3 -march=native (AVX2 or AVX-512) vectorized the row loop and returned 0 at
  // the unhit positions instead of self
  it('keep a select between a sum of selects and a load', () => {
    const source = `#include <stdio.h>
__attribute__((noinline)) void k(float* restrict out, const int* restrict last, const float* restrict self) {
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 5; c++) {
      int i = r * 5 + c; int v = last[i];
      float acc = (v == 0 ? 2.5f : 0.0f) + (v == 1 ? 2.5f : 0.0f);
      out[i] = v >= 0 ? acc : self[i];
    }
}
int main(void) {
  int last[20] = {-1,1,-1,0,-1,-1,0,-1,1,-1,-1,1,0,-1,-1,-1,-1,-1,0,1};
  float self[20], out[20];
  for (int i = 0; i < 20; i++) self[i] = i + 1;
  k(out, last, self);
  for (int i = 0; i < 20; i++) printf("%g ", out[i]);
}`;
    expect(run(source)).toBe('1 2.5 3 2.5 5 6 2.5 8 2.5 10 11 2.5 2.5 14 15 16 17 18 2.5 2.5');
  });

  // as linear interpolation's kernel: with AVX512VL, lanes 1-3 of a vector times a scalar, selected lane by
  // lane by a scalar bool, came out 0
  it('keep a lane-wise select of a vector times a scalar', () => {
    const source = `#include <stdio.h>
typedef float f4 __attribute__((vector_size(16)));
__attribute__((noinline)) void k(float* restrict out, const float* restrict in, int sel, float w) {
  f4 acc = {0, 0, 0, 0};
  for (int r = 0; r < 3; r++) {
    _Bool c = r == sel;
    f4 v;
    __builtin_memcpy(&v, in + 4 * r, sizeof v);
    f4 a = v * w;
    f4 s = {c ? a[0] : 0.0f, c ? a[1] : 0.0f, c ? a[2] : 0.0f, c ? a[3] : 0.0f};
    acc = acc + s;
  }
  __builtin_memcpy(out, &acc, sizeof acc);
}
int main(void) {
  float in[12], out[4];
  for (int i = 0; i < 12; i++) in[i] = i + 1;
  k(out, in, 0, 1.0f);
  printf("%g %g %g %g", out[0], out[1], out[2], out[3]);
}`;
    expect(run(source)).toBe('1 2 3 4');
  });

  // a lifted constant's kernel (test/engine/lift.test.ts): on a Sapphire Rapids host gcc 12 fused the float16
  // multiply and add into one float16 FMA (one rounding), and its baked twin kept no float16 rounding at all (the
  // SLP vectorizer dropped the casts): one byte differed. Checked in the assembly: this host cannot run it.
  it('make a quick build (-Og) of vector sqrt, FMA and exp2 instructions, not calls', () => {
    const x = new Tensor(new Float32Array(4096), { device: 'CPU' });
    const render = (t: Tensor) => {
      const { name, linear } = lowerKernel(scheduleOf([t]).kernels.at(-1)!.ast, {
        target: { ...CPU_TARGET, vectors: true, threads: 1, registers: 128, fusedMultiplyAdds: true },
      });
      return renderC(name, linear);
    };
    // as in Adam's update: a vector sqrt, a multiply and add that the IR fuses, and a vector exp2
    const vector = render(x.sqrt().mul(x).add(x).add(x.exp2()));
    expect(vector).toMatch(/tg_sqrt_float\d+\(/);
    expect(vector).toMatch(/tg_fma_float\d+\(/);
    const scalar = render(x.sum().sqrt());
    expect(scalar).toMatch(/sqrtf\(/);
    const gcc = assembly(vector + scalar, '-Og', 'skylake-avx512');
    expect(gcc).toMatch(/\bvsqrtps\b/);
    expect(gcc).toMatch(/\bvfmadd\d+ps\b/);
    // -Og inlines only what must be: the helpers once were calls per element, and sqrt a libm call
    expect(gcc).not.toMatch(/\bcall\b/);
  });

  it('compute float16 in float, rounding after every op, on a host with AVX512-FP16', () => {
    const cc = findCompiler();
    const source = `typedef _Float16 tg_half;
void k(tg_half* restrict out, const float* restrict in, const tg_half* restrict c) {
  tg_half v = c[0];
  for (int i = 0; i < 8; i++) { tg_half a = (tg_half)in[i]; tg_half m = a * v; out[i] = m + v; }
}
void baked(tg_half* restrict out, const float* restrict in) {
  for (int i = 0; i < 8; i++) { tg_half a = (tg_half)in[i]; tg_half m = a * 0.300048828125f; out[i] = m + 0.300048828125f; }
}`;
    const assembly = (nativeHalf: boolean) => {
      const flags = compileFlags({ ...cc, nativeHalf })
        .filter((f) => f !== '-shared' && f !== '-fopenmp' && !f.startsWith('-Wl'))
        .map((f) => (f === '-march=native' ? '-march=sapphirerapids' : f));
      const r = spawnSync(cc.argv[0]!, [...cc.argv.slice(1), ...flags, '-S', '-x', 'c', '-', '-o', '-'], {
        input: source,
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout;
    };
    expect(hasNativeHalf(cc.argv, 'sapphirerapids')).toBe(true);
    const halfOps = /\bv(f[a-z]*\d*|mul|add|sub|div)[ps]h\b/;
    expect(assembly(false)).toMatch(halfOps); // what the flag is against
    const fixed = assembly(true);
    expect(fixed).not.toMatch(halfOps);
    // in, a * v, m + v, each rounded to float16, in both kernels
    expect(fixed.match(/\bvcvtps2ph\b/g)!.length).toBeGreaterThanOrEqual(2 * 3 * 8);
  });
});

describe('compiler units', () => {
  it('start while kernels are still coming, whenever a lane is free, and build every kernel once', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tsgrad-units-'));
    const kernels = Array.from({ length: 12 }, (_, i) => ({
      name: `k${i}`,
      symbol: `k${i}`,
      source: `void k${i}(int* restrict data0) { data0[0] = ${i}; }`,
    }));
    const unitsOn = (jobs: number) =>
      Context.with({ CC_JOBS: jobs }, () => {
        let n = 0;
        const units = new UnitBuilds(findCompiler(), kernels.length, () => join(dir, `u${n++}.so`));
        for (const k of kernels) units.add(k);
        return units.finish();
      });
    // while kernels are still coming, the main thread rendering them keeps a core: on 3 lanes, the first unit
    // starts once 4 kernels wait with both lanes free, the second with one lane busy
    const built = unitsOn(3);
    expect(built.slice(0, 2).map((u) => u.kernels.map((k) => k.name))).toEqual([
      ['k0', 'k1', 'k2', 'k3'],
      ['k4', 'k5', 'k6', 'k7'],
    ]);
    expect(built.flatMap((u) => u.kernels.map((k) => k.name))).toEqual(kernels.map((k) => k.name));
    expect(built.map((u) => u.error)).toEqual(built.map(() => undefined));
    // on 2, the second waits for the first (it compiles for milliseconds, the kernels come in microseconds)
    // until it holds a lane's share of the batch
    expect(unitsOn(2).map((u) => u.kernels.map((k) => k.name))).toEqual([
      ['k0', 'k1', 'k2', 'k3'],
      ['k4', 'k5', 'k6', 'k7', 'k8', 'k9'],
      ['k10', 'k11'],
    ]);
  });

  /** The units of 8 small kernels (two units of 4 start as they come) and then `rest`, built on 3 lanes. */
  function unitsOf(rest: readonly number[]): string[][] {
    const dir = mkdtempSync(join(tmpdir(), 'tsgrad-units-'));
    const kernels = [...Array<number>(8).fill(0), ...rest].map((bytes, i) => ({
      name: `k${i}`,
      symbol: `k${i}`,
      // a comment of `bytes` counts as C to share, as a kernel's body does
      source: `/*${'x'.repeat(bytes)}*/ void k${i}(int* restrict data0) { data0[0] = ${i}; }`,
    }));
    const built = Context.with({ CC_JOBS: 3 }, () => {
      let n = 0;
      const units = new UnitBuilds(findCompiler(), kernels.length, () => join(dir, `u${n++}.so`));
      for (const k of kernels) units.add(k);
      return units.finish();
    });
    expect(built.map((u) => u.error)).toEqual(built.map(() => undefined));
    return built.map((u) => u.kernels.map((k) => k.name));
  }

  it('take what is left at the end in one unit where it is a few small kernels', () => {
    // halving it each time a lane freed gave units of 2, 1 and 1 kernels, a compiler process each
    expect(unitsOf([0, 0, 0, 0]).slice(2)).toEqual([['k8', 'k9', 'k10', 'k11']]);
  });

  it('share what is left at the end between the lanes where it is worth a process', () => {
    // half of it, then the rest: halving that too gave units of 1 kernel
    expect(unitsOf([24_000, 24_000, 20_000, 20_000]).slice(2)).toEqual([
      ['k8', 'k9'],
      ['k10', 'k11'],
    ]);
  });

  it('leave no less than a share behind for a process of its own', () => {
    // a share of 32 KB took the 40 KB kernel, and the rest, 5 KB, was a unit alone
    expect(unitsOf([40_000, 0, 0, 0, 5_000]).slice(2)).toEqual([['k8', 'k9', 'k10', 'k11', 'k12']]);
    expect(unitsOf([40_000, 0, 0, 0, 40_000]).slice(2)).toEqual([['k8'], ['k9', 'k10', 'k11', 'k12']]);
  });

  it('queue no unit while fewer than 4 kernels are to come: they join it at the end', () => {
    // queued at 128 KB, the 140 KB kernel left the last three a process of their own
    expect(unitsOf([140_000, 1_000, 0, 0]).slice(2)).toEqual([['k8', 'k9', 'k10', 'k11']]);
  });
});

describe('compiler probes', () => {
  it('run once per compiler executable, kept in the disk cache until the executable changes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tsgrad-probe-'));
    const log = join(dir, 'calls');
    const cc = join(dir, 'cc');
    // a compiler that logs each run, then runs the one the suite uses
    writeFileSync(cc, `#!/bin/sh\necho "$*" >> ${log}\nexec ${findCompiler().argv.join(' ')} "$@"\n`);
    chmodSync(cc, 0o755);
    const script = join(dir, 'probe.ts');
    const source = fileURLToPath(new URL('../../src/runtime/cc.ts', import.meta.url));
    writeFileSync(script, `import { findCompiler } from '${source}';\nconsole.log(findCompiler().openmp);\n`);
    const tsx = fileURLToPath(new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url));
    const probe = () => {
      writeFileSync(log, '');
      const r = spawnSync(process.execPath, [tsx, script], {
        env: { ...process.env, CC: cc, CACHEDIR: join(dir, 'cache') },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(0);
      return readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '').length;
    };
    // a compiler without OpenMP is asked every time (libgomp may be installed since)
    const kept = findCompiler().openmp ? 0 : 3;
    expect(probe()).toBe(3); // --version, the OpenMP build, the predefined macros
    expect(probe()).toBe(kept);
    chmodSync(cc, 0o700); // a change to the executable (its change time) asks again
    expect(probe()).toBe(3);
    expect(probe()).toBe(kept);
  });
});
