// A first look at the IR: build a kernel-style index expression, simplify it, and print both.
import { AxisType, dtypes, printGraph, toCode, UOp } from '../src/index.ts';

// The flat index of element (row, col) of a 16x16 tile, read through a reshape to (4, 4, 16) and back:
// ((row*16 + col) // 64) * 64 + ((row*16 + col) % 64). It is just row*16 + col.
const row = UOp.range(16, 0, AxisType.GLOBAL);
const col = UOp.range(16, 1, AxisType.LOOP);
const flat = row.mul(16).add(col);
const idx = flat.idiv(64).mul(64).add(flat.mod(64));
// a bounds check that interval analysis decides: the index never reaches 256
const valid = idx.lt(256);
const expr = UOp.sink(valid.where(idx, UOp.const(dtypes.index, 0)));

const simple = expr.simplify();
console.log(`before: ${expr.toposort().length} nodes\n${printGraph(expr)}\n`);
console.log(`after: ${simple.toposort().length} nodes\n${printGraph(simple)}\n`);
console.log(`interval of the index: [${simple.src[0]!.vmin}, ${simple.src[0]!.vmax}]\n`);
console.log(`as TypeScript that rebuilds it:\n${toCode(simple)}`);
