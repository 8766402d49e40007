// A model's tensors by dotted name (`layers.0.weight`): parameters, buffers, state dicts and loading them.
import { Tensor } from '../tensor/index.ts';

/** Tensors by dotted name, in the order the model's fields were walked. */
export type StateDict = Record<string, Tensor>;

export interface LoadOptions {
  /** When false, missing and extra keys are skipped, a shape mismatch skips the key, a dtype mismatch casts. */
  strict?: boolean;
}

/** What loadStateDict left out (all empty after a strict load). */
export interface LoadReport {
  /** Keys of the model that the dict lacks; those tensors keep their values. */
  missing: string[];
  /** Keys of the dict that the model lacks. */
  unexpected: string[];
  /** Keys whose shapes differ; those tensors keep their values. */
  mismatched: string[];
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;

/**
 * Every tensor reachable from obj through fields and array elements, named by the path to it. A tensor is
 * a leaf; typed arrays and cycles (an object inside itself) are not walked, shared objects are (so tied
 * weights appear under each of their names, as in PyTorch's state_dict).
 */
function walk(obj: unknown, prefix: string, out: [string, Tensor][], ancestors: Set<object>): void {
  if (obj instanceof Tensor) {
    out.push([prefix, obj]);
    return;
  }
  if (obj === null || typeof obj !== 'object' || ArrayBuffer.isView(obj) || ancestors.has(obj)) return;
  ancestors.add(obj);
  const entries: [string, unknown][] = Array.isArray(obj)
    ? obj.map((v, i) => [String(i), v])
    : Object.entries(obj);
  for (const [k, v] of entries) walk(v, prefix === '' ? k : `${prefix}.${k}`, out, ancestors);
  ancestors.delete(obj);
}

function namedTensors(model: unknown): [string, Tensor][] {
  const out: [string, Tensor][] = [];
  walk(model, '', out, new Set());
  return out;
}

/** Every tensor of the model by dotted name: parameters and buffers (BatchNorm's running statistics). */
export function getStateDict(model: unknown): StateDict {
  return Object.fromEntries(namedTensors(model));
}

/** The model's trainable tensors (requiresGrad), each once, in the order of first appearance. */
export function getParameters(model: unknown): Tensor[] {
  return [...new Set(namedTensors(model).flatMap(([, t]) => (t.requiresGrad ? [t] : [])))];
}

/**
 * The model's tensors that are not trained but change with use (BatchNorm's running statistics), each once.
 * Realize them with the optimizer's step (`opt.step(loss, ...getBuffers(model))`) so their updates do not
 * pile up as a growing lazy graph.
 */
export function getBuffers(model: unknown): Tensor[] {
  return [...new Set(namedTensors(model).flatMap(([, t]) => (t.requiresGrad ? [] : [t])))];
}

/** Sets target's value to value in place (Tensor.assign): a realized target keeps its buffer. */
export function assign(target: Tensor, value: Tensor): void {
  target.assign(value);
}

/**
 * Copies dict's tensors into the model's tensors of the same names (each a buffer of its own afterwards,
 * on the model tensor's device). Strict (the default): a missing key, an extra key or a shape or dtype
 * mismatch throws an error listing every such key, and nothing is loaded.
 */
export function loadStateDict(model: unknown, dict: StateDict, opts: LoadOptions = {}): LoadReport {
  const { strict = true } = opts;
  const own = getStateDict(model);
  const report: LoadReport = {
    missing: Object.keys(own).filter((k) => !Object.hasOwn(dict, k)),
    unexpected: Object.keys(dict).filter((k) => !Object.hasOwn(own, k)),
    mismatched: [],
  };
  const problems = [
    ...report.missing.map((k) => `missing key '${k}'`),
    ...report.unexpected.map((k) => `unexpected key '${k}'`),
  ];
  const load: [Tensor, Tensor][] = [];
  for (const [k, target] of Object.entries(own)) {
    if (!Object.hasOwn(dict, k)) continue;
    const src = dict[k]!;
    if (fmt(src.shape) !== fmt(target.shape)) {
      report.mismatched.push(k);
      problems.push(`'${k}' has shape ${fmt(src.shape)}, the model's is ${fmt(target.shape)}`);
    } else {
      if (src.dtype !== target.dtype)
        problems.push(`'${k}' has dtype ${src.dtype.name}, the model's is ${target.dtype.name}`);
      load.push([target, src]);
    }
  }
  if (strict && problems.length > 0)
    throw new Error(
      `loadStateDict: ${problems.join('; ')}; pass { strict: false } to load the keys that fit (a dtype mismatch is then cast)`,
    );
  // a copy per tensor, realized alone: equal graphs realized together would share one buffer. assign writes
  // into a realized target's own buffer (a JIT that captured it sees the new values); an unrealized target
  // gets a buffer of its own (contiguous), never the source's
  for (const [target, src] of load)
    target.assign(src.to(target.device).cast(target.dtype).contiguous()).realize();
  return report;
}
