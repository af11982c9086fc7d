import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApp } from '../../src/app.js';
import { SchemaCode, type SchemaCodeTable } from '../../src/lib/schema-code.js';
import { builtSchemaCode } from '../built-schema-code.js';
import { testConfig } from '../helpers.js';

const BUILT = builtSchemaCode();

/** The entries of a table module's text, as `compileTable` writes it. */
function entriesOf(moduleText: string): string[] {
  const module = { exports: {} as { SCHEMA_CODE: SchemaCodeTable } };
  new Function('exports', 'require', moduleText)(module.exports, createRequire(import.meta.url));
  return Object.keys(module.exports.SCHEMA_CODE);
}

/** Requests that pass and fail every kind of rule the routes' schemas have. */
const REQUESTS: InjectOptions[] = [
  { url: '/api/hello' },
  { url: '/api/hello/Ada' },
  { url: '/api/hello/%E2%9C%93%20%F0%9F%98%80' },
  { url: '/api/search?keyword=a&page=2' },
  { url: '/api/search?keyword=%20b%20&page=2147483647&extra=1' },
  { url: '/api/search?keyword=' },
  { url: '/api/search?keyword=a&keyword=b' },
  { url: '/api/search?keyword=a&page=0x10' },
  { url: '/api/search?keyword=a&page=0' },
  { url: '/api/search?keyword=a&page=2147483648' },
  { url: '/api/search?keyword=a&page=1&page=2' },
  { url: '/api/search?page=1.5' },
  { url: '/api/search' },
  { method: 'POST', url: '/api/echo', payload: { a: [1, { b: null }], ü: 'ß' } },
  { method: 'POST', url: '/api/echo', payload: [1, 2] },
  { method: 'POST', url: '/api/echo', payload: 'null', headers: { 'content-type': 'application/json' } },
  { url: '/api/profile' },
  { method: 'PUT', url: '/api/profile', payload: { name: 'Ada', email: 'ada@example.com', bio: 'Countess' } },
  { url: '/api/profile' },
  { method: 'PUT', url: '/api/profile', payload: { name: '\u0001', email: 'not an address', bio: 7, x: 1 } },
  { method: 'PUT', url: '/api/profile', payload: { name: null, email: null, bio: null } },
  { method: 'PATCH', url: '/api/profile', payload: { name: '\u200b' } },
  { method: 'PATCH', url: '/api/profile', payload: { bio: 'x'.repeat(1000) } },
  { method: 'PATCH', url: '/api/profile', payload: { name: 'Grace' }, headers: { 'if-match': '"nope"' } },
  { url: '/api/exchange?from=EUR&to=JPY&amount=12.345' },
  { url: '/api/exchange?from=eur&to=XXX&amount=1e3' },
  { url: '/api/exchange?from=EUR&from=USD&to=JPY&amount=1' },
  { url: '/api/currencies?per_page=3&page=2&fields=code,rate' },
  { url: '/api/currencies?per_page=0&fields=nope' },
  { url: '/api/currencies/eur?fields=name' },
  { url: '/api/currencies/EURO' },
  { url: '/healthz' },
  { url: '/readyz' },
];

/** What varies between two answers to the same request: the request id and the clock. */
function comparable(body: string): string {
  return body
    .replace(/"request_id":"[^"]*"/g, '"request_id":"-"')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z?/g, 'TIME');
}

describe('the schemas compiled with the service', () => {
  let secrets: string;
  before(async () => {
    secrets = await mkdtemp(join(tmpdir(), 'schema-code-'));
  });
  after(() => rm(secrets, { recursive: true, force: true }));

  it('are in the built table, every one of them, with every optional route on', async () => {
    const adminTokenFile = join(secrets, 'admin-token');
    await writeFile(adminTokenFile, 'b'.repeat(32));
    for (const config of [testConfig(), testConfig({ adminTokenFile, contextPath: '/svc', rateLimitMax: 0 })]) {
      const schemaCode = new SchemaCode({ table: BUILT, record: true });
      const app = await buildApp(config, { schemaCode });
      await app.ready();
      await app.close();
      assert.deepEqual(entriesOf(schemaCode.compileTable()), []);
      // The recorder itself: with an empty table it has every schema to compile.
      const empty = new SchemaCode({ table: {}, record: true });
      const again = await buildApp(config, { schemaCode: empty });
      await again.ready();
      await again.close();
      const compiled = entriesOf(empty.compileTable());
      assert.ok(compiled.length > 0 && compiled.every((key) => key in BUILT));
    }
  });

  it('answer every request as the schemas compiled when first used do', async () => {
    const apps: FastifyInstance[] = [];
    for (const table of [BUILT, {}]) {
      const app = await buildApp(testConfig({ rateLimitMax: 0 }), { schemaCode: new SchemaCode({ table }) });
      apps.push(app);
    }
    try {
      for (const request of REQUESTS) {
        const [built, compiled] = await Promise.all(apps.map((app) => app.inject(request)));
        const label = `${request.method ?? 'GET'} ${request.url}`;
        assert.equal(built?.statusCode, compiled?.statusCode, label);
        assert.equal(comparable(built?.body ?? ''), comparable(compiled?.body ?? ''), label);
        assert.equal(built?.headers['content-type'], compiled?.headers['content-type'], label);
      }
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });
});
