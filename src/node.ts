// What Node adds to the browser-safe library: its devices (CPU, DISK), and BEAM results and lowered kernels
// kept on disk.
import * as crypto from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beamStore } from './codegen/opt/search.ts';
import { loweringStore } from './engine/compile.ts';
import { useNativeSha256 } from './helpers.ts';
import { readCachedText, readPackedText, writeCachedText, writePackedTexts } from './runtime/diskcache.ts';
import './runtime/lower-threads.ts';
import './runtime/node.ts';

// content keys hash many short strings: Node's one-shot native hash (20.12 on) takes 0.4 us for what the JS one
// takes 1.6, and 16 us for 20 KB against 170 (the same digests)
if (typeof crypto.hash === 'function') useNativeSha256((text) => crypto.hash('sha256', text));

// BEAM's results outlive the process in the disk cache, beside the kernels
beamStore.read = (key) => readCachedText(key, '.beam.json');
beamStore.write = (key, text) => writeCachedText(key, '.beam.json', text);

let code: string | undefined;
/** A hash of the library's own source (this directory's files): lowered kernels are reused by the same code only. */
function codeVersion(): string {
  if (code === undefined) {
    const root = dirname(fileURLToPath(import.meta.url));
    const hash = crypto.createHash('sha256');
    for (const file of (readdirSync(root, { recursive: true }) as string[]).sort())
      if (/\.[cm]?[jt]s$/.test(file)) hash.update(file).update(readFileSync(join(root, file)));
    code = hash.digest('hex');
  }
  return code;
}

const loweredKey = (key: string) =>
  crypto.createHash('sha256').update(codeVersion()).update(key).digest('hex');
loweringStore.read = (key) => readPackedText(loweredKey(key), '.lowered.json');
loweringStore.write = (entries) =>
  writePackedTexts(new Map([...entries].map(([key, text]) => [loweredKey(key), text])), '.lowered.json');
