// Optimizers (SGD, Adam, AdamW, LAMB, LARS, Muon): each step builds the new parameters and state lazily and realizes them in one call.
import { dtypes, promote } from '../dtype.ts';
import { Tensor } from '../tensor/index.ts';
import { assign } from './state-dict.ts';

const fmt = (t: Tensor) => `(${t.shape.join(', ')})`;

function checkRange(op: string, what: string, x: number, low: number, high: number, openHigh = false): void {
  if (!(x >= low && (openHigh ? x < high : x <= high)))
    throw new Error(`${op}: ${what} must lie in [${low}, ${high}${openHigh ? ')' : ']'}, got ${x}`);
}

/** A zero tensor of p's shape, in at least float32 precision, in a buffer of its own. */
const zerosFor = (p: Tensor) =>
  Tensor.deferredInit(Tensor.zeros(p.shape, { dtype: promote(p.dtype, dtypes.float32), device: p.device }));

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
    // written into lr's own buffer, so a JIT that captured a step reads the new rate; from a tensor, not a
    // constant, so that one cached copy serves every rate (a constant would compile a kernel per value)
    this.lr.assign(new Tensor(value, { dtype: dtypes.float32, device: this.device })).realize();
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

/**
 * Newton-Schulz iteration toward the orthogonal factor U V^T of g's SVD, over its last two axes, as
 * tinygrad's newton_schulz: X = g / (||g||_F + eps), then `steps` times X = sum_i coefficients[i] (X X^T)^i X
 * (an odd polynomial in the singular values; Muon's quintic pushes them into about [0.7, 1.2]). A matrix
 * with more rows than columns goes through transposed, so X X^T is the smaller Gram matrix.
 */
export function newtonSchulz(g: Tensor, steps: number, coefficients: readonly number[], eps = 1e-7): Tensor {
  if (g.ndim < 2) throw new Error(`newtonSchulz: needs a matrix (2 or more dims), got ${fmt(g)}`);
  if (!Number.isInteger(steps) || steps < 0)
    throw new Error(`newtonSchulz: steps must be a non-negative integer, got ${steps}`);
  if (coefficients.length === 0)
    throw new Error('newtonSchulz: needs at least one coefficient (of X, X X^T X, ...)');
  if (g.shape[g.ndim - 2]! > g.shape[g.ndim - 1]!)
    return newtonSchulz(g.transpose(-2, -1), steps, coefficients, eps).transpose(-2, -1);
  let x = g.div(g.square().sum([-2, -1], true).sqrt().add(eps));
  for (let s = 0; s < steps; s++) {
    const gram = x.matmul(x.transpose(-2, -1));
    let power = x;
    let next = x.mul(coefficients[0]!);
    for (const c of coefficients.slice(1)) {
      power = gram.matmul(power);
      next = next.add(power.mul(c));
    }
    x = next;
  }
  return x;
}

interface MomentumConfig {
  lr: number;
  momentum: number;
  weightDecay: number;
  nesterov: boolean;
  /** Scale by lr (and the trust ratio) before the momentum (LARS) instead of after it (SGD, Muon). */
  classic: boolean;
  /** Trust coefficient of LARS's layer-wise ratio; 0 turns the ratio off. */
  tcoef: number;
  /** Muon's orthogonalization of the momentum step; weight decay then shrinks the parameter after it. */
  orthogonalize?: { steps: number; coefficients: readonly number[] };
}

/**
 * Momentum SGD with LARS's trust ratio and Muon's orthogonalization, tinygrad's LARS: per parameter p with
 * gradient g, r = tcoef ||p|| / (||g|| + weightDecay ||p||) (1 where a norm is 0; r = 1 without tcoef);
 * g += weightDecay p (LARS); classic: g = lr r g; with momentum, b = momentum b + g and g = b (Nesterov:
 * g + momentum b); Muon: g = newtonSchulz of g as a (shape[0], rest) matrix; otherwise g = lr r g; and
 * p = p - g, Muon's p first shrunk to p (1 - lr weightDecay).
 */
abstract class MomentumOptimizer extends Optimizer {
  readonly momentum: number;
  readonly weightDecay: number;
  readonly nesterov: boolean;
  readonly classic: boolean;
  readonly tcoef: number;
  /** Momentum buffers, one per parameter (none without momentum). */
  readonly buf: Tensor[];
  private readonly orthogonalize: MomentumConfig['orthogonalize'];

  constructor(name: string, params: readonly Tensor[], opts: MomentumConfig) {
    super(name, params, opts.lr);
    checkRange(name, 'momentum', opts.momentum, 0, Infinity);
    checkRange(name, 'weightDecay', opts.weightDecay, 0, Infinity);
    checkRange(name, 'tcoef', opts.tcoef, 0, Infinity);
    if (opts.nesterov && opts.momentum === 0) throw new Error(`${name}: nesterov needs a momentum above 0`);
    [this.momentum, this.weightDecay, this.nesterov] = [opts.momentum, opts.weightDecay, opts.nesterov];
    [this.classic, this.tcoef, this.orthogonalize] = [opts.classic, opts.tcoef, opts.orthogonalize];
    this.buf = opts.momentum > 0 ? this.params.map(zerosFor) : [];
  }

  protected update(grads: readonly Tensor[]): Tensor[] {
    const { momentum, weightDecay: wd, orthogonalize } = this;
    return this.params.map((p, i) => {
      let g = grads[i]!;
      let scale: Tensor = this.lr;
      if (this.tcoef > 0) {
        const norm = (t: Tensor) => t.square().sum().sqrt();
        const [r1, r2] = [norm(p), norm(g)];
        const ratio = r1.mul(this.tcoef).div(r2.add(r1.mul(wd)));
        scale = scale.mul(r1.gt(0).where(r2.gt(0).where(ratio, 1), 1));
      }
      if (wd > 0 && orthogonalize === undefined) g = g.add(p.mul(wd));
      if (this.classic) g = g.mul(scale);
      const b = this.buf[i];
      if (b !== undefined) {
        assign(b, b.mul(momentum).add(g).cast(b.dtype));
        g = this.nesterov ? g.add(b.mul(momentum)) : b;
      }
      let base = p;
      if (orthogonalize !== undefined) {
        const matrix = g.reshape([g.shape[0] ?? 1, -1]);
        g = newtonSchulz(matrix, orthogonalize.steps, orthogonalize.coefficients).reshape(g.shape);
        if (wd > 0) base = p.mul(this.lr.mul(-wd).add(1));
      }
      if (!this.classic) g = g.mul(scale);
      return base.sub(g);
    });
  }

  protected state(): Tensor[] {
    return this.buf;
  }
}

export interface LARSOptions {
  lr?: number;
  momentum?: number;
  /** L2 penalty added to the gradient (and to the trust ratio's denominator). */
  weightDecay?: number;
  nesterov?: boolean;
  /** Classic momentum: lr and the trust ratio scale the gradient before the momentum buffer (default). */
  classic?: boolean;
  /** Trust coefficient; 0 gives plain momentum SGD. */
  tcoef?: number;
}

/**
 * Layer-wise adaptive rate scaling, tinygrad's LARS (lr 0.001, momentum 0.9, weightDecay 1e-4, classic
 * momentum, tcoef 0.001): momentum SGD whose step for each parameter is scaled by its trust ratio
 * tcoef ||p|| / (||g|| + weightDecay ||p||).
 */
export class LARS extends MomentumOptimizer {
  constructor(params: readonly Tensor[], opts: LARSOptions = {}) {
    const {
      lr = 0.001,
      momentum = 0.9,
      weightDecay = 1e-4,
      nesterov = false,
      classic = true,
      tcoef = 0.001,
    } = opts;
    super('LARS', params, { lr, momentum, weightDecay, nesterov, classic, tcoef });
  }
}

export interface MuonOptions {
  lr?: number;
  momentum?: number;
  /** Decoupled weight decay: each step first multiplies the parameter by 1 - lr weightDecay. */
  weightDecay?: number;
  nesterov?: boolean;
  /** Newton-Schulz iterations per step. */
  nsSteps?: number;
  /** The odd polynomial's coefficients (of X, X X^T X, (X X^T)^2 X, ...). */
  nsCoefficients?: readonly number[];
}

/**
 * Muon, tinygrad's (lr 0.001, momentum 0.95, Nesterov, weightDecay 0.1, 5 Newton-Schulz steps with
 * coefficients 3.4445, -4.775, 2.0315): the Nesterov momentum step of each parameter, seen as a
 * (shape[0], rest) matrix (a vector as one column), is orthogonalized by newtonSchulz, then p = p (1 - lr
 * weightDecay) - lr step.
 */
export class Muon extends MomentumOptimizer {
  constructor(params: readonly Tensor[], opts: MuonOptions = {}) {
    const {
      lr = 0.001,
      momentum = 0.95,
      weightDecay = 0.1,
      nesterov = true,
      nsSteps = 5,
      nsCoefficients = [3.4445, -4.775, 2.0315],
    } = opts;
    if (!Number.isInteger(nsSteps) || nsSteps < 0)
      throw new Error(`Muon: nsSteps must be a non-negative integer, got ${nsSteps}`);
    if (nsCoefficients.length === 0 || !nsCoefficients.every(Number.isFinite))
      throw new Error(
        `Muon: nsCoefficients must be one or more finite numbers, got [${nsCoefficients.join(', ')}]`,
      );
    super('Muon', params, {
      lr,
      momentum,
      weightDecay,
      nesterov,
      classic: false,
      tcoef: 0,
      orthogonalize: { steps: nsSteps, coefficients: nsCoefficients },
    });
  }
}
