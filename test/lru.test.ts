// LRU: the least recently used entry goes first, whether the last use was a read or a write.
import { describe, expect, it } from 'vitest';
import { LRU } from '../src/lru.ts';

describe('LRU', () => {
  it('drops the least recently used entry, reads of the newest entry included', () => {
    const lru = new LRU<string, number>(() => 2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1); // a is now the newest
    expect(lru.get('a')).toBe(1); // reading the newest again changes nothing
    lru.set('c', 3); // drops b
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('c')).toBe(3);
    expect(lru.get('a')).toBe(1);
    lru.set('d', 4); // drops c, a being read since
    expect([lru.get('c'), lru.get('a'), lru.get('d'), lru.size]).toEqual([undefined, 1, 4, 2]);
  });

  it('an entry written again is the newest', () => {
    const lru = new LRU<string, number>(() => 2);
    lru.set('a', 1);
    lru.set('b', 2);
    lru.get('b');
    lru.set('a', 5);
    lru.set('c', 3); // drops b
    expect([lru.get('a'), lru.get('b'), lru.get('c')]).toEqual([5, undefined, 3]);
  });
});
