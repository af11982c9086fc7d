import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { WebSocket } from 'ws';
import { h2 } from '../h2-client.js';
import { ErrorCode, FrameType, headersFrame, RawH2, requestFields, Setting } from '../h2-frames.js';
import { assertEnvelope, listening, parseRawResponse, rawExchange, samples, type TestResponse } from '../helpers.js';

/*
 * The memory budget in a listening service with the smallest budget there is (1 MiB): a client
 * that does not read holds more than that, the service sheds it (a reset, a WebSocket's 1013) and
 * refuses new streams and WebSockets meanwhile, with the 503 envelope.
 */

const MiB = 1024 * 1024;

async function get(url: string, headers: Record<string, string> = {}): Promise<TestResponse> {
  const res = await request(url, { headers });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: () => JSON.parse(text),
  } as unknown as TestResponse;
}

async function metric(origin: string, labels: string): Promise<number> {
  const res = await request(`${origin}/metrics`);
  return samples(await res.body.text(), 'memory_shed_total').get(labels) ?? 0;
}

describe('the memory budget (MEMORY_BUDGET_BYTES=1048576)', () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers) await close();
  });

  it('sheds a WebSocket that never reads: its close 1013 written, then the connection reset', async () => {
    const { app, origin, port, logs } = await listening({ memoryBudgetBytes: MiB });
    closers.push(() => app.close());
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/echo/websocket`);
    ws.on('error', () => {});
    await new Promise((resolve) => ws.once('open', resolve));
    (ws as unknown as { _socket: Socket })._socket.pause();
    for (let i = 0; i < 8; i += 1) ws.send(Buffer.alloc(512 * 1024));
    for (let tries = 0; tries < 100 && (await metric(origin, '{action="websocket_closed"}')) === 0; tries += 1) {
      await sleep(20);
    }
    assert.equal(await metric(origin, '{action="websocket_closed"}'), 1);
    const shed = logs.lines.find((line) => line.msg === 'memory budget exceeded: shedding what holds the most');
    assert.equal(shed?.action, 'websocket_closed');
    assert.equal(shed?.budget_bytes, MiB);
    assert.ok((shed?.held_bytes as number) > MiB);
    // Read at last: what was sent, then the reset, never the rest.
    const closed = new Promise<number>((resolve) => ws.once('close', resolve));
    (ws as unknown as { _socket: Socket })._socket.resume();
    assert.notEqual(await closed, 1000);
  });

  it('refuses event streams and WebSockets with 503 while full, without shedding what fills it', async () => {
    // HTTP/2 answers waiting for a window that never opens: 8 OpenAPI documents (under a session's
    // 1 MiB, so all are served at once). What they hold is measured first under a budget they come
    // nowhere near, then made some 90% of the budget.
    const hold = async (budget: number) => {
      const served = await listening({ memoryBudgetBytes: budget, http2: true });
      closers.push(() => served.app.close());
      const raw = await RawH2.open(served.port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
      closers.push(async () => raw.destroy());
      await raw.write(
        Buffer.concat(Array.from({ length: 8 }, (_, i) => headersFrame(2 * i + 1, requestFields('/openapi.json')))),
      );
      let held = 0;
      for (let tries = 0; tries < 100; tries += 1) {
        await sleep(20);
        const res = await request(`${served.origin}/metrics`);
        const now = samples(await res.body.text(), 'memory_held_bytes').get('') ?? 0;
        if (now > 0 && now === held) break;
        held = now;
      }
      return { ...served, held };
    };
    const { held: alone } = await hold(64 * MiB);
    const { origin, port, held } = await hold(Math.ceil(alone / 0.9));
    assert.equal(held, alone);
    const message = 'The service holds as much unsent data for its clients as it may; try again shortly.';
    const stream = await get(`${origin}/api/events?count=1`, { accept: 'text/event-stream' });
    assert.equal(assertEnvelope(stream, 503, 'SERVICE_UNAVAILABLE').message, message);
    assert.equal(stream.headers['retry-after'], '1');
    const handshake = parseRawResponse(
      await rawExchange(
        port,
        'GET /api/echo/websocket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      ),
    );
    assert.equal(assertEnvelope(handshake, 503, 'SERVICE_UNAVAILABLE').message, message);
    assert.equal(handshake.headers['retry-after'], '1');
    assert.equal(await metric(origin, '{action="stream_refused"}'), 1);
    assert.equal(await metric(origin, '{action="websocket_refused"}'), 1);
    assert.equal(await metric(origin, '{action="stream_reset"}'), 0);
  });

  it('resets an HTTP/1.1 connection that leaves a large answer unread, and serves the others', async () => {
    const { app, origin, port } = await listening({ memoryBudgetBytes: MiB, bodyLimit: 4 * MiB });
    closers.push(() => app.close());
    const body = JSON.stringify({ data: 'e'.repeat(3 * MiB) });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.pause();
    socket.write(
      `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    for (let tries = 0; tries < 100 && (await metric(origin, '{action="connection_reset"}')) === 0; tries += 1) {
      await sleep(20);
    }
    assert.equal(await metric(origin, '{action="connection_reset"}'), 1);
    // Read at last, the connection was reset: the answer never whole.
    let received = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.resume();
    await closed;
    assert.ok(received < body.length, `${received} bytes received`);
    const hello = await get(`${origin}/api/hello`);
    assert.equal(hello.status, 200);
  });

  it('resets an HTTP/1.1 connection whose body, larger than the budget, never ends', async () => {
    const { app, origin, port } = await listening({ memoryBudgetBytes: MiB, bodyLimit: 4 * MiB });
    closers.push(() => app.close());
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${3 * MiB}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(3 * MiB - 1, ' '));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await Promise.race([closed, sleep(3000)]);
    assert.equal(socket.destroyed, true, 'the connection holding the body was reset');
    assert.equal(await metric(origin, '{action="connection_reset"}'), 1);
  });

  it('resets an HTTP/2 session whose bodies, together larger than the budget, never end', async () => {
    const { app, origin } = await listening({ memoryBudgetBytes: MiB, http2: true });
    closers.push(() => app.close());
    const session = await h2(origin);
    const closed = new Promise((resolve) => session.once('close', resolve));
    // 30 bodies of 60 KB each, within their streams' windows, all of them read: 1.8 MB in all.
    for (let i = 0; i < 30; i += 1) {
      const stream = session.request(
        { ':method': 'POST', ':path': '/api/echo', 'content-type': 'application/json', 'content-length': String(MiB) },
        { endStream: false },
      );
      stream.on('error', () => {});
      stream.write(Buffer.alloc(60_000, ' '));
    }
    await Promise.race([closed, sleep(3000)]);
    assert.equal(session.destroyed, true, 'the session holding the bodies was reset');
    assert.equal(await metric(origin, '{action="connection_reset"}'), 1);
  });

  it('never sheds a WebSocket that reads its echoes, however much it has sent in all', async () => {
    const { app, origin, port } = await listening({ memoryBudgetBytes: MiB });
    closers.push(() => app.close());
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/echo/websocket`);
    await new Promise((resolve) => ws.once('open', resolve));
    let echoed = 0;
    ws.on('message', (data: Buffer) => {
      echoed += data.length;
    });
    const until = async (bytes: number) => {
      for (let waited = 0; echoed < bytes && waited < 5000; waited += 5) await sleep(5);
      assert.equal(echoed, bytes, `echoes of ${bytes} bytes; closed ${ws.readyState !== WebSocket.OPEN}`);
    };
    for (let i = 1; i <= 40; i += 1) {
      ws.send(Buffer.alloc(128 * 1024));
      // In step with its echoes, as a client that reads does.
      await until(i * 128 * 1024);
    }
    await sleep(200);
    assert.equal(ws.readyState, WebSocket.OPEN);
    assert.equal(await metric(origin, '{action="websocket_closed"}'), 0);
    ws.close();
  });

  it('resets the HTTP/2 streams whose answers wait for a window that never opens (RST_STREAM CANCEL)', async () => {
    const { app, origin, port } = await listening({ memoryBudgetBytes: MiB, http2: true });
    closers.push(() => app.close());
    const raw = await RawH2.open(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    try {
      // Each answer is some 70 KiB, none of which may go out: 30 of them are twice the budget.
      const requests = Array.from({ length: 30 }, (_, i) => headersFrame(2 * i + 1, requestFields('/openapi.json')));
      await raw.write(Buffer.concat(requests));
      for (let tries = 0; tries < 100 && (await metric(origin, '{action="stream_reset"}')) === 0; tries += 1) {
        await sleep(20);
      }
      assert.ok((await metric(origin, '{action="stream_reset"}')) >= 1);
      const resets = raw.frames.filter((f) => f.type === FrameType.RST_STREAM);
      assert.ok(resets.length >= 1);
      for (const reset of resets) assert.equal(reset.payload.readUInt32BE(0), ErrorCode.CANCEL);
    } finally {
      raw.destroy();
    }
  });

  it('counts an HTTP/2 answer waiting for a window as its state too: streams of small answers fill the budget', async () => {
    const { app, origin, port } = await listening({ memoryBudgetBytes: MiB, http2: true });
    closers.push(() => app.close());
    const raw = await RawH2.open(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    try {
      // 20 event streams whose first events, some 100 bytes each, may not go out: 2 KiB unsent in
      // all, but 20 streams of 64 KiB and their bytes, 1.25 MiB.
      const events = requestFields('/api/events?count=2&interval_ms=0', 'GET', [['accept', 'text/event-stream']]);
      await raw.write(Buffer.concat(Array.from({ length: 20 }, (_, i) => headersFrame(2 * i + 1, events))));
      for (let tries = 0; tries < 100 && (await metric(origin, '{action="stream_reset"}')) === 0; tries += 1) {
        await sleep(20);
      }
      const shed = await metric(origin, '{action="stream_reset"}');
      const refused = await metric(origin, '{action="stream_refused"}');
      assert.ok(shed >= 1, `${shed} reset, ${refused} refused`);
      const resets = raw.frames.filter((f) => f.type === FrameType.RST_STREAM);
      assert.equal(resets.length, shed);
      for (const reset of resets) assert.equal(reset.payload.readUInt32BE(0), ErrorCode.CANCEL);
      // What is left is under the high-water mark: some 12 streams of 64 KiB and their bytes.
      const held = samples(await (await request(`${origin}/metrics`)).body.text(), 'memory_held_bytes').get('') ?? 0;
      assert.ok(held <= 0.8 * MiB && held >= 10 * 64 * 1024, `${held} bytes held`);
    } finally {
      raw.destroy();
    }
  });
});
