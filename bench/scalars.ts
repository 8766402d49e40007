// A JS number that changes every step (a step count, a learning rate, a fill value): ms per step of
// `x.mul(i + 0.5).realize()` against the same loop with a fixed number, per device, with every value baked into
// its kernel (LIFT=0: a compile per new value, as before run-time constants) and with values read at run time.
// Usage: npm run bench:scalars [-- STEPS]. Values differ from run to run, so the disk cache of compiled
// kernels cannot serve the baked loop.

import { programStats } from '../src/engine/compile.ts';
import { Context, Tensor } from '../src/index.ts';

const STEPS = Number(process.argv[2] ?? 200);
// compiling every step is slow: the baked changing loop takes fewer steps
const BAKED_STEPS = Math.min(STEPS, 30);
const offset = Math.random();

/** ms per step of `steps` realizes of x * value(i), after one untimed step, and the programs built meanwhile. */
function perStep(x: Tensor, steps: number, value: (i: number) => number) {
  x.mul(value(-1)).realize().dispose();
  const built = programStats().built;
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) x.mul(value(i)).realize().dispose();
  return { ms: (performance.now() - t0) / steps, compiles: programStats().built - built };
}

const rows: string[][] = [
  ['device', 'constants', 'changing ms/step', 'compiles', 'fixed ms/step', 'changing/fixed'],
];
for (const device of ['CPU', 'JS'])
  for (const lift of [0, 1]) {
    const x = new Tensor(new Float32Array(1024).fill(1.5), { device });
    Context.with({ LIFT: lift }, () => {
      const changing = perStep(x, lift ? STEPS : BAKED_STEPS, (i) => i + offset);
      const fixed = perStep(x, STEPS, () => 3);
      rows.push([
        device,
        lift ? 'run-time' : 'baked',
        changing.ms.toFixed(3),
        String(changing.compiles),
        fixed.ms.toFixed(3),
        (changing.ms / fixed.ms).toFixed(1),
      ]);
    });
  }
const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
for (const r of rows) console.log(r.map((c, j) => c.padStart(widths[j]!)).join('  '));
