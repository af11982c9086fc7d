import type { Profile } from '../domain/profile.js';

/** The profile as one version of it: a store never hands out fields from two versions. */
export interface ProfileSnapshot {
  readonly profile: Profile;
  /**
   * A safe integer; every write adds 1. A store never hands out a version it handed out for
   * another profile before, not even across restarts, so an entity tag names one profile only.
   */
  readonly version: number;
}

/**
 * Where the one profile lives. Asynchronous and compare-and-set, because it may be shared
 * by several instances of the service (Redis): a writer reads a snapshot, computes the next
 * profile from it, and stores that only if nobody wrote in between.
 */
export interface ProfileStore {
  /** The current snapshot. */
  get(): Promise<ProfileSnapshot>;
  /**
   * Stores `next` as version `expectedVersion + 1` and returns that snapshot, if the
   * current version is still `expectedVersion`; otherwise changes nothing and returns null.
   */
  compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null>;
}

/** A snapshot of a copy of `profile`'s three fields, frozen: what a caller holds cannot change, nor change what is stored. */
export function snapshot(profile: Profile, version: number): ProfileSnapshot {
  const { name, email, bio } = profile;
  return Object.freeze({ profile: Object.freeze({ name, email, bio }), version });
}
