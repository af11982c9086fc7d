import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { testConfig } from './helpers.js';

/**
 * What a start loads: what `/api/*` needs, and nothing of the documentation, its document or Redis
 * until they are asked for. This file runs in a process of its own (node --test), so the module
 * cache is this file's.
 */

const loaded = (pkg: string) =>
  Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(`/node_modules/${pkg}/`));

const LAZY = ['@fastify/swagger-ui', '@fastify/static', '@fastify/swagger', 'yaml', 'ioredis'];

describe('start-up', () => {
  let app: FastifyInstance;
  before(async () => {
    app = await buildApp(testConfig());
    await app.ready();
  });
  after(() => app.close());

  it('loads none of the documentation, its document or the Redis client to answer /api', async () => {
    assert.equal((await app.inject('/api/hello')).statusCode, 200);
    assert.equal((await app.inject('/api/hello/Ada')).statusCode, 200);
    assert.deepEqual(
      LAZY.filter((pkg) => loaded(pkg)),
      [],
    );
  });

  it('loads @fastify/swagger when the document is first asked for', async () => {
    assert.equal((await app.inject('/openapi.json')).statusCode, 200);
    assert.ok(loaded('@fastify/swagger'));
    assert.ok(!loaded('@fastify/swagger-ui'));
  });

  it('loads Swagger UI and its file server when the page is first asked for', async () => {
    assert.equal((await app.inject('/docs')).statusCode, 200);
    assert.equal((await app.inject('/docs/static/index.css')).statusCode, 200);
    assert.ok(loaded('@fastify/swagger-ui') && loaded('@fastify/static'));
    assert.ok(!loaded('ioredis'), 'Redis is not configured');
  });
});
