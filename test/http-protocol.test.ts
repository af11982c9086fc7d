import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { assertEnvelope, type ListeningApp, type LogCapture, listening } from './helpers.js';
import { connectTo, type RawResponse, ResponseReader } from './raw-http.js';

/**
 * Requests at the edges of HTTP/1.1, sent as raw bytes to a listening server: the ones Node's HTTP
 * layer would answer by itself (with a bare status, or not at all), fields that must not repeat,
 * and errors that follow pipelined requests. Each gets the envelope with the headers of any answer.
 */

const API_SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
};
const HELLO = /^\{"message":"Hello, World!","timestamp":"[^"]+"\}$/;
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function assertError(res: RawResponse, status: number, code: string, details: unknown[] = []) {
  const error = assertEnvelope(res, status, code, details);
  assert.deepEqual(
    Object.fromEntries(Object.keys(API_SECURITY).map((name) => [name, res.headers[name]])),
    API_SECURITY,
  );
  return error;
}

/** Opens a connection, writes `bytes` in one go, and reads the answers in order. */
async function send(port: number, bytes: string | Buffer): Promise<ResponseReader> {
  const socket = await connectTo(port);
  const reader = new ResponseReader(socket);
  socket.write(bytes);
  return reader;
}

/** The one answer to `bytes`, after which the server closes the connection. */
async function lastAnswer(port: number, bytes: string | Buffer): Promise<RawResponse> {
  const reader = await send(port, bytes);
  const res = await reader.next();
  assert.equal(res.headers.connection, 'close');
  await reader.closed();
  return res;
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

// With HTTP2=true the port takes HTTP/1.1 through the preface's read-ahead: the same answers, byte for byte.
for (const http2 of [false, true]) {
  const mode = http2 ? ' (HTTP2=true)' : '';
  describe(`answers Node would give by itself${mode}`, () => {
    let server: ListeningApp;
    before(async () => {
      server = await listening({ http2 });
    });
    after(() => server.app.close());

    it('answers an HTTP/1.1 request without Host with 400 VALIDATION_ERROR naming Host, and its request id', async () => {
      const reader = await send(server.port, 'GET /api/hello HTTP/1.1\r\nX-Request-Id: no-host\r\n\r\n');
      const res = await reader.next();
      const error = assertError(res, 400, 'VALIDATION_ERROR', [
        { field: 'Host', message: 'is required in HTTP/1.1', value: null },
      ]);
      assert.equal(error.request_id, 'no-host');
      assert.equal(res.headers['api-version'], '1');
      const line = server.logs.lines.find((l) => l.request_id === 'no-host');
      assert.equal(line?.status, 400);
      reader.socket.destroy();
    });

    it('serves an HTTP/1.0 request without Host, which HTTP/1.0 does not require', async () => {
      const res = await lastAnswer(server.port, 'GET /api/hello HTTP/1.0\r\n\r\n');
      assert.equal(res.status, 200);
      assert.match(res.text, HELLO);
    });

    it('answers an Expect it cannot meet with 417 EXPECTATION_FAILED, and goes on serving the connection', async () => {
      const reader = await send(
        server.port,
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}' +
          get('/api/hello'),
      );
      const res = await reader.next();
      const error = assertError(res, 417, 'EXPECTATION_FAILED');
      assert.equal(
        error.message,
        'Expect: bogus cannot be met; the one expectation this service meets is 100-continue.',
      );
      const next = await reader.next();
      assert.equal(next.status, 200);
      assert.match(next.text, HELLO);
      reader.socket.destroy();
    });

    /** `{"a":1}` to the echo in one chunk, under this Transfer-Encoding. */
    const chunkedEcho = (coding: string) =>
      send(
        server.port,
        `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\n\r\n7\r\n{"a":1}\r\n0\r\n\r\n`,
      );

    it('reads a Transfer-Encoding of chunked among empty list elements as chunked (RFC 9110, 5.6.1)', async () => {
      for (const coding of [', chunked', ',,chunked', ' , chunked']) {
        const reader = await chunkedEcho(coding);
        const res = await reader.next();
        assert.equal(res.status, 200, `${coding}: ${res.text}`);
        assert.deepEqual(res.json().received, { a: 1 });
        reader.socket.destroy();
      }
    });

    it('answers a transfer coding other than chunked with 501 NOT_IMPLEMENTED (RFC 9112, 6.1)', async () => {
      for (const coding of ['gzip, chunked', 'deflate,chunked', 'x-unknown , chunked']) {
        const reader = await chunkedEcho(coding);
        const res = await reader.next();
        const error = assertError(res, 501, 'NOT_IMPLEMENTED');
        assert.equal(
          error.message,
          `Transfer-Encoding: ${coding} is not implemented; the one transfer coding this service reads is chunked.`,
        );
        reader.socket.destroy();
      }
    });

    it('answers a Transfer-Encoding whose last coding is not chunked with 400, then closes (RFC 9112, 6.3): the body has no length', async () => {
      // Node's parser takes the headers of these, then fails on the first byte of the body.
      for (const coding of ['gzip', 'chunked;q=1', 'gzip, chunked;a=b', '"chunked"', 'chunked ;x']) {
        const res = await lastAnswer(
          server.port,
          `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\n\r\n7\r\n{"a":1}\r\n0\r\n\r\n${get('/api/hello')}`,
        );
        const error = assertError(res, 400, 'BAD_REQUEST');
        assert.equal(
          error.message,
          `Transfer-Encoding: ${coding} does not end in chunked, so the body's length cannot be told.`,
          coding,
        );
      }
    });

    it('answers a request once when its body, malformed, comes after its answer (a 404 or 405 given before the body), then closes', async () => {
      for (const [path, status, code] of [
        ['/api/nope', 404, 'NOT_FOUND'],
        ['/api/hello', 405, 'METHOD_NOT_ALLOWED'],
      ] as const) {
        const reader = await send(
          server.port,
          `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n${get('/api/hello')}`,
        );
        assertError(await reader.next(), status, code);
        await reader.closed();
      }
    });

    it('still answers Expect: 100-continue with 100 Continue, then the answer', async () => {
      const reader = await send(
        server.port,
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n',
      );
      assert.equal((await reader.next()).status, 100);
      reader.socket.write('{"a":1}\n');
      const res = await reader.next();
      assert.equal(res.status, 200);
      assert.match(res.text, /^\{"received":\{"a":1\},"echo":true,"timestamp":"[^"]+"\}$/);
      reader.socket.destroy();
    });

    it('meets Expect: 100-continue once the body is read: a request refused on its headers gets its answer alone, then the connection closes', async () => {
      const head = (line: string, type: string, length: number) =>
        `${line} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;
      const refused = [
        [head('POST /api/nowhere', 'application/json', 8), 404, 'NOT_FOUND'],
        [head('POST /api/echo', 'text/plain', 8), 415, 'UNSUPPORTED_MEDIA_TYPE'],
        [head('POST /api/echo', 'application/json', 2 ** 30), 413, 'PAYLOAD_TOO_LARGE'],
        [head('PUT /api/hello', 'application/json', 8), 405, 'METHOD_NOT_ALLOWED'],
      ] as const;
      for (const [bytes, status, code] of refused) {
        // The client waits for the 100 before it sends a body: the first answer read is the final one.
        const reader = await send(server.port, bytes);
        const res = await reader.next();
        assertError(res, status, code);
        assert.equal(res.headers.connection, 'close', code);
        await reader.closed();
      }
    });

    it('answers Expect: 100-continue on a request without a body with 100 at once, and keeps the connection', async () => {
      const reader = await send(server.port, 'GET /api/hello HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n');
      assert.equal((await reader.next()).status, 100);
      const res = await reader.next();
      assert.equal(res.status, 200);
      assert.notEqual(res.headers.connection, 'close');
      reader.socket.write(get('/api/hello'));
      assert.equal((await reader.next()).status, 200);
      reader.socket.destroy();
    });

    it("gives an absolute-form target the router refuses (a fragment, a bad escape) the headers of its path: under /api, the API's", async () => {
      for (const [target, api] of [
        ['http://localhost/api/hello?%=#frag', true],
        ['http://localhost/api/hello/%E0%A4%A', true],
        ['/api/hello/%E0%A4%A', true],
        ['http://localhost/healthz#frag', false],
      ] as const) {
        const reader = await send(server.port, `GET ${target} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
        const res = await reader.next();
        assertError(res, 400, 'VALIDATION_ERROR', [
          { field: 'path', message: 'must be valid percent-encoded UTF-8', value: target },
        ]);
        assert.equal(res.headers['api-version'], api ? '1' : undefined, target);
        assert.equal(res.headers.vary, api ? 'Accept, Accept-Encoding, Origin' : 'Accept-Encoding, Origin', target);
        reader.socket.destroy();
      }
    });

    it('answers CONNECT with 405 and Allow naming the methods the service takes, then closes', async () => {
      const res = await lastAnswer(
        server.port,
        'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nX-Request-Id: tunnel-1\r\n\r\n',
      );
      const error = assertError(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.allow, 'GET, HEAD, POST, PUT, PATCH');
      assert.equal(error.message, 'CONNECT is not allowed here; allowed: GET, HEAD, POST, PUT, PATCH.');
      assert.equal(error.request_id, 'tunnel-1');
      const line = clientErrorLine(server.logs, 'tunnel-1');
      assert.deepEqual([line?.msg, line?.status, line?.reason], ['client error', 405, 'CONNECT']);
    });

    it('answers a request to switch protocols as usual, then closes: what follows it would go unread', async () => {
      const upgrade = 'GET /api/hello HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n';
      const res = await lastAnswer(server.port, upgrade + get('/healthz'));
      assert.equal(res.status, 200);
      assert.match(res.text, HELLO);
    });

    it('reads the body of a request to switch protocols by its Content-Length, as curl --http2 -d sends it, then closes', async () => {
      const upgrade = (body: string, more = '') =>
        `POST /api/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n${more}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      // In the write of the headers, with a request pipelined after it (which goes unread).
      const whole = await lastAnswer(server.port, `${upgrade('{"a":1}')}{"a":1}${get('/healthz')}`);
      assert.equal(whole.status, 200);
      assert.match(whole.text, /^\{"received":\{"a":1\},"echo":true,"timestamp":"[^"]+"\}$/);
      // After the headers, in two writes.
      const reader = await send(server.port, upgrade('{"b":"é"}'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      reader.socket.write('{"b":');
      await new Promise((resolve) => setTimeout(resolve, 50));
      reader.socket.write('"é"}');
      const split = await reader.next();
      assert.equal(split.status, 200);
      assert.deepEqual(split.json().received, { b: 'é' });
      await reader.closed();
      // Read as any body: its JSON judged, its coding decoded.
      assertError(await lastAnswer(server.port, `${upgrade('{')}{`), 400, 'MALFORMED_JSON');
      const gzipped = gzipSync('{"c":3}');
      const coded = await lastAnswer(
        server.port,
        Buffer.concat([
          Buffer.from(upgrade('x'.repeat(gzipped.length), 'Content-Encoding: gzip\r\n'), 'latin1'),
          gzipped,
        ]),
      );
      assert.equal(coded.status, 200);
      assert.deepEqual(coded.json().received, { c: 3 });
    });

    it('meets an Expect of a request to switch protocols as of any other: 100 Continue, or 417', async () => {
      const head = (expect: string) =>
        `POST /api/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nExpect: ${expect}\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n`;
      const reader = await send(server.port, head('100-continue'));
      assert.equal((await reader.next()).status, 100);
      reader.socket.write('{"a":1}');
      const res = await reader.next();
      assert.equal(res.status, 200);
      assert.deepEqual(res.json().received, { a: 1 });
      await reader.closed();
      const refused = await lastAnswer(server.port, `${head('bogus')}{"a":1}`);
      assertError(refused, 417, 'EXPECTATION_FAILED');
    });

    it('answers a chunked body on a request to switch protocols with 501, and one cut short with 400, then closes', async () => {
      const head =
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Type: application/json\r\n';
      const chunked = await lastAnswer(
        server.port,
        `${head}Transfer-Encoding: chunked\r\n\r\n7\r\n{"a":1}\r\n0\r\n\r\n`,
      );
      const error = assertError(chunked, 501, 'NOT_IMPLEMENTED');
      assert.equal(
        error.message,
        'A chunked body on a request that asks to switch protocols is not read; send it with Content-Length.',
      );
      const reader = await send(server.port, `${head}Content-Length: 7\r\n\r\n{"a"`);
      reader.socket.end();
      const cut = assertError(await reader.next(), 400, 'BAD_REQUEST');
      assert.equal(cut.message, 'The request body was not received whole.');
    });

    it('answers an HTTP/2 connection preface and other major versions with 505 HTTP_VERSION_NOT_SUPPORTED', async () => {
      for (const bytes of [
        // With HTTP2=true the preface opens an HTTP/2 connection (test/http/http2.test.ts).
        ...(http2 ? [] : ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n']),
        get('/api/hello').replace('HTTP/1.1', 'HTTP/2.0'),
        get('/api/hello').replace('HTTP/1.1', 'HTTP/3.0'),
        'GET /api/hello\r\n\r\n', // HTTP/0.9
      ]) {
        const error = assertError(await lastAnswer(server.port, bytes), 505, 'HTTP_VERSION_NOT_SUPPORTED');
        assert.equal(error.message, 'Only HTTP/1.0 and HTTP/1.1 are supported.', JSON.stringify(bytes));
      }
    });

    it('answers bytes that are not HTTP/1.x with 400 BAD_REQUEST: TLS, a malformed version, smuggling shapes', async () => {
      const clientHello = Buffer.from('16030100a5010000a10303', 'hex');
      for (const bytes of [
        clientHello,
        get('/api/hello').replace('HTTP/1.1', 'HTTP/1.x'),
        get('/api/hello').replace('HTTP/1.1', 'HTTP/1.2'),
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n',
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      ]) {
        const res = await lastAnswer(server.port, bytes);
        const error = assertError(res, 400, 'BAD_REQUEST');
        assert.match(error.request_id, ID);
        const line = clientErrorLine(server.logs, error.request_id);
        assert.deepEqual([line?.msg, line?.status], ['client error', 400]);
      }
    });

    it('answers a request line over the header limit with 431', async () => {
      const res = await lastAnswer(server.port, get(`/api/hello/${'a'.repeat(20_000)}`));
      assertError(res, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE');
    });
  });

  describe(`fields that must not repeat${mode}`, () => {
    let server: ListeningApp;
    before(async () => {
      server = await listening({ http2 });
    });
    after(() => server.app.close());

    const echo = (headers: string) =>
      `POST /api/echo HTTP/1.1\r\n${headers}Content-Length: 2\r\nX-Request-Id: twice\r\n\r\n{}`;

    it('answers two Host fields with 400 VALIDATION_ERROR, with the values as sent', async () => {
      const reader = await send(server.port, get('/api/hello', 'Host: a.example\r\nhost: b.example\r\n'));
      assertError(await reader.next(), 400, 'VALIDATION_ERROR', [
        { field: 'Host', message: 'must be given once', value: ['a.example', 'b.example'] },
      ]);
      reader.socket.destroy();
    });

    it('answers two Content-Type fields with 400, and each field repeated at once', async () => {
      const reader = await send(
        server.port,
        echo('Host: x\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\n') +
          echo('Host: x\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: application/json\r\n'),
      );
      const error = assertError(await reader.next(), 400, 'VALIDATION_ERROR', [
        { field: 'Content-Type', message: 'must be given once', value: ['application/json', 'text/plain'] },
      ]);
      assert.equal(error.request_id, 'twice');
      assertError(await reader.next(), 400, 'VALIDATION_ERROR', [
        { field: 'Host', message: 'must be given once', value: ['x', 'x'] },
        { field: 'Content-Type', message: 'must be given once', value: ['application/json', 'application/json'] },
      ]);
      reader.socket.destroy();
    });

    it('takes a Content-Type given once with a comma in a quoted parameter', async () => {
      const reader = await send(server.port, echo('Host: x\r\nContent-Type: application/json; x="a,b"\r\n'));
      const res = await reader.next();
      assert.equal(res.status, 200, res.text);
      reader.socket.destroy();
    });

    it('reads a repeated X-Request-Id as one joined value, not a token, so the answer gets a new id', async () => {
      const reader = await send(server.port, get('/api/hello', 'Host: x\r\nX-Request-Id: a\r\nX-Request-Id: b\r\n'));
      const res = await reader.next();
      assert.equal(res.status, 200);
      assert.match(res.headers['x-request-id'] ?? '', ID);
      reader.socket.destroy();
    });
  });

  describe(`an error after pipelined requests${mode}`, () => {
    let server: ListeningApp;
    let released: () => void = () => {};
    before(async () => {
      server = await listening({ http2 }, (app) => {
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

    it('answers a CONNECT after pipelined requests after their answers', async () => {
      const reader = await send(
        server.port,
        `${get('/slow')}${get('/healthz')}CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`,
      );
      assert.equal((await reader.next()).text, '{"slow":true}');
      assert.equal((await reader.next()).text, '{"status":"ok"}');
      const res = await reader.next();
      assertError(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.connection, 'close');
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

  describe(`connections left open, with a short REQUEST_TIMEOUT_MS${mode}`, () => {
    const REQUEST_TIMEOUT_MS = 500;
    let server: ListeningApp;
    before(async () => {
      server = await listening(
        { http2, requestTimeoutMs: REQUEST_TIMEOUT_MS, headersTimeoutMs: REQUEST_TIMEOUT_MS, bodyLimit: 1024 },
        (app) => {
          app.get('/never', () => new Promise(() => {}));
        },
      );
    });
    after(() => server.app.close());

    /** The server's open connections: a client that keeps its side open cannot see the server's side close. */
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        server.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );

    /** Resolves once the server has no connection open, failing if one is still open after `withinMs`. */
    async function allClosed(started: number, withinMs: number): Promise<number> {
      while ((await connections()) > 0) {
        assert.ok(performance.now() - started < withinMs, 'the connection is still open');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return performance.now() - started;
    }

    /** A connection whose client keeps its side open and sends a byte every 200 ms, until it is closed. */
    function drippingClient(bytes: string) {
      const socket = connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true });
      const reader = new ResponseReader(socket);
      socket.write(bytes);
      const drip = setInterval(() => {
        if (socket.writable) socket.write('x');
      }, 200);
      socket.once('close', () => clearInterval(drip));
      return reader;
    }

    it('drops the connection after an error that waits on an answer that never comes, once REQUEST_TIMEOUT_MS is out', async () => {
      const started = performance.now();
      const reader = await send(server.port, `${get('/never')}GARBAGE\r\n\r\n`);
      await reader.closed(REQUEST_TIMEOUT_MS + 3_000);
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= REQUEST_TIMEOUT_MS - 50, `closed after ${elapsed} ms`);
    });

    it('closes a connection whose client keeps it open after the answer to its CONNECT, REQUEST_TIMEOUT_MS after it', async () => {
      const started = performance.now();
      const socket = connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true });
      const reader = new ResponseReader(socket);
      socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
      assertError(await reader.next(), 405, 'METHOD_NOT_ALLOWED');
      const elapsed = await allClosed(started, REQUEST_TIMEOUT_MS + 3_000);
      assert.ok(elapsed >= REQUEST_TIMEOUT_MS - 50, `closed after ${elapsed} ms`);
      socket.destroy();
    });

    it('closes a connection whose client drips bytes after the answer to its CONNECT, REQUEST_TIMEOUT_MS after it', async () => {
      const started = performance.now();
      const reader = drippingClient('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
      const res = await reader.next();
      assertError(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.allow, 'GET, HEAD, POST, PUT, PATCH');
      await allClosed(started, REQUEST_TIMEOUT_MS + 3_000);
      reader.socket.destroy();
    });

    it('answers 408 to a request to switch protocols whose body does not come within REQUEST_TIMEOUT_MS, then closes', async () => {
      const started = performance.now();
      const reader = drippingClient(
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
      );
      assertError(await reader.next(REQUEST_TIMEOUT_MS + 3_000), 408, 'REQUEST_TIMEOUT');
      const elapsed = await allClosed(started, 2 * REQUEST_TIMEOUT_MS + 3_000);
      assert.ok(elapsed >= REQUEST_TIMEOUT_MS - 50, `closed after ${elapsed} ms`);
      reader.socket.destroy();
    });

    it('closes a connection whose client drips the rest of a body over the limit after its 413, REQUEST_TIMEOUT_MS after it', async () => {
      const started = performance.now();
      const reader = drippingClient(
        'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{',
      );
      assertError(await reader.next(), 413, 'PAYLOAD_TOO_LARGE');
      await allClosed(started, REQUEST_TIMEOUT_MS + 3_000);
      reader.socket.destroy();
    });

    for (const [what, head, status] of [
      ['a text/plain body (415)', 'POST /api/echo HTTP/1.1\r\nContent-Type: text/plain', 415],
      ['a body to a path with no route (404)', 'POST /api/nope HTTP/1.1\r\nContent-Type: application/json', 404],
      ['a GET with a body (200)', 'GET /api/hello HTTP/1.1\r\nContent-Type: application/json', 200],
    ] as const) {
      it(`closes the connection once an answer given before its body came is written, ${what}: no 408 follows it`, async () => {
        const started = performance.now();
        const reader = drippingClient(`${head}\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{`);
        try {
          const res = await reader.next();
          assert.equal(res.status, status);
          // Dripped for longer than the request timeout, and yet no 408: the request it belongs to is answered.
          await reader.closed(REQUEST_TIMEOUT_MS + 3_000);
          await allClosed(started, REQUEST_TIMEOUT_MS + 3_000);
        } finally {
          reader.socket.destroy();
        }
      });
    }
  });
}
