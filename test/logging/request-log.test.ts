import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import { LogCapture, rawExchange, testConfig } from '../helpers.js';

/** Every field of a request's line, in pino's order: its own fields, then the request's, then the message. */
const FIELDS = [
  'level',
  'time',
  'pid',
  'hostname',
  'request_id',
  'method',
  'url',
  'route',
  'status',
  'duration_ms',
  'msg',
];

describe('the request log line', () => {
  const logs = new LogCapture();
  let app: FastifyInstance;
  before(async () => {
    app = await buildApp(testConfig({ logLevel: 'info', rateLimitMax: 0 }), { logStream: logs });
    await app.ready();
  });
  after(() => app.close());

  it('is one JSON line per request with the contract fields, in the format pino writes', async () => {
    const before = Date.now();
    const res = await app.inject({ url: '/api/v1/hello/ada?version=1', headers: { 'x-request-id': 'trace-1' } });
    const line = logs.lineOf('trace-1');
    assert.deepEqual(Object.keys(line), FIELDS);
    const { time, duration_ms, ...rest } = line;
    assert.deepEqual(rest, {
      level: 30,
      pid: process.pid,
      hostname: hostname(),
      request_id: 'trace-1',
      method: 'GET',
      url: '/api/v1/hello/ada?version=1',
      route: '/api/hello/:name',
      status: res.statusCode,
      msg: 'request completed',
    });
    assert.ok(typeof time === 'number' && time >= before && time <= Date.now());
    assert.ok(typeof duration_ms === 'number' && duration_ms >= 0 && duration_ms < 1000);
    // pino's own lines (start-up, warnings) share the level, time, pid and hostname fields.
    app.log.info({ request_id: 'pino-1' }, 'by pino');
    const pino = logs.lineOf('pino-1');
    assert.deepEqual(Object.keys(pino).slice(0, 4), FIELDS.slice(0, 4));
  });

  it('logs a request no route takes with route null, and one of every method and status', async () => {
    const cases = [
      { method: 'GET', url: '/api/nope', status: 404, route: null },
      { method: 'DELETE', url: '/api/hello', status: 405, route: null },
      { method: 'GET', url: '/api/search', status: 400, route: '/api/search' },
      { method: 'HEAD', url: '/api/hello', status: 200, route: '/api/hello' },
    ] as const;
    for (const [i, { method, url, status, route }] of cases.entries()) {
      const id = `case-${i}`;
      const res = await app.inject({ method, url, headers: { 'x-request-id': id } });
      assert.equal(res.statusCode, status);
      assert.deepEqual((({ method, url, route, status }) => ({ method, url, route, status }))(logs.lineOf(id)), {
        method,
        url,
        route,
        status,
      });
    }
  });

  it('writes any URL a client sends so that JSON reads it back exactly', async () => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    let n = 0;
    const sent = async (target: string) => {
      const id = `url-${n++}`;
      await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`);
      assert.equal(logs.lineOf(id).url, target);
    };
    for (const target of ['/api/hello/"quoted"\\back', '/api/nope?x={"a":[1]}&y=\\u0000', '/api/hello/%00%22']) {
      await sent(target);
    }
    // Every character a request line may carry in its target, in any order.
    const printable = fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code));
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: printable, maxLength: 40 }), (text) => sent(`/api/hello/${text}`)),
      { seed: 4242, numRuns: 200 },
    );
  });

  it('is, byte for byte, the line pino writes for the same fields', async () => {
    const raw: string[] = [];
    const text = { write: (line: string) => raw.push(line) };
    const lines = await buildApp(testConfig({ logLevel: 'info', rateLimitMax: 0 }), { logStream: text });
    try {
      await lines.listen({ port: 0, host: '127.0.0.1' });
      const { port } = lines.server.address() as AddressInfo;
      // Quotes and backslashes among them, which the line must escape as JSON does.
      const printable = fc
        .integer({ min: 0x21, max: 0x7e })
        .map((code) => String.fromCharCode(code))
        .filter((char) => !'%?#/'.includes(char));
      await fc.assert(
        fc.asyncProperty(fc.string({ unit: printable, minLength: 1, maxLength: 30 }), async (name) => {
          raw.length = 0;
          const url = `/api/hello/${name}`;
          await rawExchange(
            port,
            `GET ${url} HTTP/1.1\r\nHost: x\r\nX-Request-Id: pinned\r\nConnection: close\r\n\r\n`,
          );
          const [ours = ''] = raw;
          const { time, duration_ms } = JSON.parse(ours);
          let theirs = '';
          const logger = pino(
            { base: { pid: process.pid, hostname: hostname() }, timestamp: () => `,"time":${time}` },
            { write: (line: string) => (theirs = line) },
          );
          const fields = { method: 'GET', url, route: '/api/hello/:name', status: 200, duration_ms };
          logger.child({ request_id: 'pinned' }).info(fields, 'request completed');
          assert.equal(ours, theirs);
        }),
        { seed: 1717, numRuns: 100 },
      );
    } finally {
      await lines.close();
    }
  });

  it('writes nothing per request above the info level', async () => {
    const quiet = new LogCapture();
    const warnApp = await buildApp(testConfig({ logLevel: 'warn' }), { logStream: quiet });
    try {
      await warnApp.inject({ url: '/api/hello' });
      await warnApp.inject({ url: '/api/nope' });
      assert.deepEqual(quiet.lines, []);
    } finally {
      await warnApp.close();
    }
  });
});
