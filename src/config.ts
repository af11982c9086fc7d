import { createPrivateKey, type KeyObject, randomBytes, X509Certificate } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { isIP } from 'node:net';
import { type ParseArgsConfig, parseArgs } from 'node:util';

/** A configuration value that cannot be used; its message is the one line printed before exit 1. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const MIN_SECRET_LENGTH = 32;

type Parse<T> = (raw: string) => T;

function integer(min: number, max: number): Parse<number> {
  return (raw) => {
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || value < min || value > max) {
      throw new Error(`must be an integer from ${min} to ${max}`);
    }
    return value;
  };
}

const BOOLEANS = new Map([
  ['true', true],
  ['1', true],
  ['false', false],
  ['0', false],
]);

function boolean(raw: string): boolean {
  const value = BOOLEANS.get(raw.toLowerCase());
  if (value === undefined) throw new Error('must be true, false, 1 or 0');
  return value;
}

/** An origin as browsers send it in `Origin`: scheme, host and port if not the default, nothing else. */
function isOrigin(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === text;
  } catch {
    return false;
  }
}

/** Which proxies are believed about the client's address: every hop, none, the nearest N, or those at these addresses. */
export type TrustProxy = boolean | number | readonly string[];

/** The names proxy-addr gives to ranges of addresses. */
const ADDRESS_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** An IP address, a CIDR range (`10.0.0.0/8`, `fd00::/8`) or a named range, as Fastify's trustProxy takes it. */
function isTrustedAddress(text: string): boolean {
  if (ADDRESS_RANGES.has(text)) return true;
  const [address = '', prefix, ...rest] = text.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/**
 * `true` (every hop: the leftmost X-Forwarded-For entry), `false` or `0` (none: the connection's
 * address), a number of hops N (the Nth entry from the right), or a comma-separated list of the
 * proxies' addresses and ranges, each checked here so that a typo is a configuration error.
 */
function trustProxy(raw: string): TrustProxy {
  const value = BOOLEANS.get(raw.toLowerCase());
  if (value !== undefined && raw !== '1') return value;
  if (/^\d+$/.test(raw)) return integer(0, 2 ** 31 - 1)(raw) || false;
  const entries = raw.split(',').map((entry) => entry.trim());
  if (!entries.every(isTrustedAddress)) {
    throw new Error(
      'must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    );
  }
  return entries;
}

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

/** The largest file a setting may name: a certificate chain or a CA bundle is a few hundred KB. */
const MAX_FILE_BYTES = 1024 * 1024;

/** A file that is neither regular nor a directory, for the error that refuses it. */
function kindOf(stat: Stats): string {
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  return 'a device';
}

/** Opened without waiting: a FIFO's open would wait for a writer. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/**
 * Throws unless an open file is a regular one of at most 1 MiB, whose read never waits on another
 * process: checked on the descriptor, not the path, which could be replaced between check and read.
 */
function checkReadable(stat: Stats): void {
  if (stat.isDirectory()) throw Object.assign(new Error('a directory'), { code: 'EISDIR' });
  if (!stat.isFile()) throw new Error(`is not a regular file but ${kindOf(stat)}`);
  if (stat.size > MAX_FILE_BYTES) throw new Error(`is larger than ${MAX_FILE_BYTES / 1024 / 1024} MiB`);
}

/** The one-line Error of a file that cannot be read. */
function unreadable(error: unknown): Error {
  const { code } = error as NodeJS.ErrnoException;
  return code === undefined ? (error as Error) : new Error(`cannot be read (${code})`);
}

/** A setting's file's text (see checkReadable), or an Error saying in one line why it cannot be read. */
export function readText(path: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, READ_FLAGS);
    checkReadable(fstatSync(fd));
    return readFileSync(fd, 'utf8');
  } catch (error) {
    throw unreadable(error);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** `readText` off the event loop: for the files read again while the service runs. */
export async function readTextAsync(path: string): Promise<string> {
  let file: FileHandle | undefined;
  try {
    file = await open(path, READ_FLAGS);
    checkReadable(await file.stat());
    return await file.readFile('utf8');
  } catch (error) {
    throw unreadable(error);
  } finally {
    await file?.close();
  }
}

/**
 * A secret in a file, as container secrets give it (a password, a token): its content with one
 * trailing newline stripped. Read at start, and again by its user when it may have been rotated.
 */
export function readSecretFile(path: string): string {
  const secret = readText(path).replace(/\r?\n$/, '');
  if (secret === '') throw new Error('is empty');
  return secret;
}

/** RFC 6750's b64token: what a bearer token may be made of, so that it can be sent in Authorization. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const MIN_TOKEN_LENGTH = 16;

/** The operator's bearer token in its file (see readSecretFile), checked to be one a client can send. */
export function readAdminToken(path: string): string {
  const token = readSecretFile(path);
  if (!B64TOKEN.test(token) || token.length < MIN_TOKEN_LENGTH) {
    throw new Error(
      `must hold a bearer token of at least ${MIN_TOKEN_LENGTH} characters: letters, digits and -._~+/, then = padding (openssl rand -base64 32 makes one)`,
    );
  }
  return token;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** The certificates of a PEM text, the first one first: none is an Error. */
function certificatesOf(text: string): X509Certificate[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  try {
    if (blocks.length === 0) throw new Error('no certificate');
    return blocks.map((block) => new X509Certificate(block));
  } catch {
    throw new Error('is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)');
  }
}

function pemCertificates(path: string): X509Certificate[] {
  return certificatesOf(readText(path));
}

function certificateFile(path: string): string {
  pemCertificates(path);
  return path;
}

function privateKeyFile(path: string): string {
  privateKey(path);
  return path;
}

/** The private key of a PEM text; an encrypted or unreadable one is an Error. */
function privateKeyOf(text: string): KeyObject {
  try {
    return createPrivateKey(text);
  } catch {
    throw new Error(
      /ENCRYPTED/.test(text)
        ? 'is an encrypted key: the service takes it unencrypted'
        : 'is not a PEM private key (-----BEGIN PRIVATE KEY-----)',
    );
  }
}

function privateKey(path: string): KeyObject {
  return privateKeyOf(readText(path));
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

/** The exporters OTEL_TRACES_EXPORTER may name: OTLP over HTTP, or none. */
export type TracesExporter = 'otlp' | 'none';
const TRACES_EXPORTERS: readonly TracesExporter[] = ['otlp', 'none'];

export type OtlpProtocol = 'http/protobuf' | 'http/json';
const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

/** OpenTelemetry's standard samplers, but those that need a remote service (jaeger_remote, xray). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** A decimal number from 0 to 1, as OpenTelemetry writes sampling ratios: `0.25`, `.5`, `1`. */
function fraction(raw: string): number {
  if (!/^(?:0|1)?(?:\.\d+)?$/.test(raw) || raw === '' || raw === '.' || Number(raw) > 1) {
    throw new Error('must be a decimal number from 0 to 1, such as 0.25');
  }
  return Number(raw);
}

/** The longest delay a fault injects, by setting or by header, in ms. */
export const MAX_FAULT_DELAY_MS = 60_000;

/** How long an injected delay lasts: `min` ms, or a uniform draw from `min` to `max`. */
export interface DelayRange {
  min: number;
  max: number;
}

/** `N` or `MIN-MAX`, milliseconds up to MAX_FAULT_DELAY_MS. */
function delayRange(raw: string): DelayRange {
  const match = /^(\d{1,9})(?:-(\d{1,9}))?$/.exec(raw);
  const min = Number(match?.[1]);
  const max = match?.[2] === undefined ? min : Number(match[2]);
  if (match === null || max > MAX_FAULT_DELAY_MS || min > max) {
    throw new Error(
      `must be milliseconds such as 500, or a range such as 100-2000 (the smaller first), 0 to ${MAX_FAULT_DELAY_MS}`,
    );
  }
  return { min, max };
}

function oneOf<T extends string>(values: readonly T[], unsupported = ''): Parse<T> {
  return (raw) => {
    const value = values.find((v) => v === raw);
    if (value === undefined) throw new Error(`must be one of ${values.join(', ')}${unsupported}`);
    return value;
  };
}

/** An OTLP/HTTP endpoint: an http or https URL, as the exporter posts to it. */
function httpUrl(raw: string): string {
  if (!/^https?:\/\//.test(raw) || !URL.canParse(raw) || new URL(raw).hostname === '') {
    throw new Error('must be an http:// or https:// URL such as http://collector:4318');
  }
  return raw;
}

/** An HTTP token: what a header's name is made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * OpenTelemetry's `key=value,key=value` lists (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS),
 * the values percent-decoded, each key checked by `isKey`.
 */
function keyValueList(isKey: (key: string) => boolean, example: string): Parse<readonly (readonly [string, string])[]> {
  return (raw) => {
    const shape = `must be a comma-separated list of key=value such as ${example}, the values percent-encoded`;
    return raw.split(',').map((member) => {
      const equals = member.indexOf('=');
      const key = member.slice(0, equals).trim();
      if (equals === -1 || !isKey(key)) throw new Error(shape);
      let value: string;
      try {
        value = decodeURIComponent(member.slice(equals + 1).trim());
      } catch {
        throw new Error(shape);
      }
      // A header's value may not break its line; an attribute's text should not either.
      if (/[\0\r\n]/.test(value)) throw new Error(`${shape}, with no line breaks or NUL`);
      return [key, value] as const;
    });
  };
}

/**
 * One setting: where it comes from (its environment variable, and its command-line flag if it has
 * one), what `--help` says of it, its default and how its text is read (throwing an Error whose
 * message says what the value must be). A secret's value is never repeated in an error message,
 * and its default is not shown.
 */
interface Setting<T> {
  env: string;
  flag?: string;
  secret?: true;
  help: string;
  default: T;
  /** The default in words, where its value would not say it (unset, or one that depends on another setting). */
  defaultText?: string;
  parse: (raw: string) => T;
}

function setting<T>(definition: Setting<T>): Setting<T> {
  return definition;
}

/** Every setting the service reads, parsed and validated once at start-up: the one list to add one to. */
export const SETTINGS = {
  port: setting({
    env: 'PORT',
    flag: 'port',
    help: 'TCP port, 0 to 65535 (0 picks a free one)',
    default: 8080,
    parse: integer(0, 65535),
  }),
  host: setting({
    env: 'HOST',
    flag: 'host',
    help: 'interface to listen on: an IP address, or a host name that resolves to one',
    default: '0.0.0.0',
    parse: (raw) => {
      if (/\s/.test(raw)) throw new Error('must be a host name or IP address');
      return raw;
    },
  }),
  /** `/` or a path without a trailing slash, e.g. `/svc`; every route lives under it. */
  contextPath: setting({
    env: 'CONTEXT_PATH',
    help: '/ or a path without * or : such as /svc, the prefix of every route: /svc serves /svc/api/hello, /svc/healthz, ...',
    default: '/',
    parse: (raw) => {
      // Path segments of RFC 3986 characters but for * and :, which Fastify reads as a wildcard and
      // a parameter; "/svc/" is read as "/svc".
      if (!/^\/(?:[A-Za-z0-9._~!$&'()+,;=@-]+\/?)*$/.test(raw) || raw.includes('//')) {
        throw new Error('must be "/" or a path such as "/svc"');
      }
      return raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
    },
  }),
  logLevel: setting<LogLevel>({
    env: 'LOG_LEVEL',
    help: LOG_LEVELS.join(', '),
    default: 'info',
    parse: (raw) => {
      const level = LOG_LEVELS.find((l) => l === raw);
      if (level === undefined) throw new Error(`must be one of ${LOG_LEVELS.join(', ')}`);
      return level;
    },
  }),
  bodyLimit: setting({
    env: 'BODY_LIMIT',
    help: 'largest request body, in bytes, 1 to 2147483647',
    default: 1024 * 1024,
    parse: integer(1, 2 ** 31 - 1),
  }),
  shutdownTimeoutMs: setting({
    env: 'SHUTDOWN_TIMEOUT_MS',
    help: 'how long in-flight requests may take to finish after SIGTERM/SIGINT, in ms, 0 to 2147483647',
    default: 10_000,
    parse: integer(0, 2 ** 31 - 1),
  }),
  /** Key of the HMAC that signs pagination cursors: instances that share it accept each other's cursors. */
  cursorSecret: setting({
    env: 'CURSOR_SECRET',
    secret: true,
    help: `key that signs pagination cursors, at least ${MIN_SECRET_LENGTH} characters; random per process if unset`,
    // A fresh key per process: cursors work with the instance that issued them, until it restarts.
    default: randomBytes(32).toString('base64url'),
    parse: (raw) => {
      if (raw.length < MIN_SECRET_LENGTH) throw new Error(`must be at least ${MIN_SECRET_LENGTH} characters`);
      return raw;
    },
  }),
  rateLimitMax: setting({
    env: 'RATE_LIMIT_MAX',
    help: 'requests a client may make to /api per window, 0 to 2147483647; 0 turns rate limiting off',
    default: 1000,
    parse: integer(0, 2 ** 31 - 1),
  }),
  /** From a client's first request in the window. */
  rateLimitWindowMs: setting({
    env: 'RATE_LIMIT_WINDOW_MS',
    help: "length of a client's rate-limit window, in ms, 1 to 2147483647",
    default: 60_000,
    parse: integer(1, 2 ** 31 - 1),
  }),
  /** Only behind a proxy that sets X-Forwarded-For; `1` is one hop, not `true`. */
  trustProxy: setting<TrustProxy>({
    env: 'TRUST_PROXY',
    help: "whose X-Forwarded-For to believe: false or 0 (nobody's), a number of proxies (1 behind one balancer), a comma-separated list of the proxies' IP addresses, CIDR ranges (10.0.0.0/8) and named ranges (loopback, linklocal, uniquelocal), or true (every hop); true and false in any case",
    default: false,
    parse: trustProxy,
  }),
  /** `*` for any origin, or exact origins (`https://app.example`); never with credentials. */
  corsOrigins: setting<'*' | readonly string[]>({
    env: 'CORS_ORIGINS',
    help: 'origins whose pages may call the API: * (any), or a comma-separated list of origins such as https://app.example',
    // A public API without credentials: any page may call it.
    default: '*',
    parse: (raw) => {
      if (raw.trim() === '*') return '*';
      const origins = raw.split(',').map((origin) => origin.trim());
      // Origins are compared exactly, as browsers send them: https://App.example would never match.
      if (!origins.every(isOrigin)) {
        throw new Error('must be * or a comma-separated list of origins such as https://app.example');
      }
      return origins;
    },
  }),
  headersTimeoutMs: setting({
    env: 'HEADERS_TIMEOUT_MS',
    help: "time a client has to send a request's headers, in ms, 1 to 2147483647",
    // A client on a poor network sends its headers in well under a second; 10 s leaves room for
    // one that struggles while not holding a connection for long.
    default: 10_000,
    defaultText: '10000, or REQUEST_TIMEOUT_MS if that is less',
    parse: integer(1, 2 ** 31 - 1),
  }),
  requestTimeoutMs: setting({
    env: 'REQUEST_TIMEOUT_MS',
    help: 'time a client has to send a whole request, in ms, 1 to 2147483647, at least HEADERS_TIMEOUT_MS when that is set',
    // Reads the default 1 MiB body at a mere 35 KB/s.
    default: 30_000,
    parse: integer(1, 2 ** 31 - 1),
  }),
  keepAliveTimeoutMs: setting({
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    help: "how long an idle kept-alive connection stays open, in ms, 1 to 2147483647; above the load balancer's idle timeout",
    // Longer than the 60 s idle timeout of common load balancers, so that the service never closes a
    // kept-alive connection just as the balancer sends a request on it (Fastify's own default).
    default: 72_000,
    parse: integer(1, 2 ** 31 - 1),
  }),
  http2: setting({
    env: 'HTTP2',
    help: 'true, false, 1 or 0, in any case: HTTP/2 beside HTTP/1.1 on the same port, with prior knowledge (h2c) in cleartext, or offered by ALPN (h2, http/1.1) with TLS_CERT_FILE',
    default: false,
    parse: boolean,
  }),
  /** With TLS_KEY_FILE, the port serves HTTPS only; both are read again on SIGHUP and when they change. */
  tlsCertFile: setting<string | null>({
    env: 'TLS_CERT_FILE',
    help: 'a PEM file of the server certificate, its chain after it, with TLS_KEY_FILE: the port serves HTTPS only, TLS 1.2 and 1.3; read again on SIGHUP and within seconds of a change',
    default: null,
    defaultText: 'unset: cleartext HTTP',
    parse: certificateFile,
  }),
  tlsKeyFile: setting<string | null>({
    env: 'TLS_KEY_FILE',
    help: 'a PEM file of the unencrypted private key of TLS_CERT_FILE',
    default: null,
    parse: privateKeyFile,
  }),
  metricsEnabled: setting({
    env: 'METRICS_ENABLED',
    help: 'true, false, 1 or 0, in any case; false or 0: no GET /metrics, and no request is counted',
    default: true,
    parse: boolean,
  }),
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
  /** OpenTelemetry's standard variable: true turns every part of tracing's export off. */
  otelSdkDisabled: setting({
    env: 'OTEL_SDK_DISABLED',
    help: 'true, false, 1 or 0, in any case; true: no spans are made or exported, whatever the other OTEL_ settings say (traceparent still reaches the log)',
    default: false,
    parse: boolean,
  }),
  /** Null: OTLP when an endpoint is set, else nothing, so that setting the endpoint is enough. */
  otelTracesExporter: setting<TracesExporter | null>({
    env: 'OTEL_TRACES_EXPORTER',
    help: 'otlp (spans sent to an OpenTelemetry collector over OTLP/HTTP) or none; unset: otlp when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else none',
    default: null,
    parse: oneOf(TRACES_EXPORTERS, ' (console, zipkin and jaeger are not supported)'),
  }),
  otelExporterOtlpEndpoint: setting<string | null>({
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    help: "the collector's OTLP/HTTP base URL, such as http://collector:4318: spans go to its /v1/traces; unset: http://localhost:4318",
    default: null,
    parse: httpUrl,
  }),
  otelExporterOtlpTracesEndpoint: setting<string | null>({
    env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    help: 'the full URL spans are posted to, such as http://collector:4318/v1/traces; wins over OTEL_EXPORTER_OTLP_ENDPOINT',
    default: null,
    parse: httpUrl,
  }),
  otelExporterOtlpProtocol: setting<OtlpProtocol>({
    env: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    help: 'http/protobuf or http/json, how spans are encoded',
    default: 'http/protobuf',
    parse: oneOf(OTLP_PROTOCOLS, ' (grpc is not supported)'),
  }),
  /** A secret: collectors of hosted services take their API key in a header. */
  otelExporterOtlpHeaders: setting<readonly (readonly [string, string])[]>({
    env: 'OTEL_EXPORTER_OTLP_HEADERS',
    secret: true,
    help: 'headers sent with every export, such as api-key=secret,x-tenant=a%20b: comma-separated name=value, the values percent-encoded',
    default: [],
    parse: keyValueList((key) => TOKEN.test(key), 'api-key=secret'),
  }),
  /** Null: `service.name` of OTEL_RESOURCE_ATTRIBUTES, else greeting-service. */
  otelServiceName: setting<string | null>({
    env: 'OTEL_SERVICE_NAME',
    help: "the spans' service.name; unset: the service.name of OTEL_RESOURCE_ATTRIBUTES, else greeting-service",
    default: null,
    parse: (raw) => raw,
  }),
  otelResourceAttributes: setting<readonly (readonly [string, string])[]>({
    env: 'OTEL_RESOURCE_ATTRIBUTES',
    help: "attributes of the spans' resource, such as deployment.environment.name=prod,service.namespace=shop: comma-separated key=value, the values percent-encoded",
    default: [],
    parse: keyValueList((key) => /^[^\s=,]+$/.test(key), 'deployment.environment.name=prod'),
  }),
  otelTracesSampler: setting<TraceSampler>({
    env: 'OTEL_TRACES_SAMPLER',
    help: `which requests are traced: ${TRACE_SAMPLERS.join(', ')}; parentbased_ ones follow the caller's traceparent when it sends one`,
    default: 'parentbased_always_on',
    parse: oneOf(TRACE_SAMPLERS, ' (jaeger_remote and xray are not supported)'),
  }),
  otelTracesSamplerArg: setting({
    env: 'OTEL_TRACES_SAMPLER_ARG',
    help: 'the share of traces that traceidratio and parentbased_traceidratio sample, a decimal from 0 to 1 such as 0.1',
    default: 1,
    parse: fraction,
  }),
  /** Fault injection: each FAULT_ setting at its default turns nothing on, and costs nothing. */
  faultErrorRate: setting({
    env: 'FAULT_ERROR_RATE',
    help: 'the share of requests to /api answered with an injected error (FAULT_ERROR_STATUS) instead of being served, a decimal from 0 to 1 such as 0.05',
    default: 0,
    parse: fraction,
  }),
  faultErrorStatus: setting({
    env: 'FAULT_ERROR_STATUS',
    help: "the status of the errors FAULT_ERROR_RATE injects, 400 to 599, answered with the contract's envelope (Retry-After: 1 on 503 and 429)",
    default: 503,
    parse: integer(400, 599),
  }),
  faultDelayRate: setting({
    env: 'FAULT_DELAY_RATE',
    help: 'the share of requests to /api held for FAULT_DELAY_MS before they are served, a decimal from 0 to 1 such as 0.1',
    default: 0,
    parse: fraction,
  }),
  faultDelayMs: setting<DelayRange>({
    env: 'FAULT_DELAY_MS',
    help: `how long FAULT_DELAY_RATE holds a request, in ms: N, or MIN-MAX for a uniform draw between the two, 0 to ${MAX_FAULT_DELAY_MS}`,
    default: { min: 1000, max: 1000 },
    defaultText: '1000',
    parse: delayRange,
  }),
  faultHeaders: setting({
    env: 'FAULT_HEADERS',
    help: "true, false, 1 or 0, in any case; true: a request to /api may ask for faults with Envoy's x-envoy-fault-* headers and with x-fault-connection (reset, empty, truncate, malformed)",
    default: false,
    parse: boolean,
  }),
  /** The operator's readiness switch; null: the routes do not exist. */
  adminTokenFile: setting<string | null>({
    env: 'ADMIN_TOKEN_FILE',
    help: 'a file holding the bearer token of POST /readyz/disable and POST /readyz/enable (one trailing newline ignored), read at start and again at each of those requests, so a rotated token is picked up; unset: no such routes',
    default: null,
    parse: (raw) => {
      readAdminToken(raw);
      return raw;
    },
  }),
};

type Settings = typeof SETTINGS;

/** Everything the service reads from its environment: one value per setting of SETTINGS. */
export type Config = { -readonly [K in keyof Settings]: Settings[K]['default'] };

export const DEFAULT_CONFIG: Readonly<Config> = Object.fromEntries(
  Object.entries(SETTINGS).map(([key, { default: value }]) => [key, value]),
) as unknown as Config;

/** What the command line asks for: help, the version, or a start with these flags' values. */
export interface CommandLine {
  help: boolean;
  version: boolean;
  /** The value of each setting's flag that was given, by flag name. */
  flags: Record<string, string | undefined>;
}

/** The flags of the settings, as node:util parseArgs takes them, and --help and --version. */
const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  ...Object.fromEntries(
    Object.values(SETTINGS).flatMap(({ flag }) => (flag === undefined ? [] : [[flag, { type: 'string' }]])),
  ),
} as const satisfies ParseArgsConfig['options'];

/** Reads the command line; an unknown flag, a flag without its value or a stray argument is a ConfigError. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  try {
    const { help, version, ...flags } = parseArgs({
      args: [...argv],
      options: OPTIONS,
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | boolean | undefined>;
    return { help: help === true, version: version === true, flags: flags as CommandLine['flags'] };
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

/** The most characters of a refused value that its error line repeats: a value of any length is one short line. */
const MAX_SHOWN_CHARACTERS = 100;

/** A refused value as its error line shows it: quoted, and past MAX_SHOWN_CHARACTERS cut, saying how long it was. */
function shown(value: string): string {
  if (value.length <= MAX_SHOWN_CHARACTERS) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, MAX_SHOWN_CHARACTERS))}… (${value.length} characters)`;
}

/** A setting as the user gave it: `--port` if it came from its flag, else `PORT`. */
function sourceName(key: keyof Config, flags: CommandLine['flags']): string {
  const { env, flag } = SETTINGS[key];
  return flag !== undefined && flags[flag] !== undefined ? `--${flag}` : env;
}

/**
 * Reads the configuration: a flag wins over its environment variable, which wins over the
 * default. An empty variable counts as unset. Throws ConfigError naming the first bad value, or
 * the headers timeout when it is longer than the request timeout. `--help` and `--version` are
 * accepted and left to the caller, which looks at `parseCommandLine` first.
 */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config {
  const { flags } = parseCommandLine(argv);

  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  const given = new Set<keyof Config>();
  for (const key of Object.keys(SETTINGS) as (keyof Config)[]) {
    const { env: name, flag, secret, parse } = SETTINGS[key];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const raw = fromFlag ?? (env[name] === '' ? undefined : env[name]);
    if (raw === undefined) continue;
    given.add(key);
    try {
      config[key] = parse(raw);
    } catch (error) {
      const value = secret ? '' : ` ${shown(raw)}`;
      throw new ConfigError(`invalid ${sourceName(key, flags)}${value}: ${(error as Error).message}`);
    }
  }
  const { headersTimeoutMs, requestTimeoutMs } = config as unknown as Config;
  // The headers are part of the request: Node refuses a headers timeout longer than the request's.
  // Left unset, the headers' timeout is the request's when that is the shorter.
  if (!given.has('headersTimeoutMs')) config.headersTimeoutMs = Math.min(headersTimeoutMs, requestTimeoutMs);
  else if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `invalid HEADERS_TIMEOUT_MS ${headersTimeoutMs}: must not be more than REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  }
  const { tlsCertFile, tlsKeyFile } = config as unknown as Config;
  const tlsPair = keyPairError('tlsCertFile', 'tlsKeyFile', tlsCertFile, tlsKeyFile);
  if (tlsPair !== null) throw tlsPair;
  checkRedisSettings(config as unknown as Config, given);
  checkFaultSettings(given);
  return config as unknown as Config;
}

/** A setting of SETTINGS that names a file, refused: one line naming the setting and the file. */
function invalidFile(key: keyof Config, path: string, message: string): ConfigError {
  return new ConfigError(`invalid ${SETTINGS[key].env} ${shown(path)}: ${message}`);
}

/**
 * Why a certificate file and a key file, set as `certKey` and `keyKey`, do not make a pair: one set
 * without the other, or a key that is not the certificate's (its first, the others being its
 * chain). Null when they do, or when neither is set.
 */
function keyPairError(
  certKey: keyof Config,
  keyKey: keyof Config,
  certFile: string | null,
  keyFile: string | null,
): ConfigError | null {
  const [certName, keyName] = [SETTINGS[certKey].env, SETTINGS[keyKey].env];
  if (certFile === null && keyFile === null) return null;
  if (certFile === null)
    return new ConfigError(`invalid ${keyName}: needs ${certName}, the certificate it is the key of`);
  if (keyFile === null) return new ConfigError(`invalid ${certName}: needs ${keyName}, the key of the certificate`);
  if (pemCertificates(certFile)[0]?.checkPrivateKey(privateKey(keyFile)) === true) return null;
  return invalidFile(keyKey, keyFile, `is not the key of the certificate in ${certName} ${shown(certFile)}`);
}

/** The server's certificate (its chain after it) and key, as read from TLS_CERT_FILE and TLS_KEY_FILE. */
export interface TlsKeyPair {
  cert: string;
  key: string;
  /** The server's own certificate, the first of the file. */
  certificate: X509Certificate;
}

/**
 * Reads TLS_CERT_FILE and TLS_KEY_FILE as the server uses them, checked as at start: each a PEM
 * file that can be read, the key the certificate's. Throws a ConfigError naming the setting at fault.
 */
export function readTlsKeyPair(certFile: string, keyFile: string): TlsKeyPair {
  // Each file read once, so that what is checked is what is served, even while the files change.
  const read = <T>(key: 'tlsCertFile' | 'tlsKeyFile', path: string, parse: (text: string) => T) => {
    try {
      const text = readText(path);
      return { text, parsed: parse(text) };
    } catch (error) {
      throw invalidFile(key, path, (error as Error).message);
    }
  };
  const cert = read('tlsCertFile', certFile, certificatesOf);
  const key = read('tlsKeyFile', keyFile, privateKeyOf);
  const [certificate] = cert.parsed;
  if (certificate === undefined || !certificate.checkPrivateKey(key.parsed)) {
    throw invalidFile('tlsKeyFile', keyFile, `is not the key of the certificate in TLS_CERT_FILE ${shown(certFile)}`);
  }
  return { cert: cert.text, key: key.text, certificate };
}

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
export function redisTlsOn(config: Pick<Config, 'redisTls' | 'redisUrl'>): boolean {
  return config.redisTls ?? config.redisUrl?.startsWith('rediss://') ?? false;
}

/**
 * The rules between the Redis settings, each broken one a ConfigError naming it: one topology,
 * settings that take effect (no TLS file with TLS off, no sentinel credentials without
 * sentinels), pairs given together, credentials in one place, and a key that fits its certificate.
 */
function checkRedisSettings(config: Config, given: ReadonlySet<keyof Config>): void {
  const invalid = (key: keyof Config, message: string, value?: string) =>
    new ConfigError(`invalid ${SETTINGS[key].env}${value === undefined ? '' : ` ${shown(value)}`}: ${message}`);
  const topologies = (['redisUrl', 'redisSentinels', 'redisClusterNodes'] as const).filter((key) => given.has(key));
  if (topologies.length > 1) {
    const [first, second] = topologies.map((key) => SETTINGS[key].env);
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
  const keyPair = keyPairError('redisTlsCertFile', 'redisTlsKeyFile', config.redisTlsCertFile, config.redisTlsKeyFile);
  if (keyPair !== null) throw keyPair;
  if (config.redisClusterNodes !== null && /[{}]/.test(config.redisKeyPrefix)) {
    throw invalid(
      'redisKeyPrefix',
      'must have no { or } with REDIS_CLUSTER_NODES: a brace makes a hash tag, which would put every key in one slot',
      config.redisKeyPrefix,
    );
  }
}

/** The settings of a fault that do nothing without the share of requests it applies to. */
const FAULT_RATES = [
  ['faultErrorStatus', 'faultErrorRate'],
  ['faultDelayMs', 'faultDelayRate'],
] as const;

/** A fault's status or length given without its rate is a mistake: it would inject nothing. */
function checkFaultSettings(given: ReadonlySet<keyof Config>): void {
  for (const [key, rate] of FAULT_RATES) {
    if (given.has(key) && !given.has(rate)) {
      throw new ConfigError(
        `invalid ${SETTINGS[key].env}: applies to the requests ${SETTINGS[rate].env} chooses, and it is not set`,
      );
    }
  }
}

/**
 * Where spans are exported to, as the OTEL_ settings say together: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * as it is, else OTEL_EXPORTER_OTLP_ENDPOINT's `/v1/traces`; null when nothing is exported.
 */
export function otlpTracesUrl(config: Config): string | null {
  const { otelSdkDisabled, otelTracesExporter, otelExporterOtlpEndpoint, otelExporterOtlpTracesEndpoint } = config;
  if (otelSdkDisabled || otelTracesExporter === 'none') return null;
  if (otelTracesExporter === null && otelExporterOtlpEndpoint === null && otelExporterOtlpTracesEndpoint === null) {
    return null;
  }
  const base = (otelExporterOtlpEndpoint ?? 'http://localhost:4318').replace(/\/$/, '');
  return otelExporterOtlpTracesEndpoint ?? `${base}/v1/traces`;
}

/** The offset from UTC, in minutes, of the wall clock in `timeZone` at `instant`. */
function offsetIn(timeZone: string, instant: number): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
  }).formatToParts(instant);
  const part = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value);
  return (Date.UTC(part('year'), part('month') - 1, part('day'), part('hour'), part('minute')) - instant) / 60_000;
}

/**
 * Checks `tz`, the TZ this process runs with, which Node reads by itself: a zone it cannot read
 * is UTC, without a word. So TZ is taken when the process's clock agrees with the zone it names,
 * in winter and in summer: a name Node knows (`Asia/Kolkata`, `UTC`, `Etc/GMT+5`, `US/Eastern`,
 * `EST5EDT`) the way Node runs it; a form only the runtime's own reading understands (`GMT+5`,
 * `:Asia/Kolkata`, a zoneinfo file), when it gives the clock an offset that is not UTC's.
 * Empty or unset, the process keeps the system's zone.
 */
export function checkTimeZone(tz: string | undefined): void {
  if (tz === undefined || tz === '') return;
  const year = new Date().getUTCFullYear();
  const instants = [Date.UTC(year, 0, 15), Date.UTC(year, 6, 15)];
  const clock = instants.map((instant) => -new Date(instant).getTimezoneOffset());
  let named: number[] | null;
  try {
    named = instants.map((instant) => offsetIn(tz, instant));
  } catch {
    named = null; // a RangeError: not a name Intl knows
  }
  const honoured = named === null ? clock.some((offset) => offset !== 0) : named.every((o, i) => o === clock[i]);
  if (!honoured) {
    throw new ConfigError(
      `invalid TZ ${shown(tz)}: must be a time zone that Node knows, such as UTC, Europe/Berlin or Asia/Kolkata (names are case-sensitive)`,
    );
  }
}

/**
 * Why listening where the configuration says failed, as the one line printed before exit 1: it
 * names the setting at fault as the user gave it (`argv`: the command line the configuration was
 * read from), and the cause in words rather than an error code.
 */
export function listenError(
  error: unknown,
  { port, host }: Pick<Config, 'port' | 'host'>,
  argv: readonly string[],
): ConfigError {
  const { flags } = parseCommandLine(argv);
  const portName = `${sourceName('port', flags)} ${port}`;
  const hostName = `${sourceName('host', flags)} ${shown(host)}`;
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  if (syscall === 'getaddrinfo') return new ConfigError(`${hostName} cannot be resolved to an address (${code})`);
  switch (code) {
    case 'EADDRINUSE':
      return new ConfigError(`${portName} is already in use on ${host}`);
    case 'EACCES':
      return new ConfigError(
        `${portName} needs privileges this process does not have: most systems keep the ports below 1024 for root`,
      );
    case 'EADDRNOTAVAIL':
      return new ConfigError(`${hostName} is not an address of this machine`);
    case 'EAFNOSUPPORT':
      return new ConfigError(`${hostName} is of an address family this machine does not support`);
    default:
      return new ConfigError(`cannot listen on ${hostName}, ${portName}: ${message}`);
  }
}
