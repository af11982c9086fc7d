import assert from 'node:assert/strict';
import { beforeEach, it } from 'node:test';
import { EMPTY_PROFILE } from '../../src/domain/profile.js';
import type { ProfileStore } from '../../src/stores/profile.js';

export const ADA = { name: 'Ada', email: 'ada@example.com', bio: null };

/**
 * What every ProfileStore does, whatever holds the profile; `fresh` gives a store with the
 * empty profile at some first version. Call inside a describe.
 */
export function profileStoreContract(fresh: () => Promise<ProfileStore>): void {
  let store: ProfileStore;
  let first: number;
  beforeEach(async () => {
    store = await fresh();
    first = (await store.get()).version;
  });

  it('starts with the empty profile at a safe integer version', async () => {
    assert.deepEqual(await store.get(), { profile: EMPTY_PROFILE, version: first });
    assert.ok(Number.isSafeInteger(first), String(first));
  });

  it('stores the next profile as the next version when the version is current', async () => {
    assert.deepEqual(await store.compareAndSet(first, ADA), { profile: ADA, version: first + 1 });
    assert.deepEqual(await store.get(), { profile: ADA, version: first + 1 });
    assert.deepEqual(await store.compareAndSet(first + 1, ADA), { profile: ADA, version: first + 2 });
  });

  it('changes nothing and answers null when the version has moved', async () => {
    await store.compareAndSet(first, ADA);
    for (const stale of [first, first + 2, -1]) {
      assert.equal(await store.compareAndSet(stale, EMPTY_PROFILE), null);
    }
    assert.deepEqual(await store.get(), { profile: ADA, version: first + 1 });
  });

  it('lets exactly one of many writers holding the same version win', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.compareAndSet(first, { ...ADA, bio: String(i) })),
    );
    const winners = results.filter((result) => result !== null);
    assert.equal(winners.length, 1);
    assert.deepEqual(await store.get(), winners[0]);
  });

  it('hands out snapshots that cannot change, and keeps its own copy of what it stores', async () => {
    const next = { ...ADA };
    const stored = await store.compareAndSet(first, next);
    next.name = 'changed';
    assert.equal((await store.get()).profile.name, 'Ada');
    assert.ok(Object.isFrozen(stored) && Object.isFrozen(stored?.profile));
    const read = await store.get();
    assert.throws(() => {
      (read.profile as { name: string | null }).name = 'x';
    }, TypeError);
  });

  it('keeps only the three fields', async () => {
    await store.compareAndSet(first, { ...ADA, extra: 1 } as typeof ADA);
    assert.deepEqual(Object.keys((await store.get()).profile), ['name', 'email', 'bio']);
  });

  it('keeps every character of the fields', async () => {
    const unicode = { name: 'Wörld 🌍 "quoted" \\ \u0000', email: 'a@b.c', bio: '\n'.repeat(1000) };
    await store.compareAndSet(first, unicode);
    assert.deepEqual((await store.get()).profile, unicode);
  });
}
