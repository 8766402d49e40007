// Mistakes throw before anything runs, naming the op, the operands and what would be valid.
import { describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';

const t = (shape: number[], device = 'JS') =>
  new Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)), { device }).reshape(shape);

describe('errors', () => {
  it('an incompatible reshape names both shapes and the element counts', () => {
    expect(() => t([2, 3]).reshape([4, 2])).toThrow(
      /RESHAPE: cannot reshape \(2, 3\) to \(4, 2\): 6 elements vs 8/,
    );
    expect(() => t([2, 3]).reshape([-1, 4])).toThrow(/reshape: cannot infer -1 in \(-1, 4\) for 6 elements/);
  });
  it('a reshape past 2^53 elements is refused: its offsets would not be exact numbers', () => {
    const huge = Tensor.full([2 ** 27, 2 ** 27], 1, { device: 'JS' }); // a broadcast constant: no memory
    expect(() => huge.reshape([2 ** 54])).toThrow(
      /^reshape: shape \(18014398509481984\) needs non-negative integer sizes \(below 2\^53, so that offsets are exact\)/,
    );
    expect(() => huge.reshape([2 ** 27, 2 ** 26, 2])).toThrow(/RESHAPE: .* past 2\^53/);
    expect(huge.sum(1).shape).toEqual([2 ** 27]); // views without a reshape are fine
  });
  it('an axis out of range (or not an integer) names the shape and the valid axes', () => {
    expect(() => t([2, 3]).sum(5)).toThrow(
      /^sum: axis 5 is out of range for shape \(2, 3\): valid axes are -2\.\.1$/,
    );
    expect(() => t([2, 3]).max(0.5)).toThrow(/^max: axis 0\.5 is out of range/);
    expect(() => t([2, 3]).unsqueeze(-4)).toThrow(/valid axes are -3\.\.2$/);
  });
  it('matmul with unequal inner sizes names the shapes', () => {
    expect(() => t([2, 3]).matmul(t([4, 5]))).toThrow(/matmul: inner sizes differ: \(2, 3\) @ \(4, 5\)/);
  });
  it('broadcasting unequal axes names the shapes and the axis', () => {
    expect(() => t([2, 3]).add(t([4, 3]))).toThrow(
      /add: cannot broadcast shapes \(2, 3\) and \(4, 3\): axis -2/,
    );
  });
  it('an unknown device lists the valid ones', () => {
    expect(() => new Tensor([1], { device: 'TPU' })).toThrow(/TPU.*(CPU|JS|NULL)/s);
  });
  it('operands on different devices are refused', () => {
    expect(() => t([2], 'JS').add(t([2], 'CPU'))).toThrow(/add: operands are on JS and CPU/);
  });
  it('reading data of a NULL-device tensor says the NULL device holds none', () => {
    expect(() => t([2], 'NULL').add(1).dataSync()).toThrow(/NULL/);
  });
  it('integer-only and float-only ops name the op and the dtype', () => {
    expect(() =>
      t([2])
        .cast(dtypes.float32)
        .uop.mod(t([2]).uop),
    ).toThrow(/MOD: needs integer/);
    expect(() => t([2]).axis(3)).toThrow(/axis 3 is out of range/);
  });
  it('a ragged nested array is refused with the expected shape', () => {
    expect(() => new Tensor([[1, 2], [3]])).toThrow(/ragged nested array/);
  });
});

describe('requiresGrad', () => {
  it('is refused on an integer tensor, whose gradient would be truncated', () => {
    expect(() => new Tensor([[1, 2, 3]], { requiresGrad: true })).toThrow(
      /requiresGrad: gradients need a float tensor, this one is int32/,
    );
    expect(
      new Tensor([[1, 2, 3]], { requiresGrad: true, dtype: dtypes.float32, device: 'JS' }).requiresGrad,
    ).toBe(true);
  });
});

describe('bad inputs name the public op, the value and what is valid (issue 22 point 7)', () => {
  it('elements that are not numbers, booleans or bigints', () => {
    expect(() => new Tensor(['a', 'b'] as never)).toThrow(
      "Tensor: element [0] is 'a'; elements must be numbers, booleans or bigints",
    );
    expect(
      () =>
        new Tensor([
          [1, 2],
          [3, undefined],
        ] as never),
    ).toThrow('Tensor: element [1, 1] is undefined');
    expect(() => new Tensor({ a: 1 } as never)).toThrow('Tensor: element [] is an object');
    expect(() => new Tensor([1], { device: 5 } as never)).toThrow(
      "Tensor: the device must be a name such as 'CPU' or 'JS', got 5",
    );
  });
  it('sizes that are fractional, NaN, infinite or negative', () => {
    expect(() => Tensor.zeros([2.5, 2])).toThrow(
      /^Tensor\.zeros: shape \(2\.5, 2\) has size 2\.5 at axis 0; sizes must be non-negative integers/,
    );
    expect(() => Tensor.ones([Number.NaN])).toThrow(/^Tensor\.ones: shape \(NaN\) has size NaN at axis 0/);
    expect(() => Tensor.full([2, Infinity], 1)).toThrow(
      /^Tensor\.full: shape \(2, Infinity\) has size Infinity/,
    );
    expect(() => Tensor.rand([-1])).toThrow(/^Tensor\.rand: shape \(-1\) has size -1/);
    expect(() => t([2, 3]).expand([2, -2])).toThrow(
      /^expand: shape \(2, -2\) needs non-negative integer sizes/,
    );
    expect(() => t([2, 3]).broadcastTo([4, 3])).toThrow(
      /^broadcastTo: cannot broadcast \(2, 3\) to \(4, 3\): only size-1 axes/,
    );
  });
  it('arange with a zero or non-finite step', () => {
    expect(() => Tensor.arange(0, 5, 0)).toThrow('Tensor.arange: step must not be 0 (from 0 to 5)');
    expect(() => Tensor.arange(0, Infinity)).toThrow(
      'Tensor.arange: stop must be a finite number, got Infinity',
    );
  });
  it('reshape shows the shape the user passed', () => {
    expect(() => t([2, 3]).reshape(-1, -1)).toThrow(
      /^reshape: shape \(-1, -1\) needs non-negative integer sizes .* and at most one -1 \(inferred\), for \(2, 3\)$/,
    );
  });
  it('an error inside an op built from others names the op called, then the inner one', () => {
    expect(() => t([2, 3]).flatten(0, 5)).toThrow(/^flatten: axis 5 is out of range for shape \(2, 3\)/);
    expect(() => t([2, 3]).mean([0, 7])).toThrow(/^mean: axis 7 is out of range/);
    expect(() => t([2, 3]).softmin(2)).toThrow(/^softmin: axis 2 is out of range/);
  });
  it('a non-Tensor where an op needs one', () => {
    expect(() => t([2, 3]).matmul('a' as never)).toThrow("matmul: argument 1 must be a Tensor, got 'a'");
    expect(() => t([2, 3]).expandAs([1] as never)).toThrow('expandAs: other must be a Tensor, got [1]');
  });
  it('memory the allocator cannot give names the shape asked for', () => {
    const huge = Tensor.zeros([2 ** 18, 2 ** 18], { device: 'JS' }).contiguous();
    let thrown: unknown;
    try {
      huge.tolist();
    } catch (e) {
      thrown = e;
    }
    expect((thrown as Error).constructor).toBe(Error);
    expect((thrown as Error).message).toMatch(/^tolist: .*\(262144, 262144\)/);
  });
});

describe('JS integers beside integer tensors (issue 22 point 2)', () => {
  const i32 = () => new Tensor([1, -2], { device: 'JS', dtype: 'int32' });
  const u8 = () => new Tensor([0, 255], { device: 'JS', dtype: 'uint8' });
  it('a number the dtype cannot hold is an error naming the op, the number, the dtype and its range', () => {
    expect(() => i32().add(3e9)).toThrow(
      "add: the number 3000000000 does not fit the tensor's dtype int32 (-2147483648..2147483647)",
    );
    expect(() => u8().mul(300)).toThrow("mul: the number 300 does not fit the tensor's dtype uint8 (0..255)");
    // numpy 2: a negative Python int beside an unsigned array is out of bounds too
    expect(() => u8().sub(-1)).toThrow("sub: the number -1 does not fit the tensor's dtype uint8");
    expect(() => u8().bitwiseXor(-1)).toThrow(
      "bitwiseXor: the number -1 does not fit the tensor's dtype uint8",
    );
    const cond = new Tensor([true, false], { device: 'JS' });
    expect(() => cond.where(2n ** 40n, i32())).toThrow('where: the number 1099511627776 does not fit');
  });
  it('what fits, floats and explicit casts behave as before', () => {
    expect(u8().add(0).tolist()).toEqual([0, 255]);
    expect(i32().add(2.5).tolist()).toEqual([3.5, 0.5]);
    expect(u8().bitwiseNot().tolist()).toEqual([255, 0]);
    expect(u8().sign().tolist()).toEqual([0, 1]);
    expect(new Tensor([300], { device: 'JS' }).cast('uint8').tolist()).toEqual([44]);
  });
  it('a comparison with a number beyond the dtype has one answer, as numpy 2 gives', () => {
    expect(u8().lt(300).tolist()).toEqual([true, true]);
    expect(u8().ge(-1).tolist()).toEqual([true, true]);
    expect(u8().eq(-1).tolist()).toEqual([false, false]);
    expect(u8().ne(256).tolist()).toEqual([true, true]);
    expect(
      i32()
        .gt(2 ** 40)
        .tolist(),
    ).toEqual([false, false]);
    expect(
      i32()
        .le(-(2 ** 40))
        .tolist(),
    ).toEqual([false, false]);
    expect(new Tensor([5], { device: 'JS', dtype: 'int64' }).lt(2n ** 64n).tolist()).toEqual([true]);
  });
});
