import assert from 'node:assert/strict';
import { METHODS } from 'node:http';
import { connect as connectHttp2, constants } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { request as http1Request } from 'undici';
import { HTTP2_LIMITS } from '../../src/http/http2-sessions.js';
import { API_SECURITY_HEADERS } from '../../src/plugins/response-headers.js';
import { CONNECTION_SPECIFIC, h2, readStream } from '../h2-client.js';
import {
  ErrorCode,
  Flag,
  FrameType,
  frame,
  headersFrame,
  PREFACE,
  RawH2,
  requestFields,
  settingsFrame,
} from '../h2-frames.js';
import { assertEnvelope, type ListeningApp, listening, parseRawResponse, rawExchange, sendHttp2 } from '../helpers.js';
import { CURL_SKIP, H2LOAD_SKIP, parseH2load, run } from '../http2-tools.js';
import { connectTo, ResponseReader } from '../raw-http.js';
import { exitOf, killAllServers, startServer } from '../server-process.js';

/**
 * HTTP/2 with prior knowledge (h2c) beside HTTP/1.1 on one port, HTTP2=true: how a connection is
 * told apart by its first bytes, what HTTP/2 answers that HTTP/1.1 answers too (errors, Expect,
 * CONNECT, a repeated field), the request timeout per stream, idle sessions, the log line, curl
 * and h2load, and the shutdown of a session. Every route's answers over h2c are held to the route
 * tests (the `http2` transport of test/helpers.ts); the attacks are in http2-attacks.test.ts.
 */

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 1_500;
const KEEP_ALIVE_TIMEOUT_MS = 2_500;
/** How late a timeout may come on a machine running other test files: Node checks HTTP/1.1's every 250 ms here. */
const LATE_MS = 2_000;

/** Resolves once `done()` holds, looking every 10 ms for up to 2 s. */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  for (const deadline = performance.now() + 2_000; !(await done()) && performance.now() < deadline; ) await sleep(10);
}

describe('HTTP/2 with prior knowledge beside HTTP/1.1 on one port', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening({
      http2: true,
      rateLimitMax: 0,
      bodyLimit: 1024,
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
    });
  });
  after(() => server.app.close());

  it('answers HTTP/1.1 and HTTP/2 alike, with no connection-specific field over HTTP/2', async () => {
    const one = await http1Request(`${server.origin}/api/hello/Ada`, { headers: { origin: 'https://a.example' } });
    const oneText = await one.body.text();
    const session = connectHttp2(server.origin);
    try {
      const two = await sendHttp2(session, { path: '/api/hello/Ada', headers: { origin: 'https://a.example' } });
      assert.equal(one.statusCode, 200);
      assert.equal(two.status, 200);
      assert.equal(two.text, oneText);
      for (const name of CONNECTION_SPECIFIC) assert.equal(two.headers[name], undefined, name);
      // The same fields, but those HTTP/1.1 has for its connection and the values of each answer's own.
      const names = (headers: object) =>
        Object.keys(headers)
          .filter((name) => !CONNECTION_SPECIFIC.includes(name))
          .sort();
      assert.deepEqual(names(two.headers), names(one.headers));
      for (const name of names(two.headers).filter((n) => !['date', 'x-request-id'].includes(n))) {
        assert.equal(two.headers[name], one.headers[name], name);
      }
      assertEnvelope(await sendHttp2(session, { path: '/api/nope' }), 404, 'NOT_FOUND');
    } finally {
      session.close();
    }
  });

  it(`advertises its limits in SETTINGS: ${HTTP2_LIMITS.maxConcurrentStreams} streams, header lists of 16 KiB`, async () => {
    const session = await h2(server.origin);
    try {
      assert.equal(session.remoteSettings.maxConcurrentStreams, 100);
      assert.equal(session.remoteSettings.maxHeaderListSize, 16 * 1024);
      assert.equal(session.remoteSettings.initialWindowSize, HTTP2_LIMITS.initialWindowSize);
    } finally {
      session.close();
    }
  });

  it(`serves whole the answers a session asks for at once beyond the ${HTTP2_LIMITS.maxUnsentBytes / 2 ** 20} MiB it may hold unsent, as its client reads`, async () => {
    const document = await http1Request(`${server.origin}/openapi.json`);
    const expected = await document.body.text();
    const count = HTTP2_LIMITS.maxConcurrentStreams;
    assert.ok(count * Buffer.byteLength(expected) > 2 * HTTP2_LIMITS.maxUnsentBytes, 'more than the session may hold');
    // Node's client grants 64 KiB windows: most of the answers wait for it to read.
    const session = await h2(server.origin);
    try {
      const answers = await Promise.all(
        Array.from({ length: count }, () => readStream(session.request({ ':path': '/openapi.json' }))),
      );
      for (const answer of answers) {
        assert.equal(answer.status, 200);
        assert.equal(answer.rstCode, constants.NGHTTP2_NO_ERROR);
        assert.equal(answer.text, expected);
      }
    } finally {
      session.close();
    }
  });

  it(`refuses the streams a client opens beyond the ${HTTP2_LIMITS.maxConcurrentStreams} it may have at once, and serves the others`, async () => {
    const raw = await RawH2.open(server.port);
    try {
      // 110 requests whose bodies have not ended: each stream stays open until its body does.
      const opened = Array.from({ length: 110 }, (_, i) =>
        headersFrame(2 * i + 1, requestFields('/api/echo', 'POST', [['content-type', 'application/json']]), false),
      );
      await raw.write(Buffer.concat(opened));
      await raw.waitFor((f) => f.type === FrameType.RST_STREAM && f.streamId === 219);
      const refused = raw.frames.filter((f) => f.type === FrameType.RST_STREAM).map((f) => f.streamId);
      assert.deepEqual(
        refused,
        Array.from({ length: 10 }, (_, i) => 201 + 2 * i),
      );
      assert.ok(
        raw.frames
          .filter((f) => f.type === FrameType.RST_STREAM)
          .every((f) => f.payload.readUInt32BE(0) === ErrorCode.REFUSED_STREAM),
      );
      // The first one ends its body, and is answered.
      await raw.write(frame(FrameType.DATA, Flag.END_STREAM, 1, Buffer.from('{"a":1}')));
      const answered = await raw.waitFor((f) => f.streamId === 1 && f.type === FrameType.HEADERS);
      assert.ok(answered, 'stream 1 answered');
    } finally {
      raw.destroy();
    }
    // The client gone with 99 streams open, its session ends: closing the server would wait for it.
    const connections = () =>
      new Promise<number>((resolve) => server.app.server.getConnections((_error, count) => resolve(count)));
    await until(async () => (await connections()) === 0);
    assert.equal(await connections(), 0);
  });

  it('takes a preface sent a byte at a time as HTTP/2', async () => {
    const session = await h2(server.origin, { splitFirstBytes: 30 });
    try {
      assert.equal((await sendHttp2(session, { path: '/api/hello' })).status, 200);
    } finally {
      session.close();
    }
  });

  it('hands HTTP/1.1 requests that begin like the preface to HTTP/1.1 without losing a byte', async () => {
    const socket = await connectTo(server.port);
    const reader = new ResponseReader(socket);
    const body = '{"name":"Ada"}';
    const bytes =
      `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
      'GET /api/hello/Bob HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    // "P" is the preface's first byte, "O" is not its second.
    for (const piece of [bytes.slice(0, 1), bytes.slice(1, 2), bytes.slice(2)]) {
      socket.write(piece);
      await sleep(20);
    }
    const echo = await reader.next();
    const hello = await reader.next();
    assert.equal(echo.status, 200, echo.text);
    assert.deepEqual(echo.json().received, { name: 'Ada' });
    assert.equal(hello.text, '{"greeting":"Hello, Bob!"}');
    await reader.closed();
  });

  it('answers a connection that sends nothing with the 408 envelope after HEADERS_TIMEOUT_MS, as HTTP/1.1', async () => {
    const started = performance.now();
    const answer = await new Promise<string>((resolve, reject) => {
      let data = '';
      const socket: Socket = connect(server.port, '127.0.0.1');
      socket.setEncoding('utf8');
      socket.on('data', (chunk) => {
        data += chunk;
      });
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
    const elapsed = performance.now() - started;
    const res = parseRawResponse(answer);
    assertEnvelope(res, 408, 'REQUEST_TIMEOUT');
    assert.equal(res.headers.connection, 'close');
    assert.ok(elapsed >= HEADERS_TIMEOUT_MS - 50 && elapsed < HEADERS_TIMEOUT_MS + LATE_MS, `${elapsed} ms`);
  });

  it('answers a body over BODY_LIMIT sent as DATA frames with the 413 envelope, resets the stream with NO_ERROR, and the session goes on', async () => {
    const session = await h2(server.origin);
    try {
      const stream = session.request({ ':method': 'POST', ':path': '/api/echo', 'content-type': 'application/json' });
      const answer = readStream(stream);
      const chunk = Buffer.alloc(8 * 1024, ' ');
      for (let i = 0; i < 8 && !stream.destroyed; i += 1) stream.write(chunk);
      const res = await answer;
      assertEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
      assert.equal(res.rstCode, constants.NGHTTP2_NO_ERROR);
      assert.equal((await sendHttp2(session, { path: '/api/hello' })).status, 200);
    } finally {
      session.close();
    }
  });

  it('answers a stream whose body never ends with the 408 envelope after REQUEST_TIMEOUT_MS, and the session goes on', async () => {
    const session = await h2(server.origin);
    try {
      const started = performance.now();
      const stream = session.request({
        ':method': 'POST',
        ':path': '/api/echo',
        'content-type': 'application/json',
        'x-request-id': 'stalled-body',
      });
      stream.write('{"a":');
      const res = await readStream(stream);
      const elapsed = performance.now() - started;
      const error = assertEnvelope(res, 408, 'REQUEST_TIMEOUT');
      assert.equal(error.request_id, 'stalled-body');
      assert.ok(elapsed >= REQUEST_TIMEOUT_MS - 50 && elapsed < REQUEST_TIMEOUT_MS + LATE_MS, `${elapsed} ms`);
      assert.equal((await sendHttp2(session, { path: '/api/hello' })).status, 200);
      await until(() => server.logs.lines.some((line) => line.request_id === 'stalled-body'));
      assert.equal(server.logs.lineOf('stalled-body').status, 408);
    } finally {
      session.close();
    }
  });

  it('closes a session idle for KEEP_ALIVE_TIMEOUT_MS with GOAWAY NO_ERROR', async () => {
    const session = await h2(server.origin);
    assert.equal((await sendHttp2(session, { path: '/healthz' })).status, 200);
    const answered = performance.now();
    const [code] = await new Promise<[number, number]>((resolve) => {
      session.once('goaway', (errorCode, lastStreamID) => resolve([errorCode, lastStreamID]));
    });
    await new Promise((resolve) => session.once('close', resolve));
    const elapsed = performance.now() - answered;
    assert.equal(code, constants.NGHTTP2_NO_ERROR);
    assert.ok(elapsed >= KEEP_ALIVE_TIMEOUT_MS - 50 && elapsed < KEEP_ALIVE_TIMEOUT_MS + LATE_MS, `${elapsed} ms`);
  });

  it('closes the connection of a session it has ended, whose client keeps its side open and drips bytes, within REQUEST_TIMEOUT_MS', async () => {
    const socket = connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true });
    socket.on('error', () => {});
    socket.resume();
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    socket.write(Buffer.concat([Buffer.from(PREFACE, 'latin1'), settingsFrame()]));
    // The GOAWAY after KEEP_ALIVE_TIMEOUT_MS, then the end of the server's side.
    await new Promise((resolve) => socket.once('end', resolve));
    const ended = performance.now();
    const drip = setInterval(() => socket.write('x'), 200);
    try {
      const at = await Promise.race([closed, sleep(REQUEST_TIMEOUT_MS + LATE_MS)]);
      assert.ok(at !== undefined, `still open ${REQUEST_TIMEOUT_MS + LATE_MS} ms after the server ended its side`);
      assert.ok(at - ended >= REQUEST_TIMEOUT_MS - 50, `closed ${Math.round(at - ended)} ms after the end`);
    } finally {
      clearInterval(drip);
      socket.destroy();
    }
  });

  it('answers Expect and CONNECT as over HTTP/1.1: 100 Continue, the 417 and 405 envelopes', async () => {
    const session = await h2(server.origin);
    try {
      const json = { 'content-type': 'application/json' };
      const continued = session.request({ ':method': 'POST', ':path': '/api/echo', ...json, expect: '100-continue' });
      const gotContinue = new Promise<boolean>((resolve) => {
        continued.once('continue', () => resolve(true));
        continued.once('response', () => resolve(false));
      });
      continued.end('{"a":1}');
      assert.equal(await gotContinue, true, '100 Continue before the answer');
      assert.equal((await readStream(continued)).status, 200);
      const bogus = await sendHttp2(session, {
        method: 'POST',
        path: '/api/echo',
        headers: { ...json, expect: 'bogus' },
        body: '{}',
      });
      assertEnvelope(bogus, 417, 'EXPECTATION_FAILED');
      const tunnel = session.request({
        ':method': 'CONNECT',
        ':authority': 'example.com:443',
        'x-request-id': 'h2-connect',
      });
      const refused = await readStream(tunnel);
      assertEnvelope(refused, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(refused.headers.allow, 'GET, HEAD, POST, PUT, PATCH');
      assert.equal(refused.headers['x-content-type-options'], 'nosniff');
      await until(() => server.logs.lines.some((line) => line.request_id === 'h2-connect'));
      assert.equal(server.logs.lineOf('h2-connect').reason, 'CONNECT');
      assert.equal((await sendHttp2(session, { path: '/api/hello' })).status, 200, 'the session goes on');
    } finally {
      session.close();
    }
  });

  it('answers a method HTTP/1.1 would not take (any token is one over HTTP/2) with the 400 HTTP/1.1 gives it, with every fixed header, and goes on', async () => {
    const session = await h2(server.origin);
    try {
      for (const [method, id] of [
        ['FOO', 'h2-foo'],
        ['get', 'h2-lower-get'],
        ['Post', 'h2-mixed-post'],
      ]) {
        const stream = session.request({ ':method': method, ':path': '/api/hello', 'x-request-id': id });
        const refused = await readStream(stream);
        const error = assertEnvelope(refused, 400, 'BAD_REQUEST');
        assert.equal(error.request_id, id, method);
        assert.equal(refused.headers['x-request-id'], id, method);
        for (const [name, value] of Object.entries(API_SECURITY_HEADERS))
          assert.equal(refused.headers[name], value, name);
        await until(() => server.logs.lines.some((line) => line.request_id === id));
        assert.deepEqual(
          server.logs.lines
            .filter((line) => line.request_id === id)
            .map(({ msg, status, reason }) => [msg, status, reason]),
          [['client error', 400, method]],
          method,
        );
      }
      assert.equal((await sendHttp2(session, { path: '/api/hello' })).status, 200, 'the session goes on');
    } finally {
      session.close();
    }
  });

  it('takes every method Node knows through the service hooks: the router routes each, no answer made without them', async () => {
    const session = await h2(server.origin);
    try {
      for (const method of METHODS.filter((known) => known !== 'CONNECT')) {
        const answer = await readStream(
          session.request({ ':method': method, ':path': '/nowhere', 'x-request-id': method }),
        );
        assert.equal(answer.headers['x-request-id'], method, `${method}: ${answer.status} ${answer.text}`);
        assert.equal(answer.headers['x-content-type-options'], 'nosniff', method);
      }
    } finally {
      session.close();
    }
  });

  it('refuses Content-Type given twice, which Node would keep the first of, with the 400 naming it; a stream with Host twice is reset as malformed', async () => {
    const raw = await RawH2.open(server.port);
    try {
      const twice = requestFields('/api/echo', 'POST', [
        ['content-type', 'application/json'],
        ['content-type', 'text/plain'],
        ['x-request-id', 'twice'],
      ]);
      await raw.write(headersFrame(1, twice));
      await raw.waitFor((f) => f.streamId === 1 && (f.flags & Flag.END_STREAM) !== 0);
      // The answer's END_STREAM may arrive before the line is written.
      await until(() => server.logs.lines.some((line) => line.request_id === 'twice'));
      assert.equal(server.logs.lineOf('twice').status, 400);
      await raw.write(
        headersFrame(
          3,
          requestFields('/healthz', 'GET', [
            ['host', 'a.example'],
            ['host', 'b.example'],
          ]),
        ),
      );
      const reset = await raw.waitFor((f) => f.streamId === 3);
      assert.deepEqual([reset?.type, reset?.payload.readUInt32BE(0)], [FrameType.RST_STREAM, ErrorCode.PROTOCOL_ERROR]);
      await raw.write(headersFrame(5, requestFields('/healthz')));
      assert.equal((await raw.waitFor((f) => f.streamId === 5))?.type, FrameType.HEADERS, 'the session goes on');
    } finally {
      raw.destroy();
    }
  });

  it('names the version of HTTP in the log line, with the trace of a traceparent', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;
    const one = await http1Request(`${server.origin}/healthz`, { headers: { 'x-request-id': 'on-http1' } });
    await one.body.dump();
    const session = await h2(server.origin);
    try {
      await sendHttp2(session, { path: '/healthz', headers: { 'x-request-id': 'on-http2', traceparent } });
    } finally {
      session.close();
    }
    await until(() => server.logs.lines.some((line) => line.request_id === 'on-http2'));
    assert.equal(server.logs.lineOf('on-http1').http_version, '1.1');
    const line = server.logs.lineOf('on-http2');
    assert.equal(line.http_version, '2.0');
    assert.equal(line.trace_id, traceId);
    assert.deepEqual(Object.keys(line).slice(4), [
      'request_id',
      'trace_id',
      'span_id',
      'method',
      'url',
      'http_version',
      'route',
      'status',
      'duration_ms',
      'msg',
    ]);
  });

  it('speaks HTTP/2 to curl --http2-prior-knowledge, and HTTP/1.1 to curl --http2 (Upgrade: h2c is not taken), a body included', {
    skip: CURL_SKIP,
  }, async () => {
    const format = ['-s', '-o', '/dev/null', '-w', '%{http_version} %{http_code}'];
    const prior = await run('curl', [...format, '--http2-prior-knowledge', `${server.origin}/api/hello`]);
    assert.equal(prior.stdout, '2 200', prior.stderr);
    const upgrade = await run('curl', [...format, '--http2', `${server.origin}/api/hello`]);
    assert.equal(upgrade.stdout, '1.1 200', upgrade.stderr);
    // With a body, which comes after the headers of the request that asks to switch.
    const post = ['--http2', '-H', 'content-type: application/json', '-d', '{"a":1}', `${server.origin}/api/echo`];
    const posted = await run('curl', ['-s', '-w', ' %{http_version} %{http_code}', ...post]);
    assert.match(posted.stdout, /^\{"received":\{"a":1\},"echo":true,"timestamp":"[^"]+"\} 1\.1 200$/, posted.stderr);
  });

  it('serves h2load: 2000 requests over 4 connections of 10 streams each, every one 200', {
    skip: H2LOAD_SKIP,
  }, async () => {
    const { stdout, stderr } = await run('h2load', ['-n', '2000', '-c', '4', '-m', '10', `${server.origin}/api/hello`]);
    const result = parseH2load(stdout);
    assert.equal(result.succeeded, 2000, stdout + stderr);
    assert.equal(result.status2xx, 2000, stdout);
  });
});

describe('HTTP/2 off: the port speaks HTTP/1.1 only, and the log line is as before', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening();
  });
  after(() => server.app.close());

  it('answers the preface with the 505 envelope, and logs no http_version', async () => {
    const answer = parseRawResponse(await rawExchange(server.port, PREFACE));
    assertEnvelope(answer, 505, 'HTTP_VERSION_NOT_SUPPORTED');
    assert.equal(answer.headers.connection, 'close');
    const res = await http1Request(`${server.origin}/healthz`, { headers: { 'x-request-id': 'plain' } });
    await res.body.dump();
    assert.equal('http_version' in server.logs.lineOf('plain'), false);
  });
});

describe('HTTP/2 shutdown, against the server process', () => {
  after(() => killAllServers());

  it('SIGTERM: GOAWAY naming the last stream served, the stream in flight finishes, a new stream is refused, exit 0', {
    timeout: 60_000,
  }, async () => {
    const server = await startServer({ HTTP2: 'true' });
    const origin = `http://127.0.0.1:${server.port}`;
    // A request in flight: its headers read (100 Continue), its body half sent.
    const session = await h2(origin);
    const held = session.request({
      ':method': 'POST',
      ':path': '/api/echo',
      'content-type': 'application/json',
      expect: '100-continue',
    });
    const answer = readStream(held);
    held.write('{"held"');
    await new Promise((resolve) => held.once('continue', resolve));
    const goaway = new Promise<[number, number]>((resolve) =>
      session.once('goaway', (code, lastStreamID) => resolve([code, lastStreamID])),
    );
    // Another client, on raw frames, with one stream answered before the signal.
    const raw = await RawH2.open(server.port);
    await raw.write(headersFrame(1, requestFields('/healthz')));
    await raw.waitFor((f) => f.streamId === 1 && (f.flags & 0x1) === 0x1);

    server.child.kill('SIGTERM');
    assert.deepEqual(await goaway, [constants.NGHTTP2_NO_ERROR, held.id]);
    assert.deepEqual(await raw.goaway(), { lastStreamId: 1, errorCode: constants.NGHTTP2_NO_ERROR });
    // A stream opened after the GOAWAY is not served: no answer, and the connection closes.
    await raw.write(headersFrame(3, requestFields('/healthz')));
    assert.equal(await raw.untilClosed(), true);
    assert.equal(
      raw.frames.some((f) => f.streamId === 3 && f.type !== 0x3),
      false,
      'nothing but a reset on stream 3',
    );

    held.end(':true}');
    const res = await answer;
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(JSON.parse(res.text).received, { held: true });
    const exit = await server.exited;
    assert.deepEqual(exitOf(exit), { code: 0, signal: null });
    session.destroy();
  });
});
