// Run-time values: a kernel that differs from one seen before only in the constants its stored value computes
// with (a scale, a step size, a fill value) reads those constants from one-element buffers instead of
// compiling again. The first version of a kernel keeps its constants baked (and folded); a constant lifts once
// it has been seen with another value, so structural constants (indices, identities, decompositions) never do.
import { AddrSpace, type ConstValue, type DType, dtypes } from '../dtype.ts';
import { ContextVar } from '../helpers.ts';
import { LRU } from '../lru.ts';
import { ALU, Ops } from '../uop/ops.ts';
import { UOp } from '../uop/uop.ts';

/** 0 bakes every constant into its kernel (a compile per new value): for comparison and debugging. */
export const LIFT = new ContextVar<number>('LIFT', 1);

/** A kernel AST to compile and the constants it reads at run time, in the order of its extra buffer parameters. */
export interface KernelValues {
  ast: UOp;
  values: { value: ConstValue; dtype: DType }[];
}

/** Which of an AST's value constants were seen with more than one value, by its shape (the AST with all lifted). */
interface ShapeEntry {
  first: readonly ConstValue[];
  lifted: ReadonlySet<number>;
}
const shapes = new LRU<string, ShapeEntry>();

const isLiftable = (d: DType) =>
  d.count === 1 && (d.kind === 'float' || d.kind === 'int' || d.kind === 'uint');

/** Whether edge i of u carries a value (not an address, gate or loop bound). */
const valueEdge = (u: UOp, i: number) =>
  u.op === Ops.STORE ? i === 1 : u.op === Ops.REDUCE ? i === 0 : ALU.has(u.op) || u.op === Ops.BITCAST;

/** A constant operand: source `index` of node `user`. */
interface Use {
  user: UOp;
  index: number;
}

/**
 * The constants a kernel's stored values compute with, one per use in graph order (two equal constants are two
 * uses, so that kernels of one shape list them alike whatever their values): reached from a STORE's value
 * through elementwise ops and reduces, never through an index-typed node, a load or a range.
 */
function valueUses(ast: UOp): Use[] {
  const path = new Set<UOp>();
  const stack: UOp[] = [];
  const order = ast.toposort();
  for (const u of order) if (u.op === Ops.STORE) stack.push(u);
  while (stack.length) {
    const u = stack.pop()!;
    if (path.has(u) || u.dtype === dtypes.index || u.op === Ops.CONST) continue;
    if (u.op !== Ops.STORE && u.op !== Ops.REDUCE && !valueEdge(u, 0)) continue;
    path.add(u);
    u.src.forEach((s, i) => {
      if (valueEdge(u, i)) stack.push(s);
    });
  }
  const uses: Use[] = [];
  for (const user of order)
    if (path.has(user))
      user.src.forEach((s, index) => {
        if (s.op === Ops.CONST && isLiftable(s.dtype) && valueEdge(user, index)) uses.push({ user, index });
      });
  return uses;
}

/** A load of element 0 of the kernel's buffer parameter `slot`, one element of dtype d. */
function loadOf(slot: number, d: DType): UOp {
  const param = UOp.make(Ops.PARAM, [UOp.shapeVec([1])], { slot, dtype: d, addrspace: AddrSpace.GLOBAL });
  return UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [param, UOp.const(dtypes.index, 0)])]);
}

/** The AST with the constant uses at `positions` (ascending) read from buffer parameters nbufs, nbufs+1, ... */
function lift(ast: UOp, uses: readonly Use[], positions: readonly number[], nbufs: number): UOp {
  const loads = new Map<UOp, Map<number, UOp>>();
  positions.forEach((k, j) => {
    const { user, index } = uses[k]!;
    let m = loads.get(user);
    if (m === undefined) loads.set(user, (m = new Map()));
    m.set(index, loadOf(nbufs + j, user.src[index]!.dtype));
  });
  const out = new Map<UOp, UOp>();
  for (const u of ast.toposort()) {
    const m = loads.get(u);
    let src: UOp[] | undefined;
    for (let i = 0; i < u.src.length; i++) {
      const s = u.src[i]!;
      const r = m?.get(i) ?? out.get(s)!;
      if (r !== s && src === undefined) src = u.src.slice(0, i);
      src?.push(r);
    }
    out.set(u, src === undefined ? u : u.withSrc(src));
  }
  return out.get(ast)!;
}

/**
 * The AST to compile for a kernel with `nbufs` buffer parameters, and the values its extra parameters take:
 * the AST itself the first time its shape is seen and whenever its constants are those of that first time;
 * otherwise the version reading, at run time, every constant that has differed so far.
 */
export function kernelValues(ast: UOp, nbufs: number): KernelValues {
  if (LIFT.value === 0) return { ast, values: [] };
  const uses = valueUses(ast);
  if (uses.length === 0) return { ast, values: [] };
  const key = lift(ast, uses, [...uses.keys()], nbufs).key;
  const values = uses.map(({ user, index }) => user.src[index]!.constValue);
  let entry = shapes.get(key);
  if (entry === undefined) shapes.set(key, (entry = { first: values, lifted: new Set() }));
  const { first, lifted } = entry;
  const same = values.map((v, k) => Object.is(v, first[k]));
  if (same.every(Boolean)) return { ast, values: [] };
  if (same.some((s, k) => !s && !lifted.has(k)))
    shapes.set(
      key,
      (entry = { first, lifted: new Set([...lifted, ...same.flatMap((s, k) => (s ? [] : [k]))]) }),
    );
  const positions = [...entry.lifted].sort((a, b) => a - b);
  return {
    ast: lift(ast, uses, positions, nbufs),
    values: positions.map((k) => {
      const { user, index } = uses[k]!;
      return { value: values[k]!, dtype: user.src[index]!.dtype };
    }),
  };
}
