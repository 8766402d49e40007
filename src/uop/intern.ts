// The hash-cons table: finds the live node equal to (op, src, arg, tag), holding every node weakly.
import { type Arg, type ArgOf, Ops, type Tag } from './ops.ts';
import type { UOp } from './uop.ts';

// Buckets are keyed by a 32-bit hash (numbers hash far faster than built strings). A node lives as long as
// someone else holds it; V8 keeps every weakly held object alive until the current job ends, so memory
// comes back at the next await, not inside one synchronous loop.
type Bucket = WeakRef<UOp> | WeakRef<UOp>[];
const buckets = new Map<number, Bucket>();
let live = 0;
const reclaim = new FinalizationRegistry<number>((h) => {
  const b = buckets.get(h);
  if (b === undefined) return;
  const refs = Array.isArray(b) ? b : [b];
  const kept = refs.filter((r) => r.deref() !== undefined);
  live -= refs.length - kept.length;
  if (kept.length === 0) buckets.delete(h);
  else buckets.set(h, kept.length === 1 ? kept[0]! : kept);
});

/** How many nodes the table holds (live, or dead and not yet reclaimed). */
export const internedCount = (): number => live;

const mix = (h: number, x: number) => {
  h = Math.imul(h ^ x, 0x5bd1e995);
  return h ^ (h >>> 15);
};

const f64 = new Float64Array(1);
const f64Words = new Int32Array(f64.buffer);

function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h;
}

function hashValue(v: ArgOf<Ops.CONST>['value']): number {
  if (typeof v === 'number') {
    if ((v | 0) === v && !Object.is(v, -0)) return v;
    f64[0] = v;
    return mix(f64Words[0]!, f64Words[1]!);
  }
  return typeof v === 'boolean' ? (v ? 0x7a11 : 0x7a10) : hashString(String(v));
}

/** The hash of a node's identity; `argKey` is the arg's content text (unused for CONST and null args). */
export function identityHash(op: Ops, src: readonly UOp[], arg: Arg, argKey: string, tag: Tag): number {
  let h = mix(0x9e3779b9, op);
  if (arg !== null) {
    const c = arg as ArgOf<Ops.CONST>;
    // a BUFFER's slot tells it apart (its key text, ~50 characters, was hashed for every realize's result)
    h = mix(
      h,
      argKey === ''
        ? mix(hashValue(c.value), hashString(c.dtype.name))
        : op === Ops.BUFFER
          ? hashValue((arg as ArgOf<Ops.BUFFER>).slot)
          : hashString(argKey),
    );
  }
  if (tag !== null) h = mix(h, typeof tag === 'number' ? tag : hashString(tag));
  for (let i = 0; i < src.length; i++) h = mix(h, src[i]!.id);
  return h;
}

function sameIdentity(u: UOp, op: Ops, src: readonly UOp[], arg: Arg, argKey: string, tag: Tag): boolean {
  if (u.op !== op || u.tag !== tag || u.src.length !== src.length) return false;
  for (let i = 0; i < src.length; i++) if (u.src[i] !== src[i]) return false;
  if (u.arg === arg) return true;
  if (argKey !== '') return u._argKey === argKey;
  const a = u.arg as ArgOf<Ops.CONST> | null;
  const b = arg as ArgOf<Ops.CONST> | null;
  return a !== null && b !== null && a.dtype === b.dtype && Object.is(a.value, b.value);
}

// A small direct-mapped cache of recent nodes, held strongly: most lookups that hit find their node here,
// which skips WeakRef.deref (each deref pins its target for the rest of the job). It is emptied when the
// job's microtasks run, so that it never keeps a dropped graph (and the buffers under it) alive past an await.
export const RECENT = 4096;
const recent = new Array<UOp | undefined>(RECENT);
/**
 * The slots filled since the last clearing, while they are fewer than RECENT (past that the whole cache is
 * cleared): an eager op awaited between calls fills a few dozen, and clearing all 4096 was a quarter of its cost.
 */
const filled = new Int32Array(RECENT);
let filledCount = 0;
let clearing = false;
function remember(h: number, u: UOp): void {
  const slot = h & (RECENT - 1);
  recent[slot] = u;
  if (filledCount < RECENT) filled[filledCount] = slot;
  filledCount++;
  if (clearing) return;
  clearing = true;
  // a promise reaction, not queueMicrotask: it exists in every JS context, bare ones included
  void Promise.resolve().then(clearRecent);
}
function clearRecent(): void {
  if (filledCount >= RECENT) recent.fill(undefined);
  else for (let i = 0; i < filledCount; i++) recent[filled[i]!] = undefined;
  filledCount = 0;
  clearing = false;
}

export function lookup(
  h: number,
  op: Ops,
  src: readonly UOp[],
  arg: Arg,
  argKey: string,
  tag: Tag,
): UOp | undefined {
  const r = recent[h & (RECENT - 1)];
  if (r !== undefined && sameIdentity(r, op, src, arg, argKey, tag)) return r;
  const b = buckets.get(h);
  if (b === undefined) return undefined;
  if (!Array.isArray(b)) {
    const u = b.deref();
    if (u === undefined || !sameIdentity(u, op, src, arg, argKey, tag)) return undefined;
    remember(h, u);
    return u;
  }
  for (const r of b) {
    const u = r.deref();
    if (u !== undefined && sameIdentity(u, op, src, arg, argKey, tag)) {
      remember(h, u);
      return u;
    }
  }
  return undefined;
}

export function insert(h: number, u: UOp): void {
  const ref = new WeakRef(u);
  const b = buckets.get(h);
  if (b === undefined) buckets.set(h, ref);
  else if (Array.isArray(b)) b.push(ref);
  else buckets.set(h, [b, ref]);
  live++;
  reclaim.register(u, h);
  remember(h, u);
}
