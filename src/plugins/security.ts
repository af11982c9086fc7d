import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import helmet from 'helmet';
import type { ApiPathTest } from '../lib/api-path.js';
import { API_VERSION } from './versioning.js';

/**
 * Security headers for a JSON API: nothing in a response may be run, framed, sniffed as another
 * type or embedded by another site. HSTS is left out: the service speaks plain HTTP, where browsers
 * ignore it, and whatever terminates TLS in front of it owns that policy for the whole host.
 */
const HELMET_OPTIONS = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  strictTransportSecurity: false,
  xFrameOptions: { action: 'deny' as const },
};

/**
 * The headers helmet sets with these options, worked out once, by helmet itself: for every
 * response, including those no hook sees (the errors Fastify raises before routing, and those
 * written straight to the socket).
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = (() => {
  const headers: Record<string, string> = {};
  const response = {
    setHeader: (name: string, value: string) => {
      headers[name.toLowerCase()] = value;
    },
    removeHeader: () => {},
  };
  helmet(HELMET_OPTIONS)({} as IncomingMessage, response as unknown as ServerResponse, () => {});
  return headers;
})();

/** The methods the routes take: what a preflight may ask for. */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH'];
/** The request headers the service reads, besides those browsers always allow. */
const ALLOWED_HEADERS = ['Accept', 'Content-Type', 'If-Match', 'If-None-Match', 'X-Request-Id'];
/** The response headers a script may read, besides the always-safe ones. */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  'ETag',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Retry-After',
  'API-Version',
];
/** How long, in seconds, a browser may reuse a preflight's answer. */
const PREFLIGHT_MAX_AGE = 600;

/** What a preflight is answered with, besides the headers of every answer to its origin. */
const PREFLIGHT_HEADERS = {
  'access-control-allow-methods': METHODS.join(', '),
  'access-control-allow-headers': ALLOWED_HEADERS.join(', '),
  'access-control-max-age': String(PREFLIGHT_MAX_AGE),
  'content-length': '0',
};

type HeaderSet = Readonly<Record<string, string>>;

/** The fixed headers of every answer to the pages of one origin (or to every origin, with `*`). */
interface Audience {
  /** Whether its pages may read answers, and so send preflights. */
  readonly allowed: boolean;
  /** For paths under `/api`, which add the API version. */
  readonly api: HeaderSet;
  readonly other: HeaderSet;
}

/** The fixed headers of every response, one ready set per audience. */
export interface ResponseHeaders {
  /**
   * Sets the request's fixed headers on its reply: its id, the security headers, CORS for its
   * origin, and the API version under `/api`. Answers the request's audience.
   */
  set(request: FastifyRequest, reply: FastifyReply): Audience;
}

/**
 * Every response's fixed headers, worked out once at start-up, so that a request costs one lookup
 * of its origin and one copy of a ready set. With a list of origins, answers vary by Origin
 * (which a cache must know); with `*` they do not.
 */
export function responseHeaders(corsOrigins: '*' | readonly string[], isApiPath: ApiPathTest): ResponseHeaders {
  const byOrigin = corsOrigins !== '*';
  const audience = (allowOrigin: string | null): Audience => {
    const other: Record<string, string> = { ...SECURITY_HEADERS };
    if (allowOrigin !== null) {
      other['access-control-allow-origin'] = allowOrigin;
      other['access-control-expose-headers'] = EXPOSED_HEADERS.join(', ');
    }
    if (byOrigin) other.vary = 'Origin';
    const api = { ...other, 'api-version': API_VERSION, vary: byOrigin ? 'Accept, Origin' : 'Accept' };
    return { allowed: allowOrigin !== null, api, other };
  };
  const any = byOrigin ? undefined : audience('*');
  const listed = new Map(byOrigin ? corsOrigins.map((origin) => [origin, audience(origin)]) : []);
  const denied = audience(null);
  return {
    set: (request, reply) => {
      const sets = any ?? listed.get(request.headers.origin ?? '') ?? denied;
      reply.headers(isApiPath(request.url) ? sets.api : sets.other).header('x-request-id', request.id);
      return sets;
    },
  };
}

/**
 * Sets every response's fixed headers and its request id, in one hook that runs first, and
 * answers CORS preflights (an OPTIONS with Access-Control-Request-Method, from an allowed
 * origin) with 204. Any other OPTIONS goes on to be routed, so it gets the 405 or 404 a method
 * that no route takes gets. Credentials are never allowed.
 */
export const securityPlugin = fp(
  async (app: FastifyInstance, { headers }: { headers: ResponseHeaders }) => {
    app.addHook('onRequest', (request, reply, done) => {
      const audience = headers.set(request, reply);
      if (
        audience.allowed &&
        request.method === 'OPTIONS' &&
        request.headers['access-control-request-method'] !== undefined
      ) {
        reply.code(204).headers(PREFLIGHT_HEADERS).send();
        return;
      }
      done();
    });
  },
  { name: 'security' },
);
