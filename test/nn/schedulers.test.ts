// Learning-rate schedulers: their sequences against closed-form values, the rate they write into the optimizer, errors.
import { describe, expect, it } from 'vitest';
import {
  CosineAnnealingLR,
  LinearWarmup,
  type LRScheduler,
  MultiStepLR,
  OneCycleLR,
  SGD,
  StepLR,
} from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { useDefaultDevice } from '../default-device.ts';
import { DEVICES } from '../devices.ts';
import { close, data } from '../tensor/reference.ts';

function sgd(lr: number): SGD {
  const p = new Tensor(new Float32Array([0, 0]));
  p.requiresGrad = true;
  return new SGD([p], { lr });
}

/** The rates of steps 0..n-1 (the constructor sets step 0's), checking each reached the optimizer's buffer. */
function rates(s: LRScheduler, n: number): number[] {
  const out: number[] = [];
  for (let t = 0; t < n; t++) {
    if (t > 0) s.step();
    expect(s.stepCount).toBe(t);
    close(data(s.optimizer.lr), [s.lr], 1e-6);
    out.push(s.lr);
  }
  return out;
}

const cos = (x: number) => Math.cos(Math.PI * x);

describe.each(DEVICES)('on %s', (device) => {
  useDefaultDevice(device);

  it('StepLR multiplies by gamma every stepSize steps', () => {
    const s = new StepLR(sgd(0.5), 3, { gamma: 0.5 });
    expect(s.baseLr).toBe(0.5);
    close(rates(s, 8), [0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125], 1e-12);
    close(rates(new StepLR(sgd(1), 1), 3), [1, 0.1, 0.01], 1e-12);
  });

  it('MultiStepLR multiplies by gamma at each milestone (unsorted, repeated ones count twice)', () => {
    const s = new MultiStepLR(sgd(1), [4, 2, 4], { gamma: 0.5 });
    close(rates(s, 6), [1, 1, 0.5, 0.5, 0.125, 0.125], 1e-12);
    close(rates(new MultiStepLR(sgd(2), []), 3), [2, 2, 2], 1e-12);
    // a milestone 0 applies from the start, as in PyTorch
    close(rates(new MultiStepLR(sgd(1), [0, 1], { gamma: 0.5 }), 3), [0.5, 0.25, 0.25], 1e-12);
  });

  it('CosineAnnealingLR follows half a cosine from the base rate to etaMin at tMax, then back up', () => {
    const s = new CosineAnnealingLR(sgd(1), 4, { etaMin: 0.2 });
    const want = [
      1,
      0.2 + 0.4 * (1 + cos(0.25)),
      0.6,
      0.2 + 0.4 * (1 + cos(0.75)),
      0.2,
      0.2 + 0.4 * (1 + cos(1.25)),
    ];
    close(rates(s, 6), want, 1e-12);
    expect(want[1]).toBeCloseTo(0.8828427, 6);
  });

  it('OneCycleLR rises to maxLr at pctStart and falls to maxLr / (div finalDiv) at the last step', () => {
    // 10 steps, pctStart 0.3: the rise ends at step 2, the fall at step 9
    const s = new OneCycleLR(sgd(123), 1, 10);
    expect(s.baseLr).toBe(0.04);
    const [init, peak, low] = [0.04, 1, 0.04 / 1e4];
    const fall = (t: number) => low + ((peak - low) * (1 + cos((t - 2) / 7))) / 2;
    const want = [init, (init + peak) / 2, peak, ...[3, 4, 5, 6, 7, 8, 9].map(fall)];
    close(rates(s, 10), want, 1e-12);
    expect(s.lr).toBeCloseTo(4e-6, 12);
    expect(() => s.step()).toThrow('OneCycleLR: step 10 is past the last of totalSteps 10 (steps 0 to 9)');
    expect([s.stepCount, s.lr]).toEqual([9, want[9]]);

    const lin = new OneCycleLR(sgd(1), 2, 5, {
      annealStrategy: 'linear',
      pctStart: 0.4,
      divFactor: 4,
      finalDivFactor: 5,
    });
    // rise over steps 0..1 from 0.5 to 2, fall over steps 1..4 to 0.1
    close(rates(lin, 5), [0.5, 2, 2 - 1.9 / 3, 2 - 3.8 / 3, 0.1], 1e-12);
  });

  it('LinearWarmup ramps from baseLr / warmupSteps to baseLr, then holds', () => {
    // the base rate is read from the optimizer's float32 buffer
    close(rates(new LinearWarmup(sgd(0.8), 4), 6), [0.2, 0.4, 0.6, 0.8, 0.8, 0.8], 1e-7);
    close(rates(new LinearWarmup(sgd(0.3), 1), 2), [0.3, 0.3], 1e-7);
  });

  it('drives training: each step updates by the scheduled rate', () => {
    const p = new Tensor(new Float32Array([1]));
    p.requiresGrad = true;
    const opt = new SGD([p], { lr: 1 });
    const s = new StepLR(opt, 2, { gamma: 0.5 });
    for (let t = 0; t < 5; t++) {
      p.grad = new Tensor(new Float32Array([1]));
      opt.step();
      s.step();
    }
    // rates 1, 1, 0.5, 0.5, 0.25
    close(data(p), [1 - 3.25]);
  });
});

describe('errors', () => {
  useDefaultDevice('JS');
  it('name the scheduler, the option and what is valid', () => {
    expect(() => new StepLR(sgd(1), 0)).toThrow('StepLR: stepSize must be an integer >= 1, got 0');
    expect(() => new StepLR(sgd(1), 2, { gamma: -1 })).toThrow(
      'StepLR: gamma must lie in [0, Infinity], got -1',
    );
    expect(() => new MultiStepLR(sgd(1), [2, 1.5])).toThrow(
      'MultiStepLR: milestone 1.5 in [2, 1.5] must be an integer >= 0, got 1.5',
    );
    expect(() => new CosineAnnealingLR(sgd(1), 0)).toThrow(
      'CosineAnnealingLR: tMax must be an integer >= 1, got 0',
    );
    expect(() => new OneCycleLR(sgd(1), 1, 1)).toThrow(
      'OneCycleLR: totalSteps must be an integer >= 2, got 1',
    );
    expect(() => new OneCycleLR(sgd(1), 1, 10, { pctStart: 1.5 })).toThrow(
      'OneCycleLR: pctStart must lie in [0, 1], got 1.5',
    );
    expect(() => new OneCycleLR(sgd(1), 1, 10, { divFactor: 0 })).toThrow(
      'OneCycleLR: divFactor must lie in (0, Infinity], got 0',
    );
    expect(() => new OneCycleLR(sgd(1), 1, 10, { annealStrategy: 'exp' as 'cos' })).toThrow(
      `OneCycleLR: annealStrategy must be 'cos' or 'linear', got "exp"`,
    );
    expect(() => new LinearWarmup(sgd(1), -2)).toThrow(
      'LinearWarmup: warmupSteps must be an integer >= 1, got -2',
    );
  });
});
