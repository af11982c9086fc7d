import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EMPTY_PROFILE } from '../../src/domain/profile.js';
import { MemoryProfileStore } from '../../src/stores/memory-profile.js';
import { ADA, profileStoreContract } from './profile-store-contract.js';

describe('MemoryProfileStore', () => {
  profileStoreContract(async () => new MemoryProfileStore());

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

  it('gives each store its own profile', async () => {
    const one = new MemoryProfileStore(0);
    await one.compareAndSet(0, ADA);
    assert.deepEqual(await new MemoryProfileStore(0).get(), { profile: EMPTY_PROFILE, version: 0 });
  });
});
