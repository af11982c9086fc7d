import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import helmet from 'helmet';
import type { ApiPathTest } from '../lib/api-path.js';
import { API_VERSION } from '../version.js';

/**
 * Every fixed header of every response is chosen here: the security headers, CORS, the API
 * version and `Vary`, and the request id. Each route's sets are worked out when the route is
 * added, so a request costs one lookup of its origin (when it sends one) and one copy of a ready set.
 */

type HeaderSet = Readonly<Record<string, string>>;

/**
 * What every JSON answer carries: the headers the OWASP REST Security Cheat Sheet gives for APIs,
 * and no more. Nothing in an answer may be run, framed or sniffed as another type, nor stored.
 * HSTS is left out, with TLS_CERT_FILE too: it is a policy for a whole host name, which whoever
 * owns the name sets, usually where TLS ends in front of the service.
 */
export const API_SECURITY_HEADERS: HeaderSet = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
};

/**
 * What the documentation page needs and nothing more: its own scripts, style sheets and images
 * (Swagger UI's style sheet draws its icons as `data:` images), and requests to this service,
 * which is what "Try it out" sends. No inline script or style, no other host, no frames, no forms.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The documentation page and its assets: a page in a browser, so the browser headers that suit
 * HTML pages too, as helmet sets them, worked out once by helmet itself.
 */
const PAGE_SECURITY: HeaderSet = (() => {
  const headers: Record<string, string> = {};
  const response = {
    setHeader: (name: string, value: string) => {
      headers[name.toLowerCase()] = value;
    },
    removeHeader: () => {},
  };
  const options = {
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"] } },
    strictTransportSecurity: false,
    xFrameOptions: { action: 'deny' as const },
  };
  helmet(options)({} as IncomingMessage, response as unknown as ServerResponse, () => {});
  return { ...headers, 'content-security-policy': DOCS_CSP };
})();

/** The methods the routes take: what a preflight may ask for, and what a CONNECT is told to use. */
export const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH'];
/**
 * The request headers the service reads, besides those browsers always allow: a page whose
 * requests are traced sends `traceparent` and `tracestate` too; gRPC-Web and Connect clients
 * theirs (those ConnectRPC's `cors.allowedHeaders` lists).
 */
const ALLOWED_HEADERS = [
  'Accept',
  'Content-Encoding',
  'Content-Type',
  'If-Match',
  'If-None-Match',
  'X-Request-Id',
  'traceparent',
  'tracestate',
  'Connect-Protocol-Version',
  'Connect-Timeout-Ms',
  'Grpc-Timeout',
  'X-Grpc-Web',
  'X-User-Agent',
];
/** The response headers a script may read, besides the always-safe ones; a gRPC-Web call's status among them. */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  'ETag',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Retry-After',
  'API-Version',
  'Grpc-Status',
  'Grpc-Message',
  'Grpc-Status-Details-Bin',
];
/** How long, in seconds, a browser may reuse a preflight's answer. */
const PREFLIGHT_MAX_AGE = 600;

/** What a preflight is answered with, besides the headers of every answer to its origin. */
const PREFLIGHT_HEADERS: HeaderSet = {
  'access-control-allow-methods': METHODS.join(', '),
  'access-control-allow-headers': ALLOWED_HEADERS.join(', '),
  'access-control-max-age': String(PREFLIGHT_MAX_AGE),
};

/** The kinds of answer, each with its own fixed headers. */
type Kind = 'api' | 'data' | 'page';

/** A set of headers as a request's hook sets them: name and value, in turn. */
type HeaderList = readonly (readonly [string, string])[];

/** The fixed headers of one kind of answer: without CORS, and for each origin allowed to read it. */
interface Sets {
  readonly plain: HeaderList;
  /** With `*`: the one set of every request that sends an Origin. */
  readonly anyOrigin: HeaderList | undefined;
  /** With a list of origins: the set of each. */
  readonly byOrigin: ReadonlyMap<string, HeaderList>;
}

/** The documentation's routes that serve data, not the page: its document as JSON and YAML. */
const DOCS_DOCUMENTS = /\/docs\/(json|yaml)$/;

/**
 * Every response's fixed headers, for one configuration of CORS and of the context path.
 *
 * CORS headers go only on answers to requests that carry `Origin`, as every request a browser
 * makes across origins does. Since the answer then depends on whether and which Origin was
 * sent, every answer says `Vary: Origin`, so that no cache serves one origin's answer to another.
 */
export class ResponseHeaders {
  readonly #sets: Readonly<Record<Kind, Sets>>;
  readonly #isApiPath: ApiPathTest;
  readonly #docs: string;
  /** The methods the routes take: what a preflight may ask for, and what a CONNECT is told to use. */
  readonly methods: readonly string[] = METHODS;

  /** With `compression`, the answers of the API and of data (JSON, metrics) may be compressed, so they vary by Accept-Encoding. */
  constructor(corsOrigins: '*' | readonly string[], contextPath: string, isApiPath: ApiPathTest, compression: boolean) {
    this.#isApiPath = isApiPath;
    this.#docs = `${contextPath === '/' ? '' : contextPath}/docs`;
    const sets = (fixed: HeaderSet): Sets => {
      const cors = (origin: string): HeaderList =>
        Object.entries({
          ...fixed,
          'access-control-allow-origin': origin,
          'access-control-expose-headers': EXPOSED_HEADERS.join(', '),
        });
      return {
        plain: Object.entries(fixed),
        anyOrigin: corsOrigins === '*' ? cors('*') : undefined,
        byOrigin: new Map(corsOrigins === '*' ? [] : corsOrigins.map((origin) => [origin, cors(origin)])),
      };
    };
    const coded = compression ? 'Accept-Encoding, ' : '';
    this.#sets = {
      api: sets({ ...API_SECURITY_HEADERS, 'api-version': API_VERSION, vary: `Accept, ${coded}Origin` }),
      data: sets({ ...API_SECURITY_HEADERS, vary: `${coded}Origin` }),
      page: sets({ ...PAGE_SECURITY, vary: 'Origin' }),
    };
  }

  /** The kind of answer a path gives (its query ignored). */
  #kind(url: string): Kind {
    if (this.#isApiPath(url)) return 'api';
    const [path = ''] = url.split('?', 1);
    const docs = path === this.#docs || path.startsWith(`${this.#docs}/`);
    return docs && !DOCS_DOCUMENTS.test(path) ? 'page' : 'data';
  }

  /**
   * Sets a request's fixed headers on its reply. Answers whether the request's origin may read
   * the answer: only then is a preflight answered. Each set is a ready list, walked as it is: a
   * header object would be read key by key, by names that differ from one read to the next.
   */
  static #set(sets: Sets, request: FastifyRequest, reply: FastifyReply): boolean {
    const origin = request.headers.origin;
    const set = origin === undefined ? sets.plain : (sets.anyOrigin ?? sets.byOrigin.get(origin));
    for (const [name, value] of set ?? sets.plain) reply.header(name, value);
    reply.header('x-request-id', request.id);
    return set !== undefined && origin !== undefined;
  }

  /** The hook that sets the fixed headers of a route's every answer, the kind decided once, from its path. */
  forRoute(url: string): onRequestHookHandler {
    const sets = this.#sets[this.#kind(url)];
    return (request, reply, done) => {
      ResponseHeaders.#set(sets, request, reply);
      done();
    };
  }

  /**
   * Sets the fixed headers of a request no route took (404, 405, a CORS preflight), or that failed
   * before routing; the kind follows from its path as sent. Answers whether a preflight from its
   * origin may be answered.
   */
  forUnrouted(request: FastifyRequest, reply: FastifyReply): boolean {
    return ResponseHeaders.#set(this.#sets[this.#kind(request.url)], request, reply);
  }

  /** Whether CORS_ORIGINS lets a page from `origin` read the API's answers. */
  allowsOrigin(origin: string): boolean {
    const { anyOrigin, byOrigin } = this.#sets.api;
    return anyOrigin !== undefined || byOrigin.has(origin);
  }

  /**
   * The fixed head lines of an answer written straight to the socket, where Fastify has no reply to
   * set them on (an error before there is a request, a CONNECT): its request id and security headers.
   */
  socketHead(id: string): string {
    return `x-request-id: ${id}\r\n${SOCKET_SECURITY_LINES}`;
  }

  /**
   * A request's id: the client's `X-Request-Id` when it is a safe token (so a trace can cross
   * services), otherwise a new UUID. Given to Fastify as `genReqId`.
   */
  requestId(request: IncomingMessage): string {
    const incoming = request.headers['x-request-id'];
    return typeof incoming === 'string' && ACCEPTED_ID.test(incoming) ? incoming : randomUUID();
  }
}

/** The security headers of an answer written straight to the socket, as HTTP lines, worked out once. */
const SOCKET_SECURITY_LINES = Object.entries({ ...API_SECURITY_HEADERS, vary: 'Origin' })
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

/** The request ids taken as a client sends them. */
const ACCEPTED_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Sets every response's fixed headers in the first of its request hooks: each route's from a hook
 * of its own, and a request no route takes from the app's. That hook also answers CORS preflights
 * (an OPTIONS with Access-Control-Request-Method, from an allowed origin) with 204. Any other
 * OPTIONS goes on to be routed, so it gets the 405 or 404 a method that no route takes gets.
 * Credentials are never allowed.
 */
export const responseHeadersPlugin = fp(
  async (app: FastifyInstance, { headers }: { headers: ResponseHeaders }) => {
    app.addHook('onRoute', (route) => {
      route.onRequest = [headers.forRoute(route.url), ...[route.onRequest ?? []].flat()];
    });
    app.addHook('onRequest', (request, reply, done) => {
      if (!request.is404) return done();
      const allowed = headers.forUnrouted(request, reply);
      if (allowed && request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined) {
        reply.code(204).headers(PREFLIGHT_HEADERS).send();
        return;
      }
      done();
    });
  },
  { name: 'response-headers' },
);
