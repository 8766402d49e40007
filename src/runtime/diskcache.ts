// The disk cache for compiled kernels: content-keyed files, written atomically, checksummed, rebuilt when corrupt.
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextVar, DEBUG } from '../helpers.ts';

/** 0 disables the disk cache (every compile runs the compiler). */
export const CACHELEVEL = new ContextVar('CACHELEVEL', 1);
/** The cache directory; empty: `${XDG_CACHE_HOME:-~/.cache}/tsgrad`. */
export const CACHEDIR = new ContextVar<string>('CACHEDIR', '');

/** Counts since start: verified entries used, builds (compiler runs), and corrupt entries found and replaced. */
export const cacheStats = { hits: 0, builds: 0, corrupt: 0 };

export function cacheDir(): string {
  if (CACHEDIR.value !== '') return CACHEDIR.value;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tsgrad');
}

// Every entry ends with a trailer `tsgrad <body length, 12 digits> <sha256 of the body>\n`: one file, so one
// rename publishes body and checksum together. Shared libraries load with it (ELF loaders ignore trailing bytes).
const TRAILER_BYTES = 85;
const sha256Hex = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const trailer = (body: Uint8Array) => `tsgrad ${String(body.length).padStart(12, '0')} ${sha256Hex(body)}\n`;

type EntryState = 'ok' | 'missing' | 'corrupt';

function check(path: string): EntryState {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch {
    return 'missing';
  }
  if (data.length < TRAILER_BYTES) return 'corrupt';
  const body = data.subarray(0, data.length - TRAILER_BYTES);
  return data.subarray(body.length).toString('latin1') === trailer(body) ? 'ok' : 'corrupt';
}

/**
 * Calls `use` with the path of a verified cache file for `key`, first building it with `build(path)` when it
 * is missing or corrupt. With CACHELEVEL=0, or when the cache directory cannot be created, it builds into a
 * temporary directory that is removed after `use`.
 */
export function withCachedFile<T>(
  key: string,
  ext: string,
  build: (out: string) => void,
  use: (path: string) => T,
): T {
  const dir = CACHELEVEL.value > 0 ? writableDir(cacheDir()) : undefined;
  if (dir === undefined) return withTempFile(key + ext, build, use);
  const path = join(dir, key + ext);
  const state = check(path);
  if (state === 'ok') {
    cacheStats.hits++;
    return use(path);
  }
  if (state === 'corrupt') {
    cacheStats.corrupt++;
    if (DEBUG.value >= 1) console.error(`disk cache: ${path} is corrupt or truncated; rebuilding it`);
  }
  cacheStats.builds++;
  publish(path, build);
  return use(path);
}

// build beside the entry and rename over it: readers see the old entry or the whole new one, never a part
function publish(path: string, build: (out: string) => void): void {
  const tmp = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  try {
    build(tmp);
    appendFileSync(tmp, trailer(readFileSync(tmp)), 'latin1');
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Whether a verified entry for `key` is in the cache (so that using it runs no compiler). */
export const isCached = (key: string, ext: string): boolean =>
  CACHELEVEL.value > 0 && check(join(cacheDir(), key + ext)) === 'ok';

/** A verified entry's contents without the trailer (for loaders that read the whole buffer they are given). */
export const cachedEntryBody = (data: Buffer): Buffer => data.subarray(0, data.length - TRAILER_BYTES);

/** The text of a verified cache entry (a small result such as BEAM's opts), or undefined when there is none. */
export function readCachedText(key: string, ext: string): string | undefined {
  if (CACHELEVEL.value <= 0) return undefined;
  const path = join(cacheDir(), key + ext);
  if (check(path) !== 'ok') return undefined;
  const data = readFileSync(path, 'utf8');
  return data.slice(0, data.length - TRAILER_BYTES);
}

/** Stores a text entry for readCachedText (nothing with CACHELEVEL=0 or when the directory cannot be made). */
export function writeCachedText(key: string, ext: string, text: string): void {
  const dir = CACHELEVEL.value > 0 ? writableDir(cacheDir()) : undefined;
  if (dir !== undefined) publish(join(dir, key + ext), (out) => writeFileSync(out, text));
}

function writableDir(dir: string): string | undefined {
  try {
    mkdirSync(dir, { recursive: true });
    return dir;
  } catch (e) {
    if (DEBUG.value >= 1)
      console.error(`disk cache: cannot create ${dir} (${(e as Error).message}); not caching`);
    return undefined;
  }
}

// named by the key even here: dlopen returns the library already loaded under the same path
function withTempFile<T>(file: string, build: (out: string) => void, use: (path: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'tsgrad-'));
  try {
    cacheStats.builds++;
    const path = join(dir, file);
    build(path);
    return use(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
