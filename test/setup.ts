// Runs before every test file: tests run as Node users do, with the CPU device registered (src/index.ts does this).
import '../src/node.ts';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderObservers } from '../src/engine/compile.ts';
import { renderCUDA } from '../src/renderer/c.ts';

// every kernel the SIMT target gets is also written as CUDA C, for `npm run test:nvcc` to compile after the suite
const kernels = process.env.CUDA_KERNELS;
if (kernels)
  renderObservers.set('SIMT', (name, linear) => {
    const source = renderCUDA(name, linear);
    const hash = createHash('sha1').update(source).digest('hex').slice(0, 20);
    writeFileSync(join(kernels, `${hash}.cu`), source);
  });
