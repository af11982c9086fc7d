import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import {
  assertEnvelope,
  type Client,
  LogCapture,
  type TestRequest,
  type TestResponse,
  testConfig,
  transports,
} from '../helpers.js';

const JSON_TYPE = { 'content-type': 'application/json' };

/** One request of every kind the API serves, each given as its path under `/api`. */
const REQUESTS: (TestRequest & { name: string })[] = [
  { name: 'hello', path: '/hello' },
  { name: 'greeting', path: '/hello/Ada%20Lovelace' },
  { name: 'search', path: '/search?keyword=books&page=2' },
  { name: 'search error', path: '/search?page=0' },
  { name: 'echo', method: 'POST', path: '/echo', headers: JSON_TYPE, body: '{"n":12345678901234567890,"a":[1]}' },
  { name: 'echo error', method: 'POST', path: '/echo', headers: JSON_TYPE, body: '[1]' },
  { name: 'profile', path: '/profile' },
  { name: 'exchange', path: '/exchange?from=usd&to=JPY&amount=100.5' },
  { name: 'exchange error', path: '/exchange?from=USD&to=ZZZ&amount=1' },
  { name: 'currencies', path: '/currencies?sort=-rate&per_page=3&fields=code,rate' },
  { name: 'currencies cursor', path: '/currencies?limit=2&q=dollar' },
  { name: 'currency', path: '/currencies/eur' },
  { name: 'no currency', path: '/currencies/XYZ' },
  { name: 'HEAD', method: 'HEAD', path: '/hello' },
];

/** What must be the same under both paths: status, ETag and the body without the fields that differ by time or request. */
function comparable(res: TestResponse) {
  const body =
    res.text === ''
      ? ''
      : JSON.parse(res.text, (key, value) => (key === 'timestamp' || key === 'request_id' ? undefined : value));
  return { status: res.status, etag: res.headers.etag, contentType: res.headers['content-type'], body };
}

function assertVersionHeaders(res: TestResponse): void {
  assert.equal(res.headers['api-version'], '1', res.text);
  assert.match(String(res.headers.vary), /^Accept(, |$)/);
}

for (const [transport, connect] of transports) {
  describe(`versioning (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    for (const { name, path, ...request } of REQUESTS) {
      it(`answers ${name} identically under /api and /api/v1`, async () => {
        const plain = await client.send({ ...request, path: `/api${path}` });
        const versioned = await client.send({ ...request, path: `/api/v1${path}` });
        assert.deepEqual(comparable(versioned), comparable(plain));
        assertVersionHeaders(plain);
        assertVersionHeaders(versioned);
      });
    }

    it('honours version=1, version=v1 and the v1 media type, answering plain JSON', async () => {
      const expected = comparable(await client.send({ path: '/api/hello/ada' }));
      for (const request of [
        { path: '/api/hello/ada?version=1' },
        { path: '/api/v1/hello/ada?version=v1' },
        { path: '/api/hello/ada', headers: { accept: 'application/vnd.greeting.v1+json' } },
        { path: '/api/hello/ada', headers: { accept: 'Application/VND.greeting.v1+JSON; charset=utf-8' } },
        { path: '/api/hello/ada', headers: { accept: 'application/vnd.greeting.v2+json, application/json;q=0.1' } },
        { path: '/api/hello/ada', headers: { accept: 'text/html' } },
      ]) {
        const res = await client.send(request);
        assert.deepEqual(comparable(res), expected, JSON.stringify(request));
        assertVersionHeaders(res);
      }
    });

    it('answers 404 for another version in the path', async () => {
      for (const path of ['/api/v2/hello', '/api/v0/profile', '/api/v1/v1/hello', '/api/v1x/hello', '/api/V1/hello']) {
        const error = assertEnvelope(await client.send({ path }), 404, 'NOT_FOUND');
        assert.equal(error.message, `No route for GET ${path}.`);
      }
    });

    it('answers 400 naming version for another version parameter, with the value as sent', async () => {
      for (const [query, value, message] of [
        ['version=2', '2', 'must be 1 or v1'],
        ['version=V1', 'V1', 'must be 1 or v1'],
        ['version=', '', 'must be 1 or v1'],
        ['version=1&version=2', ['1', '2'], 'must be given once'],
        ['version=1&version=1', ['1', '1'], 'must be given once'],
      ] as const) {
        for (const path of [`/api/hello?${query}`, `/api/v1/currencies?${query}`, `/api/nope?${query}`]) {
          const res = await client.send({ path });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'version', message, value }]);
          assertVersionHeaders(res);
        }
      }
    });

    it('checks the version before the body', async () => {
      const res = await client.send({ method: 'POST', path: '/api/echo?version=2', headers: JSON_TYPE, body: '[' });
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'version', message: 'must be 1 or v1', value: '2' }]);
    });

    it('answers 406 when Accept asks only for versions that do not exist', async () => {
      for (const accept of [
        'application/vnd.greeting.v2+json',
        'application/vnd.greeting.v2+json, application/vnd.greeting.v3+json;q=0.5',
        'application/vnd.greeting.v1+json;q=0, application/vnd.greeting.v2+json',
      ]) {
        const res = await client.send({ path: '/api/v1/hello', headers: { accept } });
        const error = assertEnvelope(res, 406, 'NOT_ACCEPTABLE');
        assert.match(error.message, /Only API version 1 exists/);
        assertVersionHeaders(res);
      }
    });

    it('answers 405 with Allow under /api/v1', async () => {
      for (const [method, path, allow] of [
        ['POST', '/api/v1/hello', 'GET, HEAD'],
        ['DELETE', '/api/v1/profile', 'GET, HEAD, POST, PATCH, PUT'],
        ['GET', '/api/v1/echo/', 'POST'],
      ] as const) {
        const res = await client.send({ method, path, headers: JSON_TYPE, body: '{}' });
        assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
        assert.equal(res.headers.allow, allow);
        assertVersionHeaders(res);
      }
    });

    it('answers a badly encoded versioned path with 400 naming the path as sent', async () => {
      const res = await client.send({ path: '/api/v1/hello/%E0%A4%A' });
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [
        { field: 'path', message: 'must be valid percent-encoded UTF-8', value: '/api/v1/hello/%E0%A4%A' },
      ]);
      assertVersionHeaders(res);
    });

    it('puts API-Version on 404s under /api, and on nothing outside it', async () => {
      assertVersionHeaders(await client.send({ path: '/api/nope' }));
      assertVersionHeaders(await client.send({ path: '/api' }));
      for (const path of ['/healthz', '/readyz', '/version', '/openapi.json', '/nope', '/apix']) {
        const res = await client.send({ path });
        assert.equal(res.headers['api-version'], undefined, path);
        assert.doesNotMatch(String(res.headers.vary), /\bAccept(?!-)/, path);
      }
    });

    it('leaves version and Accept alone outside /api', async () => {
      const res = await client.send({
        path: '/healthz?version=2',
        headers: { accept: 'application/vnd.greeting.v2+json' },
      });
      assert.equal(res.status, 200);
    });
  });

  describe(`versioning under CONTEXT_PATH=/svc (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ contextPath: '/svc' });
    });
    after(() => client.close());

    it('serves /svc/api/v1 as /svc/api, and nothing at /api/v1', async () => {
      const res = await client.send({ path: '/svc/api/v1/hello/x' });
      assert.equal(res.text, '{"greeting":"Hello, x!"}');
      assertVersionHeaders(res);
      const outside = await client.send({ path: '/api/v1/hello/x' });
      assertEnvelope(outside, 404, 'NOT_FOUND');
      assert.equal(outside.headers['api-version'], undefined);
      assertEnvelope(await client.send({ path: '/svc/api/v1/hello/x?version=3' }), 400, 'VALIDATION_ERROR', [
        { field: 'version', message: 'must be 1 or v1', value: '3' },
      ]);
    });
  });
}

describe('versioned requests in the log', () => {
  it('logs the URL as sent and the route it was served by', async () => {
    const logs = new LogCapture();
    const app = await buildApp(testConfig({ logLevel: 'info' }), { logStream: logs });
    try {
      const res = await app.inject({ url: '/api/v1/hello/ada?version=1' });
      const line = logs.lines.find((l) => l.request_id === res.headers['x-request-id']);
      assert.ok(line);
      assert.equal(line.url, '/api/v1/hello/ada?version=1');
      assert.equal(line.route, '/api/hello/:name');
    } finally {
      await app.close();
    }
  });
});
