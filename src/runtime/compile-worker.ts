// Compiler processes in the background: a worker thread starts them (a few at once) and reports each exit through
// shared memory, so the main thread renders the next kernels meanwhile and waits only when it needs the result.
import { Worker } from 'node:worker_threads';

/** A compiler run: the command, and the file its messages go to. */
export interface CompilerRun {
  argv: readonly string[];
  stderr: string;
}

// CommonJS, evaluated: the worker needs no loader for TypeScript. Shared state: [0] the runs ended, then per
// run: 0 running or queued, 1 exit status 0, 2 another status or a signal, 3 it did not start (the reason is
// in its stderr file); then per run its process id once started; last, 1 where no queued run may start.
const WORKER = `
const { parentPort } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const { openSync, closeSync, writeFileSync } = require('node:fs');
const queue = [];
// optimized rebuilds (src/runtime/cc-upgrades.ts) start only while no other run waits or runs
const background = [];
let running = 0;
let urgent = 0;
let lanes = 1;
function done(job, state) {
  Atomics.store(job.states, job.slot, state);
  Atomics.add(job.states, 0, 1);
  Atomics.notify(job.states, job.slot);
  Atomics.notify(job.states, 0);
  running--;
  if (!job.background) urgent--;
  next();
}
function next() {
  while (running < lanes && (queue.length > 0 || (urgent === 0 && background.length > 0))) {
    const job = queue.length > 0 ? queue.shift() : background.shift();
    if (Atomics.load(job.states, job.states.length - 1) === 1) continue;
    running++;
    if (!job.background) urgent++;
    let fd;
    try {
      fd = openSync(job.stderr, 'w');
      const p = spawn(job.argv[0], job.argv.slice(1), { stdio: ['ignore', 'ignore', fd] });
      if (p.pid !== undefined) Atomics.store(job.states, job.pidAt, p.pid);
      p.on('error', (e) => { writeFileSync(job.stderr, String(e.message)); done(job, 3); });
      p.on('close', (code) => done(job, code === 0 ? 1 : 2));
    } catch (e) {
      writeFileSync(job.stderr, String(e.message));
      done(job, 3);
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
}
parentPort.on('message', (job) => {
  lanes = job.lanes;
  if (job.argv !== undefined) {
    job.states = new Int32Array(job.states);
    (job.background ? background : queue).push(job);
  }
  next();
});
`;

let worker: Worker | undefined;

/** The worker, started on first use; it does not keep the process alive. */
function compileWorker(): Worker {
  if (worker === undefined) {
    worker = new Worker(WORKER, { eval: true });
    worker.unref();
  }
  return worker;
}

/**
 * Runs compiler processes in the background, at most `lanes` at once, in the order they are started; those of
 * a `background` CompilerRuns start only while no other run is queued or running.
 */
export class CompilerRuns {
  private readonly states: Int32Array;
  private readonly most: number;
  private started = 0;

  constructor(
    most: number,
    private lanes: number,
    private readonly background = false,
  ) {
    this.most = Math.max(1, most);
    this.states = new Int32Array(new SharedArrayBuffer(4 * (2 + 2 * this.most)));
  }

  /** Queues a run; returns its number for `wait`. */
  start(run: CompilerRun): number {
    const slot = 1 + this.started++;
    const { argv, stderr } = run;
    const pidAt = slot + this.most;
    const job = { argv, stderr, lanes: this.lanes, background: this.background, slot, pidAt };
    compileWorker().postMessage({ ...job, states: this.states.buffer });
    return slot;
  }

  /** Lets `lanes` runs run at once from now on, the queued ones included. */
  setLanes(lanes: number): void {
    if (lanes === this.lanes) return;
    this.lanes = lanes;
    compileWorker().postMessage({ lanes });
  }

  /** Whether run `slot` has ended (see wait), without waiting. */
  ended(slot: number): boolean {
    return Atomics.load(this.states, slot) !== 0;
  }

  /** Runs no queued run and kills the running ones (synchronous: for a process on its way out). */
  cancel(): void {
    Atomics.store(this.states, this.states.length - 1, 1);
    for (let slot = 1; slot <= this.started; slot++) {
      const pid = Atomics.load(this.states, slot + this.most);
      if (pid > 0 && !this.ended(slot))
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // it ended meanwhile
        }
    }
  }

  /** Whether fewer than `lanes` runs are running or queued: one started now would start at once. */
  laneFree(): boolean {
    return this.started - Atomics.load(this.states, 0) < this.lanes;
  }

  /** Blocks until a lane is free. */
  waitForLane(): void {
    for (let ended = Atomics.load(this.states, 0); this.started - ended >= this.lanes; ) {
      Atomics.wait(this.states, 0, ended);
      ended = Atomics.load(this.states, 0);
    }
  }

  /** Blocks until run `slot` has ended: 'ok' where it exited with status 0, else 'failed' or 'not started'. */
  wait(slot: number): 'ok' | 'failed' | 'not started' {
    while (Atomics.load(this.states, slot) === 0) Atomics.wait(this.states, slot, 0);
    const state = Atomics.load(this.states, slot);
    return state === 1 ? 'ok' : state === 2 ? 'failed' : 'not started';
  }
}
