import { type ConnectionOptions, createSecureContext } from 'node:tls';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { readSecretFile, readText } from '../config/files.js';
import { type Config, ConfigError } from '../config/index.js';
import { redisTlsOn } from '../config/redis.js';
import { opensslReason } from '../lib/openssl-reason.js';
import { ReplyTooLargeError } from './redis-reasons.js';

/** The settings the Redis client is built from. */
export type RedisSettings = Pick<
  Config,
  | 'redisUrl'
  | 'redisSentinels'
  | 'redisSentinelName'
  | 'redisClusterNodes'
  | 'redisUsername'
  | 'redisPasswordFile'
  | 'redisTls'
  | 'redisTlsCaFile'
  | 'redisTlsCertFile'
  | 'redisTlsKeyFile'
  | 'redisTlsServername'
  | 'redisSentinelUsername'
  | 'redisSentinelPasswordFile'
  | 'redisKeyPrefix'
  | 'redisTimeoutMs'
>;

/** One node, a primary that Sentinel names, or a Cluster: the stores use each the same way. */
export type RedisClient = Redis | Cluster;

/**
 * The shortest time connecting may take. Requests do not wait for it (they fail at once while
 * disconnected), and a short one would make a busy start, its event loop blocked for a moment,
 * look like an outage.
 */
const MIN_CONNECT_TIMEOUT_MS = 2000;

export interface RedisClientHooks {
  /** The pause before the next attempt to connect, by attempt (from 1); the passwords are read again first. */
  retryDelay(attempt: number): number;
  /** Each password the client is given, at start and when a file gives a new one: never to be logged. */
  onPassword(password: string): void;
}

/**
 * A password file's content now; if it cannot be read at the moment (a secret being replaced),
 * the one read last, so that the next attempt tries again.
 */
function passwordReader(path: string | null, onPassword: (password: string) => void): () => string | undefined {
  if (path === null) return () => undefined;
  let last = readSecretFile(path);
  onPassword(last);
  return () => {
    try {
      const current = readSecretFile(path);
      if (current !== last) onPassword(current);
      last = current;
    } catch {
      // Kept: the next reconnection reads the file again.
    }
    return last;
  };
}

/**
 * Builds `options` into a TLS context as each connection will: what OpenSSL refuses (a client key
 * too short, `ee key too small`) is a ConfigError naming `settings`, not a failure of every
 * connection to come.
 */
function checkedByOpenssl(options: ConnectionOptions, settings: string): void {
  try {
    createSecureContext(options);
  } catch (error) {
    throw new ConfigError(`invalid ${settings}: OpenSSL refuses it (${opensslReason(error)})`);
  }
}

/** The TLS options of every connection (Redis, sentinels, cluster nodes), the files read and checked once at start. */
function tlsOptions(settings: RedisSettings): ConnectionOptions | undefined {
  if (!redisTlsOn(settings)) return undefined;
  const { redisTlsCaFile: ca, redisTlsCertFile: cert, redisTlsKeyFile: key, redisTlsServername: servername } = settings;
  const options: ConnectionOptions = { ...(servername !== null && { servername }) };
  if (ca !== null) {
    options.ca = readText(ca);
    checkedByOpenssl({ ca: options.ca }, `REDIS_TLS_CA_FILE ${JSON.stringify(ca)}`);
  }
  if (cert !== null && key !== null) {
    options.cert = readText(cert);
    options.key = readText(key);
    const named = `REDIS_TLS_CERT_FILE ${JSON.stringify(cert)} with REDIS_TLS_KEY_FILE ${JSON.stringify(key)}`;
    checkedByOpenssl({ cert: options.cert, key: options.key }, named);
  }
  return options;
}

/**
 * The most a reply may hold, in bytes: the largest the stores read (a profile) is a few KiB. A
 * Redis that sends more (or anything on the way to one) would be given memory without end, as
 * ioredis keeps a reply until it is whole.
 */
export const MAX_REPLY_BYTES = 1024 * 1024;

/**
 * Drops each connection of `redis` on which more than MAX_REPLY_BYTES came while no reply was
 * completed (the queue of commands sent did not shrink): destroyed, not ended, so that nothing
 * more is read from it; ioredis then reconnects.
 */
function boundReplies(redis: Redis): void {
  redis.on('connect', () => {
    const stream = redis.stream;
    let unreplied = 0;
    let waiting = redis.commandQueue.length;
    // After ioredis's own listener, which has parsed the chunk.
    stream.on('data', (chunk: Buffer) => {
      const now = redis.commandQueue.length;
      unreplied = now < waiting ? 0 : unreplied + chunk.length;
      waiting = now;
      if (unreplied > MAX_REPLY_BYTES) stream.destroy(new ReplyTooLargeError(MAX_REPLY_BYTES));
    });
  });
}

/** Drops every connection of `client` now (they are opened again): one whose command timed out may still be receiving its reply. */
export function dropConnections(client: RedisClient): void {
  const nodes = client instanceof Cluster ? client.nodes() : [client];
  for (const node of nodes) node.stream?.destroy();
}

/**
 * A TLS handshake that fails (a certificate for another name, say) can end in a second error, the
 * server's alert, after ioredis's one-time listeners are gone: unheard, it would end the process.
 * The first error has already told why the connection is lost; the second adds nothing.
 */
function hearEveryStreamError(redis: Redis): void {
  redis.on('error', () => {
    if (redis.stream.listenerCount('error') === 0) redis.stream.on('error', () => {});
  });
}

/**
 * The ioredis client the settings describe, failing fast: no queue while disconnected, no retry
 * of a command, and a command that gets no answer fails after REDIS_TIMEOUT_MS. It connects in
 * the background from here on and reconnects for ever, after `hooks.retryDelay`; each
 * reconnection uses the password files as they are then.
 */
export function createRedisClient(settings: RedisSettings, hooks: RedisClientHooks): RedisClient {
  const url = settings.redisUrl === null ? null : new URL(settings.redisUrl);
  const urlPassword = url === null ? '' : decodeURIComponent(url.password);
  if (urlPassword !== '') hooks.onPassword(urlPassword);
  const password =
    urlPassword === '' ? passwordReader(settings.redisPasswordFile, hooks.onPassword) : () => urlPassword;
  const username = (url !== null && decodeURIComponent(url.username)) || (settings.redisUsername ?? undefined);
  const tls = tlsOptions(settings);
  const perConnection = {
    connectTimeout: Math.max(settings.redisTimeoutMs, MIN_CONNECT_TIMEOUT_MS),
    commandTimeout: settings.redisTimeoutMs,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    // Its INFO, refused by an ACL without it, would print a warning outside the log on each
    // connection; RedisConnection checks the role itself, and a loading Redis answers LOADING.
    enableReadyCheck: false,
    username,
    password: password(),
    ...(tls !== undefined && { tls }),
  } satisfies RedisOptions;

  if (settings.redisClusterNodes !== null) {
    const redisOptions = { ...perConnection };
    const cluster: Cluster = new Cluster(
      settings.redisClusterNodes.map(({ host, port }) => ({ host, port })),
      {
        keyPrefix: settings.redisKeyPrefix,
        enableOfflineQueue: false,
        // A slot without a primary (its node lost, the cluster failing over) fails the command at
        // once instead of retrying it for up to REDIS_TIMEOUT_MS; the MOVED that a node answers
        // once a replica has taken over sends the next command there and refreshes the slots.
        retryDelayOnFailover: 0,
        retryDelayOnClusterDown: 0,
        // An instance with no traffic learns of a failover too, before its next request.
        slotsRefreshInterval: 1000,
        redisOptions,
        clusterRetryStrategy: (attempt) => {
          // The slot refresher connects with a copy of a node's options.
          const current = password();
          for (const node of cluster.nodes()) node.options.password = current;
          return hooks.retryDelay(attempt);
        },
      } satisfies ClusterOptions,
    );
    // Nodes come and go with the slots: each is created before it connects, and takes the
    // password as the file has it then.
    cluster.on('+node', (node: Redis) => {
      node.options.password = password();
      hearEveryStreamError(node);
      boundReplies(node);
    });
    return cluster;
  }

  const sentinelPassword = passwordReader(settings.redisSentinelPasswordFile, hooks.onPassword);
  const options = {
    ...perConnection,
    keyPrefix: settings.redisKeyPrefix,
    enableOfflineQueue: false,
    retryStrategy: (attempt: number) => {
      // ioredis reads these options again on each connection.
      client.options.password = password();
      client.options.sentinelPassword = sentinelPassword();
      return hooks.retryDelay(attempt);
    },
  } satisfies RedisOptions;
  const client: Redis =
    settings.redisSentinels === null
      ? new Redis({
          ...options,
          host: url?.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: url?.port ? Number(url.port) : 6379,
          db: Number(url?.pathname.slice(1) || '0'),
        })
      : new Redis({
          ...options,
          sentinels: settings.redisSentinels.map(({ host, port }) => ({ host, port })),
          name: settings.redisSentinelName ?? '',
          role: 'master',
          sentinelUsername: settings.redisSentinelUsername ?? undefined,
          sentinelPassword: sentinelPassword(),
          sentinelCommandTimeout: settings.redisTimeoutMs,
          ...(tls !== undefined && { enableTLSForSentinelMode: true, sentinelTLS: tls }),
          // Told by the sentinels of a new primary at once, rather than at the next failed command.
          failoverDetector: true,
          // A primary demoted to replica answers writes READONLY: ask the sentinels again.
          reconnectOnError: (error) => error.message.startsWith('READONLY'),
        });
  hearEveryStreamError(client);
  boundReplies(client);
  return client;
}
