// The TC opt: a kernel's sum of products (matmul, conv) computed by a tensor core. The output axes M (read by
// the first factor only) and N (the second only) and the reduce axis K are cut into tiles of the tensor core's
// (m, n, k); the tile's positions become a WARP axis (the 32 lanes of a warp) and the elements each lane holds,
// which are the WMMA's vector operands: A's and B's elements (UNROLL in effect: gathered by the operand layouts)
// and C's (UPCAST in effect: each lane stores its elements of the output tile). What is left of the axes (tiles)
// keeps its type, and the opts after TC split them further.

import type { DType } from '../../dtype.ts';
import { elementsOf, type OperandLayout, type TensorCore } from '../../runtime/tensor-cores.ts';
import { AxisType, Ops } from '../../uop/ops.ts';
import { substitute } from '../../uop/pattern.ts';
import { UOp } from '../../uop/uop.ts';
import { constSize, kernelRanges, padAxis, rangeArg } from './axes.ts';

/** `opt` from this value up pads axes to the tile (as tinygrad's TC_OPT=2); below it they must be multiples. */
export const TC_PADS = 2;

/** The kernel's one sum of products, its factors and axes, found for a tensor core. */
interface Match {
  tc: TensorCore;
  reduce: UOp;
  /** The factors as the tensor core reads them (below the casts to the product's dtype). */
  a: UOp;
  b: UOp;
  /** The axes: M (read by a only), N (by b only), K (the reduce axis, read by both). */
  m: UOp;
  n: UOp;
  k: UOp;
  /** The END whose body stores the output: it closes M and N. */
  end: UOp;
}

const reads = (u: UOp, r: UOp) => u.toposort().includes(r);
const isOutput = (r: UOp) => [AxisType.GLOBAL, AxisType.LOOP].includes(rangeArg(r).type);

/** The reduce's value as a product of two factors, a gate on it (a padded K's WHERE) folded into the first. */
function factors(reduce: UOp): [UOp, UOp] | undefined {
  let v = reduce.src[0]!;
  let gate: UOp | undefined;
  if (v.op === Ops.WHERE && v.src[2]!.op === Ops.CONST && Number(v.src[2]!.constValue) === 0) {
    gate = v.src[0]!;
    v = v.src[1]!;
  }
  if (v.op === Ops.CAST) v = v.src[0]!;
  if (v.op !== Ops.MUL) return undefined;
  const [a, b] = v.src as [UOp, UOp];
  return [gate === undefined ? a : gate.where(a, a.constLike(0)), b];
}

/** A factor as a tensor core taking `dtype` reads it: itself, or what a cast to the product's dtype converts. */
function asInput(x: UOp, dtype: DType): UOp | undefined {
  if (x.dtype === dtype) return x;
  if (x.op === Ops.CAST && x.src[0]!.dtype === dtype) return x.src[0]!;
  if (x.op === Ops.WHERE && x.src[2]!.op === Ops.CONST) {
    // a gated factor (a padded K): the gate stays around the value the tensor core reads
    const inner = asInput(x.src[1]!, dtype);
    return inner === undefined ? undefined : x.src[0]!.where(inner, inner.constLike(0));
  }
  return undefined;
}

/** The tensor core and axes for TC on reduce axis `axis`, or why there are none. */
export function matchTensorCore(
  ast: UOp,
  axis: number,
  choice: number,
  cores: readonly TensorCore[],
): Match | string {
  const ranges = kernelRanges(ast);
  const k = ranges[axis];
  if (k === undefined || rangeArg(k).type !== AxisType.REDUCE)
    return `axis ${axis} is not a REDUCE axis (TC takes the reduce axis its tensor core sums over)`;
  const reduces = ast.toposort().filter((u) => u.op === Ops.REDUCE);
  if (reduces.length !== 1) return `the kernel has ${reduces.length} reduces; TC takes a kernel with one`;
  const reduce = reduces[0]!;
  if (reduce.argOf(Ops.REDUCE).op !== Ops.ADD || !reduce.src.includes(k))
    return `the kernel's reduce is not a sum over axis ${axis}`;
  const ab = factors(reduce);
  if (ab === undefined) return 'the reduced value is not a product of two factors (a matmul or conv)';
  const inputs = (tc: TensorCore) => ab.map((x) => asInput(x, tc.dtypeIn));
  const fits = (tc: TensorCore) => inputs(tc).every((x) => x !== undefined) && reduce.dtype === tc.dtypeOut;
  const tc = choice === -1 ? cores.find(fits) : cores[choice];
  const names = cores.map((c, i) => `${i}: ${c.name}`).join(', ');
  const what = `${ab[0].dtype.name} x ${ab[1].dtype.name} summed in ${reduce.dtype.name}`;
  if (tc === undefined)
    return choice === -1
      ? `no tensor core takes ${what} (the target has ${names})`
      : `tc ${choice} does not exist (the target has ${names})`;
  if (!fits(tc))
    return `${tc.name} takes ${tc.dtypeIn.name} factors summed in ${tc.dtypeOut.name}, not ${what}`;
  const [a, b] = inputs(tc) as [UOp, UOp];
  if (!reads(a, k) || !reads(b, k)) return `both factors must read the reduce axis ${axis}`;
  // the innermost output axes of each factor alone, one that is a multiple of the tile before one to pad
  const only = (x: UOp, y: UOp, tile: number) => {
    const axes = ranges.filter(
      (r) => isOutput(r) && constSize(r) !== undefined && reads(x, r) && !reads(y, r),
    );
    return axes.filter((r) => constSize(r)! % tile === 0).at(-1) ?? axes.at(-1);
  };
  const [m, n] = [only(a, b, tc.m), only(b, a, tc.n)];
  if (m === undefined || n === undefined)
    return 'each factor needs an output axis the other does not read (the rows of A, the columns of B)';
  const ends = ast.toposort().filter((u) => u.op === Ops.END && (u.src.includes(m) || u.src.includes(n)));
  if (ends.length !== 1 || !ends[0]!.src.includes(m) || !ends[0]!.src.includes(n))
    return 'the output axes must be closed by one END';
  return { tc, reduce, a, b, m, n, k, end: ends[0]! };
}

/** Sizes of M, N, K and the tile's; what padding to them needs, and whether `opt` allows it. */
export function tileProblem(match: Match, opt: number): string | undefined {
  const { tc } = match;
  const sizes = [match.m, match.n, match.k].map((r) => constSize(r)!);
  const tile = [tc.m, tc.n, tc.k];
  if (sizes.every((s, i) => s % tile[i]! === 0) || opt >= TC_PADS) return undefined;
  return `axes M, N, K of sizes ${sizes.join(', ')} are not multiples of ${tc.name}'s tile ${tile.join(', ')} (opt ${TC_PADS} pads them)`;
}

/** The (row, column) of element i of an operand, lane being the warp's lane index: bit fields of it, as sums. */
function position(layout: OperandLayout, lane: UOp, i: number): [UOp, UOp] {
  return [0, 1].map((c) => {
    const start = layout.element.reduce((s, e, b) => s + ((i >> b) & 1) * e[c]!, 0);
    const terms: UOp[] = start === 0 ? [] : [UOp.index(start)];
    // runs of lane bits that add 1, 2, 4... times a step are one field: (lane / 2^first) % 2^length * step
    for (let b = 0; b < layout.lane.length; b++) {
      const step = layout.lane[b]![c]!;
      if (step === 0) continue;
      let end = b + 1;
      while (end < layout.lane.length && layout.lane[end]![c] === step * 2 ** (end - b)) end++;
      const shifted = b === 0 ? lane : lane.idiv(2 ** b);
      const field = end === layout.lane.length ? shifted : shifted.mod(2 ** (end - b));
      terms.push(step === 1 ? field : field.mul(step));
      b = end - 1;
    }
    return terms.length ? terms.reduce((x, y) => x.add(y)) : UOp.index(0);
  }) as [UOp, UOp];
}

/**
 * TC: M, N and K padded to the tile where `opt` allows, then each split into tiles and the tile's positions: a
 * WARP axis of the warp's lanes (the kernel's last, innermost axis) and the WMMA's operand elements.
 */
export function applyTensorCore(
  ast: UOp,
  axis: number,
  choice: number,
  opt: number,
  cores: readonly TensorCore[],
): UOp {
  let match = matchTensorCore(ast, axis, choice, cores) as Match;
  const { tc } = match;
  const ranges = kernelRanges(ast);
  for (const [r, tile] of [
    [match.m, tc.m],
    [match.n, tc.n],
    [match.k, tc.k],
  ] as const) {
    if (constSize(r)! % tile !== 0 && opt >= TC_PADS) {
      ast = padAxis(ast, ranges.indexOf(r), tile);
      match = matchTensorCore(ast, axis, choice, cores) as Match;
    }
  }
  const { reduce, a, b, m, n, k, end } = match;
  const lane = UOp.range(
    tc.threads,
    Math.max(...kernelRanges(ast).map((r) => rangeArg(r).id)) + 1,
    AxisType.WARP,
  );
  const tiles = (r: UOp, tile: number) => UOp.range(constSize(r)! / tile, rangeArg(r).id, rangeArg(r).type);
  const [mt, nt, kt] = [tiles(m, tc.m), tiles(n, tc.n), tiles(k, tc.k)];
  /** The operand's elements, each with its axes at the element's place in the tile. */
  const elements = (x: UOp, layout: OperandLayout, rows: [UOp, UOp, number], cols: [UOp, UOp, number]) =>
    UOp.make(
      Ops.STACK,
      Array.from({ length: elementsOf(layout) }, (_, i) => {
        const [row, col] = position(layout, lane, i);
        return substitute(
          x,
          new Map([
            [rows[0], rows[1].mul(rows[2]).add(row)],
            [cols[0], cols[1].mul(cols[2]).add(col)],
          ]),
        );
      }),
    );
  const zero = UOp.const(tc.dtypeOut, 0);
  const wmma = UOp.make(
    Ops.WMMA,
    [
      elements(a, tc.a, [m, mt, tc.m], [k, kt, tc.k]),
      elements(b, tc.b, [k, kt, tc.k], [n, nt, tc.n]),
      UOp.make(Ops.STACK, Array(elementsOf(tc.c)).fill(zero)),
    ],
    {
      name: tc.name,
      dims: [tc.n, tc.m, tc.k],
      dtypeIn: tc.dtypeIn,
      dtypeOut: tc.dtypeOut,
      device: 'CUDA',
      threads: tc.threads,
    },
  );
  const summed = reduce.withSrc([wmma, ...reduce.src.slice(1).map((r) => (r === k ? kt : r))]);
  // each lane stores its elements of the output tile
  const [body, ...closed] = end.src as [UOp, ...UOp[]];
  const stores = Array.from({ length: elementsOf(tc.c) }, (_, i) => {
    const [row, col] = position(tc.c, lane, i);
    return substitute(
      body,
      new Map([
        [reduce, UOp.make(Ops.INDEX, [summed, UOp.index(i)])],
        [m, mt.mul(tc.m).add(row)],
        [n, nt.mul(tc.n).add(col)],
      ]),
    );
  });
  const loops = [...closed.map((r) => (r === m ? mt : r === n ? nt : r)), lane];
  return substitute(ast, new Map([[end, UOp.make(Ops.END, [UOp.make(Ops.GROUP, stores), ...loops])]]));
}
