import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { Address6 } from 'ip-address';
import { errorResponses, rateLimitExceeded } from '../errors.js';
import type { ApiPathTest } from '../lib/api-path.js';
import type { RateLimitCount, RateLimitStore } from '../stores/rate-limit.js';

export interface RateLimitOptions {
  /** Requests per client and window; more than 0 (with 0 the plugin is not registered at all). */
  max: number;
  windowMs: number;
  store: RateLimitStore;
  /** Which paths are limited: `/api` under the context path, and everything under it. */
  isApiPath: ApiPathTest;
}

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests this client may make per window.' },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left to this client in the current window.' },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the current window ends.' },
} as const;

const RETRY_AFTER_HEADER = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before trying again.' },
} as const;

/** No IP address is longer, a zone (`%eth0`) included; testing longer text would cost time for nothing. */
const MAX_ADDRESS_LENGTH = 64;

/** The key of an IP address (see `clientKey`), or `undefined` for text that is not one. */
function addressKey(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  if (isIPv4(address)) return address; // the common case, tested first: dotted decimal has one spelling
  if (address.length > MAX_ADDRESS_LENGTH || !isIPv6(address)) return undefined;
  const parsed = new Address6(address);
  if (parsed.isMapped4()) return parsed.to4().correctForm();
  return new Address6(`${address}/64`).startAddress().correctForm();
}

/**
 * The key a request is counted under: the client's address (`ip`, the leftmost X-Forwarded-For
 * entry with TRUST_PROXY), or the connection's when that is not an IP address, so that no text
 * a client writes can make a key of its own. An IPv6 client counts by its /64 network, since one
 * host is commonly given all of it, in one spelling; an IPv4-mapped address as the IPv4 one.
 * Neither known (a connection already closed): `''`.
 */
export function clientKey(ip: string | undefined, connection: string | undefined): string {
  return addressKey(ip) ?? addressKey(connection) ?? '';
}

/** The response schemas of a limited route, with the headers the limiter adds to each answer. */
function withLimitHeaders(schema: { response?: unknown }): void {
  // Copies all the way down to the headers: one response schema may serve several routes.
  const response: Record<string, { headers?: object }> = {
    ...errorResponses(429),
    ...(schema.response as Record<string, object> | undefined),
  };
  for (const [status, sub] of Object.entries(response)) {
    const headers = status === '429' ? { ...RATE_LIMIT_HEADERS, ...RETRY_AFTER_HEADER } : RATE_LIMIT_HEADERS;
    response[status] = { ...sub, headers: { ...sub.headers, ...headers } };
  }
  schema.response = response;
}

/**
 * Rate limiting of every route under `/api` per client (`request.ip`, so X-Forwarded-For counts
 * only with `trustProxy`, and only an IP address; see `clientKey`), in fixed windows. Answers,
 * errors included, carry the RateLimit-* headers of the IETF draft; the request over the limit
 * gets a 429 with Retry-After, shaped like every error. Requests to paths no route matches count
 * too when they are under `/api` as the router reads them, so probing unknown paths is no way
 * around the limit. A store that fails (Redis unreachable) lets the request through: better
 * unlimited than down.
 *
 * A hook of its own rather than @fastify/rate-limit's, which costs a promise, a lookup of the
 * route's options and a long IPv6 regular expression per request: this one counts in memory
 * synchronously, in constant time, with no allocation in a running window.
 */
export const rateLimitPlugin = fp<RateLimitOptions>(
  async (app: FastifyInstance, { max, windowMs, store, isApiPath: limited }) => {
    const limit = String(max);

    /** Sets the headers of a counted request, and refuses it once it is over the limit. */
    function answer({ current, ttl }: RateLimitCount, reply: FastifyReply, done: (error?: Error) => void): void {
      const reset = Math.ceil(ttl / 1000);
      const remaining = current <= max ? max - current : 0;
      reply.header('ratelimit-limit', limit).header('ratelimit-remaining', remaining).header('ratelimit-reset', reset);
      if (current <= max) {
        done();
        return;
      }
      reply.header('retry-after', reset);
      done(rateLimitExceeded(max, reset));
    }

    // What a request is answered with when the store failed: let through, as if first in a new window.
    const uncounted: RateLimitCount = { current: 0, ttl: windowMs };

    const count: onRequestHookHandler = (request: FastifyRequest, reply, done) => {
      const counted = store.incr(clientKey(request.ip, request.socket.remoteAddress), windowMs);
      if (!(counted instanceof Promise)) return answer(counted, reply, done);
      counted.then(
        (shared) => answer(shared, reply, done),
        () => answer(uncounted, reply, done),
      );
    };

    // Each limited route counts in a hook of its own, decided once here; a request no route
    // matches is counted by the app's hook, when its path is under `/api`.
    app.addHook('onRoute', (route) => {
      if (!limited(route.url)) return;
      if (route.schema !== undefined) withLimitHeaders(route.schema);
      route.onRequest = [...[route.onRequest ?? []].flat(), count];
    });
    app.addHook('onRequest', (request, reply, done) => {
      if (request.is404 && limited(request.url)) count.call(app, request, reply, done);
      else done();
    });
  },
  { name: 'rate-limit', dependencies: ['errors'] },
);
