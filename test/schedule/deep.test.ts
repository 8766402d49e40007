// Long lazy chains: 100,000 chained ops realize on JS and CPU, gradients flow through them, wide graphs of
// 100,000 leaves sum with their gradient, the printers take them; the bound-kernels pass cuts long expressions
// into kernels of bounded size without changing any value, and leaves ordinary kernels alone.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { programStats } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { Linear } from '../../src/nn/layers.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { ALU } from '../../src/uop/ops.ts';
import { fromCode, printGraph, toCode } from '../../src/uop/print.ts';
import { useDefaultDevice } from '../default-device.ts';

const N = 100_000;
const TIMEOUT = 120_000;
/** 100,000 leaves and their gradient: some 50 s of CPU time on JS, several times that on a shared machine. */
const WIDE_TIMEOUT = 600_000;

/** x + 1, n times, over a realized [4] of zeros. */
function chain(n: number): Tensor {
  let x = Tensor.zeros([4]).contiguous().realize();
  for (let i = 0; i < n; i++) x = x.add(1);
  return x;
}

/** The n distinct leaves x * i summed pairwise: a graph 2n nodes wide and log2(n) deep. */
function tree(x: Tensor, n: number): Tensor {
  let level = Array.from({ length: n }, (_, i) => x.mul(i));
  while (level.length > 1) {
    const next: Tensor[] = [];
    for (let i = 0; i < level.length; i += 2)
      next.push(level[i + 1] ? level[i]!.add(level[i + 1]!) : level[i]!);
    level = next;
  }
  return level[0]!;
}
/** The sum of i for i < n. */
const treeSum = (n: number) => (n * (n - 1)) / 2;

/** The most elementwise ops, and the longest chain of them, in one kernel of t's schedule. */
function kernelSizes(t: Tensor): { kernels: number; ops: number; depth: number } {
  const { kernels } = scheduleOf([t]);
  let ops = 0;
  let depth = 0;
  for (const k of kernels) {
    const chainOf = new Map<unknown, number>();
    let count = 0;
    for (const u of k.ast.toposort()) {
      const alu = ALU.has(u.op) && u.dtype.name !== 'index' && u.dtype.name !== 'bool';
      if (alu) count++;
      chainOf.set(u, Math.max(0, ...u.src.map((s) => chainOf.get(s)!)) + (alu ? 1 : 0));
      depth = Math.max(depth, chainOf.get(u)!);
    }
    ops = Math.max(ops, count);
  }
  return { kernels: kernels.length, ops, depth };
}

describe.each(['JS', 'CPU'])('%s: 100,000 chained ops', (device) => {
  useDefaultDevice(device);

  it(
    'realize in kernels of at most KERNEL_DEPTH (2000) chained adds',
    () => {
      const x = chain(N);
      expect(scheduleOf([x]).kernels.length).toBe(N / 2000);
      expect(x.tolist()).toEqual([N, N, N, N]);
    },
    TIMEOUT,
  );

  it(
    'backward() through 100,000 multiplies',
    () => {
      const w = Tensor.full([4], 0.5, { requiresGrad: true });
      let x = w;
      for (let i = 0; i < N; i++) x = x.mul(1);
      x.mul(3).sum().backward();
      expect(w.grad!.tolist()).toEqual([3, 3, 3, 3]);
    },
    TIMEOUT,
  );
});

describe.each([
  ['JS', N],
  ['CPU', 20_000], // (100,000 run as on JS, with gcc's time for some ten 8000-op programs on top)
])('%s: distinct leaves summed pairwise', (device, n) => {
  useDefaultDevice(device);

  it(
    `${n} of them give the exact sum and its gradient, kernels alike but for their constants sharing programs`,
    () => {
      const x = Tensor.ones([4], { dtype: dtypes.float64, requiresGrad: true });
      const y = tree(x, n);
      const kernels = scheduleOf([y]).kernels.length;
      const built = programStats().built;
      expect(y.tolist()).toEqual(Array(4).fill(treeSum(n)));
      // the 2048-leaf subtrees differ only in the numbers they scale by: one program for all of them
      expect(programStats().built - built).toBeLessThan(kernels);
      y.sum().backward();
      expect(x.grad!.tolist()).toEqual(Array(4).fill(treeSum(n)));
    },
    WIDE_TIMEOUT,
  );
});

describe('JS: wide and mixed deep graphs', () => {
  useDefaultDevice('JS');

  it(
    'a chain that sums itself at every step computes each step once (2,000 steps)',
    () => {
      // x + sum(x) * 0: every step reads the whole past through a reduce
      let x = Tensor.ones([4]).contiguous().realize();
      for (let i = 0; i < 2000; i++) x = x.add(x.sum().mul(0));
      expect(kernelSizes(x).ops).toBeLessThanOrEqual(2 * 256 + 2);
      expect(x.tolist()).toEqual([1, 1, 1, 1]);
    },
    TIMEOUT,
  );

  it(
    'a chain of 10,000 views (flips and permutes) lowers in one kernel',
    () => {
      // (fold views makes this two ops; 100,000 views: test/schedule/fold-views.test.ts)
      let x = Tensor.arange(6).reshape([2, 3]).contiguous().realize();
      for (let i = 0; i < 10_000; i++) x = i % 2 ? x.permute([1, 0]) : x.flip(0);
      const y = x.add(0);
      expect(scheduleOf([y]).kernels.length).toBe(1);
      expect(y.tolist()).toEqual([
        [0, 1, 2],
        [3, 4, 5],
      ]);
    },
    TIMEOUT,
  );

  it(
    'backward() through 10,000 mixed ops (mul, add, relu)',
    () => {
      const w = Tensor.full([4], 0.5, { requiresGrad: true });
      let x = w;
      for (let i = 0; i < 10_000; i++) x = i % 3 === 0 ? x.mul(1) : i % 3 === 1 ? x.add(0.25) : x.relu();
      x.sum().backward();
      expect(w.grad!.tolist()).toEqual([1, 1, 1, 1]);
    },
    TIMEOUT,
  );
});

describe.each(['JS', 'CPU'])('%s: cat of many pieces', (device) => {
  useDefaultDevice(device);

  it(
    'joins in groups (linear work), keeping values, bools and the gradient',
    () => {
      // 32 pieces join per group: 2 levels of groups at 1,000 (CPU: 1 at 100)
      const n = device === 'JS' ? 1000 : 100;
      const w = Tensor.ones([2], { requiresGrad: true });
      const y = Tensor.cat(Array.from({ length: n }, (_, i) => w.mul(i)));
      const got = y.tolist() as number[];
      expect(got).toEqual(Array.from({ length: 2 * n }, (_, i) => i >> 1));
      y.sum().backward();
      expect(w.grad!.tolist()).toEqual(Array(2).fill((n * (n - 1)) / 2));
      const flags = Tensor.cat(Array.from({ length: 100 }, (_, i) => new Tensor([i % 3 === 0, true])));
      expect(flags.tolist()).toEqual(
        Array.from({ length: 200 }, (_, i) => i % 2 === 1 || (i >> 1) % 3 === 0),
      );
    },
    TIMEOUT,
  );
});

describe('printers take graphs of 100,000 nodes and more', () => {
  it(
    'printGraph lists a chain of 100,000 adds; toCode and fromCode rebuild one of 160,000 nodes',
    () => {
      const x = chain(N);
      const listing = printGraph(x.uop).split('\n');
      expect(listing.length).toBeGreaterThan(N);
      expect(listing.at(-1)).toMatch(/ADD/);
      // distinct constants: each add brings a CONST, a RESHAPE and an EXPAND (one stack frame would overflow)
      let y = Tensor.zeros([4]).contiguous().realize();
      for (let i = 0; i < 40_000; i++) y = y.add(i);
      const code = toCode(y.uop);
      expect(code.split('\n').length).toBeGreaterThan(160_000);
      expect(fromCode(code)).toBe(y.uop);
    },
    TIMEOUT,
  );
});

describe('bound kernels', () => {
  useDefaultDevice('JS');

  it('cuts a chain every KERNEL_DEPTH adds, the last kernel taking the rest', () => {
    Context.with({ KERNEL_DEPTH: 10 }, () => {
      const x = chain(35);
      expect(kernelSizes(x)).toEqual({ kernels: 4, ops: 10, depth: 10 });
      expect(x.tolist()).toEqual([35, 35, 35, 35]);
    });
  });

  it('cuts a wide sum at KERNEL_OPS ops', () => {
    Context.with({ KERNEL_OPS: 50 }, () => {
      const y = tree(Tensor.ones([4], { dtype: dtypes.float64 }).contiguous().realize(), 100);
      const { kernels, ops } = kernelSizes(y);
      expect(ops).toBeLessThanOrEqual(50);
      expect(kernels).toBeGreaterThan(3);
      expect(y.tolist()).toEqual(Array(4).fill(treeSum(100)));
    });
  });

  it('bounds of 0 turn it off', () => {
    Context.with({ KERNEL_DEPTH: 0, KERNEL_OPS: 0, KERNEL_SHARED_OPS: 0 }, () => {
      expect(kernelSizes(chain(3000)).kernels).toBe(1);
    });
  });

  it('leaves ordinary kernels alone: an MLP training step, a conv, attention schedule the same unbounded', () => {
    const programs = (): Tensor[] => {
      const layer1 = new Linear(16, 32);
      const layer2 = new Linear(32, 4);
      const x = Tensor.rand([8, 16]);
      const loss = layer2
        .forward(layer1.forward(x).relu())
        .sparseCategoricalCrossentropy(Tensor.arange(8).mod(4));
      loss.backward();
      const img = Tensor.rand([2, 3, 8, 8]);
      const conv = img
        .conv2d(Tensor.rand([4, 3, 3, 3]))
        .relu()
        .maxPool2d();
      const [q, k, v] = [0, 1, 2].map(() => Tensor.rand([2, 8, 16]));
      const attention = q!.matmul(k!.transpose(1, 2)).div(4).softmax(-1).matmul(v!);
      return [loss, layer1.weight.grad!, layer2.weight.grad!, conv, attention.gelu()];
    };
    const ts = programs();
    const counts = () => ts.map((t) => scheduleOf([t]).kernels.length);
    const unbounded = Context.with({ KERNEL_DEPTH: 0, KERNEL_OPS: 0, KERNEL_SHARED_OPS: 0 }, counts);
    const bounded = counts();
    expect(bounded).toEqual(unbounded);
  });

  it('never changes a value: random graphs of elementwise ops under tiny bounds', () => {
    const ops = [
      (a: Tensor, b: Tensor) => a.add(b),
      (a: Tensor, b: Tensor) => a.mul(b),
      (a: Tensor, b: Tensor) => a.sub(b),
      (a: Tensor, b: Tensor) => a.maximum(b),
      (a: Tensor) => a.neg(),
      (a: Tensor) => a.sum(0, true).expand([4]).mul(0.125),
      (a: Tensor) => a.flip(0),
    ];
    const step = fc.record({ op: fc.nat(ops.length - 1), a: fc.nat(), b: fc.nat() });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), fc.nat(3), (steps, bound) => {
        const build = () => {
          const values = [new Tensor([1, -2, 3, 0.5]), new Tensor([0.25, 2, -1, 4])];
          for (const s of steps)
            values.push(ops[s.op]!(values[s.a % values.length]!, values[s.b % values.length]!));
          return values.at(-1)!;
        };
        const want = Context.with({ KERNEL_DEPTH: 0, KERNEL_OPS: 0, KERNEL_SHARED_OPS: 0 }, () =>
          build().tolist(),
        );
        const got = Context.with(
          { KERNEL_DEPTH: bound + 1, KERNEL_OPS: 2 * bound + 2, KERNEL_SHARED_OPS: bound + 1 },
          () => build().tolist(),
        );
        expect(got).toEqual(want);
      }),
      { numRuns: 60 },
    );
  });
});
