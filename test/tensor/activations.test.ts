// Activations and math (log10, inverse hyperbolics, lerp, copysign, logaddexp, isclose) against plain-JS references.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { gradCheckAll } from './gradcheck.ts';
import { close, data, mapRef, numel, values } from './reference.ts';

const f32 = Math.fround;
const SELU_ALPHA = 1.6732632423543772;
const SELU_SCALE = 1.0507009873554805;

/** Values where activations go wrong: zeros, tiny, the kinks, large, huge, infinities, NaN. */
const EDGES = [
  0,
  -0,
  1e-6,
  -1e-6,
  0.5,
  -0.5,
  3,
  -3,
  6,
  -6,
  20,
  -20,
  100,
  -100,
  1e30,
  -1e30,
  Infinity,
  -Infinity,
  NaN,
].map(f32);
const XS = [...values(24, 3), ...EDGES];

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const softplus = (x: number) => Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
const clampRef = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);
/** x * g(x), with the limit 0 at -inf (where x * 0 is NaN). */
const gated = (g: (x: number) => number) => (x: number) => (x === -Infinity ? 0 : x * g(x));

type Unary = [(t: Tensor) => Tensor, (x: number) => number];
const ACTIVATIONS: Record<string, Unary> = {
  hardswish: [(t) => t.hardswish(), gated((x) => clampRef(x + 3, 0, 6) / 6)],
  hardsigmoid: [(t) => t.hardsigmoid(), (x) => clampRef(x / 6 + 0.5, 0, 1)],
  'hardsigmoid(0.2, 0.3)': [(t) => t.hardsigmoid(0.2, 0.3), (x) => clampRef(0.2 * x + 0.3, 0, 1)],
  relu6: [(t) => t.relu6(), (x) => clampRef(x, 0, 6)],
  selu: [(t) => t.selu(), (x) => SELU_SCALE * (x > 0 ? x : SELU_ALPHA * Math.expm1(x))],
  mish: [(t) => t.mish(), gated((x) => Math.tanh(softplus(x)))],
  swish: [(t) => t.swish(), gated(sigmoid)],
  celu: [(t) => t.celu(), (x) => (x > 0 ? x : Math.expm1(x))],
  'celu(0.5)': [(t) => t.celu(0.5), (x) => (x > 0 ? x : 0.5 * Math.expm1(x / 0.5))],
  'celu(-2)': [(t) => t.celu(-2), (x) => Math.max(0, x) + Math.min(0, -2 * Math.expm1(x / -2))],
  hardtanh: [(t) => t.hardtanh(), (x) => clampRef(x, -1, 1)],
  'hardtanh(-2, 3)': [(t) => t.hardtanh(-2, 3), (x) => clampRef(x, -2, 3)],
  quickGelu: [(t) => t.quickGelu(), gated((x) => sigmoid(1.702 * x))],
  logsigmoid: [(t) => t.logsigmoid(), (x) => -softplus(-x)],
  softsign: [
    (t) => t.softsign(),
    (x) => (Number.isFinite(x) || Number.isNaN(x) ? x / (1 + Math.abs(x)) : Math.sign(x)),
  ],
  log10: [(t) => t.log10(), Math.log10],
  asinh: [(t) => t.asinh(), Math.asinh],
  acosh: [(t) => t.acosh(), Math.acosh],
  atanh: [(t) => t.atanh(), Math.atanh],
};

const f32Tensor = (xs: number[], device: string, shape = [xs.length]) =>
  new Tensor(new Float32Array(xs), { device }).reshape(shape);
const f64Tensor = (xs: number[], device: string) => new Tensor(new Float64Array(xs), { device });
/** Largest relative error of got against want (both finite). */
const relErr = (got: number[], want: number[]) =>
  Math.max(...got.map((g, i) => Math.abs(g - want[i]!) / Math.max(Math.abs(want[i]!), Number.MIN_VALUE)));

describe.each(DEVICES)('activations and unary math on %s', (device) => {
  it.each(Object.keys(ACTIVATIONS))('%s matches the reference on random and edge values', (name) => {
    const [f, ref] = ACTIVATIONS[name]!;
    const out = f(f32Tensor(XS, device));
    expect(out.dtype).toBe(dtypes.float32);
    close(data(out), XS.map(ref), 2e-6);
  });

  it('works on a non-contiguous (permuted, sliced) input', () => {
    const xs = values(24, 9);
    const t = f32Tensor(xs, device, [2, 3, 4]).permute(2, 0, 1).get([1, 3]);
    // the reference reads the same elements: [k, i, j] = x[i, j, k] for k in 1..2
    const picked: number[] = [];
    for (let k = 1; k < 3; k++)
      for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) picked.push(xs[i * 12 + j * 4 + k]!);
    for (const name of ['hardswish', 'mish', 'logsigmoid', 'asinh', 'atanh']) {
      const [f, ref] = ACTIVATIONS[name]!;
      expect(f(t).shape).toEqual([2, 2, 3]);
      close(data(f(t)), picked.map(ref), 2e-6);
    }
  });

  it('integer inputs: relu6 and hardtanh keep the dtype, the others compute in float32', () => {
    const ints = values(12, 4, true);
    const t = new Tensor(new Int32Array(ints.map((v) => v * 2)), { device });
    expect(t.relu6().dtype).toBe(dtypes.int32);
    expect(data(t.relu6())).toEqual(ints.map((v) => clampRef(v * 2, 0, 6)));
    expect(t.hardtanh(-3, 4).dtype).toBe(dtypes.int32);
    expect(data(t.hardtanh(-3, 4))).toEqual(ints.map((v) => clampRef(v * 2, -3, 4)));
    expect(t.hardswish().dtype).toBe(dtypes.float32);
    close(
      data(t.hardswish()),
      ints.map((v) => (2 * v * clampRef(2 * v + 3, 0, 6)) / 6),
    );
    close(
      data(t.log10()),
      ints.map((v) => Math.log10(2 * v)),
    );
    close(
      data(t.softsign()),
      ints.map((v) => (2 * v) / (1 + Math.abs(2 * v))),
    );
  });

  it('zero-size and size-1 inputs', () => {
    const empty = f32Tensor([], device, [0, 3]);
    expect(empty.mish().shape).toEqual([0, 3]);
    expect(empty.atanh().tolist()).toEqual([]);
    close(data(f32Tensor([0.25], device, [1, 1]).selu()), [SELU_SCALE * 0.25]);
  });

  it('stable where naive forms fail: large |x| and x near 0 and ±1 (float32)', () => {
    // asinh and acosh of huge x (x^2 overflows), asinh and atanh of tiny x (log(1 + x) rounds to 0)
    const big = [1e20, -1e20, 3e38, 1e10].map(f32);
    close(data(f32Tensor(big, device).asinh()), big.map(Math.asinh), 1e-6);
    close(
      data(f32Tensor(big.map(Math.abs), device).acosh()),
      big.map((v) => Math.acosh(Math.abs(v))),
      1e-6,
    );
    const tiny = [1e-8, -3e-10, 1e-30, 2.5e-4].map(f32);
    expect(relErr(data(f32Tensor(tiny, device).asinh()), tiny.map(Math.asinh))).toBeLessThan(1e-6);
    expect(relErr(data(f32Tensor(tiny, device).atanh()), tiny.map(Math.atanh))).toBeLessThan(1e-6);
    // acosh just above 1, atanh just below 1: the float32 neighbours of 1
    const above = [1 + 2 ** -23, 1 + 2 ** -20, 1.001].map(f32);
    expect(relErr(data(f32Tensor(above, device).acosh()), above.map(Math.acosh))).toBeLessThan(1e-6);
    const below = [1 - 2 ** -24, -(1 - 2 ** -24), 1 - 2 ** -20, 0.999].map(f32);
    expect(relErr(data(f32Tensor(below, device).atanh()), below.map(Math.atanh))).toBeLessThan(1e-6);
    // logsigmoid of large |x|: -x below, a tiny negative number above (not log(0) = -inf)
    const ls = data(f32Tensor([-200, -30, 30, 80], device).logsigmoid());
    close(ls, [-200, -30, -Math.exp(-30), -Math.exp(-80)], 1e-6);
    // float32 exp of a large argument carries a few ulps of the argument's rounding
    expect(relErr(ls.slice(2), [-Math.exp(-30), -Math.exp(-80)])).toBeLessThan(1e-5);
  });

  it('inverse hyperbolics are accurate in float64 too (relative error below 1e-14)', () => {
    const xs = [1e-300, 1e-17, 1e-9, 0.1, 0.7, 1.5, 10, 1e7, 1e9, 1e150, 1e300];
    expect(relErr(data(f64Tensor(xs, device).asinh()), xs.map(Math.asinh))).toBeLessThan(1e-14);
    const ys = [1 + 2 ** -52, 1 + 1e-9, 1.5, 10, 1e7, 1e9, 1e300];
    expect(relErr(data(f64Tensor(ys, device).acosh()), ys.map(Math.acosh))).toBeLessThan(1e-14);
    const zs = [1e-300, 1e-17, 1e-9, 0.3, 0.9, 1 - 2 ** -53, -0.5];
    expect(relErr(data(f64Tensor(zs, device).atanh()), zs.map(Math.atanh))).toBeLessThan(1e-14);
  });

  it('inverse hyperbolics in float16: the large-x branch starts where x^2 would still fit', () => {
    const x = f32Tensor([0.001, 0.5, 20, 31, 33, 100, 1000, 60000], device).half();
    const xs = data(x.float());
    close(data(x.asinh().float()), xs.map(Math.asinh), 2e-3);
    close(data(x.acosh().float()), xs.map(Math.acosh), 2e-3);
    const y = f32Tensor([0.001, -0.5, 0.999, 0.9995], device).half();
    close(data(y.atanh().float()), data(y.float()).map(Math.atanh), 2e-3);
    expect(x.asinh().dtype).toBe(dtypes.float16);
  });

  it('inverse hyperbolics: signed zeros, infinities and values outside the domain', () => {
    const show = (t: Tensor) => data(t).map((v) => (Object.is(v, -0) ? '-0' : v));
    const x = f32Tensor([-0, 0, Infinity, -Infinity, NaN], device);
    expect(show(x.asinh())).toEqual(['-0', 0, Infinity, -Infinity, NaN]);
    expect(show(x.atanh())).toEqual(['-0', 0, NaN, NaN, NaN]);
    expect(show(f32Tensor([1, -1, 1.5, -1.5], device).atanh())).toEqual([Infinity, -Infinity, NaN, NaN]);
    expect(show(f32Tensor([1, 0.5, -1, -3, Infinity, -Infinity], device).acosh())).toEqual([
      0,
      NaN,
      NaN,
      NaN,
      Infinity,
      NaN,
    ]);
  });

  it('softmin along an axis (negative, size 1, zero size, permuted input)', () => {
    const shape = [3, 4];
    const xs = values(12, 5);
    const softminRef = (v: number[]) => {
      const m = Math.min(...v);
      const e = v.map((a) => Math.exp(m - a));
      const s = e.reduce((a, b) => a + b, 0);
      return e.map((a) => a / s);
    };
    const t = f32Tensor(xs, device, shape);
    close(data(t.softmin()), mapRef(xs, shape, 1, softminRef));
    close(data(t.softmin(-2)), mapRef(xs, shape, 0, softminRef));
    close(data(t.softmin(0)), mapRef(xs, shape, 0, softminRef));
    close(data(t.T.softmin(1)), data(t.softmin(0).T.contiguous()));
    close(data(f32Tensor([1, 2, 3], device, [3, 1]).softmin(1)), [1, 1, 1]);
    expect(f32Tensor([], device, [0, 3]).softmin(1).shape).toEqual([0, 3]);
    close(data(f32Tensor([1000, 1001, -1000], device).softmin()), softminRef([1000, 1001, -1000]));
  });
});

describe.each(DEVICES)('binary math on %s', (device) => {
  const xs = values(6, 11);
  const ys = values(3, 12);
  const x = () => f32Tensor(xs, device, [2, 3]);
  const y = () => f32Tensor(ys, device, [3]);
  const pairs = (f: (a: number, b: number) => number) => xs.map((a, i) => f(a, ys[i % 3]!));

  it('lerp with tensor and number weights, broadcast; exact at weight 0 and 1', () => {
    const lerpRef = (a: number, b: number, w: number) => (w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w));
    const ws = [0.25, 0.75];
    const w = f32Tensor(ws, device, [2, 1]);
    close(
      data(x().lerp(y(), w)),
      xs.map((a, i) => lerpRef(a, ys[i % 3]!, ws[Math.floor(i / 3)]!)),
    );
    close(
      data(x().lerp(y(), 0.3)),
      pairs((a, b) => lerpRef(a, b, f32(0.3))),
    );
    close(
      data(x().lerp(2, 1.5)),
      xs.map((a) => lerpRef(a, 2, 1.5)),
    );
    expect(data(x().lerp(y(), 1))).toEqual(pairs((_, b) => b));
    expect(data(x().lerp(y(), 0))).toEqual(xs);
    // a non-contiguous start
    close(
      data(x().T.lerp(f32Tensor([1, -1], device), 0.5)),
      [0, 1, 2].flatMap((j) => [0, 1].map((i) => lerpRef(xs[i * 3 + j]!, [1, -1][i]!, 0.5))),
    );
  });

  it('copysign: magnitude of this, sign bit of other (signed zeros, ints, numbers)', () => {
    const show = (t: Tensor) => data(t).map((v) => (Object.is(v, -0) ? '-0' : v));
    const a = f32Tensor([1, -2, 0, -0, 3, -4, Infinity, NaN], device);
    const b = f32Tensor([-0, 0, -1, 1, -0, 5, -1, -1], device);
    expect(show(a.copysign(b))).toEqual([-1, 2, '-0', 0, -3, 4, -Infinity, NaN]);
    close(
      data(x().copysign(y())),
      pairs((p, q) => Math.abs(p) * (q < 0 ? -1 : 1)),
    );
    expect(show(a.copysign(-1))).toEqual([-1, -2, '-0', '-0', -3, -4, -Infinity, NaN]);
    const ints = new Tensor([3, -4, 0], { device, dtype: dtypes.int32 });
    expect(ints.copysign(new Tensor([-1, 2, -5], { device, dtype: dtypes.int32 })).dtype).toBe(
      dtypes.float32,
    );
    expect(show(ints.copysign(new Tensor([-1, 2, -5], { device, dtype: dtypes.int32 })))).toEqual([
      -3,
      4,
      '-0',
    ]);
  });

  it('logaddexp: no overflow, equal infinities, NaN', () => {
    const ref = (a: number, b: number) => {
      if (a === b) return a + Math.LN2;
      const m = Math.max(a, b);
      return m + Math.log1p(Math.exp(-Math.abs(a - b)));
    };
    close(data(x().logaddexp(y())), pairs(ref));
    const a = [1000, -1000, 80, -Infinity, Infinity, -Infinity, NaN, 3, 1e30];
    const b = [1000, -1000.5, 90, -Infinity, Infinity, 2, 1, NaN, -1e30];
    close(
      data(f32Tensor(a, device).logaddexp(f32Tensor(b, device))),
      a.map((v, i) => ref(v, b[i]!)),
      1e-6,
    );
    close(
      data(x().logaddexp(0)),
      xs.map((v) => ref(v, 0)),
    );
    const d = [1e-300, 700, -745];
    close(
      data(f64Tensor(d, device).logaddexp(f64Tensor([2e-300, 700, -745], device))),
      [Math.LN2 + 3e-300, 700 + Math.LN2, -745 + Math.LN2],
      1e-15,
    );
  });

  it('isclose and allclose: tolerances, infinities, NaN, ints, broadcasting', () => {
    const a = f32Tensor([1, 1 + 1e-6, 1.001, Infinity, -Infinity, Infinity, NaN, NaN, 0, 1e-9], device);
    const b = f32Tensor([1, 1, 1, Infinity, -Infinity, -Infinity, NaN, 1, 1e-8, 0], device);
    expect(a.isclose(b).dtype).toBe(dtypes.bool);
    expect(a.isclose(b).tolist()).toEqual([true, true, false, true, true, false, false, false, true, true]);
    expect(a.isclose(b, { equalNan: true }).tolist()).toEqual([
      true,
      true,
      false,
      true,
      true,
      false,
      true,
      false,
      true,
      true,
    ]);
    expect(a.isclose(b, { rtol: 1e-2 }).tolist()).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      true,
      true,
    ]);
    expect(a.isclose(b, { rtol: 0, atol: 0 }).tolist()).toEqual([
      true,
      false,
      false,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
    const i = new Tensor([5, 6, 100], { device, dtype: dtypes.int32 });
    expect(
      i.isclose(new Tensor([5, 7, 100], { device, dtype: dtypes.int32 }), { atol: 0.5 }).tolist(),
    ).toEqual([true, false, true]);
    expect(i.isclose(5).tolist()).toEqual([true, false, false]);
    expect(x().isclose(y()).shape).toEqual([2, 3]);
    expect(x().allclose(x().add(1e-7))).toBe(true);
    expect(x().allclose(x().add(1e-3))).toBe(false);
    expect(a.allclose(b, { equalNan: true, rtol: 1e-2, atol: 1e-7 })).toBe(false);
    expect(f32Tensor([1, NaN], device).allclose(f32Tensor([1, NaN], device), { equalNan: true })).toBe(true);
    expect(f32Tensor([], device).allclose(f32Tensor([], device))).toBe(true);
  });
});

describe('errors name the op and what is valid', () => {
  const t = (shape: number[]) => f32Tensor(new Array(numel(shape)).fill(0.5), 'JS', shape);
  it('bad parameters', () => {
    expect(() => t([2]).celu(0)).toThrow(/^celu: alpha must be a finite nonzero number .*got 0$/);
    expect(() => t([2]).hardtanh(2, 1)).toThrow(/^hardtanh: min 2 must not exceed max 1$/);
    expect(() => t([2]).isclose(t([2]), { rtol: -1 })).toThrow(
      /^isclose: rtol and atol must be non-negative numbers, got rtol=-1, atol=1e-8$/,
    );
    // allclose is built on isclose: the error names the op called first
    expect(() => t([2]).allclose(t([2]), { atol: NaN })).toThrow(
      /^allclose: isclose: rtol and atol must be non-negative/,
    );
    expect(() => t([2, 3]).softmin(2)).toThrow(/axis 2 is out of range for shape \(2, 3\)/);
  });
  it('shapes that do not broadcast', () => {
    expect(() => t([2, 3]).lerp(t([4]), 0.5)).toThrow(/^lerp: cannot broadcast shapes \(2, 3\) and \(4\)/);
    expect(() => t([2, 3]).lerp(t([3]), t([2, 2]))).toThrow(
      /^lerp: cannot broadcast shapes \(2, 3\) and \(2, 2\)/,
    );
    expect(() => t([2, 3]).copysign(t([2]))).toThrow(/^copysign: cannot broadcast shapes \(2, 3\) and \(2\)/);
    expect(() => t([2, 3]).logaddexp(t([3, 3]))).toThrow(
      /^logaddexp: cannot broadcast shapes \(2, 3\) and \(3, 3\)/,
    );
    expect(() => t([2, 3]).isclose(t([5]))).toThrow(/^isclose: cannot broadcast shapes \(2, 3\) and \(5\)/);
  });
  it('a non-tensor operand', () => {
    expect(() => t([2]).logaddexp([1, 2] as unknown as number)).toThrow(
      /^logaddexp: an operand must be a Tensor or a number/,
    );
    expect(() => t([2]).copysign('x' as unknown as number)).toThrow(/^copysign: an operand must be a Tensor/);
  });
});

describe('gradients against central differences (float64)', () => {
  const unary = (f: (x: Tensor) => Tensor, domain?: [number, number] | 'positive' | 'unit') => ({
    shapes: [[2, 3]],
    f,
    domain,
  });
  it('activations', () => {
    gradCheckAll({
      hardswish: unary((x) => x.hardswish(), [-4, 4]),
      hardsigmoid: unary((x) => x.hardsigmoid(), [-4, 4]),
      relu6: unary((x) => x.relu6(), [-2, 8]),
      selu: unary((x) => x.selu()),
      mish: unary((x) => x.mish()),
      swish: unary((x) => x.swish()),
      celu: unary((x) => x.celu(0.7)),
      'celu(-2)': unary((x) => x.celu(-2)),
      hardtanh: unary((x) => x.hardtanh(-1, 1.5)),
      quickGelu: unary((x) => x.quickGelu()),
      logsigmoid: unary((x) => x.logsigmoid(), [-30, 30]),
      softsign: unary((x) => x.softsign()),
      softmin: { shapes: [[2, 4]], f: (x) => x.softmin(1) },
      'softmin axis 0': { shapes: [[3, 2]], f: (x) => x.softmin(0) },
    });
  });
  it('math', () => {
    gradCheckAll({
      log10: unary((x) => x.log10(), 'positive'),
      asinh: unary((x) => x.asinh(), [-5, 5]),
      acosh: unary((x) => x.acosh(), [1.1, 4]),
      atanh: unary((x) => x.atanh(), 'unit'),
      'asinh, atanh and logaddexp at 0': unary((x) => x.asinh().add(x.atanh()).add(x.logaddexp(0)), [0, 0]),
      lerp: {
        shapes: [[2, 3], [3], [2, 1]],
        f: (a, b, w) => a!.lerp(b!, w!),
        domain: ['default', 'default', [0, 1]],
      },
      'lerp by a number': unary((x) => x.lerp(2, 0.3)),
      copysign: unary((x) =>
        x.copysign(new Tensor(new Float64Array([-1, 0.5, -0]), { dtype: dtypes.float64, device: 'JS' })),
      ),
      logaddexp: { shapes: [[2, 3], [3]], f: (a, b) => a!.logaddexp(b!) },
      'logaddexp of large values': { shapes: [[4]], f: (a) => a!.mul(500).logaddexp(a!.mul(-300)) },
    });
  });
});
