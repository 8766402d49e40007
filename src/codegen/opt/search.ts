// BEAM search: a kernel's opts chosen by compiling and timing candidates on its device; results cached on disk.
import { allocStorage, type DType, writeElement } from '../../dtype.ts';
import { ContextVar, DEBUG, sha256 } from '../../helpers.ts';
import type { Backend, Program } from '../../runtime/backend.ts';
import { DeviceBuffer } from '../../runtime/buffer.ts';
import { AxisType, Ops } from '../../uop/ops.ts';
import type { UOp } from '../../uop/uop.ts';
import { kernelName, type LowerOptions, lowerKernel } from '../index.ts';
import { kernelRanges } from './axes.ts';
import { ALLOW_TF32 } from './heuristic-gpu.ts';
import { CPU_TARGET, type Opt, printOpts, type Target } from './opts.ts';
import { TC_PADS } from './tc.ts';

/** The beam width: 0 keeps the hand-coded opts; n searches, keeping the n fastest candidates of each round. */
export const BEAM = new ContextVar('BEAM', 0);
/**
 * Seconds one kernel's search may take (0: no limit). Past it no new round starts and the round under way times
 * no more candidates; the finalists' runoff still runs. A 3x3 conv gradient on 2 CPU cores took minutes
 * unbounded.
 */
export const BEAM_TIME = new ContextVar('BEAM_TIME', 60);

/** Counts since start (for tests): searches run, results read from the cache, candidates timed, not compiled. */
export const beamStats = { searches: 0, hits: 0, timed: 0, failed: 0 };

/** Where results outlive the process: the disk cache under Node (src/node.ts sets it), none in a browser. */
export const beamStore: { read(key: string): string | undefined; write(key: string, text: string): void } = {
  read: () => undefined,
  write: () => {},
};

const FACTORS = [2, 3, 4, 5, 8, 16];
/** A child is its parent's opts plus an action on one axis, or a SWAP of two axes; what applyOpts refuses is no child. */
type Action = (axis: number) => Opt;
const split =
  (target: AxisType, factor: number, top = false): Action =>
  (axis) => ({ op: 'SPLIT', axis, factor, target, top });
const both = (target: AxisType) => FACTORS.flatMap((f) => [split(target, f), split(target, f, true)]);
const REGISTER_ACTIONS = [
  ...FACTORS.map((f) => split(AxisType.UPCAST, f)),
  ...FACTORS.map((f) => split(AxisType.UNROLL, f)),
];
const CPU_ACTIONS: readonly Action[] = [...REGISTER_ACTIONS, ...both(AxisType.THREAD)];
/** On a GPU: workgroup threads (LOCAL), shared reductions (GROUP, and GROUPTOP as the top part), padding to a warp, STAGE. */
const GPU_ACTIONS: readonly Action[] = [
  ...REGISTER_ACTIONS,
  ...[...FACTORS, 32].map((f) => split(AxisType.LOCAL, f)),
  ...both(AxisType.GROUP_REDUCE),
  ...[16, 32].map(
    (multiple): Action =>
      (axis) => ({ op: 'PADTO', axis, multiple }),
  ),
  // operands through LOCAL tiles (the list's last opt)
  (axis) => ({ op: 'STAGE', axis }),
];

/** The search's rules (not legality): how deep, how much to expand, how to time. */
const MAX_DEPTH = 8;
/**
 * Product of the UPCAST and UNROLL factors a child may have: bigger bodies compile slowly and spill registers.
 * A child may also double its parent's (the hand-coded register tiles start larger).
 */
const MAX_EXPAND = 64;
/** Runs per candidate (the fastest counts); runs stop once a candidate is this many times the best. */
const RUNS = 3;
const SLOW_FACTOR = 2;
/** A run this many times the best drops the candidate (a call cannot be interrupted, only not repeated). */
const DROP_FACTOR = 10;
/**
 * The finalists (the last beam and the hand-coded opts) are timed again in turns, this many rounds: a machine
 * whose speed drifts (other tenants) can flatter one candidate's turn, and the search should not keep that.
 */
const RUNOFF_ROUNDS = 3;
/** Copies of the buffers, used in turn so that caches do not flatter; fewer when they would pass the budget. */
const COPIES = 3;
const BUFFER_BUDGET = 64 << 20;

type Render = (name: string, linear: UOp) => string;
interface Candidate {
  opts: Opt[];
  name: string;
  source: string;
  program: Program;
  seconds: number;
}
type Lowered = Omit<Candidate, 'seconds' | 'program'>;

/** The PARAMs' buffers, COPIES times, inputs random; undefined when random data cannot time the kernel. */
function benchBuffers(ast: UOp, backend: Backend): DeviceBuffer[][] | undefined {
  const nodes = ast.toposort();
  const params = nodes.filter((u) => u.op === Ops.PARAM).map((u) => ({ ...u.argOf(Ops.PARAM), u }));
  params.sort((a, b) => Number(a.slot) - Number(b.slot));
  const sizes = params.map((p) => p.u.src[0]!.sizes[0]);
  // symbolic sizes or variables need values the search does not have
  if (params.some((p, i) => p.slot !== i || typeof sizes[i] !== 'number')) return undefined;
  // an index computed from loaded data would read out of bounds on random data
  const loaded = new Set<UOp>();
  for (const u of nodes) if (u.op === Ops.LOAD || u.src.some((s) => loaded.has(s))) loaded.add(u);
  if (nodes.some((u) => u.op === Ops.INDEX && loaded.has(u.src[1]!))) return undefined;
  const data = params.map((p, i) => randomStorage(p.dtype, sizes[i] as number));
  const bytes = data.reduce((n, d) => n + d.byteLength, 0);
  const copies = Math.max(1, Math.min(COPIES, Math.floor(BUFFER_BUDGET / Math.max(bytes, 1))));
  return Array.from({ length: copies }, () =>
    params.map((p, i) => new DeviceBuffer(backend, data[i]!.length, p.dtype).copyin(data[i]!)),
  );
}

function randomStorage(dtype: DType, n: number) {
  const out = allocStorage(dtype, n);
  for (let i = 0; i < n; i++)
    writeElement(
      dtype,
      out,
      i,
      dtype.isFloat
        ? Math.random() * 2 - 1
        : dtype.isBool
          ? Math.random() < 0.5
          : Math.floor(Math.random() * 8),
    );
  return out;
}

/** Lowers and renders each opt list, skipping illegal ones and programs already seen. */
function lowerAll(
  ast: UOp,
  optLists: Opt[][],
  render: Render,
  base: LowerOptions,
  seen: Set<string>,
): Lowered[] {
  const out: Lowered[] = [];
  for (const opts of optLists) {
    let name: string;
    let source: string;
    try {
      const k = lowerKernel(ast, { ...base, opts });
      name = k.name;
      source = render(name, k.linear);
    } catch {
      continue;
    }
    if (!seen.has(source)) out.push({ opts, name, source });
    seen.add(source);
  }
  return out;
}

/** Each action on each axis; counting axes before collapse overcounts, and applyOpts refuses the extra ones. */
function childOpts(ast: UOp, opts: Opt[], target: Target): Opt[][] {
  const axes = kernelRanges(ast).length + opts.length;
  const expand = (os: Opt[]) =>
    os.reduce(
      (n, o) =>
        o.op === 'SPLIT' && (o.target === AxisType.UPCAST || o.target === AxisType.UNROLL) ? n * o.factor : n,
      1,
    );
  const actions = target.grid === undefined ? CPU_ACTIONS : GPU_ACTIONS;
  const splits = Array.from({ length: axes }, (_, axis) => actions.map((a): Opt[] => [...opts, a(axis)]));
  // NOLOCALS only leads a list: later it would only forbid what the list has already not done; TC must lead one
  if (target.grid !== undefined && opts.length === 0) {
    splits.push([[{ op: 'NOLOCALS' }]]);
    const cores = target.tensorCores.flatMap((core, tc) => (core.tf32 && !ALLOW_TF32.value ? [] : [tc]));
    for (let axis = 0; axis < axes; axis++)
      splits.push(
        cores.flatMap((tc) => [0, TC_PADS].map((opt): Opt[] => [{ op: 'TC', axis, tc, opt, mode: 1 }])),
      );
  }
  const swaps = Array.from({ length: axes }, (_, axis) =>
    Array.from({ length: axes - axis - 1 }, (_, i): Opt[] => [
      ...opts,
      { op: 'SWAP', axis, other: axis + 1 + i },
    ]),
  );
  const limit = Math.max(MAX_EXPAND, 2 * expand(opts));
  return [...splits, ...swaps].flatMap((lists) => lists.filter((os) => expand(os) <= limit));
}

/** The fastest of RUNS runs on the buffer copies in turn; undefined when it fails or is DROP_FACTOR x `best`. */
function timer(sets: DeviceBuffer[][]): (p: Program, best: number) => number | undefined {
  let turn = 0;
  return (program, best) => {
    let fastest = Infinity;
    for (let i = 0; i < RUNS; i++) {
      let t: number;
      try {
        t = program.run(sets[turn++ % sets.length]!, [], true);
      } catch {
        return undefined;
      }
      if (t > best * DROP_FACTOR) return undefined;
      fastest = Math.min(fastest, t);
      if (fastest > best * SLOW_FACTOR) break;
    }
    return fastest;
  };
}

/** The finalist fastest over RUNOFF_ROUNDS turns each, with that time. */
function runoff(finalists: Candidate[], time: ReturnType<typeof timer>): Candidate {
  const seconds = finalists.map(() => Infinity);
  for (let round = 0; round < RUNOFF_ROUNDS; round++)
    finalists.forEach((c, i) => {
      seconds[i] = Math.min(seconds[i]!, time(c.program, Infinity) ?? Infinity);
    });
  const i = seconds.indexOf(Math.min(...seconds));
  return { ...finalists[i]!, seconds: seconds[i]! };
}

const us = (s: number) => (s < Infinity ? `${(s * 1e6).toFixed(1)} us` : '-');
const stderr = (globalThis as { process?: { stderr?: { isTTY?: boolean; write(s: string): unknown } } })
  .process?.stderr;

/** The fastest candidate found, and the kernel without opts for comparison; undefined: see beamSearch. */
function search(ast: UOp, backend: Backend, render: Render, width: number, base: LowerOptions) {
  const sets = benchBuffers(ast, backend);
  if (sets === undefined) return undefined;
  beamStats.searches++;
  const time = timer(sets);
  const label = `BEAM ${kernelName(ast)}`;
  const show = stderr !== undefined && (stderr.isTTY === true || DEBUG.value >= 1);
  const seen = new Set<string>();
  const limit = BEAM_TIME.value;
  const deadline = performance.now() + limit * 1000;
  const late = () => limit > 0 && performance.now() > deadline;
  let cut = false;
  let best = Infinity;
  /** The round's candidates that compiled and ran within the limit, fastest first. */
  const timeRound = (round: number, optLists: Opt[][]): Candidate[] => {
    const lowered = lowerAll(ast, optLists, render, base, seen);
    const status = (done: number) =>
      show &&
      stderr.write(
        `\r${label}: round ${round}, ${done}/${lowered.length} candidates, best ${us(best)}\x1b[K`,
      );
    status(0);
    const out: Candidate[] = [];
    backend.compileMany(lowered, { trial: true }).forEach((p, i) => {
      // the first round (no opts and the hand-coded ones) is always timed: the search needs both
      if (round > 0 && late()) {
        cut = true;
        return;
      }
      if (p instanceof Error) {
        beamStats.failed++;
        if (DEBUG.value >= 3)
          console.error(`${label}: a candidate does not compile: ${p.message.split('\n')[0]}`);
      } else {
        beamStats.timed++;
        const seconds = time(p, best);
        if (seconds !== undefined) out.push({ ...lowered[i]!, program: p, seconds });
        best = Math.min(best, seconds ?? best);
      }
      status(i + 1);
    });
    return out.sort((a, b) => a.seconds - b.seconds);
  };
  try {
    // the search starts from no opts and from the hand-coded ones, so it does not end below the heuristic
    const start = timeRound(0, [[], [...lowerKernel(ast, base).opts]]);
    const plain = start.find((c) => c.opts.length === 0);
    if (plain === undefined) return undefined;
    let winner = start[0]!;
    let beam = start.slice(0, width);
    for (let round = 1; round <= MAX_DEPTH; round++) {
      if (late()) {
        cut = true;
        break;
      }
      const next = timeRound(
        round,
        beam.flatMap((c) => childOpts(ast, c.opts, base.target ?? CPU_TARGET)),
      );
      if (next.length === 0 || next[0]!.seconds >= winner.seconds) break;
      winner = next[0]!;
      beam = next.slice(0, width);
    }
    const finalists = [...new Set([...beam, ...start.filter((c) => c !== plain)])];
    return { winner: runoff(finalists, time), plain };
  } finally {
    if (show) stderr.write(cut ? `, stopped at BEAM_TIME=${limit} s\n` : '\n');
    for (const set of sets) for (const b of set) b.free();
  }
}

/**
 * The opts BEAM search finds fastest for a kernel on a backend (kernels rendered by `render`), from the cache
 * when an earlier search stored them; undefined when the kernel cannot be timed (symbolic sizes, data-dependent
 * indexing) or its unoptimized form does not compile.
 */
export function beamSearch(
  ast: UOp,
  backend: Backend,
  render: Render,
  width: number,
  base: LowerOptions = {},
): Opt[] | undefined {
  // the limit is in the key: a longer search may find more
  const key = sha256(
    JSON.stringify(['beam', ast.key, backend.name, backend.compilerKey(), width, BEAM_TIME.value]),
  );
  const cached = fromStore(key, ast, base);
  if (cached !== undefined) {
    beamStats.hits++;
    if (DEBUG.value >= 2) console.log(`BEAM ${kernelName(ast)}: cached ${printOpts(cached)}`);
    return cached;
  }
  const found = search(ast, backend, render, width, base);
  if (found === undefined) return undefined;
  const { winner, plain } = found;
  beamStore.write(key, JSON.stringify(winner.opts));
  if (DEBUG.value >= 2)
    console.log(
      `BEAM ${winner.name}: ${printOpts(winner.opts)} ${us(winner.seconds)} (no opts: ${us(plain.seconds)})`,
    );
  return winner.opts;
}

/** Stored opts that still apply (an opt made illegal since is a miss). */
function fromStore(key: string, ast: UOp, base: LowerOptions): Opt[] | undefined {
  const text = beamStore.read(key);
  if (text === undefined) return undefined;
  try {
    const opts = JSON.parse(text) as Opt[];
    lowerKernel(ast, { ...base, opts });
    return opts;
  } catch {
    return undefined;
  }
}
