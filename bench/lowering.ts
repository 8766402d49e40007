// Lowering cost: the CPU seconds a model's first step spends lowering and rendering its new kernels (a fresh
// process each run, empty kernel cache; each batch is lowered whole before the device compiles any of it, so
// that the compilers do not share the CPU with the timing), and a hash of the C they render: a change to the
// compiler shows what it costs and whether its output moved. `cc cpu s`: the compilers' CPU in the same step.
// Usage: npx tsx bench/lowering.ts [models...] [--rounds N]   models: mnist, mlp, transformer (default: all)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KernelSource } from '../src/runtime/backend.ts';
import { CPUBackend } from '../src/runtime/cpu.ts';
import { WORKLOADS } from './firststep-models.ts';

type Model = keyof typeof WORKLOADS;
const args = process.argv.slice(2);

/** CPU seconds of this process's waited-for children (/proc/self/stat cutime + cstime). */
function childSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

/** Runs in the child: the model's first step, timing each kernel's lowering where the CPU device asks for it. */
function measure(model: Model): void {
  const w = WORKLOADS[model]();
  const [x, y] = w.batch(0);
  x.realize(y);
  let lowering = 0;
  let kernels = 0;
  const hash = createHash('sha256');
  const compileMany = CPUBackend.prototype.compileMany;
  CPUBackend.prototype.compileMany = function (this: CPUBackend, inputs, opts) {
    // all lowered before any compiles: the compilers would share the CPU with the timing
    const u = process.cpuUsage();
    const sources = inputs.map((input): KernelSource | Error => {
      try {
        return typeof input === 'function' ? input() : input;
      } catch (e) {
        return e as Error;
      }
    });
    const { user, system } = process.cpuUsage(u);
    lowering += (user + system) / 1e6;
    for (const k of sources) if (!(k instanceof Error)) hash.update(k.source);
    kernels += sources.length;
    return compileMany.call(
      this,
      sources.map((k) =>
        k instanceof Error
          ? () => {
              throw k;
            }
          : k,
      ),
      opts,
    );
  };
  const c = childSeconds();
  w.step(x, y).item();
  const cc = childSeconds() - c;
  console.log(JSON.stringify({ kernels, lowering, cc, hash: hash.digest('hex').slice(0, 16) }));
}

function main(): void {
  const at = args.indexOf('--rounds');
  const rounds = at < 0 ? 1 : Number(args[at + 1]);
  const chosen = args.filter((a) => a in WORKLOADS) as Model[];
  const models = chosen.length > 0 ? chosen : (Object.keys(WORKLOADS) as Model[]);
  const self = fileURLToPath(import.meta.url);
  console.log(
    `${'model'.padEnd(12)} ${'kernels'.padStart(8)} ${'lower cpu s'.padStart(11)} ${'cc cpu s'.padStart(8)}  source hash`,
  );
  for (let r = 0; r < rounds; r++)
    for (const model of models) {
      const cache = mkdtempSync(join(tmpdir(), 'tsgrad-lowering-'));
      try {
        const p = spawnSync(process.execPath, [...process.execArgv, self, '--child', model], {
          env: { ...process.env, CACHEDIR: cache, DEBUG: '0' },
          encoding: 'utf8',
        });
        const last = p.stdout.trim().split('\n').at(-1) ?? '';
        if (p.status !== 0 || !last.startsWith('{'))
          throw new Error(`${model} failed:\n${p.stdout}\n${p.stderr}`);
        const t = JSON.parse(last) as { kernels: number; lowering: number; cc: number; hash: string };
        console.log(
          `${model.padEnd(12)} ${String(t.kernels).padStart(8)} ${t.lowering.toFixed(2).padStart(11)} ${t.cc.toFixed(2).padStart(8)}  ${t.hash}`,
        );
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    }
}

if (args[0] === '--child') measure(args[1] as Model);
else main();
