// Hand-coded optimizations: the opts a kernel gets when none are given (NOOPT=1 turns them off).
import { ContextVar } from '../../helpers.ts';
import type { UOp } from '../../uop/uop.ts';
import { capBody } from './body-cap.ts';
import { cpuOpts } from './heuristic-cpu.ts';
import { gpuOpts } from './heuristic-gpu.ts';
import type { Opt, Target } from './opts.ts';

export const NOOPT = new ContextVar('NOOPT', 0);

/** The opts a kernel gets for the target (GPU or CPU rules), with their register tiles capped by capBody. */
export function handCodedOpts(ast: UOp, target: Target): Opt[] {
  if (NOOPT.value) return [];
  return capBody(ast, target.grid !== undefined ? gpuOpts(ast, target) : cpuOpts(ast, target), target);
}
