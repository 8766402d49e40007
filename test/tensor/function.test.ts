// fn (the spec's @function): results, graph structure, kernel reuse, gradients and captured tensors.
import { describe, expect, it, vi } from 'vitest';
import { realize, recordLaunches } from '../../src/engine/realize.ts';
import { Device } from '../../src/runtime/device.ts';
import { fn, fnMethod, Tensor } from '../../src/tensor/index.ts';
import { type ArgOf, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
import { DEVICES } from '../devices.ts';
import { close, data, values } from './reference.ts';

const T = (shape: number[], seed: number, device = 'JS') =>
  new Tensor(
    new Float32Array(
      values(
        shape.reduce((a, b) => a * b, 1),
        seed,
      ),
    ),
    { device },
  ).reshape(shape);

const affine = (x: Tensor, w: Tensor, b: Tensor) => x.matmul(w).add(b).relu();

for (const device of DEVICES)
  describe(`fn on ${device}`, () => {
    it('gives the unwrapped function’s results', () => {
      const [x, w, b] = [T([3, 4], 1, device), T([4, 5], 2, device), T([5], 3, device)];
      const y = fn(affine)(x, w, b);
      expect(y.shape).toEqual([3, 5]);
      expect(y.device).toBe(device);
      close(data(y), data(affine(x, w, b)));
    });

    it('returns one tensor per element of a returned array', () => {
      const [x, y] = [T([2, 3], 4, device), T([2, 3], 5, device)];
      const both = (a: Tensor, b: Tensor) => [a.add(b), a.mul(b).sum(1)];
      const got = fn(both)(x, y);
      const want = both(x, y);
      expect(got.map((t) => t.shape)).toEqual([[2, 3], [2]]);
      realize(got);
      for (const [i, t] of got.entries()) close(data(t), data(want[i]!));
    });
  });

/** The FUNCTION under a function output. */
const callOf = (t: Tensor): UOp => {
  expect(t.uop.op).toBe(Ops.GETTUPLE);
  return t.uop.src[0]!;
};
const slot = (u: UOp) => (u.arg as ArgOf<Ops.PARAM>).slot;

describe('fn graphs', () => {
  it('builds GETTUPLE(FUNCTION(TUPLE(body), inputs...)) over deduplicated inputs, PARAMs in order', () => {
    const [x, w] = [T([2, 2], 6), T([2, 2], 7)];
    // inputs are found in arrays and plain objects; non-tensor arguments pass through
    const f = fn((a: Tensor, opts: { pair: Tensor[]; scale: number }) =>
      a.mul(opts.pair[0]!).add(opts.pair[1]!).mul(opts.scale),
    );
    const y = f(x, { pair: [w, x], scale: 3 });
    const call = callOf(y);
    expect(call.op).toBe(Ops.FUNCTION);
    expect(call.src.slice(1)).toEqual([x.uop, w.uop]);
    const body = call.src[0]!;
    expect(body.op).toBe(Ops.TUPLE);
    expect(body.src).toHaveLength(1);
    const params = body.toposort().filter((u) => u.op === Ops.PARAM);
    expect(params.map(slot).sort()).toEqual([0, 1]);
    for (const p of params) expect(p.shape).toEqual([2, 2]);
    expect(body.toposort().some((u) => u.op === Ops.BUFFER)).toBe(false);
    expect(y.uop.arg).toBe(0);
    close(data(y), data(x.mul(w).add(x).mul(3)));
  });

  it('gives a tuple of GETTUPLEs of one FUNCTION for an array result', () => {
    const x = T([3], 8);
    const [a, b] = fn((t: Tensor) => [t.exp(), t.neg()])(x);
    expect(callOf(a!)).toBe(callOf(b!));
    expect([a!.uop.arg, b!.uop.arg]).toEqual([0, 1]);
  });

  it('calls a function inside another', () => {
    const inner = fn((a: Tensor, b: Tensor) => a.sub(b));
    const outer = fn((a: Tensor, b: Tensor) => inner(b, a).mul(a));
    const [x, y] = [T([4], 9), T([4], 10)];
    close(data(outer(x, y)), data(y.sub(x).mul(x)));
  });

  it('reuses the compiled kernels when called again with other tensors of the same shapes', () => {
    const f = fn((a: Tensor, b: Tensor) => a.mul(b).sum(0).sqrt());
    close(
      data(f(T([5, 3], 11), T([5, 3], 12).abs())),
      data(
        T([5, 3], 11)
          .mul(T([5, 3], 12).abs())
          .sum(0)
          .sqrt(),
      ),
    );
    const compile = vi.spyOn(Device.get('JS'), 'compile');
    try {
      const [x, y] = [T([5, 3], 13), T([5, 3], 14).abs()];
      const got = data(f(x, y));
      expect(compile).not.toHaveBeenCalled();
      close(got, data(x.mul(y).sum(0).sqrt()));
    } finally {
      compile.mockRestore();
    }
  });

  it('errors on results that are not tensors', () => {
    const x = T([2], 15);
    expect(() => fn((_: Tensor) => 3 as unknown as Tensor)(x)).toThrow(
      /must return a Tensor or an array of Tensors, got number/,
    );
    expect(() => fn((a: Tensor) => [a, 'no'] as unknown as Tensor[])(x)).toThrow(/got string at index 1/);
    expect(() => fn((_: Tensor) => [] as Tensor[])(x)).toThrow(/got an empty array/);
  });
});

describe('fn gradients', () => {
  it('match the unwrapped function’s, for inputs and for a function output', () => {
    const [x, w, b] = [T([3, 4], 16), T([4, 5], 17), T([5], 18)];
    const wrapped = fn((x: Tensor, w: Tensor, b: Tensor) => [affine(x, w, b), x.exp()]);
    const [y, e] = wrapped(x, w, b);
    const loss = y!.sum().add(e!.mul(y!.sum()).sum());
    const want = affine(x, w, b);
    const wantLoss = want.sum().add(x.exp().mul(want.sum()).sum());
    const got = Tensor.gradient(loss, [x, w, b, y!]);
    const expected = Tensor.gradient(wantLoss, [x, w, b, want]);
    for (const [i, g] of got.entries()) close(data(g), data(expected[i]!));
  });

  it('fill .grad through backward()', () => {
    const w = new Tensor(new Float32Array(values(6, 19)), { requiresGrad: true, device: 'JS' });
    const x = T([6], 20);
    fn((a: Tensor, b: Tensor) => a.mul(b).square())(w, x)
      .sum()
      .backward();
    close(data(w.grad!), data(w.mul(x).mul(x).mul(2)));
  });
});

describe('fn captured tensors', () => {
  const outside = T([3], 21);
  const readsOutside = (a: Tensor) => a.add(outside);

  it('are an error that says to pass them as arguments', () => {
    expect(() => fn(readsOutside)(T([3], 22))).toThrow(
      /reads 1 tensor buffer\(s\) it was not given as arguments \(shapes \(3,\)\).*pass the tensor as an argument, or allow this with fn\(f, \{ allowCaptured: true \}\)/,
    );
  });

  it('with allowCaptured, stay in the body, their buffers passed as extra arguments', () => {
    const x = T([3], 23);
    const y = fn(readsOutside, { allowCaptured: true })(x);
    const call = callOf(y);
    expect(call.src.length).toBe(3);
    expect(call.src[2]!.op).toBe(Ops.BUFFER);
    expect(call.src[0]!.toposort().some((u) => u.op === Ops.BUFFER)).toBe(false);
    close(data(y), data(x.add(outside)));
  });
});

/** How many kernels realizing these tensors launches. */
const launches = (...ts: Tensor[]): number => recordLaunches(() => realize(ts)).launches.length;

for (const device of DEVICES)
  describe(`fn with compiled: true on ${device}`, () => {
    it('gives the FUNCTION’s results, for one result and for several', () => {
      const [x, w, b] = [T([3, 4], 24, device), T([4, 5], 25, device), T([5], 26, device)];
      const y = fn(affine, { compiled: true })(x, w, b);
      expect(callOf(y).op).toBe(Ops.CALL);
      expect(y.shape).toEqual([3, 5]);
      close(data(y), data(fn(affine)(x, w, b)));
      const both = (a: Tensor, c: Tensor) => [a.add(c), a.mul(c).sum(1)];
      const [p, q] = [T([2, 3], 27, device), T([2, 3], 28, device)];
      const got = fn(both, { compiled: true })(p, q);
      const want = fn(both)(p, q);
      realize(got);
      for (const [i, t] of got.entries()) close(data(t), data(want[i]!));
    });

    it('compiles nothing new on a second call with other tensors of the same shapes', () => {
      const f = fn((a: Tensor, c: Tensor) => a.mul(c).sum(0).exp(), { compiled: true });
      // unrealized arguments and a caller graph around the call, realized the first time
      const caller = (a: Tensor, c: Tensor) => f(a.add(1), c).mul(2);
      close(
        data(caller(T([4, 3], 29, device), T([4, 3], 30, device))),
        data(
          T([4, 3], 29, device)
            .add(1)
            .mul(T([4, 3], 30, device))
            .sum(0)
            .exp()
            .mul(2),
        ),
      );
      const compile = vi.spyOn(Device.get(device), 'compile');
      try {
        const [x, y] = [T([4, 3], 31, device), T([4, 3], 32, device)];
        const got = data(caller(x, y));
        expect(compile).not.toHaveBeenCalled();
        close(got, data(x.add(1).mul(y).sum(0).exp().mul(2)));
      } finally {
        compile.mockRestore();
      }
    });
  });

describe('fn with compiled: true', () => {
  it('runs the body’s kernels apart from the caller’s, which read their results', () => {
    const body = (a: Tensor) => a.mul(3);
    const x = T([6], 33);
    // inlined, the elementwise body fuses with the caller's elementwise ops into one kernel
    expect(launches(fn(body)(x.add(1)).sub(2))).toBe(1);
    // compiled: the argument, the body and the caller each get their own kernel
    const y = fn(body, { compiled: true })(x.add(1)).sub(2);
    expect(launches(y)).toBe(3);
    close(data(y), data(x.add(1).mul(3).sub(2)));
  });

  it('realizes a call once for all its results', () => {
    const [a, b] = fn((t: Tensor) => [t.exp(), t.neg()], { compiled: true })(T([5], 34));
    expect(launches(a!.add(b!))).toBeGreaterThan(0);
    // both results' tensors still hold the call, whose buffers are remembered
    expect(launches(a!, b!)).toBe(0);
  });

  it('inlines calls traced inside another fn into its body', () => {
    const inner = fn((a: Tensor, c: Tensor) => a.sub(c), { compiled: true });
    const outer = fn((a: Tensor, c: Tensor) => inner(c, a).mul(a), { compiled: true });
    const [x, y] = [T([4], 35), T([4], 36)];
    const z = outer(x, y);
    expect(
      callOf(z)
        .src[0]!.toposort()
        .some((u) => u.op === Ops.CALL),
    ).toBe(false);
    close(data(z), data(y.sub(x).mul(x)));
  });

  it('lets gradients flow, equal to the FUNCTION’s', () => {
    const [x, w, b] = [T([3, 4], 37), T([4, 5], 38), T([5], 39)];
    const loss = (f: typeof affine) => f(x, w, b).square().sum();
    const got = Tensor.gradient(loss(fn(affine, { compiled: true })), [x, w, b]);
    const want = Tensor.gradient(loss(fn(affine)), [x, w, b]);
    for (const [i, g] of got.entries()) close(data(g), data(want[i]!));
  });
});

// Vitest 4 transforms with oxc (Vite 8), which does not lower standard decorators, so these tests apply
// fnMethod as the runtime applies `@fnMethod` (tsc and tsx accept the decorator syntax itself).
const context = {} as never;

describe('fnMethod', () => {
  class Layer {
    readonly calls: number[] = [];
    constructor(readonly w: Tensor) {}
    scaled(x: Tensor, k: Tensor): Tensor {
      return x.mul(k);
    }
    forward(x: Tensor): Tensor {
      this.calls.push(x.shape[0]!);
      return this.scaled(x, this.w).add(1);
    }
  }
  Layer.prototype.scaled = fnMethod(Layer.prototype.scaled, context);
  Layer.prototype.forward = fnMethod({ allowCaptured: true, compiled: true })(
    Layer.prototype.forward,
    context,
  );

  it('captures a method like fn, with this bound per call', () => {
    const layer = new Layer(T([4], 40));
    const x = T([4], 41);
    const y = layer.scaled(x, layer.w);
    expect(callOf(y).op).toBe(Ops.FUNCTION);
    close(data(y), data(x.mul(layer.w)));
    const z = layer.forward(x);
    expect(callOf(z).op).toBe(Ops.CALL);
    // the weight read through this is a captured argument after x
    expect(callOf(z).src.slice(1)).toEqual([x.uop, layer.w.uop]);
    expect(layer.calls).toEqual([4]);
    close(data(z), data(x.mul(layer.w).add(1)));
  });

  it('rejects tensors of this without allowCaptured', () => {
    const bad = { w: T([2], 42) };
    const forward = fnMethod(function (this: typeof bad, x: Tensor): Tensor {
      return x.add(this.w);
    }, context);
    expect(() => forward.call(bad, T([2], 43))).toThrow(/allowCaptured/);
  });
});
