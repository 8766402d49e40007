// Creation ops beyond Tensor.full/zeros/ones/arange: empty, linspace, eye and the *Like constructors.
import { type ConstValue, type DType, dtypes } from '../dtype.ts';
import { Device } from '../runtime/device.ts';
import { newBuffer } from '../schedule/rangeify.ts';
import { checkTensor, dtypeOption, marksResult, Tensor, type TensorOptions } from './tensor.ts';
import { checkFinite, checkOptions, checkShape } from './validate.ts';

// Statics join the class through namespace merging, so `Tensor.eye` is typed wherever Tensor is imported.
declare module './tensor.ts' {
  namespace Tensor {
    /** A tensor whose contents are unspecified: a buffer is allocated when first used, and no kernel runs. */
    function empty(shape: readonly number[], opts?: TensorOptions): Tensor;
    /** `steps` evenly spaced values from start to stop, both included (float32 unless opts.dtype says). */
    function linspace(start: number, stop: number, steps: number, opts?: TensorOptions): Tensor;
    /** An n x m matrix (m defaults to n) with ones on the main diagonal. */
    function eye(n: number, m?: number, opts?: TensorOptions): Tensor;
    /** Zeros of t's shape, dtype and device (opts override dtype and device). */
    function zerosLike(t: Tensor, opts?: TensorOptions): Tensor;
    function onesLike(t: Tensor, opts?: TensorOptions): Tensor;
    function fullLike(t: Tensor, value: ConstValue, opts?: TensorOptions): Tensor;
  }
}

function checkCount(op: string, name: string, n: number): void {
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${op}: ${name} must be a non-negative integer, got ${n}`);
}

function empty(shape: readonly number[], opts: TensorOptions = {}): Tensor {
  checkShape('Tensor.empty', shape);
  checkOptions('Tensor.empty', opts);
  const device = Device.canonicalize(opts.device ?? Device.default);
  return new Tensor(newBuffer(shape, dtypeOption('Tensor.empty', opts) ?? dtypes.float32, device), {
    device,
  });
}

function linspace(start: number, stop: number, steps: number, opts: TensorOptions = {}): Tensor {
  checkFinite('Tensor.linspace', 'start', start);
  checkFinite('Tensor.linspace', 'stop', stop);
  checkCount('Tensor.linspace', 'steps', steps);
  const dtype = dtypeOption('Tensor.linspace', opts) ?? dtypes.float32;
  if (steps <= 1) return Tensor.full([steps], start, { ...opts, dtype });
  // computed in a float, from start over the first half and back from stop over the second, as PyTorch
  // does: both endpoints come out exact and the rounding is symmetric
  const compute: DType = dtype.isFloat ? dtype : dtypes.float32;
  const step = (stop - start) / (steps - 1);
  const i = Tensor.arange(steps, undefined, 1, { device: opts.device, dtype: dtypes.int32 }).cast(compute);
  const low = i.mul(step).add(start);
  const high = i
    .sub(steps - 1)
    .mul(step)
    .add(stop);
  return i
    .lt(Math.floor(steps / 2))
    .where(low, high)
    .cast(dtype);
}

function eye(n: number, m = n, opts: TensorOptions = {}): Tensor {
  checkCount('Tensor.eye', 'n', n);
  checkCount('Tensor.eye', 'm', m);
  const dtype = dtypeOption('Tensor.eye', opts) ?? dtypes.float32;
  const k = Math.min(n, m);
  if (k === 0) return Tensor.full([n, m], 0, { ...opts, dtype });
  // movement only: a column of ones padded to rows of k + 1, read back k at a time, puts a one at every
  // (i, i) (flat offset i * (k + 1)) and nothing needs an index comparison
  const square = Tensor.full([k, 1], 1, { ...opts, dtype })
    .pad([
      [0, 0],
      [0, k],
    ])
    .reshape([k * (k + 1)])
    .shrink([[0, k * k]])
    .reshape([k, k]);
  return square.pad([
    [0, n - k],
    [0, m - k],
  ]);
}

function like(op: string, t: Tensor, value: ConstValue, opts: TensorOptions = {}): Tensor {
  checkTensor(op, 't', t);
  checkOptions(op, opts);
  return Tensor.full(t.shape, value, {
    ...opts,
    dtype: opts.dtype ?? t.dtype,
    device: opts.device ?? t.device,
  });
}

const statics: Pick<typeof Tensor, 'empty' | 'linspace' | 'eye' | 'zerosLike' | 'onesLike' | 'fullLike'> = {
  empty: marksResult(1, empty),
  linspace: marksResult(3, linspace),
  eye: marksResult(2, eye),
  zerosLike: (t, opts) => like('Tensor.zerosLike', t, 0, opts),
  onesLike: (t, opts) => like('Tensor.onesLike', t, 1, opts),
  fullLike: (t, value, opts) => like('Tensor.fullLike', t, value, opts),
};
Object.assign(Tensor, statics);
