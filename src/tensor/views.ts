// Movement functions built from pad, shrink, reshape, expand and permute alone (views, no gathers): view, size,
// roll, unfold, unflatten, repeatInterleave, meshgrid, diag and diagonal.
import { prod } from '../helpers.ts';
import { Tensor } from './tensor.ts';
import { checkAxes, checkOptions, dimOf, shown } from './validate.ts';

export interface DiagonalOptions {
  /** Which diagonal: 0 the main one, positive above it, negative below. */
  offset?: number;
  /** The axis the diagonal's rows run along. */
  dim1?: number;
  /** The axis the diagonal's columns run along. */
  dim2?: number;
}

export interface MeshgridOptions {
  /** 'ij' (matrix): output axis k follows tensor k. 'xy' (Cartesian): the first two output axes swap. */
  indexing?: 'ij' | 'xy';
}

declare module './tensor.ts' {
  interface Tensor {
    /** reshape's PyTorch name; a tsgrad reshape is always a view. Sizes as an array or as arguments. */
    view(shape: readonly number[]): Tensor;
    view(...shape: number[]): Tensor;
    /** The shape, or the size of one axis (negative axes count from the end), as torch.Tensor.size. */
    size(): number[];
    size(dim: number): number;
    /**
     * Rotates elements along `dims` by `shifts` (an element at i moves to i + shift, wrapping around), as
     * torch.roll. Without dims the tensor rolls as if flattened and keeps its shape.
     */
    roll(shifts: number | readonly number[], dims?: number | readonly number[]): Tensor;
    /**
     * Windows of `size` elements every `step` along `dim` (torch.Tensor.unfold): `dim` becomes the window
     * count, floor((n - size) / step) + 1, and a new last axis of `size` holds each window.
     */
    unfold(dim: number, size: number, step: number): Tensor;
    /** Splits axis `dim` into `sizes` (one may be -1, inferred), as torch.unflatten. */
    unflatten(dim: number, sizes: readonly number[]): Tensor;
    /** Repeats each element `repeats` times along `dim` (torch.repeat_interleave); without dim, flattened. */
    repeatInterleave(repeats: number, dim?: number): Tensor;
    /**
     * torch.diag: a 1-D tensor becomes the square matrix with it on diagonal `diagonal` (0 elsewhere); a 2-D
     * tensor gives its diagonal `diagonal` as a 1-D tensor.
     */
    diag(diagonal?: number): Tensor;
    /**
     * The diagonal of the axes dim1 and dim2 (torch.diagonal): both are removed and the diagonal becomes a
     * new last axis. A number is the offset.
     */
    diagonal(opts?: number | DiagonalOptions): Tensor;
  }
  namespace Tensor {
    /**
     * Coordinate grids of 0-D or 1-D tensors (torch.meshgrid): each output has one axis per input, holds
     * its tensor's values along its own axis and repeats them along the others. Options come last.
     */
    function meshgrid(...args: [...tensors: Tensor[], opts: MeshgridOptions]): Tensor[];
    function meshgrid(...tensors: Tensor[]): Tensor[];
  }
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;
const keepAll = (shape: readonly number[]) => shape.map((d) => [0, d] as [number, number]);

/** An integer argument, or an error naming the op and what would be valid. */
function integer(op: string, what: string, v: number, min = -Infinity): number {
  if (Number.isInteger(v) && v >= min) return v;
  const valid =
    min === -Infinity ? 'an integer' : min === 0 ? 'a non-negative integer' : `an integer >= ${min}`;
  throw new Error(`${op}: ${what} must be ${valid}, got ${v}`);
}

Tensor.prototype.view = function (this: Tensor, ...args: [readonly number[]] | number[]): Tensor {
  return args.length === 1 && Array.isArray(args[0])
    ? this.reshape(args[0] as readonly number[])
    : this.reshape(...(args as number[]));
};

// one body for both overloads, which tell the results apart
Tensor.prototype.size = function (this: Tensor, dim?: number): number[] | number {
  return dim === undefined ? this.shape : this.shape[dimOf('size', this.shape, dim)]!;
} as Tensor['size'];

Tensor.prototype.roll = function (
  this: Tensor,
  shifts: number | readonly number[],
  dims?: number | readonly number[],
): Tensor {
  checkAxes('roll', shifts);
  if (dims !== undefined) checkAxes('roll', dims);
  const shiftList = (typeof shifts === 'number' ? [shifts] : shifts).map((s) =>
    integer('roll', 'a shift', s),
  );
  if (dims === undefined) {
    if (shiftList.length !== 1)
      throw new Error(
        `roll: without dims, give one shift (the tensor rolls flattened), got [${shiftList.join(', ')}]`,
      );
    return this.reshape([this.numel]).roll(shiftList[0]!, 0).reshape(this.shape);
  }
  const dimList = (typeof dims === 'number' ? [dims] : dims).map((d) => dimOf('roll', this.shape, d));
  if (dimList.length !== shiftList.length)
    throw new Error(
      `roll: needs one shift per dim, got shifts [${shiftList.join(', ')}] and dims [${dimList.join(', ')}]`,
    );
  // a dim listed twice rolls by the sum of its shifts
  const by = this.shape.map(() => 0);
  dimList.forEach((d, k) => {
    by[d]! += shiftList[k]!;
  });
  const amount = by.map((s, i) => {
    const n = this.shape[i]!;
    return n === 0 ? 0 : ((s % n) + n) % n;
  });
  if (amount.every((a) => a === 0)) return this;
  // two copies of each rolled axis side by side (an expand), of which the window from n - shift is kept
  return this.repeat(amount.map((a) => (a ? 2 : 1))).shrink(
    amount.map((a, i) => (a ? [this.shape[i]! - a, 2 * this.shape[i]! - a] : [0, this.shape[i]!])),
  );
};

Tensor.prototype.unfold = function (this: Tensor, dim: number, size: number, step: number): Tensor {
  const d = dimOf('unfold', this.shape, dim);
  const n = this.shape[d]!;
  integer('unfold', 'the window size', size, 0);
  integer('unfold', 'the step', step, 1);
  if (size > n)
    throw new Error(
      `unfold: the window size ${size} is larger than dim ${dim} of shape ${fmt(this.shape)}, which has ${n} elements`,
    );
  const rest = this.shape.map((_, i) => i).filter((i) => i !== d);
  const x = this.permute([...rest, d]);
  const lead = x.shape.slice(0, -1);
  const keep = keepAll(lead);
  // size + 1 copies of the axis read with rows of n + 1: row k starts k elements later, so [k, j] is x[k + j]
  const starts = n - size + 1;
  const windows = x
    .unsqueeze(-2)
    .expand([...lead, size + 1, n])
    .reshape([...lead, (size + 1) * n])
    .shrink([...keep, [0, size * (n + 1)]])
    .reshape([...lead, size, n + 1])
    .shrink([...keep, [0, size], [0, starts]]);
  const strided = step === 1 ? windows : windows.get('...', [null, null, step]);
  // (rest..., size, windows) -> the window count where dim was, the window's elements last
  const r = rest.length;
  const order = rest.map((_, i) => i);
  order.splice(d, 0, r + 1);
  return strided.permute([...order, r]);
};

Tensor.prototype.unflatten = function (this: Tensor, dim: number, sizes: readonly number[]): Tensor {
  const d = dimOf('unflatten', this.shape, dim);
  if (!Array.isArray(sizes)) throw new Error(`unflatten: sizes must be an array, got ${shown(sizes)}`);
  const n = this.shape[d]!;
  const bad = () =>
    new Error(
      `unflatten: sizes [${sizes.join(', ')}] must be non-negative integers (one may be -1) whose product is ${n}, the size of dim ${dim} of shape ${fmt(this.shape)}`,
    );
  if (sizes.length === 0 || !sizes.every((s) => Number.isInteger(s) && s >= -1)) throw bad();
  const infer = sizes.filter((s) => s === -1).length;
  const known = prod(sizes.filter((s) => s !== -1));
  if (infer > 1 || (infer === 0 && known !== n) || (infer === 1 && (known === 0 || n % known !== 0)))
    throw bad();
  const full = sizes.map((s) => (s === -1 ? n / known : s));
  return this.reshape([...this.shape.slice(0, d), ...full, ...this.shape.slice(d + 1)]);
};

Tensor.prototype.repeatInterleave = function (this: Tensor, repeats: number, dim?: number): Tensor {
  integer('repeatInterleave', 'repeats', repeats, 0);
  const x = dim === undefined ? this.reshape([this.numel]) : this;
  const d = dim === undefined ? 0 : dimOf('repeatInterleave', this.shape, dim);
  const shape = x.shape;
  // each element gets a new axis right after its own, expanded to `repeats` copies, then merged
  return x
    .unsqueeze(d + 1)
    .expand([...shape.slice(0, d + 1), repeats, ...shape.slice(d + 1)])
    .reshape([...shape.slice(0, d), shape[d]! * repeats, ...shape.slice(d + 1)]);
};

Tensor.prototype.diag = function (this: Tensor, diagonal = 0): Tensor {
  integer('diag', 'the diagonal', diagonal);
  if (this.ndim === 2) return this.diagonal({ offset: diagonal });
  if (this.ndim !== 1)
    throw new Error(
      `diag: needs a 1-D tensor (to make a matrix) or a 2-D one (to read), got shape ${fmt(this.shape)}`,
    );
  const n = this.shape[0]!;
  // rows of n + 1 (the value, then n zeros) read as rows of n: row i's value lands in column i
  const square = this.unsqueeze(-1)
    .pad([
      [0, 0],
      [0, n],
    ])
    .reshape([n * (n + 1)])
    .shrink([[0, n * n]])
    .reshape([n, n]);
  const k = Math.abs(diagonal);
  return square.pad(
    diagonal >= 0
      ? [
          [0, k],
          [k, 0],
        ]
      : [
          [k, 0],
          [0, k],
        ],
  );
};

Tensor.prototype.diagonal = function (this: Tensor, opts: number | DiagonalOptions = {}): Tensor {
  const { offset = 0, dim1 = 0, dim2 = 1 } = typeof opts === 'number' ? { offset: opts } : opts;
  integer('diagonal', 'the offset', offset);
  if (this.ndim < 2) throw new Error(`diagonal: needs at least 2 dims, got shape ${fmt(this.shape)}`);
  const [a, b] = [dimOf('diagonal', this.shape, dim1), dimOf('diagonal', this.shape, dim2)];
  if (a === b)
    throw new Error(`diagonal: dim1 ${dim1} and dim2 ${dim2} are the same axis of shape ${fmt(this.shape)}`);
  const x = this.permute([...this.shape.map((_, i) => i).filter((i) => i !== a && i !== b), a, b]);
  const lead = x.shape.slice(0, -2);
  const keep = keepAll(lead);
  const [r, c] = x.shape.slice(-2) as [number, number];
  const row = offset < 0 ? Math.min(-offset, r) : 0;
  const col = offset > 0 ? Math.min(offset, c) : 0;
  const d = Math.min(r - row, c - col);
  // the d x d square read as rows of d + 1: element [i, 0] is [i, i]
  return x
    .shrink([...keep, [row, row + d], [col, col + d]])
    .reshape([...lead, d * d])
    .pad([...lead.map(() => [0, 0] as [number, number]), [0, d]])
    .reshape([...lead, d, d + 1])
    .shrink([...keep, [0, d], [0, 1]])
    .reshape([...lead, d]);
};

function meshgrid(...args: (Tensor | MeshgridOptions)[]): Tensor[] {
  const last = args.at(-1);
  if (last !== undefined && !(last instanceof Tensor)) checkOptions('meshgrid', last);
  const opts: MeshgridOptions = last === undefined || last instanceof Tensor ? {} : last;
  const tensors = (last === undefined || last instanceof Tensor ? args : args.slice(0, -1)) as Tensor[];
  const indexing = opts.indexing ?? 'ij';
  if (indexing !== 'ij' && indexing !== 'xy')
    throw new Error(`meshgrid: indexing must be 'ij' or 'xy', got '${String(indexing)}'`);
  const first = tensors[0];
  if (first === undefined) throw new Error('meshgrid: needs at least one tensor');
  for (const t of tensors) {
    if (!(t instanceof Tensor))
      throw new Error('meshgrid: give tensors, then at most one options object ({ indexing }) last');
    first.toTensor('meshgrid', t);
    if (t.ndim > 1)
      throw new Error(
        `meshgrid: needs 0-D or 1-D tensors, got shapes ${tensors.map((u) => fmt(u.shape)).join(', ')}`,
      );
  }
  const lens = tensors.map((t) => t.numel);
  // 'xy' puts the second tensor's values along the first axis and the first's along the second
  const axisOf = (k: number) => (indexing === 'xy' && tensors.length > 1 && k < 2 ? 1 - k : k);
  const shape = lens.map((_, a) => lens[tensors.findIndex((_, k) => axisOf(k) === a)]!);
  return tensors.map((t, k) => t.reshape(shape.map((s, a) => (a === axisOf(k) ? s : 1))).expand(shape));
}

Tensor.meshgrid = meshgrid as typeof Tensor.meshgrid;
