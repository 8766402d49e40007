// IF blocks: the gated stores of a LINEAR program that share a gate, and the work only they use, run inside one
// IF(gate) ... ENDIF instead of each store testing its gate. A block lies within one loop body (between two
// RANGE/END markers), so it nests inside the loops its gate and stores depend on, and it closes before the first
// instruction that uses something computed in it.
import { AddrSpace } from '../dtype.ts';
import { ALU, Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** Instructions that may run under a gate: they only compute a value (or store one, when gated). */
const MOVABLE: ReadonlySet<Ops> = new Set([...ALU, Ops.BITCAST, Ops.CONST, Ops.VCONST, Ops.INDEX, Ops.LOAD]);
const BOUNDARY: ReadonlySet<Ops> = new Set([Ops.RANGE, Ops.END, Ops.IF, Ops.ENDIF]);

/** A store to memory with a scalar gate (a register accumulator's first store declares it: it stays outside). */
function gateOf(u: UOp): UOp | undefined {
  if (u.op !== Ops.STORE || u.src.length !== 3) return undefined;
  let buf = u.src[0]!.src[0]!;
  while (buf.op === Ops.AFTER) buf = buf.src[0]!;
  if (buf.op !== Ops.PARAM || buf.argOf(Ops.PARAM).addrspace === AddrSpace.REG) return undefined;
  return u.src[2]!.isVector ? undefined : u.src[2]!;
}

/** The gate whose block each instruction of one loop body joins: its gated stores, and what only they use. */
function blockGates(body: readonly UOp[], users: ReadonlyMap<UOp, UOp[]>): Map<UOp, UOp> {
  const gates = new Map<UOp, UOp>();
  for (let i = body.length - 1; i >= 0; i--) {
    const u = body[i]!;
    const gate = gateOf(u);
    if (gate !== undefined) {
      gates.set(u, gate);
      continue;
    }
    const us = users.get(u);
    if (!MOVABLE.has(u.op) || us === undefined) continue;
    const g = gates.get(us[0]!);
    // a gate itself is read by its IF, outside the block
    if (g !== undefined && us.every((v) => gates.get(v) === g && gateOf(v) !== u)) gates.set(u, g);
  }
  return gates;
}

export function ifBlocks(linear: UOp): UOp {
  // most kernels gate no store: nothing to move
  if (!linear.src.some((u) => gateOf(u) !== undefined)) return linear;
  const users = new Map<UOp, UOp[]>();
  for (const u of linear.src) for (const s of new Set(u.src)) users.get(s)?.push(u) ?? users.set(s, [u]);
  const out: UOp[] = [];
  const replaced = new Map<UOp, UOp>();
  const emit = (u: UOp, src = u.src) => {
    const v = u.withSrc(src.map((s) => replaced.get(s) ?? s));
    replaced.set(u, v);
    out.push(v);
  };
  let blocks = 0;
  const closeBlock = (gate: UOp, members: readonly UOp[]) => {
    // tagged apart: two blocks under one gate are two nodes
    const open = UOp.make(Ops.IF, [replaced.get(gate) ?? gate], null, blocks++);
    out.push(open);
    // a store inside drops its gate: the IF tests it
    for (const u of members) emit(u, u.op === Ops.STORE ? u.src.slice(0, 2) : u.src);
    out.push(UOp.make(Ops.ENDIF, [open]));
  };

  let start = 0;
  for (let end = 0; end <= linear.src.length; end++) {
    const u = linear.src[end];
    if (u !== undefined && !BOUNDARY.has(u.op)) continue;
    const body = linear.src.slice(start, end);
    const gates = blockGates(body, users);
    /** Open blocks by gate, each with its members in program order. */
    const open = new Map<UOp, UOp[]>();
    const memberOf = new Map<UOp, UOp[]>();
    for (const x of body) {
      const g = gates.get(x);
      if (g !== undefined) {
        const members = open.get(g) ?? [];
        open.set(g, members);
        members.push(x);
        memberOf.set(x, members);
        continue;
      }
      // a block closes before its first use outside it
      for (const s of x.src) {
        const [members, gate] = [memberOf.get(s), gates.get(s)];
        if (members === undefined || gate === undefined || open.get(gate) !== members) continue;
        open.delete(gate);
        closeBlock(gate, members);
      }
      emit(x);
    }
    for (const [g, members] of open) closeBlock(g, members);
    if (u !== undefined) emit(u);
    start = end + 1;
  }
  return UOp.make(Ops.LINEAR, out);
}
