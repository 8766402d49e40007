// Tensor.scope: every tensor a function makes is disposed when it returns, except what it returns.
import { Ops } from '../uop/ops.ts';
import { type Frame, frames } from './frames.ts';
import { gradTracked, Tensor } from './tensor.ts';

declare module './tensor.ts' {
  namespace Tensor {
    /**
     * Runs fn, then disposes every tensor made while it ran except those it returns (realized first) and
     * the gradients backward() set. `for (...) Tensor.scope(() => x.mul(y).add(1).realize())` keeps memory
     * flat in a synchronous loop, where garbage collection cannot return buffers until an await.
     */
    function scope<T>(fn: () => T): T;
  }
}

/** The tensors in a value: itself, or inside arrays, Maps, Sets and the properties of objects, deeply. */
function tensorsIn(value: unknown, out = new Set<Tensor>(), seen = new Set<object>()): Set<Tensor> {
  if (value instanceof Tensor) out.add(value);
  else if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && !seen.has(value)) {
    seen.add(value);
    const items = value instanceof Map || value instanceof Set ? value.values() : Object.values(value);
    for (const v of items) tensorsIn(v, out, seen);
  }
  return out;
}

/** Realizes the tensors that are not yet buffers, a schedule per device. */
function realizeAll(tensors: Iterable<Tensor>): void {
  const byDevice = new Map<string, Tensor[]>();
  for (const t of tensors) {
    if (t.disposed || t.uop.op === Ops.BUFFER) continue;
    byDevice.set(t.device, [...(byDevice.get(t.device) ?? []), t]);
  }
  for (const [first, ...rest] of byDevice.values()) first!.realize(...rest);
}

/**
 * Runs fn and then disposes every tensor made while it ran, except the tensors in what it returns (found in
 * arrays, Maps, Sets and object properties) and the gradients backward() gave to tensors with requiresGrad.
 * What survives, and every tensor made before the scope that fn assigned to, is realized first, so no
 * surviving graph reads a freed buffer. Scopes nest: what an inner scope keeps, the outer one owns. fn must
 * be synchronous (other async tasks would make tensors inside it); for async code use `using`.
 */
Tensor.scope = <T>(fn: () => T): T => {
  const frame: Frame<Tensor> = { made: new Set(), assigned: new Set() };
  frames.push(frame);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    for (const t of frame.made) t.dispose();
    throw e;
  } finally {
    frames.pop();
  }
  if (typeof (result as { then?: unknown } | undefined)?.then === 'function')
    throw new Error(
      'Tensor.scope: fn returned a Promise; a scope must be synchronous (tensors made by other tasks would be disposed with it); in async code use `using` declarations or dispose()',
    );
  const kept = tensorsIn(result);
  for (const ref of gradTracked) {
    const grad = ref.deref()?.grad;
    if (grad !== undefined && frame.made.has(grad)) kept.add(grad);
  }
  realizeAll([...kept, ...[...frame.assigned].filter((t) => !frame.made.has(t))]);
  for (const t of frame.made) if (!kept.has(t)) t.dispose();
  const outer = frames.at(-1);
  if (outer !== undefined) for (const t of kept) if (frame.made.has(t)) outer.made.add(t);
  return result;
};
