// Files read ahead into the page cache: posix_fadvise(WILLNEED) starts the reads and returns, so a library a
// later step needs (NVRTC, src/runtime/cuda-api.ts) is read from disk while this process does other work.
import { closeSync, openSync } from 'node:fs';
import { koffi } from './koffi.ts';

type Fadvise = (fd: number, offset: number, length: number, advice: number) => number;
/** posix_fadvise's advice that the pages will be read soon. */
const WILLNEED = 3;
let fadvise: Fadvise | null | undefined;

function libcFadvise(): Fadvise | null {
  if (fadvise !== undefined) return fadvise;
  try {
    fadvise = koffi().load('libc.so.6').func('int posix_fadvise(int, int64_t, int64_t, int)') as Fadvise;
  } catch {
    fadvise = null; // not glibc: no read-ahead, only a later read
  }
  return fadvise;
}

/** Starts reading `files` into the page cache; returns how many it could (a hint: missing files are skipped). */
export function readAhead(files: readonly string[]): number {
  const advise = libcFadvise();
  if (advise === null) return 0;
  let advised = 0;
  for (const file of files) {
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch {
      continue;
    }
    try {
      if (advise(fd, 0, 0, WILLNEED) === 0) advised++;
    } finally {
      closeSync(fd);
    }
  }
  return advised;
}
