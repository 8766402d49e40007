// Deterministic release in synchronous loops: `using` declarations and Tensor.scope.
import { describe, expect, it } from 'vitest';
import { SGD } from '../../src/nn/index.ts';
import { memoryStats } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { data } from './reference.ts';

const N = 1 << 16;

for (const device of DEVICES) {
  describe(`synchronous loops on ${device}`, () => {
    const x = new Tensor(new Float32Array(N).fill(2), { device });
    const y = new Tensor(new Float32Array(N).fill(3), { device });
    const inUse = () => memoryStats(device).bytesInUse;

    it('grow without using or a scope (garbage collection waits for an await)', () => {
      const start = inUse();
      for (let i = 0; i < 10; i++) x.mul(y).add(1).realize();
      expect(inUse()).toBeGreaterThanOrEqual(start + 10 * 4 * N);
    });

    it('stay flat with `using`', () => {
      const sizes: number[] = [];
      for (let i = 0; i < 20; i++) {
        using out = x.mul(y).add(1).realize();
        expect(out.dataSync()[5]).toBe(7);
        sizes.push(inUse());
      }
      expect(new Set(sizes).size).toBe(1);
    });

    it('stay flat with Tensor.scope, which keeps and realizes what it returns', () => {
      const sizes: number[] = [];
      let last: Tensor | undefined;
      for (let i = 0; i < 20; i++) {
        last?.dispose();
        last = Tensor.scope(() => {
          const t = x.mul(y).add(1).realize();
          return t.sum();
        });
        expect(last.uop.op).toBe(x.uop.op); // a BUFFER: realized
        sizes.push(inUse());
      }
      expect(new Set(sizes).size).toBe(1);
      expect(last!.item()).toBe(N * 7);
    });

    it('stay flat over training steps in scopes, and keep the gradients', () => {
      const w = new Tensor(new Float32Array(64).fill(0.1), { device, requiresGrad: true });
      const opt = new SGD([w], { lr: 0.01 });
      const batch = new Tensor(new Float32Array(256 * 64).fill(1), { device }).reshape([256, 64]);
      const sizes: number[] = [];
      const losses: number[] = [];
      for (let i = 0; i < 12; i++) {
        Tensor.scope(() => {
          opt.zeroGrad();
          const loss = batch.mul(w).sum(1).sub(1).square().mean();
          losses.push(Number(loss.item()));
          loss.backward();
          opt.step();
        });
        expect(w.grad!.disposed).toBe(false);
        sizes.push(inUse());
      }
      expect(new Set(sizes.slice(2)).size).toBe(1);
      expect(losses.at(-1)!).toBeLessThan(losses[0]!);
      // the kept gradient is the last step's: with every input 1, each entry is 2 (S - 1) for S = sum(w) before
      // the step, and the step made sum(w) = S - 64 * 0.01 * 2 (S - 1)
      const after = data(w).reduce((a, b) => a + b, 0);
      const before = (1.28 - after) / 0.28;
      for (const g of data(w.grad!)) expect(g).toBeCloseTo(2 * (before - 1), 4);
    });
  });
}

describe('Tensor.scope', () => {
  const JS = 'JS';
  it('disposes what it made and did not return; tensors made before it stay', () => {
    const outer = new Tensor([1, 2, 3], { device: JS });
    let inner: Tensor | undefined;
    const kept = Tensor.scope(() => {
      inner = outer.add(1).realize();
      return { a: [inner.mul(2)], b: new Map([['c', outer.sum()]]) };
    });
    expect(inner!.disposed).toBe(true);
    expect(() => inner!.tolist()).toThrow('tensor was disposed');
    expect(kept.a[0]!.tolist()).toEqual([4, 6, 8]);
    expect(kept.b.get('c')!.item()).toBe(6);
    expect(outer.tolist()).toEqual([1, 2, 3]);
  });

  it('carries out assigns into tensors made before it, which may read tensors it disposes', () => {
    const state = new Tensor([1, 1], { device: JS }).realize();
    Tensor.scope(() => {
      const step = new Tensor([5, 6], { device: JS }).realize();
      state.assign(state.add(step));
    });
    expect(state.tolist()).toEqual([6, 7]);
  });

  it('nests: what an inner scope keeps, the outer one owns', () => {
    let middle: Tensor | undefined;
    const result = Tensor.scope(() => {
      middle = Tensor.scope(() => new Tensor([1, 2], { device: JS }).add(1));
      return middle.mul(10);
    });
    expect(result.tolist()).toEqual([20, 30]);
    expect(middle!.disposed).toBe(true);
  });

  it('disposes what it made when fn throws, and rethrows', () => {
    let made: Tensor | undefined;
    expect(() =>
      Tensor.scope(() => {
        made = new Tensor([1], { device: JS });
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(made!.disposed).toBe(true);
  });

  it('refuses an async function', () => {
    expect(() => Tensor.scope(async () => new Tensor([1], { device: JS }))).toThrow(
      'Tensor.scope: fn returned a Promise; a scope must be synchronous',
    );
  });

  it('never frees a buffer that a tensor made before it holds', () => {
    const outer = new Tensor([1, 2, 3], { device: JS }).realize();
    Tensor.scope(() => {
      Tensor.fromUOp(outer.uop, JS); // a second tensor over the same buffer, disposed with the scope
    });
    expect(outer.tolist()).toEqual([1, 2, 3]);
  });
});
