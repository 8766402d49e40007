// dtype conveniences on Tensor: the long/double/short/bfloat16 casts, typeAs, dtype queries, byte sizes,
// emptyLike.
import { dtypes } from '../dtype.ts';
import { checkTensor, dtypeOption, Tensor, type TensorOptions } from './tensor.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** Cast to int64. */
    long(): Tensor;
    /** Cast to float64. */
    double(): Tensor;
    /** Cast to int16. */
    short(): Tensor;
    /** Cast to bfloat16. */
    bfloat16(): Tensor;
    /** Cast to other's dtype (torch.Tensor.type_as). */
    typeAs(other: Tensor): Tensor;
    /** Whether the dtype is a float (float16, bfloat16, float32 or float64). */
    isFloatingPoint(): boolean;
    /** Bytes per element (the dtype's itemsize; bool takes 1). */
    elementSize(): number;
    /**
     * Bytes of all elements: numel * elementSize(). A property, as `numel` is here and `nbytes` is in
     * PyTorch (tinygrad's is a method, `nbytes()`).
     */
    readonly nbytes: number;
  }
  namespace Tensor {
    /** An uninitialized tensor of t's shape, dtype and device (opts override dtype and device). */
    function emptyLike(t: Tensor, opts?: TensorOptions): Tensor;
  }
}

Tensor.prototype.long = function (this: Tensor): Tensor {
  return this.cast(dtypes.int64);
};
Tensor.prototype.double = function (this: Tensor): Tensor {
  return this.cast(dtypes.float64);
};
Tensor.prototype.short = function (this: Tensor): Tensor {
  return this.cast(dtypes.int16);
};
Tensor.prototype.bfloat16 = function (this: Tensor): Tensor {
  return this.cast(dtypes.bfloat16);
};
Tensor.prototype.typeAs = function (this: Tensor, other: Tensor): Tensor {
  checkTensor('typeAs', 'other', other);
  return this.cast(other.dtype);
};

Tensor.prototype.isFloatingPoint = function (this: Tensor): boolean {
  return this.dtype.isFloat;
};
Tensor.prototype.elementSize = function (this: Tensor): number {
  return this.dtype.itemsize;
};
Object.defineProperty(Tensor.prototype, 'nbytes', {
  get(this: Tensor): number {
    return this.numel * this.dtype.itemsize;
  },
  configurable: true,
});

Tensor.emptyLike = (t: Tensor, opts: TensorOptions = {}): Tensor => {
  if (!(t instanceof Tensor))
    throw new Error(`Tensor.emptyLike: needs a Tensor to take the shape of, got ${typeof t}`);
  const dtype = dtypeOption('Tensor.emptyLike', opts) ?? t.dtype;
  return Tensor.empty(t.shape, { ...opts, dtype, device: opts.device ?? t.device });
};
