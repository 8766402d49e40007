// Fold views, a schedule pass: each movement op folds into the view below it, so that a run of reshapes, of
// expands, of pads and shrinks, or of permutes and flips becomes one or two ops, and a chain of 100,000 views
// costs no more to rangeify and lower than one. (Done on the function's body, not as tensors are built: a
// tensor that is a view may be a gradient target or an assign's destination, which needs its node kept.)
import { Ops } from '../uop/ops.ts';
import { graphRewrite, PatternMatcher, UPat } from '../uop/pattern.ts';
import type { UOp } from '../uop/uop.ts';

/** The sizes of a shape operand or of a shape, when all are numbers (symbolic sizes are left alone). */
function numbers(s: readonly unknown[] | null): number[] | undefined {
  return s?.every((d) => typeof d === 'number') ? (s as number[]) : undefined;
}
const same = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);
/** A view folding may look through: untagged (a tag marks a node a later pass looks for). */
const plain = (u: UOp, op: Ops) => u.op === op && u.tag === null;

// Each fold*(u, ...) is the op made over u, folded into u; undefined where u is no view it folds into.

function foldReshape(u: UOp, shape: readonly number[]): UOp | undefined {
  if (!plain(u, Ops.RESHAPE)) return undefined;
  const x = u.src[0]!;
  const base = numbers(x.shape);
  return base !== undefined && same(base, shape) ? x : x.reshape(shape);
}

function foldExpand(u: UOp, shape: readonly number[]): UOp | undefined {
  return plain(u, Ops.EXPAND) ? u.src[0]!.expand(shape) : undefined;
}

/** x flipped along the flagged axes (x itself for none), folded into a flip below. */
function flipped(x: UOp, axes: readonly boolean[]): UOp {
  return axes.some(Boolean) ? (foldFlip(x, axes) ?? x.flip(axes)) : x;
}

function foldFlip(u: UOp, axes: readonly boolean[]): UOp | undefined {
  if (!plain(u, Ops.FLIP)) return undefined;
  const inner = u.argOf(Ops.FLIP);
  return flipped(
    u.src[0]!,
    axes.map((f, i) => f !== inner[i]),
  );
}

/** Permutes compose; a permute of a flip is a flip of the permute (its flags permuted), so runs of both fold. */
function foldPermute(u: UOp, order: readonly number[]): UOp | undefined {
  if (plain(u, Ops.PERMUTE)) {
    const inner = u.argOf(Ops.PERMUTE);
    const composed = order.map((a) => inner[a]!);
    const x = u.src[0]!;
    return composed.every((a, i) => a === i) ? x : x.permute(composed);
  }
  if (!plain(u, Ops.FLIP)) return undefined;
  const x = u.src[0]!;
  const flags = u.argOf(Ops.FLIP);
  return flipped(
    foldPermute(x, order) ?? x.permute(order),
    order.map((a) => flags[a]!),
  );
}

/** x placed at offset in a zero-filled shape (x itself when that is no change), folded into a pad below. */
function padded(x: UOp, offset: readonly number[], shape: readonly number[]): UOp {
  return foldPad(x, offset, shape) ?? x.pad(offset, shape);
}

function foldPad(u: UOp, offset: readonly number[], shape: readonly number[]): UOp | undefined {
  const own = numbers(u.shape);
  if (own !== undefined && offset.every((o) => o === 0) && same(own, shape)) return u;
  if (!plain(u, Ops.PAD)) return undefined;
  const inner = numbers(u.src[1]!.sizes);
  if (inner === undefined) return undefined;
  return padded(
    u.src[0]!,
    inner.map((o, i) => o + offset[i]!),
    shape,
  );
}

/** The part of x at offset of shape (x itself when that is all of it), folded into a shrink below. */
function shrunk(x: UOp, offset: readonly number[], shape: readonly number[]): UOp {
  return foldShrink(x, offset, shape) ?? x.shrink(offset, shape);
}

/**
 * Shrinks compose; a shrink of a pad keeps the part of the padded value that lies inside it, padded back to the
 * shrink's shape (pads outside shrinks: the normal form a run of both folds into).
 */
function foldShrink(u: UOp, offset: readonly number[], shape: readonly number[]): UOp | undefined {
  const own = numbers(u.shape);
  if (own !== undefined && offset.every((o) => o === 0) && same(own, shape)) return u;
  if (!(plain(u, Ops.SHRINK) || plain(u, Ops.PAD))) return undefined;
  const x = u.src[0]!;
  const at = numbers(u.src[1]!.sizes);
  if (at === undefined) return undefined;
  if (u.op === Ops.SHRINK)
    return shrunk(
      x,
      at.map((o, i) => o + offset[i]!),
      shape,
    );
  const inside = numbers(x.shape);
  if (inside === undefined) return undefined;
  // the kept window [offset, offset + shape) meets x, placed at `at`, in [lo, hi) per axis
  // (an axis where they do not meet keeps none of x: x shrinks to size 0 there, all of the result is padding)
  const lo = offset.map((o, i) => Math.max(o, at[i]!));
  const hi = offset.map((o, i) => Math.min(o + shape[i]!, at[i]! + inside[i]!));
  const meets = lo.map((l, i) => l < hi[i]!);
  return padded(
    shrunk(
      x,
      lo.map((l, i) => (meets[i] ? l - at[i]! : 0)),
      lo.map((l, i) => (meets[i] ? hi[i]! - l : 0)),
    ),
    lo.map((l, i) => (meets[i] ? l - offset[i]! : 0)),
    shape,
  );
}

/** Each rule folds a movement op (its source already folded) into that source, where it applies. */
const sized = (u: UOp, i: number) => numbers(u.src[i]!.sizes);
const rules = new PatternMatcher([
  [
    UPat.op(Ops.RESHAPE, undefined, 'u'),
    ({ u }) => {
      const shape = sized(u!, 1);
      return shape && foldReshape(u!.src[0]!, shape);
    },
  ],
  [
    UPat.op(Ops.EXPAND, undefined, 'u'),
    ({ u }) => {
      const shape = sized(u!, 1);
      return shape && foldExpand(u!.src[0]!, shape);
    },
  ],
  [UPat.op(Ops.PERMUTE, undefined, 'u'), ({ u }) => foldPermute(u!.src[0]!, u!.argOf(Ops.PERMUTE))],
  [UPat.op(Ops.FLIP, undefined, 'u'), ({ u }) => foldFlip(u!.src[0]!, u!.argOf(Ops.FLIP))],
  [
    UPat.op([Ops.PAD, Ops.SHRINK], undefined, 'u'),
    ({ u }) => {
      const [offset, shape] = [sized(u!, 1), sized(u!, 2)];
      if (offset === undefined || shape === undefined) return undefined;
      return (u!.op === Ops.PAD ? foldPad : foldShrink)(u!.src[0]!, offset, shape);
    },
  ],
]);

/** The graph with every run of movement ops folded (see above); values unchanged. */
export function foldViews(root: UOp): UOp {
  return graphRewrite(root, rules, { name: 'fold views' });
}
