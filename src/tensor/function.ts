// Function capture (the spec's @function): fn(f) traces f lazily on PARAM placeholders into one FUNCTION node.
import { resolveFunctions } from '../schedule/resolve.ts';
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { fmtShape } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';
import { Tensor } from './tensor.ts';

export interface FnOptions {
  /**
   * Let f read tensors it is not given as arguments: their graphs stay in the body, and the buffers they
   * read become extra arguments after the explicit ones (a function body holds only PARAMs).
   */
  allowCaptured?: boolean;
  /**
   * Lower calls to an opaque CALL instead of a FUNCTION: realize runs the body as its own schedule (its
   * kernels compiled once, never fused with the caller's) and the caller reads the results' buffers.
   * Gradients still flow through it, but the backward graph recomputes the body inline.
   */
  compiled?: boolean;
}

const isPlainObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && [Object.prototype, null].includes(Object.getPrototypeOf(x));

/** Every tensor among the arguments, walking arrays and plain objects, each once, in order of appearance. */
function findTensors(x: unknown, found: Set<Tensor>, seen = new Set<unknown>()): Set<Tensor> {
  if (x instanceof Tensor) found.add(x);
  else if ((Array.isArray(x) || isPlainObject(x)) && !seen.has(x)) {
    seen.add(x);
    for (const v of Object.values(x)) findTensors(v, found, seen);
  }
  return found;
}

/** The arguments with each tensor replaced by its placeholder (arrays and plain objects copied). */
function withPlaceholders(x: unknown, placeholders: ReadonlyMap<Tensor, Tensor>): unknown {
  if (x instanceof Tensor) return placeholders.get(x);
  if (Array.isArray(x)) return x.map((v) => withPlaceholders(v, placeholders));
  if (isPlainObject(x))
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, withPlaceholders(v, placeholders)]));
  return x;
}

function resultTensors(out: unknown): Tensor[] {
  const results = Array.isArray(out) ? out : [out];
  const bad = results.findIndex((r) => !(r instanceof Tensor));
  if (results.length === 0 || bad >= 0)
    throw new Error(
      `fn: the function must return a Tensor or an array of Tensors, got ${results.length === 0 ? 'an empty array' : describe(results[bad])}${Array.isArray(out) && bad >= 0 ? ` at index ${bad}` : ''}`,
    );
  return results;
}

const describe = (x: unknown): string =>
  x === null ? 'null' : Array.isArray(x) ? 'a nested array' : typeof x === 'object' ? 'an object' : typeof x;

/**
 * f as one FUNCTION node: a call finds the tensors among its arguments (deduplicated by identity), runs f
 * lazily on placeholders that are PARAM 0, 1, ... of their shapes, dtypes and devices, and returns
 * GETTUPLE(FUNCTION(TUPLE(results), inputs...), i) as tensors: one, or an array when f returns one.
 * Nothing runs; realize (and autograd) inline the body again, so equal bodies share compiled kernels.
 * With { compiled: true } the node is a CALL, which realize runs apart (see FnOptions.compiled).
 */
export function fn<A extends unknown[], R extends Tensor | readonly Tensor[]>(
  f: (...args: A) => R,
  opts: FnOptions = {},
): (...args: A) => R {
  return (...args: A): R => {
    const inputs = [...findTensors(args, new Set())];
    const placeholders = new Map(
      inputs.map((t, k) => [t, t.wrap(UOp.param(k, t.dtype, t.uop.shape!, t.device))]),
    );
    const out = f(...(withPlaceholders(args, placeholders) as A));
    const results = resultTensors(out);
    // calls traced inside f become part of its body, so a body holds no other function's PARAMs
    let body = UOp.make(Ops.TUPLE, resolveFunctions(results.map((r) => r.uop)));
    const argUOps = inputs.map((t) => t.uop);
    // BUFFERs in the body come from tensors f read without being given them (or made from JS data)
    const captured = body.toposort().filter((u) => u.op === Ops.BUFFER);
    if (captured.length > 0) {
      if (!opts.allowCaptured)
        throw new Error(
          `fn: the function reads ${captured.length} tensor buffer(s) it was not given as arguments (shapes ${captured.map((b) => fmtShape(b.shape)).join(', ')}), from a tensor captured from outside it or made inside it from JS data; pass the tensor as an argument, or allow this with fn(f, { allowCaptured: true })`,
        );
      const lifted = new Map(
        captured.map((b, j) => [b, UOp.param(inputs.length + j, b.dtype, b.shape!, b.device ?? undefined)]),
      );
      body = substitute(body, lifted);
      argUOps.push(...captured);
    }
    const call = UOp.make(opts.compiled ? Ops.CALL : Ops.FUNCTION, [body, ...argUOps]);
    const outputs = results.map((r, i) => r.wrap(UOp.make(Ops.GETTUPLE, [call], i)));
    return (Array.isArray(out) ? outputs : outputs[0]) as R;
  };
}

type Method<This, A extends unknown[], R> = (this: This, ...args: A) => R;

/**
 * fn as a standard (TC39) method decorator: each call traces the method, with `this` bound, on its tensor
 * arguments. Write `@fnMethod` or, with options, `@fnMethod({ allowCaptured: true })` (needed when the
 * method reads tensors of `this`, such as weights).
 */
export function fnMethod<This, A extends unknown[], R extends Tensor | readonly Tensor[]>(
  method: Method<This, A, R>,
  context: ClassMethodDecoratorContext<This, Method<This, A, R>>,
): Method<This, A, R>;
export function fnMethod(
  opts: FnOptions,
): <This, A extends unknown[], R extends Tensor | readonly Tensor[]>(
  method: Method<This, A, R>,
  context: ClassMethodDecoratorContext<This, Method<This, A, R>>,
) => Method<This, A, R>;
export function fnMethod<This, A extends unknown[], R extends Tensor | readonly Tensor[]>(
  methodOrOpts: Method<This, A, R> | FnOptions,
): Method<This, A, R> | ((method: Method<This, A, R>) => Method<This, A, R>) {
  const decorate =
    (opts: FnOptions) =>
    (method: Method<This, A, R>): Method<This, A, R> =>
      function (this: This, ...args: A): R {
        return fn((...a: A) => method.apply(this, a), opts)(...args);
      };
  return typeof methodOrOpts === 'function' ? decorate({})(methodOrOpts) : decorate(methodOrOpts);
}
