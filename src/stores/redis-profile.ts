import type { Result } from 'ioredis';
import { EMPTY_PROFILE, type Profile } from '../domain/profile.js';
import { type ProfileSnapshot, type ProfileStore, snapshot } from './profile.js';
import type { RedisClient } from './redis-client.js';
import type { RedisConnection } from './redis-connection.js';
import { isOutOfMemory } from './redis-reasons.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    readProfile(key: string, emptyProfile: string): Result<[version: string, profile: string], Context>;
    compareAndSetProfile(key: string, expected: string, next: string, profile: string): Result<0 | 1, Context>;
  }
}

/** The hash holding the profile: `version`, a decimal integer, and `profile`, its fields as JSON. */
const KEY = 'profile';

/**
 * Reads the profile, creating the empty one first if there is none (a new or flushed Redis).
 * Its first version is Redis's clock in microseconds, read in the same atomic step, so every
 * instance gets the same one, and a version handed out before a flush is never handed out again.
 * Versions travel as strings: Lua's numbers would print 16 digits in exponent notation.
 */
const READ_PROFILE = `
local stored = redis.call('HMGET', KEYS[1], 'version', 'profile')
if stored[1] then return stored end
local time = redis.call('TIME')
local version = time[1] .. string.format('%06d', tonumber(time[2]))
redis.call('HSET', KEYS[1], 'version', version, 'profile', ARGV[1])
return {version, ARGV[1]}
`;

/** The empty profile's fields, as stored. */
const EMPTY_JSON = JSON.stringify(EMPTY_PROFILE);

/**
 * The version of the empty profile while Redis is too full to store it: no stored profile has it
 * (theirs are Redis's clock), so it always names the empty profile.
 */
const UNSTORED_VERSION = '0';

/**
 * The profile's version and fields: a plain read, which Redis serves even when it is full and
 * refuses writes, and the script that creates the empty profile only if there is none. Too full
 * for that, the empty profile unstored.
 */
async function readProfile(client: RedisClient): Promise<[version: string, profile: string]> {
  const [version, profile] = await client.hmget(KEY, 'version', 'profile');
  if (version !== null && version !== undefined && profile !== null && profile !== undefined) return [version, profile];
  try {
    return await client.readProfile(KEY, EMPTY_JSON);
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
    return [UNSTORED_VERSION, EMPTY_JSON];
  }
}

/** Stores the next version only if the current one is still the expected one: 1 if stored, else 0. */
const COMPARE_AND_SET_PROFILE = `
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'profile', ARGV[3])
return 1
`;

/**
 * The profile in Redis, shared by every instance using it. Each call is one script, run by Redis
 * atomically, so a compare-and-set is as exclusive across instances as the memory store's is
 * within one, and a reader gets the version and the fields of one write.
 */
export class RedisProfileStore implements ProfileStore {
  readonly #connection: RedisConnection;

  constructor(connection: RedisConnection) {
    this.#connection = connection;
    connection.defineScript('readProfile', READ_PROFILE);
    connection.defineScript('compareAndSetProfile', COMPARE_AND_SET_PROFILE);
    connection.addCheck(async (client, thorough) => {
      const [version, profile] = await readProfile(client);
      // Writes what is there, if nobody wrote in between: the profile and its version unchanged.
      if (thorough) await client.compareAndSetProfile(KEY, version, version, profile);
    });
  }

  async get(): Promise<ProfileSnapshot> {
    const [version, profile] = await this.#connection.run(readProfile);
    return snapshot(JSON.parse(profile) as Profile, Number(version));
  }

  async compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null> {
    const stored = snapshot(next, expectedVersion + 1);
    const json = JSON.stringify(stored.profile);
    const args = [KEY, String(expectedVersion), String(stored.version), json] as const;
    const done = this.#connection.replicatedWrites
      ? await this.#connection.runReplicated<0 | 1>(
          (pipeline) => pipeline.compareAndSetProfile(...args),
          (answer) => answer === 1,
        )
      : await this.#connection.run((client) => client.compareAndSetProfile(...args), true);
    return done === 1 ? stored : null;
  }
}
