// JS integers past int32 make int64 tensors, and a value that does not fit an asked-for dtype is an error: nothing
// wraps unless the user casts.
import { describe, expect, it } from 'vitest';
import { Tensor } from '../../src/tensor/index.ts';
import { DEVICES } from '../devices.ts';

for (const device of DEVICES)
  describe(`integers past int32 on ${device}`, () => {
    it('infer int64 from a number outside int32 or from a bigint', () => {
      const big = new Tensor([1, 3e9], { device });
      expect(big.dtype.name).toBe('int64');
      expect(big.tolist()).toEqual([1, 3000000000]);
      const bigints = new Tensor([5n, 2n ** 40n], { device });
      expect(bigints.dtype.name).toBe('int64');
      expect(bigints.tolist()).toEqual([5, 2 ** 40]);
      expect(new Tensor([-(2 ** 31), 2 ** 31 - 1], { device }).dtype.name).toBe('int32');
      expect(new Tensor([-(2 ** 31) - 1], { device }).dtype.name).toBe('int64');
      expect(Tensor.full([2], 2 ** 40, { device }).tolist()).toEqual([2 ** 40, 2 ** 40]);
    });

    it('refuse a value outside an asked-for dtype, naming it, the dtype and its range', () => {
      expect(() => new Tensor([1, 300], { device, dtype: 'uint8' })).toThrow(
        'Tensor: the value 300 does not fit uint8 (0..255); give a wider dtype (cast() wraps, on purpose)',
      );
      expect(() => new Tensor([-1], { device, dtype: 'uint32' })).toThrow('the value -1 does not fit uint32');
      expect(() => new Tensor([2n ** 63n], { device })).toThrow(
        'the value 9223372036854775808 does not fit int64 (-9223372036854775808..9223372036854775807)',
      );
      expect(() => new Tensor(new Int32Array([1, 70000]), { device, dtype: 'int16' })).toThrow(
        'the value 70000 does not fit int16',
      );
      expect(() => Tensor.full([2], 2 ** 40, { device, dtype: 'int32' })).toThrow(
        'Tensor.full: the value 1099511627776 does not fit int32',
      );
    });

    it('wrap only when asked, through cast', () => {
      expect(new Tensor([300], { device }).cast('uint8').tolist()).toEqual([44]);
      // a fraction truncates into an int dtype, as a cast does
      expect(new Tensor([2.7, -2.7], { device, dtype: 'int32' }).tolist()).toEqual([2, -2]);
    });
  });
