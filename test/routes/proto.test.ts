import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, injectClient, transports } from '../helpers.js';
import { ROOT } from '../server-process.js';

const IMPORT_PATHS = [
  'greeting/v1/greeting.proto',
  'google/rpc/error_details.proto',
  'google/rpc/status.proto',
  'grpc/health/v1/health.proto',
  'grpc/reflection/v1/reflection.proto',
  'grpc/reflection/v1alpha/reflection.proto',
  'helloworld/helloworld.proto',
];

for (const [transport, connect] of transports) {
  describe(`GET /proto/ (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('lists the import path of every .proto file, one per line', async () => {
      const res = await client.send({ path: '/proto/' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(res.text, `${IMPORT_PATHS.join('\n')}\n`);
    });

    it('serves each file at its import path, byte for byte as in the repository', async () => {
      const ours = await client.send({ path: '/proto/greeting/v1/greeting.proto' });
      assert.equal(ours.status, 200);
      assert.equal(ours.text, readFileSync(join(ROOT, 'proto/greeting/v1/greeting.proto'), 'utf8'));
      const standard = await client.send({ path: '/proto/helloworld/helloworld.proto' });
      assert.equal(standard.text, readFileSync(join(ROOT, 'proto/vendor/helloworld/helloworld.proto'), 'utf8'));
    });

    it('answers 404 with the envelope for any other path, the vendor folder included', async () => {
      for (const path of ['/proto/nope.proto', '/proto/vendor/helloworld/helloworld.proto', '/proto/baseline.binpb']) {
        const res = await client.send({ path });
        const error = assertEnvelope(res, 404, 'NOT_FOUND');
        assert.equal(error.message, `No .proto file ${path.slice('/proto/'.length)}.`);
      }
    });
  });
}

describe('GET /proto/ with GRPC=false', () => {
  it('is no route', async () => {
    const client = await injectClient({ grpc: false });
    try {
      assert.equal((await client.send({ path: '/proto/' })).status, 404);
    } finally {
      await client.close();
    }
  });
});
