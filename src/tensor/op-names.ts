// Errors name the public op the user called: each public method and static of Tensor is wrapped so that an
// error thrown inside it, by an op it is built from, gets its name in front. Only the error path pays.
import { Tensor } from './tensor.ts';
import { shown } from './validate.ts';

/** Methods that only ops call (each takes the op's name where it can fail), and getters' helpers. */
export const INTERNAL_METHODS: ReadonlySet<string> = new Set([
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
  'reduceAxes',
  'beyondRange',
  'fromDisk',
  'releaseFile',
  'toString',
]);
/** Statics that run the user's function: its errors are the user's own and keep their message. */
const RUNS_USER_CODE: ReadonlySet<string> = new Set(['scope', 'noGrad']);

/**
 * The arguments (by position) that must be Tensors, where an op does not check them itself: on the error
 * path, a TypeError from reading a non-Tensor becomes an error naming the argument. An undefined argument is
 * an optional one left out.
 */
const TENSOR_ARGS: Readonly<Record<string, readonly number[]>> = {
  matmul: [0],
  dot: [0],
  linear: [0, 1],
  crossEntropy: [0],
  nllLoss: [0],
  sparseCategoricalCrossentropy: [0],
  binaryCrossentropy: [0],
  binaryCrossentropyLogits: [0],
  batchnorm: [0, 1, 2, 3],
  scaledDotProductAttention: [0, 1],
  conv2d: [0, 1],
  maxUnpool1d: [0],
  maxUnpool2d: [0],
  maxUnpool3d: [0],
  gather: [1],
  scatter: [1],
  scatterReduce: [1, 2],
  maskedFill: [0],
  maskedSelect: [0],
  backward: [0],
  'Tensor.gradient': [0],
};

/** An error naming the first argument that should have been a Tensor and is not, if there is one. */
function notATensor(name: string, args: readonly unknown[]): Error | undefined {
  for (const at of TENSOR_ARGS[name] ?? []) {
    const a = args[at];
    if (a !== undefined && !(a instanceof Tensor))
      return new Error(`${name}: argument ${at + 1} must be a Tensor, got ${shown(a)}`);
  }
  return undefined;
}

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
      // a crash inside the library (reading a property of a non-Tensor) is the caller's argument's fault
      throw (e instanceof Error && e.constructor !== Error && notATensor(name, args)) || renamed(e, name);
    }
  } as F;
}

/** @internal Wraps every public method and static of Tensor (once every op family has attached its own). */
export function nameErrors(): void {
  for (const key of Object.getOwnPropertyNames(Tensor.prototype)) {
    const d = Object.getOwnPropertyDescriptor(Tensor.prototype, key)!;
    if (typeof d.value === 'function' && !INTERNAL_METHODS.has(key))
      Object.defineProperty(Tensor.prototype, key, { ...d, value: named(key, d.value) });
  }
  const statics = Tensor as unknown as Record<string, unknown>;
  for (const key of Object.getOwnPropertyNames(Tensor)) {
    const f = statics[key];
    if (typeof f === 'function' && key !== 'prototype' && !RUNS_USER_CODE.has(key))
      statics[key] = named(`Tensor.${key}`, f as (...args: never[]) => unknown);
  }
}
