import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { entityTag, mergeProfile, type Profile } from '../../src/domain/profile.js';
import { ApiError } from '../../src/errors.js';
import { MAX_WRITE_ATTEMPTS, readProfile, writeProfile } from '../../src/services/profile.js';
import { MemoryProfileStore } from '../../src/stores/memory-profile.js';
import type { ProfileStore } from '../../src/stores/profile.js';

const ANY = { ifMatch: undefined, ifNoneMatch: undefined };

/** A store in which another writer stores `theirs` between each of the first `races` reads and their write. */
function racedStore(
  races: number,
  theirs: (current: Profile) => Profile,
): { store: ProfileStore; writes: () => number } {
  const inner = new MemoryProfileStore(0);
  let raced = 0;
  let writes = 0;
  return {
    writes: () => writes,
    store: {
      get: () => inner.get(),
      compareAndSet: async (expected, next) => {
        writes++;
        if (raced < races) {
          raced++;
          const current = await inner.get();
          await inner.compareAndSet(current.version, theirs(current.profile));
        }
        return inner.compareAndSet(expected, next);
      },
    },
  };
}

/** The ApiError a promise rejects with. */
async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ApiError);
    return error;
  }
  assert.fail('expected a rejection');
}

describe('readProfile', () => {
  it('answers the current snapshot when If-Match is absent or names it', async () => {
    const store = new MemoryProfileStore(7);
    assert.deepEqual(await readProfile(store, undefined), await store.get());
    assert.deepEqual(await readProfile(store, entityTag(7)), await store.get());
  });

  it('refuses with 412 when If-Match names no current version', async () => {
    const error = await rejection(readProfile(new MemoryProfileStore(7), '"6"'));
    assert.equal(error.statusCode, 412);
    assert.equal(error.code, 'PRECONDITION_FAILED');
  });
});

describe('writeProfile', () => {
  const name = (value: string) => (current: Profile) => mergeProfile(current, { name: value });
  const bio = (value: string) => (current: Profile) => mergeProfile(current, { bio: value });

  it('applies an unconditional write again on top of each write that came first: nothing is lost', async () => {
    const { store, writes } = racedStore(3, bio('theirs'));
    const stored = await writeProfile(store, ANY, name('Ada'));
    assert.deepEqual(stored.profile, { name: 'Ada', email: null, bio: 'theirs' });
    assert.equal(stored.version, 4);
    assert.equal(writes(), 4);
  });

  it('fails with 412 when a write came first and If-Match named the version it replaced', async () => {
    const { store, writes } = racedStore(1, bio('theirs'));
    const error = await rejection(writeProfile(store, { ifMatch: entityTag(0), ifNoneMatch: undefined }, name('Ada')));
    assert.equal(error.statusCode, 412);
    assert.equal(writes(), 1);
    assert.deepEqual((await store.get()).profile, { name: null, email: null, bio: 'theirs' });
  });

  it(`gives up after ${MAX_WRITE_ATTEMPTS} lost races with 503 and Retry-After: 1`, async () => {
    const { store, writes } = racedStore(Number.POSITIVE_INFINITY, bio('theirs'));
    const error = await rejection(writeProfile(store, ANY, name('Ada')));
    assert.equal(error.statusCode, 503);
    assert.equal(error.code, 'SERVICE_UNAVAILABLE');
    assert.deepEqual(error.headers, { 'retry-after': '1' });
    assert.equal(writes(), MAX_WRITE_ATTEMPTS);
  });
});
