// Optimizers (SGD, Adam, AdamW, LAMB): each step builds the new parameters and state lazily and realizes them in one call.
import { dtypes, promote } from '../dtype.ts';
import { setBufferData } from '../engine/buffers.ts';
import { Tensor } from '../tensor/index.ts';
import { assign } from './state-dict.ts';

const fmt = (t: Tensor) => `(${t.shape.join(', ')})`;

function checkRange(op: string, what: string, x: number, low: number, high: number, openHigh = false): void {
  if (!(x >= low && (openHigh ? x < high : x <= high)))
    throw new Error(`${op}: ${what} must lie in [${low}, ${high}${openHigh ? ')' : ']'}, got ${x}`);
}

/** A zero tensor of p's shape, in at least float32 precision, in a buffer of its own. */
const zerosFor = (p: Tensor) =>
  Tensor.zeros(p.shape, { dtype: promote(p.dtype, dtypes.float32), device: p.device }).realize();

/**
 * The common part: parameters, the learning rate and the step. `step()` computes every parameter's new
 * value and the new state (moments, step counts) as one lazy graph and realizes it in a single call; each
 * tensor handle then stands for its new buffer (the old buffers are left as they were).
 *
 * The learning rate is a scalar float32 buffer (`lr`) that every step's kernels read; `setLr` writes into
 * it, so changing the rate changes neither the graph nor the cached schedule (nor a captured JIT step).
 */
export abstract class Optimizer {
  readonly params: Tensor[];
  readonly lr: Tensor;
  readonly device: string;

  constructor(
    private readonly name: string,
    params: readonly Tensor[],
    lr: number,
  ) {
    this.params = [...new Set(params)];
    if (this.params.length === 0)
      throw new Error(`${name}: no parameters; pass tensors with requiresGrad (getParameters(model))`);
    this.device = this.params[0]!.device;
    this.params.forEach((p, i) => {
      if (!p.requiresGrad || !p.dtype.isFloat || p.device !== this.device)
        throw new Error(
          `${name}: parameter ${i} ${fmt(p)} ${p.dtype.name} on ${p.device} should be a float tensor with requiresGrad on ${this.device}, as every parameter`,
        );
    });
    checkRange(name, 'lr', lr, 0, Infinity);
    this.lr = new Tensor(lr, { dtype: dtypes.float32, device: this.device });
  }

  /** Sets the learning rate for the following steps, in place. */
  setLr(value: number): void {
    checkRange(`${this.name}.setLr`, 'lr', value, 0, Infinity);
    this.lr.realize();
    setBufferData(this.lr.uop, new Float32Array([value]));
  }

  /**
   * Drops the parameters' gradients (backward() adds to them) and frees their memory now, so that a
   * synchronous training loop stays flat; `clone()` a gradient to keep it.
   */
  zeroGrad(): void {
    for (const p of this.params) {
      p.grad?.dispose();
      p.grad = undefined;
    }
  }

  /**
   * Updates every parameter from its `.grad`. The tensors in `alsoRealize` (the loss, BatchNorm's running
   * statistics from getBuffers) are realized in the same call, and so are the gradients: read afterwards,
   * they must be the values the step used, not ones computed again from the new parameters.
   */
  step(...alsoRealize: Tensor[]): void {
    const grads = this.params.map((p, i) => {
      if (p.grad === undefined)
        throw new Error(
          `${this.name}.step: parameter ${i} ${fmt(p)} has no gradient; call loss.backward() first, and give the optimizer only parameters the loss depends on`,
        );
      return p.grad;
    });
    const updated = this.update(grads);
    this.params.forEach((p, i) => {
      assign(p, updated[i]!.cast(p.dtype));
    });
    const [first, ...rest] = [...this.params, ...this.state(), ...grads, ...alsoRealize];
    first!.realize(...rest);
  }

  /** The new parameter values, lazily; assigns the new state to the state tensors. */
  protected abstract update(grads: readonly Tensor[]): Tensor[];
  /** The state tensors a step updates. */
  protected abstract state(): Tensor[];
}

export interface SGDOptions {
  lr?: number;
  momentum?: number;
  /** Nesterov momentum: step along g + momentum * buf instead of buf (needs momentum > 0). */
  nesterov?: boolean;
  /** L2 penalty: adds weightDecay * param to the gradient. */
  weightDecay?: number;
}

/**
 * Stochastic gradient descent, as PyTorch's (no dampening): g = grad + weightDecay p; with momentum,
 * buf = momentum buf + g and g = buf (or g + momentum buf for Nesterov); p = p - lr g.
 */
export class SGD extends Optimizer {
  readonly momentum: number;
  readonly nesterov: boolean;
  readonly weightDecay: number;
  /** Momentum buffers, one per parameter (none without momentum). */
  readonly buf: Tensor[];

  constructor(params: readonly Tensor[], opts: SGDOptions = {}) {
    const { lr = 0.001, momentum = 0, nesterov = false, weightDecay = 0 } = opts;
    super('SGD', params, lr);
    checkRange('SGD', 'momentum', momentum, 0, Infinity);
    checkRange('SGD', 'weightDecay', weightDecay, 0, Infinity);
    if (nesterov && momentum === 0) throw new Error('SGD: nesterov needs a momentum above 0');
    [this.momentum, this.nesterov, this.weightDecay] = [momentum, nesterov, weightDecay];
    this.buf = momentum > 0 ? this.params.map(zerosFor) : [];
  }

  protected update(grads: readonly Tensor[]): Tensor[] {
    return this.params.map((p, i) => {
      let g = this.weightDecay > 0 ? grads[i]!.add(p.mul(this.weightDecay)) : grads[i]!;
      const b = this.buf[i];
      if (b !== undefined) {
        assign(b, b.mul(this.momentum).add(g).cast(b.dtype));
        g = this.nesterov ? g.add(b.mul(this.momentum)) : b;
      }
      return p.sub(g.mul(this.lr));
    });
  }

  protected state(): Tensor[] {
    return this.buf;
  }
}

export interface AdamOptions {
  lr?: number;
  b1?: number;
  b2?: number;
  eps?: number;
}

export interface AdamWOptions extends AdamOptions {
  /** Decoupled weight decay: weightDecay * param joins the update (scaled by lr, not by the moments). */
  weightDecay?: number;
}

/**
 * Adam's moments and bias correction, shared by Adam, AdamW and LAMB (tinygrad's formulation): after t
 * steps, m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * + weightDecay p, and p = p - lr r u, where r = 1 for Adam and AdamW and LAMB's trust ratio
 * ||p|| / ||u|| (1 where either norm is 0).
 */
abstract class AdaptiveMoments extends Optimizer {
  readonly b1: number;
  readonly b2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** First and second moments, one each per parameter. */
  readonly m: Tensor[];
  readonly v: Tensor[];
  /** b1^t and b2^t after t steps (scalar float32). */
  readonly b1t: Tensor;
  readonly b2t: Tensor;

  constructor(
    name: string,
    params: readonly Tensor[],
    opts: Required<AdamWOptions>,
    private readonly trustRatio: boolean,
  ) {
    super(name, params, opts.lr);
    checkRange(name, 'b1', opts.b1, 0, 1, true);
    checkRange(name, 'b2', opts.b2, 0, 1, true);
    checkRange(name, 'eps', opts.eps, 0, Infinity);
    checkRange(name, 'weightDecay', opts.weightDecay, 0, Infinity);
    [this.b1, this.b2, this.eps, this.weightDecay] = [opts.b1, opts.b2, opts.eps, opts.weightDecay];
    this.m = this.params.map(zerosFor);
    this.v = this.params.map(zerosFor);
    const one = () => new Tensor(1, { dtype: dtypes.float32, device: this.device });
    [this.b1t, this.b2t] = [one(), one()];
  }

  protected update(grads: readonly Tensor[]): Tensor[] {
    const { b1, b2, b1t, b2t } = this;
    assign(b1t, b1t.mul(b1));
    assign(b2t, b2t.mul(b2));
    return this.params.map((p, i) => {
      const [g, m, v] = [grads[i]!, this.m[i]!, this.v[i]!];
      assign(
        m,
        m
          .mul(b1)
          .add(g.mul(1 - b1))
          .cast(m.dtype),
      );
      assign(
        v,
        v
          .mul(b2)
          .add(g.square().mul(1 - b2))
          .cast(v.dtype),
      );
      const mHat = m.div(b1t.neg().add(1));
      const vHat = v.div(b2t.neg().add(1));
      let up = mHat.div(vHat.sqrt().add(this.eps));
      if (this.weightDecay > 0) up = up.add(p.mul(this.weightDecay));
      if (this.trustRatio) {
        const norm = (t: Tensor) => t.square().sum().sqrt();
        const [r1, r2] = [norm(p), norm(up)];
        up = up.mul(r1.gt(0).where(r2.gt(0).where(r1.div(r2), 1), 1));
      }
      return p.sub(up.mul(this.lr));
    });
  }

  protected state(): Tensor[] {
    return [this.b1t, this.b2t, ...this.m, ...this.v];
  }
}

/** Adam (lr 0.001, b1 0.9, b2 0.999, eps 1e-8). */
export class Adam extends AdaptiveMoments {
  constructor(params: readonly Tensor[], opts: AdamOptions = {}) {
    const { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8 } = opts;
    super('Adam', params, { lr, b1, b2, eps, weightDecay: 0 }, false);
  }
}

/** Adam with decoupled weight decay (lr 0.001, b1 0.9, b2 0.999, eps 1e-8, weightDecay 0.01). */
export class AdamW extends AdaptiveMoments {
  constructor(params: readonly Tensor[], opts: AdamWOptions = {}) {
    const { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8, weightDecay = 0.01 } = opts;
    super('AdamW', params, { lr, b1, b2, eps, weightDecay }, false);
  }
}

/** LAMB: AdamW's update scaled per parameter by the trust ratio (lr 0.001, eps 1e-6, weightDecay 0). */
export class LAMB extends AdaptiveMoments {
  constructor(params: readonly Tensor[], opts: AdamWOptions = {}) {
    const { lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-6, weightDecay = 0 } = opts;
    super('LAMB', params, { lr, b1, b2, eps, weightDecay }, true);
  }
}
