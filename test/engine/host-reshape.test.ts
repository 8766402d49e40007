// A reshape of a realized buffer on a device whose memory the host addresses (CPU, JS, SIMT) realizes as a copy
// the host makes: the values a copy kernel would give, with no kernel to compile or launch; a copy, so later
// writes to either tensor leave the other as it was.
import { describe, expect, it, vi } from 'vitest';
import { jit } from '../../src/engine/jit.ts';
import { realize } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { DEVICES } from '../devices.ts';

/** How many kernels realizing these tensors runs, as DEBUG=1 reports them (recording launches would be a JIT's capture). */
function launches(...ts: Tensor[]): number {
  const log = vi.spyOn(console, 'log').mockImplementation(() => {});
  try {
    Context.with({ DEBUG: 1 }, () => realize(ts));
    return log.mock.calls.reduce(
      (n, [line]) => n + Number(/^realize: (\d+) kernel/.exec(String(line))?.[1] ?? 0),
      0,
    );
  } finally {
    log.mockRestore();
  }
}
const iota = (n: number, device: string) =>
  new Tensor(
    Float32Array.from({ length: n }, (_, i) => i),
    { device },
  );

for (const device of DEVICES)
  describe(`a realized reshape on ${device}`, () => {
    // a GPU's memory the host does not address: a copy kernel there
    const kernels = device === 'CUDA' ? 1 : 0;
    it('runs no kernel where the host addresses the memory, and reads the values in their new shape', () => {
      const a = iota(24, device).realize();
      const b = a.reshape([2, 3, 4]).reshape([4, 6]);
      expect(launches(b)).toBe(kernels);
      expect(b.uop.op).toBe(Ops.BUFFER);
      expect(b.tolist()).toEqual([0, 6, 12, 18].map((r) => [0, 1, 2, 3, 4, 5].map((c) => r + c)));
      expect(b.sum(1).tolist()).toEqual([15, 51, 87, 123]);
    });

    it('of host data given a shape (a data set, a batch) runs no kernel there', () => {
      const x = new Tensor(
        Uint8Array.from({ length: 12 }, (_, i) => 100 + i),
        { device },
      ).reshape([3, 1, 2, 2]);
      expect(launches(x)).toBe(kernels);
      expect(Array.from(x.dataSync() as Uint8Array)).toEqual(Array.from({ length: 12 }, (_, i) => 100 + i));
      expect(x.shape).toEqual([3, 1, 2, 2]);
    });

    it('is a copy: a write to either later leaves the other, and reads and writes in one realize keep their order', () => {
      const a = iota(4, device).realize();
      const b = a.reshape([2, 2]).realize();
      a.assign(a.add(10)).realize();
      expect(b.tolist()).toEqual([
        [0, 1],
        [2, 3],
      ]);
      b.assign(b.mul(2)).realize();
      expect(a.tolist()).toEqual([10, 11, 12, 13]);
      // a read of the reshape and a write of its base realized together
      const base = iota(4, device).realize();
      const v = base.reshape([2, 2]).realize();
      const y = v.mul(2);
      base.assign(base.add(10));
      y.realize(base);
      expect(y.tolist()).toEqual([
        [0, 2],
        [4, 6],
      ]);
      expect(base.tolist()).toEqual([10, 11, 12, 13]);
    });

    it('passes gradients to the tensor it reshapes', () => {
      const a = iota(6, device).requiresGrad_();
      const b = a.reshape([2, 3]).realize();
      b.mul(b).sum().backward();
      expect(a.grad!.tolist()).toEqual([0, 2, 4, 6, 8, 10]);
    });

    it('gives a JIT its batches, each batch its own values (without a kernel there), and copies inside one by a kernel it replays', () => {
      const f = jit((x: Tensor) => x.sum(1));
      for (let i = 0; i < 4; i++) {
        const x = new Tensor(
          Float32Array.from({ length: 6 }, (_, k) => k + i),
          { device },
        ).reshape([2, 3]);
        expect(launches(x)).toBe(kernels);
        expect(f(x).tolist()).toEqual([3 + 3 * i, 12 + 3 * i]);
      }
      const g = jit((x: Tensor) => x.reshape([2, 3]).realize().sum(1));
      for (let i = 0; i < 4; i++) {
        const x = new Tensor(
          Float32Array.from({ length: 6 }, (_, k) => k + i),
          { device },
        ).realize();
        expect(g(x).tolist()).toEqual([3 + 3 * i, 12 + 3 * i]);
      }
    });
  });
