// A plan's new kernels compile together: one compileMany call before the first kernel runs, none once they are
// built, lifted constants through the same batch, on JS and CPU.
import { describe, expect, it, vi } from 'vitest';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';

/** The kernel counts of each compileMany call fn makes on the device. */
function batchesIn(device: string, fn: () => void): number[] {
  const spy = vi.spyOn(Device.get(device), 'compileMany');
  try {
    fn();
    return spy.mock.calls.map(([kernels]) => kernels.length);
  } finally {
    spy.mockRestore();
  }
}

describe('a plan compiles its new kernels together', () => {
  for (const device of ['JS', 'CPU']) {
    // shapes no other test uses, so that the kernels are new to this process
    const data = Array.from({ length: 5 * 11 }, (_, i) => ((i * 7) % 13) - 6);
    const softmax = (scale: number) =>
      new Tensor(data, { device }).reshape([5, 11]).mul(scale).softmax(1).sum(0);
    const expectClose = (got: number[], scale: number) => {
      const want = reference(scale);
      for (const [i, v] of got.entries()) expect(v).toBeCloseTo(want[i]!, 5);
    };
    const reference = (scale: number) => {
      const out = new Array<number>(11).fill(0);
      for (let r = 0; r < 5; r++) {
        const row = data.slice(r * 11, r * 11 + 11).map((v) => Math.fround(v * scale));
        const top = Math.max(...row);
        const e = row.map((v) => Math.exp(v - top));
        const sum = e.reduce((a, b) => a + b, 0);
        e.forEach((v, c) => {
          out[c]! += v / sum;
        });
      }
      return out;
    };

    it(`in one batch before any runs, then none; a lifted constant's programs in one more (${device})`, () => {
      const kernels = scheduleOf([softmax(0.5)]).kernels.length;
      expect(kernels).toBeGreaterThan(1);
      let got: number[] = [];
      expect(batchesIn(device, () => (got = softmax(0.5).tolist() as number[]))).toEqual([kernels]);
      expectClose(got, 0.5);
      expect(batchesIn(device, () => softmax(0.5).tolist())).toEqual([]);
      // another value of the scale: the kernels reading it compile again, together, to read it at run time
      const lifted = batchesIn(device, () => (got = softmax(0.25).tolist() as number[]));
      expect(lifted).toHaveLength(1);
      expect(lifted[0]).toBeGreaterThan(0);
      expectClose(got, 0.25);
      expect(batchesIn(device, () => softmax(0.75).tolist())).toEqual([]);
    });
  }
});
