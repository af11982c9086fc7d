import {
  expectEnvelope,
  expectEqual,
  expectObject,
  expectStatus,
  expectTrue,
  expectValidation,
  fail,
  header,
  headerList,
  sentCode,
  show,
} from '../assert.js';
import type { Check } from '../context.js';
import type { Response } from '../http.js';

const ERRORS = 'spec 7.1, 7.2; contract: Errors';
const JSON_HEADERS = { 'Content-Type': 'application/json' };

function expectAllow(res: Response, methods: readonly string[]): void {
  const allow = headerList(res, 'allow').map((method) => method.toUpperCase());
  const missing = methods.filter((method) => !allow.includes(method));
  if (header(res, 'allow') === undefined || missing.length > 0) {
    fail(`${res.request.method} ${res.request.path}: Allow listing ${methods.join(', ')}`, show(header(res, 'allow')));
  }
  if (allow.includes(res.request.method)) fail(`Allow without ${res.request.method}`, show(header(res, 'allow')));
}

/** What every path that has GET allows: HEAD works wherever GET does. */
const READS = ['GET', 'HEAD'];

const ID = /^[A-Za-z0-9._:-]{1,128}$/;

export const errorChecks: Check[] = [
  {
    id: 'errors.not-found',
    group: 'errors',
    clause: ERRORS,
    title: 'an unknown route under /api is a 404 NOT_FOUND envelope',
    async run(ctx) {
      expectEnvelope(await ctx.get('/api/no-such-route'), 404, 'NOT_FOUND');
      expectEnvelope(await ctx.get('/api/hello/Ada/more'), 404, 'NOT_FOUND');
    },
  },
  {
    id: 'errors.not-found-outside-api',
    group: 'errors',
    clause: ERRORS,
    title: 'an unknown route outside /api is a 404 NOT_FOUND envelope too',
    async run(ctx) {
      expectEnvelope(await ctx.get('/no-such-page.html'), 404, 'NOT_FOUND');
    },
  },
  {
    id: 'errors.method-not-allowed',
    group: 'errors',
    clause: ERRORS,
    title: 'a method a path does not have is a 405 METHOD_NOT_ALLOWED with Allow listing every method it has',
    async run(ctx) {
      const put = await ctx.send({ method: 'PUT', path: '/api/hello', headers: JSON_HEADERS, body: '{}' });
      expectEnvelope(put, 405, 'METHOD_NOT_ALLOWED');
      expectAllow(put, READS);
      const get = await ctx.get('/api/echo');
      expectEnvelope(get, 405, 'METHOD_NOT_ALLOWED');
      expectAllow(get, ['POST']);
      for (const [path, methods] of [
        ['/api/profile', [...READS, 'POST', 'PUT', 'PATCH']],
        ['/api/hello/Ada', READS],
        ['/api/search', READS],
        ['/api/exchange', READS],
        ['/api/currencies', READS],
        ['/api/currencies/EUR', READS],
      ] as const) {
        const del = await ctx.send({ method: 'DELETE', path });
        expectEnvelope(del, 405, 'METHOD_NOT_ALLOWED');
        expectAllow(del, methods);
      }
    },
  },
  {
    id: 'errors.payload-too-large',
    group: 'errors',
    clause: ERRORS,
    title: 'a body just over, or far over, the body limit is a 413 PAYLOAD_TOO_LARGE envelope, read in full',
    async run(ctx) {
      // Far over: the service answers before reading the body, and must not drop the connection under it.
      for (const size of [ctx.options.bodyLimit + 1, 8 * ctx.options.bodyLimit]) {
        const body = `{"a":"${'x'.repeat(size - 8)}"}`;
        const res = await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: JSON_HEADERS,
          body,
          refusableInFront: true,
        });
        expectEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
      }
    },
  },
  {
    id: 'errors.unsupported-media-type',
    group: 'errors',
    clause: ERRORS,
    title: 'a body that is not application/json is a 415 UNSUPPORTED_MEDIA_TYPE envelope',
    async run(ctx) {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
        const res = await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: { 'Content-Type': type },
          body: '{"a":1}',
        });
        expectEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      }
    },
  },
  {
    id: 'errors.json-media-types',
    group: 'errors',
    clause: 'contract: Errors (415)',
    title: 'application/json with a charset and application/*+json are accepted',
    async run(ctx) {
      for (const type of ['application/json; charset=utf-8', 'application/vnd.example+json']) {
        const res = await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: { 'Content-Type': type },
          body: '{"a":1}',
        });
        expectObject(res, 200);
      }
    },
  },
  {
    id: 'errors.malformed-json',
    group: 'errors',
    clause: ERRORS,
    title: 'a body that is not JSON is a 400 MALFORMED_JSON envelope',
    async run(ctx) {
      for (const body of ['{"a":', '{a:1}', "{'a':1}", '{"a":1,}', '{"a":1} x']) {
        const res = await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body });
        expectEnvelope(res, 400, 'MALFORMED_JSON');
      }
    },
  },
  {
    id: 'errors.bad-http',
    group: 'errors',
    clause: 'spec 7.1; contract: Errors (every error, thrown by a plugin or the framework)',
    title: 'a request HTTP forbids (Content-Length with Transfer-Encoding, no Host) gets a 400 envelope',
    async run(ctx) {
      const path = `${ctx.http.prefix}/api/hello`;
      const host = `Host: ${ctx.http.origin.host}\r\n`;
      for (const [what, bytes] of [
        [
          'Content-Length with Transfer-Encoding',
          `GET ${path} HTTP/1.1\r\n${host}Content-Length: 1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`,
        ],
        ['no Host', `GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`],
      ] as const) {
        const res = await ctx.http.raw(bytes, what);
        expectEnvelope(res, 400, sentCode(res) ?? 'an error code');
      }
    },
  },
  {
    id: 'errors.validation-details',
    group: 'errors',
    clause: 'spec 7.2 rule 4; contract: Errors',
    title: 'a validation failure names each field with its message and the value received',
    async run(ctx) {
      const error = expectValidation(await ctx.get('/api/search?keyword=x&page=abc'), 'page', 'abc');
      expectTrue(error.details[0]?.message !== '', 'a message for each field', () => show(error.details));
    },
  },
];

export const requestIdChecks: Check[] = [
  {
    id: 'request-id.on-success',
    group: 'request-id',
    clause: 'spec 4.7 (request tracking); contract: Everywhere',
    title: 'a successful answer carries X-Request-Id',
    async run(ctx) {
      for (const path of ['/api/hello', '/api/search?keyword=x', '/healthz']) {
        const res = await ctx.get(path);
        expectStatus(res, 200);
        const id = header(res, 'x-request-id');
        if (id === undefined || id === '') fail(`GET ${res.request.path}: an X-Request-Id header`, 'none');
      }
    },
  },
  {
    id: 'request-id.on-error',
    group: 'request-id',
    clause: 'spec 7.1; contract: Everywhere',
    title: 'every error answer carries X-Request-Id, equal to the envelope request_id',
    async run(ctx) {
      const answers = [
        await ctx.get('/api/search'),
        await ctx.send({ method: 'DELETE', path: '/api/hello' }),
        await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body: '{' }),
      ];
      for (const res of answers) {
        const id = header(res, 'x-request-id');
        if (id === undefined || id === '')
          fail(`${res.request.method} ${res.request.path}: an X-Request-Id header`, 'none');
        let sent: unknown;
        try {
          sent = (JSON.parse(res.text) as { error?: { request_id?: unknown } } | null)?.error?.request_id;
        } catch {
          fail(`${res.request.method} ${res.request.path}: a JSON error envelope`, show(res.text));
        }
        expectEqual(sent, id, `${res.request.path}: error.request_id`);
      }
    },
  },
  {
    id: 'request-id.reused',
    group: 'request-id',
    clause: 'contract: Everywhere',
    title: 'a valid incoming X-Request-Id (up to 128 characters) is reused, in the header and in the envelope',
    async run(ctx) {
      const id = 'conformance.Check_1:2-3';
      expectEqual(header(await ctx.get('/api/hello', { 'X-Request-Id': id }), 'x-request-id'), id, 'X-Request-Id');
      const longest = 'r'.repeat(128);
      expectEqual(
        header(await ctx.get('/api/hello', { 'X-Request-Id': longest }), 'x-request-id'),
        longest,
        'a 128-character X-Request-Id',
      );
      const res = await ctx.get('/api/search', { 'X-Request-Id': id });
      expectEqual(header(res, 'x-request-id'), id, 'X-Request-Id of a 400');
      expectEqual(expectEnvelope(res, 400, 'VALIDATION_ERROR').request_id, id, 'error.request_id');
    },
  },
  {
    id: 'request-id.replaced',
    group: 'request-id',
    clause: 'contract: Everywhere',
    title: 'an invalid incoming X-Request-Id is replaced by a new one',
    async run(ctx) {
      for (const sent of ['has space', 'x'.repeat(129), 'semi;colon', 'é']) {
        const value = Buffer.from(sent, 'utf8').toString('latin1');
        const id = header(await ctx.get('/api/hello', { 'X-Request-Id': value }), 'x-request-id');
        if (id === undefined || id === value || !ID.test(id))
          fail(`a new X-Request-Id instead of ${show(sent)}`, show(id));
      }
    },
  },
  {
    id: 'request-id.unique',
    group: 'request-id',
    clause: 'contract: Everywhere',
    title: 'each request gets an id of its own',
    async run(ctx) {
      const ids = new Set<string | undefined>();
      for (let i = 0; i < 5; i += 1) ids.add(header(await ctx.get('/api/hello'), 'x-request-id'));
      expectEqual(ids.size, 5, 'distinct ids for 5 requests');
    },
  },
];

export const httpChecks: Check[] = [
  {
    id: 'http.head',
    group: 'http',
    clause: 'contract: Everywhere',
    title: 'HEAD works wherever GET does, with the same status and no body',
    async run(ctx) {
      const paths = [
        '/api/hello/Ada',
        '/api/search?keyword=x',
        '/api/currencies',
        '/api/currencies/EUR',
        '/api/profile',
      ];
      for (const path of [...paths, '/api/exchange?from=USD&to=EUR&amount=1', '/healthz', '/readyz', '/openapi.json']) {
        const res = await ctx.send({ method: 'HEAD', path });
        expectStatus(res, 200);
        expectEqual(res.body.length, 0, `HEAD ${res.request.path} body length`);
      }
    },
  },
  {
    id: 'http.trailing-slash',
    group: 'http',
    clause: 'contract: Everywhere',
    title: 'a trailing slash is tolerated',
    async run(ctx) {
      for (const path of [
        '/api/hello/Ada/',
        '/api/currencies/',
        '/api/search/?keyword=x',
        '/api/profile/',
        '/healthz/',
      ]) {
        expectObject(await ctx.get(path), 200);
      }
    },
  },
  {
    id: 'http.json-everywhere',
    group: 'http',
    clause: 'contract: Everywhere',
    title: 'answers are application/json; charset=utf-8, errors included',
    async run(ctx) {
      for (const path of ['/api/hello', '/api/currencies/EUR', '/healthz', '/api/nope', '/nope']) {
        const res = await ctx.get(path);
        expectObject(res, res.status);
      }
    },
  },
  {
    id: 'http.bad-percent-encoding',
    group: 'http',
    clause: 'contract: Rate limiting, versioning, limits (percent-encoding)',
    title: 'a path that is not percent-encoded UTF-8 is a 400 VALIDATION_ERROR naming path',
    async run(ctx) {
      for (const path of ['/api/hello/%ZZ', '/api/hello/%ED%A0%80', '/api/hello/%', '/api/hello/%FF']) {
        expectValidation(await ctx.send({ path, refusableInFront: true }), 'path');
      }
    },
  },
];
