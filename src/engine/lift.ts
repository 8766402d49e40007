// Run-time constants: callify turns the constants a graph computes with into numbered placeholders, so a graph
// that differs only in them (a scale, a step size, a fill value) reuses the schedule. Each kernel compiles with
// its constants baked (and folded) for the first values it meets; a constant that later takes another value is
// read from a one-element buffer by a second program, so structural constants (identities, decompositions,
// a mask's 0) never leave the kernel. Constants past the device's arguments per kernel are baked instead.
import { AddrSpace, type ConstValue, type DType, dtypes, toStorage } from '../dtype.ts';
import { ContextVar } from '../helpers.ts';
import { DeviceBuffer } from '../runtime/buffer.ts';
import { Device } from '../runtime/device.ts';
import { Ops } from '../uop/ops.ts';
import { substitute } from '../uop/pattern.ts';
import { UOp } from '../uop/uop.ts';

/** 0 bakes every constant into its kernel (a compile per new value): for comparison and debugging. */
export const LIFT = new ContextVar<number>('LIFT', 1);

/** Whether u is callify's placeholder for a graph's constant (its tag numbers it). */
const isPlaceholder = (u: UOp) => u.op === Ops.CONST && typeof u.tag === 'number';

/** What lowers, renders and compiles a kernel AST (cached): engine/compile.ts's compileKernel on a device. */
export type CompileKernel<K> = (ast: UOp) => K;

/** The placeholders of a kernel AST, in graph order. */
const placeholdersOf = (ast: UOp) => ast.toposort().filter(isPlaceholder);

/** The AST with each placeholder replaced by its constant. */
export function bake(ast: UOp, values: readonly ConstValue[]): UOp {
  const by = new Map(placeholdersOf(ast).map((p) => [p, UOp.const(p.dtype, values[p.tag as number]!)]));
  return substitute(ast, by);
}

/** A load of element 0 of the kernel's buffer parameter `slot`, one element of dtype d. */
function loadOf(slot: number, d: DType): UOp {
  const param = UOp.make(Ops.PARAM, [UOp.shapeVec([1])], { slot, dtype: d, addrspace: AddrSpace.GLOBAL });
  return UOp.make(Ops.LOAD, [UOp.make(Ops.INDEX, [param, UOp.const(dtypes.index, 0)])]);
}

/** One kernel of a plan: its AST with placeholders, and the programs it has compiled to. */
export class KernelStep<K> {
  private readonly placeholders: UOp[];
  /** The values of its placeholders the first time it ran: the baked program's. */
  private first: ConstValue[] | undefined;
  private baked: K | undefined;
  /** The placeholders (indices into `placeholders`) read at run time, and the program reading them. */
  private lifted: { positions: number[]; kernel: K } | undefined;

  constructor(
    private readonly ast: UOp,
    readonly refs: number[],
    readonly bytes: number,
    private readonly device: string,
  ) {
    this.placeholders = placeholdersOf(ast);
  }

  /**
   * The AST this step has no program for yet and would compile to run with these values, else undefined;
   * changes nothing (the engine compiles a plan's new kernels together before `program` asks for them).
   */
  pending(values: readonly ConstValue[]): UOp | undefined {
    if (LIFT.value === 0) return bake(this.ast, values);
    const mine = this.valuesOf(values);
    const first = this.first ?? mine;
    const positions = this.liftedFor(mine, first);
    if (positions === undefined) return this.baked === undefined ? this.astReading([], first) : undefined;
    if (!this.fits(positions)) return bake(this.ast, values);
    return positions === this.lifted?.positions ? undefined : this.astReading(positions, first);
  }

  /** The program for these graph values, and the one-element buffers of the constants it reads at run time. */
  program(values: readonly ConstValue[], compile: CompileKernel<K>): { kernel: K; extra: DeviceBuffer[] } {
    // LIFT=0 compiles the AST of every new value (the program cache keeps each)
    if (LIFT.value === 0) return { kernel: compile(bake(this.ast, values)), extra: [] };
    const mine = this.valuesOf(values);
    const first = (this.first ??= mine);
    const positions = this.liftedFor(mine, first);
    if (positions === undefined)
      return { kernel: (this.baked ??= compile(this.astReading([], first))), extra: [] };
    if (!this.fits(positions)) return { kernel: compile(bake(this.ast, values)), extra: [] };
    if (positions !== this.lifted?.positions)
      this.lifted = { positions, kernel: compile(this.astReading(positions, first)) };
    const extra = positions.map((j) => {
      const d = this.placeholders[j]!.dtype;
      return new DeviceBuffer(this.device, 1, d).allocate().copyin(toStorage(d, [mine[j]!]));
    });
    return { kernel: this.lifted.kernel, extra };
  }

  /** Whether the kernel can take the constants at `positions` as arguments too; else they are baked (a compile per value). */
  private fits(positions: readonly number[]): boolean {
    return this.refs.length + positions.length <= Device.get(this.device).maxBuffers();
  }

  private valuesOf(values: readonly ConstValue[]): ConstValue[] {
    return this.placeholders.map((p) => values[p.tag as number]!);
  }

  /**
   * The placeholders to read at run time for these values: undefined where all are the first values, the
   * lifted program's where it reads every one that differs, else those and the ones that differ now.
   */
  private liftedFor(mine: readonly ConstValue[], first: readonly ConstValue[]): number[] | undefined {
    const differs = mine.flatMap((v, j) => (Object.is(v, first[j]) ? [] : [j]));
    if (differs.length === 0) return undefined;
    const known = this.lifted?.positions ?? [];
    if (this.lifted !== undefined && differs.every((j) => known.includes(j))) return this.lifted.positions;
    return [...new Set([...known, ...differs])].sort((a, b) => a - b);
  }

  /** The AST reading the placeholders at `positions` from buffer parameters after its own, the others baked at `first`. */
  private astReading(positions: readonly number[], first: readonly ConstValue[]): UOp {
    const by = new Map(this.placeholders.map((p, j) => [p, UOp.const(p.dtype, first[j]!)]));
    positions.forEach((j, n) => {
      const p = this.placeholders[j]!;
      by.set(p, loadOf(this.refs.length + n, p.dtype));
    });
    return substitute(this.ast, by);
  }
}
