// Writes through views: a value assigned to a view (movement ops over a buffer) becomes the buffer's new value,
// each written element in its place and the others as they were (tinygrad's setitem semantics).
import { dtypes } from '../dtype.ts';
import { GroupOp, Ops, opName } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** Each movement op run backwards: from its output's shape to its source's (the gradient rules' maps). */
const BACK: Partial<Record<Ops, (u: UOp, x: UOp) => UOp>> = {
  [Ops.RESHAPE]: (u, x) => x.reshape(u.src[0]!.shape!),
  [Ops.PERMUTE]: (u, x) => {
    const inverse: number[] = [];
    u.argOf(Ops.PERMUTE).forEach((a, i) => {
      inverse[a] = i;
    });
    return x.permute(inverse);
  },
  [Ops.FLIP]: (u, x) => x.flip(u.argOf(Ops.FLIP)),
  [Ops.SHRINK]: (u, x) => x.pad(u.src[1]!.sizes, u.src[0]!.shape!),
  [Ops.PAD]: (u, x) => x.shrink(u.src[1]!.sizes, u.src[0]!.shape!),
};

export interface ViewWrite {
  /** The buffer written (a BUFFER, or the AFTER of a pending assign to one). */
  base: UOp;
  /** The base's new value. */
  value: UOp;
  /** Where the base is written (bool, the base's shape). */
  written: UOp;
  /** Whether the view may hold padding (elements outside the base, which a write cannot reach). */
  padded: boolean;
}

/**
 * The write of `value` into `view` as a write of its base buffer, or undefined when the view is not movement
 * ops over a buffer (a computed value, which assign simply replaces). An expanded (broadcast) view throws:
 * its elements share memory, so a write to one would be a write to all.
 */
export function writeThrough(view: UOp, value: UOp): ViewWrite | undefined {
  const chain: UOp[] = [];
  let base = view;
  while (GroupOp.Movement.has(base.op) && base.op !== Ops.BITCAST) {
    chain.push(base);
    base = base.src[0]!;
  }
  if (
    chain.length === 0 ||
    !(base.op === Ops.BUFFER || (base.op === Ops.AFTER && base.src[0]!.op === Ops.BUFFER))
  )
    return undefined;
  for (const u of chain)
    if (BACK[u.op] === undefined)
      throw new Error(
        `assign: cannot write through ${u.op === Ops.EXPAND ? 'an expanded (broadcast) view' : `a ${opName(u.op)} view`} (${u.shape!.join(', ')}): ${u.op === Ops.EXPAND ? 'its elements share memory, so ' : ''}assign to the tensor it views, or make this one contiguous() first`,
      );
  let placed = value;
  let written = UOp.const(dtypes.bool, true)
    .reshape(view.shape!.map(() => 1))
    .expand(view.shape!);
  for (const m of chain) {
    placed = BACK[m.op]!(m, placed);
    written = BACK[m.op]!(m, written);
  }
  return { base, value: written.where(placed, base), written, padded: chain.some((m) => m.op === Ops.PAD) };
}
