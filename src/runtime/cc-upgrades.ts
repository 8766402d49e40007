// Kernels built in two tiers (CC_TIERS): a batch of new kernels is compiled at -Og, about a third of -O2's
// compiler CPU, and runs at once. Each kernel is compiled again at -O2 in the background once its quick build has
// shown that the rebuild pays: its launches are timed, and it is due when a plan's launches of it (a step's) take
// a CC_PAYBACK-th of the rebuild's estimated compiler CPU, or all its launches so far the whole of it. A kernel one
// plan launches (a parameter's initial values) never is, nor is one whose launches take microseconds (an
// optimizer's update of a bias), until it has spent what its rebuild would cost. Due kernels are rebuilt
// hottest first (launch time per compiler second), in units of a few; each program takes its optimized library
// up at its first launch after it is ready. Both builds compile the same C with -ffp-contract=off, whose only
// FMAs are the IR's (src/codegen/contract.ts), so they compute the same bits. Both go to the disk cache: a later
// run loads the optimized build, else the quick one and upgrades it the same way. Optimized builds still running
// when a script ends are waited for; process.exit() kills them (Ctrl-C reaches them as it reaches the process
// group).
import { rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ContextVar } from '../helpers.ts';
import type { UnitKernel } from './backend.ts';
import { plansStarted } from './backend.ts';
import { type CCompiler, compilerJobs, startUnit } from './cc.ts';
import { CompilerRuns } from './compile-worker.ts';
import { makeBuildDir, publishFile } from './diskcache.ts';

/** 1: new kernels run from a quick build (-Og) until their -O2 build, made in the background, replaces it. */
export const CC_TIERS = new ContextVar('CC_TIERS', 1);

/** A kernel and its content key, which names its optimized build in the disk cache. */
export type Keyed = UnitKernel & { readonly key: string };

/**
 * -O2's compiler CPU per byte of a kernel's C (2-5 us on the 2-core VM: the three models' first-step units), and
 * per kernel for its share of a compiler process (about 30 ms, shared by the kernels of a unit).
 */
const SECONDS_PER_BYTE = 3e-6;
const SECONDS_PER_KERNEL = 0.005;
/**
 * A kernel is rebuilt once a plan's launches of its quick build take a CC_PAYBACK-th of the rebuild's estimated
 * compiler CPU (it pays the rebuild back within as many plans), or all its launches so far the whole of it. 0: 8
 * plans per core, as the rebuilds take cores from the steps: 16 on 2 cores, where rebuilding beautiful_mnist's
 * convolutions (2-3 ms a launch at -Og, 0.1-0.2 s of gcc CPU each) in the second step slowed the steps after it
 * more than running them at -Og; -1: every kernel a second plan launches.
 */
export const CC_PAYBACK = new ContextVar('CC_PAYBACK', 0);
const payback = () => (CC_PAYBACK.value === 0 ? 8 * availableParallelism() : CC_PAYBACK.value);
/**
 * A rebuild unit holds due kernels, hottest first, until it has this much C (a process costs as much as 10 KB), or
 * its share of the ready kernels where more lanes are free.
 */
const UNIT_BYTES = 48 * 1024;

/** A kernel whose quick build runs: what its launches took, and its optimized build once due. */
export class Upgrade<L> {
  private spent = 0;
  private plans = 0;
  /** The plan in which it became due, once it has. */
  queuedIn = -1;
  private lastPlan = -1;
  private unit: Rebuild<L> | undefined;
  private readonly cost: number;

  constructor(
    readonly kernel: Keyed,
    readonly cc: CCompiler,
    /** Loads a built library (published under its kernels' keys where the cache is on). */
    readonly load: (path: string, kernels: readonly Keyed[]) => L,
  ) {
    this.cost = kernel.source.length * SECONDS_PER_BYTE + SECONDS_PER_KERNEL;
  }

  /** Launch time per second of compiler CPU: the order due kernels are rebuilt in. */
  get gain(): number {
    return this.spent / Math.max(1, this.plans) / this.cost;
  }

  /** Counts a launch of the quick build that took `seconds`; queues the rebuild once it is due. */
  ran(seconds: number): void {
    if (this.lastPlan !== plansStarted()) {
      this.lastPlan = plansStarted();
      if (++this.plans === 2) {
        const ref = new WeakRef(this as Upgrade<unknown>);
        repeated.add(ref);
        forget.register(this, ref);
      }
    }
    this.spent += seconds;
    if (this.queuedIn < 0 && this.plans > 1 && this.due()) this.enqueue();
  }

  /** @internal Queues its rebuild. */
  enqueue(): void {
    this.queuedIn = plansStarted();
    queue.push(this as Upgrade<unknown>);
    earliest = Math.min(earliest, this.queuedIn);
  }

  private due(): boolean {
    const plans = payback();
    return plans < 0 || this.spent * plans >= this.cost * this.plans || this.spent >= this.cost;
  }

  /**
   * The optimized build's library once built, else undefined (not due, not built yet, or failed: the quick build
   * stays). Starts due kernels' rebuilds where a compiler lane has freed.
   */
  take(): L | undefined {
    startDue();
    return this.unit?.take();
  }

  /** @internal The rebuild that compiles it. */
  startedIn(unit: Rebuild<L>): void {
    this.unit = unit;
  }
}

/** Due kernels not yet started, and the earliest plan one of them became due in. */
const queue: Upgrade<unknown>[] = [];
let earliest = Infinity;
/** Kernels that two plans launched, due or not (held weakly: settleUpgrades rebuilds them all). */
const repeated = new Set<WeakRef<Upgrade<unknown>>>();
const forget = new FinalizationRegistry<WeakRef<Upgrade<unknown>>>((ref) => repeated.delete(ref));
/** Rebuilds started whose compiler may still run, then those waiting to be loaded. */
const started = new Set<Rebuild<unknown>>();
let hooked = false;

/** One compiler process's optimized build of a few due kernels. */
class Rebuild<L> {
  private readonly runs = new CompilerRuns(1, compilerJobs(), true);
  private readonly dir = makeBuildDir();
  private readonly slot: number;
  private lib: L | undefined;
  private done = false;

  constructor(private readonly kernels: readonly Upgrade<L>[]) {
    const first = kernels[0]!;
    this.slot = startUnit(this.runs, first.cc, { kernels: this.kernelsOf(), out: this.out() }, '-O2');
    for (const k of kernels) k.startedIn(this);
    started.add(this as Rebuild<unknown>);
  }

  private kernelsOf(): Keyed[] {
    return this.kernels.map((k) => k.kernel);
  }

  private out(): string {
    return join(this.dir.dir, 'rebuild.so');
  }

  /** Whether its compiler has ended. */
  ended(): boolean {
    return this.done || this.runs.ended(this.slot);
  }

  /** The library once its compiler has ended (waiting where `wait`), loaded and published. */
  take(wait = false): L | undefined {
    if (this.done || (!wait && !this.runs.ended(this.slot))) return this.lib;
    this.done = true;
    started.delete(this as Rebuild<unknown>);
    try {
      if (this.runs.wait(this.slot) !== 'ok') return undefined;
      const kernels = this.kernelsOf();
      const keys = kernels.map((k) => k.key);
      const path = this.dir.cached ? publishFile(this.out(), keys, '.so')[0]! : this.out();
      this.lib = this.kernels[0]!.load(path, kernels);
    } catch {
      this.lib = undefined;
    } finally {
      rmSync(this.dir.dir, { recursive: true, force: true });
    }
    return this.lib;
  }

  /** Kills its compiler and removes its directory (for a process on its way out). */
  cancel(): void {
    this.runs.cancel();
    this.done = true;
    rmSync(this.dir.dir, { recursive: true, force: true });
  }
}

/**
 * Starts due kernels' rebuilds, hottest first, while a compiler lane is free: those that became due in an earlier
 * plan (all of them where `all`), so that a step's due kernels are ranked together once it has run.
 */
function startDue(all = false): void {
  const plan = plansStarted();
  // checked at every launch of a quick build while kernels wait: kept to a comparison
  if (!all && earliest >= plan) return;
  let running = compilersRebuilding();
  const lanes = compilerJobs();
  queue.sort((a, b) => b.gain - a.gain);
  const ready = (k: Upgrade<unknown>) => all || k.queuedIn < plan;
  // the ready kernels' C shared between the free lanes, so that they are all rebuilt soon where lanes are many
  const share = Math.min(
    UNIT_BYTES,
    queue.reduce((n, k) => n + (ready(k) ? k.kernel.source.length : 0), 0) / Math.max(1, lanes - running),
  );
  while (running < lanes) {
    const first = queue.find(ready);
    if (first === undefined) return;
    // a unit compiles with one compiler and loads into one backend: kernels of another wait for a unit of their own
    const unit: Upgrade<unknown>[] = [];
    let bytes = 0;
    for (let i = 0; i < queue.length && bytes < share; ) {
      const k = queue[i]!;
      if (k.cc !== first.cc || k.load !== first.load || !ready(k)) i++;
      else {
        unit.push(k);
        bytes += k.kernel.source.length;
        queue.splice(i, 1);
      }
    }
    earliest = queue.reduce((e, k) => Math.min(e, k.queuedIn), Infinity);
    hookExit();
    new Rebuild(unit);
    running++;
  }
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // due kernels not started keep the quick build the next run loads
  process.on('beforeExit', () => {
    for (const r of started) r.take(true);
  });
  process.on('exit', () => {
    for (const r of started) r.cancel();
  });
}

/** How many optimized builds are compiling (each takes a core from the CPU's kernels: src/runtime/cpu.ts). */
export function compilersRebuilding(): number {
  let n = 0;
  for (const r of started) if (!r.ended()) n++;
  return n;
}

/** Waits for the optimized builds started to end, and loads them (BEAM's trials, timed without them). */
export function waitForRebuilds(): void {
  for (const r of [...started]) r.take(true);
}

/**
 * Rebuilds every kernel that two plans launched, due or not, waits for them and loads them: the later launches
 * run what a long run settles on (a bench's later steps).
 */
export function settleUpgrades(): void {
  for (const ref of repeated) {
    repeated.delete(ref);
    const k = ref.deref();
    if (k !== undefined && k.queuedIn < 0) k.enqueue();
  }
  while (queue.length > 0 || started.size > 0) {
    startDue(true);
    waitForRebuilds();
  }
}
