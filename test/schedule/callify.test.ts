// Callify's memo: a graph realized again reuses its function (the walk is skipped), and a graph that differs in
// anything the function holds (a constant, an input buffer, a slice's start) or in the buffers' data gets its own
// result.
import { describe, expect, it } from 'vitest';
import { callify } from '../../src/schedule/callify.ts';
import { Tensor } from '../../src/tensor/index.ts';

const DEVICES = ['JS', 'CPU'];

describe('callify memo', () => {
  it('gives an equal graph, built again, the same function', () => {
    const x = new Tensor([1, 2, 3], { device: 'JS' }).realize();
    const first = callify([x.add(1).mul(x).uop]);
    expect(callify([x.add(1).mul(x).uop])).toBe(first);
    expect(first.inputs).toEqual([x.uop]);
    expect(first.values).toEqual([1]);
    // other roots, or the same roots in another order, are another graph
    const y = new Tensor([4, 5, 6], { device: 'JS' }).realize();
    const both = callify([x.add(1).uop, y.add(1).uop]);
    expect(both).not.toBe(callify([y.add(1).uop, x.add(1).uop]));
    expect(callify([y.add(1).uop, x.add(1).uop]).inputs).toEqual([y.uop, x.uop]);
  });

  for (const device of DEVICES) {
    it(`graphs differing only in a constant, an input or a slice's start give their own results on ${device}`, () => {
      const x = new Tensor([1, 2, 3], { device }).realize();
      const y = new Tensor([10, 20, 30], { device }).realize();
      for (let round = 0; round < 2; round++) {
        expect([...x.add(1).dataSync()]).toEqual([2, 3, 4]);
        expect([...x.add(2).dataSync()]).toEqual([3, 4, 5]);
        expect([...y.add(1).dataSync()]).toEqual([11, 21, 31]);
        expect([...x.mul(y).dataSync()]).toEqual([10, 40, 90]);
        expect([...y.mul(x).dataSync()]).toEqual([10, 40, 90]);
        expect([...x.sub(y).dataSync()]).toEqual([-9, -18, -27]);
        expect([...y.sub(x).dataSync()]).toEqual([9, 18, 27]);
      }
      const rows = new Tensor([0, 1, 2, 3, 4, 5, 6, 7], { device }).reshape([4, 2]).realize();
      for (let round = 0; round < 2; round++)
        for (let i = 0; i < 3; i++)
          expect([
            ...rows
              .get([i, i + 1])
              .mul(2)
              .dataSync(),
          ]).toEqual([4 * i, 4 * i + 2]);
    });

    it(`the same graph after its input buffer is written reads the new data on ${device}`, () => {
      const x = new Tensor([1, 2, 3], { device }).realize();
      const buffer = x.uop;
      expect([...x.add(1).dataSync()]).toEqual([2, 3, 4]);
      x.assign(new Tensor([7, 8, 9], { device })).realize();
      // the same buffer node, so the same graph: the memo's function, run on the buffer's new contents
      expect(x.uop).toBe(buffer);
      expect([...x.add(1).dataSync()]).toEqual([8, 9, 10]);
    });
  }
});
