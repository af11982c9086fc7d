import type { Result } from 'ioredis';
import { EMPTY_PROFILE, type Profile } from '../domain/profile.js';
import { type ProfileSnapshot, type ProfileStore, snapshot } from './profile.js';
import type { RedisConnection } from './redis-connection.js';

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
      const [version, profile] = await client.readProfile(KEY, JSON.stringify(EMPTY_PROFILE));
      // Writes what is there, if nobody wrote in between: the profile and its version unchanged.
      if (thorough) await client.compareAndSetProfile(KEY, version, version, profile);
    });
  }

  async get(): Promise<ProfileSnapshot> {
    const [version, profile] = await this.#connection.run((client) =>
      client.readProfile(KEY, JSON.stringify(EMPTY_PROFILE)),
    );
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
