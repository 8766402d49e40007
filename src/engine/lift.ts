// Run-time constants: callify turns the constants a graph computes with into numbered placeholders, so a graph
// that differs only in them (a scale, a step size, a fill value) reuses the schedule. Each kernel compiles with
// its constants baked (and folded) for the first values it meets; a constant that later takes another value is
// read from a buffer (one per dtype) by a second program, so structural constants (identities, decompositions,
// a mask's 0) never leave the kernel. Kernels of one plan that differ only in their constants' values (a wide
// sum's leaves, a cat's groups) read the values that differ between them from the start and share one program.
// The start of a slice of an input (a batch out of a data set, callify.ts) is always read at run time: a loop
// over batches compiles once. Constants whose buffers would pass the device's arguments per kernel are baked instead.
import { AddrSpace, type ConstValue, type DType, dtypes, toStorage } from '../dtype.ts';
import { ContextVar } from '../helpers.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import { Device } from '../runtime/device.ts';
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

/** 0 bakes every constant into its kernel (a compile per new value): for comparison and debugging. */
export const LIFT = new ContextVar<number>('LIFT', 1);

/**
 * Whether u is callify's placeholder for a graph's constant or for the start of a slice of an input (a variable,
 * always read at run time: a loop over batches compiles once); its tag numbers it.
 */
const isPlaceholder = (u: UOp) => (u.op === Ops.CONST || u.op === Ops.PARAM) && typeof u.tag === 'number';
const isStart = (u: UOp) => u.op === Ops.PARAM;
/** The dtype a placeholder's value travels in: a start (an index) as int32 (callify keeps starts below 2^31). */
const storedAs = (d: DType) => (d === dtypes.index ? dtypes.int32 : d);

/** What lowers, renders and compiles a kernel AST (cached): engine/compile.ts's compileKernel on a device. */
export type CompileKernel<K> = (ast: UOp) => K;

/** The placeholders of a kernel AST, in graph order. */
const placeholdersOf = (nodes: readonly UOp[]) => nodes.filter(isPlaceholder);

/** The AST with each placeholder replaced by its constant. */
export function bake(ast: UOp, values: readonly ConstValue[]): UOp {
  const by = new Map(
    placeholdersOf(ast.toposort()).map((p) => [p, UOp.const(p.dtype, values[p.tag as number]!)]),
  );
  return substitute(ast, by);
}

/** A load of element `at` of the kernel's buffer parameter `slot`, `size` elements of d's stored dtype, as d. */
function loadOf(slot: number, d: DType, at: number, size: number): UOp {
  const stored = storedAs(d);
  const param = UOp.make(Ops.PARAM, [UOp.shapeVec([size])], {
    slot,
    dtype: stored,
    addrspace: AddrSpace.GLOBAL,
  });
  const load = UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [param, UOp.const(dtypes.index, at)])]);
  return stored === d ? load : load.cast(d);
}

/**
 * Lifted constants travel in one buffer per dtype, in order (a CPU kernel call takes at most 64 arguments, and
 * a kernel may read thousands of constants): the placeholders at `positions` (indices into a step's), by buffer.
 */
function packed(
  positions: readonly number[],
  placeholders: readonly UOp[],
): { dtype: DType; positions: number[] }[] {
  const buffers: { dtype: DType; positions: number[] }[] = [];
  for (const j of positions) {
    const dtype = placeholders[j]!.dtype;
    const b = buffers.find((x) => x.dtype === dtype);
    if (b === undefined) buffers.push({ dtype, positions: [j] });
    else b.positions.push(j);
  }
  return buffers;
}

/** A node's value as structure: a placeholder's number left out, -0 told from 0. */
const constText = (u: UOp) =>
  isPlaceholder(u) ? '?' : Object.is(u.constValue, -0) ? '-0' : String(u.constValue);

/**
 * The AST's structure without its placeholders' numbers (two kernels of a plan that differ only in the values
 * of their constants have equal structures): each node's op, dtype, arg, tag and sources by position.
 */
function structureOf(nodes: readonly UOp[]): string {
  const index = new Map<UOp, number>();
  const parts = new Array<string>(nodes.length);
  nodes.forEach((u, i) => {
    index.set(u, i);
    let text = `${u.op}|${u.dtype.name}|${u.op === Ops.CONST ? constText(u) : `${u._argKey}|${u.tag}`}`;
    for (const x of u.src) text += `,${index.get(x)}`;
    parts[i] = text;
  });
  return parts.join(';');
}

/**
 * Steps of one plan whose ASTs differ only in their constants' values (the leaves of a wide sum, the pieces of a
 * cat, the layers of a stack): the constants whose values differ between them are read at run time from the
 * start, so that they share one program instead of compiling one each.
 */
class Alike<K> {
  private values: readonly ConstValue[] | undefined;
  private positions: readonly number[] = [];
  /** The lifted ASTs the steps share, by their positions. */
  private readonly asts = new Map<string, UOp>();

  constructor(private readonly steps: readonly KernelStep<K>[]) {}

  /** The placeholders (indices into each step's) whose values differ between the steps for these graph values. */
  varying(values: readonly ConstValue[]): readonly number[] {
    if (values === this.values) return this.positions;
    const [head, ...rest] = this.steps.map((s) => s.valuesOf(values));
    this.values = values;
    this.positions = head!.flatMap((v, j) => (rest.some((r) => !Object.is(r[j], v)) ? [j] : []));
    return this.positions;
  }

  /**
   * The steps' AST reading the placeholders at these positions: one for all of them, since the steps first ran
   * together and every placeholder left baked had one value in all (those that differed are always lifted).
   */
  lifted(positions: readonly number[], build: () => UOp): UOp {
    const key = positions.join();
    let ast = this.asts.get(key);
    if (ast === undefined) this.asts.set(key, (ast = build()));
    return ast;
  }
}

/** Gives the steps of a plan that differ only in their constants' values (see Alike) their group. */
export function groupAlike<K>(steps: readonly KernelStep<K>[]): void {
  const groups = new Map<string, KernelStep<K>[]>();
  for (const step of steps) {
    if (step.placeholderCount === 0) continue;
    const key = step.structure();
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [step]);
    else group.push(step);
  }
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    const alike = new Alike(group);
    for (const step of group) step.alike = alike;
  }
}

const NO_BUFFERS: readonly DeviceBuffer[] = [];

/** A step's program to launch, and the buffers of the constants it reads at run time (after the step's own). */
export interface StepLaunch<K> {
  kernel: K;
  extra: readonly DeviceBuffer[];
}

/** A program reading the placeholders at `positions` (indices into a step's) at run time: its AST, once compiled its kernel. */
interface Lifted<K> {
  positions: number[];
  ast: UOp;
  kernel?: K;
}

/** What KernelStep.decide worked out for some graph values, and the state it depended on. */
interface Decision<K> {
  values: readonly ConstValue[];
  lifted: Lifted<K> | undefined;
  first: readonly ConstValue[] | undefined;
  mine: ConstValue[];
  positions: number[] | undefined;
  buffers: { dtype: DType; positions: number[] }[];
}

/** One kernel of a plan: its AST with placeholders, and the programs it has compiled to. */
export class KernelStep<K> {
  private readonly placeholders: UOp[];
  /** The positions of the placeholders always read at run time: slices' starts. */
  private readonly starts: number[];
  /** The values of its placeholders the first time it ran: the baked program's. */
  private first: ConstValue[] | undefined;
  private baked: { ast: UOp; kernel?: K } | undefined;
  /** The baked program's launch, once it has one. */
  private bakedRun: StepLaunch<K> | undefined;
  /** What `decide` found for the graph values last asked about. */
  private decided: Decision<K> | undefined;
  /** The program reading placeholders at run time. */
  private lifted: Lifted<K> | undefined;
  /** The lifted AST `pending` made for `program` to compile (not yet this step's program). */
  private next: Lifted<K> | undefined;
  /** The plan's other steps that differ from this one only in their constants' values. */
  alike: Alike<K> | undefined;

  constructor(
    private readonly ast: UOp,
    readonly refs: number[],
    readonly bytes: number,
    private readonly device: string,
  ) {
    this.placeholders = placeholdersOf(ast.toposort());
    this.starts = this.placeholders.flatMap((p, j) => (isStart(p) ? [j] : []));
  }

  get placeholderCount(): number {
    return this.placeholders.length;
  }

  /** The AST's structure without its placeholders' numbers. */
  structure(): string {
    return structureOf(this.ast.toposort());
  }

  /**
   * The AST this step has no program for yet and would compile to run with these values, else undefined;
   * changes nothing but the ASTs it remembers (the engine compiles a plan's new kernels together before
   * `program` asks for them).
   */
  pending(values: readonly ConstValue[]): UOp | undefined {
    if (this.bakedFor(values) !== undefined) return undefined;
    if (LIFT.value === 0) return bake(this.ast, values);
    const { mine, positions, buffers } = this.decide(values);
    const first = this.first ?? mine;
    if (positions === undefined) {
      if (this.baked?.kernel !== undefined) return undefined;
      return (this.baked ??= { ast: this.astReading([], first) }).ast;
    }
    if (!this.fits(buffers.length)) return bake(this.ast, values);
    if (positions === this.lifted?.positions) return undefined;
    return this.liftedAst(positions, first).ast;
  }

  /** The program for these graph values, and the buffers of the constants it reads at run time. */
  program(values: readonly ConstValue[], compile: CompileKernel<K>): StepLaunch<K> {
    const baked = this.bakedLaunch(values);
    if (baked !== undefined) return baked;
    // LIFT=0 compiles the AST of every new value (the program cache keeps each)
    if (LIFT.value === 0) return { kernel: compile(bake(this.ast, values)), extra: [] };
    const { mine, positions, buffers } = this.decide(values);
    const first = (this.first ??= mine);
    if (positions === undefined) {
      const baked = (this.baked ??= { ast: this.astReading([], first) });
      return { kernel: (baked.kernel ??= compile(baked.ast)), extra: [] };
    }
    if (!this.fits(buffers.length)) return { kernel: compile(bake(this.ast, values)), extra: [] };
    const lifted = this.liftedAst(positions, first);
    lifted.kernel ??= compile(lifted.ast);
    this.lifted = lifted;
    const extra = buffers.map(({ dtype, positions }) =>
      new DeviceBuffer(this.device, positions.length, storedAs(dtype)).allocate().copyin(
        toStorage(
          storedAs(dtype),
          positions.map((j) => mine[j]!),
        ),
      ),
    );
    return { kernel: lifted.kernel, extra };
  }

  /** The baked program's launch where it runs these values (bakedFor): most eager calls, which compile and allocate nothing. */
  bakedLaunch(values: readonly ConstValue[]): StepLaunch<K> | undefined {
    const kernel = this.bakedFor(values);
    return kernel === undefined ? undefined : (this.bakedRun ??= { kernel, extra: NO_BUFFERS });
  }

  /**
   * The baked program where it runs these values: each placeholder has its first value and no alike step's
   * differ (what liftedFor decides from these values), checked without allocating, as most eager steps are.
   */
  private bakedFor(values: readonly ConstValue[]): K | undefined {
    const kernel = this.baked?.kernel;
    if (kernel === undefined || this.alike !== undefined || LIFT.value === 0) return undefined;
    const first = this.first!;
    for (let j = 0; j < this.placeholders.length; j++)
      if (!Object.is(values[this.placeholders[j]!.tag as number], first[j])) return undefined;
    return kernel;
  }

  /**
   * This step's values among the graph's, the placeholders to read at run time (liftedFor) and their buffers:
   * pending and then program ask about the same values (and a graph realized again passes the same array), so
   * it is worked out once while neither the values nor the lifted program change.
   */
  private decide(values: readonly ConstValue[]): Decision<K> {
    const d = this.decided;
    if (d !== undefined && d.values === values && d.lifted === this.lifted && d.first === this.first)
      return d;
    const mine = this.valuesOf(values);
    const positions = this.liftedFor(mine, this.first ?? mine, values);
    const buffers = positions === undefined ? [] : packed(positions, this.placeholders);
    return (this.decided = { values, lifted: this.lifted, first: this.first, mine, positions, buffers });
  }

  /** Whether the kernel can take `buffers` more arguments (lifted constants); else they are baked (a compile per value). */
  private fits(buffers: number): boolean {
    return this.refs.length + buffers <= Device.get(this.device).maxBuffers();
  }

  /** @internal The values of its placeholders among the graph's. */
  valuesOf(values: readonly ConstValue[]): ConstValue[] {
    return this.placeholders.map((p) => values[p.tag as number]!);
  }

  /** The lifted AST for these positions: the one this step has when they are its lifted program's, else a new one. */
  private liftedAst(positions: number[], first: readonly ConstValue[]): Lifted<K> {
    if (positions === this.lifted?.positions) return this.lifted;
    if (this.next?.positions.join() !== positions.join()) {
      const build = () => this.astReading(positions, first);
      this.next = { positions, ast: this.alike?.lifted(positions, build) ?? build() };
    }
    return this.next;
  }

  /**
   * The placeholders to read at run time for these values: undefined where all are the first values (and no
   * alike step's differ), the lifted program's where it reads every one that differs, else those and the ones
   * that differ now.
   */
  private liftedFor(
    mine: readonly ConstValue[],
    first: readonly ConstValue[],
    values: readonly ConstValue[],
  ): number[] | undefined {
    const varying = this.alike?.varying(values) ?? [];
    const differs = mine.flatMap((v, j) => (Object.is(v, first[j]) ? [] : [j]));
    if (differs.length === 0 && varying.length === 0 && this.starts.length === 0) return undefined;
    const known = new Set(this.lifted?.positions);
    const needed = [...this.starts, ...differs, ...varying];
    if (this.lifted !== undefined && needed.every((j) => known.has(j))) return this.lifted.positions;
    return [...new Set([...known, ...needed])].sort((a, b) => a - b);
  }

  /** The AST reading the placeholders at `positions` from buffer parameters after its own, the others baked at `first`. */
  private astReading(positions: readonly number[], first: readonly ConstValue[]): UOp {
    const by = new Map(this.placeholders.map((p, j) => [p, UOp.const(p.dtype, first[j]!)]));
    packed(positions, this.placeholders).forEach(({ dtype, positions }, n) => {
      positions.forEach((j, at) => {
        by.set(this.placeholders[j]!, loadOf(this.refs.length + n, dtype, at, positions.length));
      });
    });
    return substitute(this.ast, by);
  }
}
