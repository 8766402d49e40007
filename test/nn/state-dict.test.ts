// State dicts: dotted names, parameters and buffers, loading (round trip, copies, strict errors) and assign.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import {
  assign,
  BatchNorm,
  Conv2d,
  getBuffers,
  getParameters,
  getStateDict,
  Linear,
  loadStateDict,
  type StateDict,
} from '../../src/nn/index.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';
import { useDefaultDevice } from '../default-device.ts';
import { data } from '../tensor/reference.ts';

useDefaultDevice('JS');

class Net {
  layers = [new Conv2d(1, 2, 3), new BatchNorm(2)] as const;
  head = new Linear(8, 3, { bias: false });
  scale = 2; // not a tensor: skipped
  forward(x: Tensor): Tensor {
    return this.head.call(this.layers[1].call(this.layers[0].call(x)).flatten(1));
  }
}

describe('names', () => {
  it('walks fields and arrays into dotted names, with buffers', () => {
    const net = new Net();
    expect(Object.keys(getStateDict(net))).toEqual([
      'layers.0.weight',
      'layers.0.bias',
      'layers.1.weight',
      'layers.1.bias',
      'layers.1.runningMean',
      'layers.1.runningVar',
      'layers.1.numBatchesTracked',
      'head.weight',
    ]);
    expect(getParameters(net)).toHaveLength(5);
    expect(getBuffers(net)).toEqual([
      net.layers[1].runningMean,
      net.layers[1].runningVar,
      net.layers[1].numBatchesTracked,
    ]);
  });

  it('lists a shared tensor under each name but as one parameter, and survives cycles', () => {
    const lin = new Linear(2, 2);
    const model: Record<string, unknown> = { a: lin, b: [lin], extra: new Tensor([1.5]) };
    model.self = model;
    expect(Object.keys(getStateDict(model))).toEqual([
      'a.weight',
      'a.bias',
      'b.0.weight',
      'b.0.bias',
      'extra',
    ]);
    expect(getParameters(model)).toEqual([lin.weight, lin.bias]);
  });
});

describe('loadStateDict', () => {
  it('round-trips into copies: same outputs, own buffers, still trainable', () => {
    const [a, b] = [new Net(), new Net()];
    const x = Tensor.arange(2 * 16)
      .reshape([2, 1, 4, 4])
      .cast(dtypes.float32)
      .div(10);
    expect(data(a.forward(x))).not.toEqual(data(b.forward(x)));
    expect(loadStateDict(b, getStateDict(a))).toEqual({ missing: [], unexpected: [], mismatched: [] });
    expect(data(b.forward(x))).toEqual(data(a.forward(x)));
    expect(b.head.weight.uop.op).toBe(Ops.BUFFER);
    expect(b.head.weight.uop).not.toBe(a.head.weight.uop);
    expect(b.head.weight.requiresGrad).toBe(true);
    // two model tensors loaded from one dict tensor get buffers of their own
    const pair = { p: Tensor.zeros([3]).realize(), q: Tensor.zeros([3]).realize() };
    const one = new Tensor([1.5, 2, 3]);
    const buffers = [pair.p.uop, pair.q.uop];
    loadStateDict(pair, { p: one, q: one });
    expect(pair.p.uop).not.toBe(pair.q.uop);
    expect(data(pair.q)).toEqual([1.5, 2, 3]);
    // realized targets keep their buffers (assign), so a JIT that captured them reads the loaded values
    expect([pair.p.uop, pair.q.uop]).toEqual(buffers);
    // an unrealized target gets a buffer of its own, not the source's
    const lazy = { w: Tensor.ones([3]).mul(2) };
    loadStateDict(lazy, { w: one });
    expect(lazy.w.uop.op).toBe(Ops.BUFFER);
    expect(lazy.w.uop).not.toBe(one.uop);
    one.assign(Tensor.zeros([3])).realize();
    expect(data(lazy.w)).toEqual([1.5, 2, 3]);
  });

  it('strict: lists missing, unexpected and mismatched keys and loads nothing', () => {
    const net = new Net();
    const before = data(net.head.weight);
    const dict: StateDict = { ...getStateDict(new Net()), stray: Tensor.ones([1]) };
    delete dict['layers.0.bias'];
    dict['layers.1.weight'] = Tensor.ones([3]);
    dict['layers.1.bias'] = Tensor.zeros([2], { dtype: dtypes.float16 });
    let message = '';
    try {
      loadStateDict(net, dict);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain("missing key 'layers.0.bias'");
    expect(message).toContain("unexpected key 'stray'");
    expect(message).toContain("'layers.1.weight' has shape (3), the model's is (2)");
    expect(message).toContain("'layers.1.bias' has dtype float16, the model's is float32");
    expect(data(net.head.weight)).toEqual(before);
  });

  it('non-strict: loads what fits, casts dtypes and reports the rest', () => {
    const net = new Net();
    const oldBias = data(net.layers[0].bias!);
    const dict = {
      'layers.1.bias': new Tensor([0.5, -1], { dtype: dtypes.float16 }),
      'layers.1.weight': Tensor.ones([3]),
      stray: Tensor.ones([1]),
    };
    const report = loadStateDict(net, dict, { strict: false });
    expect(report.unexpected).toEqual(['stray']);
    expect(report.mismatched).toEqual(['layers.1.weight']);
    expect(report.missing).toContain('layers.0.bias');
    expect(net.layers[1].bias!.dtype).toBe(dtypes.float32);
    expect(data(net.layers[1].bias!)).toEqual([0.5, -1]);
    expect(data(net.layers[0].bias!)).toEqual(oldBias);
  });
});

describe('assign', () => {
  it('writes a value into a realized tensor in place, keeping its buffer', () => {
    const t = Tensor.zeros([2]).realize();
    const buffer = t.uop;
    assign(t, new Tensor([1.5, 2]));
    expect(data(t)).toEqual([1.5, 2]);
    expect(t.uop).toBe(buffer);
    expect(() => assign(t, Tensor.zeros([3]))).toThrow(
      /assign: the value is \(3\) float32 on JS, the tensor \(2\) float32 on JS/,
    );
  });
});
