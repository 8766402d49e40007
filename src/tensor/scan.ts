// Scans along an axis beside cumsum: cumprod, cummax, cummin and logcumsumexp, built as cumsum is (windows, reduce).
import { dtypes } from '../dtype.ts';
import { Tensor } from './tensor.ts';
import { dimOf } from './validate.ts';

declare module './tensor.ts' {
  interface Tensor {
    /** Running product along the axis; a zero makes every later product exactly 0. Bools count as int32. */
    cumprod(axis?: number): Tensor;
    /**
     * Running maximum along the axis, as `[values, indices]` (torch.cummax and tinygrad's cummax): indices
     * (int32) are where each running maximum was last reached (a tie moves it, as in PyTorch). NaN is the
     * largest value: from the first NaN on the values are NaN and the index is the latest NaN. The values'
     * gradient goes to the maximum, shared among tied elements (as max's; PyTorch gives it all to
     * the index).
     */
    cummax(axis?: number): [Tensor, Tensor];
    /** Running minimum along the axis, as `[values, indices]`; ties and NaN as in cummax. */
    cummin(axis?: number): [Tensor, Tensor];
    /**
     * log(cumsum(exp(x))) along the axis, each prefix shifted by its own maximum so that large inputs
     * neither overflow nor lose the small terms.
     */
    logcumsumexp(axis?: number): Tensor;
  }
}

/** How a scan reduces a window of elements and merges two partial results; `fill` is its identity. */
interface Scan {
  fill: (x: Tensor) => number;
  reduce: (windows: Tensor) => Tensor;
  merge: (a: Tensor, b: Tensor) => Tensor;
}

/** log(exp(a) + exp(b)), shifted by the larger one where it is finite (as logsumexp). */
function logaddexp(a: Tensor, b: Tensor): Tensor {
  const m = a.maximum(b).detach();
  const shift = m.isfinite().where(m, 0);
  return a.sub(shift).exp().add(b.sub(shift).exp()).log().add(shift);
}

const PROD: Scan = { fill: () => 1, reduce: (w) => w.prod(-1, false, w.dtype), merge: (a, b) => a.mul(b) };
const MAX: Scan = {
  fill: (x) => x.dtype.min, // -inf for floats
  reduce: (w) => w.max(-1),
  merge: (a, b) => a.maximum(b),
};
const LOGSUMEXP: Scan = { fill: () => -Infinity, reduce: (w) => w.logsumexp(-1), merge: logaddexp };

/** As cumsum's: whether the window view of an n-long axis has offsets that JS numbers hold exactly. */
const windowFits = (n: number) => (n + 1) * (2 * n - 1) <= Number.MAX_SAFE_INTEGER;
/**
 * Axes longer than twice this go in blocks: a window scan does n^2 work. cumsum keeps one window (for
 * arange its loop collapses); these scans' loops never collapse, and blocks cut the work to about 256n.
 */
const SCAN_BLOCK = 256;

/**
 * The (..., n, n) windows of the last axis, cumsum's view: row i holds x[0..i] at its end, after n - 1 - i
 * copies of fill. Pad, tile, trim: the rows read the padded axis one element later each.
 */
function windows(x: Tensor, fill: number): Tensor {
  const n = x.shape[x.ndim - 1]!;
  const lead = x.shape.slice(0, -1);
  const keep = lead.map((d) => [0, d] as [number, number]);
  return x
    .pad([...lead.map(() => [0, 0] as [number, number]), [n - 1, 0]], fill)
    .unsqueeze(-2)
    .expand([...lead, n + 1, 2 * n - 1])
    .reshape([...lead, (n + 1) * (2 * n - 1)])
    .shrink([...keep, [0, 2 * n * n]])
    .reshape([...lead, n, 2 * n])
    .shrink([...keep, [0, n], [0, n]]);
}

/** The scan along the last axis (not empty): one window reduce, or blocks for a long axis. */
function scanLast(x: Tensor, scan: Scan): Tensor {
  const n = x.shape[x.ndim - 1]!;
  if (n > 2 * SCAN_BLOCK || !windowFits(n)) return blockedScan(x, scan);
  return scan.reduce(windows(x, scan.fill(x)));
}

/**
 * @internal The scan along the last axis in blocks (fill pads the axis to whole blocks): the scan within
 * each block merged with the scan of everything before the block, itself an exclusive scan over the
 * blocks' totals. Exported for tests, which give a small block.
 */
export function blockedScan(x: Tensor, scan: Scan, block = SCAN_BLOCK): Tensor {
  const n = x.shape[x.ndim - 1]!;
  const lead = x.shape.slice(0, -1);
  const keep = lead.map((d) => [0, d] as [number, number]);
  const none = lead.map(() => [0, 0] as [number, number]);
  const fill = scan.fill(x);
  const blocks = Math.ceil(n / block);
  const padded = blocks * block === n ? x : x.pad([...none, [0, blocks * block - n]], fill);
  const inner = scanLast(padded.reshape([...lead, blocks, block]), scan);
  // each block's total is its scan's last element; shifted one block later (fill first), their scan is
  // everything before each block
  const totals = inner.shrink([...keep, [0, blocks], [block - 1, block]]).reshape([...lead, blocks]);
  const before = scanLast(totals.pad([...none, [1, -1]], fill), scan);
  const out = scan.merge(inner, before.unsqueeze(-1)).reshape([...lead, blocks * block]);
  return blocks * block === n ? out : out.shrink([...keep, [0, n]]);
}

/** @internal The scans' table, for tests of the blocked path. */
export const SCANS = { prod: PROD, max: MAX, logsumexp: LOGSUMEXP } as const;

/**
 * x with `axis` moved last (a 0-d tensor as one element), and the map that moves a result's last axis back;
 * undefined when the axis is empty, which leaves nothing to scan.
 */
function toLast(op: string, x: Tensor, axis: number): [Tensor, (t: Tensor) => Tensor] | undefined {
  if (x.ndim === 0) {
    dimOf(op, x.shape, axis, 1);
    return [x.reshape([1]), (t) => t.reshape([])];
  }
  const a = dimOf(op, x.shape, axis);
  if (x.shape[a] === 0) return undefined;
  return a === x.ndim - 1 ? [x, (t) => t] : [x.transpose(a, -1), (t) => t.transpose(a, -1)];
}

/** The order-reversing map of a dtype (negation for floats, bitwise not for integers and bools); its own inverse. */
const reversed = (x: Tensor) => (x.dtype.isFloat ? x.neg() : x.bitwiseNot());

Tensor.prototype.cumprod = function (this: Tensor, axis = 0): Tensor {
  const x = this.dtype === dtypes.bool ? this.cast(dtypes.int32) : this;
  const moved = toLast('cumprod', x, axis);
  return moved ? moved[1](scanLast(moved[0], PROD)) : x;
};

/**
 * The running maximum along the axis and where it was last reached: at the latest record, an element at
 * least as large as all before it (it equals the running maximum there; a NaN once the maximum is NaN).
 * The indices are the running maximum of the records' positions.
 */
function cummax(op: string, t: Tensor, axis: number): [Tensor, Tensor] {
  const moved = toLast(op, t, axis);
  if (moved === undefined) return [t, Tensor.zeros(t.shape, { dtype: dtypes.int32, device: t.device })];
  const [x, back] = moved;
  const values = scanLast(x, MAX);
  const record = x.dtype.isFloat ? x.eq(values).bitwiseOr(x.isnan()) : x.eq(values);
  const positions = Tensor.arange(x.shape[x.ndim - 1]!, undefined, 1, { device: x.device });
  return [back(values), back(scanLast(record.where(positions, 0), MAX))];
}

Tensor.prototype.cummax = function (this: Tensor, axis = 0): [Tensor, Tensor] {
  return cummax('cummax', this, axis);
};

Tensor.prototype.cummin = function (this: Tensor, axis = 0): [Tensor, Tensor] {
  const [values, indices] = cummax('cummin', reversed(this), axis);
  return [reversed(values), indices];
};

Tensor.prototype.logcumsumexp = function (this: Tensor, axis = 0): Tensor {
  const x = this.toFloat();
  const moved = toLast('logcumsumexp', x, axis);
  return moved ? moved[1](scanLast(moved[0], LOGSUMEXP)) : x;
};
