import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { DEFAULT_CONFIG, SETTINGS } from '../src/config/index.js';
import { VERSION } from '../src/version.js';
import { assertEnvelope, samples, sendTo } from './helpers.js';
import { pseudoTerminal } from './pseudo-terminal.js';
import { connectTo, type HeldRequest, holdEchoRequest, type RawResponse, ResponseReader } from './raw-http.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from './redis-server.js';
import { run } from './run-command.js';
import {
  type Exit,
  exitOf,
  killAllServers,
  type LogLine,
  ROOT,
  type RunningServer,
  type SpawnOptions,
  spawnServer,
  startServer,
  withTimeout,
} from './server-process.js';

/**
 * The process entry as a real child process: configuration errors, flags, graceful shutdown on
 * SIGTERM/SIGINT, the shutdown deadline, and the time zone.
 */

/** `YYYY-MM-DDTHH:mm:ss.SSS`: local date-time, always milliseconds, no offset. */
const LOCAL_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;

const UNPRIVILEGED_PORT_START = '/proc/sys/net/ipv4/ip_unprivileged_port_start';

const OUTAGE_WARNING = 'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back';

const isShuttingDown = (signal: string) => (line: LogLine) => line.msg === 'shutting down' && line.signal === signal;

/** The resident memory of process `pid`, in bytes. */
function residentBytes(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

/** A file to log into whose reader never reads, and how to let it go. */
interface UnreadLog {
  path: string;
  close(): Promise<void>;
}

/** A FIFO held open for reading, never read: a log shipper that stalls. */
async function unreadFifo(): Promise<UnreadLog> {
  const dir = await mkdtemp(join(tmpdir(), 'stalled-log-'));
  const path = join(dir, 'stdout');
  assert.equal((await run('mkfifo', [path])).code, 0);
  const readerFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  return {
    path,
    close: async () => {
      closeSync(readerFd);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A pseudo-terminal nobody reads: a suspended terminal. */
async function unreadTerminal(): Promise<UnreadLog> {
  const terminal = await pseudoTerminal();
  return { path: terminal.path, close: () => terminal.close() };
}

/** A file whose every write fails: a disk that is full. */
async function fullDisk(): Promise<UnreadLog> {
  return { path: '/dev/full', close: async () => {} };
}

// biome-ignore lint/suspicious/noExplicitAny: a JSON body, whose shape each assertion checks
async function get(port: number, path: string): Promise<{ status: number; body: any }> {
  // reset: no keep-alive socket is left behind in undici's pool.
  const res = await request(`http://127.0.0.1:${port}${path}`, { reset: true });
  return { status: res.statusCode, body: await res.body.json() };
}

/** Retries a new connection until one is refused: the listener is closed. */
async function assertListenerClosed(port: number, withinMs = 2_000): Promise<void> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    try {
      const socket = await connectTo(port);
      socket.destroy();
    } catch (error) {
      assert.equal((error as NodeJS.ErrnoException).code, 'ECONNREFUSED');
      return;
    }
    if (performance.now() > deadline)
      assert.fail(`port ${port} still accepts connections ${withinMs} ms into shutdown`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function assertEcho(res: RawResponse): void {
  assert.equal(res.status, 200, res.text);
  const body = res.json();
  assert.deepEqual(body.received, { slow: true });
  assert.equal(body.echo, true);
  assert.match(body.timestamp, LOCAL_TIMESTAMP);
}

/** The 503 of /readyz while shutting down: the error envelope with its request id. */
function assertUnavailable(res: RawResponse): void {
  assert.equal(res.status, 503, res.text);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.code, 'SERVICE_UNAVAILABLE');
  assert.equal(typeof body.error.message, 'string');
  assert.equal(body.error.request_id, res.headers['x-request-id']);
}

// A few processes at a time: each start costs most of a second of CPU, and on two cores a dozen
// starting at once, beside the other test files, would take longer than the start-up bounds.
describe('server process (dist/server.js)', { concurrency: 4 }, () => {
  after(() => {
    killAllServers();
  });

  it('SIGTERM: closes the listener, finishes the request in flight, exits 0', { timeout: 60_000 }, async () => {
    const timeoutMs = 5_000;
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs) });
    let held: HeldRequest | undefined;
    try {
      held = await holdEchoRequest(server.port);
      const signalledAt = performance.now();
      server.child.kill('SIGTERM');
      await server.waitForLog(isShuttingDown('SIGTERM'));

      await assertListenerClosed(server.port);

      held.socket.write(held.rest);
      const res = await held.reader.next();
      assertEcho(res);

      // The client leaves its connection open, as an HTTP/1.1 keep-alive client does: closing
      // it once the request in flight has been answered is up to the server.
      const exit = await withTimeout(server.exited, timeoutMs + 5_000, 'exit after SIGTERM');
      const tookMs = Math.round(exit.at - signalledAt);
      const { closedAt } = held.reader;
      const state =
        `exited ${JSON.stringify(exitOf(exit))} ${tookMs} ms after SIGTERM. The echo response had ` +
        `Connection: ${res.headers.connection ?? '(none)'}; the server closed the connection ` +
        `${closedAt === undefined ? 'never' : `${Math.round(closedAt - signalledAt)} ms after SIGTERM`}.` +
        `\nstdout:\n${server.stdout()}`;
      assert.deepEqual(exitOf(exit), { code: 0, signal: null }, state);
      assert.ok(tookMs < timeoutMs, state);
    } finally {
      held?.socket.destroy();
      server.kill();
    }
  });

  it('SIGTERM: /readyz is 503 when pipelined behind the request in flight, the store excluded or not', {
    timeout: 60_000,
  }, async () => {
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: '5000' });
    let held: HeldRequest | undefined;
    try {
      held = await holdEchoRequest(server.port);
      server.child.kill('SIGTERM');
      await server.waitForLog(isShuttingDown('SIGTERM'));

      // The rest of the echo body and a whole second request, in one write: excluding the store
      // leaves shutting down counted.
      held.socket.write(
        `${held.rest}GET /readyz?exclude=store&verbose HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`,
      );
      assertEcho(await held.reader.next());
      const readyz = await held.reader.next();
      assertUnavailable(readyz);
      assert.deepEqual(readyz.json().error.details, [
        { field: 'shutdown', message: 'The service is shutting down.', value: 'failed' },
        { field: 'operator', message: 'ok', value: 'ok' },
        { field: 'store', message: 'excluded', value: 'excluded' },
      ]);

      const exit = await withTimeout(server.exited, 10_000, 'exit after SIGTERM');
      assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stdout());
    } finally {
      held?.socket.destroy();
      server.kill();
    }
  });

  // What a load balancer holds open to every instance at a rolling restart: connections it opened
  // ahead of need, and kept-alive ones between requests; and a client that began the HTTP/2 preface.
  for (const [name, open, env] of [
    ['a connection that has not sent a byte', async (port: number) => new ResponseReader(await connectTo(port)), {}],
    [
      'a kept-alive connection idle after its response',
      async (port: number) => {
        const reader = new ResponseReader(await connectTo(port));
        reader.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
        assert.equal((await reader.next()).status, 200);
        return reader;
      },
      {},
    ],
    [
      'a connection that has sent part of the HTTP/2 preface (HTTP2 in cleartext)',
      async (port: number) => {
        const reader = new ResponseReader(await connectTo(port));
        reader.socket.write('PRI * HTTP/2');
        return reader;
      },
      { HTTP2: 'true' },
    ],
  ] as const) {
    it(`SIGTERM: ${name} is closed at once, and the process exits 0`, { timeout: 60_000 }, async () => {
      const timeoutMs = 5_000;
      const server = await startServer({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs), ...env });
      let reader: ResponseReader | undefined;
      try {
        reader = await open(server.port);
        const signalledAt = performance.now();
        server.child.kill('SIGTERM');
        const exit = await withTimeout(server.exited, timeoutMs + 5_000, 'exit after SIGTERM');
        const tookMs = Math.round(exit.at - signalledAt);
        const { closedAt } = reader;
        const state =
          `exited ${JSON.stringify(exitOf(exit))} ${tookMs} ms after SIGTERM; the server closed the connection ` +
          `${closedAt === undefined ? 'never' : `${Math.round(closedAt - signalledAt)} ms after SIGTERM`}` +
          `\nstdout:\n${server.stdout()}`;
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, state);
        // Well within SHUTDOWN_TIMEOUT_MS, which a held connection would wait out, with room for a
        // busy test process to see the exit and the close late.
        assert.ok(tookMs < 3_000, state);
        assert.ok(closedAt !== undefined && closedAt - signalledAt < 3_000, state);
      } finally {
        reader?.socket.destroy();
        server.kill();
      }
    });
  }

  const post = (path: string, type: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: 1000\r\n\r\n{"a":`;
  for (const env of [{}, { HTTP2: 'true' }] as Record<string, string>[]) {
    it(`SIGTERM: connections whose clients keep their side open after an error answer, or after an answer given before their body came, are closed at once, exit 0${'HTTP2' in env ? ' (HTTP2 in cleartext)' : ''}`, {
      timeout: 60_000,
    }, async () => {
      const timeoutMs = 10_000;
      const server = await startServer({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs), ...env });
      const requests = [
        [
          'Content-Length twice',
          'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
          400,
        ],
        ['a header name that is no token', 'GET /api/hello HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 400],
        ['headers over 16 KiB', `GET /api/hello HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(17_000)}\r\n\r\n`, 431],
        ['bytes that are no HTTP', 'GARBAGE\r\n\r\n', 400],
        ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405],
        // Answered before the rest of the body, which never comes: the connection reads nothing more for it.
        ['a text/plain body, half sent', post('/api/echo', 'text/plain'), 415],
        ['a body to a path with no route, half sent', post('/api/nope', 'application/json'), 404],
        ['a body to a route that takes none, half sent', post('/api/hello', 'application/json'), 405],
        [
          'a GET with a body, half sent',
          'GET /api/hello HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
          200,
        ],
        [
          'a chunked text/plain body, its last chunk never sent',
          'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n',
          415,
        ],
      ] as const;
      const readers: ResponseReader[] = [];
      try {
        for (const [what, bytes, status] of requests) {
          const reader = new ResponseReader(connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true }));
          readers.push(reader);
          reader.socket.write(bytes);
          assert.equal((await reader.next()).status, status, what);
        }
        const signalledAt = performance.now();
        server.child.kill('SIGTERM');
        const exit = await withTimeout(server.exited, timeoutMs + 5_000, 'exit after SIGTERM');
        const tookMs = Math.round(exit.at - signalledAt);
        const state = `exited ${JSON.stringify(exitOf(exit))} ${tookMs} ms after SIGTERM\nstdout:\n${server.stdout()}`;
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, state);
        assert.ok(tookMs < 3_000, state);
        console.log(
          `  ${requests.length} connections held open after their answers: exit 0 ${tookMs} ms after SIGTERM`,
        );
      } finally {
        for (const reader of readers) reader.socket.destroy();
        server.kill();
      }
    });
  }

  it('SIGTERM: gives up on a request still in flight after SHUTDOWN_TIMEOUT_MS, exits 1', {
    timeout: 60_000,
  }, async () => {
    const timeoutMs = 300;
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs) });
    let held: HeldRequest | undefined;
    try {
      held = await holdEchoRequest(server.port); // the rest of the body never comes
      const signalledAt = performance.now();
      server.child.kill('SIGTERM');
      const exit = await withTimeout(server.exited, timeoutMs + 5_000, 'exit after SIGTERM');
      const tookMs = Math.round(exit.at - signalledAt);
      assert.deepEqual(exitOf(exit), { code: 1, signal: null }, server.stdout());
      assert.ok(tookMs >= timeoutMs - 20, `waited for the timeout: exited ${tookMs} ms after SIGTERM`);
      assert.ok(tookMs < timeoutMs + 3_000, `exited soon after the timeout: ${tookMs} ms after SIGTERM`);
      assert.ok(
        server.lines.some((line) => typeof line.msg === 'string' && /in-flight requests did not finish/.test(line.msg)),
        `a log line says why\nstdout:\n${server.stdout()}`,
      );
    } finally {
      held?.socket.destroy();
      server.kill();
    }
  });

  for (const [name, unreadLog] of [
    ['a FIFO nobody reads', unreadFifo],
    ['a terminal nobody reads', unreadTerminal],
    ['a full disk (/dev/full: ENOSPC)', fullDisk],
  ] as const) {
    it(`logging into ${name}, under load: memory stays bounded, the drops are counted, SIGTERM exits in time`, {
      timeout: 90_000,
    }, async () => {
      const log = await unreadLog();
      const timeoutMs = 2_000;
      const server = await startServer({ SHUTDOWN_TIMEOUT_MS: String(timeoutMs), RATE_LIMIT_MAX: '0' }, [], {
        logFile: log.path,
      });
      try {
        const pid = server.child.pid ?? 0;
        const rssBefore = residentBytes(pid);
        // Lines of 8 KB (the URL is in each): 2,000 of them are four times what may wait to be written.
        const origin = `http://127.0.0.1:${server.port}`;
        const path = `/api/hello/${'x'.repeat(8_000)}`;
        let left = 2_000;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            for (; left > 0; left--) assert.equal((await sendTo(origin, { path })).status, 200);
          }),
        );
        const growth = residentBytes(pid) - rssBefore;
        assert.ok(growth < 64 * 1024 * 1024, `resident memory grew by ${Math.round(growth / 1024 / 1024)} MB`);
        const metrics = await sendTo(origin, { path: '/metrics' });
        const dropped = samples(metrics.text, 'log_lines_dropped_total').get('') ?? 0;
        assert.ok(dropped > 1_000, `${dropped} lines dropped`);

        const signalledAt = performance.now();
        server.child.kill('SIGTERM');
        const exit = await withTimeout(server.exited, timeoutMs + 5_000, 'exit after SIGTERM');
        const tookMs = Math.round(exit.at - signalledAt);
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stderr());
        assert.ok(tookMs < timeoutMs + 500, `exited ${tookMs} ms after SIGTERM, with a timeout of ${timeoutMs} ms`);
      } finally {
        server.kill();
        await log.close();
      }
    });
  }

  it('SIGINT shuts down like SIGTERM: exits 0', { timeout: 60_000 }, async () => {
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: '5000' });
    try {
      // Sent as soon as the listening line is out: the handlers are installed before start-up.
      server.child.kill('SIGINT');
      const exit = await withTimeout(server.exited, 10_000, 'exit after SIGINT');
      assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stdout());
      assert.ok(server.lines.some(isShuttingDown('SIGINT')), server.stdout());
      assert.ok(
        server.lines.some((line) => line.msg === 'stopped'),
        server.stdout(),
      );
    } finally {
      server.kill();
    }
  });

  describe('SIGTERM during start-up exits 0, without a word on stderr', { concurrency: 2 }, () => {
    // Module hooks, run by the child before dist/server.js, that hold the loading of the first
    // module after it for a while and say so on stderr: a slow disk or a busy machine, on demand.
    // Before JavaScript runs at all, a SIGTERM kills any Node process by the signal; from the
    // first line of dist/server.js on, it must not.
    const HOLD_MS = 1000;
    const hooks = `
      import { writeSync } from 'node:fs';
      let held = false;
      export async function load(url, context, nextLoad) {
        if (!held && url.startsWith('file:') && !url.endsWith('/dist/server.js')) {
          held = true;
          writeSync(2, 'holding\\n');
          await new Promise((resolve) => setTimeout(resolve, ${HOLD_MS}));
        }
        return nextLoad(url, context);
      }`;
    const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
    const nodeArgs = ['--import', `data:text/javascript,${encodeURIComponent(register)}`];

    /** SIGTERM `afterMs` after the loading held by the hooks has begun. */
    async function sigtermDuringStart(afterMs: number): Promise<void> {
      const server = await spawnServer({}, [], { nodeArgs });
      try {
        await withTimeout(
          new Promise<void>((resolve) => {
            const check = () => server.stderr() === 'holding\n' && resolve();
            server.child.stderr?.on('data', check);
            check();
          }),
          10_000,
          'the loading held',
        );
        await sleep(afterMs);
        server.child.kill('SIGTERM');
        const state = () =>
          `SIGTERM ${afterMs} ms into the hold\nstdout:\n${server.stdout()}\nstderr:\n${server.stderr()}`;
        // Generous: with module hooks, Node 24 takes the signal only once the loading they go through
        // is done, and on a busy machine that loading is slow. What is checked is exit 0, not death by
        // the signal, and no hang.
        const exit = await withTimeout(server.exited, 40_000, 'exit after SIGTERM').catch((error: Error) => {
          throw new Error(`${error.message}\n${state()}`);
        });
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, state());
        assert.equal(server.stderr(), 'holding\n', state());
      } finally {
        server.kill();
      }
    }

    it('while the service is still being loaded', { timeout: 60_000 }, () => sigtermDuringStart(0));

    // Once loaded: its modules evaluated, the configuration read, the app built, listening.
    for (const afterMs of [0, 100, 250, 500, 1000]) {
      it(`${afterMs} ms after the service has loaded`, { timeout: 60_000 }, () =>
        sigtermDuringStart(HOLD_MS + afterMs),
      );
    }
  });

  it('an uncaught exception: the buffered lines and one saying why are written, then exit 1 with its stack', {
    timeout: 60_000,
  }, async () => {
    // Run by the child before the service: an exception no code of the service catches, on demand.
    const crash = `process.on('SIGUSR2', () => { throw new Error('crash on demand'); });`;
    const server = await startServer({}, [], {
      nodeArgs: ['--import', `data:text/javascript,${encodeURIComponent(crash)}`],
    });
    try {
      const ids = Array.from({ length: 20 }, (_, i) => `before-crash-${i}`);
      const origin = `http://127.0.0.1:${server.port}`;
      await Promise.all(ids.map((id) => sendTo(origin, { path: '/api/hello', headers: { 'x-request-id': id } })));
      server.child.kill('SIGUSR2');
      const exit = await withTimeout(server.exited, 10_000, 'exit after the exception');
      assert.deepEqual(exitOf(exit), { code: 1, signal: null }, server.stdout());
      for (const id of ids)
        assert.ok(
          server.lines.some((line) => line.request_id === id),
          id,
        );
      const fatal = server.lines.find((line) => line.msg === 'uncaught exception');
      assert.ok(fatal, server.stdout());
      assert.equal(fatal.level, 60);
      assert.match(String((fatal.err as { message?: unknown }).message), /crash on demand/);
      assert.match(server.stderr(), /Error: crash on demand/);
    } finally {
      server.kill();
    }
  });

  it('a second signal exits 1 at once, without waiting for the request in flight', { timeout: 60_000 }, async () => {
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: '10000' });
    let held: HeldRequest | undefined;
    try {
      held = await holdEchoRequest(server.port);
      server.child.kill('SIGTERM');
      await server.waitForLog(isShuttingDown('SIGTERM'));
      const signalledAt = performance.now();
      server.child.kill('SIGINT');
      const exit = await withTimeout(server.exited, 5_000, 'exit after the second signal');
      assert.deepEqual(exitOf(exit), { code: 1, signal: null }, server.stdout());
      assert.ok(exit.at - signalledAt < 2_000, server.stdout());
    } finally {
      held?.socket.destroy();
      server.kill();
    }
  });

  it('two signals in quick succession: exit 0 or 1, one line, never a crash', { timeout: 120_000 }, async (t) => {
    // The second signal lands at every stage of a quick shutdown: draining, the last log lines
    // being written, or after the exit (then it finds no process, and the exit is 0).
    const outcomes: string[] = [];
    for (let run = 0; run < 12; run++) {
      const server = await startServer();
      try {
        server.child.kill('SIGTERM');
        await sleep(run % 6);
        server.child.kill(run % 2 === 0 ? 'SIGTERM' : 'SIGINT');
        const exit = await withTimeout(server.exited, 5_000, 'exit after two signals');
        const said = `exit ${JSON.stringify(exitOf(exit))}\nstdout:\n${server.stdout()}\nstderr:\n${server.stderr()}`;
        const logged = server.lines.filter((line) => line.msg === 'second signal: exiting without waiting');
        const stderr = server.stderr();
        assert.equal(exit.signal, null, said);
        if (exit.code === 0) {
          assert.equal(logged.length, 0, said);
          assert.equal(stderr, '', said);
        } else {
          assert.equal(exit.code, 1, said);
          const onStderr = stderr === '' ? 0 : 1;
          assert.match(
            stderr,
            /^(greeting-service: second signal \(SIG(TERM|INT)\): exiting without waiting\n)?$/,
            said,
          );
          assert.equal(logged.length + onStderr, 1, said);
        }
        outcomes.push(`${exit.code}${logged.length > 0 ? ' logged' : stderr === '' ? '' : ' stderr'}`);
      } finally {
        server.kill();
      }
    }
    t.diagnostic(`exits: ${outcomes.join(', ')}`);
  });

  it('REDIS_URL with no Redis there: starts, /readyz 503 saying why (200 with exclude=store), SIGTERM exits 0 at once', {
    timeout: 60_000,
  }, async () => {
    // Nothing listens on port 1: every attempt to connect is refused.
    const server = await startServer({ REDIS_URL: 'redis://:hunter2@127.0.0.1:1', SHUTDOWN_TIMEOUT_MS: '5000' });
    try {
      const warning = await server.waitForLog((line) => line.level === 40);
      assert.equal(warning.msg, OUTAGE_WARNING);
      const ready = await get(server.port, '/readyz');
      assert.equal(ready.status, 503);
      assert.equal(ready.body.error.message, 'Not ready: Redis is unreachable: connect ECONNREFUSED 127.0.0.1:1');
      // The probe that must not take every instance out with the Redis they share.
      const probe = await get(server.port, '/readyz?exclude=store');
      assert.deepEqual([probe.status, probe.body], [200, { status: 'ready' }]);
      const verbose = await get(server.port, '/readyz?verbose');
      assert.deepEqual(
        verbose.body.error.details.map(({ field, value }: { field: string; value: string }) => [field, value]),
        [
          ['shutdown', 'ok'],
          ['operator', 'ok'],
          ['store', 'failed'],
        ],
      );
      assert.equal((await get(server.port, '/readyz?exclude=redis')).status, 400);
      assert.equal((await get(server.port, '/healthz')).status, 200);
      const signalledAt = performance.now();
      server.child.kill('SIGTERM');
      const exit = await withTimeout(server.exited, 10_000, 'exit after SIGTERM');
      assert.deepEqual(exitOf(exit), { code: 0, signal: null }, server.stdout());
      assert.ok(exit.at - signalledAt < 2_000, server.stdout());
      assert.ok(!server.stdout().includes('hunter2'), 'the password is never logged');
    } finally {
      server.kill();
    }
  });

  it('REDIS_URL to a full Redis (maxmemory 1mb, noeviction): the profile read, ready, writes 503', {
    timeout: 60_000,
    skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON,
  }, async () => {
    const redis = await RedisServer.start();
    const admin = new Redis(redis.url);
    await admin.config('SET', 'maxmemory', '1mb', 'maxmemory-policy', 'noeviction');
    const server = await startServer({ REDIS_URL: redis.url });
    try {
      const origin = `http://127.0.0.1:${server.port}`;
      // Ready once connected, though full from the start.
      const deadline = performance.now() + 10_000;
      while ((await sendTo(origin, { path: '/readyz' })).status !== 200) {
        assert.ok(performance.now() < deadline, 'ready within 10 s');
        await sleep(100);
      }
      const profile = await sendTo(origin, { path: '/api/profile' });
      assert.equal(profile.status, 200, profile.text);
      assert.deepEqual(profile.json(), { name: null, email: null, bio: null });
      assert.equal((await sendTo(origin, { path: '/readyz' })).status, 200);
      const write = await sendTo(origin, {
        method: 'PUT',
        path: '/api/profile',
        headers: { 'content-type': 'application/json', 'if-match': String(profile.headers.etag) },
        body: '{"name":"Ada"}',
      });
      assertEnvelope(write, 503, 'SERVICE_UNAVAILABLE');
      // Full at once: the service's own connections take it past 1 MB. One warning says so.
      const full = await server.waitForLog((line) => line.level === 40);
      assert.match(String(full.reason), /^OOM command not allowed/, JSON.stringify(full));
    } finally {
      admin.disconnect();
      server.kill();
      await redis.kill();
    }
  });

  it('REDIS_URL with a database Redis refuses: /readyz and the profile 503 saying why, nothing in database 0', {
    timeout: 60_000,
    skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON,
  }, async () => {
    const redis = await RedisServer.start();
    // A default redis-server has databases 0 to 15.
    const server = await startServer({ REDIS_URL: `${redis.url}/99999` });
    const databaseZero = new Redis(redis.url);
    try {
      const reason = 'Redis refused database 99999: ERR DB index is out of range';
      const warning = await server.waitForLog((line) => line.level === 40 && line.reason === reason);
      assert.equal(warning.msg, OUTAGE_WARNING);
      const origin = `http://127.0.0.1:${server.port}`;
      // Also after the next attempts to connect, each refused in the same way.
      for (const waitMs of [0, 1_500]) {
        await sleep(waitMs);
        const ready = await sendTo(origin, { path: '/readyz' });
        assert.equal(assertEnvelope(ready, 503, 'SERVICE_UNAVAILABLE').message, `Not ready: ${reason}`);
        for (const request of [
          { path: '/api/profile' },
          {
            method: 'PUT',
            path: '/api/profile',
            headers: { 'content-type': 'application/json' },
            body: '{"name":"Ada"}',
          },
        ]) {
          const res = await sendTo(origin, request);
          const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
          assert.equal(error.message, 'The shared store is unavailable; try again shortly.');
          assert.equal(res.headers['retry-after'], '1');
        }
      }
      assert.deepEqual(await databaseZero.keys('*'), [], 'nothing was written to database 0');
    } finally {
      databaseZero.disconnect();
      server.kill();
      await redis.kill();
    }
  });

  it('HEADERS_TIMEOUT_MS of any valid value, 2001 say, starts and answers', { timeout: 60_000 }, async () => {
    // The timeouts are checked every quarter of it: 500.25 ms once stopped the start with a stack trace.
    const server = await startServer({ HEADERS_TIMEOUT_MS: '2001' });
    try {
      assert.deepEqual(await get(server.port, '/healthz'), { status: 200, body: { status: 'ok' } });
      assert.equal(server.stderr(), '');
    } finally {
      server.kill();
    }
  });

  it('--port and --host win over PORT and HOST', { timeout: 60_000 }, async () => {
    // Were PORT or HOST used, it would listen on port 1, or fail on an address this host lacks.
    const server = await startServer({ PORT: '1', HOST: '192.0.2.1' }, ['--port', '0', '--host', '127.0.0.1']);
    try {
      assert.notEqual(server.port, 1);
      const res = await get(server.port, '/healthz');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: 'ok' });
    } finally {
      server.kill();
    }
  });

  describe('time zone: /api/hello is local time per TZ', { concurrency: true }, () => {
    let kolkata: RunningServer | undefined;
    let utc: RunningServer | undefined;
    let posix: RunningServer | undefined;

    before(async () => {
      const [k, u, p] = await Promise.allSettled([
        startServer({ TZ: 'Asia/Kolkata' }),
        startServer({ TZ: 'UTC' }),
        // A POSIX form, which names no zone Intl knows: five hours behind UTC.
        startServer({ TZ: 'GMT+5' }),
      ]);
      if (k.status === 'fulfilled') kolkata = k.value;
      if (u.status === 'fulfilled') utc = u.value;
      if (p.status === 'fulfilled') posix = p.value;
      for (const started of [k, u, p]) if (started.status === 'rejected') throw started.reason;
    });
    after(() => {
      kolkata?.kill();
      utc?.kill();
      posix?.kill();
    });

    /** A fresh /api/hello timestamp, and it read as if it were UTC minus now: the zone's offset, in ms. */
    async function hello(server: RunningServer | undefined): Promise<{ timestamp: string; offsetMs: number }> {
      assert.ok(server, 'the server started');
      const res = await get(server.port, '/api/hello');
      assert.equal(res.status, 200);
      assert.equal(res.body.message, 'Hello, World!');
      const timestamp: string = res.body.timestamp;
      assert.match(timestamp, LOCAL_TIMESTAMP);
      return { timestamp, offsetMs: Date.parse(`${timestamp}Z`) - Date.now() };
    }

    it('TZ=Asia/Kolkata: UTC now + 05:30', async () => {
      const { timestamp, offsetMs } = await hello(kolkata);
      assert.ok(Math.abs(offsetMs - (5 * 60 + 30) * 60_000) < 5_000, `${timestamp} is UTC now + 5:30`);
    });

    it('TZ=UTC: UTC now', async () => {
      const { timestamp, offsetMs } = await hello(utc);
      assert.ok(Math.abs(offsetMs) < 5_000, `${timestamp} is UTC now`);
    });

    it('TZ=GMT+5: UTC now - 05:00', async () => {
      const { timestamp, offsetMs } = await hello(posix);
      assert.ok(Math.abs(offsetMs + 5 * 60 * 60_000) < 5_000, `${timestamp} is UTC now - 5:00`);
    });

    it("Java's LocalDateTime.parse reads the Asia/Kolkata timestamp", { timeout: 60_000 }, async (t) => {
      if (spawnSync('java', ['-version']).status !== 0) {
        t.skip('SKIPPED: java not installed (.ci/run installs default-jre-headless)');
        return;
      }
      const { timestamp } = await hello(kolkata);
      const dir = await mkdtemp(join(tmpdir(), 'greeting-service-java-'));
      try {
        await writeFile(
          join(dir, 'Parse.java'),
          [
            'import java.time.LocalDateTime;',
            'import java.time.format.DateTimeFormatter;',
            '',
            'public class Parse {',
            '  public static void main(String[] args) {',
            '    LocalDateTime parsed = LocalDateTime.parse(args[0]);',
            // toString() drops zero seconds and milliseconds; print every field instead.
            '    System.out.println(parsed.format(DateTimeFormatter.ofPattern("uuuu-MM-dd\'T\'HH:mm:ss.SSS")));',
            '  }',
            '}',
            '',
          ].join('\n'),
        );
        // Single-file source launch (Java 11+); the JIT flags only make the short run cheaper.
        const args = ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', 'Parse.java', timestamp];
        const java = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
          const child = spawn('java', args, { cwd: dir });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (chunk) => {
            stdout += chunk;
          });
          child.stderr.on('data', (chunk) => {
            stderr += chunk;
          });
          child.on('error', reject);
          child.on('close', (code) => resolve({ code, stdout, stderr }));
        });
        assert.equal(java.code, 0, java.stderr);
        assert.equal(java.stdout.trim(), timestamp);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('bad configuration: one line on stderr, nothing on stdout, exit 1', { concurrency: true }, () => {
    /** A port something else listens on, opened before the cases run. */
    const busy = createServer();
    let busyPort = 0;

    /**
     * A user who may not listen on port 80 (nobody, when the tests run as root), or why this
     * cannot be tried here.
     */
    const unprivileged = ((): SpawnOptions | string => {
      if (!existsSync(UNPRIVILEGED_PORT_START)) return 'SKIPPED: Linux only';
      if (Number(readFileSync(UNPRIVILEGED_PORT_START, 'utf8')) <= 80)
        return 'SKIPPED: any user may listen on port 80 here';
      if (process.getuid?.() !== 0) return {};
      const nobody = { uid: 65534, gid: 65534 };
      // Started as the test starts it: a private directory on the checkout's path (a clone under
      // /root, say) or a Node under such a directory keeps nobody from loading the service.
      const canRun = spawnSync(process.execPath, ['dist/server.js', '--version'], { cwd: ROOT, ...nobody });
      return canRun.status === 0
        ? nobody
        : `SKIPPED: user nobody cannot run ${process.execPath} on ${ROOT}dist/server.js (a private directory on the way?)`;
    })();

    /** A FIFO no one writes to: opening or reading it would wait forever. */
    const fifoDir = mkdtempSync(join(tmpdir(), 'fifo-setting-'));
    const fifo = join(fifoDir, 'secret');
    const emptyFile = join(fifoDir, 'empty');
    writeFileSync(emptyFile, '');
    const fifoNamed = (setting: string) =>
      `invalid ${setting} ${JSON.stringify(fifo)}: is not a regular file but a FIFO`;

    const cases: {
      name: string;
      env?: Record<string, string>;
      args?: string[];
      options?: SpawnOptions;
      skip?: string;
      names: string;
      /** The exit comes within this many ms of the start. */
      withinMs?: number;
    }[] = [
      { name: 'PORT=abc', env: { PORT: 'abc' }, names: 'PORT "abc"' },
      { name: 'PORT=70000', env: { PORT: '70000' }, names: 'PORT "70000"' },
      { name: 'LOG_LEVEL=loud', env: { LOG_LEVEL: 'loud' }, names: 'LOG_LEVEL "loud"' },
      { name: 'OTEL_TRACES_SAMPLER=xray', env: { OTEL_TRACES_SAMPLER: 'xray' }, names: 'OTEL_TRACES_SAMPLER "xray"' },
      { name: 'BODY_LIMIT=0', env: { BODY_LIMIT: '0' }, names: 'BODY_LIMIT "0"' },
      { name: 'CONTEXT_PATH=no-slash', env: { CONTEXT_PATH: 'no-slash' }, names: 'CONTEXT_PATH "no-slash"' },
      // A wildcard to Fastify: its error's stack trace.
      { name: 'CONTEXT_PATH=/svc*', env: { CONTEXT_PATH: '/svc*' }, names: 'CONTEXT_PATH "/svc*"' },
      { name: 'SHUTDOWN_TIMEOUT_MS=-1', env: { SHUTDOWN_TIMEOUT_MS: '-1' }, names: 'SHUTDOWN_TIMEOUT_MS "-1"' },
      // The URL is a secret: named, never repeated.
      { name: 'REDIS_URL=http://…', env: { REDIS_URL: 'http://:hunter2@host' }, names: 'invalid REDIS_URL: ' },
      // Each of these reached ioredis: SELECT NaN and a crash (at start, or once Redis was there),
      // database 0 in silence, a URIError's stack trace.
      ...[
        'redis://:hunter2@127.0.0.1:6379/abc',
        'redis://:hunter2@127.0.0.1:6379/?db=abc',
        'redis://127.0.0.1:6379/-1',
      ].map((url) => ({ name: `REDIS_URL=${url}`, env: { REDIS_URL: url }, names: 'invalid REDIS_URL: ' })),
      {
        name: 'REDIS_URL=redis://:hunter2%ZZ@…',
        env: { REDIS_URL: 'redis://:hunter2%ZZ@127.0.0.1' },
        names: 'invalid REDIS_URL: ',
      },
      // The Redis settings: one topology, files read and checked at start, credentials in one place.
      {
        name: 'REDIS_URL and REDIS_CLUSTER_NODES',
        env: { REDIS_URL: 'redis://:hunter2@127.0.0.1', REDIS_CLUSTER_NODES: '127.0.0.1:7000' },
        names: 'REDIS_URL and REDIS_CLUSTER_NODES are both set',
      },
      {
        name: 'REDIS_SENTINELS without REDIS_SENTINEL_NAME',
        env: { REDIS_SENTINELS: '127.0.0.1:26379' },
        names: 'invalid REDIS_SENTINELS: needs REDIS_SENTINEL_NAME',
      },
      {
        name: 'REDIS_PASSWORD_FILE that cannot be read',
        env: { REDIS_URL: 'redis://127.0.0.1', REDIS_PASSWORD_FILE: '/nonexistent/redis-password' },
        names: 'invalid REDIS_PASSWORD_FILE "/nonexistent/redis-password": cannot be read (ENOENT)',
      },
      {
        name: 'REDIS_PASSWORD_FILE and a password in REDIS_URL',
        env: { REDIS_URL: 'redis://:hunter2@127.0.0.1', REDIS_PASSWORD_FILE: `${ROOT}package.json` },
        names: 'invalid REDIS_PASSWORD_FILE: REDIS_URL has a password too',
      },
      {
        name: 'REDIS_TLS_CA_FILE that is no PEM',
        env: { REDIS_URL: 'rediss://127.0.0.1', REDIS_TLS_CA_FILE: `${ROOT}package.json` },
        names: `invalid REDIS_TLS_CA_FILE "${ROOT}package.json": is not a PEM file of certificates`,
      },
      // Fault injection and the operator's token: checked at start like every setting.
      { name: 'FAULT_ERROR_RATE=1.5', env: { FAULT_ERROR_RATE: '1.5' }, names: 'FAULT_ERROR_RATE "1.5"' },
      {
        name: 'FAULT_DELAY_MS=70000',
        env: { FAULT_DELAY_RATE: '0.1', FAULT_DELAY_MS: '70000' },
        names: 'FAULT_DELAY_MS "70000"',
      },
      {
        name: 'ADMIN_TOKEN_FILE that cannot be read',
        env: { ADMIN_TOKEN_FILE: '/nonexistent/admin-token' },
        names: 'invalid ADMIN_TOKEN_FILE "/nonexistent/admin-token": cannot be read (ENOENT)',
      },
      {
        name: 'ADMIN_TOKEN_FILE that is empty',
        env: { ADMIN_TOKEN_FILE: emptyFile },
        names: `invalid ADMIN_TOKEN_FILE ${JSON.stringify(emptyFile)}: is empty`,
      },
      {
        name: 'ADMIN_TOKEN_FILE=/dev/zero, a device whose text never ends',
        env: { ADMIN_TOKEN_FILE: '/dev/zero' },
        names: 'invalid ADMIN_TOKEN_FILE "/dev/zero": is not a regular file but a device',
        withinMs: 10_000,
      },
      // HTTPS and HTTP/2: the certificate files are read and checked at start.
      { name: 'HTTP2=yes', env: { HTTP2: 'yes' }, names: 'invalid HTTP2 "yes": must be true, false, 1 or 0' },
      {
        name: 'TLS_CERT_FILE that is no PEM',
        env: { TLS_CERT_FILE: `${ROOT}package.json`, TLS_KEY_FILE: `${ROOT}package.json` },
        names: `invalid TLS_CERT_FILE "${ROOT}package.json": is not a PEM file of certificates`,
      },
      {
        name: 'TLS_KEY_FILE that cannot be read',
        env: { TLS_KEY_FILE: '/nonexistent/tls.key' },
        names: 'invalid TLS_KEY_FILE "/nonexistent/tls.key": cannot be read (ENOENT)',
      },
      // A FIFO (or any file whose open or read waits) as a file setting: refused, never waited on.
      ...(
        [
          { setting: 'REDIS_PASSWORD_FILE', env: { REDIS_URL: 'redis://127.0.0.1', REDIS_PASSWORD_FILE: fifo } },
          {
            setting: 'REDIS_SENTINEL_PASSWORD_FILE',
            env: {
              REDIS_SENTINELS: '127.0.0.1:26379',
              REDIS_SENTINEL_NAME: 'mymaster',
              REDIS_SENTINEL_PASSWORD_FILE: fifo,
            },
          },
          { setting: 'REDIS_TLS_CA_FILE', env: { REDIS_URL: 'rediss://127.0.0.1', REDIS_TLS_CA_FILE: fifo } },
          { setting: 'ADMIN_TOKEN_FILE', env: { ADMIN_TOKEN_FILE: fifo } },
          { setting: 'TLS_CERT_FILE', env: { TLS_CERT_FILE: fifo, TLS_KEY_FILE: fifo } },
        ] as { setting: string; env: Record<string, string> }[]
      ).map(({ setting, env }) => ({
        name: `${setting} that is a FIFO`,
        env,
        names: fifoNamed(setting),
        withinMs: 10_000,
      })),
      // Node runs in UTC for a zone it cannot read, without a word.
      { name: 'TZ=Invalid/Zone', env: { TZ: 'Invalid/Zone' }, names: 'invalid TZ "Invalid/Zone"' },
      { name: 'TZ=asia/kolkata', env: { TZ: 'asia/kolkata' }, names: 'invalid TZ "asia/kolkata"' },
      { name: '--port abc', args: ['--port', 'abc'], names: '--port "abc"' },
      { name: 'unknown flag --nope', args: ['--nope'], names: '--nope' },
      // Listening fails: the address is checked by the system, not by the configuration.
      {
        name: 'PORT already in use',
        get env() {
          return { PORT: String(busyPort) };
        },
        get names() {
          return `PORT ${busyPort} is already in use on 127.0.0.1`;
        },
      },
      {
        name: '--port already in use',
        get args() {
          return ['--port', String(busyPort)];
        },
        get names() {
          return `--port ${busyPort} is already in use on 127.0.0.1`;
        },
      },
      {
        name: 'HOST=999.1.1.1',
        env: { HOST: '999.1.1.1' },
        names: 'HOST "999.1.1.1" cannot be resolved to an address',
      },
      {
        name: 'HOST=192.0.2.1, an address of another machine',
        env: { HOST: '192.0.2.1' },
        names: 'HOST "192.0.2.1" is not an address of this machine',
      },
      {
        name: 'PORT=80 for a user without the privilege',
        env: { PORT: '80' },
        ...(typeof unprivileged === 'string' ? { skip: unprivileged } : { options: unprivileged }),
        names: 'PORT 80 needs privileges this process does not have',
      },
    ];
    const results = new Map<string, { exit: Exit; stdout: string; stderr: string; tookMs: number }>();

    before(async () => {
      assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
      busy.listen(0, '127.0.0.1');
      await once(busy, 'listening');
      busyPort = (busy.address() as AddressInfo).port;
      // Three at a time: a couple of dozen starts at once would take the machine's cores from
      // the tests beside these, and each its own time limit.
      const queue = cases.filter(({ skip }) => skip === undefined);
      const run = async (): Promise<void> => {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          const { name, env, args, options } = next;
          const startedAt = performance.now();
          const server = await spawnServer(env, args, options);
          try {
            const exit = await withTimeout(server.exited, 20_000, `${name}: exit`);
            const tookMs = Math.round(exit.at - startedAt);
            results.set(name, { exit, stdout: server.stdout(), stderr: server.stderr(), tookMs });
          } finally {
            server.kill();
          }
        }
      };
      await Promise.all([run(), run(), run()]);
    });
    after(() => {
      busy.close();
      rmSync(fifoDir, { recursive: true, force: true });
    });

    for (const testCase of cases) {
      it(testCase.name, { skip: testCase.skip }, () => {
        const { name, names, withinMs } = testCase;
        const result = results.get(name);
        assert.ok(result, 'the process ran');
        assert.deepEqual(exitOf(result.exit), { code: 1, signal: null }, result.stderr);
        assert.equal(result.stdout, '');
        assert.match(result.stderr, /^greeting-service: [^\n]+\n$/, 'exactly one line');
        assert.ok(result.stderr.includes(names), `${JSON.stringify(result.stderr)} names ${names}`);
        assert.ok(!result.stderr.includes('hunter2'), 'a secret is never repeated');
        if (withinMs !== undefined) assert.ok(result.tookMs < withinMs, `exited ${result.tookMs} ms after the start`);
      });
    }
  });

  it("dist/healthcheck.js (the container's HEALTHCHECK) exits 0 while the server answers /healthz, 1 once it is gone", {
    timeout: 60_000,
  }, async () => {
    const env = { HOST: '127.0.0.1', CONTEXT_PATH: '/svc/' };
    const server = await startServer(env);
    const check = () => {
      const childEnv = { ...process.env, ...env, PORT: String(server.port) };
      const { status, stderr } = spawnSync(process.execPath, ['dist/healthcheck.js'], { cwd: ROOT, env: childEnv });
      return { status, stderr: String(stderr) };
    };
    try {
      assert.deepEqual(check(), { status: 0, stderr: '' });
    } finally {
      server.kill();
    }
    await server.exited;
    assert.equal(check().status, 1);
  });

  describe('command line: --help and --version print to stdout and exit 0 without starting', {
    concurrency: true,
  }, () => {
    async function run(args: string[]): Promise<{ exit: Exit; stdout: string; stderr: string }> {
      const server = await spawnServer({}, args);
      try {
        const exit = await withTimeout(server.exited, 20_000, `${args.join(' ')}: exit`);
        return { exit, stdout: server.stdout(), stderr: server.stderr() };
      } finally {
        server.kill();
      }
    }

    for (const flag of ['--help', '-h']) {
      it(`${flag} lists every variable and flag with its default, a secret's default not shown`, async () => {
        const { exit, stdout, stderr } = await run([flag, '--port', '1']);
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, stderr);
        assert.equal(stderr, '');
        assert.match(stdout, /^Usage: greeting-service /m);
        assert.match(stdout, /^ +greeting-service conformance <base-url> \[options\] /m);
        const trustProxy = stdout.split('\n').find((l) => l.startsWith('  TRUST_PROXY '));
        for (const form of [
          'false or 0',
          'a number of proxies',
          'CIDR ranges',
          'loopback',
          'linklocal',
          'uniquelocal',
          'true',
        ]) {
          assert.ok(trustProxy?.includes(form), `TRUST_PROXY names ${form}: ${trustProxy}`);
        }
        for (const [key, setting] of Object.entries(SETTINGS)) {
          const { env, flag: name, secret } = setting;
          const line = stdout.split('\n').find((l) => l.startsWith(`  ${env} `) || l.startsWith(`  ${env},`));
          assert.ok(line, `${env} is listed`);
          if (name !== undefined) assert.ok(line.includes(`--${name}`), `${env} names --${name}`);
          // The default as written, or in words where its value would not say it; an empty one reads "unset".
          const value = DEFAULT_CONFIG[key as keyof typeof DEFAULT_CONFIG];
          const empty = value === null || (Array.isArray(value) && value.length === 0);
          const shown = setting.defaultText ?? (empty ? 'unset' : String(value));
          if (secret) assert.doesNotMatch(line, /default:/, `${env}'s default is not shown`);
          else assert.ok(line.endsWith(`(default: ${shown})`), `${env} shows its default: ${line}`);
        }
      });
    }

    it("--version prints the package version on its first line, then the build's facts", async () => {
      const { exit, stdout } = await run(['--version']);
      assert.deepEqual(exitOf(exit), { code: 0, signal: null });
      assert.equal(stdout.split('\n')[0], VERSION);
      assert.match(stdout, /^[^\n]+\ncommit: \S+\nbuild_time: \S+\nruntime: node v\S+\n$/);
      assert.match(VERSION, /^\d+\.\d+\.\d+/);
    });

    it('dist/server.js starts with a shebang, so npm can link it as the greeting-service command', async () => {
      const text = await readFile(join(ROOT, 'dist/server.js'), 'utf8');
      assert.ok(text.startsWith('#!/usr/bin/env node\n'));
    });
  });
});
