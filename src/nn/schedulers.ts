// Learning-rate schedulers: each computes the rate for its step count in closed form and writes it with optimizer.setLr.
import type { Optimizer } from './optim.ts';

function checkCount(op: string, what: string, n: number, min = 1): void {
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${op}: ${what} must be an integer >= ${min}, got ${n}`);
}

function checkFactor(op: string, what: string, x: number, low: number, high: number, openLow = false): void {
  if (!(openLow ? x > low : x >= low) || !(x <= high))
    throw new Error(`${op}: ${what} must lie in ${openLow ? '(' : '['}${low}, ${high}], got ${x}`);
}

/**
 * The common part, as PyTorch's LRScheduler: the constructor reads the optimizer's rate as the base rate
 * (baseLr) and sets the rate of step 0; each `step()` (after the optimizer's step) advances the count and
 * sets the rate for it. The rate lives in the optimizer's lr buffer, so no graph or schedule changes.
 */
export abstract class LRScheduler {
  /** The optimizer's rate when the scheduler was made. */
  readonly baseLr: number;
  /** How many times step() was called. */
  stepCount = 0;
  /** The rate set for the current step count. */
  lr: number;

  constructor(
    readonly optimizer: Optimizer,
    baseLr?: number,
  ) {
    this.baseLr = baseLr ?? Number(optimizer.lr.item());
    this.lr = this.baseLr;
  }

  /** Sets the rate of step 0; subclasses call it once their fields are set. */
  protected start(): void {
    this.lr = this.lrAt(0);
    this.optimizer.setLr(this.lr);
  }

  /** Advances to the next step and sets its rate. */
  step(): void {
    // computed first, so a step past the schedule's end (an error) changes nothing
    const lr = this.lrAt(this.stepCount + 1);
    this.optimizer.setLr(lr);
    [this.lr, this.stepCount] = [lr, this.stepCount + 1];
  }

  /** The rate after t calls of step(). */
  abstract lrAt(t: number): number;
}

export interface StepLROptions {
  /** Factor per stepSize steps. */
  gamma?: number;
}

/** baseLr gamma^floor(t / stepSize) (gamma 0.1), as PyTorch's StepLR. */
export class StepLR extends LRScheduler {
  readonly gamma: number;

  constructor(
    optimizer: Optimizer,
    readonly stepSize: number,
    opts: StepLROptions = {},
  ) {
    super(optimizer);
    const { gamma = 0.1 } = opts;
    checkCount('StepLR', 'stepSize', stepSize);
    checkFactor('StepLR', 'gamma', gamma, 0, Infinity);
    this.gamma = gamma;
    this.start();
  }

  lrAt(t: number): number {
    return this.baseLr * this.gamma ** Math.floor(t / this.stepSize);
  }
}

export interface MultiStepLROptions {
  /** Factor at each milestone. */
  gamma?: number;
}

/** baseLr gamma^(milestones reached by t) (gamma 0.1), as PyTorch's MultiStepLR. */
export class MultiStepLR extends LRScheduler {
  readonly milestones: readonly number[];
  readonly gamma: number;

  constructor(optimizer: Optimizer, milestones: readonly number[], opts: MultiStepLROptions = {}) {
    super(optimizer);
    const { gamma = 0.1 } = opts;
    for (const m of milestones)
      checkCount('MultiStepLR', `milestone ${m} in [${milestones.join(', ')}]`, m, 0);
    checkFactor('MultiStepLR', 'gamma', gamma, 0, Infinity);
    // a repeated milestone counts once per time it is listed (PyTorch's Counter)
    this.milestones = [...milestones].sort((a, b) => a - b);
    this.gamma = gamma;
    this.start();
  }

  lrAt(t: number): number {
    return this.baseLr * this.gamma ** this.milestones.filter((m) => m <= t).length;
  }
}

export interface CosineAnnealingLROptions {
  /** The rate at step tMax. */
  etaMin?: number;
}

/**
 * etaMin + (baseLr - etaMin) (1 + cos(pi t / tMax)) / 2, PyTorch's closed form: from baseLr down to etaMin
 * at step tMax (and, past it, up again with period 2 tMax).
 */
export class CosineAnnealingLR extends LRScheduler {
  readonly etaMin: number;

  constructor(
    optimizer: Optimizer,
    readonly tMax: number,
    opts: CosineAnnealingLROptions = {},
  ) {
    super(optimizer);
    const { etaMin = 0 } = opts;
    checkCount('CosineAnnealingLR', 'tMax', tMax);
    checkFactor('CosineAnnealingLR', 'etaMin', etaMin, 0, Infinity);
    this.etaMin = etaMin;
    this.start();
  }

  lrAt(t: number): number {
    return this.etaMin + ((this.baseLr - this.etaMin) * (1 + Math.cos((Math.PI * t) / this.tMax))) / 2;
  }
}

export interface OneCycleLROptions {
  /** Share of the steps spent rising to maxLr. */
  pctStart?: number;
  /** The first rate is maxLr / divFactor. */
  divFactor?: number;
  /** The last rate is the first / finalDivFactor. */
  finalDivFactor?: number;
  /** Curve of both phases: half a cosine or a line. */
  annealStrategy?: 'cos' | 'linear';
}

/**
 * PyTorch's OneCycleLR (two phases): from maxLr / divFactor up to maxLr at step pctStart totalSteps - 1,
 * then down to maxLr / (divFactor finalDivFactor) at step totalSteps - 1, by half cosines (or lines).
 * The optimizer's own rate is ignored; stepping past totalSteps - 1 is an error, as in PyTorch.
 */
export class OneCycleLR extends LRScheduler {
  readonly pctStart: number;
  readonly annealStrategy: 'cos' | 'linear';
  /** The rates at the start, the peak and the end. */
  readonly initialLr: number;
  readonly minLr: number;

  constructor(
    optimizer: Optimizer,
    readonly maxLr: number,
    readonly totalSteps: number,
    opts: OneCycleLROptions = {},
  ) {
    const { pctStart = 0.3, divFactor = 25, finalDivFactor = 1e4, annealStrategy = 'cos' } = opts;
    checkFactor('OneCycleLR', 'maxLr', maxLr, 0, Infinity);
    checkCount('OneCycleLR', 'totalSteps', totalSteps, 2);
    checkFactor('OneCycleLR', 'pctStart', pctStart, 0, 1);
    checkFactor('OneCycleLR', 'divFactor', divFactor, 0, Infinity, true);
    checkFactor('OneCycleLR', 'finalDivFactor', finalDivFactor, 0, Infinity, true);
    if (annealStrategy !== 'cos' && annealStrategy !== 'linear')
      throw new Error(
        `OneCycleLR: annealStrategy must be 'cos' or 'linear', got ${JSON.stringify(annealStrategy)}`,
      );
    super(optimizer, maxLr / divFactor);
    [this.pctStart, this.annealStrategy] = [pctStart, annealStrategy];
    this.initialLr = maxLr / divFactor;
    this.minLr = this.initialLr / finalDivFactor;
    this.start();
  }

  private anneal(from: number, to: number, pct: number): number {
    if (this.annealStrategy === 'linear') return from + (to - from) * pct;
    return to + ((from - to) * (1 + Math.cos(Math.PI * pct))) / 2;
  }

  lrAt(t: number): number {
    if (t >= this.totalSteps)
      throw new Error(
        `OneCycleLR: step ${t} is past the last of totalSteps ${this.totalSteps} (steps 0 to ${this.totalSteps - 1})`,
      );
    // the phases end at float steps, as PyTorch's; the rise may end before step 0 when it is short
    const peak = this.pctStart * this.totalSteps - 1;
    const end = this.totalSteps - 1;
    if (t <= peak) return this.anneal(this.initialLr, this.maxLr, peak === 0 ? 1 : t / peak);
    return this.anneal(this.maxLr, this.minLr, (t - peak) / (end - peak));
  }
}

/**
 * A linear ramp: baseLr min(1, (t + 1) / warmupSteps), so step 0 trains at baseLr / warmupSteps and
 * step warmupSteps - 1 onward at baseLr (tinygrad's warmup in its cosine-with-warmup schedule).
 */
export class LinearWarmup extends LRScheduler {
  constructor(
    optimizer: Optimizer,
    readonly warmupSteps: number,
  ) {
    super(optimizer);
    checkCount('LinearWarmup', 'warmupSteps', warmupSteps);
    this.start();
  }

  lrAt(t: number): number {
    return this.baseLr * Math.min(1, (t + 1) / this.warmupSteps);
  }
}
