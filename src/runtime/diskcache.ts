// The disk cache for compiled kernels: content-keyed files, written atomically, checksummed, rebuilt when corrupt.
import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  copyFileSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
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

// files verified in this process, by identity: a unit's library is one file under many keys, checked once
const verified = new Set<string>();

/**
 * The entry at path: its whole contents once verified (`data` is undefined where this process verified the
 * same file before and `read` is false), 'missing' or 'corrupt'.
 */
function check(path: string, read: boolean): { data: Buffer | undefined } | 'missing' | 'corrupt' {
  let data: Buffer;
  let id: string;
  try {
    const s = statSync(path, { bigint: true });
    id = `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
    if (verified.has(id) && !read) return { data: undefined };
    data = readFileSync(path);
  } catch {
    return 'missing';
  }
  if (verified.has(id)) return { data };
  if (data.length < TRAILER_BYTES) return 'corrupt';
  const body = data.subarray(0, data.length - TRAILER_BYTES);
  if (data.subarray(body.length).toString('latin1') !== trailer(body)) return 'corrupt';
  verified.add(id);
  return { data };
}

/** The verified entry for `key` read (or only checked, where `read` is false); counts hits and corrupt entries. */
function lookup(
  key: string,
  ext: string,
  read: boolean,
): { path: string; data: Buffer | undefined } | undefined {
  if (CACHELEVEL.value <= 0) return undefined;
  const path = join(cacheDir(), key + ext);
  const state = check(path, read);
  if (typeof state === 'object') {
    cacheStats.hits++;
    return { path, data: state.data };
  }
  if (state === 'corrupt') {
    cacheStats.corrupt++;
    if (DEBUG.value >= 1) console.error(`disk cache: ${path} is corrupt or truncated; rebuilding it`);
  }
  return undefined;
}

/** The path of the verified cache entry for `key`; undefined when it is missing or corrupt, or nothing is cached. */
export const cachedFile = (key: string, ext: string): string | undefined => lookup(key, ext, false)?.path;

/** The verified cache entry's contents without the trailer, read once; undefined as for cachedFile. */
export function cachedBody(key: string, ext: string): Buffer | undefined {
  const data = lookup(key, ext, true)?.data;
  return data?.subarray(0, data.length - TRAILER_BYTES);
}

/**
 * A new directory to build entries in: inside the cache directory (so publishFile links rather than copies)
 * where entries are cached, else a temporary one, and which. The caller removes it.
 */
export function makeBuildDir(): { dir: string; cached: boolean } {
  const cache = CACHELEVEL.value > 0 ? writableDir(cacheDir()) : undefined;
  const dir = mkdtempSync(join(cache ?? tmpdir(), cache === undefined ? 'tsgrad-' : 'build-'));
  return { dir, cached: cache !== undefined };
}

/** Calls `build` with a new directory from makeBuildDir, removed when it returns. */
export function withBuildDir<T>(build: (dir: string, cached: boolean) => T): T {
  const { dir, cached } = makeBuildDir();
  try {
    return build(dir, cached);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Publishes `file` (built in withBuildDir's directory) as the cache entry of every key: one file with its
 * checksum trailer, hard-linked under each key's name where the file system allows, else copied. Counts one
 * build; returns the entries' paths.
 */
export function publishFile(file: string, keys: readonly string[], ext: string): string[] {
  cacheStats.builds++;
  appendFileSync(file, trailer(readFileSync(file)), 'latin1');
  return keys.map((key) => {
    const path = join(cacheDir(), key + ext);
    publish(path, (tmp) => linkOrCopy(file, tmp));
    return path;
  });
}

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}

/** A name beside path that no other build (in this process or another) uses. */
const tempName = (path: string) => `${path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;

// build beside the entry and rename over it: readers see the old entry or the whole new one, never a part
function publish(path: string, build: (out: string) => void): void {
  const tmp = tempName(path);
  try {
    build(tmp);
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** The text of a verified cache entry (a small result such as BEAM's opts), or undefined when there is none. */
export function readCachedText(key: string, ext: string): string | undefined {
  return cachedBody(key, ext)?.toString('utf8');
}

/** Stores a text entry for readCachedText (nothing with CACHELEVEL=0 or when the directory cannot be made). */
export function writeCachedText(key: string, ext: string, text: string): void {
  const dir = CACHELEVEL.value > 0 ? writableDir(cacheDir()) : undefined;
  if (dir !== undefined)
    publish(join(dir, key + ext), (out) => writeFileSync(out, text + trailer(Buffer.from(text))));
}

/**
 * Stores several text entries (key to text) as one file, published under each key's name by a hard link (else a
 * copy): creating a file costs about 0.4 ms of CPU on an ext4 disk, a link 15 us, and a first step lowers 30-140
 * kernels. Read back with readPackedText.
 */
export function writePackedTexts(entries: ReadonlyMap<string, string>, ext: string): void {
  const dir = CACHELEVEL.value > 0 ? writableDir(cacheDir()) : undefined;
  if (dir === undefined || entries.size === 0) return;
  const body = JSON.stringify(Object.fromEntries(entries));
  const [first] = entries.keys();
  const pack = tempName(join(dir, first + ext));
  try {
    writeFileSync(pack, body + trailer(Buffer.from(body)));
    for (const key of entries.keys()) publish(join(dir, key + ext), (tmp) => linkOrCopy(pack, tmp));
  } finally {
    rmSync(pack, { force: true });
  }
}

/** Packs read in this process, by file identity: a pack is one file under many keys, read and parsed once. */
const packs = new Map<string, Record<string, string>>();
const PACKS_KEPT = 16;

/** The text writePackedTexts stored for `key`, or undefined when there is none (or its file is corrupt). */
export function readPackedText(key: string, ext: string): string | undefined {
  if (CACHELEVEL.value <= 0) return undefined;
  let id: string;
  try {
    const s = statSync(join(cacheDir(), key + ext), { bigint: true });
    id = `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
  } catch {
    return undefined;
  }
  let pack = packs.get(id);
  if (pack !== undefined) cacheStats.hits++;
  else {
    const body = cachedBody(key, ext);
    if (body === undefined) return undefined;
    pack = JSON.parse(body.toString('utf8')) as Record<string, string>;
    if (packs.size >= PACKS_KEPT) packs.delete(packs.keys().next().value!);
    packs.set(id, pack);
  }
  return Object.hasOwn(pack, key) ? pack[key] : undefined;
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
