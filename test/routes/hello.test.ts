import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, assertLocalNow, type Client, transports } from '../helpers.js';

for (const [transport, connect] of transports) {
  describe(`GET /api/hello (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('answers the fixed message with the local date-time', async () => {
      const res = await client.send({ path: '/api/hello' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      const body = res.json();
      assert.deepEqual(Object.keys(body), ['message', 'timestamp']);
      assert.equal(body.message, 'Hello, World!');
      assertLocalNow(body.timestamp);
    });

    it('tolerates a trailing slash', async () => {
      const res = await client.send({ path: '/api/hello/' });
      assert.equal(res.status, 200);
      assert.equal(res.json().message, 'Hello, World!');
    });

    it('answers HEAD with the headers of GET and no body', async () => {
      const res = await client.send({ method: 'HEAD', path: '/api/hello' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(res.text, '');
    });

    it('ignores unknown query parameters', async () => {
      const res = await client.send({ path: '/api/hello?x=1&x=2' });
      assert.equal(res.status, 200);
    });
  });

  describe(`GET /api/hello/{name} (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    const names: [string, string][] = [
      ['ASCII', 'Ada'],
      ['Latin with accents', 'Wörld Ünïcödé'],
      ['CJK', '世界'],
      ['right-to-left', 'שלום'],
      ['emoji outside the BMP', '👩🏽‍💻🎉'],
      ['combining marks', 'e\u0301'],
      ['spaces and punctuation', 'Ada Lovelace & co. (1815)'],
      ['an encoded slash', 'a/b'],
      ['a plus sign, which is not a space in a path', 'a+b'],
      ['quotes and backslashes', '"\\\''],
      ['percent signs', '100%'],
      ['a long name', 'x'.repeat(4000)],
    ];
    for (const [label, name] of names) {
      it(`greets ${label} exactly`, async () => {
        const res = await client.send({ path: `/api/hello/${encodeURIComponent(name)}` });
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), { greeting: `Hello, ${name}!` });
      });
    }

    it('reads a name with a trailing slash as the name', async () => {
      const res = await client.send({ path: '/api/hello/Ada/' });
      assert.deepEqual(res.json(), { greeting: 'Hello, Ada!' });
    });

    it('rejects a path that is not valid percent-encoded UTF-8', async () => {
      for (const path of ['/api/hello/%E0%A4%A', '/api/hello/%ZZ', '/api/hello/%FF']) {
        const res = await client.send({ path });
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [
          { field: 'path', message: 'must be valid percent-encoded UTF-8', value: path },
        ]);
      }
    });

    it('answers an empty name (/api/hello//) with a 400 naming it', async () => {
      for (const path of ['/api/hello//', '/api/v1/hello//']) {
        const res = await client.send({ path });
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'name', message: 'must not be empty', value: '' }]);
      }
    });

    it('answers 404 for a deeper path', async () => {
      const res = await client.send({ path: '/api/hello/a/b' });
      assertEnvelope(res, 404, 'NOT_FOUND');
    });
  });
}
