// NVRTC's compiler processes without a GPU: a stand-in libnvrtc built here with the C compiler (its "cubin" is
// the source's bytes, a compile takes 20 ms, a source with `#error` fails with a log and one with `#crash` ends
// its process) runs the whole path: worker threads, one process each, a unit of kernels a message (a kernel alone
// while the compilers keep up); a failed unit compiled again kernel by kernel; a process that ends fails its
// kernels, naming why, and the others take the rest.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findCompiler } from '../../src/runtime/cc.ts';
import { NvrtcBatch } from '../../src/runtime/nvrtc-workers.ts';

const STAND_IN = `
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef struct { char *src; size_t n; int bad; } prog;
int nvrtcCreateProgram(prog **p, const char *src, const char *name, int nh, const char **h, const char **in) {
  prog *q = malloc(sizeof *q);
  q->n = strlen(src); q->src = malloc(q->n + 1); memcpy(q->src, src, q->n + 1);
  q->bad = strstr(src, "#error") != 0;
  *p = q; return 0;
}
int nvrtcCompileProgram(prog *p, int n, const char **o) {
  usleep(20000);
  if (strstr(p->src, "#crash")) abort();
  return p->bad ? 6 : 0;
}
int nvrtcGetProgramLogSize(prog *p, size_t *s) { *s = 6; return 0; }
int nvrtcGetProgramLog(prog *p, char *l) { memcpy(l, "oops!", 6); return 0; }
int nvrtcGetCUBINSize(prog *p, size_t *s) { *s = p->n; return 0; }
int nvrtcGetCUBIN(prog *p, char *c) { memcpy(c, p->src, p->n); return 0; }
int nvrtcDestroyProgram(prog **p) { free((*p)->src); free(*p); *p = 0; return 0; }
const char *nvrtcGetErrorString(int r) { return r ? "NVRTC_ERROR_COMPILATION" : "NVRTC_SUCCESS"; }
`;

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-nvrtc-test-'));
const library = join(dir, 'libnvrtc-stand-in.so');
beforeAll(() => {
  writeFileSync(join(dir, 'nvrtc.c'), STAND_IN);
  const [cc, ...args] = findCompiler().argv;
  execFileSync(cc!, [...args, '-shared', '-fPIC', '-o', library, join(dir, 'nvrtc.c')]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A kernel for each source (named `prefix` and its number) compiled by `lib`'s compiler processes; the units. */
function compileAll(lib: string, sources: readonly string[], prefix: string) {
  const batch = new NvrtcBatch(lib, [], dir, sources.length);
  const kernels = sources.map((source, i) => ({ name: `${prefix}${i}`, symbol: `s${prefix}${i}`, source }));
  for (const k of kernels) batch.add(k);
  return { kernels, units: batch.results() };
}

describe('NVRTC compiler processes', () => {
  it('compile kernels in units once they wait, each renamed to its symbol; a failed unit kernel by kernel', () => {
    const sources = Array.from({ length: 40 }, (_, i) => (i === 7 ? '#error broken' : `kernel ${i}`));
    const { kernels, units } = compileAll(library, sources, 'k');
    // the first kernel found every compiler free, and went alone; the others waited, and went together
    expect(units[0]!.kernels.map((k) => k.name)).toEqual(['k0']);
    expect(units.some((u) => u.kernels.length > 1)).toBe(true);
    expect(units.flatMap((u) => u.kernels.map((k) => k.name)).sort()).toEqual(
      kernels.map((k) => k.name).sort(),
    );
    for (const { kernels: unit, cubin } of units)
      if (unit.some((k) => k.name === 'k7')) {
        expect(unit).toHaveLength(1);
        expect((cubin as Error).message).toBe(
          'CUDA: NVRTC cannot compile kernel k7: NVRTC_ERROR_COMPILATION:\noops!',
        );
      } else {
        const text = new TextDecoder().decode(cubin as Uint8Array);
        for (const k of unit) expect(text).toContain(`#define ${k.name} ${k.symbol}\n#line 1\n${k.source}\n`);
      }
  }, 30_000);

  it('fail the kernels of a process that crashes, naming why, and compile the rest in the other processes', () => {
    const sources = Array.from({ length: 20 }, (_, i) => (i === 0 ? '#crash' : `kernel ${i}`));
    const { units } = compileAll(library, sources, 'c');
    for (const { kernels: unit, cubin } of units)
      if (unit[0]!.name === 'c0')
        expect((cubin as Error).message).toMatch(
          /^CUDA: NVRTC cannot compile kernel c0: its compiler process ended \(SIGABRT\)/,
        );
      // with one compiler, none is left for the rest
      else if (availableParallelism() === 1) expect(cubin).toBeInstanceOf(Error);
      else for (const k of unit) expect(new TextDecoder().decode(cubin as Uint8Array)).toContain(k.source);
  }, 30_000);

  it('fail the kernels of a process that ends (here: no such library), at once and naming why', () => {
    const { units } = compileAll(join(dir, 'no-libnvrtc.so'), ['', '', ''], 'a');
    expect(units.flatMap((u) => u.kernels.map((k) => k.name)).sort()).toEqual(['a0', 'a1', 'a2']);
    for (const { kernels, cubin } of units)
      expect((cubin as Error).message).toMatch(
        new RegExp(
          `kernel ${kernels.map((k) => k.name).join(', ')}: its compiler process ended \\(exit code 1\\): Error: .*shared library`,
        ),
      );
  }, 30_000);
});
