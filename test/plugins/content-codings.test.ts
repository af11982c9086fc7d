import assert from 'node:assert/strict';
import { after, before, describe, it, mock } from 'node:test';
import zlib from 'node:zlib';
import { CODINGS, preferredCoding } from '../../src/lib/content-coding.js';
import { type Client, listening, sendTo, type TestResponse, transports } from '../helpers.js';

const PLAIN = { 'accept-encoding': 'identity' };

/** A coded answer: its coding named, said to vary by Accept-Encoding, its length that of the coded bytes. */
function assertCoded(res: TestResponse, coding: string): void {
  assert.equal(res.status, 200, res.text);
  assert.equal(res.headers['content-encoding'], coding);
  assert.match(String(res.headers.vary), /\bAccept-Encoding\b/);
  assert.equal(Number(res.headers['content-length']), res.bytes?.length);
}

for (const [transport, connect] of transports) {
  describe(`answers in content codings (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('sends the OpenAPI document in each coding, each decoding to the plain document', async () => {
      const plain = await client.send({ path: '/openapi.json', headers: PLAIN });
      assert.equal(plain.headers['content-encoding'], undefined);
      assert.ok(plain.text.length > 50_000);
      for (const coding of CODINGS) {
        const res = await client.send({ path: '/openapi.json', headers: { 'accept-encoding': coding } });
        assertCoded(res, coding);
        assert.ok((res.bytes?.length ?? 0) < plain.text.length / 4, `${coding}: ${res.bytes?.length} bytes`);
        assert.deepEqual(res.json(), plain.json(), coding);
      }
    });

    it('compresses the OpenAPI document once per coding: every later answer is the same bytes', async () => {
      const headers = { 'accept-encoding': 'gzip' };
      const first = await client.send({ path: '/openapi.json', headers });
      const gzip = mock.method(zlib, 'gzip');
      try {
        for (let i = 0; i < 3; i += 1) {
          const res = await client.send({ path: '/openapi.json', headers });
          assertCoded(res, 'gzip');
          assert.deepEqual(res.bytes, first.bytes);
        }
        assert.equal(gzip.mock.callCount(), 0);
      } finally {
        gzip.mock.restore();
      }
    });

    it('answers HEAD with the headers GET would send, coding and length included, and no body', async () => {
      for (const coding of CODINGS) {
        const headers = { 'accept-encoding': coding };
        const get = await client.send({ path: '/openapi.json', headers });
        const head = await client.send({ method: 'HEAD', path: '/openapi.json', headers });
        assert.equal(head.status, 200);
        assert.equal(head.text, '');
        for (const name of ['content-encoding', 'content-length', 'content-type', 'vary']) {
          assert.equal(head.headers[name], get.headers[name], `${coding}: ${name}`);
        }
      }
    });

    it('sends /metrics in gzip, as Prometheus asks', async () => {
      const res = await client.send({ path: '/metrics', headers: { 'accept-encoding': 'gzip' } });
      assertCoded(res, 'gzip');
      assert.match(res.text, /^# HELP /m);
    });

    it('sends an answer under COMPRESSION_MIN_BYTES plain, still saying it varies by Accept-Encoding', async () => {
      const res = await client.send({ path: '/api/hello', headers: { 'accept-encoding': 'gzip, br' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(res.headers.vary, 'Accept, Accept-Encoding, Origin');
      assert.equal(res.json().message, 'Hello, World!');
    });

    it('sends nothing coded to a request without Accept-Encoding', async () => {
      const res = await client.send({ path: '/openapi.json' });
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(res.headers.vary, 'Accept-Encoding, Origin');
    });

    it("says every answer it codes varies by Accept-Encoding, on the documentation page's paths too", async () => {
      const long = 'a'.repeat(2000);
      for (const path of [`/docs/${long}`, `/docs/static/${long}`, `/api/${long}`]) {
        const coded = await client.send({ path, headers: { 'accept-encoding': 'br' } });
        assert.equal(coded.status, 404, path);
        assert.equal(coded.headers['content-encoding'], 'br', path);
        assert.match(String(coded.headers.vary), /\bAccept-Encoding\b/, path);
        assert.equal(coded.json().error.code, 'NOT_FOUND');
        // The plain answer varies as much: a cache must not give it to a client that takes br.
        const plain = await client.send({ path });
        assert.equal(plain.headers['content-encoding'], undefined, path);
        assert.match(String(plain.headers.vary), /\bAccept-Encoding\b/, path);
      }
      // The page itself, under COMPRESSION_MIN_BYTES, varies by Origin alone.
      assert.equal(
        (await client.send({ path: '/docs/', headers: { 'accept-encoding': 'br' } })).headers.vary,
        'Origin',
      );
    });

    it("sends the documentation's documents, /docs/json and /docs/yaml, in each coding, HEAD alike", async () => {
      const document = (await client.send({ path: '/openapi.json', headers: PLAIN })).json();
      const yaml = await client.send({ path: '/docs/yaml', headers: PLAIN });
      assert.equal(yaml.headers['content-encoding'], undefined);
      for (const coding of CODINGS) {
        const headers = { 'accept-encoding': coding };
        const json = await client.send({ path: '/docs/json', headers });
        assertCoded(json, coding);
        assert.deepEqual(json.json(), document, coding);
        const codedYaml = await client.send({ path: '/docs/yaml', headers });
        assertCoded(codedYaml, coding);
        assert.equal(codedYaml.text, yaml.text, coding);
        const head = await client.send({ method: 'HEAD', path: '/docs/json', headers });
        assert.equal(head.headers['content-encoding'], coding);
        assert.equal(head.headers['content-length'], json.headers['content-length']);
      }
    });

    it('codes an error envelope over the threshold like any answer', async () => {
      const value = 'x'.repeat(4000);
      const res = await client.send({
        path: `/api/search?keyword=a&page=${value}`,
        headers: { 'accept-encoding': 'gzip' },
      });
      assert.equal(res.status, 400);
      assert.equal(res.headers['content-encoding'], 'gzip');
      assert.equal(res.json().error.details[0].value, value);
    });
  });
}

describe('the coding a client prefers (RFC 9110, 12.5.3)', () => {
  const first = CODINGS[0];
  const zstd = CODINGS.includes('zstd') ? 'zstd' : null;
  const cases: [string | undefined, string | null][] = [
    [undefined, null],
    ['', null],
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['deflate', 'deflate'],
    ['zstd', zstd],
    ['GZip', 'gzip'],
    ['x-gzip', 'gzip'],
    ['gzip, deflate, br', 'br'],
    ['deflate, gzip', 'gzip'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['gzip ; q=0.8, deflate;q=0.9', 'deflate'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=0', null],
    ['gzip;q=0.000', null],
    ['gzip;q=0.001, deflate;q=0.002', 'deflate'],
    ['*', first ?? null],
    ['*;q=0', null],
    ['*;q=0.5, gzip', 'gzip'],
    ['*, br;q=0', CODINGS.find((coding) => coding !== 'br') ?? null],
    ['identity', null],
    ['identity, gzip', 'gzip'],
    ['gzip;q=0.5, identity', null],
    ['gzip;q=0.5, identity;q=0.5', 'gzip'],
    ['compress, sdch', null],
    ['gzip;q=2', null],
    ['gzip;q=0.1234', null],
    ['gzip;q=abc, deflate', 'deflate'],
    ['gzip;level=9', null],
    [',,, gzip ,,', 'gzip'],
    ['gzip\u0000, br', 'br'],
  ];
  for (const [header, coding] of cases) {
    it(`${JSON.stringify(header)}: ${coding ?? 'none'}`, () => {
      assert.equal(preferredCoding(header), coding);
    });
  }

  it('reads a header repeated in a list as one list', () => {
    assert.equal(preferredCoding(['gzip;q=0.5', 'deflate']), 'deflate');
  });
});

describe('COMPRESSION and COMPRESSION_MIN_BYTES', () => {
  it('COMPRESSION=false: every answer plain, and none says it varies by Accept-Encoding', async () => {
    const [, connect] = transports[1];
    const client = await connect({ compression: false });
    try {
      for (const path of ['/openapi.json', '/api/hello', '/metrics', `/docs/${'a'.repeat(2000)}`, '/docs/json']) {
        const res = await client.send({ path, headers: { 'accept-encoding': 'gzip, br, deflate' } });
        assert.equal(res.status, path.startsWith('/docs/a') ? 404 : 200, path);
        assert.equal(res.headers['content-encoding'], undefined, path);
        assert.doesNotMatch(String(res.headers.vary), /Accept-Encoding/, path);
      }
      // The profile's 304 is still given, for the plain tag.
      const tag = String((await client.send({ path: '/api/profile' })).headers.etag);
      const res = await client.send({
        path: '/api/profile',
        headers: { 'accept-encoding': 'gzip', 'if-none-match': tag },
      });
      assert.equal(res.status, 304);
      assert.equal(res.headers.etag, tag);
    } finally {
      await client.close();
    }
  });

  it('COMPRESSION_MIN_BYTES=0: even the smallest answer is coded', async () => {
    const [, connect] = transports[1];
    const client = await connect({ compressionMinBytes: 0 });
    try {
      const res = await client.send({ path: '/api/hello', headers: { 'accept-encoding': 'gzip' } });
      assertCoded(res, 'gzip');
      assert.equal(res.json().message, 'Hello, World!');
    } finally {
      await client.close();
    }
  });

  it('never codes an event stream, whatever its size', async () => {
    const events = 'data: x\n\n'.repeat(1000);
    const { app, origin } = await listening({}, (service) => {
      service.get('/stream', (_request, reply) => reply.type('text/event-stream; charset=utf-8').send(events));
    });
    try {
      const res = await sendTo(origin, { path: '/stream', headers: { 'accept-encoding': 'gzip, br' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(res.text, events);
    } finally {
      await app.close();
    }
  });
});
