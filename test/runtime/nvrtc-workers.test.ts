// NVRTC's compiler processes without a GPU: a stand-in libnvrtc built here with the C compiler (its "cubin" is
// the source's bytes, and a source with `#error` fails with a log) runs the whole path: worker threads, one
// process each, a kernel a message, results in the order added; and a process that cannot start fails its
// kernels at once, naming why.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findCompiler } from '../../src/runtime/cc.ts';
import { NvrtcBatch } from '../../src/runtime/nvrtc-workers.ts';

const STAND_IN = `
#include <stdlib.h>
#include <string.h>
typedef struct { char *src; size_t n; int bad; } prog;
int nvrtcCreateProgram(prog **p, const char *src, const char *name, int nh, const char **h, const char **in) {
  prog *q = malloc(sizeof *q);
  q->n = strlen(src); q->src = malloc(q->n + 1); memcpy(q->src, src, q->n + 1);
  q->bad = strstr(src, "#error") != 0;
  *p = q; return 0;
}
int nvrtcCompileProgram(prog *p, int n, const char **o) { return p->bad ? 6 : 0; }
int nvrtcGetProgramLogSize(prog *p, size_t *s) { *s = 6; return 0; }
int nvrtcGetProgramLog(prog *p, char *l) { memcpy(l, "oops!", 6); return 0; }
int nvrtcGetCUBINSize(prog *p, size_t *s) { *s = p->n; return 0; }
int nvrtcGetCUBIN(prog *p, char *c) { memcpy(c, p->src, p->n); return 0; }
int nvrtcDestroyProgram(prog **p) { free((*p)->src); free(*p); *p = 0; return 0; }
const char *nvrtcGetErrorString(int r) { return r ? "NVRTC_ERROR_COMPILATION" : "NVRTC_SUCCESS"; }
`;

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-nvrtc-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('NVRTC compiler processes', () => {
  it('compile each kernel added, in order, and name a failing one with its log', () => {
    writeFileSync(join(dir, 'nvrtc.c'), STAND_IN);
    const library = join(dir, 'libnvrtc-stand-in.so');
    const [cc, ...args] = findCompiler().argv;
    execFileSync(cc!, [...args, '-shared', '-fPIC', '-o', library, join(dir, 'nvrtc.c')]);
    const batch = new NvrtcBatch(library);
    const sources = Array.from({ length: 40 }, (_, i) => (i === 7 ? '#error broken' : `kernel ${i}`));
    sources.forEach((source, i) => {
      batch.add({ name: `k${i}`, source, options: ['-w'], out: join(dir, `${i}.cubin`) });
    });
    const results = batch.results();
    results.forEach((r, i) => {
      if (i === 7)
        expect((r as Error).message).toBe(
          'CUDA: NVRTC cannot compile kernel k7: NVRTC_ERROR_COMPILATION:\noops!',
        );
      else expect(new TextDecoder().decode(r as Uint8Array)).toBe(`kernel ${i}`);
    });
  }, 30_000);

  it('fail the kernels of a process that ends (here: no such library), at once and naming why', () => {
    const batch = new NvrtcBatch(join(dir, 'no-libnvrtc.so'));
    for (const name of ['a', 'b', 'c'])
      batch.add({ name, source: '', options: [], out: join(dir, `${name}.cubin`) });
    for (const [i, r] of batch.results().entries())
      expect((r as Error).message).toMatch(
        new RegExp(
          `kernel ${'abc'[i]}: its compiler process ended \\(exit code 1\\): Error: .*shared library`,
        ),
      );
  }, 30_000);
});
