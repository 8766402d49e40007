// Autograd on Tensors: backward(), Tensor.gradient, detach, requiresGrad_, Tensor.noGrad (the rules and the
// walk are in autograd.ts).
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { fmtShape } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';
import { computeGradients } from './autograd.ts';
import { gradMode } from './grad-mode.ts';
import { throughOrigins } from './origins.ts';
import { gradTracked, Tensor } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** The gradient that backward() accumulated for this tensor (for tensors with requiresGrad). */
    grad: Tensor | undefined;
    /**
     * Adds d(this)/dt to `t.grad` for every tensor t with `requiresGrad` that this one depends on; `grad` is
     * the gradient of this tensor (default 1, which needs a one-element tensor). Returns this tensor.
     */
    backward(grad?: Tensor): Tensor;
    /** The same values, through which no gradient flows. */
    detach(): Tensor;
    /** The same values; the gradient flowing back through it is made contiguous (a buffer of its own). */
    contiguousBackward(): Tensor;
    /** Sets requiresGrad in place (PyTorch's requires_grad_) and returns this tensor. */
    requiresGrad_(on?: boolean): Tensor;
  }
  namespace Tensor {
    /**
     * Runs fn with gradients off (torch.no_grad): the results of ops inside build no gradient graph, so no
     * gradient flows back through them and realizing them keeps no graph for backward(). Views (movement
     * ops) stay views of their tensor, so an update written through one lands, as PyTorch's in-place updates
     * under no_grad do. Regions nest. Without fn it returns a handle for a `using` declaration:
     * `{ using _ = Tensor.noGrad(); ... }` turns gradients back on at the `}`.
     */
    function noGrad<T>(fn: () => T): T;
    function noGrad(): Disposable;
    /** d(loss)/d(target) for each target, without touching any `.grad`; `grad` as in backward(). */
    function gradient(loss: Tensor, targets: readonly Tensor[], grad?: Tensor): Tensor[];
  }
}

const fmt = (t: Tensor) => `(${t.shape.join(', ')})`;

/** Why a tensor may be missing from the loss's graph, for the errors. */
const MISSING_HINT =
  'a target must reach the loss through differentiable ops (not only through detach(), comparisons, integer ops or casts to integers), and must require gradients when a value computed from it is realized (a realized value keeps its graph only for the tensors with requiresGrad that it depends on then)';

/** The gradient of the loss itself: ones for a one-element loss, else the given gradient. */
function seedGradient(op: string, loss: Tensor, grad: Tensor | undefined): UOp {
  if (!loss.dtype.isFloat)
    throw new Error(
      `${op}: the loss has dtype ${loss.dtype.name}; gradients need a float loss (cast it first)`,
    );
  if (grad === undefined) {
    if (loss.numel !== 1)
      throw new Error(
        `${op}: the loss has shape ${fmt(loss)}; without an explicit gradient it must have one element: reduce it (.sum(), .mean()) or pass the gradient of the loss, a tensor of shape ${fmt(loss)}`,
      );
    return Tensor.full(loss.shape, 1, { dtype: loss.dtype, device: loss.device }).uop;
  }
  loss.toTensor(op, grad);
  if (grad.shape.length !== loss.ndim || grad.shape.some((d, i) => d !== loss.shape[i]))
    throw new Error(
      `${op}: the gradient has shape ${fmt(grad)} but the loss has shape ${fmt(loss)}; they must be equal`,
    );
  return grad.cast(loss.dtype).uop;
}

/**
 * d(loss)/d(target) for the targets the loss depends on. The loss's graph goes back through realized values
 * to the graphs they were computed from; the gradients read those realized values rather than recompute them.
 */
function gradientsOf(op: string, loss: Tensor, lossGrad: UOp, targets: ReadonlySet<UOp>): Map<UOp, UOp> {
  const { root, realized } = throughOrigins(op, loss.uop, targets);
  const grads = computeGradients(root, lossGrad, targets);
  for (const [t, g] of grads) grads.set(t, substitute(g, realized));
  return grads;
}

Tensor.gradient = (loss: Tensor, targets: readonly Tensor[], grad?: Tensor): Tensor[] => {
  const op = 'Tensor.gradient';
  const grads = gradientsOf(op, loss, seedGradient(op, loss, grad), new Set(targets.map((t) => t.uop)));
  return targets.map((t, i) => {
    const g = grads.get(t.uop);
    if (g === undefined)
      throw new Error(
        `Tensor.gradient: the loss ${fmt(loss)} does not depend on target ${i} ${fmt(t)}: ${MISSING_HINT}`,
      );
    return t.wrap(g);
  });
};

Tensor.prototype.backward = function (this: Tensor, grad?: Tensor): Tensor {
  const root = seedGradient('backward', this, grad);
  const byUOp = new Map<UOp, Tensor[]>();
  for (const ref of gradTracked) {
    const t = ref.deref();
    if (t?.requiresGrad) byUOp.set(t.uop, [...(byUOp.get(t.uop) ?? []), t]);
  }
  const grads = gradientsOf('backward', this, root, new Set(byUOp.keys()));
  if (grads.size === 0)
    throw new Error(
      `backward: the loss ${fmt(this)} depends on no tensor with requiresGrad: true; create parameters with { requiresGrad: true }; ${MISSING_HINT}`,
    );
  // equal lazy graphs are one node, so the loss cannot tell such tensors apart
  for (const u of grads.keys())
    if (byUOp.get(u)!.length > 1)
      throw new Error(
        `backward: ${byUOp.get(u)!.length} tensors with requiresGrad have one identical lazy graph (shape ${fmtShape(u.shape)}), so their gradients cannot be told apart; realize them before use so that each has a buffer of its own`,
      );
  for (const [u, g] of grads) {
    const t = byUOp.get(u)![0]!;
    // a realized gradient accumulates in place (as PyTorch's), so the old one is no tensor to free
    if (t.grad === undefined) t.grad = t.wrap(g);
    else if (t.grad.uop.op === Ops.BUFFER) t.grad.assign(t.grad.add(t.wrap(g)));
    else t.grad = t.grad.add(t.wrap(g));
  }
  return this;
};

Tensor.prototype.detach = function (this: Tensor): Tensor {
  return this.wrap(UOp.make(Ops.DETACH, [this.uop]));
};

Tensor.prototype.requiresGrad_ = function (this: Tensor, on = true): Tensor {
  this.requiresGrad = on;
  return this;
};

/** Opens a region with gradients off; the handle closes it (once). */
function gradientsOff(): Disposable {
  gradMode.offDepth++;
  let open = true;
  return {
    [Symbol.dispose]() {
      if (open) gradMode.offDepth--;
      open = false;
    },
  };
}

Tensor.noGrad = (<T>(fn?: () => T): T | Disposable => {
  if (fn === undefined) return gradientsOff();
  if (typeof fn !== 'function')
    throw new Error(`Tensor.noGrad: needs a function to run, or nothing (for \`using\`), got ${typeof fn}`);
  const region = gradientsOff();
  let result: T;
  try {
    result = fn();
  } finally {
    region[Symbol.dispose]();
  }
  if (typeof (result as { then?: unknown } | undefined)?.then === 'function')
    throw new Error(
      'Tensor.noGrad: fn returned a Promise; only its synchronous part ran without gradients. In async code use `using _ = Tensor.noGrad()`',
    );
  return result;
}) as typeof Tensor.noGrad;

Tensor.prototype.contiguousBackward = function (this: Tensor): Tensor {
  return this.wrap(UOp.make(Ops.CONTIGUOUSBACKWARD, [this.uop]));
};
