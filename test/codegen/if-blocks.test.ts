// IF blocks: gated stores that share a gate run in one IF ... ENDIF with the work only they use, nested inside the
// loops their gate needs; every renderer runs them, and their CUDA C compiles with nvcc.
import { describe, expect, it, vi } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET, type Opt } from '../../src/codegen/opt/opts.ts';
import { dtypes } from '../../src/dtype.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context, prod } from '../../src/helpers.ts';
import { renderC, renderCUDA } from '../../src/renderer/c.ts';
import { renderJS } from '../../src/renderer/js.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { hasNvcc, nvccCompile } from '../renderer/nvcc.ts';

const gpu = targetOf(Device.get('SIMT'));

/** Negative values, so that a max that saw a padded 0 would be wrong. */
const negatives = (shape: number[]) =>
  new Tensor(
    Float32Array.from({ length: prod(shape) }, (_, i) => -1 - (i % 7)),
    { device: 'JS' },
  ).reshape(shape);
const ramp = (shape: number[]) =>
  Tensor.arange(prod(shape), undefined, undefined, { device: 'JS', dtype: dtypes.float32 }).reshape(shape);

interface Block {
  open: number;
  close: number;
  gate: UOp;
  /** The RANGEs open around the block, outermost first. */
  loops: UOp[];
}

/** The IF blocks of a LINEAR program, with the loops around each. */
function blocksOf(linear: UOp): Block[] {
  const blocks: Block[] = [];
  const loops: UOp[] = [];
  const open: Block[] = [];
  linear.src.forEach((u, i) => {
    if (u.op === Ops.RANGE) loops.push(u);
    if (u.op === Ops.END) loops.length -= u.src.length - 1;
    if (u.op === Ops.IF) open.push({ open: i, close: -1, gate: u.src[0]!, loops: [...loops] });
    if (u.op === Ops.ENDIF) blocks.push({ ...open.pop()!, close: i });
  });
  return blocks;
}

const storesIn = (linear: UOp, b: Block) =>
  linear.src.slice(b.open + 1, b.close).filter((u) => u.op === Ops.STORE);
const gatedStores = (linear: UOp) => linear.src.filter((u) => u.op === Ops.STORE && u.src.length === 3);

/** Whatever a block computes is used only inside it: the block closes before anything outside needs it. */
function expectClosed(linear: UOp, b: Block): void {
  const inside = new Set(linear.src.slice(b.open + 1, b.close));
  linear.src.forEach((u, i) => {
    if (i > b.open && i < b.close) return;
    for (const s of u.src) if (s.op !== Ops.STORE) expect(inside.has(s), `${Ops[u.op]} at ${i}`).toBe(false);
  });
}

/** t's one kernel lowered with opts (for `target`), its buffers filled from the tensors it reads. */
function lowered(t: Tensor, opts: Opt[], target = gpu) {
  const { kernels } = scheduleOf([t]);
  expect(kernels).toHaveLength(1);
  return { ...lowerKernel(kernels[0]!.ast, { target, opts }), bufs: kernels[0]!.bufs };
}

/** Runs a lowered kernel on a device; inputs are the given arrays, the output starts at 0. */
function runOn(device: string, k: ReturnType<typeof lowered>, inputs: Float32Array[]): number[] {
  const backend = Device.get(device);
  const render = backend.language() === 'SIMT' ? renderSIMT : backend.kind === 'JS' ? renderJS : renderC;
  const bufs = k.bufs.map((b, slot) => {
    const size = prod(b.shape as number[]);
    return new DeviceBuffer(backend, size, dtypes.float32).copyin(
      slot === 0 ? new Float32Array(size) : inputs[slot - 1]!,
    );
  });
  backend.compile(k.name, render(k.name, k.linear)).run(bufs);
  return Array.from(bufs[0]!.copyout() as Float32Array);
}

describe('IF blocks', () => {
  const groupReduce = () =>
    lowered(ramp([3, 64]).sum(1), [{ op: 'SPLIT', axis: 1, factor: 16, target: AxisType.GROUP_REDUCE }]);
  // PADTO 6 -> 8 then UPCAST 4: per iteration of the padded loop, two stores always happen, two only in range
  const padded = () =>
    lowered(
      negatives([6, 5]).max(1),
      [
        { op: 'PADTO', axis: 0, multiple: 4 },
        { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.UPCAST },
      ],
      CPU_TARGET,
    );
  // PADTO 6 -> 8 then LOCAL 4: the gate reads the workgroup and thread indices
  const paddedLocal = () =>
    lowered(negatives([6, 5]).max(1), [
      { op: 'PADTO', axis: 0, multiple: 4 },
      { op: 'SPLIT', axis: 0, factor: 4, target: AxisType.LOCAL },
    ]);

  it("hold a GROUP_REDUCE's thread-0 store after the BARRIER and the shares' loop, outside every loop", () => {
    const k = groupReduce();
    expect(gatedStores(k.linear)).toEqual([]);
    const [block, ...more] = blocksOf(k.linear);
    expect(more).toEqual([]);
    expect(block!.loops).toEqual([]);
    expect(block!.gate.toposort().some((u) => u.op === Ops.SPECIAL && u.arg === 'lidx0')).toBe(true);
    expect(storesIn(k.linear, block!)).toHaveLength(1);
    const barrier = k.linear.src.findIndex((u) => u.op === Ops.BARRIER);
    const lastEnd = k.linear.src.map((u) => u.op).lastIndexOf(Ops.END);
    expect(barrier).toBeLessThan(block!.open);
    expect(lastEnd).toBeLessThan(block!.open);
    // the result is read only by the thread that stores it
    expect(k.linear.src.slice(block!.open + 1, block!.close).map((u) => u.op)).toEqual([
      Ops.INDEX,
      Ops.LOAD,
      Ops.STORE,
    ]);
    expectClosed(k.linear, block!);
    expect(runOn('SIMT', k, [])).toEqual(ramp([3, 64]).sum(1).tolist());
  });

  it('group the stores under one gate inside the padded loop, with the work only they use', () => {
    const k = padded();
    expect(gatedStores(k.linear)).toEqual([]);
    const [block, ...more] = blocksOf(k.linear);
    expect(more).toEqual([]);
    // inside the padded loop (8 / 4 = 2 iterations), which the gate reads
    expect(block!.loops.map((r) => Number(r.src[0]!.constValue))).toEqual([2]);
    expect(block!.gate.toposort()).toContain(block!.loops[0]);
    expect(storesIn(k.linear, block!)).toHaveLength(2);
    expect(k.linear.src.slice(block!.open + 1, block!.close).some((u) => u.op === Ops.ADD)).toBe(true);
    expectClosed(k.linear, block!);
    const data = negatives([6, 5]);
    const expected = data.max(1).tolist();
    const input = [data.dataSync() as Float32Array];
    for (const device of ['JS', 'CPU', 'SIMT'])
      expect(runOn(device, padded(), input), device).toEqual(expected);
    expect(renderC(k.name, k.linear)).toMatch(/if \(alu\d+\) \{/);
    expect(renderJS(k.name, k.linear)).toMatch(/if \(alu\d+\) \{/);
  });

  it('gate on workgroup and thread indices after PADTO and LOCAL, on SIMT', () => {
    const k = paddedLocal();
    expect(gatedStores(k.linear)).toEqual([]);
    const blocks = blocksOf(k.linear);
    expect(blocks).toHaveLength(1);
    expect(blocks[0]!.gate.toposort().filter((u) => u.op === Ops.SPECIAL)).toHaveLength(2);
    const data = negatives([6, 5]);
    expect(runOn('SIMT', k, [data.dataSync() as Float32Array])).toEqual(data.max(1).tolist());
  });

  it('show at DEBUG=4 in the CUDA C a SIMT kernel reads as', () => {
    const lines: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((...args) => {
      lines.push(args.join(' '));
    });
    try {
      // a shape no other test realizes, so its kernels compile (and print) here
      const sum = (d: string) =>
        Tensor.arange(5 * 264, undefined, undefined, { device: d, dtype: dtypes.float32 })
          .reshape([5, 264])
          .sum(1);
      expect(Context.with({ DEBUG: 4 }, () => sum('SIMT').tolist())).toEqual(sum('JS').tolist());
    } finally {
      log.mockRestore();
    }
    const kernel = lines.find((l) => l.includes('__syncthreads();'));
    expect(kernel).toMatch(/__global__ void/);
    expect(kernel).toMatch(/if \(alu\d+\) \{\n\s+\w+ val\d+ = acc\d+;\n\s+data0\[gidx0\] = val\d+;\n\s+\}/);
  });

  it.skipIf(!hasNvcc)(
    'compile as CUDA C with nvcc',
    () => {
      const sources = [groupReduce(), padded(), paddedLocal()].map((k) => renderCUDA(k.name, k.linear));
      for (const s of sources) expect(s).toMatch(/if \(alu\d+\) \{/);
      nvccCompile(sources);
    },
    120_000,
  );
});
