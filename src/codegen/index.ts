// The codegen pipeline for one kernel, as a list of named passes: kernel AST in, LINEAR program out.

import { type ArgOf, AxisType, Ops } from '../uop/ops.ts';
import { graphRewrite } from '../uop/pattern.ts';
import { verifyStage } from '../uop/spec.ts';
import { symbolic } from '../uop/symbolic.ts';
import type { UOp } from '../uop/uop.ts';
import { reduceToAccumulators } from './accumulate.ts';
import { linearize } from './linearize.ts';

export interface LoweredKernel {
  name: string;
  linear: UOp;
}

/** A kernel's name from its loops: E (elementwise) or r (reduce), then each loop's size. */
export function kernelName(ast: UOp): string {
  const ranges = ast.toposort().filter((u) => u.op === Ops.RANGE);
  ranges.sort((a, b) => (a.arg as ArgOf<Ops.RANGE>).id - (b.arg as ArgOf<Ops.RANGE>).id);
  const reduces = ranges.some((r) => (r.arg as ArgOf<Ops.RANGE>).type === AxisType.REDUCE);
  const sizes = ranges.map((r) => (r.src[0]!.op === Ops.CONST ? String(r.src[0]!.constValue) : 'n'));
  return `${reduces ? 'r' : 'E'}${sizes.length ? `_${sizes.join('_')}` : ''}`;
}

export function lowerKernel(ast: UOp): LoweredKernel {
  verifyStage(ast, 'kernel');
  let k = graphRewrite(ast, symbolic, { name: 'simplify indices', ctx: {} });
  k = reduceToAccumulators(k);
  const linear = linearize(k);
  verifyStage(linear, 'linear');
  return { name: kernelName(ast), linear };
}
