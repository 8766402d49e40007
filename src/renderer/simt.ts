// The SIMT emulator's "source": a LINEAR program written out as JSON, one entry per instruction, which
// src/runtime/simt.ts reads back and steps through with all threads of a workgroup at once.
import type { ConstValue } from '../dtype.ts';
import { AddrSpace } from '../dtype.ts';
import type { SimtArg, SimtInstruction, SimtProgram } from '../runtime/simt.ts';
import { Ops, opName } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';

/** What JSON cannot hold (bigints, infinities, NaN, -0) travels as a string: digits, `Infinity`, `-0`. */
const constant = (v: ConstValue) =>
  typeof v === 'bigint' || (typeof v === 'number' && (!Number.isFinite(v) || Object.is(v, -0)))
    ? Object.is(v, -0)
      ? '-0'
      : String(v)
    : v;

function argOf(u: UOp): SimtArg | undefined {
  switch (u.op) {
    case Ops.CONST:
      return { value: constant(u.constValue) };
    case Ops.PARAM: {
      const a = u.argOf(Ops.PARAM);
      if (typeof a.slot !== 'number')
        throw new Error(`render SIMT: symbolic variables are not supported yet (${a.slot})`);
      const size = u.src[0]!.sizes[0];
      if (typeof size !== 'number')
        throw new Error('render SIMT: buffers of symbolic size are not supported yet');
      return { slot: a.slot, dtype: a.dtype.name, addrspace: a.addrspace ?? AddrSpace.GLOBAL, size };
    }
    case Ops.SPECIAL:
      return { name: u.argOf(Ops.SPECIAL) };
    case Ops.RANGE:
      return { id: u.argOf(Ops.RANGE).id };
    case Ops.VCONST:
      return { values: u.argOf(Ops.VCONST).values.map(constant) };
    case Ops.WMMA:
      return { tensorCore: u.argOf(Ops.WMMA).name, lanes: u.lanes };
    case Ops.LOAD: {
      const matrix = u.argOf(Ops.LOAD)?.matrix;
      if (matrix !== undefined) return { lanes: u.lanes, transposed: matrix.trans };
      const tile = u.argOf(Ops.LOAD)?.tile;
      if (tile !== undefined) {
        const buf = u.src[0]!.src[0]!;
        const swizzle = (buf.op === Ops.AFTER ? buf.src[0]! : buf).argOf(Ops.PARAM).swizzle;
        if (swizzle === undefined)
          throw new Error('render SIMT: a tile load from a LOCAL buffer without a swizzle');
        return { lanes: u.lanes, tile, swizzle };
      }
      return u.lanes > 1 ? { lanes: u.lanes } : undefined;
    }
    case Ops.STACK:
      // an index STACK is a shape, not a value
      return u.dtype.name === 'index' ? undefined : { lanes: u.lanes };
    default:
      return u.lanes > 1 ? { lanes: u.lanes } : undefined;
  }
}

/** The LINEAR program `linear`, as the SIMT device reads it. */
export function renderSIMT(name: string, linear: UOp): string {
  const position = new Map<UOp, number>();
  const instructions: SimtInstruction[] = [];
  for (const u of linear.src) {
    position.set(u, instructions.length);
    const src = u.src.map((s) => {
      const p = position.get(s);
      // a PARAM's or RANGE's size operand outside the list is only its shape
      return p ?? -1;
    });
    const arg = argOf(u);
    instructions.push(
      arg === undefined ? [opName(u.op), u.dtype.name, src] : [opName(u.op), u.dtype.name, src, arg],
    );
  }
  return JSON.stringify({ name, instructions } satisfies SimtProgram);
}
