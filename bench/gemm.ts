// Matmul kernels on a GPU device with the opts the heuristics choose, with named variants, or with opt lists
// given as JSON: TFLOP/s from events (median of runs), the opts, and a check of sampled outputs against float64
// sums on the host.
// Usage: npx tsx bench/gemm.ts [DEV] [N] [dtype] [default | VARIANT | '[opts JSON]' ...]
// (DEV CUDA, N 4096, dtype float16; SHOW=1 prints each kernel's source; DEV=SIMT checks small ones here)
import { lowerKernel, optimizable } from '../src/codegen/index.ts';
import { type WarpgroupBlock, warpgroupBlockOpts } from '../src/codegen/opt/heuristic-gpu.ts';
import { type Opt, printOpts } from '../src/codegen/opt/opts.ts';
import { allocStorage, dtypes, readElement, writeElement } from '../src/dtype.ts';
import { targetOf } from '../src/engine/compile.ts';
import { scheduleOf } from '../src/engine/realize.ts';
import { renderCUDA } from '../src/renderer/c.ts';
import { renderSIMT } from '../src/renderer/simt.ts';
import { DeviceBuffer } from '../src/runtime/buffer.ts';
import { Device } from '../src/runtime/device.ts';
import { Tensor } from '../src/tensor/index.ts';
import '../src/node.ts';

const [device = 'CUDA', size = '4096', dtypeName = 'float16', ...optLists] = process.argv.slice(2);

const split = (axis: number, factor: number, target: string): Opt =>
  ({ op: 'SPLIT', axis, factor, target }) as Opt;
const TC: Opt = { op: 'TC', axis: 2, tc: -1, opt: 0, mode: 1 };
/**
 * Alternatives to the heuristics' kernels for a square matmul, to compare on the GPU. Tensor cores (after TC the
 * axes are M tiles, N tiles, K tiles, the warp): `direct` is the default without STAGE; `warp64x64` gives a warp
 * 4 x 8 WMMAs (one LDS a WMMA where 4 x 4 has 1.5; 206 registers); `block128` is 128 x 128 with 8 warps of
 * 4 x 4; `block128w64` 128 x 128 with 4 warps of 4 x 8; `block128x256` 128 x 256 with 8 warps of 4 x 8. Float32: `f32stage` is the
 * previous default (4 x 16 a thread from global memory) plus K by 8, staged; `f32block128x64` is registerBlocks'
 * 128 x 64 block (8 x 4 a thread) where the default at 4096^3 is 128 x 128 (H200: 39.6 against 38.8 TFLOP/s).
 * A suffix `.aD` (`default.a1`, `block128w64.a2`) copies the tiles asynchronously, D iterations ahead (cp.async);
 * `.k16` drops the UNROLL of K first (16 a tile, so that deeper pipelines fit in 48 KB); `.rN` launches the blocks
 * in bands of N rows of M tiles (RASTER; `.r0` row by row, the default's bands dropped); `.swz` swizzles the
 * tiles, `.pad` pads them instead (the default's big blocks swizzle). `wgmma128x64`, `wgmma128x256w2`, ..
 * (Hopper) are defined below.
 */
const VARIANTS: Record<string, Opt[]> = {
  direct: [TC, split(1, 4, 'UPCAST'), split(0, 4, 'UPCAST'), split(2, 4, 'LOCAL')],
  warp64x64: [
    TC,
    split(1, 8, 'UPCAST'),
    split(0, 4, 'UPCAST'),
    split(2, 4, 'LOCAL'),
    split(5, 2, 'UNROLL'),
    { op: 'STAGE', axis: 5 },
  ],
  block128: [
    TC,
    split(1, 4, 'UPCAST'),
    split(0, 4, 'UPCAST'),
    split(2, 4, 'LOCAL'),
    split(0, 2, 'LOCAL'),
    split(6, 2, 'UNROLL'),
    { op: 'STAGE', axis: 6 },
  ],
  block128w64: [
    TC,
    split(1, 8, 'UPCAST'),
    split(0, 4, 'UPCAST'),
    split(2, 2, 'LOCAL'),
    split(0, 2, 'LOCAL'),
    split(6, 2, 'UNROLL'),
    { op: 'STAGE', axis: 6 },
  ],
  block128x256: [
    TC,
    split(1, 8, 'UPCAST'),
    split(0, 4, 'UPCAST'),
    split(2, 4, 'LOCAL'),
    split(0, 2, 'LOCAL'),
    split(6, 2, 'UNROLL'),
    { op: 'STAGE', axis: 6 },
  ],
  f32block128x64: [
    split(1, 4, 'UPCAST'),
    split(1, 16, 'LOCAL'),
    split(0, 4, 'UPCAST'),
    split(0, 16, 'LOCAL'),
    split(0, 2, 'UPCAST'),
    split(7, 4, 'UNROLL'),
    split(7, 4, 'UNROLL'),
    { op: 'STAGE', axis: 7 },
  ],
  f32stage: [
    split(1, 4, 'UPCAST'),
    split(1, 32, 'LOCAL'),
    split(0, 4, 'LOCAL'),
    split(2, 4, 'UPCAST'),
    split(0, 4, 'UPCAST'),
    split(7, 8, 'UNROLL'),
    { op: 'STAGE', axis: 7 },
  ],
};
const n = Number(size);
const dtype = dtypes[dtypeName as keyof typeof dtypes] as (typeof dtypes)['float16'];
const backend = Device.get(device);
const target = targetOf(backend);
const k = scheduleOf([
  Tensor.empty([n, n], { device, dtype }).matmul(Tensor.empty([n, n], { device, dtype })),
]).kernels.at(-1)!;
// Hopper's warpgroup tensor cores (wgmma, where the device has them): `wgmmaBMxBN[wW]` blocks of W warpgroups
// along M (one where no W), each BM / 64 / W m64nBNk16 tiles along M, over K slabs of 64 staged 2 ahead in
// 128-byte-swizzled tiles (src/codegen/opt/heuristic-gpu.ts, warpgroupBlockOpts)
const WARPGROUP_VARIANTS: readonly WarpgroupBlock[] = [
  { width: 64, warpgroups: 1, tiles: 2 },
  { width: 64, warpgroups: 1, tiles: 4 },
  { width: 128, warpgroups: 1, tiles: 2 },
  { width: 128, warpgroups: 2, tiles: 1 },
  { width: 128, warpgroups: 2, tiles: 2 },
  { width: 256, warpgroups: 2, tiles: 1 },
];
const ast = optimizable(k.ast, { target });
/** Why a variant does not apply to this matmul, by name. */
const unavailable = new Map<string, string>();
for (const block of WARPGROUP_VARIANTS) {
  const { width, warpgroups, tiles } = block;
  const tc = target.tensorCores.findIndex((c) => c.sharedOperands && c.dtypeIn === dtype && c.n === width);
  const name = `wgmma${64 * warpgroups * tiles}x${width}${warpgroups > 1 ? `w${warpgroups}` : ''}`;
  try {
    if (tc >= 0) VARIANTS[name] = warpgroupBlockOpts(ast, tc, block, target);
  } catch (e) {
    unavailable.set(name, (e as Error).message);
  }
}
const inputs = [1, 2].map((slot) => {
  const s = allocStorage(dtype, n * n);
  for (let i = 0; i < n * n; i++) writeElement(dtype, s, i, Math.sin(i * 1.37 + slot) / 2);
  return s;
});
const value = (s: ReturnType<typeof allocStorage>, i: number) => Number(readElement(dtype, s, i));
const bufs = [0, 1, 2].map((i) => {
  const b = new DeviceBuffer(backend, n * n, dtype);
  return i === 0 ? b : b.copyin(inputs[i - 1]!);
});

/**
 * A variant's opts with its suffixes: `.k16` without the UNROLL, `.rN` in bands of N rows, `.aD` staged D iterations
 * ahead, `.swz`/`.pad`.
 */
function variant(list: string): readonly Opt[] {
  const [name, ...suffixes] = list.split('.');
  if (name !== 'default' && VARIANTS[name!] === undefined)
    throw new Error(`${name}: ${unavailable.get(name!) ?? 'no such variant'}`);
  let opts = name === 'default' ? lowerKernel(k.ast, { target }).opts : VARIANTS[name!]!;
  for (const s of suffixes) {
    const stage = opts.at(-1)!;
    if (stage.op !== 'STAGE') throw new Error(`${list}: ${name} is not staged`);
    if (s === 'k16') {
      const unroll = opts.findIndex(
        (o) => o.op === 'SPLIT' && o.target === 'UNROLL' && o.axis === stage.axis,
      );
      opts = [...opts.slice(0, unroll), ...opts.slice(unroll + 1)];
    } else if (s.startsWith('r')) {
      const rows = Number(s.slice(1));
      const plain = opts.filter((o) => o.op !== 'RASTER');
      opts = rows ? [...plain.slice(0, -1), { op: 'RASTER', rows }, plain.at(-1)!] : plain;
    } else if (s === 'swz' || s === 'pad') opts = [...opts.slice(0, -1), { ...stage, swizzle: s === 'swz' }];
    else opts = [...opts.slice(0, -1), { ...stage, depth: Number(s.slice(1)) }];
  }
  return opts;
}

for (const list of optLists.length ? optLists : ['default']) {
  let line: string;
  try {
    const opts =
      list === 'default' ? undefined : list.startsWith('[') ? (JSON.parse(list) as Opt[]) : variant(list);
    const lowered = lowerKernel(k.ast, { target, opts });
    const source = (device === 'SIMT' ? renderSIMT : renderCUDA)(lowered.name, lowered.linear);
    if (process.env.SHOW) console.log(source);
    const program = backend.compile(lowered.name, source);
    const times = Array.from({ length: 7 }, () => program.run(bufs, [], true)).sort((a, b) => a - b);
    const out = bufs[0]!.copyout();
    // sampled outputs against float64 sums of the inputs as stored
    let worst = 0;
    for (let s = 0; s < 64; s++) {
      const [i, j] = [(s * 977) % n, (s * 613 + 5) % n];
      let [c, scale] = [0, 0];
      for (let q = 0; q < n; q++) {
        const p = value(inputs[0]!, i * n + q) * value(inputs[1]!, q * n + j);
        c += p;
        scale += Math.abs(p);
      }
      worst = Math.max(worst, Math.abs(value(out, i * n + j) - c) / (scale + 1e-30));
    }
    const tflops = (2 * n ** 3) / times[3]! / 1e12;
    line = `${tflops.toFixed(1).padStart(6)} TFLOP/s  err ${worst.toExponential(1)}  ${lowered.name}  ${printOpts(lowered.opts)}`;
  } catch (e) {
    line = `failed: ${(e as Error).message.slice(0, 400)}  ${list}`;
  }
  console.log(`${dtype.name} ${n}^3 ${list.startsWith('[') ? '' : `${list.padEnd(11)} `}${line}`);
}
