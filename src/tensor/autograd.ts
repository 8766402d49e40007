// Autograd on UOps: a table of derivative rules, one per primitive, and the reverse walk that applies them.
import { resolveFunctions } from '../schedule/resolve.ts';
import { isTensorGraphOp, Ops, opName, type ReduceOp, type TensorGraphOp } from '../uop/ops.ts';
import { fmtShape, type Shape } from '../uop/shape.ts';
import { UOp } from '../uop/uop.ts';

/** The gradients of a node's sources (undefined: none) from the node and the gradient of its output. */
type Rule = (g: UOp, u: UOp) => readonly (UOp | undefined)[];

/** g summed over the axes along which a source of `shape` was broadcast (right-aligned) to g's shape. */
function sumTo(g: UOp, shape: Shape): UOp {
  const lead = g.ndim - shape.length;
  const axes = g.shape!.flatMap((d, i) => (i < lead || shape[i - lead] !== d ? [i] : []));
  const summed = axes.length ? g.reduce(Ops.ADD, axes) : g;
  return lead ? summed.reshape(shape) : summed;
}

/** cos(x) as 1 - 2 sin(x/2)^2, which keeps large arguments accurate (as Tensor.cos does). */
function cos(x: UOp): UOp {
  const s = UOp.make(Ops.SIN, [x.mul(0.5)]);
  return s.mul(s).mul(-2).add(1);
}

/** The gradient of a reduce's input, from the reduce u over x (keepdim shape) and its output gradient g. */
const REDUCE_RULES: Record<ReduceOp, (g: UOp, u: UOp, x: UOp, axes: readonly number[]) => UOp> = {
  [Ops.ADD]: (g, _u, x) => g.expand(x.shape!),
  // ties share the gradient equally. g and the count are divided where expanded: g, a product often (the input
  // gradient of a linear layer after a max pool), stays apart from the count's reads of x's windows
  [Ops.MAX]: (g, u, x, axes) => {
    const hit = x.eq(u.expand(x.shape!));
    const count = hit.where(g.constLike(1), g.constLike(0)).reduce(Ops.ADD, axes);
    return hit.where(g.expand(x.shape!).div(count.expand(x.shape!)), 0);
  },
  // the product of the other elements: prod / x without zeros; at the only zero, the product of the rest
  [Ops.MUL]: (g, _u, x, axes) => {
    const nonzero = x.ne(0);
    const zeros = nonzero.where(g.constLike(0), g.constLike(1)).reduce(Ops.ADD, axes).expand(x.shape!);
    const rest = nonzero.where(x, 1).reduce(Ops.MUL, axes).expand(x.shape!);
    const others = nonzero.where(zeros.eq(0).where(rest.div(x), 0), zeros.eq(1).where(rest, 0));
    return g.expand(x.shape!).mul(others);
  },
};

/**
 * The one-to-one movement ops run backwards, from the op's output shape to its source's: a gradient flows back
 * this way, and so does a write into a view (write-through.ts). Elements the op dropped come back as zeros.
 */
export const MOVEMENT_BACK = {
  [Ops.RESHAPE]: (u: UOp, x: UOp) => x.reshape(u.src[0]!.shape!),
  [Ops.PERMUTE]: (u: UOp, x: UOp) => {
    const inverse: number[] = [];
    u.argOf(Ops.PERMUTE).forEach((a, i) => {
      inverse[a] = i;
    });
    return x.permute(inverse);
  },
  [Ops.FLIP]: (u: UOp, x: UOp) => x.flip(u.argOf(Ops.FLIP)),
  [Ops.SHRINK]: (u: UOp, x: UOp) => x.pad(u.src[1]!.sizes, u.src[0]!.shape!),
  [Ops.PAD]: (u: UOp, x: UOp) => x.shrink(u.src[1]!.sizes, u.src[0]!.shape!),
};

/** A rule for an op a tensor graph may hold but no gradient is derived through yet: names it when reached. */
const notYet =
  (why: string): Rule =>
  (_g, u) => {
    throw new Error(
      `gradient: ${opName(u.op)} (shape ${fmtShape(u.shape)}) lies between the loss and a target; ${why}`,
    );
  };

/** The gradient moved back to the device its source is on. */
const backTo = (g: UOp, src: UOp): UOp =>
  src.device === null || src.device === g.device ? g : UOp.make(Ops.COPY, [g], src.device);

/**
 * The derivative rules, one for every op a tensor graph may hold (a missing one is a type error). null: no
 * gradient flows through the op (piecewise constant, not arithmetic on values, a leaf, or void).
 */
const RULES: Record<TensorGraphOp, Rule | null> = {
  [Ops.ADD]: (g) => [g, g],
  [Ops.SUB]: (g) => [g, g.neg()],
  [Ops.NEG]: (g) => [g.neg()],
  [Ops.MUL]: (g, u) => [g.mul(u.src[1]!), g.mul(u.src[0]!)],
  [Ops.MULACC]: (g, u) => [g.mul(u.src[1]!), g.mul(u.src[0]!), g],
  [Ops.DIV]: (g, u) => {
    const [x, y] = u.src as [UOp, UOp];
    return [g.div(y), g.mul(x).div(y.mul(y)).neg()];
  },
  // ties share the gradient equally (relu and abs get 1/2 and 0 at 0)
  [Ops.MAX]: (g, u) => {
    const [x, y] = u.src as [UOp, UOp];
    const toX = x.lt(y).where(g.constLike(0), y.lt(x).where(g.constLike(1), g.constLike(0.5)));
    const toY = y.lt(x).where(g.constLike(0), x.lt(y).where(g.constLike(1), g.constLike(0.5)));
    return [g.mul(toX), g.mul(toY)];
  },
  [Ops.RECIP]: (g, u) => [g.mul(u.mul(u)).neg()],
  [Ops.SQRT]: (g, u) => [g.div(u.mul(2))],
  [Ops.EXP2]: (g, u) => [g.mul(u).mul(Math.LN2)],
  [Ops.LOG2]: (g, u) => [g.div(u.src[0]!.mul(Math.LN2))],
  [Ops.POW]: (g, u) => {
    const [x, y] = u.src as [UOp, UOp];
    const dx = UOp.make(Ops.POW, [x, y.sub(1)]).mul(y);
    return [
      g.mul(dx),
      g
        .mul(u)
        .mul(UOp.make(Ops.LOG2, [x]))
        .mul(Math.LN2),
    ];
  },
  [Ops.SIN]: (g, u) => [g.mul(cos(u.src[0]!))],
  [Ops.WHERE]: (g, u) => [undefined, u.src[0]!.where(g, 0), u.src[0]!.where(0, g)],
  [Ops.CAST]: (g, u) => [g.cast(u.src[0]!.dtype)],
  [Ops.REDUCE]: (g, u) => {
    const { op, axes } = u.argOf(Ops.REDUCE);
    return [REDUCE_RULES[op](g, u, u.src[0]!, axes)];
  },
  [Ops.RESHAPE]: (g, u) => [MOVEMENT_BACK[Ops.RESHAPE](u, g)],
  [Ops.PERMUTE]: (g, u) => [MOVEMENT_BACK[Ops.PERMUTE](u, g)],
  [Ops.EXPAND]: (g, u) => [sumTo(g, u.src[0]!.shape!)],
  [Ops.PAD]: (g, u) => [MOVEMENT_BACK[Ops.PAD](u, g)],
  [Ops.SHRINK]: (g, u) => [MOVEMENT_BACK[Ops.SHRINK](u, g)],
  [Ops.FLIP]: (g, u) => [MOVEMENT_BACK[Ops.FLIP](u, g)],
  [Ops.STACK]: notYet('stacked values have no kernel yet (Tensor.stack builds pads and adds)'),
  [Ops.INDEX]: notYet(
    'indexing with UOp indices has no derivative rule (Tensor indexing builds gathers instead)',
  ),
  [Ops.REPLICATED]: notYet('values spread over several devices have no derivative rule yet'),
  [Ops.COPY]: (g, u) => [backTo(g, u.src[0]!)],
  [Ops.LOAD]: (g, u) => [backTo(g, u.src[0]!)],
  [Ops.CONTIGUOUS]: (g) => [g],
  [Ops.CONTIGUOUSBACKWARD]: (g) => [UOp.make(Ops.CONTIGUOUS, [g])],
  [Ops.DETACH]: null,
  // functions are inlined before the walk; a CALL is a compiled kernel, opaque to it
  [Ops.FUNCTION]: notYet('functions are inlined before gradients are taken'),
  [Ops.CALL]: notYet('a CALL runs a compiled kernel, which has no derivative rule'),
  [Ops.TUPLE]: notYet('functions are inlined before gradients are taken'),
  [Ops.GETTUPLE]: notYet('functions are inlined before gradients are taken'),
  [Ops.AFTER]: notYet('the gradient does not flow through an assign: take it before assigning'),
  // piecewise constant, or not arithmetic on the value: zero gradient
  [Ops.TRUNC]: null,
  [Ops.CMPLT]: null,
  [Ops.CMPNE]: null,
  [Ops.CMPGT]: null,
  [Ops.CMPGE]: null,
  [Ops.CMPLE]: null,
  [Ops.CMPEQ]: null,
  [Ops.NOT]: null,
  [Ops.BITCAST]: null,
  [Ops.IDIV]: null,
  [Ops.MOD]: null,
  [Ops.AND]: null,
  [Ops.OR]: null,
  [Ops.XOR]: null,
  [Ops.SHL]: null,
  [Ops.SHR]: null,
  [Ops.THREEFRY]: null,
  // leaves, and void ops (no gradient reaches a node without a value)
  [Ops.BUFFER]: null,
  [Ops.BUFFERVIEW]: null,
  [Ops.PARAM]: null,
  [Ops.CONST]: null,
  [Ops.VCONST]: null,
  [Ops.BINARY]: null,
  [Ops.STORE]: null,
  [Ops.GROUP]: null,
  [Ops.SINK]: null,
};

/**
 * A node's own gradient rule: the gradients of `inputs` (ancestors of the node, not necessarily its sources)
 * from the node's gradient, computed only for the inputs `wanted` marks. It replaces the walk through the
 * nodes between them (a conv's input gradient as a transposed conv, not a sum over every window's gradient).
 */
export interface GradientRule {
  inputs: readonly UOp[];
  rule: (g: UOp, wanted: readonly boolean[]) => readonly (UOp | undefined)[];
}

// Keyed by node: equal graphs are one node, and the rule is the exact gradient of that node, so any graph
// that builds it may use it. A node rebuilt (a realized value's graph substituted beneath it) has no rule and
// is differentiated op by op, which gives the same values.
const gradientRules = new WeakMap<UOp, GradientRule>();

/** @internal Gives `node` its own gradient rule (see GradientRule). */
export function defineGradient(node: UOp, rule: GradientRule): void {
  gradientRules.set(node, rule);
}

/** Whether a target lies strictly between a rule's node and its inputs (then the rule would skip its gradient). */
function targetInside(node: UOp, inputs: readonly UOp[], targets: ReadonlySet<UOp>): boolean {
  const seen = new Set<UOp>(inputs);
  const stack = [node];
  while (stack.length) {
    const u = stack.pop()!;
    if (u !== node && targets.has(u)) return true;
    for (const s of u.src)
      if (!seen.has(s)) {
        seen.add(s);
        stack.push(s);
      }
  }
  return false;
}

/** The rule for op, or undefined for an op no tensor graph holds. */
const ruleOf = (op: Ops): Rule | null | undefined => (isTensorGraphOp(op) ? RULES[op] : undefined);

/**
 * The nodes of `order` (a toposort) that a gradient flows through from a seed: the seeds, and every float node
 * of a differentiable op with a source among them.
 */
export function gradientPath(order: readonly UOp[], seed: (u: UOp) => boolean): Set<UOp> {
  const onPath = new Set<UOp>();
  for (const u of order)
    if (seed(u) || (u.dtype.isFloat && ruleOf(u.op) !== null && u.src.some((s) => onPath.has(s))))
      onPath.add(u);
  return onPath;
}

/**
 * The gradient of root (whose own gradient is rootGrad) with respect to each target it depends on through
 * differentiable ops. Only nodes on a path from a target to root are visited, in reverse topological order
 * (no recursion); a target absent from the result gets no gradient.
 */
export function computeGradients(root: UOp, rootGrad: UOp, wanted: ReadonlySet<UOp>): Map<UOp, UOp> {
  // gradients flow through functions once their bodies are inlined; a target may be a function's output
  const [resolvedRoot, ...resolvedTargets] = resolveFunctions([root, ...wanted]);
  root = resolvedRoot!;
  const targets = new Set(resolvedTargets);
  const order = root.toposort();
  // gradients are real-valued: integer and bool nodes carry none
  const onPath = gradientPath(order, (u) => targets.has(u));
  const grads = new Map<UOp, UOp>();
  if (onPath.has(root)) grads.set(root, rootGrad);
  const accumulate = (s: UOp, sg: UOp | undefined) => {
    if (sg === undefined || !onPath.has(s)) return;
    const fitted = sumTo(sg, s.shape!);
    const prev = grads.get(s);
    grads.set(s, prev === undefined ? fitted : prev.add(fitted));
  };
  for (let i = order.length - 1; i >= 0; i--) {
    const u = order[i]!;
    const g = grads.get(u);
    if (g === undefined) continue;
    const own = gradientRules.get(u);
    if (own !== undefined && !targetInside(u, own.inputs, targets)) {
      const wanted = own.inputs.map((s) => onPath.has(s));
      if (wanted.some((w) => w))
        own.rule(g, wanted).forEach((sg, k) => {
          accumulate(own.inputs[k]!, sg);
        });
      continue;
    }
    if (!u.src.some((s) => onPath.has(s))) continue;
    const rule = ruleOf(u.op);
    if (rule === null) continue; // a target computed by an op without gradient
    if (rule === undefined)
      throw new Error(
        `gradient: ${opName(u.op)} belongs in kernels, not in a tensor graph; it cannot carry a gradient`,
      );
    rule(g, u).forEach((sg, k) => {
      accumulate(u.src[k]!, sg);
    });
  }
  const out = new Map<UOp, UOp>();
  [...wanted].forEach((t, i) => {
    const g = grads.get(resolvedTargets[i]!);
    if (g !== undefined) out.set(t, g);
  });
  return out;
}
