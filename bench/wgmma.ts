// A hand-written Hopper GEMM on wgmma (CUDA C, sm_90a) beside cuBLAS (through bench/gemm_peer.py, same run): the
// speed a compiled wgmma kernel of the same shape can reach, and the layouts it needs (issue 13). C = A @ B with
// A [n, n] and B [n, n] row-major, float16 or bfloat16 in, float32 accumulators, the input dtype out.
// A block of BM x BN outputs runs W warpgroups of 128 threads, each computing BM / W rows with m64nBNk16
// wgmmas; every thread copies K slabs of 64 (A: BM x 64, B: 64 x BN) into shared memory with cp.async, S slabs
// in turn (copies 2 slabs behind the one read, as STAGE with depth S - 2), and the tensor cores read them through
// matrix descriptors in the 128-byte swizzle: A K-major (rows of 128 bytes), B MN-major (columns of 64 n in blocks
// of 64 k rows, 8 KB apart: the descriptor's leading byte offset; 8-row groups 1024 bytes apart: its stride).
// Usage: npx tsx bench/wgmma.ts [sizes 4096,8192] [dtypes float16,bfloat16] [BMxBN.wW.sS[.sync] ...]
// (`.sync` waits for each slab's wgmmas before the next copies; by default one group stays in flight)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { allocStorage, dtypes, readElement, writeElement } from '../src/dtype.ts';
import { DeviceBuffer } from '../src/runtime/buffer.ts';
import type { CUDABackend } from '../src/runtime/cuda.ts';
import { Device } from '../src/runtime/device.ts';
import '../src/node.ts';

interface Shape {
  bm: number;
  bn: number;
  warpgroups: number;
  slabs: number;
  /** wgmma groups left in flight when the next slab's copies are issued: 0 or 1. */
  inFlight: number;
}

const [sizes = '4096,8192', dtypeNames = 'float16,bfloat16', ...shapeNames] = process.argv.slice(2);

function parseShape(name: string): Shape {
  const m = /^(\d+)x(\d+)\.w(\d)\.s(\d)(\.sync)?$/.exec(name);
  if (m === null)
    throw new Error(`bench/wgmma.ts: shape ${name} is not BMxBN.wW.sS[.sync] (e.g. 128x256.w2.s4)`);
  const [bm, bn, warpgroups, slabs] = m.slice(1, 5).map(Number) as [number, number, number, number];
  if (bm % (64 * warpgroups) || ![64, 128, 256].includes(bn) || slabs < 3)
    throw new Error(
      `bench/wgmma.ts: shape ${name}: BM a multiple of 64 per warpgroup, BN 64, 128 or 256, S >= 3`,
    );
  return { bm, bn, warpgroups, slabs, inFlight: m[5] ? 0 : 1 };
}

/** The kernel's CUDA C, with the launch line the CUDA device reads. */
function source(s: Shape, n: number, half: boolean): { name: string; source: string } {
  const { bm, bn, warpgroups, slabs } = s;
  const [tiles, threads, acc] = [bm / 64 / warpgroups, 128 * warpgroups, bn / 2];
  const [T, ty] = half ? ['half', 'f16'] : ['__nv_bfloat16', 'bf16'];
  const [aBytes, slabBytes] = [bm * 128, (bm + bn) * 128];
  const name = `wgmma_${ty}_${bm}x${bn}_w${warpgroups}_s${slabs}${s.inFlight ? '' : '_sync'}_${n}`;
  const regs = Array.from({ length: acc }, (_, i) => `%${i}`).join(',');
  const outs = Array.from({ length: acc }, (_, i) => `"+f"(d[${i}])`).join(',');
  const body = `// launch grid ${n / bn} ${n / bm} 1 block ${threads} 1 1 writes 0 shared ${slabs * slabBytes + 1024}
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// a shared-memory matrix descriptor in the 128-byte swizzle: start, leading and stride byte offsets (16-byte units)
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (addr & 0x3FFFF) >> 4 | (unsigned long long)(lbo >> 4) << 16 | (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}
// d += A (K-major) * B (MN-major, trans-b 1)
__device__ __forceinline__ void mma(float* d, unsigned long long a, unsigned long long b) {
  asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"
    "wgmma.mma_async.sync.aligned.m64n${bn}k16.f32.${ty}.${ty} {${regs}}, %${acc}, %${acc + 1}, p, 1, 1, 0, 1;\\n}"
    : ${outs} : "l"(a), "l"(b));
}
// the accumulators stay in their registers while wgmmas in flight write them
__device__ __forceinline__ void pin(float* d) {
#pragma unroll
  for (int i = 0; i < ${acc}; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}
__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src));
}
extern "C" __global__ void __launch_bounds__(${threads}, 1) ${name}(${T}* __restrict__ C, const ${T}* __restrict__ A, const ${T}* __restrict__ B) {
  extern __shared__ unsigned char smem[];
  // the swizzle pattern repeats every 1024 bytes from an aligned address
  const unsigned base = ((unsigned)__cvta_generic_to_shared(smem) + 1023) & ~1023u;
  const int tid = threadIdx.x, wg = tid / 128;
  const int bm = blockIdx.y * ${bm}, bn = blockIdx.x * ${bn};
  float d[${tiles}][${acc}];
#pragma unroll
  for (int m = 0; m < ${tiles}; m++)
#pragma unroll
    for (int i = 0; i < ${acc}; i++) d[m][i] = 0.f;
  // slab kt: A's rows of 64 k (8 chunks of 16 bytes) and B's 64 rows of k in column blocks of 64 n, chunk c of
  // row r at chunk c ^ (r % 8)
  auto copy = [&](int kt) {
    if (kt < ${n / 64}) {
      const unsigned sA = base + (kt % ${slabs}) * ${slabBytes}, sB = sA + ${aBytes};
      const ${T}* gA = A + (size_t)bm * ${n} + kt * 64;
#pragma unroll
      for (int i = 0; i < ${(bm * 8) / threads}; i++) {
        const int q = tid + i * ${threads}, r = q / 8, c = q % 8;
        cp16(sA + r * 128 + ((c ^ (r % 8)) << 4), gA + (size_t)r * ${n} + c * 8);
      }
      const ${T}* gB = B + (size_t)kt * 64 * ${n} + bn;
#pragma unroll
      for (int i = 0; i < ${(bn * 8) / threads}; i++) {
        const int q = tid + i * ${threads}, r = q / ${bn / 8}, c = q % ${bn / 8};
        cp16(sB + (c / 8) * 8192 + r * 128 + (((c % 8) ^ (r % 8)) << 4), gB + (size_t)r * ${n} + c * 8);
      }
    }
    asm volatile("cp.async.commit_group;");
  };
#pragma unroll
  for (int kt = 0; kt < ${slabs - 2}; kt++) copy(kt);
  for (int kt = 0; kt < ${n / 64}; kt++) {
    asm volatile("cp.async.wait_group ${slabs - 3};" ::: "memory");
    // the copies' writes, made by the generic proxy, become visible to the tensor cores' async proxy
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    // into the slab read two iterations ago, whose wgmmas every warpgroup waited for before the barrier
    copy(kt + ${slabs - 2});
    const unsigned sA = base + (kt % ${slabs}) * ${slabBytes}, sB = sA + ${aBytes};
#pragma unroll
    for (int m = 0; m < ${tiles}; m++) pin(d[m]);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
      for (int m = 0; m < ${tiles}; m++)
        mma(d[m], desc(sA + (wg * ${tiles} + m) * 8192 + k * 32, 16, 1024), desc(sB + k * 2048, 8192, 1024));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned ${s.inFlight};" ::: "memory");
#pragma unroll
    for (int m = 0; m < ${tiles}; m++) pin(d[m]);
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
  for (int m = 0; m < ${tiles}; m++) pin(d[m]);
  // D of m64nN: warp w's rows 16w + lane / 4 (+8), columns 8j + 2 (lane % 4) (+1)
  const int w = tid % 128 / 32, lane = tid % 32;
#pragma unroll
  for (int m = 0; m < ${tiles}; m++) {
    const int row = bm + (wg * ${tiles} + m) * 64 + w * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < ${bn / 8}; j++) {
      const int col = bn + j * 8 + 2 * (lane % 4);
      *(${T}2*)&C[(size_t)row * ${n} + col] = __floats2${half ? 'half2' : 'bfloat162'}_rn(d[m][4 * j], d[m][4 * j + 1]);
      *(${T}2*)&C[(size_t)(row + 8) * ${n} + col] = __floats2${half ? 'half2' : 'bfloat162'}_rn(d[m][4 * j + 2], d[m][4 * j + 3]);
    }
  }
}
`;
  return { name, source: body };
}

const backend = Device.get('CUDA');
const shapes = (shapeNames.length ? shapeNames : ['128x256.w2.s4', '128x128.w1.s4']).map(parseShape);
const rows: string[] = [];
for (const n of sizes.split(',').map(Number))
  for (const dn of dtypeNames.split(',')) {
    const dtype = dtypes[dn as 'float16' | 'bfloat16'];
    // random multiples of 1/256 in [-0.5, 0.5), exact in both dtypes: the elements' bits from a table
    const table = allocStorage(dtype, 256) as Uint16Array;
    for (let v = 0; v < 256; v++) writeElement(dtype, table, v, (v - 128) / 256);
    let seed = 12345;
    const inputs = [0, 1].map(() => {
      const s = allocStorage(dtype, n * n) as Uint16Array;
      for (let i = 0; i < n * n; i++) {
        seed ^= seed << 13;
        seed ^= seed >>> 17;
        seed ^= seed << 5;
        s[i] = table[seed & 255]!;
      }
      return s;
    });
    const [c, a, b] = [undefined, ...inputs].map((s) =>
      s === undefined
        ? new DeviceBuffer(backend, n * n, dtype)
        : new DeviceBuffer(backend, n * n, dtype).copyin(s),
    ) as [DeviceBuffer, DeviceBuffer, DeviceBuffer];
    // NaN in every output before each kernel, so that one it leaves unwritten fails the check
    const poison = (allocStorage(dtype, n * n) as Uint16Array).fill(dn === 'float16' ? 0x7e00 : 0x7fc0);
    for (const shape of shapes) {
      if (n % shape.bm || n % shape.bn) {
        rows.push(`${shape.bm}x${shape.bn} blocks do not tile ${n} x ${n}`);
        continue;
      }
      const { name, source: text } = source(shape, n, dn === 'float16');
      try {
        c.copyin(poison);
        const program = backend.compile(name, text);
        const times = Array.from({ length: 9 }, () => program.run([c, a, b], [], true)).sort((x, y) => x - y);
        // sampled outputs against float64 sums of the inputs
        const out = c.copyout();
        let worst = 0;
        for (let q = 0; q < 128; q++) {
          const [i, j] = [(q * 977 + 3) % n, (q * 613 + 5) % n];
          let [sum, scale] = [0, 0];
          for (let k = 0; k < n; k++) {
            const p =
              Number(readElement(dtype, inputs[0]!, i * n + k)) *
              Number(readElement(dtype, inputs[1]!, k * n + j));
            sum += p;
            scale += Math.abs(p);
          }
          worst = Math.max(worst, Math.abs(Number(readElement(dtype, out, i * n + j)) - sum) / scale);
        }
        if (!(worst < 1e-2)) throw new Error(`wrong results: relative error ${worst.toExponential(1)}`);
        const tflops = (2 * n ** 3) / times[4]! / 1e12;
        rows.push(
          `${name.padEnd(36)} ${tflops.toFixed(1).padStart(7)} TFLOP/s  err ${worst.toExponential(1)}`,
        );
      } catch (e) {
        rows.push(`${name.padEnd(36)} failed: ${(e as Error).message.slice(0, 300)}`);
      }
      console.log(rows.at(-1));
    }
    for (const x of [a, b, c]) x.free();
  }
const peerArgs = sizes.split(',').flatMap((n) => dtypeNames.split(',').flatMap((d) => [n, d]));
const peer = spawnSync('python3', [fileURLToPath(new URL('./gemm_peer.py', import.meta.url)), ...peerArgs], {
  encoding: 'utf8',
});
console.log(
  `\ndevice: ${(backend as CUDABackend).description}; TFLOP/s by events, median of 9\n${rows.join('\n')}`,
);
console.log(peer.status === 0 ? peer.stdout.trim() : `(torch: ${peer.stderr.slice(-300)})`);
