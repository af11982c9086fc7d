import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { type ClientHttp2Stream, connect as connectHttp2, constants } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { HTTP2_LIMITS } from '../../src/http/http2-sessions.js';
import { h2, readStream } from '../h2-client.js';
import {
  ErrorCode,
  Flag,
  FrameType,
  frame,
  headerBlock,
  headersFrame,
  pingFrame,
  RawH2,
  requestFields,
  rstStreamFrame,
  Setting,
  settingsFrame,
  windowUpdateFrame,
} from '../h2-frames.js';
import { assertEnvelope } from '../helpers.js';
import { assertNormalLatency, type Latency, measureHttp2Latency } from '../latency.js';
import { exitOf, killAllServers, type RunningServer, readLog, rssMiB, startServer } from '../server-process.js';

/**
 * The attacks on HTTP/2 servers of recent years, each by a client that misbehaves on purpose with
 * raw frames where no library would send them, against the built server in its own process. Each
 * must end with the session closed (GOAWAY) or the streams refused, the process up, its memory
 * bounded, and a well-behaved HTTP/2 client served meanwhile at its usual latency (measured
 * before the attacks, on the same machine). The timeouts are shortened so that the suite takes
 * seconds.
 */

const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 2_000;
const KEEP_ALIVE_TIMEOUT_MS = 3_000;
/** A session on which nothing moves gets GOAWAY after the keep-alive timeout, and is closed a request timeout later. */
const STALLED_SESSION_MS = KEEP_ALIVE_TIMEOUT_MS + REQUEST_TIMEOUT_MS;
/** How late a timeout may come on a machine running other test files. */
const LATE_MS = 3_000;
/** How long each flood goes on: each attacker opens a session again as soon as one is closed. */
const ATTACK_MS = 2_000;
/** How much the server's resident memory may grow during one attack. */
const MEMORY_BOUND_MIB = 64;

/** The GOAWAY error codes' names, for the messages. */
const CODE_NAMES = Object.fromEntries(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

describe('HTTP/2 attacks, against the server process', () => {
  let server: RunningServer;
  let logFile: string;
  let origin: string;
  let quiet: Latency;

  before(async () => {
    logFile = join(await mkdtemp(join(tmpdir(), 'h2-attacks-')), 'server.log');
    server = await startServer(
      {
        HTTP2: 'true',
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
        RATE_LIMIT_MAX: '0', // the well-behaved client sends thousands of requests
      },
      [],
      // The Kubernetes recipe's heap, young generation as the deployment guide sizes it outside a
      // memory limit: growth is then what the attacks hold, not V8 sizing an unbounded heap.
      { logFile, nodeArgs: ['--max-old-space-size=128', '--max-semi-space-size=1'] },
    );
    origin = `http://127.0.0.1:${server.port}`;
    await measureHttp2Latency(origin, sleep(500)); // warm-up: compiles the route's code paths
    quiet = await measureHttp2Latency(origin, sleep(1_000));
  });
  after(() => killAllServers());

  /**
   * Runs `attack` while the well-behaved client measures its latency and the server's resident
   * memory is sampled; asserts the latency (allowing the stalls `stallsOf` counts in the attack's
   * result, one by default), that the memory grew by less than `boundMiB`, and that the server
   * still answers.
   */
  async function underAttack<T>(
    attack: () => Promise<T>,
    boundMiB = MEMORY_BOUND_MIB,
    stallsOf: (result: T) => number = () => 1,
  ): Promise<T> {
    const before = await rssMiB(server.child.pid as number);
    let peak = before;
    const sampler = setInterval(() => {
      void rssMiB(server.child.pid as number).then((rss) => {
        peak = Math.max(peak, rss);
      });
    }, 100);
    const attacking = attack();
    try {
      const [during, result] = await Promise.all([measureHttp2Latency(origin, attacking), attacking]);
      assertNormalLatency(during, quiet, stallsOf(result));
      console.log(
        `  resident memory: ${before.toFixed(1)} MiB before, ${peak.toFixed(1)} MiB at most during the attack`,
      );
      assert.ok(peak - before < boundMiB, `memory grew from ${before} to ${peak} MiB`);
      return result;
    } finally {
      clearInterval(sampler);
      const health = await fetch(`${origin}/healthz`);
      assert.equal(health.status, 200, 'the process still serves');
    }
  }

  it('Rapid Reset (CVE-2023-44487): a session of thousands of streams opened and reset at once ends with GOAWAY after a read of them, none served', async () => {
    const block = headerBlock(requestFields('/api/hello/rapid-reset'));
    const sessions = await underAttack(
      () =>
        // Two attackers, each opening a session every 500 ms that sends 5,000 streams, each HEADERS
        // at once followed by its RST_STREAM, 500 to a write, until the server ends it.
        repeatedly(
          2,
          async () => {
            const raw = await RawH2.open(server.port);
            let streams = 0;
            while (!raw.closed && streams < 5_000 && raw.frames.every((f) => f.type !== FrameType.GOAWAY)) {
              const batch: Buffer[] = [];
              for (let i = 0; i < 500; i += 1, streams += 1) {
                const id = 2 * streams + 1;
                batch.push(frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, id, block), rstStreamFrame(id));
              }
              if (!(await raw.write(Buffer.concat(batch)))) break;
              // The well-behaved client runs in this process too: the attacker lets it have its turn.
              await new Promise(setImmediate);
            }
            const goaway = await raw.goaway(5_000);
            // A server that closes with the attacker's frames unread resets the connection, and the
            // reset may discard its GOAWAY before the client reads it: the session ended all the same.
            const ended = goaway === undefined ? (raw.closed ? 'closed' : 'none') : undefined;
            raw.destroy();
            return {
              streams,
              goaway: ended ?? CODE_NAMES[goaway?.errorCode ?? -1] ?? String(goaway?.errorCode),
              taken: goaway === undefined ? Number.NaN : (goaway.lastStreamId + 1) / 2,
            };
          },
          500,
        ),
      MEMORY_BOUND_MIB,
      // Each session's flood is read at once: a stall apiece.
      (flooders) => flooders.length,
    );
    const taken = sessions.map((session) => session.taken).filter((count) => !Number.isNaN(count));
    const codes = sessions.map((session) => session.goaway);
    console.log(
      `  ${sessions.length} sessions, ${sessions.reduce((n, s) => n + s.streams, 0)} streams sent; streams taken by a session before its GOAWAY: ${Math.min(...taken)} to ${Math.max(...taken)}; GOAWAY ${[...new Set(codes)].join(', ')}`,
    );
    // The service's own limit (ENHANCE_YOUR_CALM), or nghttp2's, when one read held more than its
    // 1,000 resets (INTERNAL_ERROR): either way the session is told to go away and takes no more.
    for (const code of codes) assert.ok(['ENHANCE_YOUR_CALM', 'INTERNAL_ERROR', 'closed'].includes(code), code);
    assert.ok(codes.includes('ENHANCE_YOUR_CALM'), "the service's limit at work");
    for (const count of taken) assert.ok(count <= 1_100, `${count} streams taken by one session`);
    // None of the reset streams was served: none was logged.
    const served = (await readLog(logFile)).filter((line) => line.url === '/api/hello/rapid-reset');
    assert.equal(served.length, 0);
  });

  it('CONTINUATION flood (CVE-2024-27983 and its kin): HEADERS without END_HEADERS, then CONTINUATION frames without end, closes the session', async () => {
    let n = 0;
    const floods = await underAttack(() =>
      repeatedly(2, async () => {
        n += 1;
        const raw = await RawH2.open(server.port);
        await raw.write(frame(FrameType.HEADERS, Flag.END_STREAM, 1, headerBlock(requestFields('/api/hello'))));
        // Each frame a header of 1 KiB; n % 2: empty frames instead, which carry nothing to count.
        const continuation = frame(
          FrameType.CONTINUATION,
          0,
          1,
          n % 2 === 0 ? headerBlock([[`x-flood-${n}`, 'f'.repeat(1_000)]]) : Buffer.alloc(0),
        );
        const batch = Buffer.concat(Array.from({ length: 64 }, () => continuation));
        let sent = 0;
        while (!raw.closed && sent < 64 * 1024 * 1024 && raw.frames.every((f) => f.type !== FrameType.GOAWAY)) {
          if (!(await raw.write(batch))) break;
          sent += batch.length;
        }
        const goaway = await raw.goaway(5_000);
        const closed = await raw.untilClosed(5_000);
        raw.destroy();
        return { sentKiB: Math.round(sent / 1024), goaway: goaway?.errorCode, closed };
      }),
    );
    console.log(
      `  ${floods.length} floods; KiB taken before the close: ${Math.min(...floods.map((f) => f.sentKiB))} to ${Math.max(...floods.map((f) => f.sentKiB))}; GOAWAY codes: ${[...new Set(floods.map((f) => CODE_NAMES[f.goaway ?? -1]))].join(', ')}`,
    );
    for (const flood of floods) {
      // Closed with the flood unread, the connection may be reset before the client reads the GOAWAY.
      assert.equal(flood.closed, true, 'the session closed');
      assert.ok(flood.sentKiB < 16 * 1024, `${flood.sentKiB} KiB taken before the close`);
    }
  });

  it('a header list over 16 KiB, or of more fields than the limit, resets its stream; the session goes on', async () => {
    const raw = await RawH2.open(server.port);
    try {
      // 60 KiB of headers, in HEADERS and CONTINUATION frames of 16 KiB.
      const block = headerBlock(requestFields('/api/hello', 'GET', bigHeaders(200, 300)));
      const pieces: Buffer[] = [];
      for (let at = 0; at < block.length; at += 16_000) pieces.push(block.subarray(at, at + 16_000));
      await raw.write(
        Buffer.concat(
          pieces.map((piece, i) =>
            frame(
              i === 0 ? FrameType.HEADERS : FrameType.CONTINUATION,
              (i === 0 ? Flag.END_STREAM : 0) | (i === pieces.length - 1 ? Flag.END_HEADERS : 0),
              1,
              piece,
            ),
          ),
        ),
      );
      // Small fields, more of them than the limit.
      await raw.write(
        headersFrame(3, requestFields('/api/hello', 'GET', bigHeaders(HTTP2_LIMITS.maxHeaderListPairs, 1))),
      );
      await raw.write(headersFrame(5, requestFields('/api/hello')));
      const answered = await raw.waitFor((f) => f.streamId === 5 && f.type === FrameType.HEADERS);
      assert.ok(answered, 'the next stream is answered');
      for (const id of [1, 3]) {
        const reset = raw.frames.find((f) => f.streamId === id);
        assert.equal(reset?.type, FrameType.RST_STREAM, `stream ${id} reset`);
      }
      assert.equal(
        raw.frames.some((f) => f.type === FrameType.GOAWAY),
        false,
        'no GOAWAY',
      );
    } finally {
      raw.destroy();
    }
  });

  for (const [name, flood] of [
    ['PING', (i: number) => pingFrame(i)],
    ['SETTINGS', () => settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 65_535]])],
  ] as const) {
    it(`a ${name} flood from a client that reads nothing closes its session`, async () => {
      const floods = await underAttack(() =>
        repeatedly(2, async () => {
          const raw = await RawH2.open(server.port, { read: false });
          const batch = Buffer.concat(Array.from({ length: 1_000 }, (_, i) => flood(i)));
          let sent = 0;
          const started = performance.now();
          // The acknowledgements pile up unread on the server's side, until it gives up.
          while (!raw.closed && sent < 256 * 1024 * 1024 && performance.now() - started < 10_000) {
            if (!(await raw.write(batch))) break;
            sent += batch.length;
          }
          raw.socket.resume();
          const goaway = await raw.goaway(5_000);
          const closed = await raw.untilClosed(5_000);
          raw.destroy();
          return { sentKiB: Math.round(sent / 1024), goaway: goaway?.errorCode, closed };
        }),
      );
      console.log(
        `  ${floods.length} ${name} floods; KiB taken before the close: ${Math.min(...floods.map((f) => f.sentKiB))} to ${Math.max(...floods.map((f) => f.sentKiB))}; GOAWAY codes: ${[...new Set(floods.map((f) => CODE_NAMES[f.goaway ?? -1]))].join(', ')}`,
      );
      for (const result of floods) assert.equal(result.closed, true, 'the session closed');
    });
  }

  it('streams that never send their body each get the 408 envelope after REQUEST_TIMEOUT_MS', async () => {
    const session = connectHttp2(origin);
    session.on('error', () => {});
    try {
      const answers = await underAttack(async () => {
        const started = performance.now();
        // Each declares a short body: undeclared, each would count as BODY_LIMIT against the bound of
        // bodies served at once (32 MiB), and those beyond it would wait to be served, not time out.
        const streams = Array.from({ length: 50 }, () => {
          const stream = session.request({
            ':method': 'POST',
            ':path': '/api/echo',
            'content-type': 'application/json',
            'content-length': '100',
          });
          stream.write('{"never":');
          return readStream(stream).then((answer) => ({ answer, elapsedMs: performance.now() - started }));
        });
        return Promise.all(streams);
      });
      for (const { answer, elapsedMs } of answers) {
        assertEnvelope(answer, 408, 'REQUEST_TIMEOUT');
        assert.equal(answer.rstCode, constants.NGHTTP2_NO_ERROR);
        assert.ok(elapsedMs >= REQUEST_TIMEOUT_MS - 50 && elapsedMs < REQUEST_TIMEOUT_MS + LATE_MS, `${elapsedMs} ms`);
      }
    } finally {
      session.close();
    }
  });

  // Each stream of the attacker's declares a body of 1 MiB; what it then sends of it, given the stream and the timers to clear.
  const BODY = JSON.stringify({ data: 'x'.repeat(2 ** 20 - 11) });
  for (const [sending, send] of [
    ['nothing', () => undefined],
    ['a byte every 100 ms', (stream, timers) => timers.push(setInterval(() => stream.write(' '), 100))],
    [
      'all of it, reading none of the echoes',
      (stream) => {
        stream.on('response', () => stream.pause());
        stream.end(BODY);
      },
    ],
  ] as const satisfies readonly (readonly [string, (stream: ClientHttp2Stream, timers: NodeJS.Timeout[]) => void])[]) {
    it(`a session of 100 streams each declaring a body of 1 MiB and sending ${sending} holds none of another session's uploads back`, async () => {
      const attacker = await h2(origin);
      const victim = await h2(origin);
      const timers: NodeJS.Timeout[] = [];
      try {
        const uploads = await underAttack(async () => {
          for (let i = 0; i < HTTP2_LIMITS.maxConcurrentStreams; i += 1) {
            const stream = attacker.request(
              {
                ':method': 'POST',
                ':path': '/api/echo',
                'content-type': 'application/json',
                'content-length': String(BODY.length),
              },
              { endStream: false },
            );
            stream.on('error', () => {});
            send(stream, timers);
          }
          await sleep(300); // the server has taken them all
          const started = performance.now();
          const [answers] = await Promise.all([
            Promise.all(
              Array.from({ length: 16 }, async (_, i) => {
                const stream = victim.request({
                  ':method': 'PUT',
                  ':path': '/api/profile',
                  'content-type': 'application/json',
                });
                stream.end(JSON.stringify({ name: `Victim ${i}` }));
                const answer = await readStream(stream).catch((error: Error) => ({ status: error.message }));
                return { status: answer.status, elapsedMs: performance.now() - started };
              }),
            ),
            // The attacker holds on meanwhile, and the well-behaved client measures throughout.
            sleep(ATTACK_MS),
          ]);
          return answers;
        });
        const answered = uploads.filter(({ status, elapsedMs }) => status === 200 && elapsedMs < REQUEST_TIMEOUT_MS);
        console.log(
          `  ${answered.length} of ${uploads.length} uploads answered 200 within ${REQUEST_TIMEOUT_MS} ms; slowest ${Math.max(...uploads.map((u) => u.elapsedMs)).toFixed(0)} ms`,
        );
        assert.ok(answered.length >= 14, JSON.stringify(uploads));
      } finally {
        for (const timer of timers) clearInterval(timer);
        attacker.destroy();
        victim.close();
      }
    });
  }

  it(`idle sessions are each closed with GOAWAY NO_ERROR after KEEP_ALIVE_TIMEOUT_MS`, async () => {
    const results = await underAttack(async () => {
      // Each session's time is counted from its own connection: opening 200 takes a while on a busy machine.
      const raws = await Promise.all(
        Array.from({ length: 200 }, async () => {
          const opening = performance.now();
          return { raw: await RawH2.open(server.port), opening };
        }),
      );
      return Promise.all(
        raws.map(async ({ raw, opening: opened }) => {
          const goaway = await raw.goaway(KEEP_ALIVE_TIMEOUT_MS + LATE_MS);
          const closed = await raw.untilClosed(2_000);
          raw.destroy();
          return { goaway, closed, elapsedMs: performance.now() - opened };
        }),
      );
    });
    for (const { goaway, closed, elapsedMs } of results) {
      assert.deepEqual(goaway, { lastStreamId: 0, errorCode: ErrorCode.NO_ERROR });
      assert.equal(closed, true);
      assert.ok(elapsedMs >= KEEP_ALIVE_TIMEOUT_MS - 50, `${elapsedMs} ms`);
    }
  });

  it('a client that never reads, with windows open to the limit, holds bounded memory; its sessions are closed', async () => {
    const bundle = await fetch(`${origin}/docs/static/swagger-ui-bundle.js`);
    const bytes = (await bundle.arrayBuffer()).byteLength;
    const SESSIONS = 3;
    const askedMiB = (SESSIONS * HTTP2_LIMITS.maxConcurrentStreams * bytes) / 2 ** 20;
    const raws: RawH2[] = [];
    try {
      await underAttack(
        async () => {
          while (raws.length < SESSIONS) {
            const raw = await RawH2.open(server.port, {
              read: false,
              settings: [[Setting.INITIAL_WINDOW_SIZE, 2 ** 31 - 1]],
            });
            raws.push(raw);
            // The connection's window opened as far as it goes, and every stream asks for a large file.
            const requests = [windowUpdateFrame(0, 2 ** 31 - 1 - 65_535)];
            for (let i = 0; i < HTTP2_LIMITS.maxConcurrentStreams; i += 1) {
              requests.push(headersFrame(2 * i + 1, requestFields('/docs/static/swagger-ui-bundle.js')));
            }
            await raw.write(Buffer.concat(requests));
          }
          await sleep(STALLED_SESSION_MS + LATE_MS);
        },
        // What waits in Node's queues is bounded, not what was asked for: each stream's buffer and its
        // file's read (64 KiB each from Node 22 on: +56 to +91 MiB measured on Node 24, +7 on Node 20).
        askedMiB / 3,
      );
      console.log(
        `  ${raws.length} × ${HTTP2_LIMITS.maxConcurrentStreams} streams asked for ${(bytes / 1024).toFixed(0)} KiB each`,
      );
      for (const raw of raws) {
        // Reading at last: the session was closed, once nothing had moved on it for the keep-alive timeout.
        raw.socket.resume();
        assert.equal(await raw.untilClosed(5_000), true, 'the session closed');
      }
    } finally {
      // A failure above leaves no session open to hold up the shutdown below.
      for (const raw of raws) raw.destroy();
    }
  });

  // In brotli every stream's answer is small enough to be served at once, and so compressed at once:
  // 1,200 compressions, each holding its coder's state (some 0.6 MiB) while it waits for a thread.
  for (const coding of ['identity', 'br']) {
    it(`sessions whose windows stay closed, 100 streams each for the document in ${coding}, PINGing every second: each stream reset after REQUEST_TIMEOUT_MS, each session closed, memory bounded`, async () => {
      const asked = [['accept-encoding', coding]] as const;
      // As sent: fetch would decode it.
      const document = await request(`${origin}/openapi.json`, { headers: { 'accept-encoding': coding } });
      const bytes = (await document.body.arrayBuffer()).byteLength;
      const SESSIONS = 12;
      const askedMiB = (SESSIONS * HTTP2_LIMITS.maxConcurrentStreams * bytes) / 2 ** 20;
      const raws: RawH2[] = [];
      const pinger = setInterval(() => {
        for (const raw of raws) void raw.write(pingFrame(1));
      }, 1_000);
      try {
        const opened = await underAttack(async () => {
          for (let s = 0; s < SESSIONS; s += 1) {
            const raw = await RawH2.open(server.port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
            raws.push(raw);
            const requests: Buffer[] = [];
            for (let i = 0; i < HTTP2_LIMITS.maxConcurrentStreams; i += 1) {
              requests.push(headersFrame(2 * i + 1, requestFields('/openapi.json', 'GET', asked)));
            }
            await raw.write(Buffer.concat(requests));
          }
          const at = performance.now();
          await Promise.all(
            raws.map((raw) => raw.untilClosed(REQUEST_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS + 2 * LATE_MS)),
          );
          return at;
        });
        console.log(
          `  ${SESSIONS} × ${HTTP2_LIMITS.maxConcurrentStreams} streams asked for ${(bytes / 1024).toFixed(0)} KiB each (${askedMiB.toFixed(0)} MiB); closed ${Math.max(...raws.map((raw) => (raw.closedAt ?? Number.NaN) - opened)).toFixed(0)} ms after the last was opened at most`,
        );
        for (const raw of raws) {
          assert.equal(raw.closed, true, 'the session closed, PINGs notwithstanding');
          assert.ok((raw.closedAt as number) - opened >= REQUEST_TIMEOUT_MS - 50, 'not before the request timeout');
          assert.deepEqual(await raw.goaway(0), {
            lastStreamId: 2 * HTTP2_LIMITS.maxConcurrentStreams - 1,
            errorCode: ErrorCode.NO_ERROR,
          });
          const resets = raw.frames.filter((f) => f.type === FrameType.RST_STREAM);
          assert.equal(resets.length, HTTP2_LIMITS.maxConcurrentStreams, 'every stream reset');
          for (const reset of resets) assert.equal(reset.payload.readUInt32BE(0), ErrorCode.CANCEL);
          assert.equal(
            raw.frames.some((f) => f.type === FrameType.DATA),
            false,
          );
        }
      } finally {
        clearInterval(pinger);
        for (const raw of raws) raw.destroy();
      }
    });
  }

  it('SIGTERM after the attacks: exit 0, nothing logged at error level', async () => {
    server.child.kill('SIGTERM');
    assert.deepEqual(exitOf(await server.exited), { code: 0, signal: null });
    const lines = await readLog(logFile);
    assert.deepEqual(
      lines.filter((line) => Number(line.level) >= 50),
      [],
    );
  });
});

/**
 * Runs `attack` `attackers` times at once, each again as soon as it ends (or, with `everyMs`, no
 * sooner than that after it began) until ATTACK_MS is up; resolves with every run's result.
 */
async function repeatedly<T>(attackers: number, attack: () => Promise<T>, everyMs = 0): Promise<T[]> {
  const results: T[] = [];
  await Promise.all(
    Array.from({ length: attackers }, async () => {
      for (const until = performance.now() + ATTACK_MS; performance.now() < until; ) {
        const began = performance.now();
        results.push(await attack());
        await sleep(Math.max(0, everyMs - (performance.now() - began)));
      }
    }),
  );
  return results;
}

/** `count` header fields of `size` characters each. */
function bigHeaders(count: number, size: number): [string, string][] {
  return Array.from({ length: count }, (_, i) => [`x-h${i}`, 'v'.repeat(size)]);
}
