import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, parseRawResponse, rawExchange } from './helpers.js';
import { assertNormalLatency, type Latency, measureLatency } from './latency.js';
import { headerFlood, slowClient } from './raw-http.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from './redis-server.js';
import {
  assertStopsCleanly,
  exitOf,
  killAllServers,
  type RunningServer,
  readLog,
  startServer,
} from './server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON } from './tls-files.js';
import { OtlpReceiver } from './tracing/otlp-receiver.js';

/**
 * Clients that try to wear the service down by being slow, idle or oversized, against the built
 * server in its own process. Each one is cut off on time (with the 408 or 431 envelope where HTTP
 * has room for one) while a well-behaved client keeps measuring its latency. The timeouts are
 * shortened so that the suite takes seconds; their production values are tested elsewhere.
 */

const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 4_000;
const KEEP_ALIVE_TIMEOUT_MS = 2_000;
/**
 * How late a cut-off may come: Node checks the timeouts every 500 ms here, and a machine running
 * other test files lags; a client never cut off would wait for the test's own timeout.
 */
const LATE_MS = 3_000;
/** Node's limit on the size of a request's headers. */
const MAX_HEADER_BYTES = 16 * 1024;
/** Attackers of each kind: within the open-file limit of a default shell (1024), both ends counted. */
const ATTACKERS = 20;
const IDLE_CONNECTIONS = 400;
/** Header flooders, each reconnecting at once: more would take the cores from everyone alike. */
const FLOODERS = 5;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The attacks all end the same way: the error envelope, and the connection closed by the server. */
function assertCutOff(response: string, status: number, code: string): void {
  const res = parseRawResponse(response);
  assertEnvelope(res, status, code);
  assert.equal(res.headers.connection, 'close');
}

function assertOnTime(elapsedMs: number[], limitMs: number): void {
  for (const ms of elapsedMs) {
    assert.ok(ms >= limitMs - 50 && ms < limitMs + LATE_MS, `cut off after ${ms} ms; the limit is ${limitMs} ms`);
  }
}

describe('hostile clients, against the server process', () => {
  let server: RunningServer;
  let logFile: string;
  let origin: string;
  let quiet: Latency;

  before(async () => {
    logFile = join(await mkdtemp(join(tmpdir(), 'hostile-')), 'server.log');
    server = await startServer(
      {
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
        RATE_LIMIT_MAX: '0', // the well-behaved client sends thousands of requests
      },
      [],
      { logFile },
    );
    origin = `http://127.0.0.1:${server.port}`;
    await measureLatency(origin, sleep(500)); // warm-up: compiles the route's code paths
    quiet = await measureLatency(origin, sleep(1_000));
  });
  after(() => killAllServers());

  /**
   * ATTACKERS clients each writing `head`, then `dribble` a byte a second: each must get a 408
   * and be closed once `limitMs` is up, while the well-behaved client is served as usual.
   */
  async function assertSlowClientsCutOff(head: string, dribble: string, limitMs: number): Promise<void> {
    const attacks = Promise.all(Array.from({ length: ATTACKERS }, () => slowClient(server.port, head, dribble, 1_000)));
    const [during, results] = await Promise.all([measureLatency(origin, attacks), attacks]);
    for (const { response } of results) assertCutOff(response, 408, 'REQUEST_TIMEOUT');
    assertOnTime(
      results.map((r) => r.elapsedMs),
      limitMs,
    );
    assertNormalLatency(during, quiet);
  }

  it('cuts off clients sending their headers a byte a second after HEADERS_TIMEOUT_MS, with a 408', async () => {
    const dribble = `Host: x\r\nX-Slow: ${'s'.repeat(60)}\r\n\r\n`;
    await assertSlowClientsCutOff('GET /api/hello HTTP/1.1\r\n', dribble, HEADERS_TIMEOUT_MS);
  });

  it('cuts off clients sending their bodies a byte a second after REQUEST_TIMEOUT_MS, with a 408', async () => {
    const body = `{"slow":"${'s'.repeat(60)}"}`;
    const head = `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    await assertSlowClientsCutOff(head, body, REQUEST_TIMEOUT_MS);
  });

  it('cuts off clients whose body claims more bytes than they send after REQUEST_TIMEOUT_MS, with a 408', async () => {
    const head =
      'PUT /api/profile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name":"';
    await assertSlowClientsCutOff(head, '', REQUEST_TIMEOUT_MS);
    // Nothing of the half-sent bodies was written.
    const profile = await fetch(`${origin}/api/profile`);
    assert.deepEqual(await profile.json(), { name: null, email: null, bio: null });
  });

  it(`closes ${IDLE_CONNECTIONS} connections that send nothing after HEADERS_TIMEOUT_MS, and ${IDLE_CONNECTIONS} idle kept-alive ones after KEEP_ALIVE_TIMEOUT_MS`, async () => {
    const silent = Array.from({ length: IDLE_CONNECTIONS }, () => slowClient(server.port, '', '', 1_000));
    const keptAlive = Array.from({ length: IDLE_CONNECTIONS }, () =>
      slowClient(server.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', '', 1_000),
    );
    const all = Promise.all([...silent, ...keptAlive]);
    const [during] = await Promise.all([measureLatency(origin, all), all]);

    const silentResults = await Promise.all(silent);
    for (const { response } of silentResults) assertCutOff(response, 408, 'REQUEST_TIMEOUT');
    assertOnTime(
      silentResults.map((r) => r.elapsedMs),
      HEADERS_TIMEOUT_MS,
    );
    // A kept-alive connection gets its one answer, then nothing more: closed without a word.
    const keptAliveResults = await Promise.all(keptAlive);
    for (const { response } of keptAliveResults) {
      const res = parseRawResponse(response);
      assert.equal(res.status, 200);
      assert.equal(res.text, '{"status":"ok"}');
      assert.equal(res.headers.connection, 'keep-alive');
    }
    assertOnTime(
      keptAliveResults.map((r) => r.elapsedMs),
      KEEP_ALIVE_TIMEOUT_MS,
    );
    assertNormalLatency(during, quiet);
  });

  it(`closes clients flooding header lines once past ${MAX_HEADER_BYTES} bytes, with a 431 if they read it`, async () => {
    // Each attacker floods again as soon as it is closed, for two seconds.
    const attacks = Array.from({ length: FLOODERS }, async () => {
      const results = [];
      for (const until = performance.now() + 2_000; performance.now() < until; ) {
        results.push(await headerFlood(server.port, MAX_HEADER_BYTES));
      }
      return results;
    });
    const [during, results] = await Promise.all([measureLatency(origin, Promise.all(attacks)), Promise.all(attacks)]);
    console.log(`  header floods: ${results.flat().length} connections`);
    for (const { response, elapsedMs } of results.flat()) {
      // The server closes with the flood unread, so the client's TCP stack may take the reset
      // before the 431 that preceded it; what it does read is the envelope.
      if (response !== '') assertCutOff(response, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE');
      // Cut off for the size, long before the headers timeout.
      assert.ok(elapsedMs < HEADERS_TIMEOUT_MS / 2, `closed after ${elapsedMs} ms`);
    }
    assertNormalLatency(during, quiet);
  });

  it('answers CONNECT with 405 and survives clients that then reset the connection', async () => {
    const attacks = Array.from(
      { length: ATTACKERS },
      () =>
        new Promise<string>((resolve, reject) => {
          let response = '';
          // Half-open: the client keeps its side open once the server has closed its own, then resets
          // it, while the server's side is still reading.
          const socket = connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true }, () =>
            socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
          );
          socket.setEncoding('utf8');
          socket.on('data', (chunk) => {
            response += chunk;
          });
          socket.on('end', () => {
            socket.resetAndDestroy();
            resolve(response);
          });
          socket.on('error', reject);
        }),
    );
    for (const response of await Promise.all(attacks)) assertCutOff(response, 405, 'METHOD_NOT_ALLOWED');
    const res = await fetch(`${origin}/healthz`);
    assert.equal(res.status, 200);
  });

  it('logged each cut-off as a client error, and nothing at error level', async () => {
    server.child.kill('SIGTERM');
    assert.deepEqual(exitOf(await server.exited), { code: 0, signal: null });
    const lines = await readLog(logFile);
    assert.deepEqual(
      lines.filter((line) => Number(line.level) >= 50),
      [],
    );
    const clientErrors = lines.filter((line) => line.msg === 'client error');
    assert.ok(clientErrors.length >= 4 * ATTACKERS + IDLE_CONNECTIONS, `${clientErrors.length} client errors logged`);
  });
});

describe('a body far over the limit, against the server process', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ BODY_LIMIT: '1024', RATE_LIMIT_MAX: '0' });
  });
  after(() => killAllServers());

  /** Sends the whole body on a connection of its own, as a client that does not wait for an early answer does. */
  function sendWhole(body: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: server.port,
          method: 'POST',
          path: '/api/echo',
          agent: false, // Connection: close
          headers: { 'Content-Type': 'application/json', 'Content-Length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  it('answers 413, and the connection is not reset under the answer while the rest of the body arrives', async () => {
    const body = Buffer.alloc(16 * 1024 * 1024, 'x');
    for (let i = 0; i < 20; i += 1) assert.equal(await sendWhole(body), 413);
  });
});

/** An optional feature of the service: the settings that turn it on, and what it needs started. */
interface Feature {
  name: string;
  skip?: string | false;
  /** Requests and raw requests over TLS. */
  tls?: boolean;
  /** Requests of its own among the attacks: each must get an answer with one of `statuses`, or a broken connection if `broken`. */
  requests?: { bytes: string; statuses: number[]; broken?: boolean }[];
  /** `check`, if any, runs once the process has exited. */
  setUp(): Promise<{ env: Record<string, string>; check?(): void; tearDown(): Promise<void> }>;
}

const nothingToTearDown = async () => {};

/** Paths that are not valid percent-encoded UTF-8: refused before routing, before any hook. */
const BADLY_ENCODED_PATHS = ['/api/hello/%ED%A0%80', '/api/hello/%C0%AF', '/%FF', '/api/currencies/%E2%82'];

const FEATURES: Feature[] = [
  {
    name: 'FAULT_ERROR_RATE and FAULT_DELAY_RATE',
    setUp: async () => ({
      env: { FAULT_ERROR_RATE: '0.5', FAULT_DELAY_RATE: '0.5', FAULT_DELAY_MS: '1-5' },
      tearDown: nothingToTearDown,
    }),
  },
  {
    name: 'FAULT_HEADERS',
    requests: [
      ...['reset', 'empty', 'truncate', 'malformed'].map((kind) => ({
        bytes: `GET /api/hello HTTP/1.1\r\nHost: x\r\nx-fault-connection: ${kind}\r\nConnection: close\r\n\r\n`,
        statuses: [200],
        broken: true,
      })),
      {
        bytes:
          'GET /api/hello/%ED%A0%80 HTTP/1.1\r\nHost: x\r\nx-envoy-fault-abort-request: 599\r\nx-fault-connection: reset\r\nConnection: close\r\n\r\n',
        statuses: [400],
      },
      {
        bytes:
          'GET /api/hello HTTP/1.1\r\nHost: x\r\nx-envoy-fault-delay-request: 20\r\nx-envoy-fault-abort-request: 599\r\nConnection: close\r\n\r\n',
        statuses: [599],
      },
    ],
    setUp: async () => ({ env: { FAULT_HEADERS: 'true' }, tearDown: nothingToTearDown }),
  },
  {
    name: 'spans exported to an OTLP receiver',
    async setUp() {
      const receiver = await OtlpReceiver.start();
      return {
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        // Flushed at the exit: the export went on through the attacks.
        check: () => assert.ok(receiver.spans.length > 0, 'no span reached the receiver'),
        tearDown: () => receiver.close(),
      };
    },
  },
  {
    name: 'Redis',
    skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON,
    async setUp() {
      const redis = await RedisServer.start();
      return { env: { REDIS_URL: redis.url }, tearDown: () => redis.kill() };
    },
  },
  {
    name: 'HTTP2 (h2c beside HTTP/1.1)',
    requests: [
      // The HTTP/2 preface, then garbage where its frames belong.
      { bytes: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n${'\u0000'.repeat(9)}garbage`, statuses: [], broken: true },
    ],
    setUp: async () => ({ env: { HTTP2: 'true' }, tearDown: nothingToTearDown }),
  },
  {
    name: 'TLS, with HTTP2',
    skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
    tls: true,
    async setUp() {
      const files = makeTlsFiles();
      return {
        env: { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.serverKey, HTTP2: 'true' },
        tearDown: async () => files.remove(),
      };
    },
  },
  {
    name: 'ADMIN_TOKEN_FILE',
    requests: ['', 'Authorization: Bearer wrong\r\n', `Authorization: Bearer ${'A'.repeat(8_000)}\r\n`].map(
      (authorization) => ({
        bytes: `POST /readyz/disable HTTP/1.1\r\nHost: x\r\n${authorization}Connection: close\r\n\r\n`,
        statuses: [401],
      }),
    ),
    async setUp() {
      const dir = await mkdtemp(join(tmpdir(), 'hostile-admin-'));
      const tokenFile = join(dir, 'token');
      await writeFile(tokenFile, `${randomBytes(24).toString('base64url')}\n`);
      return { env: { ADMIN_TOKEN_FILE: tokenFile }, tearDown: () => rm(dir, { recursive: true, force: true }) };
    },
  },
];

/** A request's answer, or null for a connection the server broke (reset) before answering. */
function answerOrBroken(port: number, bytes: string, tls: boolean): Promise<string | null> {
  return rawExchange(port, bytes, tls).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ECONNRESET') return null;
    throw error;
  });
}

describe('hostile clients under each optional feature, against the server process', () => {
  // Shorter still than above: each feature's attacks take a few seconds.
  const FEATURE_HEADERS_TIMEOUT_MS = 1_000;
  const FEATURE_REQUEST_TIMEOUT_MS = 1_500;
  const SLOW_CLIENTS = 5;
  after(() => killAllServers());

  for (const feature of FEATURES) {
    it(`${feature.name}: every attack cut off or answered, nothing logged at error level, SIGTERM exits 0`, {
      skip: feature.skip ?? false,
    }, async () => {
      const tls = feature.tls ?? false;
      const { env, check, tearDown } = await feature.setUp();
      try {
        const server = await startServer({
          ...env,
          HEADERS_TIMEOUT_MS: String(FEATURE_HEADERS_TIMEOUT_MS),
          REQUEST_TIMEOUT_MS: String(FEATURE_REQUEST_TIMEOUT_MS),
          KEEP_ALIVE_TIMEOUT_MS: '1000',
          RATE_LIMIT_MAX: '0',
        });
        const { port } = server;
        const slowHeaders = Array.from({ length: SLOW_CLIENTS }, () =>
          slowClient(port, 'GET /api/hello HTTP/1.1\r\n', `Host: x\r\nX-Slow: ${'s'.repeat(40)}\r\n\r\n`, 200, tls),
        );
        const body = '{"slow":"ssssssssssssssssssss"}';
        const slowBodies = Array.from({ length: SLOW_CLIENTS }, () =>
          slowClient(
            port,
            `PUT /api/profile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
            body,
            200,
            tls,
          ),
        );
        const silent = Array.from({ length: 20 }, () => slowClient(port, '', '', 1_000, tls));
        const close = 'Connection: close\r\n\r\n';
        const refused: [string, number, string, unknown[]?][] = [
          ...BADLY_ENCODED_PATHS.map((path): [string, number, string, unknown[]] => [
            `GET ${path} HTTP/1.1\r\nHost: x\r\n${close}`,
            400,
            'VALIDATION_ERROR',
            [{ field: 'path', message: 'must be valid percent-encoded UTF-8', value: path }],
          ]),
          [
            `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n${close}`,
            400,
            'BAD_REQUEST',
          ],
          ['GARBAGE\r\n\r\n', 400, 'BAD_REQUEST'],
          [
            `GET /api/hello HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n${close}`,
            431,
            'REQUEST_HEADER_FIELDS_TOO_LARGE',
          ],
          ['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'METHOD_NOT_ALLOWED'],
        ];
        const [headerResults, bodyResults, silentResults, refusedAnswers, ownAnswers] = await Promise.all([
          Promise.all(slowHeaders),
          Promise.all(slowBodies),
          Promise.all(silent),
          Promise.all(refused.map(([bytes]) => answerOrBroken(port, bytes, tls))),
          Promise.all((feature.requests ?? []).map(({ bytes }) => answerOrBroken(port, bytes, tls))),
        ]);
        for (const { response } of [...headerResults, ...silentResults]) assertCutOff(response, 408, 'REQUEST_TIMEOUT');
        for (const { response } of bodyResults) {
          // Fault injection may answer a request before its body is read: the connection then closes, no 408 after.
          const injected = /^x-fault-injected:.*\babort\b/im.test(response.split('\r\n\r\n', 1)[0] ?? '');
          if (!injected) assertCutOff(response, 408, 'REQUEST_TIMEOUT');
          else assert.doesNotMatch(response, /HTTP\/1\.1 408 /);
        }
        refused.forEach(([bytes, status, code, details = []], i) => {
          const answer = refusedAnswers[i];
          // A 431's answer may be lost to the reset of the unread flood.
          if (answer === null && status === 431) return;
          assert.ok(answer !== null && answer !== undefined, `no answer to ${bytes.slice(0, 60)}`);
          assertEnvelope(parseRawResponse(answer), status, code, details);
        });
        (feature.requests ?? []).forEach(({ bytes, statuses, broken }, i) => {
          const answer = ownAnswers[i] ?? null;
          const status = answer === null ? null : parseRawResponse(answer).status;
          const ok =
            (status !== null && statuses.includes(status)) || (broken === true && !answer?.startsWith('HTTP/1.1 2'));
          assert.ok(ok, `${JSON.stringify(bytes.slice(0, 80))} → ${JSON.stringify(answer?.slice(0, 200))}`);
        });
        const health = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${close}`, tls);
        assert.equal(parseRawResponse(health).status, 200);
        await assertStopsCleanly(server);
        assert.deepEqual(
          server.lines.filter((line) => Number(line.level) >= 50),
          [],
        );
        check?.();
      } finally {
        await tearDown();
      }
    });
  }
});
