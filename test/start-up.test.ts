import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { DEFAULT_CONFIG } from '../src/config.js';
import { SchemaCode } from '../src/lib/schema-code.js';
import { builtSchemaCode } from './built-schema-code.js';

/**
 * What a start loads: what `/api/*` needs, and nothing of the documentation, its document or Redis
 * until they are asked for, nor the schema compilers, whose code the build compiled. This file runs
 * in a process of its own (node --test), so the module cache is this file's.
 */

const loaded = (path: string) =>
  Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(`/node_modules/${path}`));

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
