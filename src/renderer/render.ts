// The walk every source renderer shares: names for the instructions of a LINEAR program, loops, loads and
// stores; a Language supplies the text of each construct.
import { AddrSpace, type ConstValue, type DType, dtypes } from '../dtype.ts';
import { type ArgOf, GroupOp, Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

export interface KernelParam {
  slot: number;
  dtype: DType;
  /** The kernel stores into it. */
  written: boolean;
}

/** What a target language writes for each construct. Expressions come back parenthesized where needed. */
export interface Language {
  readonly name: string;
  /** A whole kernel from its name, buffer parameters and body lines. */
  kernel(name: string, params: readonly KernelParam[], body: readonly string[]): string;
  constant(v: ConstValue, dtype: DType): string;
  /** An elementwise op on rendered operands; `u` gives access to dtypes and bounds. */
  alu(u: UOp, args: readonly string[]): string;
  /** An element of buffer `data{slot}` (already converted to a value of its dtype). */
  read(slot: number, index: string, dtype: DType): string;
  /** Writes a value into an element of `data{slot}`. */
  write(slot: number, index: string, value: string, dtype: DType): string;
  declare(name: string, dtype: DType, expr: string): string;
  /** A mutable scalar (an accumulator). */
  variable(name: string, dtype: DType): string;
  assign(name: string, expr: string): string;
  loopOpen(name: string, bound: string): string;
  readonly loopClose: string;
  when(gate: string, statement: string): string;
}

/** Where an INDEX points: element `index` of buffer slot, or a register variable. */
type Place = { kind: 'global'; slot: number; index: string; dtype: DType } | { kind: 'reg'; name: string };

/** Renders a LINEAR program as one kernel named `name`. */
export function render(lang: Language, name: string, linear: UOp): string {
  const names = new Map<UOp, string>();
  const places = new Map<UOp, Place>();
  const params = new Map<number, KernelParam>();
  const lines: string[] = [];
  let depth = 1;
  const counters = new Map<string, number>();
  const fresh = (prefix: string) => {
    const n = counters.get(prefix) ?? 0;
    counters.set(prefix, n + 1);
    return `${prefix}${n}`;
  };
  const emit = (line: string) => lines.push(`${'  '.repeat(depth)}${line}`);
  const ref = (u: UOp): string => {
    if (u.op === Ops.CONST) return lang.constant(u.constValue, u.dtype);
    const n = names.get(u);
    if (n === undefined)
      throw new Error(`render ${lang.name}: ${opName(u.op)} #${u.id} is used before it is computed`);
    return n;
  };
  const bufferOf = (u: UOp): UOp => (u.op === Ops.AFTER ? bufferOf(u.src[0]!) : u);
  const place = (idx: UOp): Place => {
    const p = places.get(idx);
    if (p === undefined) throw new Error(`render ${lang.name}: LOAD/STORE must go through an INDEX`);
    return p;
  };
  const readPlace = (p: Place) => (p.kind === 'reg' ? p.name : lang.read(p.slot, p.index, p.dtype));

  for (const u of linear.src) {
    switch (u.op) {
      case Ops.CONST:
      case Ops.STACK:
        continue;
      case Ops.PARAM: {
        const a = u.arg as ArgOf<Ops.PARAM>;
        if (a.addrspace === AddrSpace.REG) {
          const n = fresh('acc');
          names.set(u, n);
          emit(lang.variable(n, a.dtype));
        } else if (typeof a.slot === 'number')
          params.set(a.slot, { slot: a.slot, dtype: a.dtype, written: false });
        else throw new Error(`render ${lang.name}: symbolic variables are not supported yet (${a.slot})`);
        continue;
      }
      case Ops.AFTER:
        if (names.has(u.src[0]!)) names.set(u, names.get(u.src[0]!)!);
        continue;
      case Ops.INDEX: {
        const buf = bufferOf(u.src[0]!);
        const a = buf.arg as ArgOf<Ops.PARAM>;
        places.set(
          u,
          a.addrspace === AddrSpace.REG
            ? { kind: 'reg', name: names.get(buf)! }
            : { kind: 'global', slot: a.slot as number, index: ref(u.src[1]!), dtype: a.dtype },
        );
        continue;
      }
      case Ops.LOAD: {
        const p = place(u.src[0]!);
        const value =
          u.src.length === 3 ? `(${ref(u.src[2]!)} ? ${readPlace(p)} : ${ref(u.src[1]!)})` : readPlace(p);
        const n = fresh('val');
        names.set(u, n);
        emit(lang.declare(n, u.dtype, value));
        continue;
      }
      case Ops.STORE: {
        const p = place(u.src[0]!);
        let statement: string;
        if (p.kind === 'reg') statement = lang.assign(p.name, ref(u.src[1]!));
        else {
          params.get(p.slot)!.written = true;
          statement = lang.write(p.slot, p.index, ref(u.src[1]!), p.dtype);
        }
        emit(u.src.length === 3 ? lang.when(ref(u.src[2]!), statement) : statement);
        continue;
      }
      case Ops.RANGE: {
        const n = `ridx${(u.arg as ArgOf<Ops.RANGE>).id}`;
        names.set(u, n);
        emit(lang.loopOpen(n, ref(u.src[0]!)));
        depth++;
        continue;
      }
      case Ops.GROUP: // only orders the stores expand made: they are already emitted
        continue;
      case Ops.END:
        for (let i = 1; i < u.src.length; i++) {
          depth--;
          emit(lang.loopClose);
        }
        continue;
    }
    // BITCAST is a movement op in the spec, but in a kernel it reinterprets one scalar: an elementwise op
    if (
      GroupOp.Unary.has(u.op) ||
      GroupOp.Binary.has(u.op) ||
      GroupOp.Ternary.has(u.op) ||
      u.op === Ops.BITCAST
    ) {
      const n = fresh('alu');
      names.set(u, n);
      emit(lang.declare(n, u.dtype, lang.alu(u, u.src.map(ref))));
      continue;
    }
    throw new Error(`render ${lang.name}: no rendering for ${opName(u.op)}`);
  }
  const ordered = [...params.values()].sort((a, b) => a.slot - b.slot);
  return lang.kernel(name, ordered, lines);
}

/** Whether both operands of an integer IDIV/MOD are provably non-negative (then / and % are floor ops). */
export const nonNegativeDivision = (u: UOp) => u.src[0]!.vmin >= 0 && u.src[1]!.vmin > 0;

/** The largest value an index expression of the program takes (to pick the index type). */
export function maxIndex(linear: UOp): number {
  let m = 0;
  for (const u of linear.src)
    if (u.dtype === dtypes.index) m = Math.max(m, Math.abs(u.vmin), Math.abs(u.vmax));
  return m;
}
