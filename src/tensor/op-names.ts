// Errors name the public op the user called: each public method and static of Tensor is wrapped so that an
// error thrown inside it, by an op it is built from, gets its name in front. Only the error path pays.
import { Tensor } from './tensor.ts';

/** Methods that only ops call (each takes the op's name where it can fail), and getters' helpers. */
const INTERNAL: ReadonlySet<string> = new Set([
  'constructor',
  'wrap',
  'scalarDType',
  'toTensor',
  'operands',
  'binary',
  'toFloat',
  'axis',
  'padPairs',
  'padEdges',
  'reduceOp',
  'fromDisk',
  'releaseFile',
  'toString',
]);
/** Statics that run the user's function: its errors are the user's own and keep their message. */
const RUNS_USER_CODE: ReadonlySet<string> = new Set(['scope', 'noGrad']);

/** The message an error had when first thrown, before any op put its name in front. */
const FIRST_MESSAGE = Symbol('first message');

/** The error with `name: ` in front of its first message (the outermost op, which renames it last, wins). */
function renamed(e: unknown, name: string): unknown {
  if (!(e instanceof Error)) return e;
  const err = e as Error & { [FIRST_MESSAGE]?: string };
  // not enumerable: a printed error shows no extra key
  if (err[FIRST_MESSAGE] === undefined) Object.defineProperty(err, FIRST_MESSAGE, { value: err.message });
  const first = err[FIRST_MESSAGE]!;
  const message = first.startsWith(`${name}:`) ? first : `${name}: ${first}`;
  if (err.stack !== undefined) err.stack = err.stack.replace(err.message, message);
  err.message = message;
  return err;
}

function named<F extends (...args: never[]) => unknown>(name: string, f: F): F {
  return function (this: unknown, ...args: Parameters<F>) {
    try {
      return f.apply(this, args);
    } catch (e) {
      throw renamed(e, name);
    }
  } as F;
}

/** @internal Wraps every public method and static of Tensor (once every op family has attached its own). */
export function nameErrors(): void {
  for (const key of Object.getOwnPropertyNames(Tensor.prototype)) {
    const d = Object.getOwnPropertyDescriptor(Tensor.prototype, key)!;
    if (typeof d.value === 'function' && !INTERNAL.has(key))
      Object.defineProperty(Tensor.prototype, key, { ...d, value: named(key, d.value) });
  }
  const statics = Tensor as unknown as Record<string, unknown>;
  for (const key of Object.getOwnPropertyNames(Tensor)) {
    const f = statics[key];
    if (typeof f === 'function' && key !== 'prototype' && !RUNS_USER_CODE.has(key))
      statics[key] = named(`Tensor.${key}`, f as (...args: never[]) => unknown);
  }
}
