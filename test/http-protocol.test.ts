import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import type { Config } from '../src/config.js';
import { assertEnvelope, LogCapture, testConfig } from './helpers.js';
import { connectTo, type RawResponse, ResponseReader } from './raw-http.js';

/**
 * Requests at the edges of HTTP/1.1, sent as raw bytes to a listening server: errors that follow
 * pipelined requests. Each gets the envelope with the headers of any answer.
 */

const API_SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
};
const HELLO = /^\{"message":"Hello, World!","timestamp":"[^"]+"\}$/;

function assertError(res: RawResponse, status: number, code: string, details: unknown[] = []) {
  const error = assertEnvelope(res, status, code, details);
  assert.deepEqual(
    Object.fromEntries(Object.keys(API_SECURITY).map((name) => [name, res.headers[name]])),
    API_SECURITY,
  );
  return error;
}

interface Server {
  app: FastifyInstance;
  port: number;
  logs: LogCapture;
}

/** The service listening on a free loopback port, with its log lines captured, and routes of the test's own. */
async function listening(overrides: Partial<Config> = {}, routes: (app: FastifyInstance) => void = () => {}) {
  const logs = new LogCapture();
  const app = await buildApp(testConfig({ logLevel: 'info', ...overrides }), { logStream: logs });
  routes(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: (app.server.address() as { port: number }).port, logs };
}

/** Opens a connection, writes `bytes` in one go, and reads the answers in order. */
async function send(port: number, bytes: string | Buffer): Promise<ResponseReader> {
  const socket = await connectTo(port);
  const reader = new ResponseReader(socket);
  socket.write(bytes);
  return reader;
}

function get(path: string, headers = 'Host: x\r\n'): string {
  return `GET ${path} HTTP/1.1\r\n${headers}\r\n`;
}

/** The 'client error' line logged for an answer written to the socket. */
function clientErrorLine(logs: LogCapture, id: string) {
  const lines = logs.lines.filter((line) => line.request_id === id);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  return lines[0];
}

describe('an error after pipelined requests', () => {
  let server: Server;
  let released: () => void = () => {};
  before(async () => {
    server = await listening({}, (app) => {
      app.get('/slow', async () => {
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { slow: true };
      });
      app.post('/held', async () => {
        await new Promise<void>((resolve) => {
          released = resolve;
        });
        return { held: true };
      });
    });
  });
  after(() => server.app.close());

  it('answers the valid requests first, in order, then the 400, then closes', async () => {
    const reader = await send(server.port, `${get('/api/hello')}${get('/healthz')}GARBAGE\r\n\r\n`);
    const first = await reader.next();
    assert.equal(first.status, 200);
    assert.match(first.text, HELLO);
    const second = await reader.next();
    assert.equal(second.status, 200);
    assert.equal(second.text, '{"status":"ok"}');
    const error = assertError(await reader.next(), 400, 'BAD_REQUEST');
    assert.equal(clientErrorLine(server.logs, error.request_id)?.reason, 'HPE_INVALID_METHOD');
    await reader.closed();
  });

  it('waits for a slow answer before the 400', async () => {
    const reader = await send(server.port, `${get('/slow')}${get('/api/hello')}\x01\r\n\r\n`);
    assert.equal((await reader.next()).text, '{"slow":true}');
    assert.match((await reader.next()).text, HELLO);
    const error = assertError(await reader.next(), 400, 'BAD_REQUEST');
    assert.equal(error.message, 'Bad Request.');
    await reader.closed();
  });

  it('answers a malformed chunked body at once, without waiting for the request it belongs to', async () => {
    const reader = await send(
      server.port,
      'POST /held HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    );
    const res = await reader.next(2_000);
    assertError(res, 400, 'BAD_REQUEST');
    assert.equal(res.headers.connection, 'close');
    await reader.closed();
    released();
  });
});

describe('connections left open, with a short REQUEST_TIMEOUT_MS', () => {
  const REQUEST_TIMEOUT_MS = 500;
  let server: Server;
  before(async () => {
    server = await listening({ requestTimeoutMs: REQUEST_TIMEOUT_MS, headersTimeoutMs: REQUEST_TIMEOUT_MS }, (app) => {
      app.get('/never', () => new Promise(() => {}));
    });
  });
  after(() => server.app.close());

  it('drops the connection after an error that waits on an answer that never comes, once REQUEST_TIMEOUT_MS is out', async () => {
    const started = performance.now();
    const reader = await send(server.port, `${get('/never')}GARBAGE\r\n\r\n`);
    await reader.closed(REQUEST_TIMEOUT_MS + 3_000);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= REQUEST_TIMEOUT_MS - 50, `closed after ${elapsed} ms`);
  });
});
