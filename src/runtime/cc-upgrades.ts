// Kernels built in two tiers (CC_TIERS): a batch of new kernels is compiled at -Og, about a third of -O2's
// compiler CPU, and runs at once; a unit is compiled again at -O2 in the background once a second plan (a later
// step) launches one of its kernels (a parameter's initial values, launched by one plan, never are; a first step
// that launches a kernel twice runs its launches before a rebuild competes with them), and each program takes the
// optimized library up at its first launch after it is ready. Both builds compile the same C with
// -ffp-contract=off, whose only FMAs are the IR's (src/codegen/contract.ts), so they compute the same bits. Both
// go to the disk cache: a later run loads the optimized build, else the quick one and upgrades it the same way.
// Optimized builds still running when a script ends are waited for; process.exit() kills them (Ctrl-C reaches them
// as it reaches the process group).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ContextVar } from '../helpers.ts';
import { type CCompiler, compilerJobs, startUnit, type UnitKernel } from './cc.ts';
import { CompilerRuns } from './compile-worker.ts';
import { makeBuildDir, publishFile } from './diskcache.ts';

/** 1: new kernels run from a quick build (-Og) until their -O2 build, made in the background, replaces it. */
export const CC_TIERS = new ContextVar('CC_TIERS', 1);

/**
 * A unit's optimized build: `take` starts it on its first call and gives its library once built, else
 * undefined (not built yet, or it failed: the quick build stays).
 */
export interface Upgrade<L> {
  take(): L | undefined;
}

/** A kernel and its content key, which names its optimized build in the disk cache. */
export type Keyed = UnitKernel & { readonly key: string };

interface Pending<L> {
  readonly kernels: Keyed[];
  slot?: number;
  lib?: L | undefined;
}

/** Batches with optimized builds started, until the process exits. */
const open = new Set<Upgrades<unknown>>();
/** Batches whose started builds may still be compiling (checked at every CPU launch: kept short). */
const compiling = new Set<Upgrades<unknown>>();
let hooked = false;

/** The optimized builds of a batch's units, each started when first wanted. */
export class Upgrades<L> {
  private readonly runs: CompilerRuns;
  private dir: { dir: string; cached: boolean } | undefined;
  private readonly units: Pending<L>[];
  private closed = false;
  /** Units started whose compiler may still run. */
  private inFlight: Pending<L>[] = [];

  constructor(
    private readonly cc: CCompiler,
    units: readonly (readonly Keyed[])[],
    /** Loads a built library (published under its kernels' keys where the cache is on). */
    private readonly load: (path: string, kernels: readonly Keyed[]) => L,
  ) {
    this.runs = new CompilerRuns(units.length, compilerJobs(), true);
    this.units = units.map((kernels) => ({ kernels: [...kernels] }));
  }

  /** Unit `i`'s optimized build. */
  of(i: number): Upgrade<L> {
    return { take: () => this.take(this.units[i]!) };
  }

  private take(u: Pending<L>): L | undefined {
    if ('lib' in u || this.closed) return u.lib;
    if (u.slot === undefined) this.start(u);
    else if (this.runs.ended(u.slot)) u.lib = this.finish(u);
    return u.lib;
  }

  private start(u: Pending<L>): void {
    this.dir ??= makeBuildDir();
    hookExit();
    open.add(this as Upgrades<unknown>);
    const unit = { kernels: u.kernels, out: this.libraryOf(u) };
    u.slot = startUnit(this.runs, this.cc, unit, '-O2');
    this.inFlight.push(u);
    compiling.add(this as Upgrades<unknown>);
  }

  private libraryOf(u: Pending<L>): string {
    return join(this.dir!.dir, `${this.units.indexOf(u)}.so`);
  }

  /** Loads (publishing) unit u's library once its compiler ended; undefined where it failed. */
  private finish(u: Pending<L>): L | undefined {
    if (this.runs.wait(u.slot!) !== 'ok') return undefined;
    try {
      const out = this.libraryOf(u);
      const keys = u.kernels.map((k) => k.key);
      return this.load(this.dir!.cached ? publishFile(out, keys, '.so')[0]! : out, u.kernels);
    } catch {
      return undefined;
    }
  }

  /** Whether an optimized build of this batch is compiling. */
  compiling(): boolean {
    this.inFlight = this.inFlight.filter((u) => !this.runs.ended(u.slot!));
    if (this.inFlight.length === 0) compiling.delete(this as Upgrades<unknown>);
    return this.inFlight.length > 0;
  }

  /** Waits for the optimized builds started and takes them up. */
  settle(): void {
    for (const u of this.units) if (u.slot !== undefined && !('lib' in u)) u.lib = this.finish(u);
  }

  /** Starts no more builds, kills the running ones and removes their directory (for a process on its way out). */
  cancel(): void {
    this.runs.cancel();
    this.close();
  }

  close(): void {
    this.closed = true;
    open.delete(this as Upgrades<unknown>);
    compiling.delete(this as Upgrades<unknown>);
    if (this.dir !== undefined) rmSync(this.dir.dir, { recursive: true, force: true });
  }
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // the quick builds of units not started stay what the next run loads
  process.on('beforeExit', () => {
    for (const u of open) {
      u.settle();
      u.close();
    }
  });
  process.on('exit', () => {
    for (const u of open) u.cancel();
  });
}

/** Whether an optimized build is compiling (the CPU's kernels then run on one thread: src/runtime/cpu.ts). */
export function rebuilding(): boolean {
  for (const u of compiling) if (u.compiling()) return true;
  return false;
}

/** Waits for every optimized build started and takes it up (a bench's later steps, a script's end). */
export function settleUpgrades(): void {
  for (const u of open) u.settle();
}
