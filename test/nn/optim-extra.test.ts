// LARS, Muon and newtonSchulz against plain-JS references (gradients set by hand) on JS and CPU, and their errors.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { LARS, Muon, newtonSchulz, type Optimizer } from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { useDefaultDevice } from '../default-device.ts';
import { DEVICES } from '../devices.ts';
import { close, data, numel, values } from '../tensor/reference.ts';

// a wide and a tall matrix, a vector (Muon sees a column) and a 3-D weight (Muon sees (2, 4))
const SHAPES = [[2, 3], [4], [3, 2], [2, 1, 2]];
const f32 = (xs: number[]) => new Float32Array(xs);

/** The seeded gradient of parameter i at step t. */
const gradValues = (i: number, t: number, n: number) => values(n, 200 + 10 * t + i);

/** Parameters with seeded values (on the default device), and their values as plain numbers. */
function makeParams(): [Tensor[], number[][]] {
  const init = SHAPES.map((s, i) => values(numel(s), 100 + i));
  const params = init.map((xs, i) => new Tensor(f32(xs)).reshape(SHAPES[i]!).realize());
  for (const p of params) p.requiresGrad = true;
  return [params, init];
}

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

/** A plain-JS optimizer step for parameter i: its new values from its values, gradient and state. */
type RefStep = (p: number[], g: number[], state: Record<string, number[]>, i: number) => number[];

function reference(init: number[][], steps: number, f: RefStep): number[][] {
  return init.map((p0, i) => {
    let p = [...p0];
    const state: Record<string, number[]> = {};
    for (let t = 0; t < steps; t++) p = f(p, gradValues(i, t, p.length), state, i);
    return p;
  });
}

const norm = (v: number[]) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));

/** g with momentum: b = momentum b + g, then b or (Nesterov) g + momentum b. */
function withMomentum(
  g: number[],
  state: Record<string, number[]>,
  momentum: number,
  nesterov: boolean,
): number[] {
  if (momentum === 0) return g;
  const b = (state.b ??= g.map(() => 0));
  g.forEach((x, k) => {
    b[k] = momentum * b[k]! + x;
  });
  return nesterov ? g.map((x, k) => x + momentum * b[k]!) : [...b];
}

function larsRef(
  lr: number,
  momentum: number,
  wd: number,
  nesterov: boolean,
  classic: boolean,
  tcoef: number,
): RefStep {
  return (p, grad, state) => {
    const [r1, r2] = [norm(p), norm(grad)];
    const r = tcoef > 0 && r1 > 0 && r2 > 0 ? (tcoef * r1) / (r2 + wd * r1) : 1;
    let g = grad.map((x, k) => x + wd * p[k]!);
    if (classic) g = g.map((x) => x * r * lr);
    g = withMomentum(g, state, momentum, nesterov);
    if (!classic) g = g.map((x) => x * r * lr);
    return p.map((x, k) => x - g[k]!);
  };
}

type Matrix = number[][];
const matmul = (a: Matrix, b: Matrix): Matrix =>
  a.map((row) => b[0]!.map((_, j) => row.reduce((s, v, k) => s + v * b[k]![j]!, 0)));
const transpose = (a: Matrix): Matrix => a[0]!.map((_, j) => a.map((row) => row[j]!));

/** Newton-Schulz on a plain matrix: X = G / (|G| + eps), then X = sum_i c_i (X X^T)^i X, tall ones transposed. */
function nsRef(g: Matrix, steps: number, coefficients: number[]): Matrix {
  if (g.length > g[0]!.length) return transpose(nsRef(transpose(g), steps, coefficients));
  const scale = norm(g.flat()) + 1e-7;
  let x = g.map((row) => row.map((v) => v / scale));
  for (let s = 0; s < steps; s++) {
    const gram = matmul(x, transpose(x));
    let power = x;
    let next = x.map((row) => row.map((v) => v * coefficients[0]!));
    for (const c of coefficients.slice(1)) {
      power = matmul(gram, power);
      next = next.map((row, r) => row.map((v, j) => v + c * power[r]![j]!));
    }
    x = next;
  }
  return x;
}

function muonRef(
  lr: number,
  momentum: number,
  wd: number,
  nesterov: boolean,
  steps: number,
  coefficients: number[],
): RefStep {
  return (p, grad, state, i) => {
    const g = withMomentum(grad, state, momentum, nesterov);
    const rows = SHAPES[i]![0]!;
    const cols = g.length / rows;
    const matrix = Array.from({ length: rows }, (_, r) => g.slice(r * cols, (r + 1) * cols));
    const o = nsRef(matrix, steps, coefficients).flat();
    return p.map((x, k) => x * (1 - lr * wd) - lr * o[k]!);
  };
}

const check = (got: number[][], want: number[][], tol: number) => {
  got.forEach((g, i) => {
    close(g, want[i]!, tol);
  });
};

describe.each(DEVICES)('on %s', (device) => {
  useDefaultDevice(device);

  it.each([
    ['defaults (classic momentum, tcoef 0.001)', { lr: 0.1 }, larsRef(0.1, 0.9, 1e-4, false, true, 0.001)],
    [
      'Nesterov, popular momentum, strong decay and trust',
      { lr: 0.05, momentum: 0.8, nesterov: true, classic: false, weightDecay: 0.1, tcoef: 0.5 },
      larsRef(0.05, 0.8, 0.1, true, false, 0.5),
    ],
    [
      'no momentum, no trust ratio',
      { lr: 0.2, momentum: 0, tcoef: 0 },
      larsRef(0.2, 0, 1e-4, false, true, 0),
    ],
  ] as const)('LARS, %s, over 1 and 3 steps', (_, opts, ref) => {
    for (const steps of [1, 3]) {
      const { got, init } = run((ps) => new LARS(ps, opts), steps);
      check(got, reference(init, steps, ref), 2e-5);
    }
  });

  it('LARS leaves the trust ratio at 1 for a zero parameter', () => {
    const p = Tensor.zeros([3]).realize();
    p.requiresGrad = true;
    const opt = new LARS([p], { lr: 0.5, momentum: 0.5 });
    p.grad = new Tensor(f32([1, -2, 4]));
    opt.step();
    close(data(p), [-0.5, 1, -2]);
    expect(data(opt.buf[0]!)).toEqual([0.5, -1, 2]);
  });

  it.each([
    ['defaults', {}, muonRef(0.001, 0.95, 0.1, true, 5, [3.4445, -4.775, 2.0315])],
    [
      'plain momentum, the cubic iteration, no decay',
      { lr: 0.02, momentum: 0.5, nesterov: false, weightDecay: 0, nsSteps: 3, nsCoefficients: [1.5, -0.5] },
      muonRef(0.02, 0.5, 0, false, 3, [1.5, -0.5]),
    ],
  ] as const)('Muon, %s, over 1 and 3 steps', (_, opts, ref) => {
    for (const steps of [1, 3]) {
      const { got, init } = run((ps) => new Muon(ps, opts), steps);
      check(got, reference(init, steps, ref), 1e-5);
    }
  });

  it('newtonSchulz orthogonalizes: the cubic iteration brings a wide matrix to orthonormal rows', () => {
    const g = [
      [2, 0.5, -1, 0.3],
      [0.1, 1, 0.4, -0.7],
      [0.6, -0.2, 0.9, 1.2],
    ];
    // 30 lazy steps are some 60 kernels: compiled with gcc that is a minute, so only on JS
    if (device === 'JS') {
      const x = newtonSchulz(new Tensor(g), 30, [1.5, -0.5]);
      const rows = [0, 1, 2].map((r) => data(x).slice(r * 4, r * 4 + 4));
      close(matmul(rows, transpose(rows)).flat(), [1, 0, 0, 0, 1, 0, 0, 0, 1], 1e-4);
    }
    // the same as the plain-JS iteration, and a tall matrix goes through transposed
    close(
      data(newtonSchulz(new Tensor(g).transpose(), 5, [3.4445, -4.775, 2.0315])),
      transpose(nsRef(g, 5, [3.4445, -4.775, 2.0315])).flat(),
      1e-5,
    );
    // a batch of matrices, each on its own
    const batch = newtonSchulz(new Tensor([g, g.map((r) => r.map((v) => -2 * v))]), 2, [2, -1.5, 0.5]);
    const one = nsRef(g, 2, [2, -1.5, 0.5]).flat();
    close(data(batch), [...one, ...one.map((v) => -v)], 1e-5);
  });
});

describe('newtonSchulz gradient against central differences (float64)', () => {
  it.each([
    [2, 3],
    [3, 2],
  ])('of a (%i, %i) matrix', (rows, cols) => {
    const opts = { dtype: dtypes.float64, device: 'JS' };
    const xs = values(rows * cols, 61);
    const f = (x: Tensor) => newtonSchulz(x.reshape([rows, cols]), 2, [2, -1.5, 0.5]);
    const w = new Tensor(new Float64Array(values(rows * cols, 62)), opts).reshape([rows, cols]);
    const leaf = new Tensor(new Float64Array(xs), opts);
    const [grad] = Tensor.gradient(f(leaf).mul(w).sum(), [leaf]);
    const at = (i: number, d: number) => {
      const moved = xs.slice();
      moved[i]! += d;
      return Number(
        f(new Tensor(new Float64Array(moved), opts))
          .mul(w)
          .sum()
          .item(),
      );
    };
    close(
      data(grad!),
      xs.map((_, i) => (at(i, 1e-6) - at(i, -1e-6)) / 2e-6),
      1e-5,
    );
  });
});

describe('errors', () => {
  const param = () => {
    const p = new Tensor(f32([1, 2]), { device: 'JS' });
    p.requiresGrad = true;
    return p;
  };
  it('names the optimizer, the option and the valid range', () => {
    expect(() => new LARS([param()], { momentum: -1 })).toThrow(
      'LARS: momentum must lie in [0, Infinity], got -1',
    );
    expect(() => new LARS([param()], { tcoef: -0.1 })).toThrow(
      'LARS: tcoef must lie in [0, Infinity], got -0.1',
    );
    expect(() => new LARS([param()], { momentum: 0, nesterov: true })).toThrow(
      'LARS: nesterov needs a momentum above 0',
    );
    expect(() => new Muon([param()], { nsSteps: 1.5 })).toThrow(
      'Muon: nsSteps must be a non-negative integer, got 1.5',
    );
    expect(() => new Muon([param()], { nsCoefficients: [] })).toThrow(
      'Muon: nsCoefficients must be one or more finite numbers, got []',
    );
    expect(() => new Muon([param()], { lr: -1 })).toThrow('Muon: lr must lie in [0, Infinity], got -1');
    expect(() => new Muon([])).toThrow('Muon: no parameters');
  });
  it('newtonSchulz needs a matrix, whole steps and a coefficient', () => {
    const v = new Tensor([1, 2], { device: 'JS' });
    expect(() => newtonSchulz(v, 5, [1])).toThrow('newtonSchulz: needs a matrix (2 or more dims), got (2)');
    expect(() => newtonSchulz(v.reshape([1, 2]), -1, [1])).toThrow(
      'newtonSchulz: steps must be a non-negative integer, got -1',
    );
    expect(() => newtonSchulz(v.reshape([1, 2]), 1, [])).toThrow(
      'newtonSchulz: needs at least one coefficient',
    );
  });
});
