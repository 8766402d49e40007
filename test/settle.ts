// Garbage collection on demand for memory tests: end the job, collect, and let finalizers run.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

/** Weakly held objects live until the job ends, and finalizers run in later tasks: end the job, collect, wait. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await tick();
    gc();
  }
  await tick();
}
