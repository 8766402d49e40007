import { defineConfig } from 'vitest/config';

// Vite puts DEV=1 (its mode flag) into process.env, which tsgrad would read as a device name. With an empty
// kernel cache on a 2-core machine a test that compiles a few dozen C kernels takes well over vitest's 5 s.
// CUDA_KERNELS (a folder; the environment's, else one in node_modules/.cache) collects the SIMT kernels' CUDA C
// for `npm run test:nvcc` (scripts/nvcc-kernels.ts).
export const CUDA_KERNELS = process.env.CUDA_KERNELS ?? 'node_modules/.cache/tsgrad-cuda-kernels';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    globalSetup: ['test/global-setup.ts'],
    // CC_TIERS=0: the suite's kernels build once, optimized (test/runtime/cc-tiers.test.ts tests the tiers)
    env: { DEV: '', CUDA_KERNELS, CC_TIERS: '0' },
    testTimeout: 60_000,
  },
});
