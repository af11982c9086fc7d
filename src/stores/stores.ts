import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/index.js';
import { ALWAYS_AVAILABLE, type StoreHealth } from './availability.js';
import { MemoryProfileStore } from './memory-profile.js';
import { MemoryRateLimitStore } from './memory-rate-limit.js';
import type { ProfileStore } from './profile.js';
import type { RateLimitStore } from './rate-limit.js';

/** Where the state is kept: this process's memory, or Redis. */
export type StoreKind = 'memory' | 'redis';

/** Where the service keeps its state, and whether it can reach it. */
export interface Stores {
  kind: StoreKind;
  profile: ProfileStore;
  rateLimit: RateLimitStore;
  health: StoreHealth;
  /** Lets go of what the stores hold open; called once, after the last request. */
  close(): Promise<void>;
}

/**
 * The one place that chooses: Redis when `REDIS_URL`, `REDIS_SENTINELS` or `REDIS_CLUSTER_NODES`
 * is set, this process's memory otherwise. The Redis client and stores are loaded only then.
 */
export async function createStores(config: Config, log: FastifyBaseLogger): Promise<Stores> {
  if (config.redisUrl === null && config.redisSentinels === null && config.redisClusterNodes === null) {
    return {
      kind: 'memory',
      profile: new MemoryProfileStore(),
      rateLimit: new MemoryRateLimitStore(),
      health: ALWAYS_AVAILABLE,
      close: async () => {},
    };
  }
  const [{ RedisConnection }, { RedisProfileStore }, { RedisRateLimitStore }] = await Promise.all([
    import('./redis-connection.js'),
    import('./redis-profile.js'),
    import('./redis-rate-limit.js'),
  ]);
  const connection = new RedisConnection({ settings: config, minReplicasAck: config.redisMinReplicasAck, log });
  return {
    kind: 'redis',
    profile: new RedisProfileStore(connection),
    rateLimit: new RedisRateLimitStore(connection),
    health: connection,
    close: () => connection.close(),
  };
}
