import { turnClock } from '../lib/turn-clock.js';
import type { RateLimitCount, RateLimitStore } from './rate-limit.js';

interface Window {
  count: number;
  /** When the window ends, on the store's clock. */
  readonly endsAt: number;
}

/** How many keys a store holds by default: some 20 MB of counters at most. */
export const DEFAULT_RATE_LIMIT_CAPACITY = 100_000;

/** Characters of key a store holds by default per key of its capacity: the longest text of an IPv6 address. */
const KEY_LENGTH_ALLOWANCE = 45;

export interface MemoryRateLimitOptions {
  /** Most keys held: `DEFAULT_RATE_LIMIT_CAPACITY` unless given. */
  capacity?: number;
  /** Most characters of all keys together: 45 per key of the capacity unless given. */
  keyCharacters?: number;
  /**
   * A monotonic clock in milliseconds, so that a change of the system time moves no window: by
   * default `performance.now()`, read once per turn of the event loop.
   */
  now?: () => number;
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer`);
  return value;
}

/**
 * Counters in this process's memory, bounded whatever the keys: never more than `capacity` of
 * them, nor more than `keyCharacters` characters of keys in all (a single longer key is held
 * alone). The map keeps its keys in the order their windows started (a key whose window
 * restarts is moved to the end), so with one window length, as the service uses, the first key
 * is the oldest window: the first to expire, and the one given up when a new key would pass a
 * bound. That client then starts a new window with its next request, so a flood of new keys
 * can only ever let the oldest clients through early, never block anyone wrongly. Every call
 * does a constant amount of work, amortised, and one that counts in a running window allocates
 * nothing: the answer is one reused object.
 */
export class MemoryRateLimitStore implements RateLimitStore {
  readonly #windows = new Map<string, Window>();
  readonly #capacity: number;
  readonly #maxKeyCharacters: number;
  readonly #now: () => number;
  readonly #lastAnswer = { current: 0, ttl: 0 };
  /** When the oldest window ends, as last seen: windows end in the order they began, so none ends before. */
  #oldestEndsAt = 0;
  #keyCharacters = 0;

  constructor({
    capacity = DEFAULT_RATE_LIMIT_CAPACITY,
    keyCharacters = capacity * KEY_LENGTH_ALLOWANCE,
    now = turnClock(() => performance.now()),
  }: MemoryRateLimitOptions = {}) {
    this.#capacity = positiveInteger(capacity, 'capacity');
    this.#maxKeyCharacters = positiveInteger(keyCharacters, 'keyCharacters');
    this.#now = now;
  }

  /** How many keys are held. */
  get size(): number {
    return this.#windows.size;
  }

  /** How many characters the keys held have in all. */
  get keyCharacters(): number {
    return this.#keyCharacters;
  }

  incr(key: string, windowMs: number): RateLimitCount {
    const now = this.#now();
    this.#dropExpired(now);
    const window = this.#windows.get(key);
    if (window !== undefined && window.endsAt > now) {
      window.count += 1;
      // Never longer than a window: with the same reading as the window's start, floating point
      // may make the difference a hair longer.
      return this.#answer(window.count, Math.min(window.endsAt - now, windowMs));
    }
    // A new window goes to the end of the order; only a key not held yet can pass a bound.
    if (window !== undefined) this.#windows.delete(key);
    else {
      this.#keyCharacters += key.length;
      while (
        this.#windows.size >= this.#capacity ||
        (this.#keyCharacters > this.#maxKeyCharacters && this.#windows.size > 0)
      ) {
        this.#dropOldest();
      }
    }
    this.#windows.set(key, { count: 1, endsAt: now + windowMs });
    return this.#answer(1, windowMs); // not endsAt - now, which floating point may make a hair longer
  }

  #answer(current: number, ttl: number): RateLimitCount {
    this.#lastAnswer.current = current;
    this.#lastAnswer.ttl = ttl;
    return this.#lastAnswer;
  }

  /**
   * Drops up to two expired windows from the front: more than a call can add, so the map
   * shrinks back once clients go away, with no timer and no full scan.
   */
  #dropExpired(now: number): void {
    if (now < this.#oldestEndsAt) return;
    for (let i = 0; i < 2; i++) {
      const first = this.#windows.entries().next();
      if (first.done === true) return;
      const [key, { endsAt }] = first.value;
      if (endsAt > now) {
        this.#oldestEndsAt = endsAt;
        return;
      }
      this.#delete(key);
    }
  }

  #dropOldest(): void {
    const first = this.#windows.keys().next();
    if (first.done !== true) this.#delete(first.value);
  }

  #delete(key: string): void {
    this.#windows.delete(key);
    this.#keyCharacters -= key.length;
  }
}
