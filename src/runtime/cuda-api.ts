// The CUDA driver API (libcuda) and NVRTC (libnvrtc) through koffi: the functions the CUDA device calls, each
// checked, the current context, and where the libraries are looked for. Handles travel as numbers (user-space addresses fit 2^53).
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import type { LibraryHandle } from 'koffi';
import { koffi } from './koffi.ts';
import { readAhead } from './readahead.ts';

/** A pointer-sized out parameter: the callee writes it, `read` gives it back as a number. */
export class OutHandle {
  private readonly cell = new BigUint64Array(1);
  get ptr(): BigUint64Array {
    return this.cell;
  }
  read(): number {
    return Number(this.cell[0]);
  }
}

/** Each driver function returns a CUresult; `cuda.check` turns a nonzero one into an Error naming the call. */
const DRIVER = {
  cuInit: 'int cuInit(unsigned int flags)',
  cuDriverGetVersion: 'int cuDriverGetVersion(void *version)',
  cuDeviceGetCount: 'int cuDeviceGetCount(void *count)',
  cuDeviceGet: 'int cuDeviceGet(void *device, int ordinal)',
  cuDeviceGetName: 'int cuDeviceGetName(void *name, int len, int device)',
  cuDeviceGetAttribute: 'int cuDeviceGetAttribute(void *value, int attribute, int device)',
  cuDeviceTotalMem_v2: 'int cuDeviceTotalMem_v2(void *bytes, int device)',
  cuDevicePrimaryCtxRetain: 'int cuDevicePrimaryCtxRetain(void *ctx, int device)',
  cuCtxSetCurrent: 'int cuCtxSetCurrent(uintptr_t ctx)',
  cuCtxSynchronize: 'int cuCtxSynchronize()',
  cuMemAlloc_v2: 'int cuMemAlloc_v2(void *dptr, size_t bytes)',
  cuMemFree_v2: 'int cuMemFree_v2(uintptr_t dptr)',
  cuMemGetInfo_v2: 'int cuMemGetInfo_v2(void *free, void *total)',
  cuMemcpyHtoD_v2: 'int cuMemcpyHtoD_v2(uintptr_t dst, const void *src, size_t bytes)',
  cuMemcpyDtoH_v2: 'int cuMemcpyDtoH_v2(void *dst, uintptr_t src, size_t bytes)',
  cuMemcpyDtoD_v2: 'int cuMemcpyDtoD_v2(uintptr_t dst, uintptr_t src, size_t bytes)',
  cuModuleLoadData: 'int cuModuleLoadData(void *module, const void *image)',
  cuModuleGetFunction: 'int cuModuleGetFunction(void *fn, uintptr_t module, const char *name)',
  cuFuncSetAttribute: 'int cuFuncSetAttribute(uintptr_t fn, int attrib, int value)',
  cuModuleUnload: 'int cuModuleUnload(uintptr_t module)',
  cuLaunchKernel:
    'int cuLaunchKernel(uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, uintptr_t params, uintptr_t extra)',
  cuEventCreate: 'int cuEventCreate(void *event, unsigned int flags)',
  cuEventRecord: 'int cuEventRecord(uintptr_t event, uintptr_t stream)',
  cuEventSynchronize: 'int cuEventSynchronize(uintptr_t event)',
  cuEventQuery: 'int cuEventQuery(uintptr_t event)',
  cuEventElapsedTime: 'int cuEventElapsedTime(void *ms, uintptr_t start, uintptr_t end)',
  cuGetErrorName: 'int cuGetErrorName(int error, void *name)',
  cuGraphCreate: 'int cuGraphCreate(void *graph, unsigned int flags)',
  cuGraphAddKernelNode_v2:
    'int cuGraphAddKernelNode_v2(void *node, uintptr_t graph, const void *deps, size_t ndeps, const void *params)',
  cuGraphInstantiateWithFlags:
    'int cuGraphInstantiateWithFlags(void *exec, uintptr_t graph, unsigned long long flags)',
  cuGraphExecKernelNodeSetParams_v2:
    'int cuGraphExecKernelNodeSetParams_v2(uintptr_t exec, uintptr_t node, const void *params)',
  cuGraphLaunch: 'int cuGraphLaunch(uintptr_t exec, uintptr_t stream)',
  cuGraphExecDestroy: 'int cuGraphExecDestroy(uintptr_t exec)',
  cuGraphDestroy: 'int cuGraphDestroy(uintptr_t graph)',
} as const;

const NVRTC = {
  nvrtcVersion: 'int nvrtcVersion(void *major, void *minor)',
  nvrtcCreateProgram:
    'int nvrtcCreateProgram(void *prog, const char *src, const char *name, int nheaders, const char **headers, const char **includeNames)',
  nvrtcCompileProgram: 'int nvrtcCompileProgram(uintptr_t prog, int nopts, const char **opts)',
  nvrtcGetProgramLogSize: 'int nvrtcGetProgramLogSize(uintptr_t prog, void *size)',
  nvrtcGetProgramLog: 'int nvrtcGetProgramLog(uintptr_t prog, void *log)',
  nvrtcGetCUBINSize: 'int nvrtcGetCUBINSize(uintptr_t prog, void *size)',
  nvrtcGetCUBIN: 'int nvrtcGetCUBIN(uintptr_t prog, void *cubin)',
  nvrtcDestroyProgram: 'int nvrtcDestroyProgram(void *prog)',
  nvrtcGetErrorString: 'const char *nvrtcGetErrorString(int result)',
} as const;

// biome-ignore lint/suspicious/noExplicitAny: koffi functions take the argument types their prototype names
type Fn = (...args: any[]) => any;
export type Driver = Record<keyof typeof DRIVER, Fn>;
export type Nvrtc = Record<keyof typeof NVRTC, Fn>;

function bind<K extends string>(lib: LibraryHandle, table: Record<K, string>): Record<K, Fn> {
  const fns: Record<string, Fn> = {};
  for (const [k, proto] of Object.entries<string>(table)) fns[k] = lib.func(proto);
  return fns as Record<K, Fn>;
}

let driver: Driver | undefined;

/** The driver API, loaded and initialized on first use; throws saying why when there is no usable driver. */
export function cudaDriver(): Driver {
  if (driver !== undefined) return driver;
  let lib: LibraryHandle;
  try {
    lib = koffi().load('libcuda.so.1');
  } catch (e) {
    throw new Error(`CUDA: no NVIDIA driver here (libcuda.so.1 does not load: ${(e as Error).message})`);
  }
  const d = bind(lib, DRIVER);
  checkDriver(d, d.cuInit(0), 'cuInit');
  driver = d;
  return d;
}

/** A GPU: its context and what kernels may use of it. */
export interface Gpu {
  driver: Driver;
  context: number;
  name: string;
  arch: string;
  maxThreads: number;
  /** Workgroups in the grid's y and z dimensions, at most. */
  maxOuterGroups: number;
  /** Shared memory a block may have, opted in to (the static limit is 48 KiB). */
  sharedBytes: number;
  totalBytes: number;
  /** cuDriverGetVersion's: 1000 x major + 10 x minor (12010 is CUDA 12.1). */
  driverVersion: number;
}

let current = -1;
/** Makes `gpu`'s context the calling thread's (every driver call acts on the current context). */
export function use(gpu: Gpu): Driver {
  if (current !== gpu.context) {
    checkDriver(gpu.driver, gpu.driver.cuCtxSetCurrent(gpu.context), 'cuCtxSetCurrent');
    current = gpu.context;
  }
  return gpu.driver;
}

/**
 * Throws an Error naming the call and the driver's name for `code` unless it is CUDA_SUCCESS; `call` may be a
 * function where naming the call costs (a launch's grid, formatted only when it fails).
 */
export function checkDriver(d: Driver, code: number, call: string | (() => string)): void {
  if (code === 0) return;
  const name = new BigUint64Array(1);
  const text =
    d.cuGetErrorName(code, name) === 0 && name[0] !== 0n
      ? koffi().decode(Number(name[0]), 'char', -1)
      : `error ${code}`;
  throw new CudaError(`CUDA: ${typeof call === 'string' ? call : call()} failed: ${text}`, code);
}

export class CudaError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

export const CUDA_ERROR_OUT_OF_MEMORY = 2;
export const CUDA_ERROR_NOT_READY = 600;

/** Directories NVRTC may be in: CUDA_PATH and CUDA_HOME, the usual install paths, and Python's nvidia wheels. */
function nvrtcDirs(): string[] {
  const roots = [process.env.CUDA_PATH, process.env.CUDA_HOME, '/usr/local/cuda', '/opt/cuda'].filter(
    (d): d is string => d !== undefined && d !== '',
  );
  const dirs = roots.flatMap((r) => [join(r, 'lib64'), join(r, 'lib'), join(r, 'targets/x86_64-linux/lib')]);
  dirs.push('/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib');
  // pip's nvidia-cuda-nvrtc (nvidia/cuda_nvrtc/lib, or nvidia/cu13/lib from CUDA 13) in any Python's packages
  for (const base of ['/usr/lib', '/usr/local/lib', join(homedir(), '.local/lib')])
    for (const py of safeReaddir(base).filter((n) => n.startsWith('python3')))
      for (const pkgs of ['site-packages', 'dist-packages'])
        for (const sub of [
          'cuda_nvrtc/lib',
          ...safeReaddir(join(base, py, pkgs, 'nvidia')).map((n) => `${n}/lib`),
        ])
          dirs.push(join(base, py, pkgs, 'nvidia', sub));
  return [...new Set(dirs)].filter((d) => existsSync(d));
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

let nvrtc: { api: Nvrtc; version: string; path: string } | undefined;

/** NVRTC and its version, loaded on first use; throws naming every place it looked when it is not found. */
export function nvrtcLibrary(): { api: Nvrtc; version: string; path: string } {
  if (nvrtc !== undefined) return nvrtc;
  const dirs = nvrtcDirs();
  const candidates = [
    ...dirs.flatMap((d) =>
      safeReaddir(d)
        .filter((f) => /^libnvrtc\.so(\.\d+)*$/.test(f))
        .sort((a, b) => b.length - a.length)
        .map((f) => join(d, f)),
    ),
    'libnvrtc.so', // the dynamic loader's own search (LD_LIBRARY_PATH)
  ];
  const failures: string[] = [];
  for (const path of candidates) {
    try {
      const api = bind(koffi().load(path), NVRTC);
      const major = new Int32Array(1);
      const minor = new Int32Array(1);
      api.nvrtcVersion(major, minor);
      nvrtc = { api, version: `${major[0]}.${minor[0]}`, path };
      prefetchNvrtc(path);
      return nvrtc;
    } catch (e) {
      failures.push(`${path}: ${(e as Error).message}`);
    }
  }
  throw new Error(
    `CUDA: NVRTC (libnvrtc.so) not found; looked in ${dirs.join(', ') || '(no CUDA directories exist)'} and the loader's path` +
      `${failures.length ? ` (${failures.join('; ')})` : ''}. Set CUDA_PATH to the CUDA toolkit, or pip install nvidia-cuda-nvrtc`,
  );
}

/**
 * Has the kernel read NVRTC and its builtins library into the page cache in the background: on a host that has not
 * read them since it started (113 MB for CUDA 13), a first batch's compiler processes otherwise read their code
 * page by page as they compile.
 */
function prefetchNvrtc(path: string): void {
  try {
    const real = realpathSync(path);
    const dir = dirname(real);
    const builtins = safeReaddir(dir).filter((f) => f.startsWith('libnvrtc-builtins.so'));
    readAhead([real, ...builtins.map((f) => join(dir, f))]);
  } catch {
    // found by the loader's own search: no path to read ahead
  }
}

/** Where cuda_fp16.h is, for kernels of half floats: the toolkit's include directory, if there is one. */
export function cudaIncludeDir(): string | undefined {
  const roots = [process.env.CUDA_PATH, process.env.CUDA_HOME, '/usr/local/cuda', '/opt/cuda'];
  return roots
    .filter((r): r is string => r !== undefined && r !== '')
    .map((r) => join(r, 'include'))
    .find((d) => existsSync(join(d, 'cuda_fp16.h')));
}

/**
 * A kernel's arguments as cuLaunchKernel takes them: an 8-byte slot per argument (a device address, or an int32
 * in the low half) and an array of pointers to the slots, made once; a launch only rewrites the slots.
 */
export class ArgBlock {
  private readonly slots: Uint32Array;
  private readonly pointers: BigUint64Array;
  /** The address of the pointer array (kernelParams). */
  readonly address: number;

  constructor(readonly count: number) {
    this.slots = new Uint32Array(2 * Math.max(count, 1));
    this.pointers = new BigUint64Array(Math.max(count, 1));
    const base = Number(koffi().address(this.slots));
    for (let i = 0; i < count; i++) this.pointers[i] = BigInt(base + 8 * i);
    this.address = Number(koffi().address(this.pointers));
  }

  /** Buffers' device addresses, then int32 values. */
  set(bufs: readonly { memory: unknown }[], vals: readonly number[] = []): void {
    const slots = this.slots;
    for (let i = 0; i < bufs.length; i++) {
      const address = bufs[i]!.memory as number;
      slots[2 * i] = address % 0x100000000;
      slots[2 * i + 1] = Math.floor(address / 0x100000000);
    }
    for (let i = 0; i < vals.length; i++) {
      slots[2 * (bufs.length + i)] = vals[i]! | 0;
      slots[2 * (bufs.length + i) + 1] = 0;
    }
  }
}
