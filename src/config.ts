import { randomBytes } from 'node:crypto';
import { type ParseArgsConfig, parseArgs } from 'node:util';

/** Everything the service reads from its environment, parsed and validated once at start-up. */
export interface Config {
  port: number;
  host: string;
  /** `/` or a path without a trailing slash, e.g. `/svc`; every route lives under it. */
  contextPath: string;
  logLevel: LogLevel;
  /** Largest accepted request body, in bytes. */
  bodyLimit: number;
  /** How long in-flight requests may run after SIGTERM/SIGINT before the process gives up on them. */
  shutdownTimeoutMs: number;
  /** Key of the HMAC that signs pagination cursors: instances that share it accept each other's cursors. */
  cursorSecret: string;
  /** Requests a client may make to `/api` routes per window; 0 turns rate limiting off. */
  rateLimitMax: number;
  /** Length of a client's rate-limit window, in milliseconds, from its first request in it. */
  rateLimitWindowMs: number;
  /** Whether `X-Forwarded-For` gives the client address: only behind a proxy that sets it. */
  trustProxy: boolean;
  /**
   * Origins whose browser scripts may call the API: `*` for any, or exact origins
   * (`https://app.example`). Never with credentials.
   */
  corsOrigins: '*' | readonly string[];
  /** How long a client may take to send a request's headers, in milliseconds. */
  headersTimeoutMs: number;
  /** How long a client may take to send a whole request, headers and body, in milliseconds. */
  requestTimeoutMs: number;
  /** How long a kept-alive connection may stay idle between requests before it is closed, in milliseconds. */
  keepAliveTimeoutMs: number;
  /** Whether `GET /metrics` serves Prometheus metrics, and requests are counted for it. */
  metricsEnabled: boolean;
  /**
   * `redis://` or `rediss://` URL of the Redis that holds the profile and the rate-limit counters,
   * shared by every instance; null keeps both in this process's memory.
   */
  redisUrl: string | null;
  /** How long any one Redis command, or connecting to Redis, may take before it fails, in milliseconds. */
  redisTimeoutMs: number;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_CONFIG: Readonly<Config> = {
  port: 8080,
  host: '0.0.0.0',
  contextPath: '/',
  logLevel: 'info',
  bodyLimit: 1024 * 1024,
  shutdownTimeoutMs: 10_000,
  // A fresh key per process: cursors work with the instance that issued them, until it restarts.
  cursorSecret: randomBytes(32).toString('base64url'),
  rateLimitMax: 1000,
  rateLimitWindowMs: 60_000,
  trustProxy: false,
  // A public API without credentials: any page may call it.
  corsOrigins: '*',
  // A client on a poor network sends its headers in well under a second; 10 s leaves room for
  // one that struggles while not holding a connection for long. 30 s reads the default 1 MiB
  // body at a mere 35 KB/s.
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  // Longer than the 60 s idle timeout of common load balancers, so that the service never closes a
  // kept-alive connection just as the balancer sends a request on it (Fastify's own default).
  keepAliveTimeoutMs: 72_000,
  metricsEnabled: true,
  redisUrl: null,
  // A Redis on the same network answers in about a millisecond; half a second is a Redis in trouble.
  redisTimeoutMs: 500,
};

const MIN_SECRET_LENGTH = 32;

/** A configuration value that cannot be used; its message is the one line printed before exit 1. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

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

/** Redis reads a database number as a signed 32-bit integer. */
const MAX_REDIS_DATABASE = 2 ** 31 - 1;

function isPercentEncoded(text: string): boolean {
  try {
    decodeURIComponent(text);
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
  if (!isPercentEncoded(url.username) || !isPercentEncoded(url.password)) {
    throw new Error('its user name and password must be percent-encoded, a % only as in %25');
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

const parsers: { [K in keyof Config]: Parse<Config[K]> } = {
  port: integer(0, 65535),
  host: (raw) => {
    if (/\s/.test(raw)) throw new Error('must be a host name or IP address');
    return raw;
  },
  contextPath: (raw) => {
    // Path segments of RFC 3986 characters but for * and :, which Fastify reads as a wildcard and
    // a parameter; "/svc/" is read as "/svc".
    if (!/^\/(?:[A-Za-z0-9._~!$&'()+,;=@-]+\/?)*$/.test(raw) || raw.includes('//')) {
      throw new Error('must be "/" or a path such as "/svc"');
    }
    return raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
  },
  logLevel: (raw) => {
    const level = LOG_LEVELS.find((l) => l === raw);
    if (level === undefined) throw new Error(`must be one of ${LOG_LEVELS.join(', ')}`);
    return level;
  },
  bodyLimit: integer(1, 2 ** 31 - 1),
  shutdownTimeoutMs: integer(0, 2 ** 31 - 1),
  cursorSecret: (raw) => {
    if (raw.length < MIN_SECRET_LENGTH) throw new Error(`must be at least ${MIN_SECRET_LENGTH} characters`);
    return raw;
  },
  rateLimitMax: integer(0, 2 ** 31 - 1),
  rateLimitWindowMs: integer(1, 2 ** 31 - 1),
  trustProxy: boolean,
  corsOrigins: (raw) => {
    if (raw.trim() === '*') return '*';
    const origins = raw.split(',').map((origin) => origin.trim());
    // Origins are compared exactly, as browsers send them: https://App.example would never match.
    if (!origins.every(isOrigin)) {
      throw new Error('must be * or a comma-separated list of origins such as https://app.example');
    }
    return origins;
  },
  headersTimeoutMs: integer(1, 2 ** 31 - 1),
  requestTimeoutMs: integer(1, 2 ** 31 - 1),
  keepAliveTimeoutMs: integer(1, 2 ** 31 - 1),
  metricsEnabled: boolean,
  redisUrl,
  redisTimeoutMs: integer(1, 60_000),
};

/**
 * Where each setting comes from: its environment variable, and its command-line flag if it has
 * one, with what `--help` says of it. A secret's value is never repeated in an error message,
 * and its default is not shown.
 */
export const SOURCES: { [K in keyof Config]: { env: string; flag?: string; secret?: true; help: string } } = {
  port: { env: 'PORT', flag: 'port', help: 'TCP port, 0 to 65535 (0 picks a free one)' },
  host: { env: 'HOST', flag: 'host', help: 'interface to listen on' },
  contextPath: { env: 'CONTEXT_PATH', help: 'prefix for every route: /svc serves /svc/api/hello, /svc/healthz, ...' },
  logLevel: { env: 'LOG_LEVEL', help: LOG_LEVELS.join(', ') },
  bodyLimit: { env: 'BODY_LIMIT', help: 'largest request body, in bytes' },
  shutdownTimeoutMs: {
    env: 'SHUTDOWN_TIMEOUT_MS',
    help: 'how long in-flight requests may take to finish after SIGTERM/SIGINT',
  },
  cursorSecret: {
    env: 'CURSOR_SECRET',
    secret: true,
    help: `key that signs pagination cursors, at least ${MIN_SECRET_LENGTH} characters; random per process if unset`,
  },
  rateLimitMax: { env: 'RATE_LIMIT_MAX', help: 'requests a client may make to /api per window; 0 turns it off' },
  rateLimitWindowMs: { env: 'RATE_LIMIT_WINDOW_MS', help: "length of a client's rate-limit window, in milliseconds" },
  trustProxy: { env: 'TRUST_PROXY', help: 'true/1: the client address is taken from X-Forwarded-For' },
  corsOrigins: { env: 'CORS_ORIGINS', help: 'origins whose pages may call the API: * or a comma-separated list' },
  headersTimeoutMs: { env: 'HEADERS_TIMEOUT_MS', help: "time a client has to send a request's headers, in ms" },
  requestTimeoutMs: { env: 'REQUEST_TIMEOUT_MS', help: 'time a client has to send a whole request, in ms' },
  keepAliveTimeoutMs: {
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    help: "how long an idle kept-alive connection stays open, in ms; above the load balancer's idle timeout",
  },
  metricsEnabled: { env: 'METRICS_ENABLED', help: 'false/0: no GET /metrics, and no request is counted' },
  // A secret: the URL may carry a password.
  redisUrl: {
    env: 'REDIS_URL',
    secret: true,
    help: 'redis:// or rediss:// URL: the profile and rate-limit counters live there, shared by every instance; unset: in memory',
  },
  redisTimeoutMs: { env: 'REDIS_TIMEOUT_MS', help: 'how long one Redis command may take before it fails, in ms' },
};

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
    Object.values(SOURCES).flatMap(({ flag }) => (flag === undefined ? [] : [[flag, { type: 'string' }]])),
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

/** A setting as the user gave it: `--port` if it came from its flag, else `PORT`. */
function sourceName(key: keyof Config, flags: CommandLine['flags']): string {
  const { env, flag } = SOURCES[key];
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
  for (const key of Object.keys(SOURCES) as (keyof Config)[]) {
    const { env: name, flag, secret } = SOURCES[key];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const raw = fromFlag ?? (env[name] === '' ? undefined : env[name]);
    if (raw === undefined) continue;
    try {
      config[key] = parsers[key](raw);
    } catch (error) {
      const shown = secret ? '' : ` ${JSON.stringify(raw)}`;
      throw new ConfigError(`invalid ${sourceName(key, flags)}${shown}: ${(error as Error).message}`);
    }
  }
  const { headersTimeoutMs, requestTimeoutMs } = config as unknown as Config;
  // The headers are part of the request: Node refuses a headers timeout longer than the request's.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `invalid HEADERS_TIMEOUT_MS ${headersTimeoutMs}: must not be more than REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  }
  return config as unknown as Config;
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
      `invalid TZ ${JSON.stringify(tz)}: must be a time zone that Node knows, such as UTC, Europe/Berlin or Asia/Kolkata (names are case-sensitive)`,
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
  const hostName = `${sourceName('host', flags)} ${JSON.stringify(host)}`;
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
