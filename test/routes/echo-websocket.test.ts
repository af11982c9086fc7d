import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { WebSocket } from 'ws';
import {
  assertEnvelope,
  http2Client,
  httpClient,
  listeningInSuite,
  parseRawResponse,
  rawExchange,
  type TestResponse,
} from '../helpers.js';
import { connectTo, type RawResponse, ResponseReader } from '../raw-http.js';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const ACCEPT = 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=';

/** A handshake's head, with `headers` over the usual ones (a value of null leaves that one out). */
function handshake(path: string, headers: Record<string, string | null> = {}): string {
  const all: Record<string, string | null> = {
    Host: 'x',
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': KEY,
    'Sec-WebSocket-Version': '13',
    ...headers,
  };
  const lines = Object.entries(all).filter((entry): entry is [string, string] => entry[1] !== null);
  return `GET ${path} HTTP/1.1\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`;
}

/** The answer to a handshake that the service refuses: it then closes the connection. */
async function refused(port: number, path: string, headers: Record<string, string | null>): Promise<TestResponse> {
  const text = await rawExchange(port, handshake(path, headers));
  assert.doesNotMatch(text, /^HTTP\/1\.1 101/, 'not switched');
  return parseRawResponse(text);
}

/** The first answer to `bytes` on a connection of their own, an interim one included, and the connection's reader. */
async function answerTo(
  port: number,
  bytes: string | Buffer,
): Promise<{ response: RawResponse; reader: ResponseReader }> {
  const socket = await connectTo(port);
  const reader = new ResponseReader(socket);
  socket.write(bytes);
  return { response: await reader.next(), reader };
}

/** A WebSocket client, open. */
async function open(url: string, options: ConstructorParameters<typeof WebSocket>[2] = {}): Promise<WebSocket> {
  const ws = new WebSocket(url, options);
  await once(ws, 'open');
  return ws;
}

/** The next message on `ws`, with whether it was binary. */
async function nextMessage(ws: WebSocket): Promise<{ data: Buffer; binary: boolean }> {
  const [data, binary] = (await once(ws, 'message')) as [Buffer, boolean];
  return { data, binary };
}

async function closed(ws: WebSocket): Promise<number> {
  if (ws.readyState === WebSocket.CLOSED) throw new Error('already closed');
  const [code] = (await once(ws, 'close')) as [number];
  return code;
}

describe('GET /api/echo/websocket', () => {
  const serve = listeningInSuite();

  it('echoes text and binary messages unchanged, same type, same bytes, under /api and /api/v1', async () => {
    const { port } = await serve();
    for (const path of ['/api/echo/websocket', '/api/v1/echo/websocket', '/api/echo/websocket/']) {
      const ws = await open(`ws://127.0.0.1:${port}${path}`);
      const text = 'Grüße, 世界 👋';
      ws.send(text);
      const echoedText = await nextMessage(ws);
      assert.deepEqual(echoedText, { data: Buffer.from(text), binary: false }, path);
      const bytes = Buffer.from([0, 1, 2, 0xfe, 0xff, 0xc3]); // not UTF-8: binary is bytes
      ws.send(bytes);
      assert.deepEqual(await nextMessage(ws), { data: bytes, binary: true }, path);
      ws.send('');
      assert.deepEqual(await nextMessage(ws), { data: Buffer.alloc(0), binary: false }, path);
      ws.close(1000);
      assert.equal(await closed(ws), 1000);
    }
  });

  it('answers pings with the same payload', async () => {
    const { port } = await serve();
    const ws = await open(`ws://127.0.0.1:${port}/api/echo/websocket`);
    ws.ping(Buffer.from('are you there'));
    const [payload] = (await once(ws, 'pong')) as [Buffer];
    assert.equal(payload.toString(), 'are you there');
    ws.close();
  });

  it('echoes a message sent in fragments, and one sent in the handshake’s packet', async () => {
    const { port } = await serve();
    const ws = await open(`ws://127.0.0.1:${port}/api/echo/websocket`);
    ws.send('one ', { fin: false });
    ws.send('two', { fin: true });
    assert.deepEqual(await nextMessage(ws), { data: Buffer.from('one two'), binary: false });
    ws.close();
    // A masked text frame "hi" right behind the handshake, before the 101 has come.
    const frame = Buffer.from([0x81, 0x82, 1, 2, 3, 4, 'h'.charCodeAt(0) ^ 1, 'i'.charCodeAt(0) ^ 2]);
    const { connect } = await import('node:net');
    const socket = connect(port, '127.0.0.1');
    socket.write(Buffer.concat([Buffer.from(handshake('/api/echo/websocket')), frame]));
    let received = Buffer.alloc(0);
    while (!received.includes(Buffer.from([0x81, 0x02, 0x68, 0x69]))) {
      const [chunk] = (await once(socket, 'data')) as [Buffer];
      received = Buffer.concat([received, chunk]);
    }
    assert.match(received.toString('latin1'), /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    assert.ok(received.toString('latin1').includes(`\r\nSec-WebSocket-Accept: ${ACCEPT}\r\n`), 'the key answered');
    socket.destroy();
  });

  it('switches with the request id, the rate limit and API-Version on the 101, and logs the handshake and the connection', async () => {
    const { port, logs } = await serve();
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/echo/websocket`, { headers: { 'X-Request-Id': 'ws-1' } });
    const upgraded = once(ws, 'upgrade');
    await once(ws, 'open');
    const [response] = (await upgraded) as [{ statusCode: number; headers: Record<string, string> }];
    assert.equal(response.statusCode, 101);
    assert.equal(response.headers['x-request-id'], 'ws-1');
    assert.equal(response.headers['api-version'], '1');
    assert.equal(response.headers['ratelimit-limit'], '1000');
    assert.equal(response.headers['ratelimit-remaining'], '999');
    assert.equal(response.headers.upgrade, 'websocket');
    assert.equal(response.headers.connection, 'Upgrade');
    ws.send('a');
    await nextMessage(ws);
    ws.send(Buffer.from('bcd'));
    await nextMessage(ws);
    ws.close(4000);
    assert.equal(await closed(ws), 4000);
    const lines = logs.lines.filter((line) => line.request_id === 'ws-1');
    while (lines.length < 2) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      lines.splice(0, lines.length, ...logs.lines.filter((line) => line.request_id === 'ws-1'));
    }
    const [handshakeLine, connectionLine] = lines;
    assert.equal(handshakeLine?.msg, 'request completed');
    assert.equal(handshakeLine?.status, 101);
    assert.equal(handshakeLine?.route, '/api/echo/websocket');
    assert.equal(connectionLine?.msg, 'websocket closed');
    assert.equal(typeof connectionLine?.duration_ms, 'number');
    assert.deepEqual(
      {
        messages_received: connectionLine?.messages_received,
        messages_sent: connectionLine?.messages_sent,
        bytes_received: connectionLine?.bytes_received,
        bytes_sent: connectionLine?.bytes_sent,
        close_code: connectionLine?.close_code,
      },
      { messages_received: 2, messages_sent: 2, bytes_received: 4, bytes_sent: 4, close_code: 4000 },
    );
  });

  it('works under CONTEXT_PATH', async () => {
    const { port } = await serve({ contextPath: '/svc' });
    const ws = await open(`ws://127.0.0.1:${port}/svc/api/v1/echo/websocket`);
    ws.send('x');
    assert.equal((await nextMessage(ws)).data.toString(), 'x');
    ws.close();
    const res = await refused(port, '/api/echo/websocket', {});
    assertEnvelope(res, 404, 'NOT_FOUND');
  });

  it('426 UPGRADE_REQUIRED with Upgrade: websocket to a request that does not ask to switch', async () => {
    const { port } = await serve();
    const client = await httpClient();
    const plain = await client.send({ path: '/api/echo/websocket' }).finally(() => client.app.close());
    assertEnvelope(plain, 426, 'UPGRADE_REQUIRED');
    assert.equal(plain.headers.upgrade, 'websocket');
    const variants: Record<string, string | null>[] = [
      { Upgrade: null, Connection: 'close' },
      { Upgrade: 'h2c' },
      { Connection: 'close' },
    ];
    for (const headers of variants) {
      const res = await refused(port, '/api/echo/websocket', headers);
      assertEnvelope(res, 426, 'UPGRADE_REQUIRED');
      assert.equal(res.headers.upgrade, 'websocket', JSON.stringify(headers));
    }
    const head = await rawExchange(port, handshake('/api/echo/websocket').replace('GET', 'HEAD'));
    assert.match(head, /^HTTP\/1\.1 426 Upgrade Required\r\n/);
  });

  it('426 UPGRADE_REQUIRED to an HTTP/1.0 handshake: HTTP/1.0 cannot switch (RFC 9110, 7.8), never a 101', async () => {
    const { port } = await serve();
    const { response, reader } = await answerTo(port, handshake('/api/echo/websocket').replace('HTTP/1.1', 'HTTP/1.0'));
    const error = assertEnvelope(response, 426, 'UPGRADE_REQUIRED');
    assert.match(error.message, /HTTP\/1\.0/);
    assert.equal(response.headers.upgrade, 'websocket');
    assert.equal(response.headers.connection, 'Upgrade, close');
    await reader.closed();
  });

  it('400 VALIDATION_ERROR to a handshake with a body, never read as WebSocket frames (RFC 9112, 6.3)', async () => {
    const { port } = await serve();
    // The body is a masked text frame "hi": switched, it would be echoed.
    const frame = Buffer.from([0x81, 0x82, 1, 2, 3, 4, 'h'.charCodeAt(0) ^ 1, 'i'.charCodeAt(0) ^ 2]);
    const head = handshake('/api/echo/websocket', { 'Content-Length': String(frame.length) });
    const { response, reader } = await answerTo(port, Buffer.concat([Buffer.from(head), frame]));
    assertEnvelope(response, 400, 'VALIDATION_ERROR', [
      { field: 'Content-Length', message: 'must be 0: a handshake has no body', value: '8' },
    ]);
    await reader.closed();
    // Content-Length: 0 is no body.
    const empty = await answerTo(port, handshake('/api/echo/websocket', { 'Content-Length': '0' }));
    assert.equal(empty.response.status, 101);
    empty.reader.socket.destroy();
  });

  it('426 over HTTP/2, without the connection fields HTTP/2 forbids: no WebSocket over HTTP/2 here', async () => {
    const client = await http2Client();
    const res = await client.send({ path: '/api/echo/websocket' }).finally(() => client.app.close());
    assertEnvelope(res, 426, 'UPGRADE_REQUIRED');
    assert.equal(res.headers.upgrade, undefined);
  });

  it('400 VALIDATION_ERROR naming a missing or bad Sec-WebSocket-Key and -Version, the version told', async () => {
    const { port } = await serve();
    const cases: [Record<string, string | null>, unknown[]][] = [
      [{ 'Sec-WebSocket-Key': null }, [{ field: 'Sec-WebSocket-Key', message: 'is required', value: null }]],
      [
        { 'Sec-WebSocket-Key': 'short' },
        [{ field: 'Sec-WebSocket-Key', message: 'must be 16 bytes in base64', value: 'short' }],
      ],
      [{ 'Sec-WebSocket-Version': null }, [{ field: 'Sec-WebSocket-Version', message: 'is required', value: null }]],
      [{ 'Sec-WebSocket-Version': '8' }, [{ field: 'Sec-WebSocket-Version', message: 'must be 13', value: '8' }]],
      [
        { 'Sec-WebSocket-Key': 'x'.repeat(24), 'Sec-WebSocket-Version': '14' },
        [
          { field: 'Sec-WebSocket-Key', message: 'must be 16 bytes in base64', value: 'x'.repeat(24) },
          { field: 'Sec-WebSocket-Version', message: 'must be 13', value: '14' },
        ],
      ],
    ];
    for (const [headers, details] of cases) {
      const res = await refused(port, '/api/echo/websocket', headers);
      assertEnvelope(res, 400, 'VALIDATION_ERROR', details);
      const versionNamed = details.some((detail) => (detail as { field: string }).field === 'Sec-WebSocket-Version');
      assert.equal(res.headers['sec-websocket-version'], versionNamed ? '13' : undefined, JSON.stringify(headers));
    }
  });

  it('400 VALIDATION_ERROR for what ws itself refuses, never its plain-text answer', async () => {
    const { port } = await serve({ wsPermessageDeflate: true });
    const protocol = await refused(port, '/api/echo/websocket', { 'Sec-WebSocket-Protocol': 'a,,b' });
    assertEnvelope(protocol, 400, 'VALIDATION_ERROR', [
      { field: 'Sec-WebSocket-Protocol', message: 'is not valid', value: 'a,,b' },
    ]);
    const extension = await refused(port, '/api/echo/websocket', {
      'Sec-WebSocket-Extensions': 'permessage-deflate; server_max_window_bits=99',
    });
    assertEnvelope(extension, 400, 'VALIDATION_ERROR', [
      {
        field: 'Sec-WebSocket-Extensions',
        message: 'is not valid',
        value: 'permessage-deflate; server_max_window_bits=99',
      },
    ]);
  });

  it('400 VALIDATION_ERROR for a malformed Sec-WebSocket-Extensions whether permessage-deflate is on or off; one it does not speak is declined', async () => {
    for (const wsPermessageDeflate of [false, true]) {
      const { port } = await serve({ wsPermessageDeflate });
      for (const value of ['permessage-deflate;', 'a b', ', permessage-deflate', 'x; y="a b"']) {
        const { response, reader } = await answerTo(
          port,
          handshake('/api/echo/websocket', { 'Sec-WebSocket-Extensions': value }),
        );
        assertEnvelope(response, 400, 'VALIDATION_ERROR', [
          { field: 'Sec-WebSocket-Extensions', message: 'is not valid', value },
        ]);
        await reader.closed();
      }
      // Well formed, of extensions it does not speak (or, deflate off, of any): switched, none named (RFC 6455, 9.1).
      for (const value of ['x-webkit-deflate-frame', 'permessage-deflate; client_max_window_bits, foo; bar="baz"']) {
        const { response, reader } = await answerTo(
          port,
          handshake('/api/echo/websocket', { 'Sec-WebSocket-Extensions': value }),
        );
        assert.equal(response.status, 101, value);
        const named = response.headers['sec-websocket-extensions'];
        if (wsPermessageDeflate && value.startsWith('permessage-deflate'))
          assert.match(named ?? '', /^permessage-deflate/);
        else assert.equal(named, undefined, value);
        reader.socket.destroy();
      }
    }
  });

  it('403 FORBIDDEN for an Origin CORS_ORIGINS does not allow; an allowed Origin or none switches', async () => {
    const { port } = await serve({ corsOrigins: ['https://app.example'] });
    const res = await refused(port, '/api/echo/websocket', { Origin: 'https://evil.example' });
    assertEnvelope(res, 403, 'FORBIDDEN', [
      { field: 'Origin', message: 'is not allowed', value: 'https://evil.example' },
    ]);
    for (const origin of ['https://app.example', undefined]) {
      const ws = await open(`ws://127.0.0.1:${port}/api/echo/websocket`, origin === undefined ? {} : { origin });
      ws.close();
    }
  });

  it('503 with Retry-After past WS_MAX_CONNECTIONS, and a closed connection frees its slot at once', async () => {
    const { port } = await serve({ wsMaxConnections: 2 });
    const url = `ws://127.0.0.1:${port}/api/echo/websocket`;
    const first = await open(url);
    const second = await open(url);
    const res = await refused(port, '/api/echo/websocket', {});
    const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
    assert.equal(res.headers['retry-after'], '1');
    assert.match(error.message, /2 WebSockets are open/);
    first.close();
    await closed(first);
    const third = await open(url);
    third.close();
    second.terminate();
  });

  it('counts the handshake against the rate limit: 429 RATE_LIMIT_EXCEEDED', async () => {
    const { port } = await serve({ rateLimitMax: 2 });
    const url = `ws://127.0.0.1:${port}/api/echo/websocket`;
    (await open(url)).close();
    (await open(url)).close();
    const res = await refused(port, '/api/echo/websocket', {});
    assertEnvelope(res, 429, 'RATE_LIMIT_EXCEEDED');
    assert.ok(Number(res.headers['retry-after']) >= 1);
    assert.equal(res.headers['ratelimit-remaining'], '0');
  });

  it('takes fault headers on the handshake: an injected abort is the envelope of its status', async () => {
    const { port } = await serve({ faultHeaders: true });
    const res = await refused(port, '/api/echo/websocket', { 'x-envoy-fault-abort-request': '503' });
    assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
    assert.equal(res.headers['x-fault-injected'], 'abort');
  });
});
