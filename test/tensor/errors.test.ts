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
