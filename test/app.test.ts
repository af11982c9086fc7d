import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, transports } from './helpers.js';

for (const [transport, connect] of transports) {
  describe(`CONTEXT_PATH=/svc (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ contextPath: '/svc' });
    });
    after(() => client.close());

    it('moves every route under the context path', async () => {
      for (const path of [
        '/svc/api/hello',
        '/svc/api/hello/x',
        '/svc/api/search?keyword=a',
        '/svc/api/profile',
        '/svc/api/exchange?from=USD&to=EUR&amount=1',
        '/svc/api/currencies',
        '/svc/api/currencies/EUR',
        '/svc/healthz',
        '/svc/readyz',
        '/svc/openapi.json',
      ]) {
        assert.equal((await client.send({ path })).status, 200, path);
      }
      const echo = await client.send({
        method: 'POST',
        path: '/svc/api/echo',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(echo.status, 200);
    });

    it('serves nothing outside it', async () => {
      for (const path of ['/api/hello', '/api/profile', '/healthz', '/openapi.json', '/svc']) {
        assertEnvelope(await client.send({ path }), 404, 'NOT_FOUND');
      }
    });

    it('answers 405 under it', async () => {
      const res = await client.send({ method: 'POST', path: '/svc/api/hello' });
      assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.allow, 'GET, HEAD');
    });

    it('documents the context path in every path, under the host’s root', async () => {
      const doc = (await client.send({ path: '/svc/openapi.json' })).json();
      assert.deepEqual(
        doc.servers.map((server: { url: string }) => server.url),
        ['/'],
      );
      assert.ok(doc.paths['/svc/healthz'] !== undefined);
      assert.ok(doc.paths['/svc/api/v1/hello'] !== undefined);
      assert.ok(Object.keys(doc.paths).every((p) => p.startsWith('/svc/')));
    });
  });

  describe(`health (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('answers /healthz and /readyz', async () => {
      assert.equal((await client.send({ path: '/healthz' })).text, '{"status":"ok"}');
      assert.equal((await client.send({ path: '/readyz' })).text, '{"status":"ready"}');
    });
  });
}
