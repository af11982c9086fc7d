import type { Result } from 'ioredis';
import type { RateLimitCount, RateLimitStore } from './rate-limit.js';
import type { RedisConnection } from './redis-connection.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    countRequest(key: string, windowMs: number): Result<[current: number, ttl: number], Context>;
  }
}

/**
 * Adds 1 to the key's count and answers the count and the milliseconds left in its window, in one
 * round trip. A key without an expiry is one INCR just created: its window starts now.
 */
const COUNT_REQUEST = `
local current = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {current, ttl}
`;

/** Clients are counted by address: this is none. */
const CHECK_KEY = 'rate-limit:readiness-check';

/**
 * Counters in Redis, shared by every instance using it, so a client is limited once however the
 * load balancer spreads its requests. Redis expires each window's key, which keeps memory bounded.
 */
export class RedisRateLimitStore implements RateLimitStore {
  readonly #connection: RedisConnection;

  constructor(connection: RedisConnection) {
    this.#connection = connection;
    connection.defineScript('countRequest', COUNT_REQUEST);
    // A count in a window of 1 ms, of a key no client has: it expires at once.
    connection.addCheck((client, thorough) => (thorough ? client.countRequest(CHECK_KEY, 1) : Promise.resolve()));
  }

  async incr(key: string, windowMs: number): Promise<RateLimitCount> {
    const [current, ttl] = await this.#connection.run(
      (client) => client.countRequest(`rate-limit:${key}`, windowMs),
      true,
    );
    // PTTL rounds down: a window in its last millisecond still has one to go.
    return { current, ttl: Math.max(ttl, 1) };
  }
}
