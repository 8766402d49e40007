// The shard axis of multi-device values: which axis is split across the devices of a device tuple.
import { type Device, GroupOp, Ops } from './ops.ts';
import type { UOp } from './uop.ts';

const isTuple = (d: Device | null | undefined): d is readonly string[] => Array.isArray(d);

/** The axis of u from its sources' axes (read from their _axis). */
export function axisOf(u: UOp): number | null {
  const a0 = u.src[0]?._axis ?? null;
  switch (u.op) {
    case Ops.BUFFER:
    case Ops.PARAM:
      return isTuple(u.device) ? 0 : null;
    case Ops.LOAD:
      // a LOAD that names no device is a contiguous copy in place (the spec's CONTIGUOUS): it keeps the axis
      if (u.argOf(Ops.LOAD)?.device === undefined) return a0;
      return isTuple(u.device) ? 0 : null;
    case Ops.COPY:
      // moving onto a device tuple shards along axis 0; onto one device gathers
      return isTuple(u.device) ? 0 : null;
    case Ops.PERMUTE:
      return a0 === null ? null : (u.arg as readonly number[]).indexOf(a0);
    case Ops.RESHAPE:
      return a0 === null ? null : reshapeAxis(u, a0);
    case Ops.REDUCE:
      return a0 !== null && u.argOf(Ops.REDUCE).axes.includes(a0) ? null : a0;
    case Ops.REPLICATED:
      return a0 !== null && (u.arg as readonly number[]).includes(a0) ? null : a0;
    case Ops.STACK:
      return a0 === null ? null : a0 + 1;
    case Ops.INDEX: {
      if (a0 === null) return null;
      const idx = u.src.slice(1);
      if (a0 < idx.length) return null;
      return a0 - idx.length + idx.reduce((n, i) => n + (i.shape?.length ?? 0), 0);
    }
    case Ops.CONST:
    case Ops.RANGE:
      return null;
  }
  if (GroupOp.Movement.has(u.op) || GroupOp.Marker.has(u.op) || u.op === Ops.AFTER || u.op === Ops.CAST)
    return a0;
  // elementwise: inherit from the first sharded source
  for (const s of u.src) if (s._axis !== null && s._axis !== undefined) return s._axis;
  return null;
}

/** The new axis that starts where the old shard axis started and still splits evenly across the devices. */
function reshapeAxis(u: UOp, axis: number): number {
  const from = u.src[0]!.shape!;
  const to = u.shape!;
  const n = isTuple(u.device) ? u.device.length : 1;
  let before = 1;
  for (let k = 0; k < axis; k++) before *= from[k] as number;
  let acc = 1;
  for (let k = 0; k < to.length; k++) {
    const size = to[k] as number;
    if (acc === before && size % n === 0 && size !== 1) return k;
    acc *= size;
  }
  throw new Error(
    `RESHAPE: cannot reshape (${from.join(', ')}) sharded on axis ${axis} to (${to.join(', ')}): no axis of the new shape keeps the shard boundary`,
  );
}
