// Runs once before the suite: an empty folder for the SIMT kernels' CUDA C (test/setup.ts writes, test:nvcc reads).
import { mkdirSync, rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';

export default function setup(project: TestProject): void {
  const kernels = project.config.env.CUDA_KERNELS;
  if (!kernels) return;
  rmSync(kernels, { recursive: true, force: true });
  mkdirSync(kernels, { recursive: true });
}
