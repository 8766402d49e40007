// fn (the spec's @function): results, graph structure, kernel reuse, gradients and captured tensors.
import { describe, expect, it, vi } from 'vitest';
import { realize } from '../../src/engine/realize.ts';
import { Device } from '../../src/runtime/device.ts';
import { fn, Tensor } from '../../src/tensor/index.ts';
import { type ArgOf, Ops } from '../../src/uop/ops.ts';
import type { UOp } from '../../src/uop/uop.ts';
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

for (const device of ['JS', 'CPU'])
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
