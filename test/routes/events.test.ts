import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { type ClientHttp2Session, connect as connectHttp2 } from 'node:http2';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventSource } from 'undici';
import {
  assertEnvelope,
  assertLocalNow,
  type Client,
  type ListeningApp,
  listening,
  parseRawResponse,
  rawExchange,
  samples,
  sendTo,
  transports,
} from '../helpers.js';
import { connectTo, ResponseReader } from '../raw-http.js';
import { killAllServers, startServer, withTimeout } from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';
import { OtlpReceiver } from '../tracing/otlp-receiver.js';

/** One event of a stream as a client parses it (the HTML standard's rules, for what the service sends). */
interface ParsedEvent {
  id: string;
  event: string;
  data: string;
}

/** The events of a stream's text, and its comment lines. */
function parseStream(text: string): { events: ParsedEvent[]; comments: string[] } {
  const events: ParsedEvent[] = [];
  const comments: string[] = [];
  for (const block of text.split('\n\n')) {
    if (block === '') continue;
    const fields: Record<string, string> = {};
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) comments.push(line);
      else fields[line.slice(0, line.indexOf(':'))] = line.slice(line.indexOf(':') + 2);
    }
    if (Object.keys(fields).length > 0) events.push(fields as unknown as ParsedEvent);
  }
  return { events, comments };
}

/** Asserts the events of a stream are greetings of `name` numbered `first` to `last`, each in the contract's form. */
function assertGreetings(text: string, name: string, first: number, last: number): void {
  const { events, comments } = parseStream(text);
  assert.deepEqual(comments, []);
  assert.deepEqual(
    events.map((event) => event.id),
    Array.from({ length: last - first + 1 }, (_, i) => String(first + i)),
  );
  for (const event of events) {
    assert.deepEqual(Object.keys(event), ['id', 'event', 'data']);
    assert.equal(event.event, 'greeting');
    const data = JSON.parse(event.data);
    assert.deepEqual(Object.keys(data), ['id', 'greeting', 'timestamp']);
    assert.equal(data.id, Number(event.id));
    assert.equal(data.greeting, `Hello, ${name}!`);
    assertLocalNow(data.timestamp);
  }
}

const STREAM_TYPE = 'text/event-stream; charset=utf-8';

for (const [transport, connect] of transports) {
  describe(`GET /api/events (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('sends count greetings as events, then ends, with the headers of a stream, never compressed', async () => {
      const res = await client.send({
        path: '/api/events?count=3&interval_ms=0&name=Ada',
        headers: { 'accept-encoding': 'gzip, deflate, br' },
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], STREAM_TYPE);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.headers['x-accel-buffering'], 'no');
      assert.equal(res.headers['api-version'], '1');
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(typeof res.headers['x-request-id'], 'string');
      assertGreetings(res.text, 'Ada', 1, 3);
    });

    it('greets World by default, and is served under /api/v1 too', async () => {
      const res = await client.send({ path: '/api/v1/events?count=2&interval_ms=0' });
      assert.equal(res.status, 200);
      assertGreetings(res.text, 'World', 1, 2);
    });

    it('greets any name exactly, a line break escaped inside the one data line', async () => {
      const name = 'Ada\nLovelace\r\n世界 👩🏽‍💻 "q" \\ \u2028';
      const res = await client.send({ path: `/api/events?count=1&interval_ms=0&name=${encodeURIComponent(name)}` });
      assert.equal(res.status, 200);
      assertGreetings(res.text, name, 1, 1);
    });

    it('resumes after Last-Event-ID; after the last, 204 with no body, which stops an EventSource', async () => {
      const res = await client.send({ path: '/api/events?count=4&interval_ms=0', headers: { 'last-event-id': '2' } });
      assertGreetings(res.text, 'World', 3, 4);
      for (const method of ['GET', 'HEAD']) {
        const done = await client.send({
          method,
          path: '/api/events?count=4&interval_ms=0',
          headers: { 'last-event-id': '4' },
        });
        assert.equal(done.status, 204, method);
        assert.equal(done.text, '');
        assert.equal(done.headers['content-type'], undefined);
        assert.equal(done.headers['x-accel-buffering'], undefined);
        assert.equal(done.headers['cache-control'], 'no-store');
        assert.equal(done.headers['api-version'], '1');
        assert.equal(typeof done.headers['x-request-id'], 'string');
      }
      const zero = await client.send({ path: '/api/events?count=1&interval_ms=0', headers: { 'last-event-id': '0' } });
      assertGreetings(zero.text, 'World', 1, 1);
    });

    it('accepts text/event-stream, text/*, */* or no Accept', async () => {
      for (const accept of ['text/event-stream', 'text/*', '*/*', 'application/json;q=0.5, text/event-stream']) {
        const res = await client.send({ path: '/api/events?count=1&interval_ms=0', headers: { accept } });
        assert.equal(res.status, 200, accept);
      }
    });

    it('refuses an Accept without text/event-stream, text/* or */* with 406, before any event', async () => {
      for (const accept of [
        'application/json',
        'text/html',
        'text/event-stream;q=0',
        'application/vnd.greeting.v1+json',
      ]) {
        const res = await client.send({ path: '/api/events?count=1&interval_ms=0', headers: { accept } });
        assertEnvelope(res, 406, 'NOT_ACCEPTABLE');
      }
    });

    const bad: [string, string, unknown, string][] = [
      ['count=0', 'count', '0', 'must be an integer from 1 to 1000'],
      ['count=1001', 'count', '1001', 'must be an integer from 1 to 1000'],
      ['count=abc', 'count', 'abc', 'must be an integer from 1 to 1000'],
      ['count=1.5', 'count', '1.5', 'must be an integer from 1 to 1000'],
      ['count=', 'count', '', 'must be an integer from 1 to 1000'],
      ['count=1&count=2', 'count', ['1', '2'], 'must be given once'],
      ['interval_ms=-1', 'interval_ms', '-1', 'must be an integer from 0 to 60000'],
      ['interval_ms=60001', 'interval_ms', '60001', 'must be an integer from 0 to 60000'],
      ['interval_ms=1e3', 'interval_ms', '1e3', 'must be an integer from 0 to 60000'],
      ['name=', 'name', '', 'must not be empty'],
      ['name=a&name=b', 'name', ['a', 'b'], 'must be given once'],
    ];
    for (const [query, field, value, message] of bad) {
      it(`refuses ${query} with 400 naming ${field}`, async () => {
        const res = await client.send({ path: `/api/events?${query}` });
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field, message, value }]);
      });
    }

    for (const id of ['-1', 'x', '1.5', '1001', '3', '1, 2']) {
      it(`refuses Last-Event-ID ${id} (count 2) with 400`, async () => {
        const res = await client.send({ path: '/api/events?count=2', headers: { 'last-event-id': id } });
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [
          { field: 'last-event-id', message: 'must be an integer from 0 to count', value: id },
        ]);
      });
    }

    it('answers HEAD with the headers of the stream and no body', async () => {
      const res = await client.send({ method: 'HEAD', path: '/api/events' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], STREAM_TYPE);
      assert.equal(res.headers['x-accel-buffering'], 'no');
      assert.equal(res.text, '');
    });
  });
}

/** A stream being read: its head, and each chunk with the time it arrived (ms since the request). */
interface OpenStream {
  status: number;
  headers: IncomingHttpHeaders;
  chunks: { at: number; text: string }[];
  /** Resolves with the whole text once the server ends the stream. */
  ended: Promise<string>;
  /** Leaves the stream, as a client that goes away. */
  close(): void;
}

/** Opens a stream over HTTP/1.1 (a connection of its own) and reads it as it comes. */
function openStream(origin: string, path: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = httpRequest(`${origin}${path}`, { headers, agent: false }, (res) => {
      const chunks: OpenStream['chunks'] = [];
      res.setEncoding('utf8');
      const ended = new Promise<string>((done, failed) => {
        res.on('data', (text: string) => chunks.push({ at: performance.now() - start, text }));
        res.on('end', () => done(chunks.map((chunk) => chunk.text).join('')));
        res.on('error', failed);
      });
      ended.catch(() => {});
      resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, ended, close: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens a stream over an HTTP/2 session and reads it as it comes. */
function openStreamHttp2(session: ClientHttp2Session, path: string): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const stream = session.request({ ':path': path });
    const chunks: OpenStream['chunks'] = [];
    stream.setEncoding('utf8');
    const ended = new Promise<string>((done, failed) => {
      stream.on('data', (text: string) => chunks.push({ at: performance.now() - start, text }));
      stream.on('end', () => done(chunks.map((chunk) => chunk.text).join('')));
      stream.on('error', failed);
    });
    ended.catch(() => {});
    stream.on('response', (headers) => {
      const { ':status': status, ...rest } = headers;
      resolve({
        status: Number(status),
        headers: rest as IncomingHttpHeaders,
        chunks,
        ended,
        close: () => stream.close(),
      });
    });
    stream.on('error', reject);
  });
}

/** Waits until `condition` holds, polling, for at most `ms`. */
async function until(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await condition())) {
    if (performance.now() > deadline) assert.fail(`${what} within ${ms} ms`);
    await sleep(10);
  }
}

/** The value of a metric without labels at `origin`'s /metrics. */
async function metric(origin: string, name: string): Promise<number> {
  const res = await sendTo(origin, { path: '/metrics' });
  return samples(res.text, name).get('') ?? Number.NaN;
}

/**
 * How late an event may arrive, in ms: far less than a stream held back anywhere would be (all its
 * events at its end), more than a timer of a loaded machine shared by several test runs is.
 */
const LATE_MS = 250;

/**
 * Asserts each event arrived when due: the first at once, event k `interval` ms after the one
 * before it on the stream's schedule, none held back past LATE_MS, and the events spread over the
 * schedule rather than sent together.
 */
function assertSpacing(chunks: OpenStream['chunks'], count: number, intervalMs: number): void {
  const arrivals: number[] = [];
  for (const { at, text } of chunks) for (const _ of parseStream(text).events) arrivals.push(at);
  assert.equal(arrivals.length, count);
  assert.ok((arrivals[0] as number) < 500, `the first event came ${arrivals[0]?.toFixed(0)} ms after the request`);
  // When the schedule began, as the arrivals tell it: the earliest of each arrival less its offset.
  const start = Math.min(...arrivals.map((at, k) => at - k * intervalMs));
  for (let k = 1; k < count; k++) {
    const late = (arrivals[k] as number) - (start + k * intervalMs);
    assert.ok(late < LATE_MS, `event ${k + 1} came ${late.toFixed(0)} ms after it was due`);
  }
  const spread = (arrivals[count - 1] as number) - (arrivals[0] as number);
  assert.ok(spread >= (count - 1) * intervalMs - LATE_MS, `the events came within ${spread.toFixed(0)} ms`);
}

describe('GET /api/events over a connection', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening({ streamsMax: 2 });
    // The first stream compiles what the route makes on first use: on shared cores, longer than an event may be late.
    await (await openStream(server.origin, '/api/events?count=1&interval_ms=0')).ended;
  });
  after(() => server.app.close());

  it('writes each event when due, spaced as asked, not held back', async () => {
    const stream = await openStream(server.origin, '/api/events?count=5&interval_ms=250');
    assert.equal(stream.status, 200);
    await stream.ended;
    assertSpacing(stream.chunks, 5, 250);
  });

  it('logs one line per stream at its end, with the events it sent', async () => {
    const stream = await openStream(server.origin, '/api/events?count=3&interval_ms=0', {
      'x-request-id': 'sse-log-1',
    });
    await stream.ended;
    await until(() => server.logs.lines.some((line) => line.request_id === 'sse-log-1'), 2000, 'the line');
    const line = server.logs.lineOf('sse-log-1');
    assert.equal(line.status, 200);
    assert.equal(line.route, '/api/events');
    assert.equal(line.events_sent, 3);
  });

  it('counts open streams and events sent in /metrics', async () => {
    const sentBefore = await metric(server.origin, 'events_sent_total');
    assert.equal(await metric(server.origin, 'event_streams_open'), 0);
    const stream = await openStream(server.origin, '/api/events?count=3&interval_ms=300');
    await until(() => stream.chunks.length > 0, 2000, 'the first event');
    assert.equal(await metric(server.origin, 'event_streams_open'), 1);
    await stream.ended;
    await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 2000, 'no stream open');
    assert.equal(await metric(server.origin, 'events_sent_total'), sentBefore + 3);
  });

  it('refuses a stream past STREAMS_MAX with 503 and Retry-After; a client that leaves frees its slot and timer at once', async () => {
    const first = await openStream(server.origin, '/api/events?count=1000&interval_ms=100', {
      'x-request-id': 'sse-left',
    });
    const second = await openStream(server.origin, '/api/events?count=1000&interval_ms=60000');
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    const refused = await sendTo(server.origin, { path: '/api/events?count=1' });
    const error = assertEnvelope(refused, 503, 'SERVICE_UNAVAILABLE');
    assert.match(error.message, /2 event streams are open/);
    assert.equal(refused.headers['retry-after'], '1');
    assert.equal(refused.headers['x-accel-buffering'], undefined);

    await until(() => first.chunks.length >= 2, 2000, 'two events');
    first.close();
    // The slot is free as soon as the server sees the connection close: a stream may take it.
    await until(async () => (await metric(server.origin, 'event_streams_open')) === 1, 1000, 'the slot freed');
    const third = await openStream(server.origin, '/api/events?count=1&interval_ms=0');
    assert.equal(third.status, 200);
    await third.ended;
    // Its timer is gone: no event is sent for it any more.
    const sent = await metric(server.origin, 'events_sent_total');
    await sleep(350);
    assert.equal(await metric(server.origin, 'events_sent_total'), sent);
    // Its line says how many it sent before its client left.
    const line = server.logs.lineOf('sse-left');
    assert.equal(line.status, 200);
    assert.ok(Number(line.events_sent) >= 2, String(line.events_sent));
    second.close();
    await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 1000, 'every slot freed');
  });

  it('answers a stream resumed at its end 204 with no body, and the connection serves the next request', async () => {
    const socket = await connectTo(server.port);
    const reader = new ResponseReader(socket);
    socket.write(
      'GET /api/events?count=3&interval_ms=0 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nLast-Event-ID: 3\r\nX-Request-Id: sse-done\r\n\r\n',
    );
    const done = await reader.next();
    assert.equal(done.status, 204);
    assert.equal(done.text, '');
    assert.equal(done.headers['x-request-id'], 'sse-done');
    assert.equal(done.headers['content-type'], undefined);
    assert.equal(done.headers['transfer-encoding'], undefined);
    assert.equal(done.headers['content-length'], undefined);
    assert.equal(done.headers.connection, 'keep-alive');
    socket.write('GET /api/hello HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await reader.next()).status, 200);
    socket.destroy();
    await until(() => server.logs.lines.some((line) => line.request_id === 'sse-done'), 2000, 'the line');
    assert.equal(server.logs.lineOf('sse-done').status, 204);
    assert.equal(server.logs.lineOf('sse-done').events_sent, undefined);
  });

  it('an EventSource reconnects once after the last event, is answered 204, and stops', async () => {
    const url = '/api/events?count=2&interval_ms=0&name=EventSource';
    const source = new EventSource(`${server.origin}${url}`);
    const ids: string[] = [];
    source.addEventListener('greeting', (event) => ids.push((event as MessageEvent).lastEventId));
    try {
      // It reconnects after its default 3 s with Last-Event-ID: 2; a 200 would have it reconnect for ever.
      await until(() => source.readyState === EventSource.CLOSED, 8000, 'the EventSource closed');
    } finally {
      source.close();
    }
    assert.deepEqual(ids, ['1', '2']);
    const asked = server.logs.lines.filter((line) => line.url === url).map((line) => line.status);
    assert.deepEqual(asked, [200, 204]);
  });

  it('sends a comment on a stream quiet for 15 s', { timeout: 30_000 }, async () => {
    const stream = await openStream(server.origin, '/api/events?count=2&interval_ms=16000');
    const text = await stream.ended;
    const { events, comments } = parseStream(text);
    assert.deepEqual(
      events.map((event) => event.id),
      ['1', '2'],
    );
    assert.deepEqual(comments, [': keep-alive']);
    const comment = stream.chunks.find((chunk) => chunk.text.startsWith(':'));
    assert.ok(comment !== undefined && comment.at > 14_900 && comment.at < 15_900, `comment at ${comment?.at}`);
  });
});

describe('GET /api/events: timeouts of slow clients do not end a quiet stream', () => {
  for (const http2 of [false, true]) {
    it(`outlasts REQUEST_TIMEOUT_MS between events (${http2 ? 'h2c' : 'HTTP/1.1'})`, async () => {
      // A second for the request (more than a loaded machine takes to send one), 1.5 s of silence for the connection.
      const server = await listening({ headersTimeoutMs: 1000, requestTimeoutMs: 1000, http2 });
      const session = http2 ? connectHttp2(server.origin) : undefined;
      try {
        const path = '/api/events?count=2&interval_ms=2500';
        const stream =
          session === undefined ? await openStream(server.origin, path) : await openStreamHttp2(session, path);
        assert.equal(stream.status, 200);
        const text = await stream.ended;
        assertGreetings(text, 'World', 1, 2);
      } finally {
        session?.close();
        await server.app.close();
      }
    });
  }
});

describe('GET /api/events over HTTP/2 with prior knowledge (h2c)', () => {
  let server: ListeningApp;
  let session: ClientHttp2Session;
  before(async () => {
    server = await listening({ http2: true, streamsMax: 1 });
    session = connectHttp2(server.origin);
  });
  after(async () => {
    session.close();
    await server.app.close();
  });

  it('writes each event when due, as over HTTP/1.1', async () => {
    const stream = await openStreamHttp2(session, '/api/events?count=4&interval_ms=250&name=Ada');
    assert.equal(stream.status, 200);
    assert.equal(stream.headers['content-type'], STREAM_TYPE);
    assert.equal(stream.headers['x-accel-buffering'], 'no');
    const text = await stream.ended;
    assertGreetings(text, 'Ada', 1, 4);
    assertSpacing(stream.chunks, 4, 250);
  });

  it('frees the slot of a stream its client resets, and logs it once', async () => {
    const stream = await openStreamHttp2(session, '/api/events?count=1000&interval_ms=100');
    await until(() => stream.chunks.length >= 1, 2000, 'the first event');
    const refused = await sendTo(server.origin, { path: '/api/events?count=1' });
    assertEnvelope(refused, 503, 'SERVICE_UNAVAILABLE');
    const id = refused.headers['x-request-id'];
    stream.close();
    await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 1000, 'the slot freed');
    const again = await openStreamHttp2(session, '/api/events?count=1&interval_ms=0');
    assertGreetings(await again.ended, 'World', 1, 1);
    const lines = server.logs.lines.filter((line) => line.route === '/api/events' && line.status === 200);
    assert.equal(lines.length, 3, JSON.stringify(lines));
    assert.ok(id !== undefined);
  });

  it('frees the slot of a stream its client resets with NO_ERROR while an event waits for its window', async () => {
    // With a write pending, Node keeps a stream its client closed until that write is done: never.
    const windowless = connectHttp2(server.origin, { settings: { initialWindowSize: 0 } });
    try {
      const stream = await openStreamHttp2(windowless, '/api/events?count=1000&interval_ms=100');
      assert.equal(stream.status, 200);
      assert.equal(await metric(server.origin, 'event_streams_open'), 1);
      stream.close();
      await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 2000, 'the slot freed');
    } finally {
      windowless.close();
    }
  });
});

describe('GET /api/events on shutdown', () => {
  it('refuses a stream asked for while draining with 503, which would be ended at once', async () => {
    const server = await listening({ shutdownTimeoutMs: 5000 });
    // Pipelined: the second request is read once the first stream has ended, by then on shutdown.
    const answer = rawExchange(
      server.port,
      'GET /api/events?count=3&interval_ms=60000 HTTP/1.1\r\nHost: x\r\n\r\n' +
        'GET /api/events?count=1&interval_ms=0 HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    await sleep(300);
    const start = performance.now();
    await server.app.close();
    assert.ok(performance.now() - start < 2000, `closed in ${(performance.now() - start).toFixed(0)} ms`);
    const text = await answer;
    const second = text.slice(text.indexOf('HTTP/1.1', 1));
    assert.match(text, /^HTTP\/1\.1 200 /);
    assertEnvelope(parseRawResponse(second), 503, 'SERVICE_UNAVAILABLE');
    assert.match(second, /\r\nretry-after: 1\r\n/i);
  });

  it('ends open streams at once, each logged, and the close completes', async () => {
    const server = await listening({ shutdownTimeoutMs: 5000 });
    const streams = await Promise.all([
      openStream(server.origin, '/api/events?count=1000&interval_ms=60000', { 'x-request-id': 'sse-down-1' }),
      openStream(server.origin, '/api/events?count=1000&interval_ms=50', { 'x-request-id': 'sse-down-2' }),
    ]);
    await until(() => streams.every((stream) => stream.chunks.length > 0), 2000, 'the first events');
    const start = performance.now();
    await server.app.close();
    assert.ok(performance.now() - start < 2000, `closed in ${(performance.now() - start).toFixed(0)} ms`);
    for (const stream of streams) {
      const text = await stream.ended;
      assert.ok(parseStream(text).events.length >= 1);
    }
    assert.equal(server.logs.lineOf('sse-down-1').events_sent, 1);
    assert.equal(server.logs.lineOf('sse-down-1').status, 200);
    assert.ok(Number(server.logs.lineOf('sse-down-2').events_sent) >= 1);
  });
});

describe('GET /api/events over h2 with TLS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  let files: TlsFiles;
  let server: ListeningApp;
  let session: ClientHttp2Session;
  before(async () => {
    files = makeTlsFiles();
    server = await listening({ http2: true, tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey });
    session = connectHttp2(server.origin, { ca: readFileSync(files.ca) });
  });
  after(async () => {
    session.close();
    await server.app.close();
    files.remove();
  });

  it('writes each event when due, as over cleartext', async () => {
    const stream = await openStreamHttp2(session, '/api/events?count=4&interval_ms=250');
    assert.equal(stream.status, 200);
    assert.equal(stream.headers['content-type'], STREAM_TYPE);
    assertGreetings(await stream.ended, 'World', 1, 4);
    assertSpacing(stream.chunks, 4, 250);
  });
});

describe('GET /api/events is an /api request like any other', () => {
  it('is rate-limited: counted, with RateLimit headers, and 429 past the limit', async () => {
    const server = await listening({ rateLimitMax: 1 });
    try {
      const stream = await openStream(server.origin, '/api/events?count=1&interval_ms=0');
      assert.equal(stream.headers['ratelimit-limit'], '1');
      assert.equal(stream.headers['ratelimit-remaining'], '0');
      await stream.ended;
      const refused = await sendTo(server.origin, { path: '/api/events?count=1' });
      assertEnvelope(refused, 429, 'RATE_LIMIT_EXCEEDED');
      assert.equal(await metric(server.origin, 'event_streams_open'), 0);
    } finally {
      await server.app.close();
    }
  });

  it('takes the fault headers: an injected abort answers instead of the stream, which never opens', async () => {
    const server = await listening({ faultHeaders: true });
    try {
      const res = await sendTo(server.origin, {
        path: '/api/events?count=1',
        headers: { 'x-envoy-fault-abort-request': '503' },
      });
      assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
      assert.equal(res.headers['x-fault-injected'], 'abort');
      // A connection fault breaks the answer instead of sending it.
      const outcome = await openStream(server.origin, '/api/events?count=1000&interval_ms=100', {
        'x-fault-connection': 'reset',
      })
        .then((stream) => stream.ended)
        .catch(() => 'reset');
      assert.equal(outcome, 'reset');
      // The stream the fault broke holds no slot and no timer.
      await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 1000, 'no stream open');
      const sent = await metric(server.origin, 'events_sent_total');
      await sleep(300);
      assert.equal(await metric(server.origin, 'events_sent_total'), sent);
    } finally {
      await server.app.close();
    }
  });
});

describe('GET /api/events is traced like any request', () => {
  it("has one server span per stream, from the request to the stream's end, its client gone or not", async () => {
    const receiver = await OtlpReceiver.start();
    try {
      const server = await listening({ otelExporterOtlpEndpoint: receiver.url });
      const whole = await openStream(server.origin, '/api/events?count=3&interval_ms=200', {
        'x-request-id': 'span-whole',
      });
      await whole.ended;
      const left = await openStream(server.origin, '/api/events?count=1000&interval_ms=100', {
        'x-request-id': 'span-left',
      });
      await until(() => left.chunks.length > 0, 2000, 'the first event');
      left.close();
      await until(async () => (await metric(server.origin, 'event_streams_open')) === 0, 1000, 'no stream open');
      await server.app.close();
      for (const id of ['span-whole', 'span-left']) {
        const spans = receiver.spans.filter((span) => span.attributes.request_id === id);
        assert.equal(spans.length, 1, id);
        assert.equal(spans[0]?.name, 'GET /api/events');
        assert.equal(spans[0]?.attributes['http.response.status_code'], 200);
      }
      const span = receiver.spans.find((one) => one.attributes.request_id === 'span-whole');
      const ms = Number(((span?.endNs ?? 0n) - (span?.startNs ?? 0n)) / 1_000_000n);
      assert.ok(ms >= 380, `the span lasted ${ms} ms, the stream 400`);
    } finally {
      await receiver.close();
    }
  });
});

describe('GET /api/events: SIGTERM with streams open (the built service)', () => {
  after(() => killAllServers());

  it('ends the open streams, each with its line, and exits 0 well within SHUTDOWN_TIMEOUT_MS', {
    timeout: 60_000,
  }, async () => {
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: '8000', HTTP2: 'true' });
    const origin = `http://127.0.0.1:${server.port}`;
    const session = connectHttp2(origin);
    try {
      const streams = [
        await openStream(origin, '/api/events?count=1000&interval_ms=60000', { 'x-request-id': 'sigterm-1' }),
        await openStream(origin, '/api/events?count=1000&interval_ms=100', { 'x-request-id': 'sigterm-2' }),
        await openStreamHttp2(session, '/api/events?count=1000&interval_ms=100'),
      ];
      await until(() => streams.every((stream) => stream.chunks.length > 0), 5000, 'the first events');
      const start = performance.now();
      server.child.kill('SIGTERM');
      for (const stream of streams) await withTimeout(stream.ended, 5000, 'the stream ended');
      const exit = await withTimeout(server.exited, 8000, 'exit after SIGTERM');
      assert.equal(exit.code, 0);
      assert.ok(performance.now() - start < 4000, `exited ${(performance.now() - start).toFixed(0)} ms after SIGTERM`);
      const lines = server.lines.filter((line) => line.route === '/api/events');
      assert.equal(lines.length, 3);
      assert.equal(lines.find((line) => line.request_id === 'sigterm-1')?.events_sent, 1);
    } finally {
      session.destroy();
    }
  });
});

describe('a client that does not read its stream', () => {
  it('holds a chunk of it: events are made as the connection takes them, and the rest once it reads', async () => {
    const { app, port, origin } = await listening({ logLevel: 'silent' });
    try {
      const sentTotal = async () => {
        const res = await fetch(`${origin}/metrics`);
        return samples(await res.text(), 'events_sent_total').get('') ?? 0;
      };
      const name = 'n'.repeat(16_000);
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.pause();
      socket.write(
        `GET /api/events?count=1000&interval_ms=0&name=${name} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`,
      );
      await sleep(500);
      // 16 MB of events were all due at once; the socket's buffers and the kernel's take a few MB.
      const held = await sentTotal();
      assert.ok(held > 0 && held < 500, `${held} events made for a client that reads none`);
      let received = 0;
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
      });
      socket.resume();
      for (let tries = 0; tries < 200 && (await sentTotal()) < 1000; tries += 1) await sleep(25);
      assert.equal(await sentTotal(), 1000);
      socket.destroy();
      assert.ok(received > held * 16_000);
    } finally {
      await app.close();
    }
  });
});
