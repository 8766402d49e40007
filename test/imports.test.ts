// The import graph's layering: nn/ uses only the Tensor API, runtime/ does not reach into the compiler, and no
// modules import each other at run time.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));

/** Every .ts file under src/, by path from the project root, with its text. */
function sources(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) files.set(path, readFileSync(join(root, path), 'utf8'));
    }
  };
  walk('src');
  return files;
}

// `import ... from '...'`, `export ... from '...'` (over several lines too), `import '...'` and `import('...')`
const IMPORT =
  /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** The specifiers a file imports, in order. */
function importsOf(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

// the same forms, keeping the import clause: type-only imports are no run-time edges
const CLAUSE =
  /^\s*(?:import|export)\s+(type\s+)?([^;'"]*?)\s*\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm;

/** The specifiers a file imports at run time: not `import type`, nor a list of `type` names only. */
function runtimeImportsOf(text: string): string[] {
  return [...text.matchAll(CLAUSE)].flatMap((m) => {
    if (m[4] !== undefined) return [m[4]];
    const names = m[2]!.trim();
    const typeOnly =
      m[1] !== undefined ||
      (names.startsWith('{') &&
        names
          .slice(1, -1)
          .split(',')
          .map((n) => n.trim())
          .filter((n) => n !== '')
          .every((n) => n.startsWith('type ')));
    return typeOnly ? [] : [m[3]!];
  });
}

/** A relative specifier resolved against the importing file (both from the project root); others as they are. */
const resolveFrom = (file: string, spec: string): string =>
  spec.startsWith('.')
    ? relative(root, resolve(root, dirname(file), spec))
        .split('\\')
        .join('/')
    : spec;

/** What nn/ may import from src/: the Tensor API's own modules and other nn files. */
const NN_MAY_IMPORT = ['src/tensor/index.ts', 'src/dtype.ts', 'src/helpers.ts'];
const COMPILER = ['src/renderer/', 'src/codegen/'];
/** Every import that breaks the layering, as 'file imports target: why'. */
function layeringProblems(files: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  for (const [file, text] of files) {
    for (const spec of importsOf(text)) {
      const target = resolveFrom(file, spec);
      if (!target.startsWith('src/')) continue; // node: built-ins and packages
      const line = `${file} imports ${target}`;
      if (file.startsWith('src/nn/') && !target.startsWith('src/nn/') && !NN_MAY_IMPORT.includes(target))
        problems.push(`${line}: nn/ may import only ${NN_MAY_IMPORT.join(', ')} and nn files`);
      if (file.startsWith('src/runtime/') && COMPILER.some((c) => target.startsWith(c)))
        problems.push(`${line}: runtime/ may not import ${COMPILER.join(' or ')}`);
    }
  }
  return problems;
}

/** The groups of modules that import each other at run time (strongly connected, more than one module). */
function importCycles(files: ReadonlyMap<string, string>): string[][] {
  const edges = new Map(
    [...files].map(([file, text]) => [
      file,
      runtimeImportsOf(text)
        .map((spec) => resolveFrom(file, spec))
        .filter((t) => files.has(t)),
    ]),
  );
  // Tarjan's algorithm, iteratively
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  for (const start of edges.keys()) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    while (work.length) {
      const top = work[work.length - 1]!;
      const [v, i] = top;
      if (i === 0) {
        index.set(v, index.size);
        low.set(v, index.get(v)!);
        stack.push(v);
        onStack.add(v);
      }
      const out = edges.get(v)!;
      if (i < out.length) {
        top[1]++;
        const w = out[i]!;
        if (!index.has(w)) work.push([w, 0]);
        else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work[work.length - 1]![0];
        low.set(parent, Math.min(low.get(parent)!, low.get(v)!));
      }
      if (low.get(v) === index.get(v)) {
        const group: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          group.push(w);
        } while (w !== v);
        if (group.length > 1) cycles.push(group.sort());
      }
    }
  }
  return cycles;
}

describe('import graph', () => {
  it('finds every form of import, over several lines too', () => {
    const text = [
      "import { a } from '../engine/realize.ts';",
      'import {',
      '  b,',
      '  type C,',
      "} from '../schedule/rangeify.ts';",
      "import type { D } from '../uop/uop.ts';",
      "export { e } from './x.ts';",
      "export * from './y.ts';",
      "import './side.ts';",
      "const m = await import('../runtime/disk.ts');",
      "// a comment that says import nothing from 'here'",
      'const s = \'from "there"\';',
    ].join('\n');
    expect(importsOf(text)).toEqual([
      '../engine/realize.ts',
      '../schedule/rangeify.ts',
      '../uop/uop.ts',
      './x.ts',
      './y.ts',
      './side.ts',
      '../runtime/disk.ts',
    ]);
  });

  it('names the file and the import that break the layering', () => {
    const files = new Map([
      [
        'src/nn/a.ts',
        "import { Tensor } from '../tensor/index.ts';\nimport { x } from '../engine/buffers.ts';",
      ],
      [
        'src/nn/b.ts',
        "import { y } from '../tensor/tensor.ts';\nimport { z } from './a.ts';\nimport 'node:fs';",
      ],
      ['src/runtime/cpu.ts', "import { render } from '../renderer/c.ts';"],
      ['src/runtime/js.ts', "import { render } from '../renderer/js.ts';"],
      ['src/tensor/t.ts', "import { e } from '../engine/realize.ts';"],
    ]);
    expect(layeringProblems(files)).toEqual([
      'src/nn/a.ts imports src/engine/buffers.ts: nn/ may import only src/tensor/index.ts, src/dtype.ts, src/helpers.ts and nn files',
      'src/nn/b.ts imports src/tensor/tensor.ts: nn/ may import only src/tensor/index.ts, src/dtype.ts, src/helpers.ts and nn files',
      'src/runtime/cpu.ts imports src/renderer/c.ts: runtime/ may not import src/renderer/ or src/codegen/',
      'src/runtime/js.ts imports src/renderer/js.ts: runtime/ may not import src/renderer/ or src/codegen/',
    ]);
  });

  it('nn/ uses only the Tensor API; runtime/ imports no renderer or codegen', () => {
    const files = sources();
    expect(files.size).toBeGreaterThan(50);
    const problems = layeringProblems(files);
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('finds import cycles, and type-only imports make none', () => {
    const files = new Map([
      ['src/a.ts', "import { b } from './b.ts';"],
      ['src/b.ts', "import { c } from './c.ts';\nimport type { A } from './a.ts';"],
      ['src/c.ts', "import { type A, type B } from './a.ts';\nimport { d } from './d.ts';"],
      ['src/d.ts', "import { b } from './b.ts';"],
    ]);
    expect(importCycles(files)).toEqual([['src/b.ts', 'src/c.ts', 'src/d.ts']]);
  });

  it('has no run-time import cycles', () => {
    const cycles = importCycles(sources());
    expect(cycles, cycles.map((c) => c.join(' <-> ')).join('\n')).toEqual([]);
  });
});
