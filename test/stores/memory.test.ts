import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EMPTY_PROFILE } from '../../src/domain/profile.js';
import { MemoryProfileStore } from '../../src/stores/memory.js';

const ADA = { name: 'Ada', email: 'ada@example.com', bio: null };

describe('MemoryProfileStore', () => {
  it('starts with the empty profile at version 0', async () => {
    assert.deepEqual(await new MemoryProfileStore().get(), { profile: EMPTY_PROFILE, version: 0 });
  });

  it('stores the next profile as the next version when the version is current', async () => {
    const store = new MemoryProfileStore();
    assert.deepEqual(await store.compareAndSet(0, ADA), { profile: ADA, version: 1 });
    assert.deepEqual(await store.get(), { profile: ADA, version: 1 });
    assert.deepEqual(await store.compareAndSet(1, ADA), { profile: ADA, version: 2 });
  });

  it('changes nothing and answers null when the version has moved', async () => {
    const store = new MemoryProfileStore();
    await store.compareAndSet(0, ADA);
    for (const stale of [0, 2, -1]) {
      assert.equal(await store.compareAndSet(stale, EMPTY_PROFILE), null);
    }
    assert.deepEqual(await store.get(), { profile: ADA, version: 1 });
  });

  it('lets exactly one of many writers holding the same version win', async () => {
    const store = new MemoryProfileStore();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.compareAndSet(0, { ...ADA, bio: String(i) })),
    );
    const winners = results.filter((result) => result !== null);
    assert.equal(winners.length, 1);
    assert.deepEqual(await store.get(), winners[0]);
  });

  it('hands out snapshots that cannot change, and keeps its own copy of what it stores', async () => {
    const store = new MemoryProfileStore();
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
    const store = new MemoryProfileStore();
    await store.compareAndSet(0, { ...ADA, extra: 1 } as typeof ADA);
    assert.deepEqual(Object.keys((await store.get()).profile), ['name', 'email', 'bio']);
  });

  it('gives each store its own profile', async () => {
    const one = new MemoryProfileStore();
    await one.compareAndSet(0, ADA);
    assert.deepEqual(await new MemoryProfileStore().get(), { profile: EMPTY_PROFILE, version: 0 });
  });
});
