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
import { assertStopsCleanly, cpuSeconds, type RunningServer, rssMiB, startServer } from '../server-process.js';

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

const ZSTD = CODINGS.includes('zstd') ? false : 'this runtime has no zstd';

/**
 * A zstd frame held in one raw block, with no content size, the window its descriptor byte gives
 * (RFC 8878, 3.1.1.1.2): `0x68` is 8 MiB, `0x70` 16 MiB.
 */
function zstdFrame(content: Buffer, windowDescriptor = 0x68): Buffer {
  const blockHeader = Buffer.alloc(3);
  // The last block (bit 0), raw (type 0), of the content's size.
  blockHeader.writeUIntLE((content.length << 3) | 1, 0, 3);
  return Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, windowDescriptor]), blockHeader, content]);
}

/** A skippable zstd frame (RFC 8878, 3.1.2) holding `content`, which is no part of the body. */
function skippableFrame(content: string): Buffer {
  const header = Buffer.from([0x5a, 0x2a, 0x4d, 0x18, 0, 0, 0, 0]);
  header.writeUInt32LE(content.length, 4);
  return Buffer.concat([header, Buffer.from(content)]);
}

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

    it('decodes gzip of several members, one after another', async () => {
      const members = ['{"a":', '[1,', '2]}'].map((part) => zlib.gzipSync(part));
      assertEchoed(await echo(Buffer.concat(members), 'gzip'), '{"a":[1,2]}');
    });

    for (const coding of CODINGS) {
      for (const [label, after] of [
        ['bytes of no stream', Buffer.from('xyz')],
        ['zeros', Buffer.alloc(4)],
      ] as const) {
        it(`refuses ${coding} followed by ${label} with 400 naming body`, async () => {
          const body = Buffer.concat([encoded('{"a":1}', coding), after]);
          assertEnvelope(await echo(body, coding), 400, 'VALIDATION_ERROR', [
            { field: 'body', message: `is not valid ${coding} data`, value: null },
          ]);
        });
      }

      it(`refuses ${coding} cut short, or followed by bytes of no stream inside another coding, with 400 naming it`, async () => {
        const whole = encoded(EXACT, coding);
        assertEnvelope(await echo(whole.subarray(0, whole.length - 1), coding), 400, 'VALIDATION_ERROR', [
          { field: 'body', message: `is not valid ${coding} data`, value: null },
        ]);
        const inner = zlib.gzipSync(Buffer.concat([whole, Buffer.from('xyz')]));
        assertEnvelope(await echo(inner, `${coding}, gzip`), 400, 'VALIDATION_ERROR', [
          { field: 'body', message: `is not valid ${coding} data`, value: null },
        ]);
      });
    }

    describe('zstd frames', { skip: ZSTD }, () => {
      const zstdOf = (text: string) => (ENCODERS.zstd as (body: Buffer) => Buffer)(Buffer.from(text));

      it('decodes every frame, one after another, and skips skippable frames wherever they are', async () => {
        const body = Buffer.concat([
          skippableFrame('not the body'),
          zstdOf('{"a":'),
          skippableFrame(''),
          zstdFrame(Buffer.from('[1,')),
          zstdOf('2]}'),
          skippableFrame('nor this'),
        ]);
        assertEchoed(await echo(body, 'zstd'), '{"a":[1,2]}');
        assertEchoed(await echo(zlib.gzipSync(body), 'zstd, gzip'), '{"a":[1,2]}');
      });

      it('decodes 64 frames, and refuses 65 with 415', async () => {
        const parts = ['{"a":[', ...Array.from({ length: 62 }, () => '1,'), '1]}'];
        const frames = parts.map((part) => zstdFrame(Buffer.from(part)));
        assert.equal(frames.length, 64);
        const text = parts.join('');
        assertEchoed(await echo(Buffer.concat(frames), 'zstd'), text);
        const res = await echo(Buffer.concat([...frames, zstdFrame(Buffer.from(' '))]), 'zstd');
        const error = assertEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
        assert.equal(error.message, 'The content coding zstd is not supported: at most 64 zstd frames are decoded.');
        assert.equal(res.headers['accept-encoding'], DECODED);
      });

      it('decodes a frame whose window is 8 MiB, and refuses one of 16 MiB with 400 naming body', async () => {
        assertEchoed(await echo(zstdFrame(Buffer.from('{"a":1}'), 0x68), 'zstd'), '{"a":1}');
        assertEnvelope(await echo(zstdFrame(Buffer.from('{"a":1}'), 0x70), 'zstd'), 400, 'VALIDATION_ERROR', [
          { field: 'body', message: 'is not valid zstd data', value: null },
        ]);
      });

      for (const [label, body] of [
        ['a frame cut inside its header', zstdFrame(Buffer.from('{"a":1}')).subarray(0, 5)],
        ['only the start of a frame', zstdFrame(Buffer.from('{"a":1}')).subarray(0, 12)],
        ['a skippable frame cut short', Buffer.concat([zstdOf('{"a":1}'), skippableFrame('abc').subarray(0, 9)])],
        ['an empty body', Buffer.alloc(0)],
      ] as const) {
        it(`refuses ${label} with 400 naming body`, async () => {
          assertEnvelope(await echo(body, 'zstd'), 400, 'VALIDATION_ERROR', [
            { field: 'body', message: 'is not valid zstd data', value: null },
          ]);
        });
      }
    });

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

/** A gzip member of `mib` MiB of empty stored blocks (RFC 1951, 3.2.4): it decodes to nothing. */
function* emptyStoredBlocks(mib: number): Generator<Buffer> {
  yield Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  // Not the last block, stored, of length 0 (and its complement).
  const blocks = Buffer.alloc(5 * 209_715).fill(Buffer.from([0, 0, 0, 0xff, 0xff]));
  for (let i = 0; i < mib; i += 1) yield blocks;
  // The last block, fixed and empty; the CRC-32 and size of nothing.
  yield Buffer.from([3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
}

/** A body in `gzip, br` of a few hundred bytes: brotli decodes it to `mib` MiB of gzip, which decodes to nothing. */
async function stackedBomb(mib: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(
    Readable.from(emptyStoredBlocks(mib)),
    zlib.createBrotliCompress({
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5, [zlib.constants.BROTLI_PARAM_LGWIN]: 24 },
    }),
    async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) chunks.push(chunk);
    },
  );
  return Buffer.concat(chunks);
}

/**
 * A gzip member of `count` empty blocks of dynamic Huffman codes (RFC 1951, 3.2.7), 92 bits each,
 * each of which has the decoder build its tables for nothing: of the bodies tried, the one that
 * costs the most to decode per byte.
 */
function emptyDynamicBlocks(count: number): Buffer {
  const bits: number[] = [];
  /** A field, its least significant bit first. */
  const field = (value: number, length: number) => {
    for (let i = 0; i < length; i += 1) bits.push((value >> i) & 1);
  };
  /** A Huffman code, its most significant bit first. */
  const code = (value: number, length: number) => {
    for (let i = length - 1; i >= 0; i -= 1) bits.push((value >> i) & 1);
  };
  // The lengths of the code-length code, in their order: 18 as '0', 0 as '10', 1 as '11'.
  const codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1];
  for (let block = 1; block <= count; block += 1) {
    // Last or not, dynamic; 257 literal/length codes, 1 distance code, 18 code-length codes.
    field(block === count ? 1 : 0, 1);
    field(2, 2);
    field(0, 5);
    field(0, 5);
    field(18 - 4, 4);
    for (const symbol of codeLengthOrder) field(symbol === 18 ? 1 : symbol <= 1 ? 2 : 0, 3);
    // Literals 0-255 unused (18: 138 zeros, then 118), end of block of length 1, no distance.
    code(0, 1);
    field(138 - 11, 7);
    code(0, 1);
    field(118 - 11, 7);
    code(3, 2);
    code(2, 2);
    // The block's one symbol: its end.
    code(0, 1);
  }
  const deflated = Buffer.alloc(Math.ceil(bits.length / 8));
  bits.forEach((bit, i) => {
    deflated[i >> 3] = (deflated[i >> 3] as number) | (bit << (i & 7));
  });
  return Buffer.concat([
    Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]),
    deflated,
    Buffer.from([0, 0, 0, 0, 0, 0, 0, 0]),
  ]);
}

/** Sends a coded body to `port` over a connection of its own, and closes that connection after `ms`. */
async function sendAndLeave(port: number, body: Buffer, contentEncoding: string, ms: number): Promise<void> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(
    `POST /api/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Encoding: ${contentEncoding}\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  socket.write(body);
  await sleep(ms);
  socket.destroy();
}

/** Runs `check` against the built service, the rate limit off and `env` set, then stops it cleanly. */
async function onBuiltService(env: Record<string, string>, check: (server: RunningServer) => Promise<void>) {
  const server = await startServer({ RATE_LIMIT_MAX: '0', ...env });
  try {
    await check(server);
  } finally {
    await assertStopsCleanly(server);
  }
}

/** The seconds of CPU the service spends while `during` runs. */
async function cpuDuring(server: RunningServer, during: () => Promise<unknown>): Promise<number> {
  const pid = server.child.pid ?? 0;
  const before = await cpuSeconds(pid);
  await during();
  return (await cpuSeconds(pid)) - before;
}

/** POST /api/echo to the built service, with these headers after its JSON Content-Type. */
function postEcho(server: RunningServer, body: Buffer, headers: Record<string, string>) {
  return sendTo(`http://127.0.0.1:${server.port}`, {
    method: 'POST',
    path: '/api/echo',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
}

describe('stacked codings against the built service', () => {
  const stacked = { 'content-encoding': 'gzip, br' };
  const small = encoded('{"a":1}', 'gzip, br');
  let bomb256: Buffer;
  let bomb1024: Buffer;
  before(async () => {
    [bomb256, bomb1024] = await Promise.all([stackedBomb(256), stackedBomb(1024)]);
  });
  /** Just under 1 MiB of gzip that decodes to nothing, in br, and that in gzip: each coding decodes to under the limit. */
  const costliest = () => zlib.gzipSync(zlib.brotliCompressSync(emptyDynamicBlocks(90_000)));
  const costliestCoding = { 'content-encoding': 'gzip, br, gzip' };

  it('a body of a few hundred bytes whose br layer decodes to 256 MiB: 413 at BODY_LIMIT, under 0.5 s of CPU', {
    timeout: 60_000,
  }, async (t) => {
    await onBuiltService({}, async (server) => {
      assert.equal((await postEcho(server, small, stacked)).status, 200);
      const cpu = await cpuDuring(server, async () =>
        assertEnvelope(await postEcho(server, bomb256, stacked), 413, 'PAYLOAD_TOO_LARGE'),
      );
      t.diagnostic(`${bomb256.length} bytes refused for ${cpu.toFixed(2)} s of CPU`);
      assert.ok(cpu < 0.5, `${cpu.toFixed(2)} s of CPU`);
      assert.equal((await postEcho(server, small, stacked)).status, 200);
    });
  });

  it('the costliest body found under the default limit costs under 0.25 s of CPU', {
    timeout: 60_000,
  }, async (t) => {
    await onBuiltService({}, async (server) => {
      assert.ok(emptyDynamicBlocks(90_000).length < 1024 * 1024);
      const body = costliest();
      await postEcho(server, body, costliestCoding);
      const costs: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        // No body at all once decoded: the schema's 400.
        const cost = await cpuDuring(server, async () =>
          assertEnvelope(await postEcho(server, body, costliestCoding), 400, 'VALIDATION_ERROR', [
            { field: 'body', message: 'must be a JSON object', value: null },
          ]),
        );
        costs.push(cost);
      }
      const most = Math.max(...costs);
      t.diagnostic(`${body.length} bytes: ${costs.map((cost) => cost.toFixed(2)).join(', ')} s of CPU`);
      assert.ok(most < 0.25, `${most.toFixed(2)} s of CPU`);
    });
  });

  it("one client's many costly bodies wait behind another client's one: the turns to decode go a client at a time", {
    timeout: 120_000,
  }, async (t) => {
    await onBuiltService({ TRUST_PROXY: 'true' }, async (server) => {
      const body = costliest();
      const flood = 200;
      let answered = 0;
      const attack = Array.from({ length: flood }, () =>
        postEcho(server, body, { ...costliestCoding, 'x-forwarded-for': '192.0.2.1' }).then((res) => {
          answered += 1;
          return res.status;
        }),
      );
      // Every body of the flood has come (each a few hundred bytes) and waits its turn.
      await sleep(500);
      const victim = await postEcho(server, zlib.gzipSync('{"a":1}'), {
        'content-encoding': 'gzip',
        'x-forwarded-for': '192.0.2.2',
      });
      const answeredBefore = answered;
      assert.equal(victim.status, 200, victim.text);
      assert.deepEqual(victim.json().received, { a: 1 });
      t.diagnostic(`the other client answered with ${answeredBefore} of the flood's ${flood} bodies answered`);
      assert.ok(answeredBefore < flood / 2, `${answeredBefore} of ${flood} answered first`);
      // The flood's bodies decode to nothing: the schema's 400, each.
      assert.deepEqual(new Set(await Promise.all(attack)), new Set([400]));
    });
  });

  it('three such bodies whose br layer decodes to 1 GiB, their clients leaving after 300 ms: under 0.3 s of CPU in the next 3 s', {
    timeout: 60_000,
  }, async (t) => {
    await onBuiltService({}, async (server) => {
      await Promise.all([1, 2, 3].map(() => sendAndLeave(server.port, bomb1024, 'gzip, br', 300)));
      const cpu = await cpuDuring(server, () => sleep(3000));
      t.diagnostic(`3 × ${bomb1024.length} bytes: ${cpu.toFixed(2)} s of CPU in the 3 s after their clients left`);
      assert.ok(cpu < 0.3, `${cpu.toFixed(2)} s of CPU`);
    });
  });

  it('a client that leaves stops the decoding of its body, however much the limit lets it decode', {
    timeout: 60_000,
  }, async (t) => {
    // A limit of 512 MiB lets the br layer decode 500 MiB, for a second or more.
    await onBuiltService({ BODY_LIMIT: String(512 * 1024 * 1024) }, async (server) => {
      await sendAndLeave(server.port, await stackedBomb(500), 'gzip, br', 300);
      const cpu = await cpuDuring(server, () => sleep(3000));
      t.diagnostic(`${cpu.toFixed(2)} s of CPU in the 3 s after the client left`);
      assert.ok(cpu < 0.3, `${cpu.toFixed(2)} s of CPU`);
      assert.equal((await postEcho(server, small, stacked)).status, 200);
    });
  });
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
