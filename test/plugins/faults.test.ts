import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants as http2, connect as http2Connect } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Agent, request } from 'undici';
import { WebSocket } from 'ws';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/config/index.js';
import {
  assertEnvelope,
  LogCapture,
  parseRawResponse,
  rawExchange,
  samples,
  sendTo,
  type TestRequest,
  type TestResponse,
  testConfig,
} from '../helpers.js';
import { conformanceOf } from '../openapi-conformance.js';
import { assertStopsCleanly, exitOf, killAllServers, startServer, withTimeout } from '../server-process.js';

/**
 * Fault injection end to end, over real sockets: what each fault answers, how long a delay holds a
 * request, the shares over a few hundred requests, what an HTTP client sees of each broken
 * connection, and that the service serves normally after each; the log line and the count of every
 * fault; and, with fault injection off, that no route has a hook of it and its headers change nothing.
 */

const CURL = ['/usr/bin/curl', '/usr/local/bin/curl', '/bin/curl'].some((path) => existsSync(path));
if (!CURL) console.log('SKIPPED: the curl checks of broken connections need curl (apt-get install curl)');

after(killAllServers);

interface Served {
  app: FastifyInstance;
  origin: string;
  log: LogCapture;
  send(request: TestRequest): Promise<TestResponse>;
  close(): Promise<void>;
}

/** The service on a free loopback port, its log lines captured. */
async function serve(overrides: Partial<Config>): Promise<Served> {
  const log = new LogCapture();
  const app = await buildApp(testConfig({ logLevel: 'info', ...overrides }), { logStream: log });
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, origin, log, send: (req) => sendTo(origin, req), close: () => app.close() };
}

/** `faults_injected_total` as /metrics shows it, by `kind,source`. */
async function faultCounts(served: Served): Promise<Map<string, number>> {
  const text = (await served.send({ path: '/metrics' })).text;
  const counts = new Map<string, number>();
  for (const [labels, value] of samples(text, 'faults_injected_total')) {
    const [, kind, source] = /kind="([a-z]+)",source="([a-z]+)"/.exec(labels) ?? [];
    counts.set(`${kind},${source}`, value);
  }
  return counts;
}

/** `faults_injected_answers_total` as /metrics shows it, by status. */
async function injectedAnswers(served: Served): Promise<Map<number, number>> {
  const text = (await served.send({ path: '/metrics' })).text;
  return new Map(
    [...samples(text, 'faults_injected_answers_total')].map(([labels, value]) => [
      Number(/^\{status="(\d+)"\}$/.exec(labels)?.[1]),
      value,
    ]),
  );
}

/**
 * Each route's hooks as `printRoutes` lists them, by its line (`/api/hello (GET)`; a nested route by
 * its own part, `/:name (GET)`): the hook lists that requests of the route run.
 */
function routeHooks(app: FastifyInstance): Map<string, string> {
  const hooks = new Map<string, string>();
  let route = '';
  for (const line of app.printRoutes({ includeHooks: true, commonPrefix: false }).split('\n')) {
    const hook = /• (\(\w+\) .*)$/.exec(line);
    if (hook !== null) hooks.set(route, `${hooks.get(route) ?? ''}${hook[1]}\n`);
    else route = line.replace(/^[\s│├└─]+/, '');
  }
  return hooks;
}

/** Binomial bounds for `n` requests at probability `p`: the mean, 5 standard deviations either side. */
function bounds(n: number, p: number): [number, number] {
  const sd = Math.sqrt(n * p * (1 - p));
  return [n * p - 5 * sd, n * p + 5 * sd];
}

/** Runs `count` requests, `concurrency` at a time. */
async function many<T>(count: number, concurrency: number, one: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) results[i] = await one(i);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return results;
}

/** curl's exit code and what it printed, stdout and stderr together. */
function curl(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], (error, stdout, stderr) => {
      resolve({ code: typeof error?.code === 'number' ? error.code : 0, output: stdout + stderr });
    });
  });
}

/** Every header and the body of an answer but what differs from one request to the next. */
function comparable(res: TestResponse): object {
  const {
    date: _date,
    'x-request-id': _id,
    'ratelimit-remaining': _remaining,
    'ratelimit-reset': _reset,
    ...headers
  } = res.headers;
  return {
    status: res.status,
    headers,
    body: res.text.replace(/"timestamp":"[^"]+"|"request_id":"[^"]+"/g, '"…"'),
  };
}

const ALL_FAULT_HEADERS = {
  'x-envoy-fault-abort-request': '503',
  'x-envoy-fault-abort-request-percentage': '100',
  'x-envoy-fault-delay-request': '2000',
  'x-envoy-fault-delay-request-percentage': '100',
  'x-envoy-fault-throughput-response': '1',
  'x-fault-connection': 'reset',
};

const REQUESTS: TestRequest[] = [
  { path: '/api/hello' },
  { path: '/api/hello/Ada' },
  { path: '/api/search?keyword=a' },
  { method: 'POST', path: '/api/echo', headers: { 'content-type': 'application/json' }, body: '{"a":1}' },
  { path: '/api/exchange?from=USD&to=EUR&amount=1' },
  { path: '/api/nope' },
  { path: '/healthz' },
];

describe('fault injection off (the defaults)', () => {
  let served: Served;
  before(async () => {
    served = await serve({});
  });
  after(() => served.close());

  it('installs nothing: no route has a hook of it', () => {
    const hooks = routeHooks(served.app);
    assert.match(hooks.get('/api/hello (GET)') ?? '', /\(onRequest\)/);
    for (const [route, list] of hooks) assert.doesNotMatch(list, /injectFaults|replaceAnswer/, route);
  });

  it('the fault headers change nothing: every answer is the one without them', async () => {
    for (const req of REQUESTS) {
      const plain = await served.send(req);
      const started = performance.now();
      const asked = await served.send({ ...req, headers: { ...req.headers, ...ALL_FAULT_HEADERS } });
      assert.ok(performance.now() - started < 1000, `${req.path}: not delayed`);
      assert.deepEqual(comparable(asked), comparable(plain), req.path);
      assert.equal(asked.headers['x-fault-injected'], undefined);
    }
  });

  it('counts no fault in /metrics', async () => {
    assert.deepEqual(await faultCounts(served), new Map());
    assert.doesNotMatch((await served.send({ path: '/metrics' })).text, /faults_injected/);
  });
});

describe('FAULT_HEADERS=true', () => {
  let served: Served;
  before(async () => {
    served = await serve({ faultHeaders: true });
  });
  after(() => served.close());

  it('hooks every route under /api, and no other', () => {
    const hooks = routeHooks(served.app);
    for (const route of ['/api/hello (GET)', '/api/hello (HEAD)', '/:name (GET)', '/api/echo (POST)']) {
      assert.match(hooks.get(route) ?? '', /\(onRequest\).*injectFaults\(\)/, route);
      assert.match(hooks.get(route) ?? '', /\(onSend\).*replaceAnswer\(\)/, route);
    }
    for (const route of ['/healthz (GET)', '/readyz (GET)', '/metrics (GET)', '/openapi.json (GET)']) {
      assert.ok(hooks.has(route), route);
      assert.doesNotMatch(hooks.get(route) ?? '', /injectFaults|replaceAnswer/, route);
    }
  });

  describe('x-envoy-fault-abort-request', () => {
    const cases: [number, string, Record<string, string>?][] = [
      [400, 'BAD_REQUEST'],
      [401, 'UNAUTHORIZED', { 'www-authenticate': 'Bearer' }],
      [403, 'FORBIDDEN'],
      [404, 'NOT_FOUND'],
      [405, 'METHOD_NOT_ALLOWED', { allow: 'GET, HEAD' }],
      [407, 'PROXY_AUTHENTICATION_REQUIRED', { 'proxy-authenticate': 'Bearer' }],
      [409, 'CONFLICT'],
      [416, 'RANGE_NOT_SATISFIABLE'],
      [418, 'IM_A_TEAPOT'],
      [422, 'UNSUPPORTED_CURRENCY'],
      [426, 'UPGRADE_REQUIRED', { upgrade: 'HTTP/3.0', connection: 'Upgrade, close' }],
      [429, 'RATE_LIMIT_EXCEEDED', { 'retry-after': '1' }],
      [502, 'BAD_GATEWAY'],
      [503, 'SERVICE_UNAVAILABLE', { 'retry-after': '1' }],
      [504, 'GATEWAY_TIMEOUT'],
      [599, 'INTERNAL_ERROR'],
    ];
    for (const [status, code, headers = {}] of cases) {
      it(`${status}: the envelope of ${code}${Object.keys(headers).length > 0 ? `, with ${Object.keys(headers).join(', ')}` : ''}`, async () => {
        const res = await served.send({
          path: '/api/hello',
          headers: { 'x-envoy-fault-abort-request': String(status) },
        });
        const error = assertEnvelope(res, status, code);
        assert.equal(
          error.message,
          `Injected fault: answered ${status} instead of being served (x-envoy-fault-abort-request).`,
        );
        for (const [name, value] of Object.entries(headers)) assert.equal(res.headers[name], value, name);
        assert.equal(res.headers['x-fault-injected'], 'abort');
        // The headers every answer under /api carries.
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
        assert.equal(res.headers['api-version'], '1');
        assert.equal(res.headers['ratelimit-limit'], '1000');
      });
    }

    it('426 closes a connection its client asked to close, as every answer does', async () => {
      const port = Number(new URL(served.origin).port);
      const answer = await withTimeout(
        rawExchange(
          port,
          'GET /api/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\nx-envoy-fault-abort-request: 426\r\n\r\n',
        ),
        2000,
        'the connection closed after the 426',
      );
      const res = parseRawResponse(answer);
      assertEnvelope(res, 426, 'UPGRADE_REQUIRED');
      assert.equal(res.headers.connection, 'Upgrade, close');
    });

    it("500: rule 5's generic message, whatever asked for it", async () => {
      const res = await served.send({
        path: '/api/echo',
        method: 'POST',
        headers: { 'x-envoy-fault-abort-request': '500' },
      });
      assert.equal(assertEnvelope(res, 500, 'INTERNAL_ERROR').message, 'An internal error occurred.');
    });

    it('2xx and 3xx: that status, no body, the headers of /api', async () => {
      for (const status of [200, 201, 204, 302, 304]) {
        const res = await served.send({
          path: '/api/hello/Ada',
          headers: { 'x-envoy-fault-abort-request': String(status) },
        });
        assert.equal(res.status, status);
        assert.equal(res.text, '');
        assert.equal(res.headers['content-type'], undefined, String(status));
        assert.equal(res.headers['x-fault-injected'], 'abort');
        assert.equal(res.headers['x-request-id'] !== undefined, true);
        assert.equal(res.headers['api-version'], '1');
      }
    });

    it('is ignored out of 200-599 or when no number, as Envoy ignores it', async () => {
      for (const value of ['199', '600', '-503', 'abc', '503.5', '']) {
        const res = await served.send({ path: '/api/hello/Ada', headers: { 'x-envoy-fault-abort-request': value } });
        assert.equal(res.status, 200, JSON.stringify(value));
        assert.deepEqual(res.json(), { greeting: 'Hello, Ada!' });
        assert.equal(res.headers['x-fault-injected'], undefined);
      }
    });

    it('applies to its percentage of requests: 30 of 100, within 5 standard deviations over 400', async (t) => {
      const statuses = await many(400, 20, async () => {
        const res = await served.send({
          path: '/api/hello',
          headers: { 'x-envoy-fault-abort-request': '503', 'x-envoy-fault-abort-request-percentage': '30' },
        });
        return res.status;
      });
      const aborted = statuses.filter((status) => status === 503).length;
      assert.equal(aborted + statuses.filter((status) => status === 200).length, 400);
      const [low, high] = bounds(400, 0.3);
      assert.ok(
        aborted > low && aborted < high,
        `${aborted} of 400 aborted, expected ${low.toFixed(0)} to ${high.toFixed(0)}`,
      );
      t.diagnostic(`${aborted} of 400 aborted at 30% (bounds ${low.toFixed(0)} to ${high.toFixed(0)})`);
    });
  });

  describe('x-envoy-fault-delay-request', () => {
    it('holds the request that long, then serves it', async (t) => {
      const started = performance.now();
      const res = await served.send({
        path: '/api/hello/Ada',
        headers: { 'x-envoy-fault-delay-request': '400', 'x-request-id': 'delay-400' },
      });
      const elapsed = performance.now() - started;
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { greeting: 'Hello, Ada!' });
      assert.equal(res.headers['x-fault-injected'], 'delay');
      assert.ok(elapsed >= 399 && elapsed < 400 + 1500, `answered after ${elapsed.toFixed(0)} ms`);
      t.diagnostic(`a delay of 400 ms answered after ${elapsed.toFixed(1)} ms`);
      const line = served.log.lineOf('delay-400');
      assert.equal(line.status, 200);
      assert.equal(line.fault, 'delay');
      assert.ok((line.duration_ms as number) >= 399, `logged ${line.duration_ms} ms`);
    });

    it('then aborts, when both are asked for, as Envoy does', async () => {
      const started = performance.now();
      const res = await served.send({
        path: '/api/hello',
        headers: { 'x-envoy-fault-delay-request': '200', 'x-envoy-fault-abort-request': '429' },
      });
      assert.ok(performance.now() - started >= 199);
      assertEnvelope(res, 429, 'RATE_LIMIT_EXCEEDED');
      assert.equal(res.headers['x-fault-injected'], 'delay, abort');
    });

    it('is ignored over 60000 ms or when no number', async () => {
      for (const value of ['60001', '1s', '-5']) {
        const started = performance.now();
        const res = await served.send({ path: '/api/hello', headers: { 'x-envoy-fault-delay-request': value } });
        assert.equal(res.status, 200);
        assert.equal(res.headers['x-fault-injected'], undefined);
        assert.ok(performance.now() - started < 1000);
      }
    });

    it('holds no thread: 50 requests held 1 s at once, and /healthz answers meanwhile', async (t) => {
      const started = performance.now();
      const held = many(50, 50, () =>
        served.send({ path: '/api/hello', headers: { 'x-envoy-fault-delay-request': '1000' } }),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      const latencies: number[] = [];
      for (let i = 0; i < 5; i++) {
        const at = performance.now();
        assert.equal((await served.send({ path: '/healthz' })).status, 200);
        latencies.push(performance.now() - at);
      }
      const answers = await held;
      const elapsed = performance.now() - started;
      assert.ok(
        latencies.every((ms) => ms < 300),
        `/healthz took ${latencies.map((ms) => ms.toFixed(0))} ms`,
      );
      assert.ok(answers.every((res) => res.status === 200));
      assert.ok(elapsed >= 999 && elapsed < 1000 + 2000, `the 50 answered within ${elapsed.toFixed(0)} ms`);
      t.diagnostic(
        `50 held 1 s answered within ${elapsed.toFixed(0)} ms; /healthz meanwhile ${latencies.map((ms) => ms.toFixed(1)).join(', ')} ms`,
      );
    });

    it('ends without harm when its client leaves: one line with status 0, counted, nothing answered later', async () => {
      const before = (await faultCounts(served)).get('delay,headers') ?? 0;
      const controller = new AbortController();
      const pending = request(`${served.origin}/api/hello`, {
        headers: { 'x-envoy-fault-delay-request': '1500', 'x-request-id': 'delay-left' },
        signal: controller.signal,
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      controller.abort();
      await assert.rejects(pending, { name: 'AbortError' });
      await new Promise((resolve) => setTimeout(resolve, 1700));
      const line = served.log.lineOf('delay-left');
      assert.equal(line.status, 0);
      assert.equal(line.fault, 'delay');
      assert.ok((line.duration_ms as number) < 1500, 'logged when the client left, not when the delay ran out');
      assert.equal((await faultCounts(served)).get('delay,headers'), before + 1);
      assert.equal((await served.send({ path: '/api/hello' })).status, 200);
    });
  });

  describe('x-envoy-fault-throughput-response', () => {
    it('sends the body no faster than that many KiB/s, whole', async (t) => {
      const sent = JSON.stringify({ text: 'x'.repeat(4000) });
      const started = performance.now();
      const res = await served.send({
        method: 'POST',
        path: '/api/echo',
        headers: { 'content-type': 'application/json', 'x-envoy-fault-throughput-response': '8' },
        body: sent,
      });
      const elapsed = performance.now() - started;
      assert.equal(res.status, 200);
      assert.deepEqual(res.json().received, JSON.parse(sent));
      assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.text));
      assert.equal(res.headers['x-fault-injected'], 'throughput');
      const least = (Buffer.byteLength(res.text) / (8 * 1024)) * 1000;
      assert.ok(elapsed >= least && elapsed < least + 2000, `${elapsed.toFixed(0)} ms, at least ${least.toFixed(0)}`);
      t.diagnostic(
        `${Buffer.byteLength(res.text)} bytes at 8 KiB/s in ${elapsed.toFixed(0)} ms (at least ${least.toFixed(0)})`,
      );
    });

    it('is no fault where there is no body to pace (a HEAD, an event stream): not named in the answer nor in the line', async () => {
      const before = (await faultCounts(served)).get('throughput,headers');
      for (const [method, path] of [
        ['HEAD', '/api/hello'],
        ['GET', '/api/events?count=1&interval_ms=10'],
      ] as const) {
        const id = `unpaced-${method}`;
        const res = await served.send({
          method,
          path,
          headers: { 'x-envoy-fault-throughput-response': '1', 'x-request-id': id },
        });
        assert.equal(res.status, 200, path);
        assert.equal(res.headers['x-fault-injected'], undefined, path);
        assert.equal(served.log.lineOf(id).fault, undefined, path);
      }
      assert.equal((await faultCounts(served)).get('throughput,headers'), before);
    });

    it('is ignored at 0 or when no number', async () => {
      for (const value of ['0', 'slow']) {
        const res = await served.send({ path: '/api/hello', headers: { 'x-envoy-fault-throughput-response': value } });
        assert.equal(res.headers['x-fault-injected'], undefined);
      }
    });
  });

  describe('x-fault-connection', () => {
    // Each on a connection of its own, so that a broken one is no other request's.
    const agent = new Agent({ pipelining: 0 });
    after(() => agent.close());
    const broken = (kind: string, id: string) =>
      request(`${served.origin}/api/hello`, {
        dispatcher: agent,
        headers: { 'x-fault-connection': kind, 'x-request-id': id },
      });

    const servesAfter = async () => {
      assert.equal((await served.send({ path: '/healthz' })).status, 200);
      const res = await served.send({ path: '/api/hello/Ada' });
      assert.deepEqual(res.json(), { greeting: 'Hello, Ada!' });
    };

    it('reset: the connection is reset once the request is read (undici: ECONNRESET)', async () => {
      await assert.rejects(broken('reset', 'reset-1'), { code: 'ECONNRESET' });
      await servesAfter();
    });

    it('empty: closed with no answer (undici: other side closed)', async () => {
      await assert.rejects(broken('empty', 'empty-1'), { code: 'UND_ERR_SOCKET', message: 'other side closed' });
      await servesAfter();
    });

    it('truncate: the head, with the whole Content-Length, and half the body, then closed', async () => {
      const res = await broken('truncate', 'truncate-1');
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-fault-injected'], 'truncate');
      assert.ok(Number(res.headers['content-length']) > 0);
      // Which of the two undici reports depends on whether it sees the close or the short body first.
      await assert.rejects(res.body.text(), (error: NodeJS.ErrnoException) =>
        ['UND_ERR_SOCKET', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'].includes(error.code ?? ''),
      );
      await servesAfter();
    });

    it('malformed: bytes that are not HTTP, then closed (undici: a parser error)', async () => {
      await assert.rejects(broken('malformed', 'malformed-1'), /does not match the HTTP\/1\.1 protocol/);
      await servesAfter();
    });

    it('a POST is read whole first, its body parsed and answered, and the answer replaced', async () => {
      const res = request(`${served.origin}/api/echo`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-fault-connection': 'reset', 'x-request-id': 'reset-post' },
        body: JSON.stringify({ big: 'y'.repeat(100_000) }),
      });
      await assert.rejects(res, { code: 'ECONNRESET' });
      await servesAfter();
    });

    it('each broken connection is one log line, status 0, naming the fault, and counted', async () => {
      for (const kind of ['reset', 'empty', 'truncate', 'malformed']) {
        const line = served.log.lineOf(`${kind}-1`);
        assert.equal(line.status, 0, kind);
        assert.equal(line.fault, kind);
        assert.equal(line.route, '/api/hello');
      }
      assert.equal(served.log.lineOf('reset-post').route, '/api/echo');
      const counts = await faultCounts(served);
      for (const kind of ['empty', 'truncate', 'malformed']) assert.equal(counts.get(`${kind},headers`), 1, kind);
      assert.equal(counts.get('reset,headers'), 2);
      const text = (await served.send({ path: '/metrics' })).text;
      const requests = samples(text, 'http_requests_total');
      const logged = served.log.lines.filter((line) => line.route === '/api/hello' && line.status === 0);
      assert.ok(logged.length >= 4);
      // Counted with status 0 among the requests, as logged, each labelled with its fault: out of the SLIs.
      for (const kind of ['reset', 'empty', 'truncate', 'malformed']) {
        assert.equal(
          requests.get(`{method="GET",route="/api/hello",status="0",fault="${kind}"}`),
          logged.filter((line) => line.fault === kind).length,
          kind,
        );
      }
      assert.equal(
        requests.get('{method="GET",route="/api/hello",status="0"}'),
        undefined,
        'no status 0 without its fault',
      );
    });

    it('seen by curl as the error each one is', { skip: !CURL }, async () => {
      const url = `${served.origin}/api/hello`;
      const reset = await curl([url, '-H', 'x-fault-connection: reset']);
      assert.equal(reset.code, 56, reset.output);
      assert.match(reset.output, /Connection reset by peer/);
      const empty = await curl([url, '-H', 'x-fault-connection: empty']);
      assert.equal(empty.code, 52, empty.output);
      assert.match(empty.output, /Empty reply from server/);
      const truncate = await curl([url, '-H', 'x-fault-connection: truncate']);
      assert.equal(truncate.code, 18, truncate.output);
      assert.match(truncate.output, /^\{"message":"Hello, World!","time/);
      assert.match(truncate.output, /transfer closed with \d+ bytes remaining to read/);
      const malformed = await curl([url, '-H', 'x-fault-connection: malformed']);
      assert.ok(malformed.code !== 0, malformed.output);
      assert.match(malformed.output, /HTTP\/0\.9|Weird server reply|Unsupported/);
      await servesAfter();
    });

    it('an unknown kind is ignored', async () => {
      const res = await served.send({ path: '/api/hello', headers: { 'x-fault-connection': 'explode' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-fault-injected'], undefined);
    });

    it('truncate of the event stream: its head announces a chunked body, never ended (undici and curl: an error)', async () => {
      const res = await request(`${served.origin}/api/events?count=3&interval_ms=100`, {
        dispatcher: agent,
        headers: { 'x-fault-connection': 'truncate', 'x-request-id': 'truncate-stream' },
      });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-fault-injected'], 'truncate');
      assert.equal(res.headers['content-length'], undefined);
      assert.equal(res.headers['transfer-encoding'], 'chunked');
      // Which of the two undici reports depends on whether it sees the close or the cut chunked body first.
      await assert.rejects(
        res.body.text(),
        (error: Error & { code?: string }) =>
          error.code === 'UND_ERR_SOCKET' || /Invalid EOF state/.test(error.message),
      );
      if (CURL) {
        const cut = await curl([`${served.origin}/api/events?count=3`, '-H', 'x-fault-connection: truncate']);
        assert.equal(cut.code, 18, cut.output);
      }
      assert.equal(served.log.lineOf('truncate-stream').status, 0);
      await servesAfter();
    });

    it('truncate of an answer with no body: the head as it would be (a HEAD its length, a 204 or 304 none), then closed', async () => {
      const port = Number(new URL(served.origin).port);
      const head = async (lines: string) =>
        parseRawResponse(await rawExchange(port, `${lines}\r\nHost: x\r\nConnection: close\r\n\r\n`)).headers;
      const whole = await head('HEAD /api/hello HTTP/1.1');
      const cut = await head('HEAD /api/hello HTTP/1.1\r\nx-fault-connection: truncate');
      assert.equal(cut['x-fault-injected'], 'truncate');
      assert.equal(cut['content-length'], whole['content-length']);
      for (const status of [204, 304]) {
        const headers = await head(
          `GET /api/hello HTTP/1.1\r\nx-envoy-fault-abort-request: ${status}\r\nx-fault-connection: truncate`,
        );
        assert.equal(headers['x-fault-injected'], 'abort, truncate');
        // RFC 9110, 8.6: never on a 204; on a 304, only the length of the answer it stands for.
        assert.equal(headers['content-length'], undefined, String(status));
      }
    });
  });

  it('the WebSocket handshake: no throughput nor broken connection, which a 101 has no answer for; the echo served', async () => {
    const socket = new WebSocket(`${served.origin.replace('http', 'ws')}/api/echo/websocket`, {
      headers: {
        'x-fault-connection': 'reset',
        'x-envoy-fault-throughput-response': '1',
        'x-request-id': 'websocket-faults',
      },
    });
    const upgraded = new Promise<Record<string, unknown>>((resolve) =>
      socket.once('upgrade', (res) => resolve(res.headers)),
    );
    const echoed = new Promise<string>((resolve) => socket.once('message', (data) => resolve(String(data))));
    socket.once('open', () => socket.send('still here'));
    assert.equal((await upgraded)['x-fault-injected'], undefined);
    assert.equal(await echoed, 'still here');
    socket.close();
    // Logged as the connection switched, before the echo.
    const line = served.log.lineOf('websocket-faults');
    assert.equal(line.status, 101);
    assert.equal(line.fault, undefined);
  });

  it('never applies outside /api: /healthz, /readyz, /metrics, /openapi.json and /docs answer as always', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', '/docs/json']) {
      const plain = await served.send({ path });
      const started = performance.now();
      const asked = await served.send({ path, headers: ALL_FAULT_HEADERS });
      assert.ok(performance.now() - started < 1000, `${path}: not delayed`);
      assert.equal(asked.status, plain.status, path);
      assert.equal(asked.headers['x-fault-injected'], undefined, path);
    }
  });

  it('counts every kind from 0 in /metrics, by source', async () => {
    const fresh = await serve({ faultHeaders: true });
    try {
      assert.deepEqual(
        await faultCounts(fresh),
        new Map(
          ['delay', 'abort', 'throughput', 'reset', 'empty', 'truncate', 'malformed'].map((kind) => [
            `${kind},headers`,
            0,
          ]),
        ),
      );
    } finally {
      await fresh.close();
    }
  });

  it('counts the answers it replaces by the status sent, 0 for a broken connection, apart from those it delays', async () => {
    const fresh = await serve({ faultHeaders: true });
    try {
      assert.deepEqual(await injectedAnswers(fresh), new Map([[0, 0]]));
      await fresh.send({ path: '/api/hello', headers: { 'x-envoy-fault-abort-request': '502' } });
      await fresh.send({ path: '/api/hello', headers: { 'x-envoy-fault-abort-request': '502' } });
      await fresh.send({ path: '/api/hello', headers: { 'x-envoy-fault-abort-request': '429' } });
      await fresh.send({ path: '/api/hello', headers: { 'x-envoy-fault-delay-request': '10' } });
      await assert.rejects(fresh.send({ path: '/api/hello', headers: { 'x-fault-connection': 'reset' } }));
      assert.deepEqual(
        await injectedAnswers(fresh),
        new Map([
          [0, 1],
          [502, 2],
          [429, 1],
        ]),
      );
    } finally {
      await fresh.close();
    }
  });
});

describe('FAULT_ERROR_RATE and FAULT_DELAY_RATE', () => {
  it('answer FAULT_ERROR_RATE of /api requests with FAULT_ERROR_STATUS, within 5 standard deviations over 400', async (t) => {
    const served = await serve({ faultErrorRate: 0.25 });
    try {
      const answers = await many(400, 20, () => served.send({ path: '/api/hello/Ada' }));
      const injected = answers.filter((res) => res.status === 503);
      for (const res of injected.slice(0, 20)) {
        const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
        assert.equal(error.message, 'Injected fault: answered 503 instead of being served (FAULT_ERROR_RATE).');
        assert.equal(res.headers['retry-after'], '1');
        assert.equal(res.headers['x-fault-injected'], 'abort');
      }
      assert.equal(injected.length + answers.filter((res) => res.status === 200).length, 400);
      const [low, high] = bounds(400, 0.25);
      assert.ok(injected.length > low && injected.length < high, `${injected.length} of 400`);
      t.diagnostic(
        `${injected.length} of 400 answered 503 at FAULT_ERROR_RATE=0.25 (bounds ${low.toFixed(0)} to ${high.toFixed(0)})`,
      );
      assert.deepEqual(await faultCounts(served), new Map([['abort,settings', injected.length]]));
      assert.deepEqual(await injectedAnswers(served), new Map([[503, injected.length]]));
      // Outside /api, nothing.
      const health = await many(100, 20, () => served.send({ path: '/healthz' }));
      assert.ok(health.every((res) => res.status === 200));
      // The headers are not read.
      const asked = await served.send({ path: '/api/hello', headers: { 'x-envoy-fault-delay-request': '3000' } });
      assert.notEqual(asked.headers['x-fault-injected'], 'delay');
    } finally {
      await served.close();
    }
  });

  it("FAULT_ERROR_STATUS=500: rule 5's generic message", async () => {
    const served = await serve({ faultErrorRate: 1, faultErrorStatus: 500 });
    try {
      const res = await served.send({ path: '/api/search?keyword=a' });
      assert.equal(assertEnvelope(res, 500, 'INTERNAL_ERROR').message, 'An internal error occurred.');
      assert.equal(res.headers['x-fault-injected'], 'abort');
    } finally {
      await served.close();
    }
  });

  it('delay FAULT_DELAY_RATE of requests by a draw from FAULT_DELAY_MS, then serve them', async (t) => {
    const served = await serve({ faultDelayRate: 0.5, faultDelayMs: { min: 0, max: 2 } });
    try {
      const answers = await many(400, 20, () => served.send({ path: '/api/hello' }));
      assert.ok(answers.every((res) => res.status === 200));
      const delayed = answers.filter((res) => res.headers['x-fault-injected'] === 'delay').length;
      const [low, high] = bounds(400, 0.5);
      assert.ok(delayed > low && delayed < high, `${delayed} of 400 delayed`);
      t.diagnostic(
        `${delayed} of 400 delayed at FAULT_DELAY_RATE=0.5 (bounds ${low.toFixed(0)} to ${high.toFixed(0)})`,
      );
    } finally {
      await served.close();
    }
    const long = await serve({ faultDelayRate: 1, faultDelayMs: { min: 200, max: 400 } });
    try {
      const timed = await many(10, 10, async () => {
        const started = performance.now();
        const res = await long.send({ path: '/api/hello' });
        return { res, ms: performance.now() - started };
      });
      for (const { res, ms } of timed) {
        assert.equal(res.status, 200);
        assert.ok(ms >= 199 && ms < 400 + 1500, `${ms.toFixed(0)} ms`);
      }
      const times = timed.map(({ ms }) => ms);
      t.diagnostic(
        `FAULT_DELAY_MS=200-400: answered after ${Math.min(...times).toFixed(0)} to ${Math.max(...times).toFixed(0)} ms`,
      );
    } finally {
      await long.close();
    }
  });
});

describe('the answers a fault touched in /metrics', () => {
  it('are labelled with the faults injected (fault="delay,abort"), those no fault touched have no fault label; faults_expected is FAULTS_EXPECTED', async () => {
    const served = await serve({ faultErrorRate: 0.5, faultDelayRate: 0.5, faultDelayMs: { min: 0, max: 0 } });
    try {
      const answers = await many(200, 20, () => served.send({ path: '/api/hello' }));
      const byFault = new Map<string, number>();
      for (const res of answers) {
        const fault = String(res.headers['x-fault-injected'] ?? '').replace(/, /g, ',');
        byFault.set(fault, (byFault.get(fault) ?? 0) + 1);
      }
      assert.deepEqual([...byFault.keys()].sort(), ['', 'abort', 'delay', 'delay,abort']);
      const text = (await served.send({ path: '/metrics' })).text;
      const requests = samples(text, 'http_requests_total');
      const durations = samples(text, 'http_request_duration_seconds_count');
      for (const [fault, count] of byFault) {
        const status = fault.includes('abort') ? 503 : 200;
        const key = `{method="GET",route="/api/hello",status="${status}"${fault === '' ? '' : `,fault="${fault}"`}}`;
        assert.equal(requests.get(key), count, key);
        assert.equal(durations.get(key), count, key);
      }
      assert.equal(samples(text, 'faults_expected').get(''), 0);
    } finally {
      await served.close();
    }
    const expected = await serve({ faultErrorRate: 0.5, faultsExpected: true });
    try {
      assert.equal(samples((await expected.send({ path: '/metrics' })).text, 'faults_expected').get(''), 1);
    } finally {
      await expected.close();
    }
  });
});

describe('the gRPC calls a fault touched in /metrics', () => {
  it('are labelled with the faults injected in grpc_server_handled_total and grpc_server_handling_seconds alike, as answers are', async () => {
    const served = await serve({ faultErrorRate: 0.5, faultDelayRate: 0.5, faultDelayMs: { min: 0, max: 0 } });
    try {
      const calls = await many(200, 20, () =>
        served.send({
          method: 'POST',
          path: '/greeting.v1.GreetingService/Greet',
          headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' },
          body: '{"name":"Ada"}',
        }),
      );
      const byFault = new Map<string, number>();
      for (const res of calls) {
        const fault = String(res.headers['x-fault-injected'] ?? '').replace(/, /g, ',');
        byFault.set(fault, (byFault.get(fault) ?? 0) + 1);
      }
      assert.deepEqual([...byFault.keys()].sort(), ['', 'abort', 'delay', 'delay,abort']);
      const text = (await served.send({ path: '/metrics' })).text;
      const handled = samples(text, 'grpc_server_handled_total');
      const durations = samples(text, 'grpc_server_handling_seconds_count');
      const call = 'grpc_service="greeting.v1.GreetingService",grpc_method="Greet",grpc_type="unary"';
      for (const [fault, count] of byFault) {
        // Written `fault=""` for none, which Prometheus keeps as no label, as HTTP's series have.
        const labelled = `,fault="${fault}"`;
        const code = fault.includes('abort') ? 'Unavailable' : 'OK';
        assert.equal(handled.get(`{${call},grpc_code="${code}"${labelled}}`), count, `${code} ${fault}`);
        assert.equal(durations.get(`{${call}${labelled}}`), count, `duration ${fault}`);
      }
    } finally {
      await served.close();
    }
  });
});

describe('the OpenAPI document of a deployment that injects faults', () => {
  // biome-ignore lint/suspicious/noExplicitAny: the document, walked by its own structure
  const documentOf = async (served: Served): Promise<any> => (await served.send({ path: '/openapi.json' })).json();

  it('off: says nothing of faults', async () => {
    const served = await serve({});
    try {
      const doc = await documentOf(served);
      assert.doesNotMatch(JSON.stringify(doc), /X-Fault-Injected|Injected|IM_A_TEAPOT|injects faults/);
    } finally {
      await served.close();
    }
  });

  it("FAULT_ERROR_RATE: every operation under /api lists its status, whose code is the envelope's", async () => {
    const served = await serve({ faultErrorRate: 0.5, faultErrorStatus: 418, faultDelayRate: 0.1 });
    try {
      const doc = await documentOf(served);
      assert.match(
        doc.info.description,
        /This deployment injects faults, for testing what stands around it: a share of the requests under `\/api` is answered 418 instead of being served \(`FAULT_ERROR_RATE`\); a share is held before it is served \(`FAULT_DELAY_RATE`\)\./,
      );
      for (const [path, item] of Object.entries<Record<string, { responses: Record<string, { $ref?: string }> }>>(
        doc.paths,
      )) {
        for (const operation of Object.values(item)) {
          const injected = operation.responses['418']?.$ref;
          assert.equal(injected, path.startsWith('/api/') ? '#/components/responses/InjectedError' : undefined, path);
          assert.equal(operation.responses.default, undefined);
        }
      }
      assert.ok(doc.components.schemas.ErrorEnvelope.properties.error.properties.code.enum.includes('IM_A_TEAPOT'));
      assert.equal(
        doc.components.responses.InjectedError.headers['X-Fault-Injected'].$ref,
        '#/components/headers/X-Fault-Injected',
      );
      // The injected answers are what the document says they are.
      const conformance = await conformanceOf(served.app);
      let injected = 0;
      for (let i = 0; i < 20; i++) {
        const request = { path: '/api/hello/Ada' };
        const res = await served.send(request);
        injected += res.status === 418 ? 1 : 0;
        conformance.check(request, res);
      }
      assert.ok(injected > 0);
    } finally {
      await served.close();
    }
  });

  it('FAULT_ERROR_STATUS=407 and 426: the injected response lists the header RFC 9110 requires, and the answers have it', async () => {
    for (const [status, header, value] of [
      [407, 'Proxy-Authenticate', 'Bearer'],
      [426, 'Upgrade', 'HTTP/3.0'],
    ] as const) {
      const served = await serve({ faultErrorRate: 1, faultErrorStatus: status });
      try {
        const doc = await documentOf(served);
        const ref = doc.components.responses.InjectedError.headers[header].$ref as string;
        const component = doc.components.headers[ref.replace('#/components/headers/', '')];
        assert.deepEqual(component.schema, { type: 'string', const: value });
        const conformance = await conformanceOf(served.app);
        const request = { path: '/api/hello/Ada' };
        const res = await served.send(request);
        assert.equal(res.headers[header.toLowerCase()], value);
        conformance.check(request, res);
      } finally {
        await served.close();
      }
    }
  });

  it("FAULT_HEADERS: a default response under /api, and every code of 400 to 599 among the envelope's", async () => {
    const served = await serve({ faultHeaders: true });
    try {
      const doc = await documentOf(served);
      assert.match(doc.info.description, /a request may ask for faults with the headers of Envoy's fault filter/);
      assert.equal(doc.paths['/api/v1/hello'].get.responses.default.$ref, '#/components/responses/InjectedFault');
      assert.equal(doc.paths['/healthz'].get.responses.default, undefined);
      const codes = doc.components.schemas.ErrorEnvelope.properties.error.properties.code.enum;
      for (const code of ['FORBIDDEN', 'CONFLICT', 'IM_A_TEAPOT', 'BAD_GATEWAY', 'GATEWAY_TIMEOUT', 'INTERNAL_ERROR']) {
        assert.ok(codes.includes(code), code);
      }
      const conformance = await conformanceOf(served.app);
      for (const status of ['403', '409', '418', '502', '599']) {
        const request = { path: '/api/hello', headers: { 'x-envoy-fault-abort-request': status } };
        conformance.check(request, await served.send(request));
      }
    } finally {
      await served.close();
    }
  });
});

describe('delays longer than REQUEST_TIMEOUT_MS', () => {
  // The request timeout, and the socket's idle timeout Fastify derives from it, both end well within the delay.
  const REQUEST_TIMEOUT_MS = 1000;
  const DELAY_MS = 2500;
  const held = (id: string) => ({ 'x-envoy-fault-delay-request': String(DELAY_MS), 'x-request-id': id });
  const BODY = '{"held":[1,2,3]}';

  for (const http2On of [false, true]) {
    describe(http2On ? 'over h2c' : 'over HTTP/1.1', () => {
      let served: Served;
      before(async () => {
        served = await serve({
          faultHeaders: true,
          http2: http2On,
          requestTimeoutMs: REQUEST_TIMEOUT_MS,
          headersTimeoutMs: REQUEST_TIMEOUT_MS,
        });
      });
      after(() => served.close());

      /** A request with these fault headers over the protocol of this describe: its status, body and when it ended. */
      async function send(
        method: 'GET' | 'POST',
        faults: Record<string, string>,
        posted = BODY,
      ): Promise<{ status: number; text: string; ms: number }> {
        const path = method === 'GET' ? '/api/hello/Ada' : '/api/echo';
        const started = performance.now();
        const body = method === 'POST' ? posted : undefined;
        const headers = { ...faults, ...(body !== undefined && { 'content-type': 'application/json' }) };
        if (!http2On) {
          const res = await sendTo(served.origin, { method, path, headers, body });
          return { status: res.status, text: res.text, ms: performance.now() - started };
        }
        const session = http2Connect(served.origin);
        session.on('error', () => {});
        try {
          return await new Promise((resolve, reject) => {
            const stream = session.request({ ':method': method, ':path': path, ...headers });
            let status = 0;
            let text = '';
            stream.on('response', (head) => {
              status = Number(head[':status']);
            });
            stream.setEncoding('utf8');
            stream.on('data', (chunk: string) => {
              text += chunk;
            });
            stream.on('error', reject);
            stream.on('close', () =>
              stream.rstCode === http2.NGHTTP2_NO_ERROR
                ? resolve({ status, text, ms: performance.now() - started })
                : reject(new Error(`RST_STREAM ${stream.rstCode}`)),
            );
            stream.end(body);
          });
        } finally {
          session.close();
        }
      }

      for (const method of ['GET', 'POST'] as const) {
        it(`${method}: served when the delay ends, logged with its status`, async () => {
          const id = `held-past-timeout-${method}-${http2On ? 'h2' : 'h1'}`;
          const res = await send(method, held(id));
          assert.equal(res.status, 200);
          const answer = JSON.parse(res.text);
          if (method === 'GET') assert.deepEqual(answer, { greeting: 'Hello, Ada!' });
          else assert.deepEqual(answer.received, JSON.parse(BODY));
          assert.ok(res.ms >= DELAY_MS - 1 && res.ms < DELAY_MS + 1500, `answered after ${res.ms.toFixed(0)} ms`);
          const line = served.log.lineOf(id);
          assert.deepEqual([line.status, line.fault], [200, 'delay']);
        });
      }

      it('a POST whose answer is paced for longer than REQUEST_TIMEOUT_MS is sent whole', async () => {
        const id = `paced-past-timeout-${http2On ? 'h2' : 'h1'}`;
        const posted = JSON.stringify({ text: 'x'.repeat(2_400) });
        const res = await send('POST', { 'x-envoy-fault-throughput-response': '1', 'x-request-id': id }, posted);
        assert.equal(res.status, 200);
        assert.deepEqual(JSON.parse(res.text).received, JSON.parse(posted));
        assert.ok(res.ms >= 2_000, `sent in ${res.ms.toFixed(0)} ms`);
        assert.deepEqual([served.log.lineOf(id).status, served.log.lineOf(id).fault], [200, 'throughput']);
      });
    });
  }
});

/** Paths Fastify refuses before routing, for not being valid percent-encoding of UTF-8: no hook runs for them. */
const BADLY_ENCODED_PATHS = ['/api/hello/%ED%A0%80', '/api/hello/%C0%AF', '/api/hello/%FF', '/api/currencies/%E2%82'];

function assertBadlyEncoded(res: TestResponse, path: string): void {
  assertEnvelope(res, 400, 'VALIDATION_ERROR', [
    { field: 'path', message: 'must be valid percent-encoded UTF-8', value: path },
  ]);
}

describe('requests refused before routing, with fault injection on', () => {
  const settings: [string, Partial<Config>][] = [
    ['FAULT_ERROR_RATE', { faultErrorRate: 0.01 }],
    ['FAULT_DELAY_RATE', { faultDelayRate: 0.01, faultDelayMs: { min: 1, max: 2 } }],
    ['FAULT_HEADERS', { faultHeaders: true }],
  ];
  for (const [name, overrides] of settings) {
    it(`${name}: a 400 for each badly encoded path, its line without a fault, and the service serves on`, async () => {
      const served = await serve(overrides);
      try {
        for (const path of BADLY_ENCODED_PATHS) {
          const res = await served.send({ path, headers: ALL_FAULT_HEADERS });
          assertBadlyEncoded(res, path);
          assert.equal(res.headers['x-fault-injected'], undefined);
          const line = served.log.lineOf(res.headers['x-request-id']);
          assert.equal(line.status, 400);
          assert.equal(line.fault, undefined);
        }
        assert.equal((await served.send({ path: '/healthz' })).status, 200);
      } finally {
        await served.close();
      }
    });
  }

  it('the built server with FAULT_ERROR_RATE=0.01: answers four badly encoded paths 400, stays up, exits 0 on SIGTERM', async () => {
    const server = await startServer({ FAULT_ERROR_RATE: '0.01' });
    const origin = `http://127.0.0.1:${server.port}`;
    for (const path of BADLY_ENCODED_PATHS) {
      assertBadlyEncoded(await sendTo(origin, { path }), path);
    }
    // A crash would come once the answers were sent, as their lines are written.
    await server.waitForLog((line) => line.url === BADLY_ENCODED_PATHS.at(-1) && line.status === 400);
    assert.equal((await sendTo(origin, { path: '/healthz' })).status, 200);
    await assertStopsCleanly(server);
  });
});

describe('delays and shutdown: the built server', () => {
  it('a request held past the shutdown is answered by half of SHUTDOWN_TIMEOUT_MS, and the process exits 0', async (t) => {
    const server = await startServer({ FAULT_HEADERS: 'true', SHUTDOWN_TIMEOUT_MS: '3000' });
    const origin = `http://127.0.0.1:${server.port}`;
    const held = request(`${origin}/api/hello`, {
      headers: { 'x-envoy-fault-delay-request': '60000', 'x-request-id': 'held-60s' },
    }).then(async (res) => ({ status: res.statusCode, body: await res.body.json(), at: performance.now() }));
    // Held once it is counted.
    for (let held = 0; held === 0; ) {
      const text = await (await request(`${origin}/metrics`)).body.text();
      held = samples(text, 'faults_injected_total').get('{kind="delay",source="headers"}') ?? 0;
    }
    const signalledAt = performance.now();
    server.child.kill('SIGTERM');
    const answer = await withTimeout(held, 10_000, 'the held answer');
    const exit = await withTimeout(server.exited, 10_000, 'exit');
    assert.equal(answer.status, 200);
    assert.equal((answer.body as { message: string }).message, 'Hello, World!');
    const after = answer.at - signalledAt;
    assert.ok(after >= 1400 && after < 2900, `answered ${after.toFixed(0)} ms after SIGTERM`);
    assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stderr());
    assert.ok(exit.at - signalledAt < 3000, `exited ${(exit.at - signalledAt).toFixed(0)} ms after SIGTERM`);
    t.diagnostic(
      `held 60 s, SHUTDOWN_TIMEOUT_MS=3000: answered ${after.toFixed(0)} ms after SIGTERM, exit 0 after ${(exit.at - signalledAt).toFixed(0)} ms`,
    );
    const line = server.lines.find((l) => l.request_id === 'held-60s');
    assert.equal(line?.fault, 'delay');
    assert.equal(line?.status, 200);
  });
});

describe('delays longer than REQUEST_TIMEOUT_MS: the built server', () => {
  it('a 5 s delay with REQUEST_TIMEOUT_MS=3000: GET and POST served after 5 s; one held 60 s still answered in time on SIGTERM', async (t) => {
    const server = await startServer({
      FAULT_HEADERS: 'true',
      REQUEST_TIMEOUT_MS: '3000',
      HEADERS_TIMEOUT_MS: '3000',
      SHUTDOWN_TIMEOUT_MS: '3000',
    });
    const origin = `http://127.0.0.1:${server.port}`;
    const started = performance.now();
    const send = (path: string, ms: number, id: string, body?: string) =>
      request(`${origin}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: {
          'x-envoy-fault-delay-request': String(ms),
          'x-request-id': id,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        body,
      }).then(async (res) => ({ status: res.statusCode, body: await res.body.json(), at: performance.now() }));
    const longest = send('/api/hello', 60_000, 'held-60s-past-timeout');
    const [get, post] = await Promise.all([
      send('/api/hello/Ada', 5_000, 'held-5s-get'),
      send('/api/echo', 5_000, 'held-5s-post', '{"held":true}'),
    ]);
    assert.deepEqual([get.status, get.body], [200, { greeting: 'Hello, Ada!' }]);
    assert.deepEqual([post.status, (post.body as { received: unknown }).received], [200, { held: true }]);
    for (const { at } of [get, post])
      assert.ok(at - started >= 4_990, `answered after ${(at - started).toFixed(0)} ms`);
    const signalledAt = performance.now();
    server.child.kill('SIGTERM');
    const answer = await withTimeout(longest, 10_000, 'the answer held 60 s');
    const exit = await withTimeout(server.exited, 10_000, 'exit');
    assert.equal(answer.status, 200);
    const after = answer.at - signalledAt;
    assert.ok(after >= 1400 && after < 2900, `answered ${after.toFixed(0)} ms after SIGTERM`);
    assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stderr());
    t.diagnostic(
      `5 s delays answered after ${(get.at - started).toFixed(0)} and ${(post.at - started).toFixed(0)} ms; held 60 s answered ${after.toFixed(0)} ms after SIGTERM`,
    );
    for (const id of ['held-5s-get', 'held-5s-post', 'held-60s-past-timeout']) {
      const line = server.lines.find((l) => l.request_id === id);
      assert.deepEqual([line?.status, line?.fault], [200, 'delay'], id);
    }
  });
});

describe('over HTTP/2 (h2c)', () => {
  let app: FastifyInstance;
  let origin: string;
  const log = new LogCapture();
  before(async () => {
    const config = testConfig({ http2: true, faultHeaders: true, logLevel: 'info', rateLimitMax: 0 });
    app = await buildApp(config, { logStream: log });
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => app.close());

  interface Exchange {
    status: number | undefined;
    headers: Record<string, unknown>;
    body: string;
    rstCode: number;
  }

  /** Requests on one HTTP/2 connection, in turn; what each stream got, and how it ended. */
  async function onOneConnection(requests: Record<string, string>[]): Promise<Exchange[]> {
    const session = http2Connect(origin);
    session.on('error', () => {});
    try {
      const exchanges: Exchange[] = [];
      for (const headers of requests) {
        exchanges.push(
          await new Promise<Exchange>((resolve) => {
            const stream = session.request({ ':path': '/api/hello', ...headers });
            const got: Exchange = { status: undefined, headers: {}, body: '', rstCode: 0 };
            stream.on('response', (head) => {
              got.status = head[':status'];
              got.headers = head;
            });
            stream.setEncoding('utf8');
            stream.on('data', (chunk: string) => {
              got.body += chunk;
            });
            stream.on('error', () => {});
            stream.on('close', () => resolve({ ...got, rstCode: stream.rstCode ?? 0 }));
            stream.end();
          }),
        );
      }
      return exchanges;
    } finally {
      session.close();
    }
  }

  it('reset, empty and malformed are RST_STREAM on the stream; the connection serves the next request', async () => {
    const [reset, , empty, , malformed, after] = await onOneConnection([
      { 'x-fault-connection': 'reset', 'x-request-id': 'h2-reset' },
      {},
      { 'x-fault-connection': 'empty', 'x-request-id': 'h2-empty' },
      {},
      { 'x-fault-connection': 'malformed', 'x-request-id': 'h2-malformed' },
      {},
    ]);
    assert.deepEqual([reset?.status, reset?.rstCode], [undefined, http2.NGHTTP2_INTERNAL_ERROR]);
    assert.deepEqual([empty?.status, empty?.rstCode], [undefined, http2.NGHTTP2_NO_ERROR]);
    assert.deepEqual([malformed?.status, malformed?.rstCode], [undefined, http2.NGHTTP2_PROTOCOL_ERROR]);
    assert.equal(after?.status, 200);
    assert.equal(JSON.parse(after?.body ?? '').message, 'Hello, World!');
  });

  it('truncate: the head with the whole content-length, half the body, then RST_STREAM', async () => {
    const [cut] = await onOneConnection([{ 'x-fault-connection': 'truncate', 'x-request-id': 'h2-truncate' }]);
    assert.equal(cut?.status, 200);
    assert.equal(cut?.headers['x-fault-injected'], 'truncate');
    const length = Number(cut?.headers['content-length']);
    assert.equal(cut?.body.length, Math.floor(length / 2));
    assert.equal(cut?.rstCode, http2.NGHTTP2_INTERNAL_ERROR);
  });

  it('truncate of the event stream: a head with no content-length, then RST_STREAM', async () => {
    const [cut] = await onOneConnection([
      {
        ':path': '/api/events?count=3&interval_ms=100',
        'x-fault-connection': 'truncate',
        'x-request-id': 'h2-cut-stream',
      },
    ]);
    assert.equal(cut?.status, 200);
    assert.equal(cut?.headers['content-length'], undefined);
    assert.equal(cut?.rstCode, http2.NGHTTP2_INTERNAL_ERROR);
  });

  it('abort and delay as over HTTP/1.1', async () => {
    const started = performance.now();
    const [aborted] = await onOneConnection([
      { 'x-envoy-fault-delay-request': '200', 'x-envoy-fault-abort-request': '503', 'x-request-id': 'h2-abort' },
    ]);
    assert.ok(performance.now() - started >= 199);
    assert.equal(aborted?.status, 503);
    assert.equal(aborted?.headers['retry-after'], '1');
    assert.equal(JSON.parse(aborted?.body ?? '').error.code, 'SERVICE_UNAVAILABLE');
  });

  it('the headers each status requires, but those HTTP/2 forbids: 401, 405, 407, 426 (no Upgrade)', async () => {
    const [unauthorized, notAllowed, proxy, upgrade] = await onOneConnection(
      [401, 405, 407, 426].map((status) => ({ 'x-envoy-fault-abort-request': String(status) })),
    );
    assert.deepEqual([unauthorized?.status, unauthorized?.headers['www-authenticate']], [401, 'Bearer']);
    assert.deepEqual([notAllowed?.status, notAllowed?.headers.allow], [405, 'GET, HEAD']);
    assert.deepEqual([proxy?.status, proxy?.headers['proxy-authenticate']], [407, 'Bearer']);
    assert.deepEqual([upgrade?.status, upgrade?.headers.upgrade, upgrade?.rstCode], [426, undefined, 0]);
    assert.equal(JSON.parse(upgrade?.body ?? '').error.code, 'UPGRADE_REQUIRED');
  });

  it('a held request whose client cancels its stream ends then, logged once with status 0', async () => {
    const session = http2Connect(origin);
    try {
      const stream = session.request({
        ':path': '/api/hello',
        'x-envoy-fault-delay-request': '1000',
        'x-request-id': 'h2-cancelled',
      });
      stream.on('error', () => {});
      stream.end();
      await new Promise((resolve) => setTimeout(resolve, 150));
      stream.close(http2.NGHTTP2_CANCEL);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const line = log.lineOf('h2-cancelled');
      assert.deepEqual([line.status, line.fault], [0, 'delay']);
      assert.ok((line.duration_ms as number) < 1000);
    } finally {
      session.close();
    }
  });

  it('a paced answer whose client cancels its stream is logged once and counted with status 0, as over HTTP/1.1', async () => {
    const zeros = async () =>
      samples(await (await fetch(`${origin}/metrics`)).text(), 'http_requests_total').get(
        '{method="POST",route="/api/echo",status="0",fault="throughput"}',
      ) ?? 0;
    const before = await zeros();
    const session = http2Connect(origin);
    session.on('error', () => {});
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/api/echo',
        'content-type': 'application/json',
        'x-envoy-fault-throughput-response': '1',
        'x-request-id': 'h2-paced-left',
      });
      stream.on('error', () => {});
      stream.end(JSON.stringify({ text: 'x'.repeat(4000) }));
      // The head, and the body's first slice: the answer is under way when the client leaves.
      await new Promise((resolve) => stream.once('data', resolve));
      stream.close(http2.NGHTTP2_CANCEL);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const lines = log.lines.filter((line) => line.request_id === 'h2-paced-left');
      assert.deepEqual(
        lines.map((line) => [line.status, line.fault]),
        [[0, 'throughput']],
      );
      assert.equal(await zeros(), before + 1, 'counted with status 0');
    } finally {
      session.close();
    }
  });

  it('a HEAD broken each way is ended too: logged with status 0, naming the fault', async () => {
    const kinds = ['reset', 'empty', 'truncate', 'malformed'];
    const broken = await onOneConnection(
      kinds.map((kind) => ({ ':method': 'HEAD', 'x-fault-connection': kind, 'x-request-id': `h2-head-${kind}` })),
    );
    assert.equal(broken.length, kinds.length);
    // The server ends its side of a stream as the client ends its own, or just after.
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const kind of kinds) {
      const line = log.lineOf(`h2-head-${kind}`);
      assert.deepEqual([line.method, line.status, line.fault], ['HEAD', 0, kind]);
    }
  });

  it('logs each broken stream with status 0, naming the fault', () => {
    for (const kind of ['reset', 'empty', 'truncate', 'malformed']) {
      const line = log.lineOf(`h2-${kind}`);
      assert.deepEqual([line.status, line.fault], [0, kind]);
    }
    assert.deepEqual([log.lineOf('h2-abort').status, log.lineOf('h2-abort').fault], [503, 'delay,abort']);
  });
});
