// Kernels as JSON, for lowering on another thread (src/runtime/lower-threads.ts): a UOp graph as a list of nodes
// (op, arg, sources by position, tag), sources first; DTypes by name, since a copy of a DType object would not be
// the one DType the IR compares by identity, and what JSON has no text for (NaN, -0, bigints, bytes) as marked
// objects. Text, as one string costs a thread little to copy and parse (a batch's graph of objects took the main
// thread 20 ms a thread to clone).
import { type AddrSpace, type DType, dtypeByName } from '../dtype.ts';
import type { Arg, Ops, Tag } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** A node: its op, its arg (encodeValue), its sources' positions in the list, its tag. */
export type EncodedNode = [Ops, unknown, number[], Tag];

/** A DType by name: its scalar, its vector width, and for a pointer its size and address space. */
interface EncodedDType {
  $dtype: [string, number, number?, AddrSpace?];
}

const isDType = (v: object): v is DType => 'itemsize' in v && 'kind' in v && 'name' in v;

/** `v` as JSON-safe data (decodeValue reverses it); throws on what it cannot give back as it was. */
export function encodeValue(v: unknown): unknown {
  switch (typeof v) {
    case 'number':
      return Number.isFinite(v) && !Object.is(v, -0) ? v : { $num: Object.is(v, -0) ? '-0' : String(v) };
    case 'bigint':
      return { $big: String(v) };
    case 'string':
    case 'boolean':
    case 'undefined':
      return v;
    case 'object':
      break;
    default:
      throw new Error(`cannot send a ${typeof v}`);
  }
  if (v === null) return v;
  if (v instanceof Uint8Array) return { $bytes: [...v] };
  if (Array.isArray(v)) return v.map(encodeValue);
  if (isDType(v)) {
    const ptr = v as DType & { pointee?: DType; size?: number; addrspace?: AddrSpace };
    const d = ptr.pointee ?? v;
    return { $dtype: ptr.pointee ? [d.base.name, d.count, ptr.size, ptr.addrspace] : [d.base.name, d.count] };
  }
  if (Object.getPrototypeOf(v) !== Object.prototype)
    throw new Error(`cannot send an instance of ${v.constructor?.name ?? 'a class'}`);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = encodeValue(x);
  return out;
}

export function decodeValue(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decodeValue);
  const o = v as Record<string, unknown>;
  if ('$dtype' in o) {
    const [name, count, size, addrspace] = (o as unknown as EncodedDType).$dtype;
    const d = dtypeByName(name).vec(count);
    return size === undefined ? d : d.ptr(size, addrspace);
  }
  if ('$num' in o) return Number(o.$num);
  if ('$big' in o) return BigInt(o.$big as string);
  if ('$bytes' in o) return Uint8Array.from(o.$bytes as number[]);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(o)) out[k] = decodeValue(x);
  return out;
}

export function encodeGraph(root: UOp): EncodedNode[] {
  const order = root.toposort();
  const at = new Map<UOp, number>();
  return order.map((u, i) => {
    at.set(u, i);
    return [u.op, encodeValue(u.arg), u.src.map((s) => at.get(s)!), u.tag];
  });
}

/** The graph encodeGraph gave: its last node. */
export function decodeGraph(nodes: readonly EncodedNode[]): UOp {
  const made: UOp[] = [];
  for (const [op, arg, src, tag] of nodes)
    made.push(
      UOp.make(
        op,
        src.map((i) => made[i]!),
        decodeValue(arg) as Arg,
        tag,
      ),
    );
  return made[made.length - 1]!;
}
