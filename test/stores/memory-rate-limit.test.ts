import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DEFAULT_RATE_LIMIT_CAPACITY, MemoryRateLimitStore } from '../../src/stores/memory-rate-limit.js';

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance(ms: number): void } {
  let time = 1000;
  return {
    now: () => time,
    advance(ms) {
      time += ms;
    },
  };
}

describe('MemoryRateLimitStore', () => {
  it('counts a key from 1 in a window that starts with its first request', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 10, now: clock.now });
    assert.deepEqual(await store.incr('a', 1000), { current: 1, ttl: 1000 });
    clock.advance(300);
    assert.deepEqual(await store.incr('a', 1000), { current: 2, ttl: 700 });
    clock.advance(699);
    assert.deepEqual(await store.incr('a', 1000), { current: 3, ttl: 1 });
  });

  it('starts a new window from 1 once the window has ended', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 10, now: clock.now });
    await store.incr('a', 1000);
    await store.incr('a', 1000);
    clock.advance(1000);
    assert.deepEqual(await store.incr('a', 1000), { current: 1, ttl: 1000 });
    clock.advance(1);
    assert.deepEqual(await store.incr('a', 1000), { current: 2, ttl: 999 });
  });

  it('answers a new window with its whole length, whatever the fraction of the clock', () => {
    // (now + 60,000) - now is 60,000.000000000015 here, which would announce a 61 s reset.
    const store = new MemoryRateLimitStore({ capacity: 10, now: () => 106983.18747639957 });
    assert.deepEqual(store.incr('a', 60_000), { current: 1, ttl: 60_000 });
    // The same reading again, as a clock read once per turn of the event loop gives it.
    assert.deepEqual(store.incr('a', 60_000), { current: 2, ttl: 60_000 });
  });

  it('counts each key on its own', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 10, now: clock.now });
    await store.incr('a', 1000);
    clock.advance(100);
    assert.deepEqual(await store.incr('b', 1000), { current: 1, ttl: 1000 });
    assert.deepEqual(await store.incr('a', 1000), { current: 2, ttl: 900 });
  });

  it(`holds at most ${DEFAULT_RATE_LIMIT_CAPACITY} keys by default, however many clients come`, async () => {
    const store = new MemoryRateLimitStore();
    for (let i = 0; i < 150_000; i++) await store.incr(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, 60_000);
    assert.equal(store.size, DEFAULT_RATE_LIMIT_CAPACITY);
  });

  it('gives up the oldest window at capacity and keeps counting the recent clients', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 100, now: clock.now });
    for (let i = 0; i < 100; i++) {
      await store.incr(`old${i}`, 60_000);
      clock.advance(1);
    }
    // A recent client with a count of 5, then 150 new keys: the 100 old ones go, oldest first.
    for (let i = 0; i < 5; i++) await store.incr('recent', 60_000);
    for (let i = 0; i < 150; i++) {
      await store.incr(`new${i}`, 60_000);
      if (i < 99) assert.equal(store.size, 100);
    }
    assert.equal(store.size, 100);
    // "recent" went last of the old ones, after new98: it starts again, as does any evicted key.
    assert.equal((await store.incr('recent', 60_000)).current, 1);
    // The 99 newest keys are still counted.
    for (let i = 51; i < 150; i++) assert.equal((await store.incr(`new${i}`, 60_000)).current, 2, `new${i}`);
    assert.equal(store.size, 100);
  });

  it('keeps a client that keeps coming counted while others come and go', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 20, now: clock.now });
    for (let i = 0; i < 1000; i++) {
      // Windows of 10 ms, a new client every 1 ms: about 11 windows alive at any time.
      assert.equal((await store.incr('steady', 10)).current, (i % 10) + 1, `request ${i}`);
      await store.incr(`passer${i}`, 10);
      clock.advance(1);
      assert.ok(store.size <= 13, String(store.size));
    }
  });

  it('lets expired windows go without a timer, so the map shrinks when clients leave', async () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 1000, now: clock.now });
    for (let i = 0; i < 500; i++) await store.incr(`k${i}`, 100);
    clock.advance(100);
    // Each call drops up to two expired windows and adds at most one.
    for (let i = 0; i < 500; i++) await store.incr('only', 100);
    assert.equal(store.size, 1);
  });

  it('holds at most its characters of keys, giving up the oldest windows for a long new key', () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 100, keyCharacters: 1000, now: clock.now });
    for (let i = 0; i < 100; i++) {
      store.incr(`k${String(i).padStart(8, '0')}`, 60_000); // 9 characters each: 900 in all
      clock.advance(1);
    }
    assert.deepEqual([store.size, store.keyCharacters], [100, 900]);
    // 300 more characters make 1200: the 23 oldest keys (207 characters) go, and no other.
    store.incr('x'.repeat(300), 60_000);
    assert.deepEqual([store.size, store.keyCharacters], [78, 993]);
    assert.equal(store.incr('k00000023', 60_000).current, 2);
    assert.equal(store.incr('k00000022', 60_000).current, 1);
  });

  it('stays within both bounds whatever the keys', () => {
    const clock = manualClock();
    const store = new MemoryRateLimitStore({ capacity: 50, keyCharacters: 5000, now: clock.now });
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ maxLength: 400, unit: 'binary' }), fc.nat(5))), (calls) => {
        for (const [key, pause] of calls) {
          store.incr(key, 1000);
          clock.advance(pause);
          assert.ok(store.size <= 50, String(store.size));
          assert.ok(store.keyCharacters <= 5000, String(store.keyCharacters));
        }
      }),
    );
  });

  it('holds a key longer than all its characters alone', () => {
    const store = new MemoryRateLimitStore({ capacity: 10, keyCharacters: 100 });
    store.incr('a', 1000);
    assert.equal(store.incr('x'.repeat(101), 1000).current, 1);
    assert.deepEqual([store.size, store.keyCharacters], [1, 101]);
    assert.equal(store.incr('x'.repeat(101), 1000).current, 2);
  });

  it('refuses a capacity or a number of characters that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => new MemoryRateLimitStore({ capacity: bad }), RangeError, String(bad));
      assert.throws(() => new MemoryRateLimitStore({ keyCharacters: bad }), RangeError, String(bad));
    }
  });
});
