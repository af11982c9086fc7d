import fastifyRateLimit, { type FastifyRateLimitStore, type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { errorResponses, rateLimitExceeded } from '../errors.js';
import type { ApiPathTest } from '../lib/api-path.js';
import type { RateLimitStore } from '../stores/rate-limit.js';

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

/**
 * Our store as @fastify/rate-limit wants one: a class it instantiates, with callbacks. Every
 * route shares a client's one counter, so a child store is the store itself.
 */
function pluginStore(store: RateLimitStore): FastifyRateLimitStoreCtor {
  return class implements FastifyRateLimitStore {
    incr(key: string, callback: Parameters<FastifyRateLimitStore['incr']>[1], timeWindow: number): void {
      store.incr(key, timeWindow).then(
        (count) => callback(null, count),
        (error: Error) => callback(error),
      );
    }
    child(): FastifyRateLimitStore {
      return this;
    }
  };
}

/**
 * Rate limiting of every route under `/api` per client address (`request.ip`, so
 * X-Forwarded-For counts only with `trustProxy`; an IPv6 client is its /64 network, as
 * @fastify/rate-limit keys it). Answers, errors included, carry the RateLimit-* headers of the
 * IETF draft; the request over the limit gets a 429 with Retry-After, shaped like every error.
 * Requests to paths no route matches count too when they are under `/api`, so probing unknown
 * paths is no way around the limit.
 */
export const rateLimitPlugin = fp<RateLimitOptions>(
  async (app: FastifyInstance, { max, windowMs, store, isApiPath: limited }) => {
    app.addHook('onRoute', (route) => {
      const { schema } = route;
      if (schema === undefined || !limited(route.url)) return;
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
    });

    await app.register(fastifyRateLimit, {
      // Applied by the hook below, not route by route: a path no route matches has no route options.
      global: false,
      max,
      timeWindow: windowMs,
      store: pluginStore(store),
      enableDraftSpec: true,
      // A store that fails (Redis unreachable) lets the request through: better unlimited than down.
      skipOnError: true,
      errorResponseBuilder: (_request, context) => rateLimitExceeded(context.max, Math.ceil(context.ttl / 1000)),
    });
    const limit = app.rateLimit();
    app.addHook('onRequest', async (request: FastifyRequest, reply) => {
      const url = request.is404 ? (request.url.split('?', 1)[0] ?? '') : request.routeOptions.url;
      if (url !== undefined && limited(url)) await limit.call(app, request, reply);
    });
  },
  { name: 'rate-limit', dependencies: ['errors'] },
);
