import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import ipaddr from 'ipaddr.js';
import { rateLimitExceeded } from '../errors.js';
import type { ApiPathTest } from '../lib/api-path.js';
import type { RateLimitCount, RateLimitStore } from '../stores/rate-limit.js';

export interface RateLimitOptions {
  /** Requests per client and window; more than 0 (with 0 there is no limiter at all). */
  max: number;
  windowMs: number;
  store: RateLimitStore;
}

/** No IP address is longer, a zone (`%eth0`) included; testing longer text would cost time for nothing. */
const MAX_ADDRESS_LENGTH = 64;

/** The key of an IP address (see `clientKey`), or `undefined` for text that is not one. */
function addressKey(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  if (isIPv4(address)) return address; // the common case, tested first: dotted decimal has one spelling
  if (address.length > MAX_ADDRESS_LENGTH || !isIPv6(address)) return undefined;
  const parsed = ipaddr.IPv6.parse(address);
  if (parsed.isIPv4MappedAddress()) return parsed.toIPv4Address().toString();
  return new ipaddr.IPv6([...parsed.parts.slice(0, 4), 0, 0, 0, 0]).toRFC5952String();
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
export class RateLimiter {
  readonly #max: number;
  readonly #limit: string;
  readonly #windowMs: number;
  readonly #store: RateLimitStore;
  /** What a request is answered with when the store failed: let through, as if first in a new window. */
  readonly #uncounted: RateLimitCount;
  /** The last client address counted, and its key: most requests come from an address seen just before. */
  #lastAddress: string | null = null;
  #lastKey = '';

  constructor({ max, windowMs, store }: RateLimitOptions) {
    this.#max = max;
    this.#limit = String(max);
    this.#windowMs = windowMs;
    this.#store = store;
    this.#uncounted = { current: 0, ttl: windowMs };
  }

  /** Sets the headers of a counted request, and refuses it once it is over the limit. */
  #answer({ current, ttl }: RateLimitCount, reply: FastifyReply, done: (error?: Error) => void): void {
    const max = this.#max;
    const reset = Math.ceil(ttl / 1000);
    // As text: Node would turn a number into text twice, once to check it and once to send it.
    reply
      .header('ratelimit-limit', this.#limit)
      .header('ratelimit-remaining', String(current <= max ? max - current : 0))
      .header('ratelimit-reset', String(reset));
    if (current <= max) {
      done();
      return;
    }
    reply.header('retry-after', String(reset));
    done(rateLimitExceeded(max, reset));
  }

  /** The key a request is counted under (see `clientKey`). */
  #keyOf(request: FastifyRequest): string {
    const ip = request.ip;
    if (ip === this.#lastAddress) return this.#lastKey;
    const key = addressKey(ip);
    if (key === undefined) return clientKey(ip, request.socket.remoteAddress);
    this.#lastAddress = ip;
    this.#lastKey = key;
    return key;
  }

  /**
   * Counts a request and sets its headers; `done` gets the 429 when it is over the limit. A hook
   * of every limited route, and what the app calls for a request refused before routing.
   */
  readonly count = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void => {
    const counted = this.#store.incr(this.#keyOf(request), this.#windowMs);
    if (!(counted instanceof Promise)) {
      this.#answer(counted, reply, done);
      return;
    }
    counted.then(
      (shared) => this.#answer(shared, reply, done),
      () => this.#answer(this.#uncounted, reply, done),
    );
  };
}

/** Rate limiting of the paths under `/api` (see `RateLimiter`), by the limiter the app made. */
export const rateLimitPlugin = fp<{ limiter: RateLimiter; isApiPath: ApiPathTest }>(
  async (app: FastifyInstance, { limiter, isApiPath: limited }) => {
    const { count } = limiter;
    // Each limited route counts in a hook of its own, decided once here; a request no route
    // matches is counted by the app's hook, when its path is under `/api`.
    app.addHook('onRoute', (route) => {
      if (!limited(route.url)) return;
      route.onRequest = [...[route.onRequest ?? []].flat(), count];
    });
    app.addHook('onRequest', (request, reply, done) => {
      if (request.is404 && limited(request.url)) count(request, reply, done);
      else done();
    });
  },
  { name: 'rate-limit', dependencies: ['errors'] },
);
