// The CUDA device: NVIDIA GPUs through the driver API. Kernels are CUDA C compiled by NVRTC to a cubin for the
// GPU's own architecture (cached on disk like the CPU's libraries), loaded as modules and launched on the grid
// their source's launch line names; memory is device memory with the allocator's free list.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextVar, sha256 } from '../helpers.ts';
import { LRU } from '../lru.ts';
import { Allocator } from './allocator.ts';
import {
  Backend,
  checkBuffers,
  type GraphReplay,
  type KernelInput,
  type KernelLanguage,
  numberedSource,
  type Program,
  type RecordedLaunch,
  type UnitKernel,
  unitSource,
} from './backend.ts';
import type { DeviceBuffer } from './buffer.ts';
import {
  ArgBlock,
  CUDA_ERROR_NOT_READY,
  CUDA_ERROR_OUT_OF_MEMORY,
  CudaError,
  checkDriver,
  cudaDriver,
  cudaIncludeDir,
  type Gpu,
  nvrtcLibrary,
  OutHandle,
  use,
} from './cuda-api.ts';
import { CUDAGraph } from './cuda-graph.ts';
import { cachedBody, publishFile, withBuildDir } from './diskcache.ts';
import { NvrtcBatch } from './nvrtc-workers.ts';
import { HOPPER_TENSOR_CORES, NVIDIA_TENSOR_CORES, type TensorCore } from './tensor-cores.ts';

/** 1: a JIT's replays on CUDA run as one CUDA graph (0: a launch per kernel). */
export const JIT_GRAPH = new ContextVar<number>('JIT_GRAPH', 1);

// cuDeviceGetAttribute's attributes used here
const ATTRIBUTE = {
  maxThreadsPerBlock: 1,
  maxGridY: 6,
  sharedPerBlock: 8,
  sharedPerBlockOptIn: 97,
  ccMajor: 75,
  ccMinor: 76,
} as const;
/**
 * How cubins are built, in the compiler key: each kernel's function is named by its symbol (symbolOf), as in a
 * unit of several, so a cached cubin is read the same way whichever unit built it.
 */
const CUBIN_FORMAT = 'units';
const symbolOf = (name: string, key: string) => `${name}_${key.slice(0, 16)}`;
/** A kernel and its content key, which names its disk cache entry. */
type Keyed = UnitKernel & { readonly key: string };
/** The modules a batch loaded, by their cubin's length. */
type LoadedCubins = Map<number, { cubin: Uint8Array; module: number }[]>;

/** CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
const FUNC_MAX_DYNAMIC_SHARED = 8;

function openGpu(ordinal: number): Gpu {
  const driver = cudaDriver();
  const ok = (code: number, call: string) => checkDriver(driver, code, call);
  const count = new Int32Array(1);
  ok(driver.cuDeviceGetCount(count), 'cuDeviceGetCount');
  if (ordinal >= count[0]!)
    throw new Error(
      `CUDA:${ordinal}: this machine has ${count[0]} NVIDIA GPU(s); valid devices are CUDA` +
        (count[0]! > 1 ? ` to CUDA:${count[0]! - 1}` : ''),
    );
  const dev = new Int32Array(1);
  ok(driver.cuDeviceGet(dev, ordinal), 'cuDeviceGet');
  const attribute = (a: number) => {
    const v = new Int32Array(1);
    ok(driver.cuDeviceGetAttribute(v, a, dev[0]), 'cuDeviceGetAttribute');
    return v[0]!;
  };
  const name = new Uint8Array(256);
  ok(driver.cuDeviceGetName(name, name.length, dev[0]), 'cuDeviceGetName');
  const total = new BigUint64Array(1);
  ok(driver.cuDeviceTotalMem_v2(total, dev[0]), 'cuDeviceTotalMem');
  const version = new Int32Array(1);
  ok(driver.cuDriverGetVersion(version), 'cuDriverGetVersion');
  const context = new OutHandle();
  ok(driver.cuDevicePrimaryCtxRetain(context.ptr, dev[0]), 'cuDevicePrimaryCtxRetain');
  return {
    driver,
    context: context.read(),
    name: new TextDecoder().decode(name.subarray(0, name.indexOf(0))),
    arch: `sm_${attribute(ATTRIBUTE.ccMajor)}${attribute(ATTRIBUTE.ccMinor)}`,
    maxThreads: attribute(ATTRIBUTE.maxThreadsPerBlock),
    maxOuterGroups: attribute(ATTRIBUTE.maxGridY),
    sharedBytes: attribute(ATTRIBUTE.sharedPerBlockOptIn),
    totalBytes: Number(total[0]),
    driverVersion: version[0]!,
  };
}

const gigabytes = (n: number) => `${(n / 1e9).toFixed(2)} GB`;

/** Device memory: blocks are device addresses (numbers), which the host reaches only by copies. */
class CUDAAllocator extends Allocator<number> {
  constructor(
    device: string,
    private readonly gpu: Gpu,
  ) {
    super(device);
  }

  protected create(nbytes: number): number {
    const d = use(this.gpu);
    const ptr = new OutHandle();
    const code = d.cuMemAlloc_v2(ptr.ptr, Math.max(nbytes, 1));
    if (code === CUDA_ERROR_OUT_OF_MEMORY) {
      const free = new BigUint64Array(1);
      const total = new BigUint64Array(1);
      d.cuMemGetInfo_v2(free, total);
      throw new CudaError(
        `${this.device}: out of memory allocating ${nbytes} bytes (${gigabytes(nbytes)}): ${gigabytes(Number(free[0]))} free of ` +
          `${gigabytes(Number(total[0]))}; tsgrad's buffers hold ${gigabytes(this.bytesInUse)} and its cache ${gigabytes(this.bytesCached)}`,
        code,
      );
    }
    checkDriver(d, code, `cuMemAlloc (${nbytes} bytes)`);
    return ptr.read();
  }

  protected override destroy(mem: number): void {
    checkDriver(use(this.gpu), this.gpu.driver.cuMemFree_v2(mem), 'cuMemFree');
  }

  bytes(_mem: number, nbytes: number): never {
    throw new Error(
      `${this.device}: ${nbytes} bytes of GPU memory cannot be viewed from the host; copy them out`,
    );
  }

  // Straight from pageable memory: two pinned staging buffers (the host filling one while the copy engine drains
  // the other) measured no faster on the H100 host (2026-11-27: host->GPU 5.2-9.5 GB/s staged vs 6.9-10.0 direct,
  // GPU->host 6.4-7.6 vs 9.4-10.6, for 1-256 MiB): the host's own memcpy (9.1 GB/s) is the bound either way.
  override copyin(mem: number, src: Uint8Array): void {
    if (src.byteLength > 0)
      checkDriver(use(this.gpu), this.gpu.driver.cuMemcpyHtoD_v2(mem, src, src.byteLength), 'cuMemcpyHtoD');
  }

  override copyout(dst: Uint8Array, mem: number): void {
    if (dst.byteLength > 0)
      checkDriver(use(this.gpu), this.gpu.driver.cuMemcpyDtoH_v2(dst, mem, dst.byteLength), 'cuMemcpyDtoH');
  }
}

/**
 * How a kernel launches, from the line renderCUDA writes first: `// launch grid X Y Z block X Y Z writes 0 ...`
 * and `shared N` where it needs dynamic shared memory.
 */
export interface Launch {
  dims: [number, number, number, number, number, number];
  /** The buffers (data0, data1, ...) it writes. */
  writes: number[];
  /** Bytes of dynamic shared memory. */
  shared: number;
}

function launchOf(name: string, source: string, maxOuterGroups: number): Launch {
  const m =
    /^\/\/ launch grid (\d+) (\d+) (\d+) block (\d+) (\d+) (\d+) writes([\d ]*?)(?: shared (\d+))?$/m.exec(
      source,
    );
  if (m === null)
    throw new Error(`CUDA: kernel ${name}: its source has no '// launch grid ... block ... writes ...' line`);
  const dims = m.slice(1, 7).map(Number) as Launch['dims'];
  // a GPU's grid is at most 2^31 - 1 groups in x and the device's limit in y and z
  if (dims[0] >= 2 ** 31 || dims[1] > maxOuterGroups || dims[2] > maxOuterGroups)
    throw new Error(
      `CUDA: kernel ${name}: grid ${dims.slice(0, 3).join('x')} is larger than this GPU's (2^31-1 x ${maxOuterGroups} x ${maxOuterGroups})`,
    );
  return { dims, writes: m[7]!.trim().split(/\s+/).filter(Boolean).map(Number), shared: Number(m[8] ?? 0) };
}

export class CUDABackend extends Backend {
  private readonly gpu: Gpu;
  // loaded modules by content key; one dropped from here stays loaded, as programs may still hold its functions
  private readonly modules = new LRU<string, number>();

  constructor(name: string) {
    const gpu = openGpu(Number(name.split(':')[1] ?? 0));
    super(name, 'CUDA', new CUDAAllocator(name, gpu));
    this.gpu = gpu;
  }

  /** The GPU's name and architecture, e.g. `NVIDIA H100 80GB HBM3 (sm_90)`. */
  get description(): string {
    return `${this.gpu.name} (${this.gpu.arch})`;
  }

  language(): KernelLanguage {
    return 'CUDA';
  }

  // beyond 48 KiB a kernel's shared memory is dynamic, which it opts in to (CUDAProgram)
  override workgroups() {
    return {
      maxThreads: this.gpu.maxThreads,
      localBytes: this.gpu.sharedBytes,
      maxOuterGroups: this.gpu.maxOuterGroups,
      asyncCopies: Number(this.gpu.arch.slice(3)) >= 80,
      matrixLoads: Number(this.gpu.arch.slice(3)) >= 75,
    };
  }

  /**
   * NVRTC contracts no multiply and add of its own (--fmad=false): the IR places the FMAs (src/codegen/contract.ts)
   * as on the CPU, so that a kernel's bits do not depend on what else its kernel computes (NVRTC fused other
   * products once an optimizer's three kernels were one).
   */
  override fusedMultiplyAdds(): boolean {
    return true;
  }

  // float4-style loads and stores: 16 bytes is the widest a thread moves at once
  override vectorBytes(): number {
    return 16;
  }

  // mma.sync's shapes from Ampere (sm_80) on; Hopper's warpgroup ones after them (sm_90a, which it compiles for)
  override tensorCores(): readonly TensorCore[] {
    if (this.gpu.arch === 'sm_90') return [...NVIDIA_TENSOR_CORES, ...HOPPER_TENSOR_CORES];
    return Number(this.gpu.arch.slice(3)) >= 80 ? NVIDIA_TENSOR_CORES : [];
  }

  // kernel parameters are 8-byte pointers (a variable, 4 bytes, counted as one): 4 KB of them, or 32,764 bytes
  // from CUDA 12.1 (driver and NVRTC) on Volta and later
  override maxBuffers(): number {
    const [major, minor] = nvrtcLibrary().version.split('.').map(Number) as [number, number];
    const large =
      this.gpu.driverVersion >= 12010 && major * 100 + minor >= 1201 && Number(this.gpu.arch.slice(3)) >= 70;
    return Math.floor((large ? 32764 : 4096) / 8);
  }

  override compilerKey(): string {
    return JSON.stringify(['CUDA', this.gpu.arch, nvrtcLibrary().version, this.options(), CUBIN_FORMAT]);
  }

  private nvrtcOptions: string[] | undefined;
  private options(): string[] {
    if (this.nvrtcOptions === undefined) {
      const include = cudaIncludeDir();
      this.nvrtcOptions = [
        // Hopper's own target: wgmma exists only in sm_90a code (which runs on compute capability 9.0 alone)
        `--gpu-architecture=${this.gpu.arch === 'sm_90' ? 'sm_90a' : this.gpu.arch}`,
        // the kernels' FMAs are the IR's (fusedMultiplyAdds)
        '--fmad=false',
        '-default-device',
        '-w',
        ...(include ? [`-I${include}`] : []),
      ];
    }
    return this.nvrtcOptions;
  }

  private keyOf(source: string): string {
    return sha256(JSON.stringify([source, this.compilerKey()]));
  }

  // through the compiler processes too: NVRTC on this thread took 65 ms a kernel where a process took 27
  compile(name: string, source: string): Program {
    const [program] = this.compileMany([{ name, source }]);
    if (program instanceof Error) throw program;
    return program!;
  }

  /**
   * The kernel's program: its function in the module loaded from `image` (the cubin where known), else from the
   * disk cache or NVRTC. The kernels of a unit share one cubin, loaded once per batch (`loaded`).
   */
  private load(name: string, source: string, key: string, loaded: LoadedCubins, image?: Uint8Array): Program {
    const launch = launchOf(name, source, this.gpu.maxOuterGroups);
    const symbol = symbolOf(name, key);
    let module = this.modules.get(key);
    if (module === undefined) {
      const cubin =
        image ?? cachedBody(key, '.cubin') ?? this.cache([key], this.nvrtcCompile({ name, source, symbol }));
      module = this.moduleOf(cubin, name, loaded);
      this.modules.set(key, module);
    }
    const fn = new OutHandle();
    checkDriver(
      use(this.gpu),
      this.gpu.driver.cuModuleGetFunction(fn.ptr, module, symbol),
      'cuModuleGetFunction',
    );
    if (launch.shared > 0)
      checkDriver(
        use(this.gpu),
        this.gpu.driver.cuFuncSetAttribute(fn.read(), FUNC_MAX_DYNAMIC_SHARED, launch.shared),
        `cuFuncSetAttribute (kernel ${name}, ${launch.shared} bytes of dynamic shared memory)`,
      );
    return new CUDAProgram(this, this.gpu, name, fn.read(), launch);
  }

  /** Stores a cubin just built in the disk cache, under the key of each kernel it holds; returns it. */
  private cache(keys: readonly string[], cubin: Uint8Array): Uint8Array {
    withBuildDir((dir, cached) => {
      if (!cached) return;
      const file = join(dir, `${keys[0]}.cubin`);
      writeFileSync(file, cubin);
      publishFile(file, keys, '.cubin');
    });
    return cubin;
  }

  /** The module of `cubin`, loaded once a batch: a unit's kernels read the same cubin (from disk, a copy each). */
  private moduleOf(cubin: Uint8Array, name: string, loaded: LoadedCubins): number {
    const same = loaded.get(cubin.length);
    const found = same?.find((m) =>
      Buffer.from(m.cubin.buffer, m.cubin.byteOffset, m.cubin.length).equals(cubin),
    );
    if (found !== undefined) return found.module;
    const d = use(this.gpu);
    const handle = new OutHandle();
    checkDriver(d, d.cuModuleLoadData(handle.ptr, cubin), `cuModuleLoadData (kernel ${name})`);
    const module = handle.read();
    if (same === undefined) loaded.set(cubin.length, [{ cubin, module }]);
    else same.push({ cubin, module });
    return module;
  }

  /**
   * Kernels neither loaded nor cached on disk compile in NVRTC processes as soon as they are lowered (they compile
   * while this thread lowers the next; src/runtime/nvrtc-workers.ts makes units of those that wait); then each
   * loads from the cubin found or built here (its disk entry read and verified once).
   */
  override compileMany(inputs: readonly KernelInput[]): (Program | Error)[] {
    const images = new Map<string, Uint8Array>();
    const seen = new Set<string>();
    let batch: NvrtcBatch<Keyed> | undefined;
    let dir = '';
    const kernels = inputs.map((input): Keyed | Error => {
      let k: Keyed;
      try {
        const lowered = typeof input === 'function' ? input() : input;
        const key = this.keyOf(lowered.source);
        k = { ...lowered, key, symbol: symbolOf(lowered.name, key) };
      } catch (e) {
        return e as Error;
      }
      if (seen.has(k.key) || this.modules.get(k.key) !== undefined) return k;
      seen.add(k.key);
      const cubin = cachedBody(k.key, '.cubin');
      if (cubin !== undefined) images.set(k.key, cubin);
      else {
        if (batch === undefined) {
          dir = mkdtempSync(join(tmpdir(), 'tsgrad-nvrtc-'));
          batch = new NvrtcBatch(nvrtcLibrary().path, this.options(), dir, inputs.length);
        }
        batch.add(k);
      }
      return k;
    });
    if (batch !== undefined)
      try {
        for (const { kernels: unit, cubin } of batch.results()) {
          if (!(cubin instanceof Uint8Array)) continue;
          this.cache(
            unit.map((k) => k.key),
            cubin,
          );
          for (const k of unit) images.set(k.key, cubin);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    // each loads what was found or built; one that failed compiles here again, for its error with the source
    const loaded: LoadedCubins = new Map();
    return kernels.map((k) => {
      if (k instanceof Error) return k;
      try {
        return this.load(k.name, k.source, k.key, loaded, images.get(k.key));
      } catch (e) {
        return e as Error;
      }
    });
  }

  /** The kernel compiled alone on this thread, its function named `symbol` as in a unit. */
  private nvrtcCompile(kernel: UnitKernel): Uint8Array {
    const { name } = kernel;
    const source = unitSource([kernel]);
    const { api } = nvrtcLibrary();
    const prog = new OutHandle();
    const fail = (code: number, call: string) => {
      if (code !== 0)
        throw new Error(`CUDA: ${call} failed for kernel ${name}: ${api.nvrtcGetErrorString(code)}`);
    };
    fail(api.nvrtcCreateProgram(prog.ptr, source, `${name}.cu`, 0, null, null), 'nvrtcCreateProgram');
    const handle = prog.read();
    try {
      const options = this.options();
      const code = api.nvrtcCompileProgram(handle, options.length, options);
      if (code !== 0) {
        const size = new BigUint64Array(1);
        api.nvrtcGetProgramLogSize(handle, size);
        const log = new Uint8Array(Number(size[0]));
        api.nvrtcGetProgramLog(handle, log);
        throw new Error(
          `CUDA: NVRTC cannot compile kernel ${name} (${api.nvrtcGetErrorString(code)}):\n` +
            `${new TextDecoder().decode(log.subarray(0, Math.max(0, log.length - 1)))}\n${numberedSource(kernel.source)}`,
        );
      }
      const size = new BigUint64Array(1);
      fail(api.nvrtcGetCUBINSize(handle, size), 'nvrtcGetCUBINSize');
      const cubin = new Uint8Array(Number(size[0]));
      fail(api.nvrtcGetCUBIN(handle, cubin), 'nvrtcGetCUBIN');
      return cubin;
    } finally {
      api.nvrtcDestroyProgram(prog.ptr);
    }
  }

  // a graph for a JIT of two kernels or more: one driver call a replay instead of one a kernel
  override graph(launches: readonly RecordedLaunch[]): GraphReplay | undefined {
    if (JIT_GRAPH.value === 0 || launches.length < 2) return undefined;
    const g = new CUDAGraph(
      this.gpu,
      launches as readonly { program: CUDAProgram; bufs: readonly DeviceBuffer[] }[],
    );
    return (swap) => g.replay(swap);
  }

  private idleEvent = 0;

  /** Polls an event recorded after the work issued so far: every millisecond once the first checks find it busy. */
  override async idle(): Promise<void> {
    const d = use(this.gpu);
    if (this.idleEvent === 0) {
      const e = new OutHandle();
      checkDriver(d, d.cuEventCreate(e.ptr, 2 /* CU_EVENT_DISABLE_TIMING */), 'cuEventCreate');
      this.idleEvent = e.read();
    }
    const event = this.idleEvent;
    checkDriver(d, d.cuEventRecord(event, 0), 'cuEventRecord');
    for (let polls = 0; ; polls++) {
      const code = use(this.gpu).cuEventQuery(event);
      if (code !== CUDA_ERROR_NOT_READY) return checkDriver(d, code, 'cuEventQuery');
      await new Promise((resolve) => (polls < 8 ? setImmediate(resolve) : setTimeout(resolve, 1)));
    }
  }

  override synchronize(): void {
    checkDriver(use(this.gpu), this.gpu.driver.cuCtxSynchronize(), 'cuCtxSynchronize');
  }
}

export class CUDAProgram implements Program {
  private args: ArgBlock | undefined;
  private events: [number, number] | undefined;

  constructor(
    private readonly backend: CUDABackend,
    private readonly gpu: Gpu,
    readonly name: string,
    /** The kernel's CUfunction. */
    readonly fn: number,
    readonly launch: Launch,
  ) {}

  get device(): string {
    return this.backend.name;
  }

  run(bufs: readonly DeviceBuffer[], vals: readonly number[] = [], timed = false): number {
    checkBuffers(this.backend, this.name, bufs);
    const n = bufs.length + vals.length;
    if (this.args?.count !== n) this.args = new ArgBlock(n);
    this.args.set(bufs, vals);
    for (const i of this.launch.writes) bufs[i]?.written();
    const d = use(this.gpu);
    const [gx, gy, gz, bx, by, bz] = this.launch.dims;
    if (!timed) {
      checkDriver(
        d,
        d.cuLaunchKernel(this.fn, gx, gy, gz, bx, by, bz, this.launch.shared, 0, this.args.address, 0),
        () => this.launchName(),
      );
      return 0;
    }
    const [start, end] = (this.events ??= [this.event(), this.event()]);
    checkDriver(d, d.cuEventRecord(start, 0), 'cuEventRecord');
    checkDriver(
      d,
      d.cuLaunchKernel(this.fn, gx, gy, gz, bx, by, bz, this.launch.shared, 0, this.args.address, 0),
      () => this.launchName(),
    );
    checkDriver(d, d.cuEventRecord(end, 0), 'cuEventRecord');
    checkDriver(d, d.cuEventSynchronize(end), `kernel ${this.name}`);
    const ms = new Float32Array(1);
    checkDriver(d, d.cuEventElapsedTime(ms, start, end), 'cuEventElapsedTime');
    return ms[0]! / 1000;
  }

  private launchName(): string {
    const { dims } = this.launch;
    return `cuLaunchKernel (kernel ${this.name}, grid ${dims.slice(0, 3).join('x')}, block ${dims.slice(3).join('x')})`;
  }

  private event(): number {
    const e = new OutHandle();
    checkDriver(use(this.gpu), this.gpu.driver.cuEventCreate(e.ptr, 0), 'cuEventCreate');
    return e.read();
  }
}

/** Why the CUDA device cannot be used here (no driver, no GPU, no NVRTC), or undefined when it can. */
export function cudaProblem(): string | undefined {
  try {
    const d = cudaDriver();
    const count = new Int32Array(1);
    checkDriver(d, d.cuDeviceGetCount(count), 'cuDeviceGetCount');
    if (count[0] === 0) return 'CUDA: the driver sees no GPU';
    nvrtcLibrary();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
