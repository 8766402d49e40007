// Optimizers: update formulas against hand-computed references (gradients set by hand), lr as a buffer, training end to end.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { jit } from '../../src/engine/jit.ts';
import { cachedPlans } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import {
  Adam,
  AdamW,
  BatchNorm,
  Conv2d,
  ConvTranspose2d,
  Dropout,
  Embedding,
  GroupNorm,
  getBuffers,
  getParameters,
  LAMB,
  LayerNorm,
  Linear,
  type Optimizer,
  RMSNorm,
  SGD,
} from '../../src/nn/index.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { close, data, values } from '../tensor/reference.ts';

let previous: string;
beforeAll(() => {
  previous = Device.default;
  Device.default = 'JS';
});
afterAll(() => {
  Device.default = previous;
  Tensor.training = false;
});

const SHAPES = [[2, 3], [4]];
const f32 = (xs: number[]) => new Float32Array(xs);

/** Parameters with seeded values, and their values as plain numbers. */
function makeParams(): [Tensor[], number[][]] {
  const init = SHAPES.map((s, i) =>
    values(
      s.reduce((a, b) => a * b, 1),
      100 + i,
    ),
  );
  const params = init.map((xs, i) => new Tensor(f32(xs)).reshape(SHAPES[i]!).realize());
  for (const p of params) p.requiresGrad = true;
  return [params, init];
}

/** The seeded gradient of parameter i at step t. */
const gradValues = (i: number, t: number, n: number) => values(n, 200 + 10 * t + i);

/** Runs `steps` steps with hand-set gradients; the parameters' values after them. */
function run(make: (params: Tensor[]) => Optimizer, steps: number): { got: number[][]; init: number[][] } {
  const [params, init] = makeParams();
  const opt = make(params);
  for (let t = 0; t < steps; t++) {
    params.forEach((p, i) => {
      p.grad = new Tensor(f32(gradValues(i, t, p.numel))).reshape(p.shape);
    });
    opt.step();
  }
  return { got: params.map(data), init };
}

/** A plain-JS optimizer: per step, the new values of one parameter from its values, gradient and state. */
type RefStep = (p: number[], g: number[], state: Record<string, number[]>, t: number) => number[];

function reference(init: number[][], steps: number, f: RefStep): number[][] {
  return init.map((p0, i) => {
    let p = [...p0];
    const state: Record<string, number[]> = {};
    for (let t = 0; t < steps; t++) p = f(p, gradValues(i, t, p.length), state, t + 1);
    return p;
  });
}

const norm = (v: number[]) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));

function sgdRef(lr: number, momentum: number, nesterov: boolean, wd: number): RefStep {
  return (p, grad, state) => {
    let g = grad.map((x, k) => x + wd * p[k]!);
    if (momentum > 0) {
      const b = (state.b ??= p.map(() => 0));
      g.forEach((x, k) => {
        b[k] = momentum * b[k]! + x;
      });
      g = nesterov ? g.map((x, k) => x + momentum * b[k]!) : [...b];
    }
    return p.map((x, k) => x - lr * g[k]!);
  };
}

function adamRef(lr: number, b1: number, b2: number, eps: number, wd: number, trust: boolean): RefStep {
  return (p, g, state, t) => {
    const m = (state.m ??= p.map(() => 0));
    const v = (state.v ??= p.map(() => 0));
    g.forEach((x, k) => {
      m[k] = b1 * m[k]! + (1 - b1) * x;
      v[k] = b2 * v[k]! + (1 - b2) * x * x;
    });
    const up = p.map((x, k) => m[k]! / (1 - b1 ** t) / (Math.sqrt(v[k]! / (1 - b2 ** t)) + eps) + wd * x);
    const [r1, r2] = [norm(p), norm(up)];
    const r = trust && r1 > 0 && r2 > 0 ? r1 / r2 : 1;
    return p.map((x, k) => x - lr * r * up[k]!);
  };
}

const check = (got: number[][], want: number[][]) => {
  got.forEach((g, i) => {
    close(g, want[i]!, 2e-5);
  });
};

describe('update formulas', () => {
  it.each([
    ['plain', { lr: 0.1 }, sgdRef(0.1, 0, false, 0)],
    ['momentum', { lr: 0.05, momentum: 0.9 }, sgdRef(0.05, 0.9, false, 0)],
    [
      'nesterov and weight decay',
      { lr: 0.05, momentum: 0.8, nesterov: true, weightDecay: 0.1 },
      sgdRef(0.05, 0.8, true, 0.1),
    ],
  ] as const)('SGD, %s, over 1 and 3 steps', (_, opts, ref) => {
    for (const steps of [1, 3]) {
      const { got, init } = run((ps) => new SGD(ps, opts), steps);
      check(got, reference(init, steps, ref));
    }
  });

  it.each([
    ['Adam', (ps: Tensor[]) => new Adam(ps, { lr: 0.01 }), adamRef(0.01, 0.9, 0.999, 1e-8, 0, false)],
    [
      'Adam, other betas',
      (ps: Tensor[]) => new Adam(ps, { lr: 0.02, b1: 0.5, b2: 0.8, eps: 1e-3 }),
      adamRef(0.02, 0.5, 0.8, 1e-3, 0, false),
    ],
    [
      'AdamW',
      (ps: Tensor[]) => new AdamW(ps, { lr: 0.01, weightDecay: 0.1 }),
      adamRef(0.01, 0.9, 0.999, 1e-8, 0.1, false),
    ],
    [
      'LAMB',
      (ps: Tensor[]) => new LAMB(ps, { lr: 0.01, weightDecay: 0.05 }),
      adamRef(0.01, 0.9, 0.999, 1e-6, 0.05, true),
    ],
  ] as const)('%s over 1 and 4 steps', (_, make, ref) => {
    for (const steps of [1, 4]) {
      const { got, init } = run(make, steps);
      check(got, reference(init, steps, ref));
    }
  });

  it('keeps moments and step counts as tensors (b1^t after t steps)', () => {
    const [params] = makeParams();
    const opt = new Adam(params, { b1: 0.5, b2: 0.25 });
    for (let t = 0; t < 3; t++) {
      params.forEach((p, i) => {
        p.grad = new Tensor(f32(gradValues(i, t, p.numel))).reshape(p.shape);
      });
      opt.step();
    }
    close(data(opt.b1t), [0.125]);
    close(data(opt.b2t), [0.25 ** 3]);
    const g = [0, 1, 2].map((t) => gradValues(1, t, 4));
    close(
      data(opt.m[1]!),
      g[0]!.map((_, k) => 0.5 * (0.5 * (0.5 * g[0]![k]!) + 0.5 * g[1]![k]!) + 0.5 * g[2]![k]!),
    );
  });
});

describe('step', () => {
  it('realizes parameters and state in one realize call; each becomes a buffer', () => {
    const [params] = makeParams();
    const opt = new AdamW(params);
    params.forEach((p) => {
      p.grad = Tensor.onesLike(p);
    });
    Tensor.realizeDeferred(); // the moments' zeros, written apart before the step's graph reads them
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      Context.with({ DEBUG: 1 }, () => opt.step());
      expect(log.mock.calls.filter(([line]) => String(line).startsWith('realize:'))).toHaveLength(1);
    } finally {
      log.mockRestore();
    }
    for (const t of [...params, ...opt.m, ...opt.v, opt.b1t]) expect(t.uop.op).toBe(Ops.BUFFER);
    expect(params.every((p) => p.requiresGrad)).toBe(true);
  });

  it('takes the learning rate from a buffer: a new rate reuses the cached schedule', () => {
    const p = new Tensor(f32([1, 2, 3]), { requiresGrad: true });
    const opt = new SGD([p], { lr: 0.5, momentum: 0.5 });
    const stepWith = (g: number[]) => {
      p.grad = new Tensor(f32(g));
      opt.step();
    };
    stepWith([1, 1, 1]); // p = 1 - 0.5, buf = 1
    const lr = opt.lr.uop;
    opt.setLr(0.1); // the first setLr adds the one schedule that copies a rate in
    stepWith([2, 2, 2]); // buf = 0.5 + 2, p -= 0.1 * 2.5
    const plans = cachedPlans();
    opt.setLr(0.01);
    stepWith([0, 0, 0]); // buf = 1.25, p -= 0.01 * 1.25
    expect(cachedPlans()).toBe(plans);
    expect(opt.lr.uop).toBe(lr); // the same buffer all along
    close(
      data(p),
      [1, 2, 3].map((x) => x - 0.5 - 0.25 - 0.0125),
    );
    close(data(opt.lr), [0.01]);
  });

  it('setLr reaches a jitted step: the captured kernels read the new rate from the same buffer', () => {
    const p = new Tensor(f32([1, 2, 3]), { requiresGrad: true });
    const opt = new SGD([p], { lr: 0.5 });
    const step = jit(function sgd(g: Tensor) {
      p.grad = g;
      opt.step();
      return p;
    });
    const g = new Tensor(f32([1, 2, 4]));
    const expected = [1, 2, 3];
    for (const lr of [0.5, 0.5, 0.25, 0.125, 0.125]) {
      if (lr !== opt.lr.item()) opt.setLr(lr);
      step(g);
      expected.forEach((x, i) => {
        expected[i] = x - lr * [1, 2, 4][i]!;
      });
      close(data(p), expected);
    }
  });

  it('zeroGrad forgets gradients; a missing gradient names the parameter', () => {
    const [params] = makeParams();
    const opt = new SGD(params);
    params.forEach((p) => {
      p.grad = Tensor.onesLike(p);
    });
    opt.zeroGrad();
    expect(params.every((p) => p.grad === undefined)).toBe(true);
    params[0]!.grad = Tensor.onesLike(params[0]!);
    expect(() => opt.step()).toThrow(
      /SGD.step: parameter 1 \(4\) has no gradient; call loss.backward\(\) first/,
    );
  });

  it('rejects bad parameters and options, naming them', () => {
    expect(() => new SGD([])).toThrow(/SGD: no parameters/);
    expect(() => new Adam([new Tensor([1.5, 2])])).toThrow(
      /Adam: parameter 0 \(2\) float32 on JS should be a float tensor with requiresGrad/,
    );
    const [params] = makeParams();
    expect(() => new SGD(params, { nesterov: true })).toThrow(/nesterov needs a momentum above 0/);
    expect(() => new Adam(params, { b1: 1 })).toThrow(/Adam: b1 must lie in \[0, 1\), got 1/);
    expect(() => new LAMB(params, { lr: -1 })).toThrow(/LAMB: lr must lie in \[0, Infinity\], got -1/);
    expect(() => new SGD(params).setLr(Number.NaN)).toThrow(/SGD.setLr: lr must lie/);
    // a parameter listed twice is updated once
    expect(new SGD([...params, params[0]!]).params).toHaveLength(2);
  });
});

describe('training end to end', () => {
  // y = x . (1, -2, 0.5) + 0.3 on 32 seeded points
  const xs = values(32 * 3, 300);
  const ys = Array.from(
    { length: 32 },
    (_, r) => xs[3 * r]! - 2 * xs[3 * r + 1]! + 0.5 * xs[3 * r + 2]! + 0.3,
  );
  // built in the tests, after beforeAll picked the device
  const X = () => new Tensor(f32(xs)).reshape([32, 3]);
  const Y = () => new Tensor(f32(ys)).reshape([32, 1]);

  it.each([
    ['SGD', (ps: Tensor[]) => new SGD(ps, { lr: 0.1, momentum: 0.5 })],
    ['Adam', (ps: Tensor[]) => new Adam(ps, { lr: 0.1 })],
  ] as const)('%s reduces the loss of a linear regression', (_, make) => {
    Tensor.manualSeed(1);
    const model = new Linear(3, 1);
    const opt = make(getParameters(model));
    const losses: number[] = [];
    for (let i = 0; i < 15; i++) {
      opt.zeroGrad();
      const loss = model.call(X()).sub(Y()).square().mean();
      loss.backward();
      opt.step(loss);
      losses.push(Number(loss.item()));
    }
    expect(losses.at(-1)!).toBeLessThan(0.1 * losses[0]!);
  });

  it('trains a model with every layer kind: each parameter gets a gradient and the loss falls', () => {
    Tensor.manualSeed(3);
    const m = {
      emb: new Embedding(10, 4),
      conv: new Conv2d(1, 4, 3, { padding: 1 }),
      bn: new BatchNorm(4),
      gn: new GroupNorm(2, 4),
      up: new ConvTranspose2d(4, 2, 2, { stride: 2 }),
      ln: new LayerNorm(8),
      rms: new RMSNorm(8),
      drop: new Dropout(0.1),
      head: new Linear(2 * 8 * 8 + 4, 3),
    };
    const img = new Tensor(f32(values(6 * 16, 400))).reshape([6, 1, 4, 4]);
    const tokens = new Tensor([1, 2, 3, 4, 5, 6]);
    const labels = new Tensor([0, 1, 2, 0, 1, 2]);
    const params = getParameters(m);
    const opt = new Adam(params, { lr: 0.02 });
    Tensor.training = true;
    const losses: number[] = [];
    for (let i = 0; i < 5; i++) {
      opt.zeroGrad();
      const h = m.rms.call(m.ln.call(m.up.call(m.gn.call(m.bn.call(m.conv.call(img)).relu()))));
      const features = Tensor.cat([m.drop.call(h.flatten(1)), m.emb.call(tokens)], 1);
      const loss = m.head.call(features).sparseCategoricalCrossentropy(labels);
      loss.backward();
      expect(params.filter((p) => p.grad === undefined)).toHaveLength(0);
      opt.step(loss, ...getBuffers(m));
      losses.push(Number(loss.item()));
    }
    expect(losses.at(-1)!).toBeLessThan(0.2 * losses[0]!);
  });

  it('realizes BatchNorm running statistics with the step (getBuffers)', () => {
    Tensor.manualSeed(2);
    const model = { bn: new BatchNorm(3), head: new Linear(3, 1) };
    const opt = new Adam(getParameters(model), { lr: 0.05 });
    expect(getParameters(model)).toHaveLength(4);
    Tensor.training = true;
    for (let i = 0; i < 3; i++) {
      opt.zeroGrad();
      const loss = model.head.call(model.bn.call(X())).sub(Y()).square().mean();
      loss.backward();
      opt.step(loss, ...getBuffers(model));
    }
    for (const b of getBuffers(model)) expect(b.uop.op).toBe(Ops.BUFFER);
    expect(data(model.bn.numBatchesTracked!)).toEqual([3]);
    const batchMean = [0, 1, 2].map((c) => xs.filter((_, k) => k % 3 === c).reduce((a, b) => a + b, 0) / 32);
    close(
      data(model.bn.runningMean!),
      batchMean.map((m) => (1 - 0.9 ** 3) * m),
      1e-5,
    );
  });
});
