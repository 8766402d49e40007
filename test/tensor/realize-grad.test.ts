// Autograd across realize: reading a value before backward(), realized intermediates, and stale values.
import { describe, expect, it } from 'vitest';
import { jit } from '../../src/engine/jit.ts';
import { SGD } from '../../src/nn/index.ts';
import { memoryStats } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';
import { settle } from '../settle.ts';
import { close, data, values } from './reference.ts';

for (const device of DEVICES) {
  describe(`gradients after realize on ${device}`, () => {
    const param = (shape: number[], seed: number) => {
      const t = new Tensor(values(shape[0]! * shape[1]!, seed), { device }).reshape(shape).realize();
      t.requiresGrad = true;
      return t;
    };
    const input = () => new Tensor(values(12, 9), { device }).reshape([4, 3]);
    const labels = () => new Tensor([0, 1, 1, 0], { device });
    const model = (w1: Tensor, w2: Tensor, x: Tensor) => x.matmul(w1).relu().matmul(w2);

    it('reading the loss first (item) gives the same gradients as not reading it', () => {
      const [w1, w2] = [param([3, 5], 1), param([5, 2], 2)];
      const lazy = Tensor.gradient(model(w1, w2, input()).sparseCategoricalCrossentropy(labels()), [w1, w2]);
      const loss = model(w1, w2, input()).sparseCategoricalCrossentropy(labels());
      const value = Number(loss.item());
      loss.backward();
      close(data(w1.grad!), data(lazy[0]!));
      close(data(w2.grad!), data(lazy[1]!));
      expect(value).toBeCloseTo(Number(loss.item()), 6);
      // Tensor.gradient works after realize too
      close(data(Tensor.gradient(loss, [w2])[0]!), data(lazy[1]!));
    });

    it('flows through a realized intermediate and reads its buffer instead of computing it again', () => {
      const [w1, w2] = [param([3, 5], 3), param([5, 2], 4)];
      const lazy = Tensor.gradient(model(w1, w2, input()).sum(), [w1, w2]);
      const h = input().matmul(w1).relu().realize();
      const loss = h.matmul(w2).sum();
      loss.backward();
      expect(w2.grad!.uop.toposort()).toContain(h.uop);
      close(data(w1.grad!), data(lazy[0]!));
      close(data(w2.grad!), data(lazy[1]!));
    });

    it('accumulates into a realized gradient in place', () => {
      const w = param([3, 2], 5);
      const loss = () => input().matmul(w).square().sum();
      loss().backward();
      const grad = w.grad!.realize();
      const once = data(grad);
      loss().backward();
      expect(w.grad).toBe(grad);
      close(
        data(w.grad!),
        once.map((g) => 2 * g),
      );
    });

    it('refuses gradients of a loss whose inputs an optimizer step has written since', () => {
      const w = param([3, 2], 6);
      const opt = new SGD([w], { lr: 0.1 });
      const loss = input().matmul(w).sum();
      loss.item();
      loss.backward();
      opt.step();
      opt.zeroGrad();
      expect(() => loss.backward()).toThrow(
        /backward: the loss was computed from a buffer \(3, 2\) float32 that assign\(\) has written since/,
      );
    });

    it('never takes the values of a JIT replay for the graph its capture computed', () => {
      const w = param([3, 2], 8);
      const forward = jit((x: Tensor) => x.matmul(w).sum());
      for (let i = 0; i < 2; i++) forward(input()).backward(); // run, then capture: graphs are kept
      w.grad = undefined;
      const replayed = forward(input().mul(2));
      expect(() => replayed.backward()).toThrow(
        'backward: the loss () depends on no tensor with requiresGrad',
      );
      // a replay that writes a parameter makes values computed from it before stale
      const opt = new SGD([w], { lr: 0.1 });
      const train = jit((x: Tensor) => {
        opt.zeroGrad();
        const loss = x.matmul(w).sum();
        loss.backward();
        opt.step(loss);
        return loss;
      });
      for (let i = 0; i < 2; i++) train(input());
      const before = input().matmul(w).square().sum();
      before.item();
      train(input()); // a replay
      expect(() => before.backward()).toThrow('that assign() has written since');
    });

    it('realizes the gradients with the step, so they read as the step used them', () => {
      const w = param([3, 2], 7);
      const opt = new SGD([w], { lr: 0.5 });
      const loss = input().matmul(w).square().sum();
      loss.backward();
      const before = data(w.grad!.clone());
      opt.step(loss);
      close(data(w.grad!), before);
      // the loss realized with the step is the loss before it
      expect(Number.isFinite(Number(loss.item()))).toBe(true);
    });
  });
}

describe('what a realized value keeps for autograd', () => {
  const JS = 'JS';
  const inUse = () => memoryStats(JS).bytesInUse;
  it('keeps the buffers its graph reads while it lives, and no longer', async () => {
    const w = new Tensor(new Float32Array(64).fill(0.5), { device: JS, requiresGrad: true });
    await settle(inUse);
    const base = inUse();
    let y: Tensor | undefined = (() => {
      const x = new Tensor(new Float32Array(5000).fill(2), { device: JS });
      return x.reshape([5000, 1]).mul(w).sum(0).realize();
    })();
    await settle(inUse);
    // x's 20000 bytes stay: y's gradient needs them
    expect(memoryStats(JS).bytesInUse).toBe(base + 20000 + 256);
    y.backward(Tensor.onesLike(y));
    expect(data(w.grad!)).toEqual(new Array(64).fill(10000));
    w.grad = undefined;
    y = undefined;
    await settle(inUse);
    expect(memoryStats(JS).bytesInUse).toBe(base);
  });

  it('keeps nothing for a value no gradient can flow through', async () => {
    await settle(inUse);
    const base = inUse();
    const y = (() => {
      const x = new Tensor(new Float32Array(5000).fill(2), { device: JS });
      return x.sum().realize();
    })();
    await settle(inUse);
    expect(memoryStats(JS).bytesInUse).toBe(base + 4);
    expect(y.item()).toBe(10000);
  });
});
