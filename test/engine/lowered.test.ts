// Lowered kernels on disk: a kernel lowered once is read back by a later compile under the same settings (as a
// warm start would), lowered anew under other settings, and gives the same values either way.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loweringStore, renderObservers } from '../../src/engine/compile.ts';
import { Context } from '../../src/helpers.ts';
import { Tensor } from '../../src/tensor/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'tsgrad-lowered-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('lowered kernels in the disk cache', () => {
  it('are read back where the program cache no longer holds them, and lowered anew under other settings', () => {
    const found: boolean[] = [];
    const read = loweringStore.read;
    loweringStore.read = (key) => {
      const text = read(key);
      found.push(text !== undefined);
      return text;
    };
    const x = () => new Tensor([1, 2, 3, 4], { device: 'CPU' });
    // a stamp makes kernels no other test (or earlier run) lowered
    const stamp = (Date.now() % 1000) + 0.5;
    const a = () => x().mul(x()).add(stamp).tolist();
    const b = () => x().sub(stamp).exp2().tolist();
    try {
      // one program cached at a time: each kernel's program is dropped by the next
      Context.with({ CACHEDIR: dir, CACHE_ENTRIES: 1 }, () => {
        const want = [1, 4, 9, 16].map((v) => v + stamp);
        expect(a()).toEqual(want);
        expect(b()).toHaveLength(4);
        expect(found).toEqual([false, false]);
        expect(a()).toEqual(want); // read back: not lowered again
        expect(found).toEqual([false, false, true]);
        expect(Context.with({ NOOPT: 1 }, a)).toEqual(want);
        expect(found).toEqual([false, false, true, false]);
      });
      expect(readdirSync(dir).filter((f) => f.endsWith('.lowered.json'))).toHaveLength(3);
      // an observer of the rendered C kernels sees each one: the kernel is lowered, not read
      const seen: string[] = [];
      renderObservers.set('C', (name) => void seen.push(name));
      Context.with({ CACHEDIR: dir, CACHE_ENTRIES: 1 }, a);
      renderObservers.delete('C');
      expect(seen).toHaveLength(1);
      expect(found).toHaveLength(4);
    } finally {
      loweringStore.read = read;
      renderObservers.delete('C');
    }
  });
});
