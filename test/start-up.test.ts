import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { buildApp } from '../src/app.js';
import { DEFAULT_CONFIG } from '../src/config/index.js';
import { SchemaCode } from '../src/lib/schema-code.js';
import { builtSchemaCode } from './built-schema-code.js';
import { processProbe, startServer } from './server-process.js';

/**
 * What a start loads: what `/api/*` needs, and nothing of the documentation, its document or Redis
 * until they are asked for, nor the schema compilers, whose code the build compiled. This file runs
 * in a process of its own (node --test), so the module cache is this file's.
 */

/** Whether `files` (module paths) hold one under `node_modules/` that begins with `path`. */
const among = (files: string[], path: string) => files.some((file) => file.includes(`/node_modules/${path}`));
const loaded = (path: string) => among(Object.keys(createRequire(import.meta.url).cache), path);

const LAZY = ['@fastify/swagger-ui/', '@fastify/static/', '@fastify/swagger/', 'yaml/', 'ioredis/'];
/** Ajv's and fast-json-stringify's compilers, and Fastify's wrappers of them. */
const COMPILERS = [
  'ajv/dist/ajv.js',
  'fast-json-stringify/index.js',
  '@fastify/ajv-compiler/',
  '@fastify/fast-json-stringify-compiler/',
];

describe('start-up', () => {
  let app: FastifyInstance;
  before(async () => {
    // Not the test helpers' testConfig: they load Ajv themselves, to check the OpenAPI document.
    app = await buildApp(
      { ...DEFAULT_CONFIG, logLevel: 'silent' },
      { schemaCode: new SchemaCode({ table: builtSchemaCode() }) },
    );
    await app.ready();
  });
  after(() => app.close());

  it('loads none of the documentation, its document, the Redis client or a schema compiler to answer /api', async () => {
    assert.equal((await app.inject('/api/hello')).statusCode, 200);
    assert.equal((await app.inject('/api/hello/Ada')).statusCode, 200);
    assert.equal((await app.inject('/api/search?keyword=')).statusCode, 400);
    assert.equal((await app.inject({ method: 'POST', url: '/api/echo', payload: { a: 1 } })).statusCode, 200);
    assert.equal((await app.inject('/api/exchange?from=EUR&to=USD&amount=1')).statusCode, 200);
    assert.equal((await app.inject('/api/currencies?per_page=0')).statusCode, 400);
    assert.deepEqual(
      [...LAZY, ...COMPILERS].filter((path) => loaded(path)),
      [],
    );
  });

  it('loads @fastify/swagger when the document is first asked for', async () => {
    assert.equal((await app.inject('/openapi.json')).statusCode, 200);
    assert.ok(loaded('@fastify/swagger/'));
    assert.ok(!loaded('@fastify/swagger-ui/'));
  });

  it('loads Swagger UI and its file server when the page is first asked for', async () => {
    assert.equal((await app.inject('/docs')).statusCode, 200);
    assert.equal((await app.inject('/docs/static/index.css')).statusCode, 200);
    assert.ok(loaded('@fastify/swagger-ui/') && loaded('@fastify/static/'));
    assert.ok(!loaded('ioredis/'), 'Redis is not configured');
  });
});

describe('the built service (dist/server.js)', () => {
  it('answers /api without loading a schema compiler: the bundle holds the code the build compiled', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'start-up-'));
    // The CommonJS modules the process has loaded: what the bundle reads from node_modules among them.
    const probe = await processProbe<string[]>(dir, 'Object.keys(require.cache)');
    const server = await startServer({}, [], { nodeArgs: probe.nodeArgs });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const statuses: number[] = [];
      for (const [path, body] of [
        ['/api/hello'],
        ['/api/hello/Ada'],
        ['/api/search?keyword='],
        ['/api/echo', '{"a":1}'],
        ['/api/exchange?from=EUR&to=USD&amount=1'],
        ['/api/currencies?per_page=0'],
      ] as [string, string?][]) {
        const response = await request(base + path, {
          ...(body !== undefined && { method: 'POST', body, headers: { 'content-type': 'application/json' } }),
        });
        await response.body.dump();
        statuses.push(response.statusCode);
      }
      assert.deepEqual(statuses, [200, 200, 400, 200, 200, 400]);
      const modules = await probe.read(server);
      assert.deepEqual(
        COMPILERS.filter((path) => among(modules, path)),
        [],
      );
      // The probe sees them once loaded: the OpenAPI document's own app compiles with them.
      await (await request(`${base}/openapi.json`)).body.dump();
      assert.ok(among(await probe.read(server), 'ajv/dist/ajv.js'));
    } finally {
      server.kill();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
