// A lowering thread (src/runtime/lower-threads.ts): it takes a batch's kernels one at a time through the batch's
// shared counter, lowers and renders each as the main thread would, and posts the result before flagging it done.
import { type MessagePort, workerData } from 'node:worker_threads';
// the lowering's modules only (they load in a fifth of a second under tsx, the whole library in a third), and
// with them every setting lowering reads: one that only the main thread's modules define cannot matter to it
import { type Lowered, type LowerJob, lowerFromJob } from '../engine/compile.ts';
import { decodeGraph, decodeValue, type EncodedNode } from '../engine/lower-codec.ts';
import { Context, ContextVar } from '../helpers.ts';

/** A batch: its number, its shared state ([0] the next kernel to take, [1 + i] 1 once kernel i is posted). */
export interface LowerBatch {
  id: number;
  state: SharedArrayBuffer;
  /** JSON of a BatchText. */
  text: string;
}

export interface BatchText {
  asts: EncodedNode[][];
  /** The kernels' content keys: a kernel decoded to another key is left to the main thread. */
  keys: string[];
  job: LowerJob;
}

const { port, ready } = workerData as { port: MessagePort; ready: Int32Array };
Atomics.add(ready, 0, 1);
port.on('message', ({ id, state, text }: LowerBatch) => {
  const flags = new Int32Array(state);
  const { asts, keys, job } = JSON.parse(text) as BatchText;
  const target = decodeValue(job.target) as LowerJob['target'];
  const settings = Object.fromEntries(job.settings.filter(([name]) => ContextVar.registry.has(name)));
  Context.with(settings, () => {
    for (let i = Atomics.add(flags, 0, 1); i < asts.length; i = Atomics.add(flags, 0, 1)) {
      let result: Lowered | undefined;
      try {
        const ast = decodeGraph(asts[i]!);
        if (ast.key === keys[i]) result = lowerFromJob(ast, { ...job, target });
      } catch {
        // the main thread lowers it again, and throws its error there
      }
      port.postMessage({ id, i, result });
      Atomics.store(flags, 1 + i, 1);
      Atomics.notify(flags, 1 + i);
    }
  });
});
