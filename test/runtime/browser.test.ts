// The browser entry: it bundles without Node built-ins and runs a tensor program where Node's globals are absent.
import { fileURLToPath } from 'node:url';
import { createContext, runInContext } from 'node:vm';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** `entry` bundled for a browser page as a script defining the global `tsgrad`; rejects if it needs a Node built-in. */
async function bundle(entry: string): Promise<string> {
  const out = await build({
    entryPoints: [entry],
    absWorkingDir: root,
    bundle: true,
    platform: 'browser',
    format: 'iife',
    globalName: 'tsgrad',
    write: false,
    logLevel: 'silent',
  });
  return out.outputFiles[0]!.text;
}

const grid = (rows: number, cols: number, f: (i: number, j: number) => number) =>
  Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => f(i, j)));
const A = grid(3, 4, (i, j) => (((i * 7 + j * 3) % 11) - 5) / 4);
const B = grid(4, 5, (i, j) => (((i * 5 + j * 2) % 9) - 4) / 2);
const S = grid(2, 5, (i, j) => (i + 1) * (j - 2) * 1.5);

// the page's script: it sees only the bundle's global and what a browser page has
const program = `
const { Device, Tensor } = tsgrad;
const h = new Tensor(${JSON.stringify(A)}).matmul(new Tensor(${JSON.stringify(B)})).relu();
Tensor.ones([4], { device: 'NULL' }).add(1).realize();
let cpu;
try { Device.get('CPU'); } catch (e) { cpu = e.message; }
JSON.stringify({
  kinds: Device.kinds,
  device: Device.default,
  cpu,
  h: h.tolist(),
  total: h.sum().item(),
  softmax: new Tensor(${JSON.stringify(S)}).softmax().tolist(),
});`;

describe('browser entry', () => {
  it('bundles without Node built-ins and computes on JS in a context without Node globals', async () => {
    const code = await bundle('src/browser.ts');
    // a vm context has only the language's globals (WeakRef and FinalizationRegistry among them): no process,
    // require or Buffer; the page's console, performance and TextEncoder are lent to it
    const page = createContext({ console, performance, TextEncoder });
    expect(runInContext('[typeof process, typeof require, typeof Buffer].join()', page)).toBe(
      'undefined,undefined,undefined',
    );
    runInContext(code, page);
    const got = JSON.parse(runInContext(program, page, { timeout: 10_000 }) as string);

    expect([got.kinds, got.device]).toEqual([['JS', 'NULL', 'SIMT'], 'JS']);
    expect(got.cpu).toBe(
      "unknown device 'CPU': valid devices are JS, NULL, SIMT, optionally with an index (JS:1)",
    );
    const h = A.map((row) =>
      B[0]!.map((_, j) =>
        Math.max(
          0,
          row.reduce((s, a, k) => s + a * B[k]![j]!, 0),
        ),
      ),
    );
    expect(got.h).toEqual(h); // quarters times halves sum exactly in float32
    expect(got.total).toBe(h.flat().reduce((s, x) => s + x, 0));
    const softmax = S.map((row) => {
      const e = row.map((x) => Math.exp(x - Math.max(...row)));
      return e.map((x) => x / e.reduce((s, y) => s + y, 0));
    });
    const want = softmax.flat();
    for (const [i, x] of (got.softmax as number[][]).flat().entries()) expect(x).toBeCloseTo(want[i]!, 6);
  });

  it('the check catches a Node built-in: the Node entry does not bundle for a browser', async () => {
    await expect(bundle('src/index.ts')).rejects.toThrow(/Could not resolve "node:/);
  });
});
