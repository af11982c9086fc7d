import assert from 'node:assert/strict';
import { STATUS_CODES } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import type { Config } from '../src/config/index.js';
import { apiError, ERROR_CODES } from '../src/errors.js';
import { API_VERSION } from '../src/version.js';
import { parseRawResponse, rawExchange, sendTo, type TestRequest, type TestResponse, testConfig } from './helpers.js';
import {
  conformanceOf,
  type DocumentConformance,
  documentedOperations,
  type Operation,
} from './openapi-conformance.js';

/**
 * Every (operation, status) pair the OpenAPI document lists is caused by a real request here, and
 * its answer checked against the document: status, required headers, every header's and the
 * body's schema. Requests are built from the document itself (its paths and examples),
 * so an operation added later is covered or this test says which pair it misses.
 *
 * Special setups: a 500 comes from a failing hook added to the app (what any unexpected failure
 * looks like); a 503 from Redis being unreachable (nothing listens on the port); a 429 from a
 * limit of one request; 400 (no Host), 408, 417, 431, 501 and 505 over a raw socket. No pair is documented-only.
 */

/** A header that makes the test app fail unexpectedly: a 500, as any unplanned failure is. */
const FAIL = 'x-test-failure';

interface Server {
  app: FastifyInstance;
  origin: string;
  port: number;
  conformance: DocumentConformance;
}

async function serve(overrides: Partial<Config>): Promise<Server> {
  const app = await buildApp(testConfig(overrides));
  app.addHook('preHandler', async (request) => {
    if (request.headers[FAIL] !== undefined) throw new Error('an unexpected failure');
  });
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, origin, port: (app.server.address() as AddressInfo).port, conformance: await conformanceOf(app) };
}

/** The query of an operation whose defaults take long (ten events a second apart) asking for a quick answer instead. */
const QUICK: Readonly<Record<string, string>> = { getEvents: 'count=1&interval_ms=0' };

function withQuery(path: string, ...parts: string[]): string {
  const query = parts.filter((part) => part !== '').join('&');
  return query === '' ? path : `${path}?${query}`;
}

describe('the OpenAPI document describes every answer of every operation', { timeout: 60_000 }, () => {
  let main: Server;
  let limited: Server;
  let unavailable: Server;
  let oneStream: Server;
  let ops: Operation[];
  const covered = new Set<string>();

  before(async () => {
    [main, limited, unavailable, oneStream] = await Promise.all([
      serve({ bodyLimit: 1024, headersTimeoutMs: 300, requestTimeoutMs: 600 }),
      serve({ rateLimitMax: 1 }),
      // Nothing listens on port 9 of the loopback: Redis is unreachable at once.
      serve({ redisUrl: 'redis://127.0.0.1:9', redisTimeoutMs: 200 }),
      serve({ streamsMax: 1 }),
    ]);
    ops = documentedOperations(main.conformance.document, main.conformance.apiBase);
  });
  after(() => Promise.all([main.app.close(), limited.app.close(), unavailable.app.close(), oneStream.app.close()]));

  /** Sends a request as `operation`, checks the answer against the document, and records the pair. */
  async function expect(server: Server, op: Operation, request: TestRequest, status: number): Promise<TestResponse> {
    const res = await sendTo(server.origin, request);
    assert.equal(res.status, status, `${op.id}: ${request.method ?? 'GET'} ${request.path}: ${res.text.slice(0, 300)}`);
    server.conformance.check(request, res, op.id);
    covered.add(`${op.id} ${status}`);
    return res;
  }

  /** A raw request over a socket, for what no HTTP client sends; checked as an answer of `op`. */
  async function raw(server: Server, op: Operation, bytes: string, status: number): Promise<void> {
    const res = parseRawResponse(await rawExchange(server.port, bytes));
    assert.equal(res.status, status, `${op.id}: ${JSON.stringify(bytes.slice(0, 60))}: ${res.text.slice(0, 300)}`);
    const problems = server.conformance.operationProblems(op.id, { path: op.path }, res);
    assert.deepEqual(problems, [], `${op.id} ${status}`);
    covered.add(`${op.id} ${status}`);
  }

  function valid(op: Operation, extra: Partial<TestRequest> = {}, ...query: string[]): TestRequest {
    return {
      method: op.method,
      path: withQuery(op.path, op.query, QUICK[op.id] ?? '', ...query),
      ...(op.body !== undefined && { body: op.body, headers: { 'content-type': op.media as string } }),
      ...extra,
      headers: {
        ...(op.body !== undefined && { 'content-type': op.media as string }),
        ...extra.headers,
      },
    };
  }

  it('answers each operation’s request made of its examples as documented (2xx), under /api too', async () => {
    const { apiBase } = main.conformance;
    for (const op of ops) {
      await expect(main, op, valid(op), 200);
      const unversioned = op.path.replace(`${apiBase}/v${API_VERSION}/`, `${apiBase}/`);
      if (op.api)
        await expect(main, op, valid(op, { path: withQuery(unversioned, op.query, QUICK[op.id] ?? '') }), 200);
    }
  });

  it('answers the errors every operation may give as documented', async () => {
    for (const op of ops) {
      if (op.api) {
        await expect(main, op, valid(op, {}, 'version=2'), 400);
        const versioned = `${main.conformance.apiBase}/v${API_VERSION}/`;
        const other = op.path.replace(versioned, `${main.conformance.apiBase}/v2/`);
        await expect(main, op, valid(op, { path: withQuery(other, op.query) }), 404);
        await expect(main, op, valid(op, { headers: { accept: 'application/vnd.greeting.v2+json' } }), 406);
      } else {
        await raw(main, op, `${op.method} ${op.path} HTTP/1.1\r\nConnection: close\r\n\r\n`, 400);
        await expect(main, op, { path: `${op.path}/nope` }, 404);
      }
      await expect(main, op, valid(op, { method: 'DELETE' }), 405);
      const target = withQuery(op.path, op.query);
      await raw(
        main,
        op,
        `${op.method} ${target} HTTP/1.1\r\nHost: x\r\nExpect: else\r\nConnection: close\r\n\r\n`,
        417,
      );
      await raw(
        main,
        op,
        `${op.method} ${target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`,
        501,
      );
      await expect(main, op, valid(op, { headers: { [FAIL]: '1' } }), 500);
      await raw(main, op, `GET ${op.path} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431);
      await raw(main, op, `GET ${op.path} HTTP/2.0\r\nHost: x\r\n\r\n`, 505);
    }
    // Answered before routing: a request that is not valid HTTP, a request that stops short.
    const [first] = ops;
    assert.ok(first !== undefined);
    await raw(
      main,
      first,
      `GET ${first.path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n`,
      400,
    );
    await Promise.all(ops.map((op) => raw(main, op, `GET ${op.path} HTTP/1.1\r\nHost: x\r\n`, 408)));
  });

  it('answers the 429 of every rate-limited operation as documented', async () => {
    const api = ops.filter((op) => op.api);
    const [first] = api;
    assert.ok(first !== undefined);
    await expect(limited, first, valid(first), 200);
    for (const op of api) await expect(limited, op, valid(op), 429);
  });

  it('answers the errors of each operation’s own as documented', async () => {
    const byId = new Map(ops.map((op) => [op.id, op]));
    const op = (id: string) => byId.get(id) as Operation;
    const profile = await expect(main, op('getProfile'), valid(op('getProfile')), 200);
    const etag = String(profile.headers.etag);
    await expect(main, op('getProfile'), valid(op('getProfile'), { headers: { 'if-none-match': etag } }), 304);
    await expect(main, op('getProfile'), valid(op('getProfile'), { headers: { 'if-match': '"nope"' } }), 412);
    await expect(unavailable, op('getProfile'), valid(op('getProfile')), 503);
    for (const id of ['echo', 'updateProfile', 'patchProfile', 'replaceProfile']) {
      const write = op(id);
      await expect(main, write, valid(write, { body: `{"bio":"${'x'.repeat(2000)}"}` }), 413);
      await expect(main, write, valid(write, { headers: { 'content-type': 'text/plain' } }), 415);
      if (id === 'echo') continue;
      await expect(main, write, valid(write, { headers: { 'if-match': '"nope"' } }), 412);
      await expect(unavailable, write, valid(write), 503);
    }
    await expect(
      main,
      op('exchange'),
      valid(op('exchange'), { path: withQuery(op('exchange').path, 'from=XXX&to=EUR&amount=1') }),
      422,
    );
    await expect(unavailable, op('getReadiness'), valid(op('getReadiness')), 503);
    await expect(main, op('getEvents'), valid(op('getEvents'), { headers: { 'last-event-id': '1' } }), 204);
    // The one stream oneStream serves, open while the next is asked for.
    const open = new AbortController();
    const stream = await fetch(`${oneStream.origin}${op('getEvents').path}?interval_ms=60000`, { signal: open.signal });
    assert.equal(stream.status, 200);
    await expect(oneStream, op('getEvents'), valid(op('getEvents')), 503);
    open.abort();
  });

  it('has covered every (operation, status) pair the document lists', () => {
    const documented = main.conformance.pairs().map(({ operationId, status }) => `${operationId} ${status}`);
    assert.deepEqual(
      documented.filter((pair) => !covered.has(pair)),
      [],
    );
  });

  it('lists as the envelope’s codes exactly the codes the service has, and the service makes no other', () => {
    const envelope = main.conformance.document.components.schemas.ErrorEnvelope;
    assert.deepEqual(envelope.properties.error.properties.code.enum, Object.keys(ERROR_CODES));
    // Every error is made by apiError or with a code the type allows; for any status, apiError's is one.
    for (const status of Object.keys(STATUS_CODES).map(Number)) {
      if (status >= 400) assert.ok(Object.hasOwn(ERROR_CODES, apiError(status).code), String(status));
    }
  });

  it('finds an answer the document does not describe', () => {
    const { conformance } = main;
    const ok = { status: 200, headers: {}, text: '{"greeting":"Hello, Ada!"}' };
    const problems = conformance.problems({ path: '/api/hello/Ada' }, ok);
    assert.ok(
      problems.some((problem) => problem.includes('header X-Request-Id is missing')),
      problems.join('\n'),
    );
    const teapot = conformance.problems({ path: '/api/hello/Ada' }, { ...ok, status: 418 });
    assert.match(teapot.join('\n'), /status 418 is not documented/);
    const headers = { 'content-type': 'application/json; charset=utf-8' };
    const wrong = conformance.problems({ path: '/api/hello/Ada' }, { status: 200, headers, text: '{"greeting":1}' });
    assert.match(wrong.join('\n'), /the body does not match its schema/);
    const code = conformance.problems(
      { path: '/api/nope' },
      {
        status: 404,
        headers,
        text: '{"error":{"code":"GONE","message":"x","details":[],"timestamp":"t","request_id":"r"}}',
      },
    );
    assert.match(code.join('\n'), /the body does not match its schema/);
  });
});
