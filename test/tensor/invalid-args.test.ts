// Property test: every public constructor and op, given a random invalid argument (wrong type, NaN, Infinity,
// negative, fractional, out-of-range axis, mismatched shape, dtype or device), throws an Error naming the op:
// never a TypeError or RangeError from inside the library, a NaN result or a hang.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Tensor } from '../../src/tensor/index.ts';
import { INTERNAL_METHODS } from '../../src/tensor/op-names.ts';

const device = 'JS';
const F = () =>
  new Tensor(
    [
      [1, 2, 3],
      [4, 5, 6],
    ],
    { device, dtype: 'float32' },
  );
const I = () =>
  new Tensor(
    [
      [1, 2, 0],
      [0, 1, 2],
    ],
    { device, dtype: 'int32' },
  );
const B = () =>
  new Tensor(
    [
      [true, false, true],
      [false, true, false],
    ],
    { device },
  );
const V = () => new Tensor([1, 2, 3, 4], { device, dtype: 'float32' });
const IMG = () => Tensor.ones([1, 1, 4, 4], { device });

/** How an argument goes wrong: each kind lists values that are never valid for it. */
const INVALID = {
  /** not a Tensor at all */
  anytensor: () => ['a', {}, [1, 2], null, 5],
  /** a Tensor operand (a scalar is not enough) of any shape */
  tensor: () => ['a', {}, [1, 2], null, 5, Tensor.ones([2, 3], { device: 'NULL' })],
  /** a Tensor operand of the shape (2, 3) */
  shaped: () => [
    'a',
    {},
    [1, 2],
    null,
    5,
    Tensor.ones([4, 5], { device }),
    Tensor.ones([2, 3], { device: 'NULL' }),
  ],
  /** sizes or paddings, where -1 may be valid */
  sizes: () => [[2.5, 2], [Number.NaN], [Number.POSITIVE_INFINITY], 'ab', {}, null],
  /** a Tensor or a JS scalar beside the tensor (2, 3) */
  operand: () => [
    'a',
    {},
    [1, 2],
    null,
    Tensor.ones([4, 5], { device }),
    Tensor.ones([2, 3], { device: 'NULL' }),
  ],
  /** an axis of the tensor */
  axis: () => [5, -7, 0.5, Number.NaN, Number.POSITIVE_INFINITY, '0', {}],
  /** an axis or a list of axes */
  axes: () => [5, -7, 0.5, Number.NaN, [0, 9], '0', {}],
  /** a shape */
  shape: () => [[2.5, 2], [Number.NaN], [-1, 2], [Number.POSITIVE_INFINITY], 'ab', [[2]], {}, null],
  /** a non-negative count */
  count: () => [-1, 2.5, Number.NaN, Number.POSITIVE_INFINITY, '3', {}],
  /** an integer of either sign */
  int: () => [2.5, Number.NaN, Number.POSITIVE_INFINITY, '3', {}],
  /** true or false */
  flag: () => ['yes', 1, {}],
  /** a value an element can hold */
  scalar: () => ['a', {}, null, [1]],
  /** a finite number */
  finite: () => [Number.NaN, Number.POSITIVE_INFINITY, 'a', {}],
  /** a dtype */
  dtype: () => ['float33', 42, {}],
  /** a device */
  device: () => ['TPU', 5],
  /** options: a dtype or device in them that does not exist */
  opts: () => [{ dtype: 'float33' }, { device: 'TPU' }, 5, [1]],
} as const;
type Kind = keyof typeof INVALID | '-';

// Open-ended classes of invalid values the property test draws from besides the lists above: axes past any
// rank used here (valid axes lie in -3..2), fractions, negative counts, and shapes with one bad size.
const fraction = fc.double({ min: -1e6, max: 1e6, noNaN: true }).filter((x) => !Number.isInteger(x));
const badSize = fc.oneof(fraction, fc.integer({ max: -2 }), fc.constantFrom(Number.NaN, Infinity, -Infinity));
const withBad = (bad: fc.Arbitrary<number>) =>
  fc
    .tuple(fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 }), bad, fc.nat())
    .map(([ok, b, at]) => [...ok.slice(0, at % (ok.length + 1)), b, ...ok.slice(at % (ok.length + 1))]);
const axis = fc.oneof(fc.integer({ min: 3 }), fc.integer({ max: -4 }), fraction);
const DRAWN: Partial<Record<Kind, fc.Arbitrary<unknown>>> = {
  axis,
  axes: fc.oneof(axis, fc.array(axis, { minLength: 1, maxLength: 3 })),
  count: fc.oneof(fc.integer({ max: -1 }), fraction),
  int: fraction,
  shape: withBad(badSize),
  sizes: withBad(fc.oneof(fraction, fc.constantFrom(Number.NaN, Infinity))),
};

/** An op: the tensor it runs on (a static has none), valid arguments, and how each may go wrong. */
type Case = [self: (() => Tensor) | undefined, args: () => unknown[], kinds: Kind[]];

const unary = (self = F): Case => [self, () => [], []];
const binary = (self = F): Case => [self, () => [self()], ['operand']];

const UNARY = [
  'neg float half int bool reciprocal sqrt exp2 log2 exp log sin relu sigmoid abs square contiguous clone',
  'long double short bfloat16 isFloatingPoint elementSize rsqrt cos tan atan asin acos sinh cosh tanh erf',
  'gelu silu sign trunc floor ceil round isnan isinf isfinite logicalNot detach contiguousBackward',
  'relu6 hardsigmoid hardswish selu mish swish quickGelu logsigmoid softsign log10 asinh acosh atanh',
  'dispose realize dataSync data tolist nonzero',
]
  .join(' ')
  .split(' ');
const BINARY = 'add sub mul div maximum minimum lt gt le ge eq ne mod fmod pow copysign logaddexp'.split(' ');

const CASES: Record<string, Case> = {
  ...Object.fromEntries(UNARY.map((op) => [op, unary()])),
  ...Object.fromEntries(BINARY.map((op) => [op, binary()])),
  ...Object.fromEntries(
    'bitwiseAnd bitwiseOr bitwiseXor lshift rshift'.split(' ').map((op) => [op, binary(I)]),
  ),
  bitwiseNot: unary(I),
  item: [() => Tensor.ones([1], { device }), () => [], []],
  requiresGrad_: [F, () => [true], ['flag']],
  where: [B, () => [F(), 0], ['operand', 'operand']],
  cast: [F, () => ['int32'], ['dtype']],
  bitcast: [F, () => ['int32'], ['dtype']],
  typeAs: [F, () => [I()], ['anytensor']],
  to: [F, () => ['JS'], ['device']],
  leakyRelu: [F, () => [0.1], ['finite']],
  elu: [F, () => [1], ['finite']],
  celu: [F, () => [1], ['finite']],
  softplus: [F, () => [1], ['finite']],
  hardtanh: [F, () => [-1, 1], ['finite', 'finite']],
  clamp: [F, () => [0, 1], ['operand', 'operand']],
  clip: [F, () => [0, 1], ['operand', 'operand']],
  nanToNum: [F, () => [{ nan: 0 }], ['-']],
  lerp: [F, () => [F(), 0.5], ['operand', 'operand']],
  isclose: [F, () => [F()], ['operand']],
  allclose: [F, () => [F()], ['operand']],
  assign: [F, () => [F()], ['operand']],
  reshape: [F, () => [[3, 2]], ['sizes']],
  view: [F, () => [[3, 2]], ['sizes']],
  permute: [F, () => [[1, 0]], ['axes']],
  expand: [() => V().reshape([1, 4]), () => [[3, 4]], ['shape']],
  broadcastTo: [() => V().reshape([1, 4]), () => [[3, 4]], ['shape']],
  expandAs: [() => V().reshape([1, 4]), () => [Tensor.ones([3, 4], { device })], ['tensor']],
  pad: [
    F,
    () => [
      [
        [1, 1],
        [0, 0],
      ],
    ],
    ['sizes'],
  ],
  shrink: [
    F,
    () => [
      [
        [0, 1],
        [0, 2],
      ],
    ],
    ['shape'],
  ],
  flip: [F, () => [0], ['axes']],
  transpose: [F, () => [0, 1], ['axis', 'axis']],
  flatten: [F, () => [0, 1], ['axis', 'axis']],
  unsqueeze: [F, () => [0], ['axis']],
  squeeze: [F, () => [0], ['axes']],
  sum: [F, () => [0], ['axes']],
  prod: [F, () => [0], ['axes']],
  max: [F, () => [0], ['axes']],
  min: [F, () => [0], ['axes']],
  mean: [F, () => [0], ['axes']],
  any: [F, () => [0], ['axes']],
  all: [F, () => [0], ['axes']],
  var: [F, () => [0], ['axes']],
  std: [F, () => [0], ['axes']],
  varMean: [F, () => [0], ['axes']],
  stdMean: [F, () => [0], ['axes']],
  argmax: [F, () => [0], ['axis']],
  argmin: [F, () => [0], ['axis']],
  logsumexp: [F, () => [0], ['axes']],
  softmax: [F, () => [0], ['axis']],
  logSoftmax: [F, () => [0], ['axis']],
  softmin: [F, () => [0], ['axis']],
  cumsum: [F, () => [0], ['axis']],
  cumprod: [F, () => [0], ['axis']],
  cummax: [F, () => [0], ['axis']],
  cummin: [F, () => [0], ['axis']],
  logcumsumexp: [F, () => [0], ['axis']],
  unbind: [F, () => [0], ['axis']],
  matmul: [F, () => [F().T], ['tensor']],
  dot: [F, () => [F().T], ['tensor']],
  linear: [F, () => [F().T], ['tensor']],
  repeat: [F, () => [[1, 2]], ['shape']],
  split: [F, () => [1, 0], ['count', 'axis']],
  chunk: [F, () => [2, 0], ['count', 'axis']],
  triu: [F, () => [0], ['int']],
  tril: [F, () => [0], ['int']],
  gather: [F, () => [1, I()], ['axis', 'tensor']],
  indexSelect: [F, () => [1, new Tensor([0, 2], { device })], ['axis', 'tensor']],
  get: [F, () => [0], ['axis']],
  set: [F, () => [0, 1], ['axis', 'operand']],
  size: [F, () => [0], ['axis']],
  roll: [F, () => [1, 0], ['int', 'axis']],
  unfold: [F, () => [1, 2, 1], ['axis', 'count', 'count']],
  unflatten: [F, () => [1, [3, 1]], ['axis', 'shape']],
  repeatInterleave: [F, () => [2, 0], ['count', 'axis']],
  diag: [V, () => [0], ['int']],
  diagonal: [F, () => [{ offset: 0 }], ['-']],
  oneHot: [() => new Tensor([0, 2], { device }), () => [3], ['count']],
  layernorm: [F, () => [-1, 1e-5], ['axes', 'finite']],
  normalize: [F, () => [{}], ['-']],
  dropout: [F, () => [0.5], ['finite']],
  multinomial: [V, () => [2, true], ['count', '-']],
  maskedFill: [F, () => [B(), 0], ['tensor', 'operand']],
  maskedSelect: [F, () => [B()], ['tensor']],
  scatter: [F, () => [1, I(), F()], ['axis', 'tensor', '-']],
  scatterReduce: [F, () => [1, I(), F(), 'sum'], ['axis', 'tensor', '-', 'dtype']],
  sort: [F, () => [0], ['axis']],
  argsort: [F, () => [0], ['axis']],
  topk: [F, () => [1, 0], ['count', 'axis']],
  crossEntropy: [F, () => [new Tensor([0, 2], { device })], ['tensor']],
  nllLoss: [F, () => [new Tensor([0, 2], { device })], ['tensor']],
  sparseCategoricalCrossentropy: [F, () => [new Tensor([0, 2], { device })], ['tensor']],
  binaryCrossentropy: [() => F().sigmoid(), () => [F().sigmoid()], ['tensor']],
  binaryCrossentropyLogits: [F, () => [F().sigmoid()], ['tensor']],
  batchnorm: [
    F,
    () => [undefined, undefined, V().get([0, 3]), V().get([0, 3])],
    // invstd may be a number
    ['-', '-', 'tensor', '-'],
  ],
  scaledDotProductAttention: [F, () => [F(), F()], ['tensor', 'tensor']],
  conv2d: [IMG, () => [Tensor.ones([1, 1, 3, 3], { device })], ['tensor']],
  interpolate: [IMG, () => [[2, 2]], ['shape']],
  maxPool1d: [() => Tensor.ones([1, 1, 4], { device }), () => [2], ['count']],
  maxPool2d: [IMG, () => [2], ['count']],
  maxPool3d: [() => Tensor.ones([1, 1, 4, 4, 4], { device }), () => [2], ['count']],
  avgPool1d: [() => Tensor.ones([1, 1, 4], { device }), () => [2], ['count']],
  avgPool2d: [IMG, () => [2], ['count']],
  avgPool3d: [() => Tensor.ones([1, 1, 4, 4, 4], { device }), () => [2], ['count']],
  maxUnpool1d: [
    () => Tensor.ones([1, 1, 2], { device }),
    () => [Tensor.ones([1, 1, 2], { device, dtype: 'int32' }), 2],
    ['tensor', 'count'],
  ],
  maxUnpool2d: [
    () => Tensor.ones([1, 1, 2, 2], { device }),
    () => [Tensor.ones([1, 1, 2, 2], { device, dtype: 'int32' }), 2],
    ['tensor', 'count'],
  ],
  maxUnpool3d: [
    () => Tensor.ones([1, 1, 2, 2, 2], { device }),
    () => [Tensor.ones([1, 1, 2, 2, 2], { device, dtype: 'int32' }), 2],
    ['tensor', 'count'],
  ],
  backward: [() => F().requiresGrad_().sum(), () => [Tensor.ones([], { device })], ['tensor']],
  // statics
  'Tensor.full': [undefined, () => [[2, 3], 1, {}], ['shape', 'scalar', 'opts']],
  'Tensor.zeros': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.ones': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.empty': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.arange': [undefined, () => [0, 5, 1, {}], ['finite', 'finite', 'finite', 'opts']],
  'Tensor.linspace': [undefined, () => [0, 1, 5, {}], ['finite', 'finite', 'count', 'opts']],
  'Tensor.eye': [undefined, () => [2, 3, {}], ['count', 'count', 'opts']],
  'Tensor.zerosLike': [undefined, () => [F(), {}], ['anytensor', 'opts']],
  'Tensor.onesLike': [undefined, () => [F(), {}], ['anytensor', 'opts']],
  'Tensor.fullLike': [undefined, () => [F(), 1, {}], ['anytensor', 'scalar', 'opts']],
  'Tensor.emptyLike': [undefined, () => [F(), {}], ['anytensor', 'opts']],
  'Tensor.randLike': [undefined, () => [F(), {}], ['anytensor', 'opts']],
  'Tensor.randnLike': [undefined, () => [F(), {}], ['anytensor', 'opts']],
  'Tensor.cat': [undefined, () => [[F(), F()], 0], ['-', 'axis']],
  'Tensor.stack': [undefined, () => [[F(), F()], 0], ['-', 'axis']],
  'Tensor.where': [undefined, () => [B(), F(), 0], ['tensor', 'operand', 'operand']],
  'Tensor.rand': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.randn': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.randint': [undefined, () => [[2, 3], 0, 5, {}], ['shape', 'finite', 'finite', 'opts']],
  'Tensor.uniform': [undefined, () => [[2, 3], 0, 1, {}], ['shape', 'finite', 'finite', 'opts']],
  'Tensor.normal': [undefined, () => [[2, 3], 0, 1, {}], ['shape', 'finite', 'finite', 'opts']],
  'Tensor.kaimingUniform': [undefined, () => [[2, 3], 0.01, {}], ['shape', 'finite', 'opts']],
  'Tensor.kaimingNormal': [undefined, () => [[2, 3], 0.01, {}], ['shape', 'finite', 'opts']],
  'Tensor.glorotUniform': [undefined, () => [[2, 3], {}], ['shape', 'opts']],
  'Tensor.randperm': [undefined, () => [4, {}], ['count', 'opts']],
  'Tensor.manualSeed': [undefined, () => [1], ['finite']],
  'Tensor.deferredInit': [undefined, () => [F()], ['anytensor']],
  'Tensor.realizeDeferred': [undefined, () => [], []],
  'Tensor.gradient': [
    undefined,
    () => {
      const w = F().requiresGrad_();
      return [w.sum(), [w]];
    },
    ['tensor', '-'],
  ],
  'Tensor.meshgrid': [undefined, () => [V(), V()], ['tensor', '-']],
  'Tensor.einsum': [undefined, () => ['ij,jk->ik', F(), F().T], ['-', 'tensor', 'tensor']],
};

/** Public names the table leaves out on purpose: they take no argument that can be wrong here. */
const NOT_APPLICABLE = new Set([
  'constructor',
  'toString',
  'Tensor.fromUOp',
  'Tensor.fromFile',
  'Tensor.scope',
  'Tensor.noGrad',
]);

describe('invalid arguments', () => {
  it('the table covers every public method and static of Tensor', () => {
    const methods = Object.getOwnPropertyNames(Tensor.prototype).filter(
      (k) => typeof Object.getOwnPropertyDescriptor(Tensor.prototype, k)!.value === 'function',
    );
    const statics = Object.getOwnPropertyNames(Tensor)
      .filter((k) => typeof (Tensor as unknown as Record<string, unknown>)[k] === 'function')
      .map((k) => `Tensor.${k}`);
    const missing = [...methods, ...statics].filter(
      (k) => !(k in CASES) && !NOT_APPLICABLE.has(k) && !INTERNAL_METHODS.has(k),
    );
    expect(missing).toEqual([]);
  });

  const withArgs = Object.entries(CASES).filter(([, [, , kinds]]) => kinds.some((k) => k !== '-'));
  it('each op with arguments gets valid ones', () => {
    for (const [name, [self, args]] of withArgs) {
      const call = () => invoke(name, self, args());
      expect(call, name).not.toThrow();
    }
  });

  /** What calling the op with `bad` at position `at` did, when it is not an Error naming the op. */
  function failure(name: string, self: Case[0], args: Case[1], at: number, bad: unknown): string | undefined {
    const given = args();
    given[at] = bad;
    let thrown: unknown;
    try {
      const out = invoke(name, self, given);
      // accepted: show what came out (a NaN made from nothing, say)
      return `accepted, giving ${out instanceof Tensor && out.device === device ? JSON.stringify(out.tolist()) : String(out)}`;
    } catch (e) {
      thrown = e;
    }
    const e = thrown as Error;
    if (e.constructor === Error && e.message.startsWith(`${name}:`)) return undefined;
    return `${e.constructor.name}: ${e.message}`;
  }

  it('every listed invalid argument, in turn, throws an Error naming the op', () => {
    const failures: string[] = [];
    for (const [name, [self, args, kinds]] of withArgs)
      kinds.forEach((kind, at) => {
        if (kind === '-') return;
        for (const bad of INVALID[kind]()) {
          const f = failure(name, self, args, at, bad);
          if (f !== undefined) failures.push(`${name} with argument ${at} = ${String(bad)}: ${f}`);
        }
      });
    expect(failures).toEqual([]);
  });

  it('a random invalid argument throws an Error naming the op (fast-check)', () => {
    const cases = fc.oneof(
      ...withArgs.flatMap(([name, [self, args, kinds]]) =>
        kinds.flatMap((kind, at) =>
          kind === '-'
            ? []
            : [
                fc
                  .oneof(
                    fc.constantFrom(...INVALID[kind]()),
                    DRAWN[kind] ?? fc.constantFrom(...INVALID[kind]()),
                  )
                  .map((bad) => ({ name, self, args, at, bad })),
              ],
        ),
      ),
    );
    fc.assert(
      fc.property(cases, ({ name, self, args, at, bad }) => {
        expect(
          failure(name, self, args, at, bad),
          `${name} with argument ${at} = ${String(bad)}`,
        ).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });
});

function invoke(name: string, self: (() => Tensor) | undefined, args: unknown[]): unknown {
  if (self === undefined) {
    const f = (Tensor as unknown as Record<string, (...a: unknown[]) => unknown>)[
      name.slice('Tensor.'.length)
    ]!;
    return f(...args);
  }
  const t = self() as unknown as Record<string, (...a: unknown[]) => unknown>;
  return t[name]!(...args);
}
