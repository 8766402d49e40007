// NVRTC in several processes: a schedule's new CUDA kernels compile at once, as soon as they are lowered.
// Processes, not threads: NVRTC's threads in one process do not overlap (bench/nvrtc_batch.ts on the H200 host,
// 128 kernels: 8.3 s one at a time, 3.9 s on 8 threads, 0.71 s in 8 processes, 0.56 s in 16). Each compiler
// process has a worker thread that feeds it and counts its units up in a shared counter; the calling thread
// waits on that, so compileMany stays synchronous as the Backend interface is.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { type UnitKernel, unitSource } from './backend.ts';

// The compiler process, as CommonJS source: NVRTC through koffi (the library the main thread found), one
// unit of kernels a message, its cubin (or NVRTC's log) written to the file the job names.
const COMPILER = `
const { writeFileSync } = require('node:fs');
const koffi = require(process.argv[1]);
const lib = koffi.load(process.argv[2]);
const create = lib.func('int nvrtcCreateProgram(void *prog, const char *src, const char *name, int nheaders, const char **headers, const char **includeNames)');
const compile = lib.func('int nvrtcCompileProgram(uintptr_t prog, int nopts, const char **opts)');
const logSize = lib.func('int nvrtcGetProgramLogSize(uintptr_t prog, void *size)');
const getLog = lib.func('int nvrtcGetProgramLog(uintptr_t prog, void *log)');
const cubinSize = lib.func('int nvrtcGetCUBINSize(uintptr_t prog, void *size)');
const getCubin = lib.func('int nvrtcGetCUBIN(uintptr_t prog, void *cubin)');
const destroy = lib.func('int nvrtcDestroyProgram(void *prog)');
const errorString = lib.func('const char *nvrtcGetErrorString(int result)');
process.on('disconnect', () => process.exit(0));
process.on('message', ({ name, source, options, out }) => {
  const prog = new BigUint64Array(1);
  try {
    let code = create(prog, source, name + '.cu', 0, null, null);
    if (code !== 0) throw new Error('nvrtcCreateProgram failed: ' + errorString(code));
    const handle = Number(prog[0]);
    code = compile(handle, options.length, options);
    const size = new BigUint64Array(1);
    if (code !== 0) {
      logSize(handle, size);
      const log = new Uint8Array(Number(size[0]));
      getLog(handle, log);
      throw new Error(errorString(code) + ':\\n' + new TextDecoder().decode(log.subarray(0, Math.max(0, log.length - 1))));
    }
    cubinSize(handle, size);
    const cubin = new Uint8Array(Number(size[0]));
    getCubin(handle, cubin);
    writeFileSync(out, cubin);
  } catch (e) {
    writeFileSync(out + '.err', e.message);
  } finally {
    if (prog[0] !== 0n) destroy(prog);
    process.send('done');
  }
});
`;

// The worker thread, as CommonJS source: it keeps one compiler process busy and counts its units up in the
// shared counter the main thread waits on. A process that ends (a crash, a library that does not load) fails
// the kernels it holds and every later one with the error it printed.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const { writeFileSync } = require('node:fs');
const child = spawn(workerData.node, ['-e', workerData.compiler, workerData.koffi, workerData.nvrtc], {
  stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
});
let stderr = '';
child.stderr.on('data', (d) => { stderr += d; });
let ended;
const queued = [];
// done[0] counts every unit compiled, done[1 + index] this compiler's
const count = (done) => { Atomics.add(done, 1 + workerData.index, 1); Atomics.add(done, 0, 1); Atomics.notify(done, 0); };
const fail = ({ out, done }) => { writeFileSync(out + '.err', ended); count(done); };
child.on('message', () => count(queued.shift().done));
child.on('close', (code, signal) => {
  const lines = stderr.trim().split('\\n');
  const why = lines.filter((l) => /Error/.test(l)).pop() ?? lines.pop();
  ended = 'its compiler process ended (' + (signal ?? 'exit code ' + code) + ')' + (why ? ': ' + why.trim() : '');
  Atomics.store(new Int32Array(workerData.ended), workerData.index, 1);
  for (const job of queued.splice(0)) fail(job);
});
parentPort.on('message', ({ done, ...job }) => {
  if (ended !== undefined) return fail({ out: job.out, done });
  queued.push({ out: job.out, done });
  child.send(job);
});
`;

/** Compiler processes at most (one a core): 16 compiled 128 kernels in 0.56 s, 8 in 0.71 s. */
const COMPILERS = 16;

/** The compiler processes' workers, and which processes have ended (1: ended). */
interface Pool {
  workers: Worker[];
  ended: Int32Array;
}

let pool: Pool = { workers: [], ended: new Int32Array(0) };
let poolLibrary = '';

function compilers(nvrtc: string): Pool {
  if (poolLibrary !== nvrtc) {
    for (const w of pool.workers) void w.terminate();
    const koffi = createRequire(import.meta.url).resolve('koffi');
    const n = Math.min(availableParallelism(), COMPILERS);
    const ended = new SharedArrayBuffer(4 * n);
    const workers = Array.from({ length: n }, (_, index) => {
      const workerData = { koffi, nvrtc, node: process.execPath, compiler: COMPILER, index, ended };
      const w = new Worker(WORKER, { eval: true, workerData });
      w.unref(); // idle workers do not keep the process alive (their compiler processes end with them)
      return w;
    });
    pool = { workers, ended: new Int32Array(ended) };
    poolLibrary = nvrtc;
  }
  return pool;
}

/** How long one batch may take before its missing kernels are reported as failed (a compiler that hangs). */
const BATCH_SECONDS = 600;
/**
 * A unit holds at most this many kernels, and this much source once it has two. NVRTC costs about 45 ms a
 * program before its kernels (an empty kernel's, on the H200's host) and the transformer's first-step kernels
 * 70-80 ms each alone.
 */
const UNIT_KERNELS = 8;
const UNIT_BYTES = 64 * 1024;

/** A unit sent to a compiler: its kernels, and the file its cubin is written to (NVRTC's message to `out`.err). */
interface Sent<K extends UnitKernel> {
  kernels: K[];
  out: string;
}

/** A unit's outcome: the cubin holding its kernels' functions (by symbol), or NVRTC's error. */
export interface UnitResult<K extends UnitKernel> {
  kernels: K[];
  cubin: Uint8Array | Error;
}

/**
 * Kernels compiled by NVRTC (the library at `nvrtc`) in the compiler processes as they are added, so the caller
 * goes on lowering the next kernel while they compile the ones before; `results` waits for all of them. A free
 * compiler takes the kernels waiting as one unit (one program: a unit's kernels share NVRTC's cost of a
 * program), at most its share of the kernels still to compile (those waiting and those still to come, divided
 * by the compilers), so kernels compile alone while the compilers keep up, together once they fall behind, and
 * the last units are small: a unit of 8 kernels sent as the last were lowered took 0.3-0.4 s, which the whole
 * batch waited for. A unit that fails is compiled again kernel by kernel, so that each error is its own kernel's.
 */
export class NvrtcBatch<K extends UnitKernel> {
  private readonly pool: Pool;
  private readonly waiting: K[] = [];
  /** Kernels of a failed unit, each to be compiled alone. */
  private readonly alone: K[] = [];
  /** The units sent to each compiler, in the order sent. */
  private readonly sent: Sent<K>[][];
  /** Units compiled: done[0] in all, done[1 + i] by compiler i. */
  private readonly done: Int32Array;
  /** The units of each compiler whose outcome has been looked at (results: a failed one is split). */
  private readonly seen: number[];
  private units = 0;
  private added = 0;
  /** Whether results was called: no more kernels come. */
  private closed = false;

  /** Starts the compiler processes on first use (their start overlaps the first kernels' lowering). */
  constructor(
    nvrtc: string,
    private readonly options: readonly string[],
    /** The directory the cubins are written to. */
    private readonly dir: string,
    /** How many kernels the caller means to add, at most (it adds them one by one as they are lowered). */
    private readonly expected: number,
  ) {
    this.pool = compilers(nvrtc);
    this.sent = this.pool.workers.map(() => []);
    this.seen = this.pool.workers.map(() => 0);
    this.done = new Int32Array(new SharedArrayBuffer(4 * (1 + this.pool.workers.length)));
  }

  add(kernel: K): void {
    this.added++;
    this.waiting.push(kernel);
    this.dispatch();
  }

  /** Every unit's outcome (waiting for them all). */
  results(): UnitResult<K>[] {
    const deadline = performance.now() + BATCH_SECONDS * 1000;
    this.closed = true;
    for (;;) {
      const now = Atomics.load(this.done, 0);
      this.splitFailed();
      this.dispatch();
      if (now === this.units && this.waiting.length + this.alone.length === 0) break;
      if (performance.now() >= deadline) break;
      Atomics.wait(this.done, 0, now, 1000);
    }
    const units = this.sent.flat().filter((u) => u.kernels.length > 0);
    const late = [...this.waiting, ...this.alone];
    if (late.length > 0) units.push({ kernels: late, out: join(this.dir, 'late.cubin') });
    return units.map(({ kernels, out }) => {
      try {
        return { kernels, cubin: new Uint8Array(readFileSync(out)) };
      } catch {
        let why = `no result within ${BATCH_SECONDS} s`;
        try {
          why = readFileSync(`${out}.err`, 'utf8');
        } catch {}
        const names = kernels.map((k) => k.name).join(', ');
        return { kernels, cubin: new Error(`CUDA: NVRTC cannot compile kernel ${names}: ${why}`) };
      } finally {
        rmSync(out, { force: true });
        rmSync(`${out}.err`, { force: true });
      }
    });
  }

  /**
   * Sends waiting kernels to the free compilers, each its share of those still to compile; to a compiler whose
   * process has ended (which fails them, naming why) only once all have.
   */
  private dispatch(): void {
    const { workers, ended } = this.pool;
    const alive = ended.some((e) => e === 0);
    for (let i = 0; i < workers.length && this.waiting.length + this.alone.length > 0; i++) {
      if (this.sent[i]!.length !== Atomics.load(this.done, 1 + i) || (alive && Atomics.load(ended, i) === 1))
        continue;
      const coming = this.closed ? 0 : Math.max(0, this.expected - this.added);
      const kernels =
        this.alone.length > 0
          ? this.alone.splice(0, 1)
          : this.take(Math.ceil((this.waiting.length + coming) / workers.length));
      const out = join(this.dir, `${this.units++}.cubin`);
      this.sent[i]!.push({ kernels, out });
      const name = kernels.length === 1 ? kernels[0]!.name : `unit${this.units}`;
      workers[i]!.postMessage({
        name,
        source: unitSource(kernels),
        options: this.options,
        out,
        done: this.done,
      });
    }
  }

  /** The next unit of at most `n` waiting kernels (and UNIT_KERNELS, and UNIT_BYTES once it has two). */
  private take(n: number): K[] {
    let count = 0;
    let bytes = 0;
    const most = Math.min(n, UNIT_KERNELS);
    while (count < Math.min(most, this.waiting.length)) {
      bytes += this.waiting[count]!.source.length;
      if (count > 0 && bytes > UNIT_BYTES) break;
      count++;
    }
    return this.waiting.splice(0, Math.max(count, 1));
  }

  /** Kernels of the units of several that failed go back to be compiled alone. */
  private splitFailed(): void {
    for (let i = 0; i < this.sent.length; i++) {
      const done = Atomics.load(this.done, 1 + i);
      for (; this.seen[i]! < done; this.seen[i]!++) {
        const unit = this.sent[i]![this.seen[i]!]!;
        if (unit.kernels.length > 1 && existsSync(`${unit.out}.err`)) {
          this.alone.push(...unit.kernels);
          rmSync(`${unit.out}.err`, { force: true });
          unit.kernels = [];
        }
      }
    }
  }
}
