// Read-ahead of files into the page cache (src/runtime/readahead.ts), as the CUDA device asks for NVRTC's.
import { platform } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readAhead } from '../../src/runtime/readahead.ts';

describe('read-ahead', () => {
  it.runIf(platform() === 'linux')('advises the files that exist and skips the missing ones', () => {
    const self = fileURLToPath(import.meta.url);
    expect(readAhead([self, '/nonexistent/libnvrtc.so', self])).toBe(2);
    expect(readAhead([])).toBe(0);
  });
});
