// Movement and indexing on Tensor: squeeze, repeat, cat, stack, split, chunk, triu/tril, gather, get.
import { type ConstValue, dtypes, narrowSumDType, promoteAll } from '../dtype.ts';
import { checkIndex } from './index-check.ts';
import { broadcastShape } from './op-nodes.ts';
import { checkTensor, Tensor } from './tensor.ts';
import { checkAxes, dimOf, shown } from './validate.ts';

/**
 * A slice along one axis, as Python's `start:stop:step`: `[]` is `:`, `[1, 3]` is `1:3`, `[null, null, -1]`
 * is `::-1`. Omitted or null bounds take the default for the step's sign; negative bounds count from the end.
 */
export type Slice = readonly [start?: number | null, stop?: number | null, step?: number | null];

/** One entry of `Tensor.get`: an integer, a Slice, a new axis, the ellipsis, or an integer Tensor. */
export type Index = number | Slice | null | 'newaxis' | '...' | Tensor;

declare module './tensor.ts' {
  interface Tensor {
    /** Removes size-1 axes: all, or those in `dim` (an axis of another size stays, as in PyTorch). */
    squeeze(dim?: number | readonly number[]): Tensor;
    /** Tiles `reps[k]` copies along axis k (torch.Tensor.repeat); extra leading reps add axes. */
    repeat(reps: readonly number[]): Tensor;
    /** Pieces of `sizes` elements along `dim` (the last may be smaller), or of the listed sizes. */
    split(sizes: number | readonly number[], dim?: number): Tensor[];
    /** At most `n` pieces of ceil(size / n) elements along `dim`. */
    chunk(n: number, dim?: number): Tensor[];
    /** Zeroes the elements below the k-th diagonal of the last two axes. */
    triu(k?: number): Tensor;
    /** Zeroes the elements above the k-th diagonal of the last two axes. */
    tril(k?: number): Tensor;
    /**
     * out[..., i, ...] = this[..., index[..., i, ...], ...] along `dim` (as torch.gather). Index values lie in
     * `[0, size)`, negative ones included (PyTorch's rule). An index the host holds (made from JS data, or
     * realized on CPU or JS) out of range is an error naming it; a lazy one is checked only with CHECK_INDEX=1,
     * and otherwise selects 0.
     */
    gather(dim: number, index: Tensor): Tensor;
    /**
     * Indexing: numpy's `t[...]` written as arguments.
     *
     *     numpy             tsgrad
     *     t[1, -1]          t.get(1, -1)                    integers (negative: from the end) drop the axis
     *     t[1:3, ::2]       t.get([1, 3], [null, null, 2])  slices are [start, stop, step?]; [] is `:`
     *     t[::-1]           t.get([null, null, -1])         negative steps too
     *     t[None, ..., 0]   t.get(null, '...', 0)           null (or 'newaxis') adds an axis
     *     t[idx, :, idx2]   t.get(idx, [], idx2)            integer tensors (advanced indexing)
     *
     * Integers, slices, new axes and the ellipsis are movement ops only (flip, shrink, pad + reshape for a
     * step, reshape), never copies. Integer tensors broadcast together to a shape B and select by the spec's
     * one-hot gather; B takes their axes' place when they sit next to each other and goes first otherwise
     * (numpy's rule, with integers removing their axis first, as in PyTorch). Index tensors' values lie in
     * `[-size, size)`, negative ones counting from the end (PyTorch's rule). One the host holds (made from JS
     * data, or realized on CPU or JS) out of range is an error naming it; a lazy one is checked only with
     * CHECK_INDEX=1, and otherwise selects 0.
     */
    get(...indices: Index[]): Tensor;
    /** The slices along `dim`, each without that axis (torch.unbind): a (3, 4) tensor unbinds to three (4). */
    unbind(dim?: number): Tensor[];
    /** This tensor broadcast to other's shape (torch.Tensor.expand_as). */
    expandAs(other: Tensor): Tensor;
    /**
     * The entries of `index` (a 0-D or 1-D integer tensor) along `dim`, in its order (torch.index_select):
     * axis dim gets index's length. A gather, so differentiable; negative values count from the end and
     * out-of-range values select 0, as in get (they are data, so nothing checks them).
     */
    indexSelect(dim: number, index: Tensor): Tensor;
  }
  namespace Tensor {
    /** Joins tensors along an existing axis; all other axes must match. */
    function cat(tensors: readonly Tensor[], dim?: number): Tensor;
    /** Joins equal-shaped tensors along a new axis. */
    function stack(tensors: readonly Tensor[], dim?: number): Tensor;
  }
}

const fmt = (s: readonly number[]) => `(${s.join(', ')})`;

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const zeroOf = (t: Tensor): ConstValue => (t.dtype === dtypes.bool ? false : 0);

/**
 * The spec's gather: `mask` is a one-hot comparison of an index with an arange, and the selected values
 * are summed over the arange's axes. `where` rather than a multiply by the mask, so that a NaN or an
 * infinity elsewhere in the row does not leak into the result; an out-of-range index selects nothing (0).
 * Where the mask compares an index with one axis, codegen turns the sum into a load (src/codegen/gather.ts).
 */
function select(mask: Tensor, values: Tensor, axes: readonly number[]): Tensor {
  const picked = mask.where(values, zeroOf(values));
  return picked.sum(axes, false, narrowSumDType(picked.dtype)).cast(values.dtype);
}

/** `[0, size)` as a tensor beside t (an integer index axis to compare against). */
const positions = (t: Tensor, size: number) => Tensor.arange(size, undefined, 1, { device: t.device });

Tensor.prototype.squeeze = function (this: Tensor, dim?: number | readonly number[]): Tensor {
  if (dim === undefined) return this.reshape(this.shape.filter((d) => d !== 1));
  checkAxes('squeeze', dim);
  // A 0-d tensor accepts dim 0 or -1, as in PyTorch.
  const dims = (typeof dim === 'number' ? [dim] : dim).map((d) =>
    dimOf('squeeze', this.shape, d, Math.max(this.ndim, 1)),
  );
  return this.reshape(this.shape.filter((d, i) => !(d === 1 && dims.includes(i))));
};

Tensor.prototype.repeat = function (this: Tensor, reps: readonly number[]): Tensor {
  if (!Array.isArray(reps)) throw new Error(`repeat: reps must be an array of counts, got ${shown(reps)}`);
  if (reps.length < this.ndim || !reps.every((r) => Number.isInteger(r) && r >= 0))
    throw new Error(
      `repeat: needs at least ${this.ndim} non-negative integer counts for shape ${fmt(this.shape)}, got [${reps.join(', ')}]`,
    );
  const shape = [...new Array(reps.length - this.ndim).fill(1), ...this.shape];
  // Each axis s becomes (1, s), is expanded to (r, s) and merged back: r copies of the whole axis.
  return this.reshape(shape.flatMap((s) => [1, s]))
    .expand(shape.flatMap((s, i) => [reps[i]!, s]))
    .reshape(shape.map((s, i) => s * reps[i]!));
};

function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  const first = tensors[0];
  if (first === undefined) throw new Error('cat: needs at least one tensor');
  const d = dimOf('cat', first.shape, dim);
  const shapes = () => tensors.map((t) => fmt(t.shape)).join(', ');
  for (const t of tensors) {
    first.toTensor('cat', t);
    if (t.ndim !== first.ndim || t.shape.some((s, i) => i !== d && s !== first.shape[i]))
      throw new Error(`cat: shapes ${shapes()} must match except along dim ${dim}`);
  }
  const dtype = promoteAll(...tensors.map((t) => t.dtype));
  // Empty pieces add nothing; leaving them out keeps zero-size buffers out of the kernel.
  const parts = tensors.filter((t) => t.shape[d]! > 0).map((t) => t.cast(dtype));
  if (parts.length === 0) return first.cast(dtype);
  return joinedInGroups(parts, d);
}

/**
 * The most pieces joined in one value: each element of a join evaluates every piece's condition, so more
 * pieces join in groups of this many, each group realized, then the groups join (total * CAT_GROUP work per
 * level instead of total * pieces). Below the CPU device's 64 kernel arguments.
 */
const CAT_GROUP = 32;

function joinedInGroups(parts: readonly Tensor[], d: number): Tensor {
  if (parts.length <= CAT_GROUP) return joined(parts, d);
  const groups: Tensor[] = [];
  for (let i = 0; i < parts.length; i += CAT_GROUP)
    groups.push(joined(parts.slice(i, i + CAT_GROUP), d).contiguous());
  return joinedInGroups(groups, d);
}

/**
 * Non-empty pieces of one dtype joined along axis d, as a balanced tree of halves: each half padded to the
 * whole and chosen where its region lies (`where`, not a sum of the padded halves, keeps bools as they are),
 * so that a piece's gradient passes through log2(pieces) choices rather than a chain of all before it.
 */
function joined(parts: readonly Tensor[], d: number): Tensor {
  if (parts.length === 1) return parts[0]!;
  const half = parts.length >> 1;
  const left = joined(parts.slice(0, half), d);
  const right = joined(parts.slice(half), d);
  const [l, r] = [left.shape[d]!, right.shape[d]!];
  // PAD fills with zeros, false for bools.
  const along = (t: Tensor, before: number, after: number) =>
    t.pad(t.shape.map((_, i) => (i === d ? [before, after] : [0, 0])));
  const inside = along(Tensor.full(left.shape, true, { device: left.device }), 0, r);
  return inside.where(along(left, 0, r), along(right, l, 0));
}

function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  const first = tensors[0];
  if (first === undefined) throw new Error('stack: needs at least one tensor');
  const d = dimOf('stack', first.shape, dim, first.ndim + 1);
  if (tensors.some((t) => t.ndim !== first.ndim || t.shape.some((s, i) => s !== first.shape[i])))
    throw new Error(
      `stack: all tensors need the same shape, got ${tensors.map((t) => fmt(t.shape)).join(', ')}`,
    );
  return cat(
    tensors.map((t) => t.unsqueeze(d)),
    d,
  );
}

Tensor.cat = cat;
Tensor.stack = stack;

Tensor.prototype.split = function (this: Tensor, sizes: number | readonly number[], dim = 0): Tensor[] {
  const d = dimOf('split', this.shape, dim);
  const n = this.shape[d]!;
  let pieces: number[];
  if (typeof sizes === 'number') {
    if (!(Number.isInteger(sizes) && (sizes > 0 || (sizes === 0 && n === 0))))
      throw new Error(`split: the piece size must be a positive integer, got ${sizes}`);
    pieces =
      n === 0 ? [0] : Array.from({ length: Math.ceil(n / sizes) }, (_, i) => Math.min(sizes, n - i * sizes));
  } else {
    if (!Array.isArray(sizes))
      throw new Error(`split: sizes must be a piece size or an array of sizes, got ${shown(sizes)}`);
    if (!sizes.every((s) => Number.isInteger(s) && s >= 0) || sum(sizes) !== n)
      throw new Error(
        `split: sizes [${sizes.join(', ')}] must be non-negative integers summing to ${n}, the size of dim ${dim} of shape ${fmt(this.shape)}`,
      );
    pieces = [...sizes];
  }
  let start = 0;
  return pieces.map((s) => {
    start += s;
    return this.shrink(this.shape.map((size, i) => (i === d ? [start - s, start] : [0, size])));
  });
};

Tensor.prototype.chunk = function (this: Tensor, n: number, dim = 0): Tensor[] {
  if (!(Number.isInteger(n) && n > 0))
    throw new Error(`chunk: the number of chunks must be a positive integer, got ${n}`);
  const size = this.shape[dimOf('chunk', this.shape, dim)]!;
  return this.split(Math.ceil(size / n), dim);
};

/** Keeps the elements on one side of the k-th diagonal of the last two axes, by a mask built from aranges. */
function triangle(t: Tensor, op: string, k: number, upper: boolean): Tensor {
  if (t.ndim < 2) throw new Error(`${op}: needs at least 2 dims, got shape ${fmt(t.shape)}`);
  if (!Number.isInteger(k)) throw new Error(`${op}: the diagonal offset must be an integer, got ${k}`);
  if (t.numel === 0) return t;
  const [r, c] = t.shape.slice(-2) as [number, number];
  const row = positions(t, r).unsqueeze(-1).add(k);
  const col = positions(t, c);
  return (upper ? col.ge(row) : col.le(row)).where(t, zeroOf(t));
}

Tensor.prototype.triu = function (this: Tensor, k = 0): Tensor {
  return triangle(this, 'triu', k, true);
};
Tensor.prototype.tril = function (this: Tensor, k = 0): Tensor {
  return triangle(this, 'tril', k, false);
};

Tensor.prototype.gather = function (this: Tensor, dim: number, index: Tensor): Tensor {
  const d = dimOf('gather', this.shape, dim);
  this.toTensor('gather', index);
  if (!index.dtype.isInt)
    throw new Error(`gather: the index must have an integer dtype, got ${index.dtype.name}`);
  if (index.ndim !== this.ndim || index.shape.some((s, i) => i !== d && s > this.shape[i]!))
    throw new Error(
      `gather: index shape ${fmt(index.shape)} needs the ${this.ndim} dims of the input ${fmt(this.shape)}, each no larger except along dim ${dim}`,
    );
  const k = this.shape[d]!;
  checkIndex('gather', index, {
    lo: 0,
    hi: k,
    name: 'index',
    of: `dim ${dim} of the input ${fmt(this.shape)}`,
  });
  // values[..., 1 (at d), ..., k]: the input restricted to the index's extent, its dim d moved last.
  const within = index.shape.every((s, i) => i === d || s === this.shape[i]);
  const x = within ? this : this.shrink(this.shape.map((s, i) => [0, i === d ? s : index.shape[i]!]));
  const values = x.unsqueeze(-1).transpose(d, -1);
  return select(index.unsqueeze(-1).eq(positions(this, k)), values, [-1]);
};

/** @internal Python's slice.indices for one axis: the first position, the step and the element count. */
export function sliceAxis(
  s: Slice,
  size: number,
  axis: number,
): { start: number; step: number; count: number } {
  const step = s[2] ?? 1;
  const bad = [s[0], s[1], step].find((v) => v != null && !Number.isInteger(v));
  if (bad !== undefined || step === 0)
    throw new Error(
      `get: slice [${s.map((v) => v ?? 'null').join(', ')}] on axis ${axis} needs integer bounds and a non-zero integer step`,
    );
  // Bounds clamp to [0, size] going forward and to [-1, size - 1] going backward (-1: before the first).
  const [lo, hi] = step > 0 ? [0, size] : [-1, size - 1];
  const bound = (v: number | null | undefined, dflt: number) =>
    v == null ? dflt : Math.min(hi, Math.max(lo, v < 0 ? v + size : v));
  const start = bound(s[0], step > 0 ? 0 : size - 1);
  const stop = bound(s[1], step > 0 ? size : -1);
  return { start, step, count: Math.max(0, Math.ceil((stop - start) / step)) };
}

Tensor.prototype.get = function (this: Tensor, ...indices: Index[]): Tensor {
  const shape = this.shape;
  const isAxis = (i: Index) => i !== null && i !== 'newaxis' && i !== '...';
  const used = indices.filter(isAxis).length;
  const ellipses = indices.filter((i) => i === '...').length;
  if (ellipses > 1) throw new Error(`get: at most one '...' is allowed, got ${ellipses}`);
  if (used > this.ndim)
    throw new Error(`get: ${used} indices for shape ${fmt(shape)}, which has ${this.ndim} dims`);
  const fill: Index[] = new Array(this.ndim - used).fill([]);
  const full = ellipses ? indices.flatMap((i) => (i === '...' ? fill : [i])) : [...indices, ...fill];

  const views: AxisView[] = [];
  const out: number[] = []; // the shape after the basic (movement-only) indices
  const tensors: Advanced[] = [];
  for (const idx of full) {
    const axis = views.length;
    const size = shape[axis]!;
    if (idx === null || idx === 'newaxis') out.push(1);
    else if (typeof idx === 'number') {
      if (!(Number.isInteger(idx) && idx >= -size && idx < size))
        throw new Error(
          `get: index ${idx} is out of range for axis ${axis} of shape ${fmt(shape)}; valid indices are the integers ${-size}..${size - 1}`,
        );
      views.push({ start: idx < 0 ? idx + size : idx, count: 1, step: 1, flip: false });
    } else if (idx instanceof Tensor) {
      this.toTensor('get', idx);
      if (!idx.dtype.isInt)
        throw new Error(
          `get: index tensors must have an integer dtype, got ${idx.dtype.name} for axis ${axis}`,
        );
      checkIndex('get', idx, {
        lo: -size,
        hi: size,
        name: 'index',
        of: `axis ${axis} of shape ${fmt(shape)}`,
      });
      tensors.push({ pos: out.length, index: idx, size });
      views.push({ start: 0, count: size, step: 1, flip: false });
      out.push(size);
    } else if (Array.isArray(idx)) {
      const { start, step, count } = sliceAxis(idx as Slice, size, axis);
      // A backward slice is a forward one on the flipped axis; with at most one element, the step is moot.
      views.push(
        count === 0
          ? { start: 0, count, step: 1, flip: false }
          : count === 1
            ? { start, count, step: 1, flip: false }
            : step < 0
              ? { start: size - 1 - start, count, step: -step, flip: true }
              : { start, count, step, flip: false },
      );
      out.push(count);
    } else
      throw new Error(
        `get: cannot index with ${String(idx)}; use an integer, a [start, stop, step] slice, null, '...' or an integer Tensor`,
      );
  }
  const x = view(this, views).reshape(out);
  return tensors.length ? advanced(x, tensors) : x;
};

/** What a basic index keeps of one axis: count elements from start, step apart, after an optional flip. */
interface AxisView {
  start: number;
  count: number;
  step: number;
  flip: boolean;
}

/** The views as movement ops: flip, shrink; a step s > 1 pads to count * s, splits (count, s), keeps 1. */
function view(t: Tensor, views: readonly AxisView[]): Tensor {
  const shape = t.shape;
  const flips = views.flatMap((v, i) => (v.flip ? [i] : []));
  let x = flips.length ? t.flip(flips) : t;
  const strided = views.map((v) => v.step > 1);
  const spans = views.map((v, i) => (strided[i] ? Math.min(shape[i]! - v.start, v.count * v.step) : v.count));
  if (views.some((v, i) => v.start !== 0 || spans[i] !== shape[i]))
    x = x.shrink(views.map((v, i) => [v.start, v.start + spans[i]!]));
  if (!strided.some((s) => s)) return x;
  const want = views.map((v, i) => (strided[i] ? v.count * v.step : spans[i]!));
  if (want.some((w, i) => w !== spans[i])) x = x.pad(want.map((w, i) => [0, w - spans[i]!]));
  return x.reshape(views.flatMap((v, i) => (strided[i] ? [v.count, v.step] : [want[i]!]))).shrink(
    views.flatMap((v, i): [number, number][] =>
      strided[i]
        ? [
            [0, v.count],
            [0, 1],
          ]
        : [[0, want[i]!]],
    ),
  );
}

/** An index tensor and the axis of the basic-indexed tensor it selects along. */
interface Advanced {
  pos: number;
  index: Tensor;
  size: number;
}

/**
 * Advanced indexing: the indexed axes move last and are selected by one one-hot mask per index tensor, summed
 * into the result's own layout (the axes before, the broadcast axes, the axes after), so that a gather realized
 * on its own is contiguous as its readers index it (a batch picked from a training set, read by a conv).
 */
function advanced(x: Tensor, tensors: readonly Advanced[]): Tensor {
  const b = tensors.map((t) => t.index.shape).reduce((p, q) => broadcastShape('get', p, q));
  const rest = x.shape.map((_, i) => i).filter((i) => !tensors.some((t) => t.pos === i));
  // The broadcast axes take the first index tensor's place when the index tensors are adjacent, else lead.
  const adjacent = tensors.every((t, k) => t.pos === tensors[0]!.pos + k);
  const at = adjacent ? tensors[0]!.pos : 0;
  const sizes = (axes: readonly number[]) => axes.map((i) => x.shape[i]!);
  const [before, after] = [sizes(rest.slice(0, at)), sizes(rest.slice(at))];
  const values = x
    .permute([...rest, ...tensors.map((t) => t.pos)])
    .reshape([...before, ...b.map(() => 1), ...after, ...tensors.map((t) => t.size)]);
  const mask = tensors
    .map(({ index, size }, j) => {
      // Negative indices count from the end; narrow ints widen first so that index + size cannot overflow.
      const wide = index.dtype.itemsize < 4 ? index.cast(dtypes.int32) : index;
      const i = wide.lt(0).where(wide.add(size), wide).broadcastTo(b);
      const onAxis = tensors.map((_, k) => (k === j ? size : 1));
      return i
        .reshape([...b, ...after.map(() => 1), ...onAxis.map(() => 1)])
        .eq(positions(x, size).reshape(onAxis));
    })
    .reduce((p, q) => p.where(q, false));
  return select(
    mask,
    values,
    tensors.map((_, k) => k - tensors.length),
  );
}

Tensor.prototype.unbind = function (this: Tensor, dim = 0): Tensor[] {
  const d = dimOf('unbind', this.shape, dim);
  const rest = this.shape.filter((_, i) => i !== d);
  return Array.from({ length: this.shape[d]! }, (_, k) =>
    this.shrink(this.shape.map((s, i) => (i === d ? [k, k + 1] : [0, s]))).reshape(rest),
  );
};

Tensor.prototype.expandAs = function (this: Tensor, other: Tensor): Tensor {
  checkTensor('expandAs', 'other', other);
  return this.expand(other.shape);
};

Tensor.prototype.indexSelect = function (this: Tensor, dim: number, index: Tensor): Tensor {
  const d = dimOf('indexSelect', this.shape, dim);
  checkTensor('indexSelect', 'the index', index, this);
  if (!index.dtype.isInt || index.ndim > 1)
    throw new Error(
      `indexSelect: the index must be a 0-D or 1-D integer tensor, got (${index.shape.join(', ')}) ${index.dtype.name}`,
    );
  // a 0-D index selects one entry and keeps the axis, as PyTorch
  return this.get(...this.shape.slice(0, d).map((): Index => []), index.reshape([index.numel]));
};
