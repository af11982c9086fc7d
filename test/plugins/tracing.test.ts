import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { ProfileStore } from '../../src/stores/profile.js';
import { LogCapture, rawExchange, testConfig } from '../helpers.js';
import { INVALID_TRACEPARENTS, PARENT_ID, TRACE_ID, VALID_TRACEPARENT } from '../tracing/traceparents.js';

/** A request's line, in pino's order, with the trace's fields after the request id. */
const TRACED_FIELDS = [
  'level',
  'time',
  'pid',
  'hostname',
  'request_id',
  'trace_id',
  'span_id',
  'method',
  'url',
  'route',
  'status',
  'duration_ms',
  'msg',
];
const UNTRACED_FIELDS = TRACED_FIELDS.filter((field) => field !== 'trace_id' && field !== 'span_id');

/** A store that fails as no store should: the request answers 500 and is logged with its error. */
const BROKEN_STORE: ProfileStore = {
  get: () => Promise.reject(new Error('the disk caught fire')),
  compareAndSet: () => Promise.reject(new Error('the disk caught fire')),
};

describe('W3C Trace Context without export', () => {
  const logs = new LogCapture();
  let app: FastifyInstance;
  before(async () => {
    app = await buildApp(testConfig({ logLevel: 'info', rateLimitMax: 0 }), {
      logStream: logs,
      profileStore: BROKEN_STORE,
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => app.close());

  it('continues a valid traceparent: the line has its trace id and a span id of its own, the answer is unchanged', async () => {
    const before = Date.now();
    const res = await app.inject({
      url: '/api/hello/ada',
      headers: { traceparent: VALID_TRACEPARENT, tracestate: 'rojo=00f067aa0ba902b7', 'x-request-id': 'traced-1' },
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, '{"greeting":"Hello, ada!"}');
    assert.equal(res.headers['x-request-id'], 'traced-1');
    // The answer names no trace: the contract lists the headers every answer carries.
    for (const name of ['traceparent', 'tracestate', 'traceresponse']) assert.equal(res.headers[name], undefined);
    const line = logs.lineOf('traced-1');
    assert.deepEqual(Object.keys(line), TRACED_FIELDS);
    const { time, duration_ms, span_id, ...rest } = line;
    assert.deepEqual(rest, {
      level: 30,
      pid: process.pid,
      hostname: hostname(),
      request_id: 'traced-1',
      trace_id: TRACE_ID,
      method: 'GET',
      url: '/api/hello/ada',
      route: '/api/hello/:name',
      status: 200,
      msg: 'request completed',
    });
    assert.match(String(span_id), /^[0-9a-f]{16}$/);
    assert.notEqual(span_id, PARENT_ID);
    assert.ok(typeof time === 'number' && time >= before && time <= Date.now());
    assert.ok(typeof duration_ms === 'number' && duration_ms >= 0);
  });

  it('gives each request of a trace its own span id, whatever its flags', async () => {
    const unsampled = VALID_TRACEPARENT.replace(/-01$/, '-00');
    for (const [id, traceparent] of [
      ['span-a', VALID_TRACEPARENT],
      ['span-b', VALID_TRACEPARENT],
      ['span-c', unsampled],
    ]) {
      await app.inject({ url: '/api/hello', headers: { traceparent, 'x-request-id': id } });
    }
    const spans = ['span-a', 'span-b', 'span-c'].map((id) => logs.lineOf(id).span_id);
    assert.equal(new Set(spans).size, 3);
    assert.ok(['span-a', 'span-b', 'span-c'].every((id) => logs.lineOf(id).trace_id === TRACE_ID));
  });

  it('invents no trace for a request without traceparent, nor for a tracestate alone', async () => {
    await app.inject({ url: '/api/hello', headers: { 'x-request-id': 'plain-1' } });
    await app.inject({ url: '/api/hello', headers: { 'x-request-id': 'plain-2', tracestate: 'rojo=1' } });
    assert.deepEqual(Object.keys(logs.lineOf('plain-1')), UNTRACED_FIELDS);
    assert.deepEqual(Object.keys(logs.lineOf('plain-2')), UNTRACED_FIELDS);
  });

  for (const [what, traceparent] of INVALID_TRACEPARENTS) {
    it(`ignores a traceparent with ${what}: no trace in the line, the same answer`, async () => {
      const id = `invalid-${what.replaceAll(/[^a-z0-9]/g, '-')}`;
      const res = await app.inject({ url: '/api/hello/ada', headers: { traceparent, 'x-request-id': id } });
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, '{"greeting":"Hello, ada!"}');
      assert.equal(res.headers['x-request-id'], id);
      assert.deepEqual(Object.keys(logs.lineOf(id)), UNTRACED_FIELDS);
    });
  }

  it('ignores traceparent sent twice, even twice the same', async () => {
    const { port } = app.server.address() as AddressInfo;
    const other = `00-${'1'.repeat(32)}-${PARENT_ID}-01`;
    for (const [id, second] of [
      ['twice-same', VALID_TRACEPARENT],
      ['twice-other', other],
    ] as const) {
      const answer = await rawExchange(
        port,
        `GET /api/hello/ada HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\ntraceparent: ${VALID_TRACEPARENT}\r\n` +
          `traceparent: ${second}\r\nConnection: close\r\n\r\n`,
      );
      assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
      assert.deepEqual(Object.keys(logs.lineOf(id)), UNTRACED_FIELDS);
    }
  });

  it("puts the trace on a failed request's error line too", async () => {
    const res = await app.inject({
      url: '/api/profile',
      headers: { traceparent: VALID_TRACEPARENT, 'x-request-id': 'failed-1' },
    });
    assert.equal(res.statusCode, 500);
    const line = logs.lineOf('failed-1');
    assert.equal(line.level, 50);
    assert.equal(line.msg, 'request failed');
    assert.equal(line.trace_id, TRACE_ID);
    assert.match(String(line.span_id), /^[0-9a-f]{16}$/);
  });
});
