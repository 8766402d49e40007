// Writes through views: a value assigned to a view (movement ops over a buffer) becomes the buffer's new value,
// each written element in its place and the others as they were (tinygrad's setitem semantics).
import { dtypes } from '../dtype.ts';
import { GroupOp, Ops, opName } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';
import { MOVEMENT_BACK } from './autograd.ts';

const BACK: Partial<Record<Ops, (u: UOp, x: UOp) => UOp>> = MOVEMENT_BACK;

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

/** Whether u is a buffer (or a pending assign to one): a realized base, written at once. */
export const isBufferBase = (u: UOp) =>
  u.op === Ops.BUFFER || (u.op === Ops.AFTER && u.src[0]!.op === Ops.BUFFER);

const viewsBufferMemo = new WeakMap<UOp, boolean>();

/**
 * Whether u is movement ops over a buffer base (viewChain(u, isBufferBase) finds one), remembered per node: a
 * chain of views asks this once per view, and walking the whole chain each time would be quadratic.
 */
export function viewsBuffer(u: UOp): boolean {
  const walked: UOp[] = [];
  let x = u;
  let found: boolean | undefined;
  for (;;) {
    found = viewsBufferMemo.get(x);
    if (found !== undefined) break;
    if (!GroupOp.Movement.has(x.op) || x.op === Ops.BITCAST) {
      found = false;
      break;
    }
    walked.push(x);
    x = x.src[0]!;
    if (isBufferBase(x)) {
      found = true;
      break;
    }
  }
  for (const w of walked) viewsBufferMemo.set(w, found);
  return found;
}

/** The movement ops from `view` down to `base` (the view's own first), or undefined if they do not lead there. */
export function viewChain(view: UOp, base: (u: UOp) => boolean): UOp[] | undefined {
  const chain: UOp[] = [];
  let u = view;
  while (!base(u)) {
    if (!GroupOp.Movement.has(u.op) || u.op === Ops.BITCAST) return undefined;
    chain.push(u);
    u = u.src[0]!;
  }
  return chain.length ? chain : undefined;
}

/**
 * The write of `value` into `view` as a write of its base (a buffer, or the lazy graph `lazyBase` of the
 * tensor the view was made from), or undefined when the view is not movement ops over one. An expanded
 * (broadcast) view throws: its elements share memory, so a write to one would be a write to all.
 */
export function writeThrough(view: UOp, value: UOp, lazyBase?: UOp): ViewWrite | undefined {
  const chain = viewChain(view, (u) => isBufferBase(u) || u === lazyBase);
  if (chain === undefined) return undefined;
  const base = chain.at(-1)!.src[0]!;
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
