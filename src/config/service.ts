import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { shown } from '../lib/shown.js';
import { BOOLEANS, boolean, integer } from './parsers.js';
import { ConfigError, concern, setting } from './setting.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const MIN_SECRET_LENGTH = 32;

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

/** Where the service listens, what it serves and to whom: the settings every deployment looks at first. */
export const SERVICE = concern({
  settings: {
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
    /** What the process may hold for clients and peers that do not keep up; the memory budget sheds the rest. */
    memoryBudgetBytes: setting({
      env: 'MEMORY_BUDGET_BYTES',
      help: 'bytes the service may hold for clients that do not read (answers unsent, in the process and the kernel, WebSocket echoes), 1048576 to 1099511627776; past it, the connections that hold the most are ended, and from 80% of it new streams and WebSockets get 503',
      // 32 MiB in the Kubernetes recipe: --max-old-space-size=128 in its 256 MiB container, where V8
      // sizes the young generation from the container's memory (a heap limit of 131 MiB).
      default: Math.floor(getHeapStatistics().heap_size_limit / 4),
      defaultText: "a quarter of V8's heap limit (32 MiB in the Kubernetes recipe's container)",
      parse: integer(1024 * 1024, 2 ** 40),
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
    metricsEnabled: setting({
      env: 'METRICS_ENABLED',
      help: 'true, false, 1 or 0, in any case; false or 0: no GET /metrics, and no request is counted',
      default: true,
      parse: boolean,
    }),
  },
});

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
