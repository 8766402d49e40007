// NVRTC in several processes: a schedule's new CUDA kernels compile at once, each as soon as it is lowered.
// Processes, not threads: NVRTC's threads in one process do not overlap (bench/nvrtc_batch.ts on the H200 host,
// 128 kernels: 8.3 s one at a time, 3.9 s on 8 threads, 0.71 s in 8 processes, 0.56 s in 16). Each compiler
// process has a worker thread that feeds it and counts its kernels up in a shared counter; the calling thread
// waits on that, so compileMany stays synchronous as the Backend interface is.
import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

// The compiler process, as CommonJS source: NVRTC through koffi (the library the main thread found), one
// kernel a message, its cubin (or NVRTC's log) written to the file the job names.
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

// The worker thread, as CommonJS source: it keeps one compiler process busy and counts its kernels up in the
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
const count = (done) => { Atomics.add(done, 0, 1); Atomics.notify(done, 0); };
const fail = ({ out, done }) => { writeFileSync(out + '.err', ended); count(done); };
child.on('message', () => count(queued.shift().done));
child.on('close', (code, signal) => {
  const lines = stderr.trim().split('\\n');
  const why = lines.filter((l) => /Error/.test(l)).pop() ?? lines.pop();
  ended = 'its compiler process ended (' + (signal ?? 'exit code ' + code) + ')' + (why ? ': ' + why.trim() : '');
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

let pool: Worker[] = [];
let poolLibrary = '';

function workers(nvrtc: string): Worker[] {
  if (poolLibrary !== nvrtc) {
    for (const w of pool) void w.terminate();
    const koffi = createRequire(import.meta.url).resolve('koffi');
    pool = Array.from({ length: Math.min(availableParallelism(), COMPILERS) }, () => {
      const workerData = { koffi, nvrtc, node: process.execPath, compiler: COMPILER };
      const w = new Worker(WORKER, { eval: true, workerData });
      w.unref(); // idle workers do not keep the process alive (their compiler processes end with them)
      return w;
    });
    poolLibrary = nvrtc;
  }
  return pool;
}

/** How long one batch may take before its missing kernels are reported as failed (a compiler that hangs). */
const BATCH_SECONDS = 600;

interface Job {
  name: string;
  source: string;
  options: readonly string[];
  /** The file the cubin is written to (the compiler's message to `out`.err). */
  out: string;
}

/**
 * Kernels compiled by NVRTC (the library at `nvrtc`) in the compiler processes as they are added: the caller
 * goes on lowering the next kernel while they compile the ones before. `results` waits for all of them.
 */
export class NvrtcBatch {
  private readonly jobs: Job[] = [];
  private readonly done = new Int32Array(new SharedArrayBuffer(4));
  private readonly pool: Worker[];

  /** Starts the compiler processes on first use (their start overlaps the first kernels' lowering). */
  constructor(nvrtc: string) {
    this.pool = workers(nvrtc);
  }

  add(job: Job): void {
    this.pool[this.jobs.length % this.pool.length]!.postMessage({ ...job, done: this.done });
    this.jobs.push(job);
  }

  /** Each job's cubin, or an Error carrying NVRTC's message, in the order added. */
  results(): (Uint8Array | Error)[] {
    const deadline = performance.now() + BATCH_SECONDS * 1000;
    for (
      let seen = Atomics.load(this.done, 0);
      seen < this.jobs.length && performance.now() < deadline;
      seen = Atomics.load(this.done, 0)
    )
      Atomics.wait(this.done, 0, seen, 1000);
    return this.jobs.map(({ name, out }) => {
      try {
        return new Uint8Array(readFileSync(out));
      } catch {
        let why = `no result within ${BATCH_SECONDS} s`;
        try {
          why = readFileSync(`${out}.err`, 'utf8');
        } catch {}
        return new Error(`CUDA: NVRTC cannot compile kernel ${name}: ${why}`);
      } finally {
        rmSync(out, { force: true });
        rmSync(`${out}.err`, { force: true });
      }
    });
  }
}
