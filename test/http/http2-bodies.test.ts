import assert from 'node:assert/strict';
import { type ClientHttp2Session, connect } from 'node:http2';
import { after, describe, it } from 'node:test';
import { request } from 'undici';
import { HTTP2_LIMITS } from '../../src/http/http2-sessions.js';
import { readStream } from '../h2-client.js';
import { exitOf, killAllServers, type RunningServer, rssMiB, startServer } from '../server-process.js';

after(killAllServers);

/** A JSON object of about 1 MB: keys k0, k1, … with short string values. */
function megabyteObject(): Buffer {
  const members: string[] = [];
  let length = 2;
  for (let i = 0; length < 1_000_000; i++) {
    const member = `"k${i}":"value ${i} ${'x'.repeat(20)}"`;
    members.push(member);
    length += member.length + 1;
  }
  return Buffer.from(`{${members.join(',')}}`);
}

/**
 * Opens `streams` streams on each session, each posting the body to /api/echo, and reads none of
 * the answers (each paused as its headers come). Settles once every stream has its answer's
 * headers or has been reset, or once, after the first, none has for `quietMs`: with the statuses
 * and error codes seen.
 */
function echoesUnread(
  sessions: ClientHttp2Session[],
  streams: number,
  body: Buffer,
  quietMs: number,
): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  let settle: () => void = () => {};
  const calm = new Promise<void>((resolve) => {
    settle = resolve;
  });
  let quiet: NodeJS.Timeout | undefined;
  const count = (what: string) => {
    seen[what] = (seen[what] ?? 0) + 1;
    clearTimeout(quiet);
    quiet = setTimeout(settle, quietMs);
  };
  const echo = (session: ClientHttp2Session) =>
    new Promise<void>((resolve) => {
      const stream = session.request({ ':method': 'POST', ':path': '/api/echo', 'content-type': 'application/json' });
      stream.on('response', (headers) => {
        count(String(headers[':status']));
        stream.pause();
        resolve();
      });
      stream.on('error', (error: NodeJS.ErrnoException) => {
        count(error.code ?? 'error');
        resolve();
      });
      stream.on('close', () => resolve());
      stream.end(body);
    });
  const all = Promise.all(sessions.flatMap((session) => Array.from({ length: streams }, () => echo(session))));
  return Promise.race([all, calm]).then(() => {
    clearTimeout(quiet);
    return seen;
  });
}

/** The status of `GET /healthz`, or why none came (the process's fatal error, if it died). */
async function healthz(server: RunningServer): Promise<number | string> {
  try {
    const { statusCode, body } = await request(`http://127.0.0.1:${server.port}/healthz`);
    await body.dump();
    return statusCode;
  } catch (error) {
    const fatal =
      server
        .stderr()
        .split('\n')
        .find((line) => line.includes('FATAL')) ?? '';
    return `${(error as Error).message} ${fatal}`;
  }
}

/**
 * Two h2c sessions of 100 streams each post 1 MB to /api/echo and read none of the answers, against
 * the built service with a heap of 128 MiB; then the process must be up and answer /healthz, while
 * the answers wait and after the sessions are gone.
 */
async function floodAndServe(maxSessionMemory: number | undefined): Promise<void> {
  const server = await startServer({ HTTP2: 'true' }, [], { nodeArgs: ['--max-old-space-size=128'] });
  const body = megabyteObject();
  const sessions = [0, 1].map(() =>
    connect(`http://127.0.0.1:${server.port}`, maxSessionMemory === undefined ? {} : { maxSessionMemory }).on(
      'error',
      () => {},
    ),
  );
  const flood = echoesUnread(sessions, 100, body, 3000);
  const died = server.exited.then((exit) => ({ died: exitOf(exit) }));
  const settled = await Promise.race([flood.then((seen) => ({ seen })), died]);
  assert.ok('seen' in settled, `the process died: ${JSON.stringify(settled)}\n${server.stderr().slice(0, 300)}`);
  assert.equal(await healthz(server), 200, 'healthz while the answers wait');
  const peak = await rssMiB(server.child.pid as number, 'VmHWM');
  console.log(`streams: ${JSON.stringify(settled.seen)}, peak resident memory ${peak} MiB`);
  for (const session of sessions) session.destroy();
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(server.child.exitCode, null, `the process died\n${server.stderr().slice(0, 300)}`);
  assert.equal(await healthz(server), 200, 'healthz after');
  server.kill();
}

describe('HTTP/2 request bodies in flight together, under a heap of 128 MiB', () => {
  it('two h2c sessions of 100 streams each posting 1 MB to /api/echo, their answers unread: the process stays up and serves others', async () => {
    // Node's client resets streams past its own 10 MiB of session memory; an attacker's takes what comes.
    await floodAndServe(1000);
  });

  it('the same, the client resetting the streams it has no memory left for (ENHANCE_YOUR_CALM): their answers are let go at once', async () => {
    await floodAndServe(undefined);
  });

  it(`echoes whole the bodies one session sends at once beyond its ${HTTP2_LIMITS.maxSessionBodyBytes / 2 ** 20} MiB share, as its client reads them`, async () => {
    const server = await startServer({ HTTP2: 'true' }, [], { nodeArgs: ['--max-old-space-size=128'] });
    const body = megabyteObject();
    const count = 40;
    assert.ok(count * body.length > 4 * HTTP2_LIMITS.maxSessionBodyBytes, 'more than the share');
    // Node's client would reset the streams past its own 10 MiB of session memory: the bodies it holds unsent.
    const session = connect(`http://127.0.0.1:${server.port}`, { maxSessionMemory: 1000 }).on('error', () => {});
    try {
      // All sent at once: the service reads the session's oldest body always, the others while there is room.
      const answers = await Promise.all(
        Array.from({ length: count }, () => {
          const stream = session.request({
            ':method': 'POST',
            ':path': '/api/echo',
            'content-type': 'application/json',
          });
          stream.end(body);
          return readStream(stream);
        }),
      );
      for (const answer of answers) {
        assert.equal(answer.status, 200);
        assert.ok(answer.text.startsWith(`{"received":${body}`));
      }
    } finally {
      session.close();
      server.kill();
    }
  });
});
