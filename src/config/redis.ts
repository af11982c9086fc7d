import { isIP } from 'node:net';
import { shown } from '../lib/shown.js';
import { certificateFile, keyPairError, privateKeyFile, readSecretFile } from './files.js';
import { boolean, integer } from './parsers.js';
import { ConfigError, concern, type Given, type Parse, type SettingValues, setting } from './setting.js';

/** Redis reads a database number as a signed 32-bit integer. */
const MAX_REDIS_DATABASE = 2 ** 31 - 1;

/** RFC 3986's userinfo: unreserved and sub-delimiter characters, `:`, and percent-escapes of UTF-8. */
const USERINFO = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*$/;

/**
 * The user name and password as written, between `//` and the host's `@`: the URL parser would
 * quietly encode a stray `@`, space or `ä`, where ioredis and other clients read the text otherwise.
 */
function isPercentEncodedUserinfo(raw: string): boolean {
  const authority = raw.slice(raw.indexOf('//') + 2).split(/[/?#]/, 1)[0] ?? '';
  const at = authority.lastIndexOf('@');
  if (at === -1) return true;
  const userinfo = authority.slice(0, at);
  if (!USERINFO.test(userinfo)) return false;
  try {
    decodeURIComponent(userinfo);
    return true;
  } catch {
    return false;
  }
}

/**
 * `redis://[user:password@]host[:port][/database]`, or `rediss://` for TLS, vetted so that
 * ioredis, which reads the URL again, never meets a part it cannot use: it would throw on a bad
 * percent-escape, send a database that is not a number as `SELECT NaN` and crash on the error,
 * and take each parameter of a query string as one of its options.
 */
function redisUrl(raw: string): string {
  // The scheme in lower case: ioredis turns TLS on for `rediss://` only as written so.
  const url = /^rediss?:\/\//.test(raw) && URL.canParse(raw) ? new URL(raw) : null;
  if (url === null || url.hostname === '') {
    throw new Error('must be a URL such as redis://host:6379 or rediss://user:password@host:6380/0');
  }
  if (!isPercentEncodedUserinfo(raw)) {
    throw new Error(
      "its user name and password must be percent-encoded: any character but letters, digits and -._~!$&'()*+,;= as %XX (%40 for @, %25 for %, %20 for a space)",
    );
  }
  if (url.port === '0') throw new Error('its port must be from 1 to 65535');
  if (url.search !== '' || url.hash !== '') {
    throw new Error('must have no query string or fragment (a ? or # in the password is written %3F or %23)');
  }
  const database = url.pathname.replace(/^\//, '');
  if (database !== '') {
    try {
      integer(0, MAX_REDIS_DATABASE)(database);
    } catch (error) {
      throw new Error(`its database, the path, ${(error as Error).message}`);
    }
  }
  return raw;
}

/** A Redis node or sentinel: a host name or address, and a port. */
export interface RedisAddress {
  host: string;
  port: number;
}

/** `host:port,host:port`, an IPv6 address in brackets (`[fd00::1]:6379`). */
function addressList(example: string): Parse<readonly RedisAddress[]> {
  return (raw) =>
    raw.split(',').map((entry) => {
      const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9][A-Za-z0-9.-]*)):(\d{1,5})$/.exec(entry.trim());
      const port = Number(match?.[3]);
      if (match === null || (match[1] !== undefined && isIP(match[1]) !== 6) || port < 1 || port > 65535) {
        throw new Error(`must be a comma-separated list of host:port such as ${example}`);
      }
      return { host: match[1] ?? match[2] ?? '', port };
    });
}

/** A Redis user or primary name as Redis takes it: printable, no spaces. */
function redisName(raw: string): string {
  if (!/^[\x21-\x7e]{1,128}$/.test(raw)) throw new Error('must be 1 to 128 printable ASCII characters, no spaces');
  return raw;
}

/** A name to check in the server's certificate and send as SNI: a DNS name, never an address. */
function serverName(raw: string): string {
  if (
    isIP(raw) !== 0 ||
    !/^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(raw)
  ) {
    throw new Error(
      "must be a DNS name such as redis.internal, as in the server's certificate (an address is checked as it is reached)",
    );
  }
  return raw;
}

const settings = {
  /** Shared by every instance; null keeps the profile and the counters in this process's memory. */
  redisUrl: setting<string | null>({
    env: 'REDIS_URL',
    // A secret: the URL may carry a password.
    secret: true,
    help: 'redis://[user:password@]host[:port][/database], or rediss:// for TLS, the user and password percent-encoded: the profile and rate-limit counters live there, shared by every instance; unset (and no REDIS_SENTINELS or REDIS_CLUSTER_NODES): in memory',
    default: null,
    parse: redisUrl,
  }),
  redisSentinels: setting<readonly RedisAddress[] | null>({
    env: 'REDIS_SENTINELS',
    help: 'instead of REDIS_URL: the Redis Sentinels to ask for the primary, a comma-separated list of host:port such as 10.0.0.1:26379,10.0.0.2:26379, with REDIS_SENTINEL_NAME',
    default: null,
    parse: addressList('10.0.0.1:26379,10.0.0.2:26379'),
  }),
  redisSentinelName: setting<string | null>({
    env: 'REDIS_SENTINEL_NAME',
    help: 'the name under which the sentinels of REDIS_SENTINELS monitor the primary (mymaster in their examples)',
    default: null,
    parse: redisName,
  }),
  redisClusterNodes: setting<readonly RedisAddress[] | null>({
    env: 'REDIS_CLUSTER_NODES',
    help: 'instead of REDIS_URL: some nodes of a Redis Cluster to learn the others from, a comma-separated list of host:port such as 10.0.0.1:6379,10.0.0.2:6379',
    default: null,
    parse: addressList('10.0.0.1:6379,10.0.0.2:6379'),
  }),
  redisUsername: setting<string | null>({
    env: 'REDIS_USERNAME',
    help: 'the Redis ACL user, with REDIS_PASSWORD_FILE (or the user in REDIS_URL)',
    default: null,
    defaultText: 'the default user',
    parse: redisName,
  }),
  redisPasswordFile: setting<string | null>({
    env: 'REDIS_PASSWORD_FILE',
    help: 'a file holding the Redis password (one trailing newline ignored), read at start and again at each reconnection, so a rotated password is picked up; instead of a password in REDIS_URL',
    default: null,
    parse: (raw) => {
      readSecretFile(raw);
      return raw;
    },
  }),
  /** Null: as the URL says (on with rediss://), else off. */
  redisTls: setting<boolean | null>({
    env: 'REDIS_TLS',
    help: 'true, false, 1 or 0, in any case: TLS to Redis (and to the sentinels); rediss:// turns it on too',
    default: null,
    defaultText: 'true with rediss://, else false',
    parse: boolean,
  }),
  redisTlsCaFile: setting<string | null>({
    env: 'REDIS_TLS_CA_FILE',
    help: "a PEM file of the CA certificates to trust for Redis instead of the system's (a private CA)",
    default: null,
    defaultText: "unset: the system's",
    parse: certificateFile,
  }),
  redisTlsCertFile: setting<string | null>({
    env: 'REDIS_TLS_CERT_FILE',
    help: 'a PEM file of the client certificate the service shows Redis (mutual TLS), with REDIS_TLS_KEY_FILE',
    default: null,
    parse: certificateFile,
  }),
  redisTlsKeyFile: setting<string | null>({
    env: 'REDIS_TLS_KEY_FILE',
    help: 'a PEM file of the unencrypted private key of REDIS_TLS_CERT_FILE',
    default: null,
    parse: privateKeyFile,
  }),
  redisTlsServername: setting<string | null>({
    env: 'REDIS_TLS_SERVERNAME',
    help: 'the DNS name to check in the certificates of Redis and of its sentinels alike, and send as SNI, when they are reached by address or through a proxy',
    default: null,
    defaultText: 'the host reached',
    parse: serverName,
  }),
  redisSentinelUsername: setting<string | null>({
    env: 'REDIS_SENTINEL_USERNAME',
    help: "the sentinels' ACL user, with REDIS_SENTINEL_PASSWORD_FILE",
    default: null,
    parse: redisName,
  }),
  redisSentinelPasswordFile: setting<string | null>({
    env: 'REDIS_SENTINEL_PASSWORD_FILE',
    help: "a file holding the sentinels' password, read like REDIS_PASSWORD_FILE",
    default: null,
    parse: (raw) => {
      readSecretFile(raw);
      return raw;
    },
  }),
  redisKeyPrefix: setting({
    env: 'REDIS_KEY_PREFIX',
    help: 'what every key of the service starts with, 1 to 64 printable ASCII characters, no spaces (and no { or } with REDIS_CLUSTER_NODES)',
    default: 'greeting-service:',
    parse: (raw) => {
      if (!/^[\x21-\x7e]{1,64}$/.test(raw)) throw new Error('must be 1 to 64 printable ASCII characters, no spaces');
      return raw;
    },
  }),
  redisMinReplicasAck: setting({
    env: 'REDIS_MIN_REPLICAS_ACK',
    help: "how many replicas must have a profile write before it is answered, 0 to 16 (WAIT, within REDIS_TIMEOUT_MS; fewer: 503); for no acknowledged write lost in a failover, the number of replicas, with Redis's min-replicas-to-write alike",
    default: 0,
    parse: integer(0, 16),
  }),
  /** Connecting to Redis included. */
  redisTimeoutMs: setting({
    env: 'REDIS_TIMEOUT_MS',
    help: 'how long one Redis command may take before it fails, in ms, 1 to 60000',
    // A Redis on the same network answers in about a millisecond; half a second is a Redis in trouble.
    default: 500,
    parse: integer(1, 60_000),
  }),
};

type RedisConfig = SettingValues<typeof settings>;

/** Settings that only mean something with Redis, and those only with Sentinel. */
const REDIS_ONLY = [
  'redisUsername',
  'redisPasswordFile',
  'redisTls',
  'redisTlsCaFile',
  'redisTlsCertFile',
  'redisTlsKeyFile',
  'redisTlsServername',
  'redisKeyPrefix',
  'redisMinReplicasAck',
] as const;
const SENTINEL_ONLY = ['redisSentinelUsername', 'redisSentinelPasswordFile'] as const;
const TLS_ONLY = ['redisTlsCaFile', 'redisTlsCertFile', 'redisTlsKeyFile', 'redisTlsServername'] as const;

/** Whether Redis is reached over TLS: REDIS_TLS if given, else as the URL's scheme says. */
export function redisTlsOn(config: Pick<RedisConfig, 'redisTls' | 'redisUrl'>): boolean {
  return config.redisTls ?? config.redisUrl?.startsWith('rediss://') ?? false;
}

/**
 * The rules between the Redis settings, each broken one a ConfigError naming it: one topology,
 * settings that take effect (no TLS file with TLS off, no sentinel credentials without
 * sentinels), pairs given together, credentials in one place, and a key that fits its certificate.
 */
function checkRedisSettings(config: RedisConfig, given: Given<typeof settings>): void {
  const invalid = (key: keyof RedisConfig, message: string, value?: string) =>
    new ConfigError(`invalid ${settings[key].env}${value === undefined ? '' : ` ${shown(value)}`}: ${message}`);
  const topologies = (['redisUrl', 'redisSentinels', 'redisClusterNodes'] as const).filter((key) => given.has(key));
  if (topologies.length > 1) {
    const [first, second] = topologies.map((key) => settings[key].env);
    throw new ConfigError(
      `${first} and ${second} are both set: Redis is one of REDIS_URL, REDIS_SENTINELS (with REDIS_SENTINEL_NAME) or REDIS_CLUSTER_NODES`,
    );
  }
  if (given.has('redisSentinels') !== given.has('redisSentinelName')) {
    throw given.has('redisSentinels')
      ? invalid('redisSentinels', 'needs REDIS_SENTINEL_NAME, the name under which the sentinels monitor the primary')
      : invalid('redisSentinelName', 'needs REDIS_SENTINELS, the sentinels that monitor it');
  }
  const redis = topologies.length === 1;
  for (const key of REDIS_ONLY) {
    if (!redis && given.has(key)) {
      throw invalid(key, 'no Redis is set to apply it to (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES)');
    }
  }
  for (const key of SENTINEL_ONLY) {
    if (!given.has('redisSentinels') && given.has(key)) {
      throw invalid(key, 'applies to the sentinels, and REDIS_SENTINELS is not set');
    }
  }
  const url = config.redisUrl === null ? null : new URL(config.redisUrl);
  if (url !== null && url.password !== '' && config.redisPasswordFile !== null) {
    throw invalid('redisPasswordFile', 'REDIS_URL has a password too: give it in one place');
  }
  if (url !== null && url.username !== '' && config.redisUsername !== null) {
    throw invalid('redisUsername', 'REDIS_URL has a user name too: give it in one place');
  }
  if (config.redisUsername !== null && config.redisPasswordFile === null) {
    throw invalid('redisUsername', 'needs REDIS_PASSWORD_FILE, the password of the user');
  }
  if (config.redisSentinelUsername !== null && config.redisSentinelPasswordFile === null) {
    throw invalid('redisSentinelUsername', 'needs REDIS_SENTINEL_PASSWORD_FILE, the password of the user');
  }
  if (url !== null && config.redisTls !== null && config.redisTls !== (url.protocol === 'rediss:')) {
    throw invalid(
      'redisTls',
      config.redisTls ? 'REDIS_URL is redis://, without TLS: write rediss://' : 'REDIS_URL is rediss://, with TLS',
      String(config.redisTls),
    );
  }
  if (!redisTlsOn(config)) {
    for (const key of TLS_ONLY) {
      if (given.has(key)) throw invalid(key, 'TLS is off: turn it on with rediss:// or REDIS_TLS=true');
    }
  }
  const keyPair = keyPairError(
    settings.redisTlsCertFile.env,
    settings.redisTlsKeyFile.env,
    config.redisTlsCertFile,
    config.redisTlsKeyFile,
  );
  if (keyPair !== null) throw keyPair;
  if (config.redisClusterNodes !== null && /[{}]/.test(config.redisKeyPrefix)) {
    throw invalid(
      'redisKeyPrefix',
      'must have no { or } with REDIS_CLUSTER_NODES: a brace makes a hash tag, which would put every key in one slot',
      config.redisKeyPrefix,
    );
  }
}

/** Where the profile and the rate-limit counters are shared: Redis, one node, Sentinel or Cluster, and how it is reached. */
export const REDIS = concern({ settings, check: checkRedisSettings });
