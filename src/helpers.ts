// Settings read from the environment (DEBUG, SPEC, ...) and scoped overrides of them through Context.

export type SettingValue = number | string;

const env: Record<string, string | undefined> =
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};

/** A named setting: its value comes from the environment variable of the same name, else the default. */
export class ContextVar<T extends SettingValue = number> {
  static readonly registry = new Map<string, ContextVar<SettingValue>>();
  value: T;

  constructor(
    readonly key: string,
    readonly defaultValue: T,
  ) {
    if (ContextVar.registry.has(key)) throw new Error(`ContextVar ${key} is defined twice`);
    const raw = env[key];
    this.value = raw === undefined || raw === '' ? defaultValue : parseSetting(key, raw, defaultValue);
    ContextVar.registry.set(key, this as ContextVar<SettingValue>);
  }
}

function parseSetting<T extends SettingValue>(key: string, raw: string, like: T): T {
  if (typeof like === 'string') return raw as T;
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`environment variable ${key}=${raw}: expected a number`);
  return n as T;
}

/** Verbosity: 0 silent; higher levels print more of what the compiler does. */
export const DEBUG = new ContextVar('DEBUG', 0);
/** Spec verification: 0 off, 1 at stage boundaries, 2 every node at construction. */
export const SPEC = new ContextVar('SPEC', 1);

/**
 * Index checks on the device: 1 realizes a lazy index tensor where an op takes it (a sync) and reports its
 * first out-of-range value; 0 (the default) checks only indices whose data the host already holds.
 */
export const CHECK_INDEX = new ContextVar('CHECK_INDEX', 0);

/** Scoped settings: `Context.with({ DEBUG: 2 }, () => ...)` overrides them for the call only. */
export class Context {
  static with<R>(settings: Record<string, SettingValue>, fn: () => R): R {
    const saved: [ContextVar<SettingValue>, SettingValue][] = [];
    try {
      for (const [key, value] of Object.entries(settings)) {
        const v = ContextVar.registry.get(key);
        if (v === undefined)
          throw new Error(
            `Context: unknown setting ${key}; known: ${[...ContextVar.registry.keys()].join(', ')}`,
          );
        if (typeof value !== typeof v.defaultValue)
          throw new Error(`Context: ${key} takes a ${typeof v.defaultValue}, got ${JSON.stringify(value)}`);
        saved.push([v, v.value]);
        v.value = value;
      }
      return fn();
    } finally {
      for (let i = saved.length - 1; i >= 0; i--) saved[i]![0].value = saved[i]![1];
    }
  }

  static get(key: string): SettingValue {
    const v = ContextVar.registry.get(key);
    if (v === undefined) throw new Error(`Context: unknown setting ${key}`);
    return v.value;
  }

  static get DEBUG(): number {
    return DEBUG.value;
  }
  static get SPEC(): number {
    return SPEC.value;
  }
}

/**
 * Bytes a host device (CPU) aligns every buffer's start to, and generated C may assume: a cache line, enough
 * for any vector load.
 */
export const HOST_BUFFER_ALIGN = 64;

/** A product of numbers (1 for none). */
export function prod(xs: readonly number[]): number {
  let p = 1;
  for (const x of xs) p *= x;
  return p;
}

const SHA256_INIT = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const SHA256_K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);
const sha256W = new Int32Array(64);
const sha256H = new Int32Array(8);
const textEncoder = new TextEncoder();
let sha256Buf = new Uint8Array(256);
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** The platform's own SHA-256 with the same digests, where it has one (src/node.ts: Node's). */
let nativeSha256: ((text: string) => string) | undefined;
/** @internal Hashes with `hash` from now on: it must give sha256's digests (64 lowercase hex digits). */
export function useNativeSha256(hash: (text: string) => string): void {
  nativeSha256 = hash;
}

/** SHA-256 of a string's UTF-8 bytes, as 64 hex digits: a content key that is the same in every process. */
export function sha256(text: string): string {
  if (nativeSha256 !== undefined) return nativeSha256(text);
  return sha256Js(text);
}

/** sha256 in JS, for platforms without a native one (a browser's is asynchronous). */
export function sha256Js(text: string): string {
  // the message, padded, in a reused buffer (content keys hash millions of short strings)
  const need = Math.ceil((text.length * 3 + 9) / 64) * 64;
  if (sha256Buf.length < need) sha256Buf = new Uint8Array(need);
  const data = sha256Buf;
  let len = 0;
  for (; len < text.length; len++) {
    const ch = text.charCodeAt(len);
    if (ch >= 0x80) break;
    data[len] = ch;
  }
  if (len < text.length) len = textEncoder.encodeInto(text, data).written;
  const total = Math.ceil((len + 9) / 64) * 64;
  data.fill(0, len, total);
  data[len] = 0x80;
  const bitLen = len * 8;
  const hi = Math.floor(bitLen / 2 ** 32);
  const lo = bitLen >>> 0;
  for (let i = 0; i < 4; i++) {
    data[total - 8 + i] = hi >>> (24 - 8 * i);
    data[total - 4 + i] = lo >>> (24 - 8 * i);
  }
  const h = sha256H;
  h.set(SHA256_INIT);
  const w = sha256W;
  for (let off = 0; off < total; off += 64) {
    for (let i = 0; i < 16; i++) {
      const p = off + i * 4;
      w[i] = (data[p]! << 24) | (data[p + 1]! << 16) | (data[p + 2]! << 8) | data[p + 3]!;
    }
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15]!;
      const y = w[i - 2]!;
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
    }
    let a = h[0]!;
    let b = h[1]!;
    let c = h[2]!;
    let d = h[3]!;
    let e = h[4]!;
    let f = h[5]!;
    let g = h[6]!;
    let hh = h[7]!;
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + SHA256_K[i]! + w[i]!) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = h[0]! + a;
    h[1] = h[1]! + b;
    h[2] = h[2]! + c;
    h[3] = h[3]! + d;
    h[4] = h[4]! + e;
    h[5] = h[5]! + f;
    h[6] = h[6]! + g;
    h[7] = h[7]! + hh;
  }
  let out = '';
  for (let i = 0; i < 8; i++) {
    const x = h[i]!;
    out += HEX[(x >>> 24) & 255]! + HEX[(x >>> 16) & 255]! + HEX[(x >>> 8) & 255]! + HEX[x & 255]!;
  }
  return out;
}
