// Lowering cost: the CPU seconds a model's first step spends lowering and rendering its new kernels for the CPU
// device (a fresh process each run, empty kernel cache), and a hash of the C they render, so that a change to
// the compiler shows what it costs and whether its output moved. No compiler runs (the step's kernels run as
// no-ops: the schedule does not depend on values), so the figure is the lowering's own on a loaded machine too.
// Usage: npx tsx bench/lowering.ts [models...] [--rounds N]   models: mnist, mlp, transformer (default: all)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Program } from '../src/runtime/backend.ts';
import { CPUBackend } from '../src/runtime/cpu.ts';
import { WORKLOADS } from './firststep-models.ts';

type Model = keyof typeof WORKLOADS;
const args = process.argv.slice(2);

/** Runs in the child: the model's first step, its kernels lowered and rendered but not compiled. */
function measure(model: Model): void {
  const w = WORKLOADS[model]();
  const [x, y] = w.batch(0);
  let lowering = 0;
  let kernels = 0;
  const hash = createHash('sha256');
  CPUBackend.prototype.compileMany = function (this: CPUBackend, inputs) {
    const u = process.cpuUsage();
    const programs = inputs.map((input): Program => {
      const { name, source } = typeof input === 'function' ? input() : input;
      hash.update(source);
      return { name, device: this.name, run: () => 0 };
    });
    const { user, system } = process.cpuUsage(u);
    lowering += (user + system) / 1e6;
    kernels += inputs.length;
    return programs;
  };
  x.realize(y);
  w.step(x, y).item();
  console.log(JSON.stringify({ kernels, lowering, hash: hash.digest('hex').slice(0, 16) }));
}

function main(): void {
  const at = args.indexOf('--rounds');
  const rounds = at < 0 ? 3 : Number(args[at + 1]);
  const chosen = args.filter((a) => a in WORKLOADS) as Model[];
  const models = chosen.length > 0 ? chosen : (Object.keys(WORKLOADS) as Model[]);
  const self = fileURLToPath(import.meta.url);
  console.log(
    `${'model'.padEnd(12)} ${'kernels'.padStart(8)} ${'min cpu s'.padStart(10)} ${'median'.padStart(8)}  C hash`,
  );
  for (const model of models) {
    const runs = Array.from({ length: rounds }, () => {
      const cache = mkdtempSync(join(tmpdir(), 'tsgrad-lowering-'));
      try {
        const p = spawnSync(process.execPath, [...process.execArgv, self, '--child', model], {
          env: { ...process.env, CACHEDIR: cache, DEBUG: '0' },
          encoding: 'utf8',
        });
        const last = p.stdout.trim().split('\n').at(-1) ?? '';
        if (p.status !== 0 || !last.startsWith('{'))
          throw new Error(`${model} failed:\n${p.stdout}\n${p.stderr}`);
        return JSON.parse(last) as { kernels: number; lowering: number; hash: string };
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    });
    const cpu = runs.map((r) => r.lowering).sort((a, b) => a - b);
    const { kernels, hash } = runs[0]!;
    console.log(
      `${model.padEnd(12)} ${String(kernels).padStart(8)} ${cpu[0]!.toFixed(2).padStart(10)} ${cpu[Math.floor(cpu.length / 2)]!.toFixed(2).padStart(8)}  ${hash}`,
    );
  }
}

if (args[0] === '--child') measure(args[1] as Model);
else main();
