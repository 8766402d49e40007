// Autograd: every differentiable op's gradient against central differences in float64, and backward()'s contract.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { type Case, gradCheck as check, gradCheckAll as checkAll, type Domain } from './gradcheck.ts';
import { data } from './reference.ts';

const F64 = { dtype: dtypes.float64, device: 'JS' };
const unary = (f: (x: Tensor) => Tensor, domain?: Domain): Case => ({ shapes: [[2, 3]], f, domain });
const binary = (f: (x: Tensor, y: Tensor) => Tensor, domain?: Domain): Case => ({
  shapes: [[2, 3], [3]],
  f,
  domain,
});

describe('gradients against central differences (float64, JS)', () => {
  it('elementwise unary ops and activations', () => {
    checkAll({
      neg: unary((x) => x.neg()),
      reciprocal: unary((x) => x.reciprocal()),
      sqrt: unary((x) => x.sqrt(), 'positive'),
      rsqrt: unary((x) => x.rsqrt(), 'positive'),
      exp: unary((x) => x.exp()),
      exp2: unary((x) => x.exp2()),
      log: unary((x) => x.log(), 'positive'),
      log2: unary((x) => x.log2(), 'positive'),
      sin: unary((x) => x.sin()),
      cos: unary((x) => x.cos()),
      tan: unary((x) => x.tan(), [-1.2, 1.2]),
      asin: unary((x) => x.asin(), 'unit'),
      acos: unary((x) => x.acos(), 'unit'),
      atan: unary((x) => x.atan()),
      sinh: unary((x) => x.sinh()),
      cosh: unary((x) => x.cosh()),
      tanh: unary((x) => x.tanh()),
      erf: unary((x) => x.erf()),
      sigmoid: unary((x) => x.sigmoid()),
      relu: unary((x) => x.relu()),
      leakyRelu: unary((x) => x.leakyRelu(0.1)),
      elu: unary((x) => x.elu()),
      gelu: unary((x) => x.gelu()),
      silu: unary((x) => x.silu()),
      softplus: unary((x) => x.softplus(2)),
      abs: unary((x) => x.abs()),
      square: unary((x) => x.square()),
      clamp: unary((x) => x.clamp(-1, 1)),
      'sign, floor, ceil, round, trunc (zero)': unary((x) =>
        x.sign().add(x.floor()).add(x.ceil()).add(x.round()).add(x.trunc().mul(x)),
      ),
    });
  });

  it('elementwise binary ops with broadcasting, pow and where', () => {
    checkAll({
      add: binary((x, y) => x.add(y)),
      sub: binary((x, y) => x.sub(y)),
      mul: binary((x, y) => x.mul(y)),
      div: binary((x, y) => x.div(y)),
      pow: binary((x, y) => x.pow(y), 'positive'),
      'pow by constants': unary((x) => x.pow(3).add(x.pow(-2)).add(x.abs().pow(0.5))),
      maximum: binary((x, y) => x.maximum(y)),
      minimum: binary((x, y) => x.minimum(y)),
      'maximum with a scalar': unary((x) => x.maximum(0.5).add(x.minimum(-0.5))),
      where: binary((x, y) => x.gt(y).where(x.mul(y), y.exp())),
      mod: binary((x, y) => x.mod(y)),
      fmod: binary((x, y) => x.fmod(y)),
      'scalar operands': unary((x) =>
        x
          .mul(3)
          .sub(1)
          .div(2)
          .add(x.div(x.add(3))),
      ),
    });
  });

  it('movement ops', () => {
    const x = [2, 3, 4];
    checkAll({
      'reshape, permute, transpose, flatten': {
        shapes: [x],
        f: (t) =>
          t.permute([1, 2, 0]).reshape([6, 4]).permute([1, 0]).reshape([4, 2, 3]).transpose(0, 2).flatten(1),
      },
      expand: { shapes: [[2, 1, 3]], f: (t) => t.expand([2, 4, 3]) },
      'squeeze, unsqueeze, repeat': {
        shapes: [[1, 3, 1]],
        f: (t) => t.squeeze().unsqueeze(0).repeat([2, 2]),
      },
      pad: {
        shapes: [x],
        f: (t) =>
          t.pad([
            [1, 0],
            [0, 2],
            [1, 1],
          ]),
      },
      'pad with a value': {
        shapes: [[2, 3]],
        f: (t) =>
          t.pad(
            [
              [1, 2],
              [0, 1],
            ],
            -3,
          ),
      },
      shrink: {
        shapes: [x],
        f: (t) =>
          t.shrink([
            [1, 2],
            [0, 2],
            [1, 4],
          ]),
      },
      flip: { shapes: [x], f: (t) => t.flip([0, 2]) },
      'contiguous, clone': { shapes: [[2, 3]], f: (t) => t.exp().contiguous().mul(t).clone() },
      cat: {
        shapes: [
          [2, 1],
          [2, 3],
          [2, 2],
        ],
        f: (a, b, c) => Tensor.cat([a!, b!, c!], 1),
      },
      stack: { shapes: [[3], [3]], f: (a, b) => Tensor.stack([a!, b!, a!.mul(b!)], 1) },
      'split, chunk': {
        shapes: [[5, 2]],
        f: (t) => {
          const [a, b] = t.split([2, 3]);
          const [c] = t.chunk(2, 0);
          return a!.sum(0).add(b!.square().sum(0)).add(c!.exp().sum(0));
        },
      },
      'get with integers, steps, a negative step and new axes': {
        shapes: [x],
        f: (t) => t.get(1, [null, null, -1], [0, 4, 2]).add(t.get(null, '...', -1).sum(1).transpose()),
      },
      'get with index tensors': {
        shapes: [[3, 4]],
        f: (t) => t.get(new Tensor([2, 0, 2], { device: 'JS' }), [1, 3]),
      },
      gather: {
        shapes: [[3, 4]],
        f: (t) =>
          t.gather(
            1,
            new Tensor(
              [
                [3, 0],
                [1, 1],
                [2, 0],
              ],
              { device: 'JS' },
            ),
          ),
      },
      'triu, tril': { shapes: [[3, 3]], f: (t) => t.triu(1).add(t.tril(-1).square()) },
    });
  });

  it('reductions and scans', () => {
    const x = [3, 4];
    checkAll({
      sum: { shapes: [x], f: (t) => t.sum(1).add(t.sum().mul(t.sum(0, true).sum())) },
      mean: { shapes: [x], f: (t) => t.mean(0) },
      max: { shapes: [x], f: (t) => t.max(1).add(t.max()) },
      min: { shapes: [x], f: (t) => t.min(0, true) },
      prod: { shapes: [x], f: (t) => t.prod(1) },
      'var, std': { shapes: [x], f: (t) => t.var(1).add(t.std(0, false, 0).sum()) },
      logsumexp: { shapes: [x], f: (t) => t.logsumexp(1) },
      softmax: { shapes: [x], f: (t) => t.softmax(1) },
      logSoftmax: { shapes: [x], f: (t) => t.logSoftmax(0) },
      cumsum: { shapes: [x], f: (t) => t.cumsum(1).add(t.cumsum(0).square()) },
    });
  });

  it('matmul, einsum and convolution', () => {
    checkAll({
      matmul: {
        shapes: [
          [2, 3],
          [3, 4],
        ],
        f: (a, b) => a!.matmul(b!),
      },
      'batched and vector matmul': {
        shapes: [[2, 2, 3], [3, 2], [3]],
        f: (a, b, v) => a!.matmul(b!).sum(2).add(a!.dot(v!)),
      },
      einsum: {
        shapes: [
          [3, 3],
          [3, 2],
        ],
        f: (a, b) => Tensor.einsum('ii,ij->j', a!, b!),
      },
      conv2d: {
        shapes: [[1, 2, 5, 5], [3, 2, 3, 3], [3]],
        f: (x, w, b) => x!.conv2d(w!, b!, { padding: 1, stride: 2 }),
      },
      'conv2d with groups and dilation': {
        shapes: [
          [1, 4, 5, 4],
          [2, 2, 2, 2],
        ],
        f: (x, w) => x!.conv2d(w!, undefined, { groups: 2, dilation: [2, 1] }),
      },
    });
  });

  it('pools, norms, losses and attention', () => {
    const labels = new Tensor([2, 0, 1], { device: 'JS' });
    checkAll({
      maxPool2d: { shapes: [[1, 2, 4, 4]], f: (x) => x.maxPool2d(2) },
      'maxPool2d with stride and padding': {
        shapes: [[1, 1, 5, 5]],
        f: (x) => x.maxPool2d(3, { stride: 2, padding: 1 }),
      },
      avgPool2d: { shapes: [[1, 2, 4, 5]], f: (x) => x.avgPool2d([2, 3], { stride: 1 }) },
      layernorm: { shapes: [[3, 4]], f: (x) => x.layernorm() },
      sparseCategoricalCrossentropy: {
        shapes: [[3, 4]],
        f: (x) =>
          x
            .sparseCategoricalCrossentropy(labels)
            .add(x.sparseCategoricalCrossentropy(labels, { labelSmoothing: 0.1 }))
            .add(x.sparseCategoricalCrossentropy(labels, { ignoreIndex: 0, reduction: 'sum' })),
      },
      scaledDotProductAttention: {
        shapes: [
          [2, 3, 4],
          [2, 3, 4],
          [2, 3, 2],
        ],
        f: (q, k, v) => q!.scaledDotProductAttention(k!, v!, { isCausal: true }),
      },
      'scaledDotProductAttention with bool and float masks': {
        shapes: [
          [3, 2],
          [4, 2],
          [4, 3],
          [3, 4],
        ],
        f: (q, k, v, m) =>
          q!
            .scaledDotProductAttention(k!, v!, { attnMask: m!.gt(-1) })
            .add(q!.scaledDotProductAttention(k!, v!, { attnMask: m! })),
      },
    });
  });

  it('on the CPU device too', () => {
    check('conv2d + relu on CPU', {
      shapes: [
        [1, 2, 4, 4],
        [2, 2, 3, 3],
      ],
      f: (x, w) => x!.conv2d(w!, undefined, { padding: 1 }).relu().maxPool2d(2),
      device: 'CPU',
    });
    check('softmax + matmul on CPU', {
      shapes: [
        [2, 3],
        [3, 3],
      ],
      f: (a, b) => a!.softmax().matmul(b!).logsumexp(1),
      device: 'CPU',
    });
  });
});

describe('derivative rules at special points', () => {
  const T = (xs: number[], requiresGrad = true) => new Tensor(new Float64Array(xs), { ...F64, requiresGrad });
  const grad = (loss: Tensor, x: Tensor) => data(Tensor.gradient(loss, [x])[0]!);

  it('max shares the gradient among ties; relu and abs at 0', () => {
    const x = T([1, 3, 3, -1]);
    expect(grad(x.max(), x)).toEqual([0, 0.5, 0.5, 0]);
    expect(grad(x.maximum(3).sum(), x)).toEqual([0, 0.5, 0.5, 0]);
    const z = T([0, 0]);
    expect(grad(z.relu().sum(), z)).toEqual([0.5, 0.5]);
    expect(grad(z.abs().sum(), z)).toEqual([0, 0]);
  });

  it('prod is exact with zeros', () => {
    const x = T([2, 0, 3, 0, 0, 1, 4, 5, 6]);
    expect(grad(x.reshape([3, 3]).prod(1).sum(), x)).toEqual([0, 6, 0, 0, 0, 0, 30, 24, 20]);
  });

  it('cast sends the gradient back in the source dtype; integer casts stop it', () => {
    const x = T([1.5, -2]);
    const g = Tensor.gradient(x.cast(dtypes.float32).mul(3).sum(), [x])[0]!;
    expect(g.dtype).toBe(dtypes.float64);
    expect(data(g)).toEqual([3, 3]);
    expect(() => Tensor.gradient(x.cast(dtypes.int32).cast(dtypes.float64).sum(), [x])).toThrow(
      /does not depend on target 0 \(2\)/,
    );
  });

  it('a tensor used twice sums its gradients; a long chain needs no recursion', () => {
    const x = T([2, -3]);
    expect(grad(x.mul(x).add(x).sum(), x)).toEqual([5, -5]);
    let y = x;
    for (let i = 0; i < 20_000; i++) y = y.add(1);
    const g = Tensor.gradient(y.sum(), [x])[0]!;
    expect(g.shape).toEqual([2]);
  });

  it('contiguousBackward leaves values alone and makes the backward gradient contiguous', () => {
    const x = T([1, 2, 3]);
    const y = x.contiguousBackward().mul(2);
    const g = Tensor.gradient(y.sum(), [x])[0]!;
    expect(data(y)).toEqual([2, 4, 6]);
    expect(g.uop.toposort().some((u) => u.op === Ops.CONTIGUOUS)).toBe(true);
    expect(data(g)).toEqual([2, 2, 2]);
  });
});

describe('backward and Tensor.gradient', () => {
  const T = (xs: number[], requiresGrad = true) => new Tensor(new Float64Array(xs), { ...F64, requiresGrad });

  it('backward fills .grad of the requiresGrad tensors the loss uses, and accumulates', () => {
    const x = T([1, 2, 3]);
    const w = T([4, 5, 6]);
    const c = T([1, 1, 1], false);
    const unused = T([7]);
    x.mul(w).add(c).sum().backward();
    expect(data(x.grad!)).toEqual([4, 5, 6]);
    expect(data(w.grad!)).toEqual([1, 2, 3]);
    expect(c.grad).toBeUndefined();
    expect(unused.grad).toBeUndefined();
    x.square().sum().backward();
    expect(data(x.grad!)).toEqual([6, 9, 12]);
    expect(data(w.grad!)).toEqual([1, 2, 3]);
  });

  it('backward takes an explicit gradient for a non-scalar loss; gradients of intermediates', () => {
    const x = T([1, 2]);
    const y = x.mul(3);
    const loss = y.backward(T([1, -1], false));
    expect(loss).toBe(y);
    expect(data(x.grad!)).toEqual([3, -3]);
    const [gy] = Tensor.gradient(y.square().sum(), [y]);
    expect(data(gy!)).toEqual([6, 12]);
  });

  it('Tensor.gradient has no side effects', () => {
    const x = T([1, 2, 3]);
    const loss = x.exp().sum();
    const a = data(Tensor.gradient(loss, [x])[0]!);
    const b = data(Tensor.gradient(loss, [x])[0]!);
    expect(a).toEqual(b);
    expect(x.grad).toBeUndefined();
    expect(data(loss)).toHaveLength(1);
  });

  it('creation functions mark their result, not the tensors it is built from', () => {
    const o = { device: 'JS', requiresGrad: true };
    const made: Record<string, Tensor> = {
      zeros: Tensor.zeros([2], o),
      full: Tensor.full([2], 1.5, o),
      arange: Tensor.arange(0, 1, 0.5, o),
      linspace: Tensor.linspace(0, 1, 3, o),
      eye: Tensor.eye(2, undefined, o),
      onesLike: Tensor.onesLike(Tensor.ones([3]), o),
      rand: Tensor.rand([2], o),
      randn: Tensor.randn([2], o),
      uniform: Tensor.uniform([2], -1, 1, o),
      normal: Tensor.normal([2], 0, 1, o),
      kaimingUniform: Tensor.kaimingUniform([2, 2], undefined, o),
      glorotUniform: Tensor.glorotUniform([2, 2], o),
    };
    for (const [name, t] of Object.entries(made)) {
      expect(t.requiresGrad, name).toBe(true);
      t.square().sum().backward();
      expect(data(t.grad!), name).toEqual(data(t).map((v) => 2 * v));
    }
  });

  it('a constant parameter gets a buffer of its own, apart from equal constants in the loss', () => {
    const w = Tensor.ones([3], { device: 'JS', requiresGrad: true });
    expect(w.uop.op).toBe(Ops.BUFFER);
    const x = new Tensor([1.5, 2, 3], { device: 'JS', requiresGrad: true });
    x.add(1).mul(w).sum().backward();
    expect(data(w.grad!)).toEqual([2.5, 3, 4]);
    expect(data(x.grad!)).toEqual([1, 1, 1]);
  });

  it('tensors with one identical lazy graph cannot be told apart until realized', () => {
    const x = T([1, 2, 3], false);
    const [a, b] = [x.mul(2), x.mul(2)];
    a.requiresGrad = true;
    b.requiresGrad = true;
    expect(() => a.add(b.mul(2)).sum().backward()).toThrow(
      /2 tensors with requiresGrad have one identical lazy graph/,
    );
    a.realize();
    b.realize();
    a.add(b.mul(2)).sum().backward();
    expect(data(a.grad!)).toEqual([1, 1, 1]);
    expect(data(b.grad!)).toEqual([2, 2, 2]);
  });

  it('detach stops gradients', () => {
    const x = T([1, 2, 3]);
    x.mul(x.detach()).sum().backward();
    expect(data(x.grad!)).toEqual([1, 2, 3]);
    expect(() => x.detach().sum().backward()).toThrow(/depends on no tensor with requiresGrad/);
    expect(data(x.detach())).toEqual([1, 2, 3]);
  });

  it('errors: a non-scalar loss without a gradient, no path to a requiresGrad tensor or target, bad gradients', () => {
    const x = T([1, 2, 3, 4, 5, 6]).reshape([2, 3]);
    expect(() => x.mul(2).backward()).toThrow(/loss has shape \(2, 3\).*reduce it.*shape \(2, 3\)/);
    expect(() => Tensor.gradient(x.mul(2), [x])).toThrow(/loss has shape \(2, 3\)/);
    expect(() => T([1, 2], false).sum().backward()).toThrow(
      /loss \(\) depends on no tensor with requiresGrad: true/,
    );
    const other = T([1]);
    expect(() => Tensor.gradient(x.sum(), [x, other])).toThrow(/does not depend on target 1 \(1\)/);
    expect(() => x.sum().backward(T([1, 2], false))).toThrow(
      /gradient has shape \(2\) but the loss has shape \(\)/,
    );
    expect(() => x.gt(0).sum().backward()).toThrow(/dtype int32; gradients need a float loss/);
  });
});
