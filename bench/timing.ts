// What the bench scripts share: seeded inputs and best-of-n timing of a realize.
import { Device, Tensor } from '../src/index.ts';

/** A tensor of pseudo-random floats in [-1, 1) (a fixed seed: every run times the same data). */
export function rand(shape: number[], device: string): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = s / 2 ** 31 - 1;
  }
  return new Tensor(data, { device }).reshape(shape);
}

/**
 * Best seconds over a few runs of fn (the first run compiles, or searches under BEAM, and is not counted).
 * Each run's output is disposed, so the next run reuses its memory as numpy's malloc reuses a freed block.
 * `keep: true` keeps them: for outputs that must live on (an assign's target), and to time runs that write
 * into new memory and pay its page faults.
 */
export function best(fn: () => Tensor, runs = 3, { keep = false } = {}): number {
  const outs = [fn().realize()];
  let t = Infinity;
  for (let i = 0; i < runs; i++) {
    if (!keep) outs.pop()?.dispose();
    const out = fn();
    const t0 = performance.now();
    out.realize();
    Device.get(out.device).synchronize(); // a GPU's kernels finish after realize returns
    t = Math.min(t, (performance.now() - t0) / 1000);
    outs.push(out);
  }
  return t;
}
