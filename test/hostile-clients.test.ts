import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, parseRawResponse } from './helpers.js';
import { assertNormalLatency, type Latency, measureLatency } from './latency.js';
import { slowClient } from './raw-http.js';
import { exitOf, killAllServers, type RunningServer, readLog, startServer } from './server-process.js';

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

/**
 * Sends header lines as fast as the connection takes them, never ending the header block, until
 * the server closes the connection (or twice the limit is out, then waits). Resolves with
 * what the server sent and when it closed.
 */
function headerFlood(port: number): Promise<{ response: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let response = '';
    let sentBytes = 0;
    const line = `X-Flood: ${'f'.repeat(1000)}\r\n`;
    const socket = connect(port, '127.0.0.1', () => {
      const flood = () => {
        while (socket.writable && sentBytes < 2 * MAX_HEADER_BYTES) {
          sentBytes += line.length;
          if (!socket.write(sentBytes === line.length ? `GET /api/hello HTTP/1.1\r\n${line}` : line)) {
            socket.once('drain', flood);
            return;
          }
        }
      };
      flood();
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      response += chunk;
    });
    socket.on('close', () => resolve({ response, elapsedMs: performance.now() - started }));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
  });
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
        results.push(await headerFlood(server.port));
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
