// Host <-> GPU copies: through the pinned staging buffers (src/runtime/cuda-staging.ts) against one pageable
// cuMemcpy, by size, and the host's own memcpy speed into pinned and ordinary memory (the staging's other half).
// Usage: npx tsx bench/copies.ts   (on a machine with an NVIDIA GPU)
import { checkDriver, cudaDriver, koffi, OutHandle } from '../src/runtime/cuda-api.ts';
import { PinnedStaging } from '../src/runtime/cuda-staging.ts';
import { Device } from '../src/runtime/device.ts';
import '../src/node.ts';

const backend = Device.get('CUDA');
const gpu = (backend as unknown as { gpu: ConstructorParameters<typeof PinnedStaging>[0] }).gpu;
const d = cudaDriver();
const staging = new PinnedStaging(gpu);

function median(fn: () => void, runs = 7): number {
  fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    backend.synchronize();
    times.push((performance.now() - t0) / 1000);
  }
  return times.sort((a, b) => a - b)[runs >> 1]!;
}

const rows: string[][] = [];
for (const bytes of [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]) {
  const host = new Uint8Array(bytes).fill(3);
  const mem = backend.allocator.alloc(bytes) as number;
  const gbs = (s: number) => (bytes / s / 1e9).toFixed(1);
  rows.push([
    `${bytes >> 20} MiB`,
    gbs(median(() => checkDriver(d, d.cuMemcpyHtoD_v2(mem, host, bytes), 'HtoD'))),
    gbs(median(() => staging.copyin(mem, host))),
    gbs(median(() => checkDriver(d, d.cuMemcpyDtoH_v2(host, mem, bytes), 'DtoH'))),
    gbs(median(() => staging.copyout(host, mem))),
  ]);
  backend.allocator.free(mem, bytes);
}
// the host side alone: 256 MiB into pinned memory and into ordinary memory
const bytes = 256 << 20;
const src = new Uint8Array(bytes).fill(5);
const plain = new Uint8Array(bytes).fill(1);
const ptr = new OutHandle();
checkDriver(d, d.cuMemAllocHost_v2(ptr.ptr, bytes), 'cuMemAllocHost');
const pinned = new Uint8Array(koffi().view(ptr.read(), bytes));
pinned.fill(1);
const memcpy = (dst: Uint8Array) => (bytes / median(() => dst.set(src)) / 1e9).toFixed(1);
console.log(`host memcpy 256 MiB: into pinned ${memcpy(pinned)} GB/s, into ordinary ${memcpy(plain)} GB/s`);
console.log(
  ['size', 'HtoD pageable', 'HtoD staged', 'DtoH pageable', 'DtoH staged']
    .map((c) => c.padStart(14))
    .join(''),
);
for (const r of rows) console.log(r.map((c) => c.padStart(14)).join(''));
