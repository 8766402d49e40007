// Assigns stored by the kernel that reads them (src/schedule/rangeify.ts sharedKernels): an optimizer's moments are
// written by their parameter's update kernel, one kernel instead of three, with the values separate kernels give.
import { describe, expect, it } from 'vitest';
import { recordLaunches, scheduleOf } from '../../src/engine/realize.ts';
import { Adam } from '../../src/nn/optim.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { DEVICES } from '../devices.ts';

const values = (n: number, k: number) => Array.from({ length: n }, (_, i) => ((i * k) % 13) / 13 - 0.4);
const stores = (ast: UOp) => ast.toposort().filter((u) => u.op === Ops.STORE).length;

/**
 * A parameter, its gradient and moments (in memory), and an Adam-like update of them (assigns, lazy); `apart`:
 * the moments are realized before the parameter's update is built on them.
 */
function update(device: string, read: (m: Tensor) => Tensor = (m) => m, apart = false) {
  const t = (k: number) => new Tensor(values(24, k), { device }).reshape([4, 6]).contiguous().realize();
  const [p, g, m, v] = [t(3), t(5), t(7), t(11).abs().realize()];
  m.assign(m.mul(0.9).add(g.mul(0.1)));
  v.assign(v.mul(0.999).add(g.square().mul(0.001)));
  if (apart) m.realize(v);
  p.assign(p.sub(read(m).div(v.sqrt().add(1e-8)).mul(0.01)));
  return [p, m, v] as const;
}

describe('assigns read by one kernel at the element it writes', () => {
  it("are stored by that kernel: a parameter's update writes its moments too", () => {
    const { kernels } = scheduleOf(update('CPU'));
    expect(kernels).toHaveLength(1);
    expect(stores(kernels[0]!.ast)).toBe(3);
  });

  it('keep their own kernel where the reader reads other elements, or two kernels read them', () => {
    // the update reads m flipped: element i of p needs m at another element (v is still shared)
    const flipped = scheduleOf(update('CPU', (m) => m.flip([1]))).kernels;
    expect(flipped.map((k) => stores(k.ast))).toEqual([1, 2]);
    const [p, m, v] = update('CPU');
    // m is read by the update and by another kernel: its own kernel (v is still shared)
    const other = m.add(1).contiguous();
    const read2 = scheduleOf([p, m, v, other]).kernels;
    expect(read2.map((k) => stores(k.ast)).sort()).toEqual([1, 1, 2]);
  });

  for (const device of DEVICES)
    it(`give the values separate kernels give on ${device}`, () => {
      for (const read of [(m: Tensor) => m, (m: Tensor) => m.flip([1])]) {
        const shared = update(device, read);
        shared[0].realize(shared[1], shared[2]);
        const apart = update(device, read, true);
        apart[0].realize();
        expect(shared.map((t) => t.tolist())).toEqual(apart.map((t) => t.tolist()));
      }
    });

  it("leave Adam's step one kernel a parameter, beside its gradient's and the bias corrections'", () => {
    const w = new Tensor(values(32, 3), { device: 'CPU' }).reshape([4, 8]).requiresGrad_();
    w.realize();
    const opt = new Adam([w]);
    const step = () => {
      opt.zeroGrad();
      w.mul(new Tensor(values(32, 5), { device: 'CPU' }).reshape([4, 8]))
        .square()
        .sum()
        .backward();
      opt.step();
    };
    // (the first step's moments are zeros not yet in memory)
    step();
    const { launches } = recordLaunches(step);
    // the gradient, b1^t and b2^t, and one kernel writing the moments and the parameter
    expect(launches).toHaveLength(4);
  });
});
