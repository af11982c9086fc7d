import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { assertEnvelope, listening, listeningInSuite, samples, sendHttp2 } from '../helpers.js';
import { killAllServers, rssMiB, startServer, withTimeout } from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON } from '../tls-files.js';

const PATH = '/api/echo/websocket';

async function open(port: number, options: ConstructorParameters<typeof WebSocket>[2] = {}): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${PATH}`, options);
  await once(ws, 'open');
  return ws;
}

/** The close code `ws` sees, within `ms`. */
async function closeCode(ws: WebSocket, ms = 10_000): Promise<number> {
  return (await closeOf(ws, ms)).code;
}

/** The close `ws` sees, code and reason, within `ms`. */
async function closeOf(ws: WebSocket, ms = 10_000): Promise<{ code: number; reason: string }> {
  const [code, reason] = (await withTimeout(once(ws, 'close'), ms, 'close')) as [number, Buffer];
  return { code, reason: reason.toString() };
}

/** Sends `data` as one message in `fragments` frames. */
function sendInFragments(ws: WebSocket, data: Buffer, fragments: number): void {
  const size = Math.ceil(data.length / fragments);
  for (let i = 0; i < fragments; i++) ws.send(data.subarray(i * size, (i + 1) * size), { fin: i === fragments - 1 });
}

/**
 * Sends messages of `size` bytes as fast as the connection takes them and never reads an echo
 * (its socket paused), for `ms`: answers how many bytes the connection took.
 */
async function flood(ws: WebSocket, size: number, ms: number): Promise<number> {
  ws.pause();
  const message = Buffer.alloc(size, 0x61);
  const end = performance.now() + ms;
  let sent = 0;
  while (performance.now() < end && ws.readyState === WebSocket.OPEN) {
    if (ws.bufferedAmount > 8 * size) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      continue;
    }
    ws.send(message);
    sent += size;
  }
  return sent - ws.bufferedAmount;
}

describe('WebSocket limits', () => {
  const serve = listeningInSuite();

  it('echoes a message of WS_MAX_MESSAGE_BYTES, and closes with 1009 and its reason on a larger one', async () => {
    const { port } = await serve({ wsMaxMessageBytes: 1024 });
    const ws = await open(port);
    ws.send(Buffer.alloc(1024, 1));
    const [echo] = (await once(ws, 'message')) as [Buffer];
    assert.equal(echo.length, 1024);
    ws.send(Buffer.alloc(1025, 1));
    assert.deepEqual(await closeOf(ws), { code: 1009, reason: 'A message may be at most 1024 bytes.' });
  });

  it('echoes a message in one fragment per 64 bytes of WS_MAX_MESSAGE_BYTES, and closes with 1008 and its reason past them', async () => {
    const { port } = await serve({ wsMaxMessageBytes: 1024 });
    const ws = await open(port);
    sendInFragments(ws, Buffer.alloc(32, 2), 16);
    const [echo] = (await once(ws, 'message')) as [Buffer];
    assert.deepEqual(echo, Buffer.alloc(32, 2));
    sendInFragments(ws, Buffer.alloc(34, 2), 17);
    assert.deepEqual(await closeOf(ws), { code: 1008, reason: 'A message may come in at most 16 fragments.' });
  });

  it('at the defaults, echoes a message of 16,384 fragments, and closes one of 16,385 with 1008 and its reason', async () => {
    const { port } = await serve();
    const ws = await open(port);
    sendInFragments(ws, Buffer.alloc(16_384, 3), 16_384);
    const [echo] = (await once(ws, 'message')) as [Buffer];
    assert.equal(echo.length, 16_384);
    sendInFragments(ws, Buffer.alloc(16_385, 3), 16_385);
    assert.deepEqual(await closeOf(ws), { code: 1008, reason: 'A message may come in at most 16384 fragments.' });
  });

  it('answers a burst of 1,000 pings, each with its payload, and stays open', async () => {
    const { port } = await serve();
    const ws = await open(port);
    const pongs: string[] = [];
    ws.on('pong', (data: Buffer) => pongs.push(data.toString()));
    for (let i = 0; i < 1000; i++) ws.ping(String(i));
    ws.send('after');
    await withTimeout(once(ws, 'message'), 5000, 'the echo after the pings');
    assert.deepEqual(
      pongs,
      Array.from({ length: 1000 }, (_, i) => String(i)),
    );
    assert.equal(ws.readyState, WebSocket.OPEN);
    ws.close();
  });

  it('stops reading a client that pings and never reads its pongs, past WS_MAX_BUFFERED_BYTES; it reads on once the client does', async (t) => {
    const { app, port } = await serve({ wsMaxBufferedBytes: 64 * 1024 });
    // The service's end of the connection: what it holds unsent, its pongs, is what the limit bounds.
    let served: Socket | undefined;
    app.server.once('upgrade', (_request, upgraded: Socket) => {
      served = upgraded;
    });
    const socket = connect(port, '127.0.0.1');
    socket.write(
      `GET ${PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    const [head] = (await once(socket, 'data')) as [Buffer];
    assert.match(head.toString('latin1'), /^HTTP\/1\.1 101 /);
    socket.pause();
    // Pings of 125 bytes, masked with zeros, 8,000 to a write, as fast as the connection takes them.
    const ping = Buffer.concat([Buffer.from([0x89, 0x80 | 125, 0, 0, 0, 0]), Buffer.alloc(125, 0x70)]);
    const pings = Buffer.concat(Array.from({ length: 8000 }, () => ping));
    const end = performance.now() + 1500;
    let written = 0;
    let mostUnsent = 0;
    while (performance.now() < end) {
      mostUnsent = Math.max(mostUnsent, served?.writableLength ?? 0);
      if (socket.writableLength > pings.length) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      socket.write(pings);
      written += pings.length;
    }
    const taken = written - socket.writableLength;
    t.diagnostic(
      `in 1.5 s of pinging, the connection took ${taken} bytes; the service held at most ${mostUnsent} unsent`,
    );
    // Its limit, and the pongs of what it read at once past it (a read of 64 KiB: some 500 pongs).
    assert.ok(mostUnsent < 256 * 1024, `the service held ${mostUnsent} bytes of pongs unsent`);
    // Once the client reads, every ping is answered (2 + 125 bytes each), then a message echoed.
    const answered = (written / ping.length) * 127 + 2 + 4;
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.resume();
    socket.write(Buffer.from([0x81, 0x84, 0, 0, 0, 0, ...Buffer.from('last')]));
    const deadline = performance.now() + 20_000;
    while (received < answered && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(received, answered);
    socket.destroy();
  });

  it('pings every WS_PING_INTERVAL_MS and ends a client that does not answer; one that does stays', async () => {
    const { port } = await serve({ wsPingIntervalMs: 100 });
    const silent = await open(port, { autoPong: false });
    const answering = await open(port);
    let pings = 0;
    answering.on('ping', () => {
      pings += 1;
    });
    const started = performance.now();
    assert.equal(await closeCode(silent, 2000), 1006);
    const took = performance.now() - started;
    assert.ok(took < 1000, `ended after ${took} ms`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(answering.readyState, WebSocket.OPEN);
    assert.ok(pings >= 3, `${pings} pings`);
    answering.close();
  });

  it('counts open connections and messages each way in /metrics', async () => {
    const { app, port } = await serve();
    const metrics = async () => (await app.inject('/metrics')).body;
    const ws = await open(port);
    ws.send('a');
    await once(ws, 'message');
    ws.send('b');
    await once(ws, 'message');
    let text = await metrics();
    assert.deepEqual([...samples(text, 'websocket_connections_open')], [['', 1]]);
    assert.deepEqual(
      [...samples(text, 'websocket_messages_total')],
      [
        ['{direction="received"}', 2],
        ['{direction="sent"}', 2],
      ],
    );
    ws.close();
    await once(ws, 'close');
    await new Promise((resolve) => setTimeout(resolve, 50));
    text = await metrics();
    assert.deepEqual([...samples(text, 'websocket_connections_open')], [['', 0]]);
  });

  it('closes every connection with 1001 on shutdown, and ends one whose client does not answer the close', async () => {
    const { app, port } = await listening({ shutdownTimeoutMs: 1000 });
    const polite = await open(port);
    // A client that never reads: the close reaches it only once the service gives up on it.
    const deaf = connect(port, '127.0.0.1');
    deaf.write(
      `GET ${PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    await once(deaf, 'data');
    deaf.pause();
    const started = performance.now();
    const code = closeCode(polite);
    await app.close();
    const took = performance.now() - started;
    assert.equal(await code, 1001);
    assert.ok(took < 1000, `closed in ${took} ms`);
    // Its connection is gone: what the service sent it is all there is to read.
    deaf.resume();
    if (!deaf.destroyed) await withTimeout(once(deaf, 'close'), 1000, 'deaf closed');
  });
});

describe('WebSocket echo over HTTPS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  it('echoes over wss, and answers a request over HTTP/2 (ALPN h2) with the 426 envelope, never a hang', async () => {
    const files = makeTlsFiles();
    const { app, port } = await listening({ http2: true, tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey });
    try {
      const ws = new WebSocket(`wss://127.0.0.1:${port}${PATH}`, { rejectUnauthorized: false });
      await once(ws, 'open');
      ws.send(Buffer.from([7, 8, 9]));
      const [data, binary] = (await once(ws, 'message')) as [Buffer, boolean];
      assert.deepEqual([[...data], binary], [[7, 8, 9], true]);
      ws.close();
      const session = connectHttp2(`https://127.0.0.1:${port}`, { rejectUnauthorized: false });
      const res = await withTimeout(sendHttp2(session, { path: PATH }), 5000, 'h2 answer');
      session.close();
      assertEnvelope(res, 426, 'UPGRADE_REQUIRED');
      assert.equal(res.headers.upgrade, undefined);
    } finally {
      await app.close();
      files.remove();
    }
  });
});

// These start dist/server.js: `npm run build` first.
describe('WebSocket echo, built service', () => {
  after(() => killAllServers());

  it('holds its memory while 20 clients flood and never read, and answers others meanwhile', async (t) => {
    const server = await startServer();
    const pid = server.child.pid as number;
    const idle = await rssMiB(pid);
    const floods = await Promise.all(Array.from({ length: 20 }, () => open(server.port)));
    const flooding = Promise.all(floods.map((ws) => flood(ws, 64 * 1024, 4000)));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    // Meanwhile another client is echoed promptly.
    const other = await open(server.port);
    const asked = performance.now();
    other.send('still here');
    await withTimeout(once(other, 'message'), 2000, 'echo while flooded');
    const latency = performance.now() - asked;
    await flooding;
    const peak = await rssMiB(pid);
    t.diagnostic(
      `RSS ${idle.toFixed(0)} MiB idle, ${peak.toFixed(0)} MiB after 20 floods of 4 s; echo meanwhile in ${latency.toFixed(0)} ms`,
    );
    // 20 clients at WS_MAX_BUFFERED_BYTES (4 MiB) each, and a message each read past it: some 100 MiB.
    assert.ok(peak - idle < 200, `RSS grew from ${idle.toFixed(0)} to ${peak.toFixed(0)} MiB`);
    assert.ok(latency < 1000, `echo took ${latency.toFixed(0)} ms`);
    for (const ws of [...floods, other]) ws.terminate();
    server.child.kill('SIGTERM');
    await server.exited;
  });

  it('SIGTERM closes open connections with 1001 and exits 0', async () => {
    const server = await startServer({ SHUTDOWN_TIMEOUT_MS: '2000' });
    const clients = await Promise.all([open(server.port), open(server.port)]);
    const codes = Promise.all(clients.map((ws) => closeCode(ws)));
    server.child.kill('SIGTERM');
    assert.deepEqual(await codes, [1001, 1001]);
    const exit = await withTimeout(server.exited, 5000, 'exit');
    assert.deepEqual([exit.code, exit.signal], [0, null], server.stderr());
    const closedLines = server.lines.filter((line) => line.msg === 'websocket closed');
    assert.deepEqual(
      closedLines.map((line) => line.close_code),
      [1001, 1001],
    );
  });
});
