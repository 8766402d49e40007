// Gather loads: indexSelect, get with index tensors, gather and Embedding lower to one load at an address read
// from memory (no loop over the indexed axis), select 0 for out-of-range lazy indices without reading outside
// the buffer, and keep their gradient (a scatter-add).
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { dtypes } from '../../src/dtype.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Embedding } from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { DEVICES } from '../devices.ts';

const ROWS = 50;
const COLS = 3;
const table = Array.from({ length: ROWS * COLS }, (_, i) => i * 0.5 - 7);
/** Lazy indices (computed, so that the host index checks leave them alone), some outside [-ROWS, ROWS). */
const IDX = [3, 49, 0, -1, -50, 50, -51, 1000, 7, 3];
const row = (i: number) => {
  const k = i < 0 ? i + ROWS : i;
  return k >= 0 && k < ROWS ? table.slice(k * COLS, k * COLS + COLS) : [0, 0, 0];
};
const data = (t: Tensor) => Array.from(t.dataSync() as ArrayLike<number>, Number);

/** The linear programs of the kernels that compute t. */
const linears = (t: Tensor) => scheduleOf([t]).kernels.map((k) => lowerKernel(k.ast).linear);
/** Whether a LOAD's address is computed from another LOAD: a gather load. */
const gathers = (linear: UOp) =>
  linear.src.some(
    (u) =>
      u.op === Ops.LOAD && u.src[0]!.src.slice(1).some((a) => a.toposort().some((v) => v.op === Ops.LOAD)),
  );
const ranges = (linear: UOp) =>
  linear.src.filter((u) => u.op === Ops.RANGE).map((u) => Number(u.src[0]!.constValue));

for (const device of DEVICES)
  describe(`gather loads on ${device}`, () => {
    const x = () => new Tensor(new Float32Array(table), { device }).reshape([ROWS, COLS]);
    const lazy = (v: number[], dtype = dtypes.int32) =>
      new Tensor(new Int32Array(v), { device }).add(0).cast(dtype);

    it('indexSelect and get select rows, wrap negatives and give 0 outside [-n, n)', () => {
      expect(data(x().indexSelect(0, lazy(IDX)))).toEqual(IDX.flatMap(row));
      expect(data(x().get(lazy(IDX)))).toEqual(IDX.flatMap(row));
      // a 64-bit index far past the int32 range must not wrap into range
      const far = new Tensor(new BigInt64Array([2n ** 40n + 3n, 5n, -(2n ** 40n)]), { device }).add(0n);
      expect(data(x().get(far))).toEqual([ROWS, 5, ROWS].flatMap(row));
    });

    it('gather and get with two index tensors pick one element per index', () => {
      const cols = [2, 0, 1, 2, 0, 1, 5, 1, -4, 0];
      const want = IDX.map((i, k) => {
        const c = cols[k]! < 0 ? cols[k]! + COLS : cols[k]!;
        return c >= 0 && c < COLS ? row(i)[c]! : 0;
      });
      expect(data(x().get(lazy(IDX), lazy(cols)))).toEqual(want);
      const g = [1, 0, 2, 9, 0, 1].map((c) => c);
      const gathered = x().gather(1, lazy(g).reshape([2, 3]));
      expect(data(gathered)).toEqual(g.map((c, k) => (c < COLS ? table[Math.floor(k / 3) * COLS + c]! : 0)));
    });

    it('Embedding looks up rows; the gradient of indexSelect adds each repeated row', () => {
      const emb = new Embedding(ROWS, COLS);
      emb.weight = x();
      expect(data(emb.forward(lazy([4, 4, 49]).reshape([1, 3])))).toEqual([4, 4, 49].flatMap(row));
      const w = x().requiresGrad_();
      const idx = lazy([3, 5, 3, 49, 3]);
      const scale = new Tensor(new Float32Array([1, 2, 3, 4, 5]), { device }).reshape([5, 1]);
      w.indexSelect(0, idx).mul(scale).sum().backward();
      const want = new Array(ROWS * COLS).fill(0);
      [3, 5, 3, 49, 3].forEach((r, k) => {
        for (let c = 0; c < COLS; c++) want[r * COLS + c] += k + 1;
      });
      expect(data(w.grad!)).toEqual(want);
    });
  });

describe('gather loads in the kernel', () => {
  const x = new Tensor(new Float32Array(600 * 7), { device: 'JS' }).reshape([600, 7]);
  const idx = new Tensor(new Int32Array([5, 2, 599, 0]), { device: 'JS' }).add(0);

  it('indexSelect, get and gather are one kernel with a load at a loaded address and no loop over the table', () => {
    for (const t of [
      x.indexSelect(0, idx),
      x.get(idx, idx),
      x.gather(0, idx.reshape([4, 1]).expand([4, 7])),
    ]) {
      const ks = linears(t);
      expect(ks).toHaveLength(1);
      expect(gathers(ks[0]!)).toBe(true);
      expect(ranges(ks[0]!)).not.toContain(600);
    }
  });

  it('a one-hot sum whose mask is not an equality with the loop keeps its loop', () => {
    // a mask of i <= r is a range count, not a pick: summing it stays a sum over the table
    const prefix = x
      .mul(
        Tensor.arange(600, undefined, 1, { device: 'JS' })
          .reshape([600, 1])
          .ge(idx.reshape([4, 1, 1]).cast(dtypes.int32))
          .cast(dtypes.float32),
      )
      .sum(1);
    const ks = linears(prefix);
    expect(ks.some(gathers)).toBe(false);
  });
});
