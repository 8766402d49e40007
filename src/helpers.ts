// Settings read from the environment (DEBUG, SPEC, ...) and scoped overrides of them through Context.

type SettingValue = number | string;

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

/** A product of numbers (1 for none). */
export function prod(xs: readonly number[]): number {
  let p = 1;
  for (const x of xs) p *= x;
  return p;
}

const SHA256_K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);
const sha256W = new Uint32Array(64);
const textEncoder = new TextEncoder();

/** SHA-256 of a string's UTF-8 bytes, as 64 hex digits: a content key that is the same in every process. */
export function sha256(text: string): string {
  const msg = textEncoder.encode(text);
  const total = Math.ceil((msg.length + 9) / 64) * 64;
  const data = new Uint8Array(total);
  data.set(msg);
  data[msg.length] = 0x80;
  const bitLen = msg.length * 8;
  const view = new DataView(data.buffer);
  view.setUint32(total - 8, Math.floor(bitLen / 2 ** 32));
  view.setUint32(total - 4, bitLen >>> 0);
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = sha256W;
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < total; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      const s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3);
      const s1 = rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10);
      w[i] = w[i - 16]! + s0 + w[i - 7]! + s1;
    }
    let [a, b, c, d, e, f, g, hh] = h as unknown as number[];
    for (let i = 0; i < 64; i++) {
      const t1 =
        (hh! +
          (rotr(e!, 6) ^ rotr(e!, 11) ^ rotr(e!, 25)) +
          ((e! & f!) ^ (~e! & g!)) +
          SHA256_K[i]! +
          w[i]!) |
        0;
      const t2 = ((rotr(a!, 2) ^ rotr(a!, 13) ^ rotr(a!, 22)) + ((a! & b!) ^ (a! & c!) ^ (b! & c!))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d! + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0]! += a!;
    h[1]! += b!;
    h[2]! += c!;
    h[3]! += d!;
    h[4]! += e!;
    h[5]! += f!;
    h[6]! += g!;
    h[7]! += hh!;
  }
  let out = '';
  for (const x of h) out += x.toString(16).padStart(8, '0');
  return out;
}
