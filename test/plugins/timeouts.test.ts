import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { buildApp } from '../../src/app.js';
import { assertEnvelope, type Client, httpClient, parseRawResponse, testConfig } from '../helpers.js';
import { slowClient } from '../raw-http.js';

describe('slow clients', () => {
  let client: Client;
  let port: number;
  let origin: string;
  before(async () => {
    client = await httpClient({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 });
    port = (client.app.server.address() as { port: number }).port;
    origin = `http://127.0.0.1:${port}`;
  });
  after(() => client.close());

  it('cuts off a client that sends its headers a byte at a time, with a 408, serving others meanwhile', async () => {
    const slow = slowClient(port, 'GET /api/hello HTTP/1.1\r\nHost: x\r\n', `X-Slow: ${'a'.repeat(100)}\r\n\r\n`, 200);
    const others: number[] = [];
    for (let i = 0; i < 4; i++) {
      await new Promise((resolve) => setTimeout(resolve, 150));
      const res = await request(`${origin}/api/hello`);
      await res.body.text();
      others.push(res.statusCode);
    }
    const { response, elapsedMs } = await slow;
    assert.deepEqual(others, [200, 200, 200, 200]);
    const res = parseRawResponse(response);
    assertEnvelope(res, 408, 'REQUEST_TIMEOUT');
    assert.equal(res.headers.connection, 'close');
    assert.ok(elapsedMs >= 900 && elapsedMs < 3000, `cut off after ${elapsedMs} ms`);
  });

  it('cuts off a client that sends its body a byte at a time', async () => {
    const body = `{"a":"${'x'.repeat(100)}"}`;
    const head = `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const { response, elapsedMs } = await slowClient(port, head, body, 100);
    assertEnvelope(parseRawResponse(response), 408, 'REQUEST_TIMEOUT');
    assert.ok(elapsedMs >= 1900 && elapsedMs < 4000, `cut off after ${elapsedMs} ms`);
  });

  it('still serves a client that is slow but within the timeouts', async () => {
    const { response } = await slowClient(
      port,
      'GET /api/hello/ada HTTP/1.1\r\n',
      'Host: x\r\nConnection: close\r\n\r\n',
      20,
    );
    const res = parseRawResponse(response);
    assert.equal(res.status, 200);
    assert.equal(res.text, '{"greeting":"Hello, ada!"}');
  });
});

describe('server timeouts', () => {
  it('are set on the server from the configuration', async () => {
    const app = await buildApp(
      testConfig({ headersTimeoutMs: 4000, requestTimeoutMs: 8000, keepAliveTimeoutMs: 65_000 }),
    );
    try {
      assert.equal(app.server.headersTimeout, 4000);
      assert.equal(app.server.requestTimeout, 8000);
      // Two checks of the request timeout (every second) after it: a stalled request gets its 408 first.
      assert.equal(app.server.timeout, 10_000);
      assert.equal(app.server.keepAliveTimeout, 65_000);
    } finally {
      await app.close();
    }
  });
});
