import { EMPTY_PROFILE, type Profile } from '../domain/profile.js';
import { type ProfileSnapshot, type ProfileStore, snapshot } from './profile.js';

/**
 * The profile in this process's memory, gone when it stops. The whole snapshot is replaced
 * in one synchronous step, so a compare-and-set cannot interleave with another and a reader
 * sees one version or the next, never a mix.
 */
export class MemoryProfileStore implements ProfileStore {
  #current: ProfileSnapshot;

  /**
   * Versions start from the creation time in microseconds, not from 0: a restarted process
   * then never hands out a version, and so an ETag, that a client may still hold for another
   * profile. (Safe integers last until the year 2255 at this scale.)
   */
  constructor(firstVersion = Date.now() * 1000) {
    this.#current = snapshot(EMPTY_PROFILE, firstVersion);
  }

  async get(): Promise<ProfileSnapshot> {
    return this.#current;
  }

  async compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null> {
    if (this.#current.version !== expectedVersion) return null;
    this.#current = snapshot(next, expectedVersion + 1);
    return this.#current;
  }
}
