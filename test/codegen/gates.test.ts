// Addresses under their gates: a padded view's wrapped address is simplified where the load's gate holds.
import { describe, expect, it } from 'vitest';
import { simplifyGatedAddresses } from '../../src/codegen/gates.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
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
