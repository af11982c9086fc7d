import { performance } from 'node:perf_hooks';
import type { Result } from 'ioredis';
import { EMPTY_PROFILE, type Profile } from '../domain/profile.js';
import { StoreUnavailableError } from './availability.js';
import { type ProfileSnapshot, type ProfileStore, snapshot } from './profile.js';
import type { RedisClient } from './redis-client.js';
import type { RedisConnection } from './redis-connection.js';
import { isOutOfMemory } from './redis-reasons.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    readProfile(key: string, emptyProfile: string): Result<[version: string, profile: string, now: string], Context>;
    compareAndSetProfile(
      key: string,
      expected: string,
      next: string,
      profile: string,
      deadline: string,
    ): Result<-1 | 0 | 1, Context>;
  }
}

/** The hash holding the profile: `version`, a decimal integer, and `profile`, its fields as JSON. */
const KEY = 'profile';

/**
 * Reads the profile, creating the empty one first if there is none (a new or flushed Redis), and
 * Redis's clock in microseconds. The first version is that clock, read in the same atomic step, so
 * every instance gets the same one, and a version handed out before a flush is never handed out
 * again. Versions and the clock travel as strings: Lua's numbers would print 16 digits in exponent notation.
 */
const READ_PROFILE = `
local stored = redis.call('HMGET', KEYS[1], 'version', 'profile')
local time = redis.call('TIME')
local now = time[1] .. string.format('%06d', tonumber(time[2]))
if stored[1] then return {stored[1], stored[2], now} end
redis.call('HSET', KEYS[1], 'version', now, 'profile', ARGV[1])
return {now, ARGV[1], now}
`;

/** The empty profile's fields, as stored. */
const EMPTY_JSON = JSON.stringify(EMPTY_PROFILE);

/**
 * The version of the empty profile while Redis is too full to store it: no stored profile has it
 * (theirs are Redis's clock), so it always names the empty profile.
 */
const UNSTORED_VERSION = '0';

/** Redis's clock in microseconds from TIME's answer, as the scripts write it. */
const microseconds = ([seconds, micros]: [string, string]): string => seconds + micros.padStart(6, '0');

/** The answer of one command of a pipeline, or its error thrown. */
function answerOf<T>(reply: [Error | null, unknown] | undefined): T {
  if (reply === undefined) throw new Error('Redis answered no reply to a command of the pipeline');
  if (reply[0] !== null) throw reply[0];
  return reply[1] as T;
}

/**
 * The profile's version and fields, and Redis's clock: a plain read and TIME after it in one round
 * trip, which Redis serves even when it is full and refuses writes (its clock then had that value
 * no later than when it answered), and the script that creates the empty profile only if there is
 * none. Too full for that, the empty profile unstored.
 */
async function readProfile(client: RedisClient): Promise<[version: string, profile: string, now: string]> {
  const replies = (await client.pipeline().hmget(KEY, 'version', 'profile').time().exec()) ?? [];
  const [version, profile] = answerOf<(string | null)[]>(replies[0]);
  const now = microseconds(answerOf<[string, string]>(replies[1]));
  if (typeof version === 'string' && typeof profile === 'string') return [version, profile, now];
  try {
    return await client.readProfile(KEY, EMPTY_JSON);
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
    return [UNSTORED_VERSION, EMPTY_JSON, now];
  }
}

/**
 * Stores the next version only if the current one is still the expected one, and only while
 * Redis's clock is not past the deadline (ARGV[4], in microseconds): 1 if stored, 0 for another
 * version, -1 too late. A script that Redis runs only after the client gave up on it (Redis was
 * stalled, and resumed) so changes nothing.
 */
const COMPARE_AND_SET_PROFILE = `
local time = redis.call('TIME')
if tonumber(time[1]) * 1000000 + tonumber(time[2]) > tonumber(ARGV[4]) then return -1 end
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'profile', ARGV[3])
return 1
`;

/** This process's clock in microseconds, monotonic: what Redis's clock is told against. */
const nowUs = (): number => (performance.timeOrigin + performance.now()) * 1000;

/**
 * The profile in Redis, shared by every instance using it. Each call is one script, run by Redis
 * atomically, so a compare-and-set is as exclusive across instances as the memory store's is
 * within one, and a reader gets the version and the fields of one write.
 *
 * A write is fenced: the client gives up on a command after REDIS_TIMEOUT_MS and answers 503, but
 * Redis runs what it was sent whenever it can (a stalled Redis, once resumed), so each
 * compare-and-set carries a deadline on Redis's own clock, half the timeout after it is sent,
 * which the script refuses to run past. The deadline is this process's clock plus the offset
 * between the two clocks that the last read measured (each read answers Redis's clock):
 * Redis's clock had that value no later than when the read was answered, so the offset is never
 * overstated and the deadline never comes after the client gives up. The other half of the
 * timeout is the answer's way back.
 */
export class RedisProfileStore implements ProfileStore {
  readonly #connection: RedisConnection;
  /** Redis's clock minus this process's, in microseconds, as the last read found it; no read yet, 0 (the first check reads). */
  #clockOffsetUs = 0;

  constructor(connection: RedisConnection) {
    this.#connection = connection;
    connection.defineScript('readProfile', READ_PROFILE);
    connection.defineScript('compareAndSetProfile', COMPARE_AND_SET_PROFILE);
    // Run on each connection before the store may use it: the clocks' offset is known by the first write.
    connection.addCheck(async (client, thorough) => {
      const [version, profile, now] = await readProfile(client);
      this.#clockRead(now);
      // Writes what is there, if nobody wrote in between: the profile and its version unchanged.
      if (thorough) await client.compareAndSetProfile(KEY, version, version, profile, this.#deadline());
    });
  }

  #clockRead(now: string): void {
    this.#clockOffsetUs = Number(now) - nowUs();
  }

  /** Half the timeout from now, on Redis's clock, in microseconds. */
  #deadline(): string {
    return String(Math.floor(nowUs() + this.#clockOffsetUs + this.#connection.timeoutMs * 500));
  }

  async get(): Promise<ProfileSnapshot> {
    const [version, profile, now] = await this.#connection.run(readProfile);
    this.#clockRead(now);
    return snapshot(JSON.parse(profile) as Profile, Number(version));
  }

  async compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null> {
    const stored = snapshot(next, expectedVersion + 1);
    const json = JSON.stringify(stored.profile);
    const done = this.#connection.replicatedWrites
      ? await this.#connection.runReplicated<-1 | 0 | 1>(
          (pipeline) =>
            pipeline.compareAndSetProfile(KEY, String(expectedVersion), String(stored.version), json, this.#deadline()),
          (answer) => answer === 1,
        )
      : await this.#connection.runScript<-1 | 0 | 1>('compareAndSetProfile', KEY, [
          String(expectedVersion),
          String(stored.version),
          json,
          this.#deadline(),
        ]);
    if (done === -1) {
      throw new StoreUnavailableError(
        `Redis ran the profile write after its deadline (half of REDIS_TIMEOUT_MS, ${this.#connection.timeoutMs} ms): not applied.`,
      );
    }
    return done === 1 ? stored : null;
  }
}
