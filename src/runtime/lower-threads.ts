// Kernels lowered on worker threads (lowerThreads in src/engine/compile.ts): a batch's new kernels are shared out
// through a counter, the main thread taking them too while it waits for the one its device asks for next, so that
// a first step's lowering spreads over the machine's cores. Each thread lowers with the same code, settings and
// target, so a kernel's C or CUDA is the same whichever thread rendered it.

import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { type Lowered, type LowerJob, lowerThreads } from '../engine/compile.ts';
import { encodeGraph, encodeValue } from '../engine/lower-codec.ts';
import { ContextVar } from '../helpers.ts';
import type { UOp } from '../uop/uop.ts';
import type { BatchText, LowerBatch } from './lower-thread.ts';

/**
 * Lowering threads besides the main thread; -1: a quarter of the cores beyond two, at most 4 (none on fewer than
 * six cores: the device's compilers need them; 3 on the H100's host of 16).
 */
export const LOWER_THREADS = new ContextVar('LOWER_THREADS', -1);

/**
 * How long the main thread waits for a kernel another thread is lowering before it lowers the kernel itself: a
 * thread's first kernels run cold (its JIT has not compiled the lowering yet), and waiting for them at the end of
 * a batch cost more than lowering them again (beautiful_mnist's first step on CUDA, 16 cores, 3 threads: 0.54,
 * 0.57 s waiting up to 10 ms, 0.46, 0.45 s up to 3 ms, 0.46, 0.43 s without threads).
 */
const PATIENCE_MS = 3;

const threads: { worker: Worker; port: MessagePort }[] = [];
/** [0]: the threads whose modules have loaded (each adds 1). */
const ready = new Int32Array(new SharedArrayBuffer(4));
let batches = 0;

function wanted(): number {
  if (LOWER_THREADS.value >= 0) return LOWER_THREADS.value;
  return Math.min(4, Math.max(0, Math.floor((availableParallelism() - 2) / 4)));
}

/** What a thread imports first: under tsx (the sources, not dist/), tsx's loader; null where that is missing. */
let boot: { entry: string; tsx: string | undefined } | null | undefined;

function bootOf(): typeof boot {
  const self = new URL(import.meta.url);
  if (!self.pathname.endsWith('.ts'))
    return { entry: new URL('./lower-thread.js', self).href, tsx: undefined };
  try {
    const tsx = join(dirname(createRequire(self).resolve('tsx/package.json')), 'dist/esm/api/index.mjs');
    return { entry: new URL('./lower-thread.ts', self).href, tsx };
  } catch {
    return null;
  }
}

/**
 * Starts threads up to `n`, false where none can start: their modules load while the main thread lowers (the
 * first batches, alone). A thread whose modules do not load is never ready.
 */
function ensureThreads(n: number): boolean {
  boot ??= bootOf();
  if (boot === null) return false;
  while (threads.length < n) {
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(
      `const { workerData } = require('node:worker_threads');
(async () => {
  if (workerData.tsx !== undefined) (await import(workerData.tsx)).register();
  await import(workerData.entry);
})();`,
      { eval: true, execArgv: [], workerData: { ...boot, port: port2, ready }, transferList: [port2] },
    );
    worker.on('error', () => {});
    worker.unref();
    port1.unref();
    threads.push({ worker, port: port1 });
  }
  return true;
}

lowerThreads.start = (asts: readonly UOp[], job: LowerJob, here: (i: number) => Lowered) => {
  const n = wanted();
  if (n === 0 || !ensureThreads(n)) return undefined;
  // while their modules load (tenths of a second under tsx), the main thread lowers alone: sending them the batch
  // would only cost it the encoding
  if (Atomics.load(ready, 0) === 0) return undefined;
  const id = ++batches;
  const state = new SharedArrayBuffer(4 * (1 + asts.length));
  const flags = new Int32Array(state);
  const text: BatchText = {
    asts: asts.map(encodeGraph),
    keys: asts.map((a) => a.key),
    job: { ...job, target: encodeValue(job.target) as LowerJob['target'] },
  };
  const batch: LowerBatch = { id, state, text: JSON.stringify(text) };
  for (const { port } of threads.slice(0, n)) port.postMessage(batch);
  // null: it could not be lowered there (here() lowers it again at its take, and throws its error)
  const results: (Lowered | null | undefined)[] = new Array(asts.length);
  const drain = () => {
    for (const { port } of threads)
      for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) {
        const { id: from, i, result } = m.message as { id: number; i: number; result?: Lowered };
        if (from === id) results[i] ??= result ?? null;
      }
  };
  return {
    take(i: number): Lowered {
      for (;;) {
        drain();
        const r = results[i];
        if (r !== undefined) return r ?? here(i);
        // a kernel no thread has taken yet is lowered here meanwhile (its error, at its own take)
        const j = Atomics.add(flags, 0, 1);
        if (j < asts.length)
          try {
            results[j] = here(j);
          } catch {
            results[j] = null;
          }
        else if (Atomics.wait(flags, 1 + i, 0, PATIENCE_MS) === 'timed-out') return (results[i] = here(i));
      }
    },
  };
};
