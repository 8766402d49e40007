// A map bounded to its most recently used entries, for the compiler's caches (programs, schedules, libraries).
import { ContextVar } from './helpers.ts';

/**
 * Entries each compiler cache keeps (programs, plans, CPU libraries). A few thousand hold every kernel of a big
 * training step many times over, while a program that makes new graphs forever (a shape that changes every
 * step) stays at a few megabytes.
 */
export const CACHE_ENTRIES = new ContextVar('CACHE_ENTRIES', 4096);

/** A Map that drops its least recently used entry past `limit()` entries (read at each insertion). */
export class LRU<K, V> {
  private readonly map = new Map<K, V>();
  /** The key last read or written, the last in the map's order while it is in the map. */
  private newest: K | undefined;

  constructor(private readonly limit: () => number = () => CACHE_ENTRIES.value) {}

  get size(): number {
    return this.map.size;
  }

  /** The value, now the most recently used. */
  get(key: K): V | undefined {
    const v = this.map.get(key);
    // the most recently used already (a loop asking for one key): no need to move it
    if (v !== undefined && key !== this.newest) {
      this.newest = key;
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: K, value: V): void {
    this.newest = key;
    this.map.delete(key);
    this.map.set(key, value);
    const limit = Math.max(1, this.limit());
    // Maps iterate in insertion order: the first key is the least recently used
    for (const k of this.map.keys()) {
      if (this.map.size <= limit) break;
      this.map.delete(k);
    }
  }

  clear(): void {
    this.map.clear();
  }
}
