// The disk cache: hits by content key, atomic checksummed entries, corrupt or truncated entries rebuilt.
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import type { Program } from '../../src/runtime/backend.ts';
import { DeviceBuffer } from '../../src/runtime/buffer.ts';
import { CPUBackend } from '../../src/runtime/cpu.ts';
import {
  cacheDir,
  cachedBody,
  cachedFile,
  cacheStats,
  publishFile,
  readCachedText,
  readPackedText,
  withBuildDir,
  writeCachedText,
  writePackedTexts,
} from '../../src/runtime/diskcache.ts';

const dirs: string[] = [];
const freshDir = () => {
  dirs.push(mkdtempSync(join(tmpdir(), 'tsgrad-cache-test-')));
  return dirs.at(-1)!;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const counts = () => ({ ...cacheStats });
const delta = (before: typeof cacheStats) => ({
  hits: cacheStats.hits - before.hits,
  builds: cacheStats.builds - before.builds,
  corrupt: cacheStats.corrupt - before.corrupt,
});

describe('cache entries', () => {
  const read = (path: string) => readFileSync(path, 'latin1');
  /** The bytes of key's entry: the verified one, else one built now (as the CPU device builds). */
  const entry = (key: string) => {
    const hit = cachedFile(key, '.txt');
    if (hit !== undefined) return read(hit);
    return withBuildDir((dir, cached) => {
      const out = join(dir, 'built');
      writeFileSync(out, 'payload');
      return cached ? read(publishFile(out, [key], '.txt')[0]!) : 'payload';
    });
  };

  it('builds once, then hits; a truncated or altered entry is rebuilt, never used', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      expect(cacheDir()).toBe(dir);
      const before = counts();
      expect(entry('k1')).toMatch(/^payloadtsgrad 000000000007 [0-9a-f]{64}\n$/);
      expect(entry('k1')).toMatch(/^payload/);
      expect(delta(before)).toEqual({ hits: 1, builds: 1, corrupt: 0 });
      const path = join(dir, 'k1.txt');
      truncateSync(path, 20);
      expect(entry('k1')).toMatch(/^payloadtsgrad 0/);
      writeFileSync(path, read(path).replace('payload', 'paYload'));
      expect(entry('k1')).toMatch(/^payloadtsgrad 0/);
      expect(delta(before)).toEqual({ hits: 1, builds: 3, corrupt: 2 });
      expect(readdirSync(dir)).toEqual(['k1.txt']); // no temporary files or build directories left behind
    });
  });

  it('publishes one build as the entry of several keys, each verified alone', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      const paths = withBuildDir((build) => {
        writeFileSync(join(build, 'unit'), 'shared');
        return publishFile(join(build, 'unit'), ['a', 'b'], '.so');
      });
      expect(paths).toEqual([join(dir, 'a.so'), join(dir, 'b.so')]);
      expect(readdirSync(dir).sort()).toEqual(['a.so', 'b.so']);
      writeFileSync(`${paths[0]!}.new`, 'damaged');
      renameSync(`${paths[0]!}.new`, paths[0]!);
      expect(cachedFile('a', '.so')).toBeUndefined();
      expect(cachedFile('b', '.so')).toBe(paths[1]);
      expect(read(paths[1]!)).toMatch(/^sharedtsgrad 000000000006 /);
    });
  });

  it('reads an entry once as its body without the trailer; a damaged one is rebuilt, never read', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      const [path] = withBuildDir((build) => {
        writeFileSync(join(build, 'cubin'), 'image');
        return publishFile(join(build, 'cubin'), ['c'], '.cubin');
      });
      const before = counts();
      expect(cachedBody('c', '.cubin')?.toString()).toBe('image');
      expect(cachedBody('c', '.cubin')?.toString()).toBe('image'); // verified before: read, not hashed
      expect(cachedBody('d', '.cubin')).toBeUndefined();
      writeFileSync(`${path!}.new`, read(path!).replace('image', 'imagE'));
      renameSync(`${path!}.new`, path!);
      expect(cachedBody('c', '.cubin')).toBeUndefined();
      expect(delta(before)).toEqual({ hits: 2, builds: 0, corrupt: 1 });
    });
  });

  it('does not cache at CACHELEVEL=0', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir, CACHELEVEL: 0 }, () => {
      expect(entry('k2')).toBe('payload');
      expect(entry('k2')).toBe('payload');
      expect(withBuildDir((build) => build.startsWith(dir))).toBe(false);
    });
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('cached text entries', () => {
  it('reads back what was written; a damaged entry or CACHELEVEL=0 reads as none', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      expect(readCachedText('t1', '.json')).toBeUndefined();
      writeCachedText('t1', '.json', '[1,"é"]');
      expect(readCachedText('t1', '.json')).toBe('[1,"é"]');
      expect(Context.with({ CACHELEVEL: 0 }, () => readCachedText('t1', '.json'))).toBeUndefined();
      const path = join(dir, 't1.json');
      writeFileSync(path, readFileSync(path, 'utf8').replace('1', '2'));
      expect(readCachedText('t1', '.json')).toBeUndefined();
    });
    const off = freshDir();
    Context.with({ CACHEDIR: off, CACHELEVEL: 0 }, () => writeCachedText('t2', '.json', '[]'));
    expect(readdirSync(off)).toEqual([]);
  });
});

describe('packed text entries', () => {
  it('are one file under every key, each key reading back its own text; a damaged pack reads as none', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      writePackedTexts(
        new Map([
          ['p1', '{"a":1}'],
          ['p2', 'é'],
        ]),
        '.json',
      );
      expect(readdirSync(dir).sort()).toEqual(['p1.json', 'p2.json']);
      expect(statSync(join(dir, 'p1.json')).ino).toBe(statSync(join(dir, 'p2.json')).ino);
      expect(readPackedText('p1', '.json')).toBe('{"a":1}');
      expect(readPackedText('p2', '.json')).toBe('é');
      expect(readPackedText('p3', '.json')).toBeUndefined();
      // a later pack under one of the keys replaces that key's entry only
      writePackedTexts(new Map([['p2', 'new']]), '.json');
      expect(readPackedText('p2', '.json')).toBe('new');
      expect(readPackedText('p1', '.json')).toBe('{"a":1}');
      const path = join(dir, 'p1.json');
      writeFileSync(path, readFileSync(path, 'utf8').replace('1', '2'));
      expect(readPackedText('p1', '.json')).toBeUndefined();
      expect(Context.with({ CACHELEVEL: 0 }, () => readPackedText('p2', '.json'))).toBeUndefined();
    });
  });
});

describe('CPU kernels in the disk cache', () => {
  // a source no other test compiles, so that the first compile here is a miss
  const source = `void twice(int* restrict data0, const int* restrict data1) { /* ${Date.now()} */
  for (int i = 0; i < 16; i++) data0[i] = 2 * data1[i];
}`;
  const runs = (cpu: CPUBackend) => {
    const a = new DeviceBuffer(cpu, 16, dtypes.int32).copyin(
      Int32Array.from({ length: 16 }, (_, i) => i - 5),
    );
    const out = new DeviceBuffer(cpu, 16, dtypes.int32);
    cpu.compile('twice', source).run([out, a]);
    return [...out.view()].every((v, i) => v === 2 * (i - 5));
  };

  it('compiles once: a second compile hits (in memory, then on disk); a damaged entry is rebuilt', () => {
    const dir = freshDir();
    Context.with({ CACHEDIR: dir }, () => {
      const before = counts();
      const cpu = new CPUBackend('CPU');
      expect(runs(cpu)).toBe(true);
      expect(delta(before)).toEqual({ hits: 0, builds: 1, corrupt: 0 });
      expect(runs(cpu)).toBe(true); // the loaded library: the disk is not read
      expect(delta(before)).toEqual({ hits: 0, builds: 1, corrupt: 0 });
      expect(runs(new CPUBackend('CPU'))).toBe(true); // a new device, as a new process would: read from disk
      expect(delta(before)).toEqual({ hits: 1, builds: 1, corrupt: 0 });

      // (beside the compiler's probes, where this process first asked for them)
      const [file, ...others] = readdirSync(dir).filter((f) => f.endsWith('.so'));
      expect(others).toEqual([]);
      expect(file).toMatch(/^[0-9a-f]{64}\.so$/);
      const path = join(dir, file!);
      const good = readFileSync(path);
      // damaged copies replace the entry by rename: this process has the library mapped, and writing into a
      // mapped library in place could crash it
      const damage = (bytes: Uint8Array) => {
        writeFileSync(`${path}.damaged`, bytes);
        renameSync(`${path}.damaged`, path);
      };
      damage(good.subarray(0, good.length >> 1));
      expect(runs(new CPUBackend('CPU'))).toBe(true);
      const flipped = Uint8Array.from(readFileSync(path));
      flipped[flipped.length >> 1]! ^= 0xff;
      damage(flipped);
      expect(runs(new CPUBackend('CPU'))).toBe(true);
      expect(delta(before)).toEqual({ hits: 1, builds: 3, corrupt: 2 });
      expect(readFileSync(path)).toEqual(good);
    });
  });

  it('a batch fills one entry per kernel (its unit, linked): a later run with one new kernel builds one', () => {
    const dir = freshDir();
    const stamp = Date.now();
    const kernel = (k: number) => ({
      name: `k${k}`,
      source: `void k${k}(int* restrict data0) { /* ${stamp} */\n  data0[0] = ${k};\n}`,
    });
    /** What each kernel writes, compiled on a new device (as a new process would). */
    const values = (ks: number[]) => {
      const cpu = new CPUBackend('CPU');
      return cpu.compileMany(ks.map(kernel)).map((p) => {
        const out = new DeviceBuffer(cpu, 1, dtypes.int32);
        (p as Program).run([out]);
        return out.view()[0];
      });
    };
    Context.with({ CACHEDIR: dir, CC_JOBS: 1 }, () => {
      const before = counts();
      expect(values([1, 2, 3])).toEqual([1, 2, 3]);
      expect(delta(before)).toEqual({ hits: 0, builds: 1, corrupt: 0 });
      const files = readdirSync(dir);
      expect(files).toHaveLength(3);
      expect(new Set(files.map((f) => statSync(join(dir, f)).ino)).size).toBe(1);
      // two kernels from the cache, one built
      expect(values([2, 4, 3])).toEqual([2, 4, 3]);
      expect(delta(before)).toEqual({ hits: 2, builds: 2, corrupt: 0 });
      expect(readdirSync(dir)).toHaveLength(4);
    });
  });
});
