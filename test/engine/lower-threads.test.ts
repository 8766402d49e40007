// Kernels lowered on worker threads (src/runtime/lower-threads.ts) render the same source as on the main thread,
// from kernel ASTs sent as plain data (src/engine/lower-codec.ts).
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import {
  type LowerJob,
  lowerFromJob,
  lowerThreads,
  renderObservers,
  targetOf,
} from '../../src/engine/compile.ts';
import { decodeGraph, decodeValue, encodeGraph, encodeValue } from '../../src/engine/lower-codec.ts';
import { Context, ContextVar } from '../../src/helpers.ts';
import { AddrSpace } from '../../src/index.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import type { UOp } from '../../src/uop/uop.ts';

let kernels: UOp[] | undefined;
/** The kernel ASTs a small training step lowers for the CPU (shapes no other test uses: new kernels). */
function stepKernels(): UOp[] {
  if (kernels !== undefined) return kernels;
  const asts: UOp[] = (kernels = []);
  renderObservers.set('C', (_name, _linear, ast) => void asts.push(ast));
  try {
    Context.with({ DEV: 'CPU' }, () => {
      Tensor.manualSeed(5);
      const w = Tensor.randn([19, 13]).requiresGrad_();
      const x = Tensor.randn([7, 19]);
      const loss = x.matmul(w).relu().logSoftmax(-1).mean().add(w.square().sum().mul(1e-3));
      loss.backward();
      w.grad!.realize(loss);
    });
  } finally {
    renderObservers.delete('C');
  }
  return asts;
}

describe('kernels as plain data', () => {
  it('decode to the same nodes (the same content keys)', () => {
    const asts = stepKernels();
    expect(asts.length).toBeGreaterThan(3);
    for (const ast of asts) {
      const copy = decodeGraph(structuredClone(encodeGraph(ast)));
      expect(copy.key).toBe(ast.key);
      // hash-consed: the very node, while the original lives
      expect(copy).toBe(ast);
    }
  });

  it('keep DTypes, vectors and pointers as the one object the IR compares', () => {
    const kinds = [dtypes.float16, dtypes.int32.vec(4), dtypes.float32.vec(8).ptr(64, AddrSpace.LOCAL)];
    const got = decodeValue(structuredClone(encodeValue({ kinds, n: -0, big: 3n }))) as Record<
      string,
      unknown
    >;
    expect(got.kinds).toEqual(kinds);
    for (const [i, d] of (got.kinds as unknown[]).entries()) expect(d).toBe(kinds[i]);
    expect(Object.is(got.n, -0)).toBe(true);
    expect(got.big).toBe(3n);
    expect(() => encodeValue({ f: () => 0 })).toThrow(/cannot send a function/);
  });
});

describe('lowering threads', () => {
  const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  /** The CPU's job, with every setting as it is now. */
  const cpuJob = (): LowerJob => {
    const backend = Device.get('CPU');
    return {
      language: 'C',
      target: targetOf(backend),
      lacks: [...backend.lacks()],
      settings: [...ContextVar.registry].map(([name, v]) => [name, v.value]),
    };
  };
  /**
   * Each kernel as two threads and the main thread lower `asts` with `job` (the main thread with `here`, slowly,
   * so that the threads take some), and how many the main thread lowered.
   */
  function lowerOnThreads(asts: UOp[], job: LowerJob, here: (i: number) => unknown): [unknown[], number] {
    let lowered = 0;
    return Context.with({ LOWER_THREADS: 2 }, () => {
      let batch: ReturnType<NonNullable<typeof lowerThreads.start>>;
      // none while the threads' modules load
      for (let waited = 0; batch === undefined && waited < 30_000; waited += 50) {
        batch = lowerThreads.start!(asts, job, (i) => {
          lowered++;
          sleep(50);
          return here(i) as ReturnType<typeof lowerFromJob>;
        });
        if (batch === undefined) sleep(50);
      }
      return [asts.map((_, i) => batch!.take(i)), lowered];
    });
  }

  it('render the same source as the main thread, each kernel once', () => {
    const asts = stepKernels();
    const job = cpuJob();
    const here = asts.map((ast) => lowerFromJob(ast, job));
    const [got, lowered] = lowerOnThreads(asts, job, (i) => lowerFromJob(asts[i]!, job));
    expect(got).toEqual(here);
    expect(lowered).toBeLessThan(asts.length);
  });

  it('leave a kernel they cannot lower to the main thread', () => {
    const asts = stepKernels();
    const job = cpuJob();
    const here = asts.map((ast) => lowerFromJob(ast, job));
    // a language no thread has a renderer for: each of their kernels fails there
    const [got, lowered] = lowerOnThreads(asts, { ...job, language: 'NO SUCH LANGUAGE' }, (i) => here[i]);
    expect(got).toEqual(here);
    expect(lowered).toBe(asts.length);
  });

  it('are none where LOWER_THREADS is 0', () => {
    const job = cpuJob();
    Context.with({ LOWER_THREADS: 0 }, () => {
      expect(lowerThreads.start!([], job, () => ({ name: '', source: '', display: '', flops: 0 }))).toBe(
        undefined,
      );
    });
  });
});
