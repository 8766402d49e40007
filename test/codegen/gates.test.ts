// Addresses under their gates: a padded view's wrapped address is simplified where the load's gate holds, and so
// are a gate's clauses where the others hold.
import { describe, expect, it } from 'vitest';
import { simplifyGatedAddresses, ungateSafeLoads } from '../../src/codegen/gates.ts';
import { optimizable } from '../../src/codegen/index.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops, opName } from '../../src/uop/ops.ts';
import { graphRewrite } from '../../src/uop/pattern.ts';
import { symbolic } from '../../src/uop/symbolic.ts';
import type { UOp } from '../../src/uop/uop.ts';

const gatedAddresses = (ast: UOp) =>
  ast.toposort().flatMap((u) => (u.op === Ops.LOAD && u.src.length === 3 ? [u.src[0]!.src[1]!] : []));
const wraps = (u: UOp) => u.toposort().some((x) => x.op === Ops.MOD);

const x = new Tensor(
  Float32Array.from({ length: 2 * 3 * 8 * 8 }, (_, i) => (i % 7) - 3),
  { device: 'CPU' },
).reshape([2, 3, 8, 8]);
const w = new Tensor(
  Float32Array.from({ length: 4 * 3 * 9 }, (_, i) => (i % 5) - 2),
  { device: 'CPU' },
).reshape([4, 3, 3, 3]);
const conv = () => x.conv2d(w, undefined, { padding: 1 });

describe('addresses under their gates', () => {
  it("drop a padded window's wrap (x % size) where the gate bounds the window's rows and columns", () => {
    const ast = graphRewrite(scheduleOf([conv()]).kernels[0]!.ast, symbolic, { name: 'simplify', ctx: {} });
    const before = gatedAddresses(ast);
    expect(before.length).toBeGreaterThan(0);
    expect(before.every(wraps)).toBe(true);
    const after = gatedAddresses(simplifyGatedAddresses(ast));
    expect(after).toHaveLength(before.length);
    expect(after.some(wraps)).toBe(false);
  });

  it('compute what a plain loop computes', () => {
    const xs = x.tolist() as number[][][][];
    const ws = w.tolist() as number[][][][];
    const at = (b: number, c: number, i: number, j: number) =>
      i < 0 || i > 7 || j < 0 || j > 7 ? 0 : xs[b]![c]![i]![j]!;
    const want = [0, 1].map((b) =>
      [0, 1, 2, 3].map((o) =>
        Array.from({ length: 8 }, (_, i) =>
          Array.from({ length: 8 }, (_, j) => {
            let s = 0;
            for (let c = 0; c < 3; c++)
              for (let u = 0; u < 3; u++)
                for (let v = 0; v < 3; v++) s += at(b, c, i + u - 1, j + v - 1) * ws[o]![c]![u]![v]!;
            return s;
          }),
        ),
      ),
    );
    expect(conv().tolist()).toEqual(want);
  });
});

describe("a max pool's gradient over a padded window (11 x 11 rows pooled as 5 x 5 pairs)", () => {
  const input = () =>
    new Tensor(
      Float32Array.from({ length: 2 * 3 * 11 * 11 }, (_, i) => ((i * 7) % 13) - 6),
      { device: 'CPU' },
    )
      .reshape([2, 3, 11, 11])
      .requiresGrad_();
  const g = new Tensor(
    Float32Array.from({ length: 2 * 3 * 5 * 5 }, (_, i) => ((i * 5) % 11) - 5),
    { device: 'CPU' },
  ).reshape([2, 3, 5, 5]);
  const gradient = () => {
    const x = input();
    x.relu().maxPool2d(2).mul(g).sum().backward();
    return x.grad!;
  };
  const divisions = (ast: UOp) =>
    ast
      .toposort()
      .flatMap((u) =>
        u.op === Ops.MOD || u.op === Ops.IDIV
          ? [`${opName(u.op)} ${u.src[1]!.op === Ops.CONST ? u.src[1]!.constValue : 'x'}`]
          : [],
      );

  it('reads rows and columns unwrapped: (x + y // 10) % 11 < 10 is x < 10 where y < 10 holds', () => {
    const left = scheduleOf([gradient()]).kernels.map((k) => divisions(optimizable(k.ast)));
    // only the pool's pairs (x // 2) are left
    expect(left.flat().sort()).toEqual(['IDIV 2', 'IDIV 2']);
  });

  it('computes what a loop over the windows computes', () => {
    const xs = input().reshape([6, 121]).tolist() as number[][];
    const gs = g.tolist() as number[][][][];
    const want = [0, 1].map((b) =>
      [0, 1, 2].map((c) =>
        Array.from({ length: 11 }, (_, i) =>
          Array.from({ length: 11 }, (_, j) => {
            if (i > 9 || j > 9) return 0;
            const [pi, pj] = [i >> 1, j >> 1];
            const window = [0, 1].flatMap((u) =>
              [0, 1].map((v) => Math.max(0, xs[b * 3 + c]![(2 * pi + u) * 11 + 2 * pj + v]!)),
            );
            const mine = Math.max(0, xs[b * 3 + c]![i * 11 + j]!);
            // tinygrad's max pool gradient: shared equally by the window's maxima (relu's is 0 below 0, 1/2 at 0)
            const ties = window.filter((w) => w === Math.max(...window)).length;
            const relu = xs[b * 3 + c]![i * 11 + j]! > 0 ? 1 : xs[b * 3 + c]![i * 11 + j]! === 0 ? 0.5 : 0;
            return mine === Math.max(...window) ? (gs[b]![c]![pi]![pj]! / ties) * relu : 0;
          }),
        ),
      ),
    );
    expect(gradient().tolist()).toEqual(want);
  });
});

describe('loads that cannot fault', () => {
  // a padded product with a per-channel scale: the scale's address stays in its buffer at the padding too
  const scale = new Tensor(Float32Array.from([2, -3, 0.5]), { device: 'CPU' });
  const padded = () =>
    x.mul(scale.reshape([1, 3, 1, 1])).pad([
      [0, 0],
      [0, 0],
      [1, 1],
      [1, 1],
    ]);
  const gated = (ast: UOp) => ast.toposort().filter((u) => u.op === Ops.LOAD && u.src.length === 3);

  it('load unconditionally, selected by the gate, and keep the gate of an address that leaves its buffer', () => {
    const ast = graphRewrite(scheduleOf([padded()]).kernels[0]!.ast, symbolic, { name: 'simplify', ctx: {} });
    expect(gated(ast)).toHaveLength(2);
    const after = ungateSafeLoads(ast);
    expect(gated(after)).toHaveLength(1);
    const selected = after.toposort().filter((u) => u.op === Ops.WHERE && u.src[1]!.op === Ops.LOAD);
    expect(selected).toHaveLength(1);
    expect(selected[0]!.src[1]!.src).toHaveLength(1);
  });

  it('compute what a plain loop computes', () => {
    const xs = x.tolist() as number[][][][];
    const want = [0, 1].map((b) =>
      [0, 1, 2].map((c) =>
        Array.from({ length: 10 }, (_, i) =>
          Array.from({ length: 10 }, (_, j) =>
            i < 1 || i > 8 || j < 1 || j > 8 ? 0 : xs[b]![c]![i - 1]![j - 1]! * [2, -3, 0.5][c]!,
          ),
        ),
      ),
    );
    expect(padded().tolist()).toEqual(want);
  });
});
