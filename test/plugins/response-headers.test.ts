import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  assertEnvelope,
  type Client,
  httpClient,
  parseRawResponse,
  rawExchange,
  type TestResponse,
  transports,
} from '../helpers.js';

const OTHER = 'https://other.example';
const EXPOSED =
  'X-Request-Id, ETag, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, API-Version, ' +
  'Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin';

function preflight(path: string, origin: string, method: string, headers = 'content-type') {
  return {
    method: 'OPTIONS',
    path,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  };
}

function corsHeaders(res: TestResponse): string[] {
  return Object.keys(res.headers).filter((name) => name.startsWith('access-control-'));
}

/** The headers the contract gives every JSON answer, and none of those that suit HTML pages. */
const API_SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
};
const PAGE_ONLY = [
  'x-xss-protection',
  'x-download-options',
  'x-dns-prefetch-control',
  'x-permitted-cross-domain-policies',
  'origin-agent-cluster',
  'cross-origin-opener-policy',
  'cross-origin-resource-policy',
  'referrer-policy',
];

/** The headers every JSON response carries, whatever its status and however it was produced. */
function assertSecurityHeaders(headers: TestResponse['headers'], cacheControl = 'no-store'): void {
  assert.deepEqual(Object.fromEntries(Object.keys(API_SECURITY).map((name) => [name, headers[name]])), {
    ...API_SECURITY,
    'cache-control': cacheControl,
  });
  for (const name of [...PAGE_ONLY, 'strict-transport-security', 'x-powered-by']) {
    assert.equal(headers[name], undefined, name);
  }
}

for (const [transport, connectClient] of transports) {
  describe(`CORS with CORS_ORIGINS=* (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connectClient();
    });
    after(() => client.close());

    it('answers a preflight from another origin with 204, the methods, headers and exposed headers', async () => {
      for (const [path, method, headers] of [
        ['/api/echo', 'POST', 'content-type'],
        ['/api/v1/profile', 'PUT', 'content-type,if-match'],
        ['/api/profile?version=2', 'PATCH', 'content-type'],
      ] as const) {
        const res = await client.send(preflight(path, OTHER, method, headers));
        assert.equal(res.status, 204, `${path} ${res.text}`);
        assert.equal(res.text, '');
        // RFC 9110 (8.6): a 204 carries no Content-Length.
        assert.equal(res.headers['content-length'], undefined);
        assert.equal(res.headers['access-control-allow-origin'], '*');
        assert.equal(res.headers['access-control-allow-methods'], 'GET, HEAD, POST, PUT, PATCH');
        assert.equal(
          res.headers['access-control-allow-headers'],
          'Accept, Content-Encoding, Content-Type, If-Match, If-None-Match, X-Request-Id, traceparent, tracestate, ' +
            'Connect-Protocol-Version, Connect-Timeout-Ms, Grpc-Timeout, X-Grpc-Web, X-User-Agent',
        );
        assert.equal(res.headers['access-control-expose-headers'], EXPOSED);
        assert.equal(res.headers['access-control-max-age'], '600');
        assert.equal(res.headers['access-control-allow-credentials'], undefined);
        assert.equal(typeof res.headers['x-request-id'], 'string');
        assert.equal(res.headers['api-version'], '1');
        assertSecurityHeaders(res.headers);
      }
    });

    it('lets any origin read responses and errors, with the exposed headers', async () => {
      for (const [path, status] of [
        ['/api/v1/hello', 200],
        ['/api/profile', 200],
        ['/healthz', 200],
        ['/api/nope', 404],
        ['/api/hello?version=2', 400],
      ] as const) {
        const res = await client.send({ path, headers: { origin: OTHER } });
        assert.equal(res.status, status, path);
        assert.equal(res.headers['access-control-allow-origin'], '*', path);
        assert.equal(res.headers['access-control-expose-headers'], EXPOSED, path);
        assert.equal(res.headers['access-control-allow-credentials'], undefined, path);
      }
    });

    it('sends no CORS header to a request without Origin, and says that answers vary by Origin', async () => {
      for (const [path, vary] of [
        ['/api/hello', 'Accept, Accept-Encoding, Origin'],
        ['/api/nope', 'Accept, Accept-Encoding, Origin'],
        ['/healthz', 'Accept-Encoding, Origin'],
        ['/nope', 'Accept-Encoding, Origin'],
      ] as const) {
        const res = await client.send({ path });
        assert.deepEqual(corsHeaders(res), [], path);
        assert.equal(res.headers.vary, vary, path);
      }
    });

    it('answers an OPTIONS that is no preflight as a method the path does not take', async () => {
      const res = await client.send({ method: 'OPTIONS', path: '/api/v1/hello', headers: { origin: OTHER } });
      assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.allow, 'GET, HEAD');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assertEnvelope(await client.send({ method: 'OPTIONS', path: '/api/nope' }), 404, 'NOT_FOUND');
    });
  });

  describe(`CORS with CORS_ORIGINS=https://a.example (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connectClient({ corsOrigins: ['https://a.example', 'https://b.example'] });
    });
    after(() => client.close());

    it('lets a listed origin in, naming it', async () => {
      const res = await client.send({ path: '/api/hello', headers: { origin: 'https://a.example' } });
      assert.equal(res.headers['access-control-allow-origin'], 'https://a.example');
      assert.equal(res.headers['access-control-expose-headers'], EXPOSED);
      assert.match(String(res.headers.vary), /Origin/);
      const pre = await client.send(preflight('/api/echo', 'https://b.example', 'POST'));
      assert.equal(pre.status, 204);
      assert.equal(pre.headers['access-control-allow-origin'], 'https://b.example');
    });

    it('gives another origin no CORS header at all, and no preflight', async () => {
      const res = await client.send({ path: '/api/hello', headers: { origin: OTHER } });
      assert.equal(res.status, 200);
      assert.deepEqual(corsHeaders(res), []);
      assert.match(String(res.headers.vary), /Origin/);
      const pre = await client.send(preflight('/api/echo', OTHER, 'POST'));
      assertEnvelope(pre, 405, 'METHOD_NOT_ALLOWED');
      assert.deepEqual(corsHeaders(pre), []);
      const bare = await client.send({ path: '/api/hello' });
      assert.deepEqual(corsHeaders(bare), []);
    });
  });

  describe(`security headers (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connectClient({ bodyLimit: 64 });
    });
    after(() => client.close());

    it('are on successes, the profile revalidated rather than never stored', async () => {
      for (const path of [
        '/api/hello',
        '/api/v1/currencies/EUR',
        '/healthz',
        '/openapi.json',
        '/docs/json',
        '/metrics',
      ]) {
        const res = await client.send({ path });
        assert.equal(res.status, 200, path);
        assertSecurityHeaders(res.headers);
      }
      assertSecurityHeaders((await client.send({ path: '/api/profile' })).headers, 'no-cache');
    });

    it('of a page, with the browser headers that suit HTML, are on the documentation only', async () => {
      for (const path of ['/docs', '/docs/static/index.css']) {
        const res = await client.send({ path });
        assert.equal(res.status, 200, path);
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
        assert.equal(res.headers['x-frame-options'], 'DENY');
        assert.equal(res.headers['referrer-policy'], 'no-referrer');
        assert.equal(res.headers['x-xss-protection'], '0');
        assert.equal(res.headers['cross-origin-opener-policy'], 'same-origin');
        for (const name of PAGE_ONLY) assert.equal(typeof res.headers[name], 'string', `${path} ${name}`);
      }
    });

    it('are on every kind of error', async () => {
      const json = { 'content-type': 'application/json' };
      for (const [request, status, code] of [
        [{ path: '/api/nope' }, 404, 'NOT_FOUND'],
        [{ path: '/nope' }, 404, 'NOT_FOUND'],
        [{ method: 'DELETE', path: '/api/hello' }, 405, 'METHOD_NOT_ALLOWED'],
        [{ path: '/api/search' }, 400, 'VALIDATION_ERROR'],
        [{ path: '/api/hello', headers: { accept: 'application/vnd.greeting.v2+json' } }, 406, 'NOT_ACCEPTABLE'],
        [
          { method: 'POST', path: '/api/echo', headers: json, body: `{"a":"${'x'.repeat(100)}"}` },
          413,
          'PAYLOAD_TOO_LARGE',
        ],
        [{ method: 'POST', path: '/api/echo', headers: json, body: '{' }, 400, 'MALFORMED_JSON'],
      ] as const) {
        const res = await client.send(request);
        assertEnvelope(res, status, code, res.json().error.details);
        assertSecurityHeaders(res.headers);
      }
    });

    it('are on the 400 for a badly encoded path, raised before routing', async () => {
      for (const path of ['/api/hello/%E0%A4%A', '/nope/%FF']) {
        const res = await client.send({ path, headers: { origin: OTHER } });
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [
          { field: 'path', message: 'must be valid percent-encoded UTF-8', value: path },
        ]);
        assertSecurityHeaders(res.headers);
        // No hook runs for it, but it gets the same fixed headers as every answer: a page can read it.
        assert.equal(res.headers['access-control-allow-origin'], '*');
        assert.equal(res.headers['access-control-expose-headers'], EXPOSED);
        assert.equal(typeof res.headers['x-request-id'], 'string');
      }
    });
  });
}

describe('security headers on errors written to the socket', () => {
  let client: Client;
  let port: number;
  before(async () => {
    client = await httpClient();
    port = (client.app.server.address() as { port: number }).port;
  });
  after(() => client.close());

  it('are on the 400 for a request that is not HTTP', async () => {
    const res = parseRawResponse(await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n'));
    assert.equal(res.status, 400);
    const { headers } = res;
    assertSecurityHeaders(headers);
  });
});
