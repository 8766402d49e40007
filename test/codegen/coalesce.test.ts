// Coalesced GPU reads, counted on the SIMT emulator: the distinct 32-byte sectors each warp's global load touches
// (countSectors runs the kernels sampled: a few workgroups, each loop twice).
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { type Opt, printOpts } from '../../src/codegen/opt/opts.ts';
import { targetOf } from '../../src/engine/compile.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderSIMT } from '../../src/renderer/simt.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { Device } from '../../src/runtime/device.ts';
import { countSectors, type LoadSectors } from '../../src/runtime/simt.ts';
import type { Kernel } from '../../src/schedule/rangeify.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { AxisType } from '../../src/uop/ops.ts';

const device = 'SIMT';
function perKernel(loads: readonly LoadSectors[]): LoadSectors[][] {
  const by = new Map<string, LoadSectors[]>();
  for (const l of loads) by.set(l.kernel, [...(by.get(l.kernel) ?? []), l]);
  return [...by.values()];
}

/** A kernel's output on SIMT with the given opts, its inputs small integers: every order of the sums is exact. */
function runWith(k: Kernel, opts: readonly Opt[]): number[] {
  const { name, linear } = lowerKernel(k.ast, { opts, target: targetOf(Device.get(device)) });
  const backend = Device.get(device);
  const bufs = k.bufs.map((b, slot) => {
    const n = (b.shape as number[]).reduce((a, d) => a * d, 1);
    const data = Float32Array.from({ length: n }, (_, i) => (slot === 0 ? 0 : ((i * 7 + slot) % 11) - 5));
    return new DeviceBuffer(backend, n, b.dtype).copyin(data);
  });
  backend.compile(name, renderSIMT(name, linear)).run(bufs);
  return Array.from(bufs[0]!.copyout() as Float32Array);
}

describe('sector counts on SIMT', () => {
  it('a contiguous float4 copy reads 16 sectors a warp, all used; a column read 32 sectors, an eighth used', () => {
    const x = new Tensor(new Float32Array(64 * 64), { device }).reshape([64, 64]);
    const [row] = countSectors(() => x.add(1).realize(), { groups: 2, trips: 2 });
    expect(row!.sectors / row!.requests).toBe(16);
    expect(row!.bytes / (32 * row!.sectors)).toBe(1);
    // a transposed copy: neighbouring threads write neighbouring elements and read 64 floats apart
    const cols = countSectors(() => x.transpose().contiguous().realize(), { groups: 2, trips: 2 });
    expect(cols.some((l) => l.sectors / l.requests === 32 && l.bytes / (32 * l.sectors) === 1 / 8)).toBe(
      true,
    );
  });

  it("beautiful_mnist's 5x5 conv weight gradient reads coalesced: a warp shares the reduce along x", () => {
    const x = Tensor.empty([512, 32, 24, 24], { device });
    const w = Tensor.empty([32, 32, 5, 5], { device }).requiresGrad_();
    const y = x.conv2d(w);
    y.backward(Tensor.empty(y.shape as number[], { device }));
    const loads = countSectors(() => w.grad!.realize(), { groups: 2, trips: 2 });
    // the kernel of the products (two loads; the other sums the partial results)
    const products = perKernel(loads).reduce((a, b) => (b.length > a.length ? b : a));
    expect(products.length).toBeGreaterThanOrEqual(2);
    for (const l of products) {
      // a thread per element along x: 20 consecutive floats (3 sectors), the next output's 20 (two runs at most),
      // a run per lane where a thread's 4 x 4 tile reads 4 channels at once
      expect(l.sectors / l.requests).toBeLessThanOrEqual(6 * 4);
      expect(l.bytes / (32 * l.sectors)).toBeGreaterThan(0.5);
    }
  });

  it('a conv weight gradient behind a bias and relu reads coalesced: a per-channel load before the loop does not count', () => {
    // the bias, read once a thread before the reduce loops, is contiguous along the output axis ci: threads
    // along ci read the input 576 floats apart (32 sectors a request)
    const x0 = Tensor.empty([512, 32, 24, 24], { device });
    const b = Tensor.empty([32], { device });
    const w = Tensor.empty([32, 32, 5, 5], { device }).requiresGrad_();
    const y = x0
      .add(b.reshape([1, 32, 1, 1]))
      .relu()
      .conv2d(w);
    y.backward(Tensor.empty(y.shape as number[], { device }));
    const loads = countSectors(() => w.grad!.realize(), { groups: 2, trips: 2 });
    const products = perKernel(loads).reduce((a, b) => (b.length > a.length ? b : a));
    expect(products.length).toBeGreaterThanOrEqual(3);
    // at least half of each sector's bytes used, or one sector a request (the bias, the same for the warp)
    for (const l of products)
      expect(l.sectors === l.requests || l.bytes / (32 * l.sectors) >= 0.5, `${l.kernel}:${l.pc}`).toBe(true);
  });

  it('a conv weight gradient behind a bias and relu, its reduce shared by the threads, equals NOOPT', () => {
    Tensor.manualSeed(1);
    const x0 = Tensor.randn([2, 8, 12, 12], { device }).realize();
    const b = Tensor.randn([8], { device }).realize();
    const dy = Tensor.randn([2, 8, 10, 10], { device }).realize();
    const grad = () => {
      Tensor.manualSeed(2);
      const wg = Tensor.randn([8, 8, 3, 3], { device }).realize().requiresGrad_();
      x0.add(b.reshape([1, 8, 1, 1]))
        .relu()
        .conv2d(wg)
        .backward(dy);
      return wg.grad!.tolist() as number[][][][];
    };
    const want = Context.with({ NOOPT: 1 }, grad).flat(3);
    const got = grad().flat(3);
    for (const [i, v] of got.entries()) expect(v).toBeCloseTo(want[i]!, 3);
  });

  it("the 5x5 conv's input gradient (a transposed conv) reads coalesced", () => {
    const x = Tensor.empty([512, 32, 24, 24], { device }).requiresGrad_();
    const w = Tensor.empty([32, 32, 5, 5], { device });
    const y = x.conv2d(w);
    y.backward(Tensor.empty(y.shape as number[], { device }));
    const loads = countSectors(() => x.grad!.realize(), { groups: 2, trips: 2 });
    expect(loads.length).toBeGreaterThan(0);
    // each load uses half the bytes of the sectors it touches or touches a few (as a sum over windows stored
    // windows last, its threads along x read 25 floats apart: 27.5 sectors a request, an eighth of them used)
    for (const l of loads)
      expect(l.bytes / (32 * l.sectors) >= 0.5 || l.sectors / l.requests <= 8, `${l.kernel}:${l.pc}`).toBe(
        true,
      );
  });

  it('a conv weight gradient over a batch gathered from a training set reads coalesced (the gather laid out as read)', () => {
    // the one-hot sum that gathers summed into (ci, h, w, b): realized so, the batch innermost, the weight
    // gradient's warp read it 64 floats apart (32 sectors a request, an eighth used)
    const samples = Tensor.randint([64], 0, 1000, { device });
    const x = Tensor.empty([1000, 1, 28, 28], { device }).indexSelect(0, samples);
    const w = Tensor.empty([8, 1, 5, 5], { device }).requiresGrad_();
    const y = x.conv2d(w);
    y.backward(Tensor.empty(y.shape as number[], { device }));
    const loads = countSectors(() => w.grad!.realize(), { groups: 2, trips: 2 });
    const products = perKernel(loads)
      .filter((k) => k[0]!.kernel.startsWith('r_'))
      .reduce((a, b) => (b.length > a.length ? b : a));
    expect(products.length).toBeGreaterThanOrEqual(2);
    for (const l of products) expect(l.bytes / (32 * l.sectors), `${l.kernel}:${l.pc}`).toBeGreaterThan(0.5);
  });

  it("beautiful_mnist's last conv weight gradient (a 6 x 6 output) splits, shares x among threads, tiles 4 x 4 x 3", () => {
    // no output axis reads contiguously and the reduce's x is 6 long: a thread per result read 64 floats apart
    const x = Tensor.empty([512, 64, 8, 8], { device });
    const w = Tensor.empty([64, 64, 3, 3], { device }).requiresGrad_();
    x.conv2d(w).backward(Tensor.empty([512, 64, 6, 6], { device }));
    const lowered = scheduleOf([w.grad!]).kernels.map((k) =>
      lowerKernel(k.ast, { target: targetOf(Device.get(device)) }),
    );
    // the products in parts, then the sum of the parts
    expect(lowered).toHaveLength(2);
    const opts = printOpts(lowered[0]!.opts);
    expect(opts).toContain(',6,GROUP_REDUCE)');
    expect(opts.match(/,4,UPCAST\)/g)).toHaveLength(2);
    // kx whole: each loaded gradient serves the 3 window positions
    expect(opts).toContain(',3,UPCAST)');
  });

  it("a conv weight gradient over a relu'd input tiles 8 output channels x 2 input channels: each relu serves 8", () => {
    // beautiful_mnist's 5x5 one: the activation (relu(x + b), computed) read by every output channel, the
    // gradient (stored) by every input channel; 4 x 4 tiles computed 20 relus a step for 80 products, 8 x 2 do 10
    const grad = (b: number, ci: number, h: number, co: number) => {
      const x = Tensor.empty([b, ci, h, h], { device }).add(Tensor.empty([1, ci, 1, 1], { device }));
      const w = Tensor.empty([co, ci, 5, 5], { device }).requiresGrad_();
      const y = x.relu().conv2d(w);
      y.backward(Tensor.empty(y.shape as number[], { device }));
      return scheduleOf([w.grad!]).kernels;
    };
    const opts = grad(512, 32, 24, 32).map((k) =>
      printOpts(lowerKernel(k.ast, { target: targetOf(Device.get(device)) }).opts),
    );
    const products = opts.find((o) => o.includes(',GROUP_REDUCE)'));
    expect(products, opts.join('\n')).toBeDefined();
    for (const tile of [',8,UPCAST)', ',2,UPCAST)', ',5,UPCAST)']) expect(products).toContain(tile);
    // the same tiles on a kernel small enough to run: (co 16, ci 8, ky 5, kx 5, y 8, x 8), x shared by 8 threads
    const [k] = grad(1, 8, 12, 16);
    const upcast = (axis: number, factor: number): Opt => ({
      op: 'SPLIT',
      axis,
      factor,
      target: AxisType.UPCAST,
    });
    const tiled: Opt[] = [
      { op: 'SPLIT', axis: 5, factor: 8, target: AxisType.GROUP_REDUCE },
      upcast(3, 5),
      upcast(1, 2),
      upcast(0, 8),
    ];
    const want = runWith(k!, []);
    expect(want.some((v) => v !== 0)).toBe(true);
    expect(runWith(k!, tiled)).toEqual(want);
  });

  it("beautiful_mnist's last conv takes its columns and rows whole as threads: a warp shares each weight", () => {
    // 6 x 6 outputs, float2 lanes along x: 3 columns and 6 rows, which no LOCAL factor divides; threads along
    // the output channels read their own weights 576 floats apart (16 sectors a request; 6 at most now)
    const x = Tensor.empty([512, 64, 8, 8], { device }).add(Tensor.empty([1, 64, 1, 1], { device }));
    const y = x.relu().conv2d(Tensor.empty([64, 64, 3, 3], { device }));
    const [k] = scheduleOf([y]).kernels;
    const opts = lowerKernel(k!.ast, { target: targetOf(Device.get(device)) }).opts;
    expect(opts, printOpts(opts)).toContainEqual({ op: 'SPLIT', axis: 4, factor: 3, target: AxisType.LOCAL });
    const loads = countSectors(() => y.realize(), { groups: 2, trips: 2 });
    expect(loads.length).toBeGreaterThanOrEqual(3);
    for (const l of loads) expect(l.sectors / l.requests, `${l.kernel}:${l.pc}`).toBeLessThanOrEqual(8);
  });

  it('a conv weight gradient behind BatchNorm and relu tiles its window kx whole: each computed gradient serves 5', () => {
    // beautiful_mnist's 5x5 one: the gradient (math on loads) read by every window position; the activation
    // (a load) by every output channel
    const x = Tensor.empty([512, 32, 24, 24], { device });
    const w = Tensor.empty([32, 32, 5, 5], { device }).requiresGrad_();
    const y = x.conv2d(w);
    const [mean, scale] = [Tensor.empty([1, 32, 1, 1], { device }), Tensor.empty([1, 32, 1, 1], { device })];
    y.sub(mean)
      .mul(scale)
      .relu()
      .backward(Tensor.empty(y.shape as number[], { device }));
    // the conv's output (which the gradient reads), the products in parts, the sum of the parts
    const opts = scheduleOf([w.grad!]).kernels.map((k) =>
      printOpts(lowerKernel(k.ast, { target: targetOf(Device.get(device)) }).opts),
    );
    const products = opts.find((o) => o.includes(',GROUP_REDUCE)'));
    expect(products, opts.join('\n')).toBeDefined();
    expect(products!.match(/,4,UPCAST\)/g)).toHaveLength(2);
    expect(products).toContain(',5,UPCAST)');
  });

  it("a conv over a relu'd activation tiles 4 output channels a thread before its workgroups", () => {
    // beautiful_mnist's second conv: 32 output channels as threads each computed the relu of every input again
    const x = Tensor.empty([512, 32, 24, 24], { device })
      .add(Tensor.empty([1, 32, 1, 1], { device }))
      .relu();
    const y = x.conv2d(Tensor.empty([32, 32, 5, 5], { device }));
    const [k] = scheduleOf([y]).kernels;
    const opts = lowerKernel(k!.ast, { target: targetOf(Device.get(device)) }).opts;
    // the channel axis (1) split by 4 as UPCAST before any LOCAL split
    const tile = opts.findIndex(
      (o) => o.op === 'SPLIT' && o.axis === 1 && o.factor === 4 && o.target === AxisType.UPCAST,
    );
    expect(tile, printOpts(opts)).toBeGreaterThanOrEqual(0);
    expect(opts.findIndex((o) => o.op === 'SPLIT' && o.target === AxisType.LOCAL)).toBeGreaterThan(tile);
    // float4 lanes along x and 4 channels leave room for 2 rows of y, not 4: each weight then serves 8 outputs
    expect(opts, printOpts(opts)).toContainEqual({
      op: 'SPLIT',
      axis: 2,
      factor: 2,
      target: AxisType.UPCAST,
    });
  });

  it("a conv over a relu'd activation computes with its 4 x 2 x 4 tiles what it computes unoptimized", () => {
    // the opts the heuristics give beautiful_mnist's second conv (the test above), on a conv small enough to run
    const x = Tensor.empty([2, 2, 12, 12], { device })
      .add(Tensor.empty([1, 2, 1, 1], { device }))
      .relu();
    const [k] = scheduleOf([x.conv2d(Tensor.empty([32, 2, 5, 5], { device }))]).kernels;
    const upcast = (axis: number, factor: number): Opt => ({
      op: 'SPLIT',
      axis,
      factor,
      target: AxisType.UPCAST,
    });
    const local = (axis: number, factor: number): Opt => ({
      op: 'SPLIT',
      axis,
      factor,
      target: AxisType.LOCAL,
    });
    const tiled = [upcast(3, 4), upcast(2, 2), upcast(1, 4), local(3, 2), local(1, 8), local(0, 2)];
    const want = runWith(k!, []);
    expect(want.some((v) => v !== 0)).toBe(true);
    expect(runWith(k!, tiled)).toEqual(want);
  });

  it("a conv's input gradient behind relu is a transposed conv: 4 input channels by 4 positions a thread", () => {
    // conv2d's own gradient rule: the relu'd output gradient, padded, convolved with the flipped weight (before
    // it, every window's gradient was stored and summed where windows overlap)
    const upcastsOf = (b: number, c: number, h: number, k: number) => {
      const x = Tensor.empty([b, c, h, h], { device }).requiresGrad_();
      const y = x.conv2d(Tensor.empty([c, c, k, k], { device }));
      y.relu().backward(Tensor.empty(y.shape as number[], { device }));
      const kernels = scheduleOf([x.grad!]).kernels;
      expect(kernels.length).toBe(2); // the forward conv for the relu's mask, the transposed conv
      const opts = lowerKernel(kernels.at(-1)!.ast, { target: targetOf(Device.get(device)) }).opts;
      // every UPCAST split before the first LOCAL one
      const kinds = opts.flatMap((o) => (o.op === 'SPLIT' ? [o.target] : []));
      expect(kinds.lastIndexOf(AxisType.UPCAST)).toBeLessThan(kinds.indexOf(AxisType.LOCAL));
      return opts.flatMap((o) => (o.op === 'SPLIT' && o.target === AxisType.UPCAST ? [o.factor] : []));
    };
    expect(upcastsOf(512, 64, 8, 3)).toEqual([4, 4]); // beautiful_mnist's last conv
    expect(upcastsOf(512, 32, 24, 5)).toEqual([4, 4]); // its second
  });

  it('a 3x3 conv weight gradient with x shared by 6 threads equals NOOPT', () => {
    Tensor.manualSeed(3);
    const x = Tensor.randn([4, 16, 8, 8], { device }).realize();
    const dy = Tensor.randn([4, 16, 6, 6], { device }).realize();
    const grad = () => {
      const w = Tensor.zeros([16, 16, 3, 3], { device }).contiguous().realize().requiresGrad_();
      x.conv2d(w).backward(dy);
      return w.grad!;
    };
    const k = scheduleOf([grad()]).kernels.at(-1)!;
    expect(printOpts(lowerKernel(k.ast, { target: targetOf(Device.get(device)) }).opts)).toContain(
      ',6,GROUP_REDUCE)',
    );
    const want = Context.with({ NOOPT: 1 }, () => grad().tolist() as number[][][][]).flat(3);
    const got = (grad().tolist() as number[][][][]).flat(3);
    for (const [i, v] of got.entries()) expect(v).toBeCloseTo(want[i]!, 3);
  });
});
