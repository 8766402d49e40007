// The devices that need Node (CPU: a C compiler, koffi, the disk cache; CUDA: an NVIDIA driver and NVRTC; DISK:
// files), registered on import.
import { totalmem } from 'node:os';
import { dtypes } from '../dtype.ts';
import { DEBUG } from '../helpers.ts';
import { hostMemory } from './allocator.ts';
import { DeviceBuffer } from './buffer.ts';
import { CC } from './cc.ts';
import { CPUBackend } from './cpu.ts';
import { CUDABackend, cudaProblem } from './cuda.ts';
import { Device, registerDevice } from './device.ts';
import { DiskBackend } from './disk.ts';

// the default found for each CC setting: probing compiles a kernel, so it is done once
const detected = new Map<string, string>();

/** CUDA when an NVIDIA GPU is usable, else CPU when a C compiler works, else JS; DEBUG=1 says which and why. */
function detectDefault(): string {
  let dev = detected.get(CC.value);
  if (dev === undefined) {
    const noGpu = cudaProblem();
    const noCpu = noGpu === undefined ? undefined : cpuProblem();
    dev = noGpu === undefined ? 'CUDA' : noCpu === undefined ? 'CPU' : 'JS';
    if (DEBUG.value >= 1)
      console.error(
        dev === 'CUDA'
          ? `Device: the default device is CUDA (${(Device.get('CUDA') as CUDABackend).description})`
          : `Device: the default device is ${dev}: ${noGpu}${noCpu === undefined ? '' : `; the CPU device does not work here: ${noCpu}`}`,
      );
    detected.set(CC.value, dev);
  }
  return dev;
}

/** Why the CPU device does not work (compiler, koffi, loading or running a kernel), or undefined when it does. */
function cpuProblem(): string | undefined {
  try {
    const cpu = Device.get('CPU');
    const buf = new DeviceBuffer(cpu, 1, dtypes.int32);
    cpu
      .compile('tsgrad_probe', 'void tsgrad_probe(int* restrict data0, int var0) { data0[0] = var0 + 1; }')
      .run([buf], [41]);
    const value = buf.view()[0];
    buf.free();
    return value === 42 ? undefined : `a probe kernel computed ${value} instead of 42`;
  } catch (e) {
    return (e as Error).message;
  }
}

hostMemory.totalBytes = totalmem();

registerDevice('CPU', (name) => new CPUBackend(name), detectDefault);
registerDevice('CUDA', (name) => new CUDABackend(name));
registerDevice('DISK', (name) => new DiskBackend(name));
