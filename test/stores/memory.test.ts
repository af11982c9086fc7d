import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EMPTY_PROFILE } from '../../src/domain/profile.js';
import { MemoryProfileStore } from '../../src/stores/memory.js';

const ADA = { name: 'Ada', email: 'ada@example.com', bio: null };

describe('MemoryProfileStore', () => {
  it('starts with the empty profile at the version it is given', async () => {
    assert.deepEqual(await new MemoryProfileStore(0).get(), { profile: EMPTY_PROFILE, version: 0 });
  });

  it('starts by default from its creation time in microseconds, so a restart never reuses a version', async () => {
    const before = Date.now() * 1000;
    const first = await new MemoryProfileStore().get();
    assert.deepEqual(first.profile, EMPTY_PROFILE);
    assert.ok(first.version >= before && first.version <= Date.now() * 1000, String(first.version));
    assert.ok(Number.isSafeInteger(first.version));
    // A store created a millisecond later starts beyond a thousand writes to the earlier one.
    await new Promise((resolve) => setTimeout(resolve, 2));
    assert.ok((await new MemoryProfileStore().get()).version > first.version + 1000);
  });

  it('stores the next profile as the next version when the version is current', async () => {
    const store = new MemoryProfileStore(0);
    assert.deepEqual(await store.compareAndSet(0, ADA), { profile: ADA, version: 1 });
    assert.deepEqual(await store.get(), { profile: ADA, version: 1 });
    assert.deepEqual(await store.compareAndSet(1, ADA), { profile: ADA, version: 2 });
  });

  it('changes nothing and answers null when the version has moved', async () => {
    const store = new MemoryProfileStore(0);
    await store.compareAndSet(0, ADA);
    for (const stale of [0, 2, -1]) {
      assert.equal(await store.compareAndSet(stale, EMPTY_PROFILE), null);
    }
    assert.deepEqual(await store.get(), { profile: ADA, version: 1 });
  });

  it('lets exactly one of many writers holding the same version win', async () => {
    const store = new MemoryProfileStore(0);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.compareAndSet(0, { ...ADA, bio: String(i) })),
    );
    const winners = results.filter((result) => result !== null);
    assert.equal(winners.length, 1);
    assert.deepEqual(await store.get(), winners[0]);
  });

  it('hands out snapshots that cannot change, and keeps its own copy of what it stores', async () => {
    const store = new MemoryProfileStore(0);
    const next = { ...ADA };
    const stored = await store.compareAndSet(0, next);
    next.name = 'changed';
    assert.equal((await store.get()).profile.name, 'Ada');
    assert.ok(Object.isFrozen(stored) && Object.isFrozen(stored?.profile));
    const read = await store.get();
    assert.throws(() => {
      (read.profile as { name: string | null }).name = 'x';
    }, TypeError);
  });

  it('keeps only the three fields', async () => {
    const store = new MemoryProfileStore(0);
    await store.compareAndSet(0, { ...ADA, extra: 1 } as typeof ADA);
    assert.deepEqual(Object.keys((await store.get()).profile), ['name', 'email', 'bio']);
  });

  it('gives each store its own profile', async () => {
    const one = new MemoryProfileStore(0);
    await one.compareAndSet(0, ADA);
    assert.deepEqual(await new MemoryProfileStore(0).get(), { profile: EMPTY_PROFILE, version: 0 });
  });
});
