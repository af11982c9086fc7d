import assert from 'node:assert/strict';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import zlib from 'node:zlib';
import Fastify from 'fastify';
import { CODINGS } from '../../src/lib/content-coding.js';
import { jsonBodyPlugin } from '../../src/plugins/json-body.js';
import { Flag, FrameType, frame, headersFrame, RawH2, requestFields } from '../h2-frames.js';
import {
  assertEnvelope,
  type Client,
  listening,
  parseRawResponse,
  rawExchange,
  sendHttp2,
  sendTo,
  type TestRequest,
  type TestResponse,
  transports,
} from '../helpers.js';
import { assertStopsCleanly, rssMiB, startServer } from '../server-process.js';

const zstdCompressSync = (zlib as unknown as { zstdCompressSync?: (body: Buffer) => Buffer }).zstdCompressSync;

/** Each coding's encoder, as a client applies it. */
const ENCODERS: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: (body) => zlib.gzipSync(body),
  'x-gzip': (body) => zlib.gzipSync(body),
  deflate: (body) => zlib.deflateSync(body),
  br: (body) => zlib.brotliCompressSync(body),
  zstd: (body) => (zstdCompressSync as (body: Buffer) => Buffer)(body),
  identity: (body) => body,
};

/** A body in the codings a Content-Encoding lists, applied in its order. */
function encoded(text: string, contentEncoding: string): Buffer {
  return contentEncoding
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '')
    .reduce<Buffer>((body, coding) => (ENCODERS[coding] as (body: Buffer) => Buffer)(body), Buffer.from(text));
}

const DECODED = CODINGS.join(', ');

/** Big numbers, key order, every kind of Unicode, a key that is special in JavaScript. */
const EXACT = '{"z":1,"a":12345678901234567890,"d":0.1000000000000000000001,"u":"é😀\\u0000\\ud800","__proto__":[]}';

function assertEchoed(res: TestResponse, text: string): void {
  assert.equal(res.status, 200, res.text);
  assert.ok(res.text.startsWith(`{"received":${text},"echo":true,"timestamp":"`), res.text.slice(0, 300));
}

for (const [transport, connect] of transports) {
  describe(`request bodies in content codings (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ bodyLimit: 64 * 1024 });
    });
    after(() => client.close());

    function echo(body: Buffer | string, contentEncoding: string, headers: Record<string, string> = {}) {
      const request: TestRequest = {
        method: 'POST',
        path: '/api/echo',
        headers: { 'content-type': 'application/json', 'content-encoding': contentEncoding, ...headers },
        body,
      };
      return client.send(request);
    }

    for (const contentEncoding of [
      ...CODINGS,
      'x-gzip',
      'GZip',
      'identity',
      'gzip, br',
      'deflate, identity, gzip',
      CODINGS.slice(0, 3).join(','),
      // Empty list elements are no elements (RFC 9110, 5.6.1).
      'gzip,,br',
      'gzip,,',
      ', gzip',
      ' , ',
    ]) {
      it(`decodes Content-Encoding: ${contentEncoding}, the bytes exact`, async () => {
        assertEchoed(await echo(encoded(EXACT, contentEncoding), contentEncoding), EXACT);
      });
    }

    it('decodes a body just under the limit, and answers it coded as asked', async () => {
      const text = `{"s":"${'x'.repeat(64 * 1024 - 9)}"}`;
      const res = await echo(encoded(text, 'gzip'), 'gzip', { 'accept-encoding': 'br' });
      assertEchoed(res, text);
      assert.equal(res.headers['content-encoding'], 'br');
    });

    it('refuses a body that decodes past the limit with 413, though it came in far fewer bytes', async () => {
      const text = `{"s":"${'x'.repeat(64 * 1024)}"}`;
      const body = encoded(text, 'gzip');
      assert.ok(body.length < 1024);
      const error = assertEnvelope(await echo(body, 'gzip'), 413, 'PAYLOAD_TOO_LARGE');
      assert.equal(error.message, 'The request body is larger than the limit of 65536 bytes.');
    });

    for (const contentEncoding of ['compress', 'gzip, compress', 'sdch', 'gzip;q=1', ',compress,']) {
      it(`refuses Content-Encoding: ${contentEncoding} with 415, listing the codings decoded`, async () => {
        const res = await echo(encoded('{}', 'gzip'), contentEncoding);
        const error = assertEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
        assert.match(error.message, new RegExp(`is not one of ${DECODED}\\.$`));
        assert.equal(res.headers['accept-encoding'], DECODED);
      });
    }

    it('refuses more than 3 codings with 415', async () => {
      const res = await echo(encoded('{}', 'gzip, gzip, gzip, gzip'), 'gzip, gzip, gzip, gzip');
      const error = assertEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(
        error.message,
        'The content coding gzip, gzip, gzip, gzip is not supported: at most 3 codings are decoded.',
      );
      assert.equal(res.headers['accept-encoding'], DECODED);
    });

    const full = zlib.gzipSync('{"a":1}');
    for (const [label, body, contentEncoding] of [
      ['plain JSON said to be gzip', Buffer.from('{"a":1}'), 'gzip'],
      ['a gzip stream cut short', full.subarray(0, full.length - 6), 'gzip'],
      ['gzip said to be deflate', full, 'deflate'],
      ['plain JSON said to be br', Buffer.from('{"a":1}'), 'br'],
      ['an empty body said to be gzip', Buffer.alloc(0), 'gzip'],
      ['gzip whose outer coding, br, is missing', full, 'gzip, br'],
    ] as const) {
      it(`refuses ${label} with 400 naming body`, async () => {
        const coding = contentEncoding.split(', ').at(-1);
        assertEnvelope(await echo(body, contentEncoding), 400, 'VALIDATION_ERROR', [
          { field: 'body', message: `is not valid ${coding} data`, value: null },
        ]);
      });
    }

    it('decodes a profile write, and the profile is as sent', async () => {
      const text = '{"name":"Zoë 😀","bio":"x"}';
      const res = await client.send({
        method: 'PATCH',
        path: '/api/profile',
        headers: { 'content-type': 'application/merge-patch+json', 'content-encoding': 'br' },
        body: encoded(text, 'br'),
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json(), { name: 'Zoë 😀', email: null, bio: 'x' });
    });
  });
}

/** 200 MiB of zeros in gzip: about 200 KB, made a MiB at a time. */
async function gzipBomb(): Promise<Buffer> {
  const zeros = Buffer.alloc(1024 * 1024);
  const chunks: Buffer[] = [];
  await pipeline(
    Readable.from(
      (function* () {
        for (let i = 0; i < 200; i++) yield zeros;
      })(),
    ),
    zlib.createGzip({ level: 9 }),
    async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) chunks.push(chunk);
    },
  );
  return Buffer.concat(chunks);
}

describe('a gzip bomb against the built service', () => {
  let bomb: Buffer;
  before(async () => {
    bomb = await gzipBomb();
  });
  const headers = { 'content-type': 'application/json', 'content-encoding': 'gzip' };

  for (const protocol of ['HTTP/1.1', 'h2c'] as const) {
    it(`over ${protocol}: 200 MiB in about 200 KiB refused at BODY_LIMIT within 2 s, memory bounded`, {
      timeout: 60_000,
    }, async (t) => {
      const server = await startServer({ RATE_LIMIT_MAX: '0', ...(protocol === 'h2c' && { HTTP2: 'true' }) });
      const session = protocol === 'h2c' ? connectHttp2(`http://127.0.0.1:${server.port}`) : null;
      try {
        const pid = server.child.pid ?? 0;
        const send = (request: TestRequest) =>
          session === null ? sendTo(`http://127.0.0.1:${server.port}`, request) : sendHttp2(session, request);
        // Warmed up: the body path, the decoder and the error path have each run once.
        const small = zlib.gzipSync('{"a":1}');
        assert.equal((await send({ method: 'POST', path: '/api/echo', headers, body: small })).status, 200);
        assert.equal((await send({ method: 'POST', path: '/api/echo', headers, body: 'x' })).status, 400);
        const peakBefore = await rssMiB(pid, 'VmHWM');
        const rssBefore = await rssMiB(pid);
        const startedAt = performance.now();
        const res = await send({ method: 'POST', path: '/api/echo', headers, body: bomb });
        const tookMs = performance.now() - startedAt;
        assertEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
        assert.ok(tookMs < 2000, `refused in ${Math.round(tookMs)} ms`);
        const rssGrowth = (await rssMiB(pid)) - rssBefore;
        const peakGrowth = (await rssMiB(pid, 'VmHWM')) - peakBefore;
        t.diagnostic(
          `${bomb.length} bytes refused in ${Math.round(tookMs)} ms; memory grew by ${rssGrowth.toFixed(1)} MiB, its peak by ${peakGrowth.toFixed(1)} MiB`,
        );
        assert.ok(
          rssGrowth < 40 && peakGrowth < 40,
          `grew by ${rssGrowth.toFixed(1)} MiB, peak by ${peakGrowth.toFixed(1)}`,
        );
        assert.equal((await send({ method: 'POST', path: '/api/echo', headers, body: small })).status, 200);
      } finally {
        session?.close();
        await assertStopsCleanly(server);
      }
    });
  }
});

describe('Content-Encoding given more than once', () => {
  const text = '{"n":12345678901234567890}';
  const body = encoded(text, 'gzip, br');

  it('is one list over HTTP/1.1: gzip then br, decoded br first', async () => {
    const { app, port } = await listening({ logLevel: 'silent' });
    try {
      const head = [
        'POST /api/echo HTTP/1.1',
        'Host: localhost',
        'Content-Type: application/json',
        'Content-Encoding: gzip',
        'Content-Encoding: br',
        `Content-Length: ${body.length}`,
        'Connection: close',
        '',
        '',
      ].join('\r\n');
      const answer = await rawExchange(port, Buffer.concat([Buffer.from(head), body]));
      assert.match(answer, /^HTTP\/1\.1 200 /);
      assert.ok(answer.includes(`{"received":${text},"echo":true`), answer);
    } finally {
      await app.close();
    }
  });

  it('over HTTP/2, where Node keeps the first of a repeated Content-Encoding: refused as a corrupt body, never a crash', async () => {
    const { app, port } = await listening({ logLevel: 'silent', http2: true });
    const raw = await RawH2.open(port);
    try {
      const fields = requestFields('/api/echo', 'POST', [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
        ['content-encoding', 'br'],
      ]);
      await raw.write(Buffer.concat([headersFrame(1, fields, false), frame(FrameType.DATA, Flag.END_STREAM, 1, body)]));
      const data = await raw.waitFor((received) => received.type === FrameType.DATA && received.streamId === 1);
      const answer = JSON.parse(data?.payload.toString('utf8') ?? '{}');
      assert.deepEqual(answer.error?.details, [{ field: 'body', message: 'is not valid gzip data', value: null }]);
    } finally {
      raw.destroy();
      await app.close();
    }
  });
});

describe('an answer on its way out', () => {
  it('holds neither the parsed body nor its text: the hooks after the route see them let go', async () => {
    const app = Fastify();
    await app.register(jsonBodyPlugin);
    const seen: unknown[] = [];
    app.addHook('onSend', (request, _reply, payload, done) => {
      seen.push({ body: request.body, rawJson: request.rawJson });
      done(null, payload);
    });
    app.post('/raw', { config: { rawJson: true } }, async (request) => ({
      text: request.rawJson,
      n: (request.body as { n: number }).n,
    }));
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/raw',
        headers: { 'content-type': 'application/json' },
        payload: '{"n": 1}',
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { text: '{"n": 1}', n: 1 });
      assert.deepEqual(seen, [{ body: undefined, rawJson: null }]);
    } finally {
      await app.close();
    }
  });
});

describe('coded bodies read whole, then decoded in turn', () => {
  it('refuses a chunked coded body with 413 as soon as its coded bytes pass the limit, before decoding any', async () => {
    const { app, port } = await listening({ logLevel: 'silent', bodyLimit: 64 * 1024 });
    try {
      // Not gzip at all: decoded, it would be a 400; it is never decoded.
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const chunks = Array.from({ length: 6 }, () =>
        Buffer.concat([Buffer.from('4000\r\n'), chunk, Buffer.from('\r\n')]),
      );
      const head = [
        'POST /api/echo HTTP/1.1',
        'Host: localhost',
        'Content-Type: application/json',
        'Content-Encoding: gzip',
        'Transfer-Encoding: chunked',
        'Connection: close',
        '',
        '',
      ].join('\r\n');
      const answer = parseRawResponse(
        await rawExchange(port, Buffer.concat([Buffer.from(head), ...chunks, Buffer.from('0\r\n\r\n')])),
      );
      const error = assertEnvelope(answer, 413, 'PAYLOAD_TOO_LARGE');
      assert.equal(error.message, 'The request body is larger than the limit of 65536 bytes.');
    } finally {
      await app.close();
    }
  });

  it('serves a coded body at once while more clients than decode at once send theirs slowly', async () => {
    const { app, port, origin } = await listening({ logLevel: 'silent' });
    const slow: Socket[] = [];
    try {
      const text = '{"n":1}';
      const body = encoded(text, 'gzip');
      const head = `POST /api/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`;
      for (let i = 0; i < 8; i += 1) {
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => {});
        socket.write(Buffer.concat([Buffer.from(head), body.subarray(0, 5)]));
        slow.push(socket);
      }
      await sleep(100);
      const started = performance.now();
      const res = await fetch(`${origin}/api/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body,
      });
      assert.equal(res.status, 200);
      assert.ok((await res.text()).startsWith(`{"received":${text},`));
      // A turn held by a slow sender would hold this one for the request timeout (30 s).
      assert.ok(performance.now() - started < 5000);
    } finally {
      for (const socket of slow) socket.destroy();
      await app.close();
    }
  });
});
