import { setTimeout as sleep } from 'node:timers/promises';
import {
  evaluatePreconditions,
  type PreconditionOutcome,
  type Preconditions,
  type Profile,
} from '../domain/profile.js';
import { apiError } from '../errors.js';
import type { ProfileSnapshot, ProfileStore } from '../stores/profile.js';

/** Reading and writing the profile under a request's preconditions, whichever store holds it. */

/**
 * How often a write that keeps losing races to other writes is tried, in all, before a 503,
 * and the longest pause between two tries. 50 writers racing through a store with 5 ms
 * between read and write need at most about 14 tries; 20 tries give up after 1.6 s on
 * average, 3.3 s at most.
 */
export const MAX_WRITE_ATTEMPTS = 20;
const MAX_PAUSE_MS = 250;

/**
 * The current profile, if If-Match allows reading it. If-None-Match is not weighed here: its 304
 * depends on the coding the answer goes in (`plugins/content-codings.ts`).
 */
export async function readProfile(store: ProfileStore, ifMatch: string | undefined): Promise<ProfileSnapshot> {
  const current = await store.get();
  const outcome = evaluatePreconditions({ ifMatch }, current.version);
  if (outcome !== 'proceed') throw preconditionFailed(outcome);
  return current;
}

function preconditionFailed(outcome: Exclude<PreconditionOutcome, 'proceed'>) {
  return apiError(
    412,
    outcome === 'if-match-failed'
      ? 'If-Match does not match the current ETag of the profile.'
      : 'If-None-Match matches the current ETag of the profile.',
  );
}

/**
 * Applies `change` to the current profile and stores the result if nobody wrote in between.
 * When another write came first, the preconditions are checked again against that write:
 * an If-Match naming the old version then fails with 412, while an unconditional write (or
 * `If-Match: *`) is applied again on top of it, so no write is ever lost.
 */
export async function writeProfile(
  store: ProfileStore,
  preconditions: Preconditions,
  change: (current: Profile) => Profile,
): Promise<ProfileSnapshot> {
  for (let attempt = 1; ; attempt++) {
    const current = await store.get();
    const outcome = evaluatePreconditions(preconditions, current.version);
    if (outcome !== 'proceed') throw preconditionFailed(outcome);
    const stored = await store.compareAndSet(current.version, change(current.profile));
    if (stored !== null) return stored;
    if (attempt === MAX_WRITE_ATTEMPTS) {
      throw apiError(503, 'The profile is being changed by too many requests at once; try again.', [], {
        'retry-after': '1',
      });
    }
    // A random pause that grows with each attempt ("full jitter") spreads racing writers apart.
    await sleep(Math.random() * Math.min(2 ** attempt, MAX_PAUSE_MS));
  }
}
