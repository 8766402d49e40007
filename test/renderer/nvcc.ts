// nvcc for the tests that compile generated CUDA C (CI's image has it; without it those tests skip).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const hasNvcc = (() => {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/**
 * Compiles each source (a file per kernel) with nvcc for sm_90a (NVRTC's Hopper target) in one call; throws
 * nvcc's errors.
 */
export function nvccCompile(sources: readonly string[]): void {
  const dir = mkdtempSync(join(tmpdir(), 'tsgrad-nvcc-'));
  try {
    const files = sources.map((source, i) => {
      const file = join(dir, `k${i}.cu`);
      writeFileSync(file, source);
      return file;
    });
    execFileSync('nvcc', ['-gencode=arch=compute_90a,code=sm_90a', '-cubin', '-odir', dir, ...files], {
      stdio: 'pipe',
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
