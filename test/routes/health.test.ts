import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, transports } from '../helpers.js';

/** `/readyz`'s parameters, as the Kubernetes API server's own: `exclude=store` and `verbose`. */

const READY = { status: 'ready' };
const ALL_OK = { status: 'ready', checks: { shutdown: 'ok', operator: 'ok', store: 'ok' } };
const STORE_EXCLUDED = { status: 'ready', checks: { shutdown: 'ok', operator: 'ok', store: 'excluded' } };
const EXCLUDE_MESSAGE = 'must be store, the one check that can be left out';

const TOKEN = 'cmVhZGluZXNzLXRlc3QtdG9rZW4=';
const dir = mkdtempSync(join(tmpdir(), 'greeting-health-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, `${TOKEN}\n`);

/** A Redis URL nothing listens at: the store is unreachable from the start. */
const NO_REDIS = { redisUrl: 'redis://127.0.0.1:9', redisTimeoutMs: 200 };

for (const [transport, connect] of transports) {
  describe(`GET /readyz and its parameters (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ adminTokenFile: tokenFile });
    });
    after(() => client.close());

    it('without parameters, and with verbose=false: {"status":"ready"} exactly', async () => {
      for (const path of ['/readyz', '/readyz?verbose=false', '/readyz?exclude=store', '/readyz?other=1']) {
        const res = await client.send({ path });
        assert.equal(res.status, 200, path);
        assert.equal(res.text, JSON.stringify(READY), path);
      }
    });

    it('verbose (bare, empty or true): each check and its state', async () => {
      for (const path of ['/readyz?verbose', '/readyz?verbose=', '/readyz?verbose=true']) {
        const res = await client.send({ path });
        assert.equal(res.status, 200, path);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(res.text, JSON.stringify(ALL_OK), path);
      }
      assert.deepEqual((await client.send({ path: '/readyz?exclude=store&verbose' })).json(), STORE_EXCLUDED);
    });

    it('any other exclude, a repeated one, or a bad verbose: 400 VALIDATION_ERROR naming it', async () => {
      const cases: [string, unknown[]][] = [
        ['exclude=nope', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: 'nope' }]],
        ['exclude=shutdown', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: 'shutdown' }]],
        ['exclude=operator', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: 'operator' }]],
        ['exclude=', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: '' }]],
        ['exclude=STORE', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: 'STORE' }]],
        ['exclude=st%C3%B6re', [{ field: 'exclude', message: EXCLUDE_MESSAGE, value: 'störe' }]],
        [
          'exclude=store&exclude=store',
          [{ field: 'exclude', message: 'must be given once', value: ['store', 'store'] }],
        ],
        ['verbose=yes', [{ field: 'verbose', message: 'must be empty, true or false', value: 'yes' }]],
        [
          'exclude=etcd&verbose=1',
          [
            { field: 'exclude', message: EXCLUDE_MESSAGE, value: 'etcd' },
            { field: 'verbose', message: 'must be empty, true or false', value: '1' },
          ],
        ],
      ];
      for (const [query, details] of cases) {
        assertEnvelope(await client.send({ path: `/readyz?${query}` }), 400, 'VALIDATION_ERROR', details);
      }
    });

    it("taken out by the operator: 503 whatever is excluded, and verbose names the operator's check", async () => {
      const bearer = { authorization: `Bearer ${TOKEN}` };
      assert.equal((await client.send({ method: 'POST', path: '/readyz/disable', headers: bearer })).status, 204);
      try {
        const message = /^Not ready: taken out of service by an operator \(POST \/readyz\/disable, request .+\)\.$/;
        for (const path of ['/readyz', '/readyz?exclude=store']) {
          assert.match(assertEnvelope(await client.send({ path }), 503, 'SERVICE_UNAVAILABLE').message, message);
        }
        const res = await client.send({ path: '/readyz?exclude=store&verbose' });
        const body = res.json();
        assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE', [
          { field: 'shutdown', message: 'ok', value: 'ok' },
          { field: 'operator', message: body.error.message, value: 'failed' },
          { field: 'store', message: 'excluded', value: 'excluded' },
        ]);
        assert.match(body.error.message, message);
      } finally {
        await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer });
      }
      assert.equal((await client.send({ path: '/readyz' })).status, 200);
    });
  });

  describe(`GET /readyz with Redis unreachable (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect(NO_REDIS);
    });
    after(() => client.close());

    it('503 saying why; exclude=store leaves the store out: 200', async () => {
      const error = assertEnvelope(await client.send({ path: '/readyz' }), 503, 'SERVICE_UNAVAILABLE');
      assert.match(error.message, /^Not ready: Redis /);
      assert.equal((await client.send({ path: '/readyz?exclude=store' })).text, JSON.stringify(READY));
      assert.deepEqual((await client.send({ path: '/readyz?exclude=store&verbose' })).json(), STORE_EXCLUDED);
    });

    it('verbose: the 503 lists each check, the store failed with its reason', async () => {
      const res = await client.send({ path: '/readyz?verbose' });
      const { message } = res.json().error;
      assert.match(message, /^Not ready: Redis /);
      assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE', [
        { field: 'shutdown', message: 'ok', value: 'ok' },
        { field: 'operator', message: 'ok', value: 'ok' },
        { field: 'store', message, value: 'failed' },
      ]);
    });

    it('the API that needs no store is served', async () => {
      assert.equal((await client.send({ path: '/api/hello' })).status, 200);
    });
  });
}
