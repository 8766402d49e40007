// The CUDA device where there is no GPU (CI): a clear error naming what is missing, and the default device
// falls back. On a GPU machine the Tensor suite runs on it instead (TEST_DEVICES=CUDA, npm run test:gpu).
import { describe, expect, it } from 'vitest';
import { lowerKernel } from '../../src/codegen/index.ts';
import { CPU_TARGET } from '../../src/codegen/opt/opts.ts';
import { scheduleOf } from '../../src/engine/realize.ts';
import { Context } from '../../src/helpers.ts';
import { renderCUDA } from '../../src/renderer/c.ts';
import { cudaProblem } from '../../src/runtime/cuda.ts';
import { Device } from '../../src/runtime/device.ts';
import { Tensor } from '../../src/tensor/index.ts';

const problem = cudaProblem();

describe('CUDA device', () => {
  it.skipIf(problem === undefined)(
    'without a GPU: an error naming what is missing; CPU stays the default',
    () => {
      expect(problem).toMatch(
        /^CUDA: (no NVIDIA driver here|the driver sees no GPU|NVRTC \(libnvrtc\.so\) not found)/,
      );
      expect(() => Device.get('CUDA')).toThrow(/^CUDA: /);
      expect(() => new Tensor([1, 2], { device: 'CUDA' }).tolist()).toThrow(/CUDA: /);
      expect(Context.with({ DEV: '' }, () => Device.default)).toBe('CPU');
    },
  );

  it.skipIf(problem !== undefined)('on a GPU: large copies in and out put each byte in its place', () => {
    const { allocator } = Device.get('CUDA');
    for (const bytes of [(1 << 20) + 1, (17 << 20) + 3]) {
      const src = new Uint8Array(bytes);
      for (let i = 0; i < bytes; i++) src[i] = (i * 2654435761) >>> 24;
      const mem = allocator.alloc(bytes);
      allocator.copyin(mem, src);
      src.fill(0); // the copy holds its own bytes once copyin returns
      const back = new Uint8Array(bytes).fill(7);
      allocator.copyout(back, mem);
      allocator.free(mem, bytes);
      let wrong = 0;
      for (let i = 0; i < bytes; i++) if (back[i] !== (i * 2654435761) >>> 24) wrong++;
      expect(wrong).toBe(0);
    }
  });

  it('kernels state their grid, workgroup and the buffers they write on their first line', () => {
    const x = Tensor.empty([4, 64], { device: 'SIMT' });
    const { kernels } = scheduleOf([x.mul(2).sum(1)]);
    const { name, linear } = lowerKernel(kernels[0]!.ast, {
      target: {
        ...CPU_TARGET,
        threads: 1,
        vectors: false,
        grid: { maxThreads: 1024, localBytes: 48 * 1024 },
      },
    });
    const first = renderCUDA(name, linear).split('\n')[0]!;
    expect(first).toMatch(/^\/\/ launch grid \d+ \d+ \d+ block \d+ \d+ \d+ writes 0$/);
    const [gx, gy, gz, bx, by, bz] = first.match(/\d+/g)!.map(Number);
    expect(gx! * gy! * gz! * bx! * by! * bz!).toBeGreaterThanOrEqual(4); // every output has a thread
  });
});
