// Memory planning: intermediate buffers whose lifetimes do not overlap share storage.
import type { DType } from '../dtype.ts';

export interface BufferUse {
  size: number;
  dtype: DType;
  /** Index of the first and last step that touches it. */
  first: number;
  last: number;
  /** Outputs outlive the call and never share. */
  output: boolean;
}

/**
 * Assigns each buffer a storage slot: buffers of one size and dtype reuse a slot whose previous user's last
 * step is before their first step. Returns the slot of each buffer and the number of slots.
 */
export function planMemory(uses: readonly BufferUse[]): { slotOf: number[]; slots: number } {
  const slotOf = new Array<number>(uses.length);
  const free: { key: string; slot: number; until: number }[] = [];
  let slots = 0;
  const order = uses.map((_, i) => i).sort((a, b) => uses[a]!.first - uses[b]!.first);
  for (const i of order) {
    const u = uses[i]!;
    const key = `${u.dtype.name}x${u.size}`;
    const at = u.output ? -1 : free.findIndex((f) => f.key === key && f.until < u.first);
    if (at >= 0) {
      slotOf[i] = free[at]!.slot;
      free[at]!.until = u.last;
    } else {
      slotOf[i] = slots++;
      if (!u.output) free.push({ key, slot: slotOf[i]!, until: u.last });
    }
  }
  return { slotOf, slots };
}
