import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, LogCapture, transports } from '../helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

for (const [transport, connect] of transports) {
  describe(`X-Request-Id (${transport})`, () => {
    let client: Client;
    const logs = new LogCapture();
    before(async () => {
      client = await connect({ logLevel: 'info' }, { logStream: logs });
    });
    after(() => client.close());

    it('generates a UUID when none is sent', async () => {
      const a = await client.send({ path: '/api/hello' });
      const b = await client.send({ path: '/api/hello' });
      assert.match(String(a.headers['x-request-id']), UUID);
      assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id']);
    });

    for (const id of ['abc', 'A-Z.a_z:0-9', 'x'.repeat(128), '0']) {
      it(`reuses the valid incoming id ${id.slice(0, 20)}`, async () => {
        const res = await client.send({ path: '/api/hello', headers: { 'x-request-id': id } });
        assert.equal(res.headers['x-request-id'], id);
      });
    }

    for (const id of ['', 'has space', 'x'.repeat(129), 'semi;colon', 'slash/y', 'quote"', 'ünï']) {
      it(`replaces the invalid incoming id ${JSON.stringify(id.slice(0, 20))}`, async () => {
        const res = await client.send({ path: '/api/hello', headers: { 'x-request-id': id } });
        assert.match(String(res.headers['x-request-id']), UUID);
      });
    }

    it('puts the same id in the header, the envelope and the log line', async () => {
      const res = await client.send({ path: '/api/search', headers: { 'x-request-id': 'trace-123' } });
      const error = assertEnvelope(res, 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'is required', value: null },
      ]);
      assert.equal(error.request_id, 'trace-123');
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(logs.lines.filter((l) => l.request_id === 'trace-123').length, 1);
    });

    it('is on every kind of response', async () => {
      for (const [method, path] of [
        ['GET', '/healthz'],
        ['GET', '/nope'],
        ['POST', '/api/hello'],
        ['GET', '/api/hello/%ZZ'],
        ['HEAD', '/api/hello'],
      ] as const) {
        const res = await client.send({ method, path, headers: { 'x-request-id': `id-${method}` } });
        assert.equal(res.headers['x-request-id'], `id-${method}`, `${method} ${path}`);
      }
    });
  });
}
