// Garbage collection on demand for memory tests: end the job, collect, and let finalizers run.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Weakly held objects live until the job ends, and finalizers run in later tasks: end the job, collect, wait.
 * With `probe` (bytes in use), again until two rounds agree: under load a finalizer's task may come rounds late.
 */
export async function settle(probe?: () => number): Promise<void> {
  let last: number | undefined;
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < 3; i++) {
      await tick();
      gc();
    }
    await tick();
    const now = probe?.();
    if (now === last) return;
    last = now;
  }
}
