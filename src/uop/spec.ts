// The spec verifier: one table of rules per stage (in spec/: tensor graph, kernel, linear program) and verify().
import { SPEC } from '../helpers.ts';
import { Ops, opName } from './ops.ts';
import { fmtShape } from './shape.ts';
import { describe, ref, type SpecRule } from './spec/common.ts';
import { kernelSpec } from './spec/kernel.ts';
import { linearSpec } from './spec/linear.ts';
import { tensorSpec } from './spec/tensor.ts';
import { type UOp, uopHooks } from './uop.ts';

export type { Problem, SpecCheck, SpecRule } from './spec/common.ts';
export { kernelSpec, linearSpec, tensorSpec };

export type Stage = 'tensor' | 'kernel' | 'linear';
export const STAGES: readonly Stage[] = ['tensor', 'kernel', 'linear'];

export const specs: Readonly<Record<Stage, readonly SpecRule[]>> = {
  tensor: tensorSpec,
  kernel: kernelSpec,
  linear: linearSpec,
};

/** The op a stage's graph must have at its root. */
const ROOTS: Readonly<Partial<Record<Stage, Ops>>> = { kernel: Ops.SINK, linear: Ops.LINEAR };

// Rules by op, so a node is only tried against the rules that can match it.
const rulesByOp = Object.fromEntries(
  STAGES.map((stage) => {
    const byOp = new Map<Ops, SpecRule[]>();
    for (const rule of specs[stage]) {
      if (rule[1].ops === undefined) throw new Error(`spec rule '${rule[0]}' must name its ops`);
      for (const op of rule[1].ops) byOp.set(op, [...(byOp.get(op) ?? []), rule]);
    }
    return [stage, byOp];
  }),
) as Record<Stage, Map<Ops, SpecRule[]>>;

/** Why a stage refuses u, or undefined when one of its rules accepts it. */
function rejection(u: UOp, stage: Stage): string | undefined {
  const rules = rulesByOp[stage].get(u.op);
  if (rules === undefined) {
    const others = STAGES.filter((s) => rulesByOp[s].has(u.op));
    if (others.length === 0) return `no stage has a rule for ${opName(u.op)}`;
    const where = `${others.join(' and ')} stage${others.length > 1 ? 's' : ''}`;
    return `the ${stage} stage has no rule for ${opName(u.op)} (it belongs to the ${where})`;
  }
  const failures: string[] = [];
  for (const [name, pat, check] of rules) {
    if (pat.match(u) === undefined) continue;
    const r = check(u);
    if (r === undefined) return undefined;
    failures.push(`rule '${name}': ${r}`);
  }
  if (failures.length) return failures.join('\n  ');
  const n = u.src.length;
  return `${opName(u.op)} with ${n} source${n === 1 ? '' : 's'} fits no rule of the ${stage} stage: ${rules.map(([name, pat]) => `'${name}' expects ${pat}`).join('; ')}`;
}

function describeSources(u: UOp): string {
  if (u.src.length === 0) return 'none';
  const shown = u.src.slice(0, 6).map((s) => {
    const shape = s.shape === null ? '' : ` ${fmtShape(s.shape)}`;
    return `${ref(s)} ${s.dtype.name}${shape}`;
  });
  return shown.join(', ') + (u.src.length > 6 ? `, ... (${u.src.length} in all)` : '');
}

function invalid(header: string, u: UOp, why: string): Error {
  return new Error(`${header}: invalid ${describe(u)}\n  sources: ${describeSources(u)}\n  ${why}`);
}

/** Checks every node of the graph under `sink` against the stage's rules; throws on the first invalid one. */
export function verify(sink: UOp, stage: Stage): void {
  if (!STAGES.includes(stage))
    throw new Error(`verify: unknown stage '${stage}'; stages are ${STAGES.join(', ')}`);
  const root = ROOTS[stage];
  if (root !== undefined && sink.op !== root)
    throw invalid(`${stage} spec`, sink, `the root of a ${stage} graph must be a ${opName(root)}`);
  // sources come before their users, so the first invalid node found is the deepest cause; a node is marked
  // valid only once all under it was, so the walk stops at marked nodes (kernels share their indices, constants
  // and buffers, and nodes never change)
  const bit = STAGE_BITS[stage];
  for (const u of sink.toposort((x) => (x._valid & bit) !== 0)) {
    const why = rejection(u, stage);
    if (why !== undefined) throw invalid(`${stage} spec`, u, why);
    u._valid |= bit;
  }
}

const STAGE_BITS: Readonly<Record<Stage, number>> = { tensor: 1, kernel: 2, linear: 4 };

/** Verifies at a stage boundary when SPEC >= 1 (the compiler's stages call this). */
export function verifyStage(sink: UOp, stage: Stage): void {
  if (SPEC.value >= 1) verify(sink, stage);
}

/** Checks one node against every stage (valid if some stage accepts it); UOp.make calls this when SPEC >= 2. */
export function verifyNode(u: UOp): void {
  const reasons = new Map<string, Stage[]>();
  for (const stage of STAGES) {
    const why = rejection(u, stage);
    if (why === undefined) return;
    reasons.set(why, [...(reasons.get(why) ?? []), stage]);
  }
  const lines = [...reasons].map(([why, stages]) => `${stages.join(', ')}: ${why}`);
  throw invalid('spec (SPEC=2, at construction)', u, `no stage accepts it:\n  ${lines.join('\n  ')}`);
}

uopHooks.verifyNode = verifyNode;
