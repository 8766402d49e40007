// Callify: the graph to realize becomes one stateless function over PARAMs (its input buffers), whose
// content key caches everything downstream: a structurally identical graph reuses the whole schedule.
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

export interface Callified {
  /** The function body: a SINK of the roots, with input buffers replaced by PARAM 0, 1, ... */
  body: UOp;
  /** The input BUFFERs, in PARAM order. */
  inputs: UOp[];
}

/** Replaces the realized buffers under `roots` by PARAMs numbered in order of first appearance. */
export function callify(roots: readonly UOp[]): Callified {
  const sink = UOp.sink(...roots);
  const inputs = sink.toposort().filter((u) => u.op === Ops.BUFFER);
  const params = new Map(
    inputs.map((b, slot) => {
      const { dtype, device } = b.arg as { dtype: UOp['dtype']; device: string };
      return [b, UOp.param(slot, dtype, b.shape!, device)];
    }),
  );
  return { body: substitute(sink, params), inputs };
}
