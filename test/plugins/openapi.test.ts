import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Config } from '../../src/config.js';
import { type Client, injectClient } from '../helpers.js';

const OPERATIONS = [
  ['get', '/api/hello', 'getHello', [400, 406, 429, 500]],
  ['get', '/api/hello/{name}', 'getGreeting', [400, 406, 429, 500]],
  ['get', '/api/search', 'search', [400, 406, 429, 500]],
  ['post', '/api/echo', 'echo', [400, 406, 413, 415, 429, 500]],
  ['get', '/api/profile', 'getProfile', [400, 406, 412, 429, 500, 503]],
  ['post', '/api/profile', 'updateProfile', [400, 406, 412, 413, 415, 429, 500, 503]],
  ['patch', '/api/profile', 'patchProfile', [400, 406, 412, 413, 415, 429, 500, 503]],
  ['put', '/api/profile', 'replaceProfile', [400, 406, 412, 413, 415, 429, 500, 503]],
  ['get', '/api/exchange', 'exchange', [400, 406, 422, 429, 500]],
  ['get', '/api/currencies', 'listCurrencies', [400, 406, 429, 500]],
  ['get', '/api/currencies/{code}', 'getCurrency', [400, 404, 406, 429, 500]],
  ['get', '/healthz', 'getHealth', [500]],
  ['get', '/readyz', 'getReadiness', [500, 503]],
  ['get', '/openapi.json', 'getOpenApi', [500]],
  ['get', '/metrics', 'getMetrics', [500]],
] as const;

describe('GET /openapi.json', () => {
  let client: Client;
  // biome-ignore lint/suspicious/noExplicitAny: the document, whose shape each assertion checks
  let doc: any;
  before(async () => {
    client = await injectClient();
    const res = await client.send({ path: '/openapi.json' });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    doc = res.json();
  });
  after(() => client.close());

  it('is OpenAPI 3.1 with the service name and version', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.title, 'Greeting and Echo Service');
    assert.match(doc.info.version, /^\d+\.\d+\.\d+/);
  });

  it('documents exactly the routes the service has, each with an id, summary and tags', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method} ${path}`),
    );
    assert.deepEqual(documented.sort(), OPERATIONS.map(([method, path]) => `${method} ${path}`).sort());
    for (const [method, path, operationId] of OPERATIONS) {
      const operation = doc.paths[path][method];
      assert.equal(operation.operationId, operationId);
      assert.equal(typeof operation.summary, 'string');
      assert.ok(operation.tags.length > 0);
    }
  });

  it('documents each error response with the shared envelope', () => {
    for (const [method, path, , errors] of OPERATIONS) {
      const responses = doc.paths[path][method].responses;
      const statuses = Object.keys(responses).filter((s) => Number(s) >= 400);
      assert.deepEqual(statuses, errors.map(String), `${method} ${path}`);
      for (const status of statuses) {
        assert.equal(responses[status].content['application/json'].schema.$ref, '#/components/schemas/ErrorEnvelope');
        assert.ok(responses[status].description.length > 0);
      }
    }
    const envelope = doc.components.schemas.ErrorEnvelope;
    assert.deepEqual(envelope.required, ['error']);
    assert.deepEqual(envelope.properties.error.required, ['code', 'message', 'details', 'timestamp', 'request_id']);
  });

  it('documents the RateLimit-* headers on every response of a rate-limited operation, Retry-After on its 429', () => {
    const limits = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
    for (const [method, path] of OPERATIONS) {
      for (const [status, response] of Object.entries<{ headers?: Record<string, { schema: { type: string } }> }>(
        doc.paths[path][method].responses,
      )) {
        const headers = Object.keys(response.headers ?? {}).filter((name) => name !== 'etag' && name !== 'api-version');
        const expected = !path.startsWith('/api') ? [] : status === '429' ? [...limits, 'Retry-After'] : limits;
        assert.deepEqual(headers, expected, `${method} ${path} ${status}`);
        for (const name of headers) assert.equal(response.headers?.[name]?.schema.type, 'integer');
      }
    }
  });

  it('documents /api/v1 as the canonical alias of /api, once', () => {
    assert.match(doc.info.description, /`\/api\/v1\/\.\.\.` is the canonical versioned path/);
    assert.ok(Object.keys(doc.paths).every((path) => !path.startsWith('/api/v1')));
  });

  it('documents the version parameter and the API-Version header on every operation under /api only', () => {
    for (const [method, path] of OPERATIONS) {
      const operation = doc.paths[path][method];
      const version = (operation.parameters ?? []).find((p: { name: string }) => p.name === 'version');
      const underApi = path.startsWith('/api/');
      assert.equal(version !== undefined, underApi, `${method} ${path}`);
      if (version !== undefined) {
        assert.deepEqual([version.in, version.required, version.schema.enum], ['query', false, ['1', 'v1']]);
      }
      for (const [status, response] of Object.entries(operation.responses)) {
        const header = (response as { headers?: Record<string, { schema: { const: string } }> }).headers?.[
          'api-version'
        ];
        assert.equal(header?.schema.const, underApi ? '1' : undefined, `${method} ${path} ${status}`);
      }
    }
  });

  it('documents no 429 and no RateLimit-* headers when rate limiting is off', async () => {
    const off = await injectClient({ rateLimitMax: 0 });
    const text = (await off.send({ path: '/openapi.json' })).text;
    await off.close();
    assert.doesNotMatch(text, /"429"|RateLimit-|Retry-After/);
  });

  it('leaves out the validation messages, which are no OpenAPI keyword', () => {
    assert.doesNotMatch(JSON.stringify(doc), /errorMessage/);
  });

  it('documents parameters from the validating schemas', () => {
    const parameters = doc.paths['/api/search'].get.parameters;
    const keyword = parameters.find((p: { name: string }) => p.name === 'keyword');
    const page = parameters.find((p: { name: string }) => p.name === 'page');
    assert.equal(keyword.in, 'query');
    assert.equal(keyword.required, true);
    assert.equal(page.required, false);
    assert.equal(page.schema.type, 'integer');
    assert.equal(page.schema.maximum, 2147483647);
    const name = doc.paths['/api/hello/{name}'].get.parameters.find((p: { in: string }) => p.in === 'path');
    assert.deepEqual([name.name, name.in, name.required], ['name', 'path', true]);
    assert.equal(doc.paths['/api/echo'].post.requestBody.content['application/json'].schema.type, 'object');
  });

  it('documents the exchange amount as exact decimal text and the result as numbers', () => {
    const exchange = doc.paths['/api/exchange'].get;
    const amount = exchange.parameters.find((p: { name: string }) => p.name === 'amount');
    assert.deepEqual([amount.in, amount.required, amount.schema.type], ['query', true, 'string']);
    assert.equal(typeof amount.schema.pattern, 'string');
    const result = exchange.responses['200'].content['application/json'].schema;
    assert.deepEqual(result.required, ['from', 'to', 'amount', 'rate', 'result']);
    assert.equal(result.properties.result.type, 'number');
  });

  it('documents every parameter of the currencies collection', () => {
    const list = doc.paths['/api/currencies'].get;
    const names = list.parameters.map((p: { name: string; in: string }) => `${p.in} ${p.name}`);
    assert.deepEqual(
      names,
      ['page', 'per_page', 'cursor', 'limit', 'sort', 'fields', 'q', 'search', 'code', 'minor_units', 'version'].map(
        (n) => `query ${n}`,
      ),
    );
    for (const parameter of list.parameters) {
      assert.equal(parameter.required, false, parameter.name);
      assert.ok(parameter.description.length > 0, parameter.name);
    }
    const sort = list.parameters.find((p: { name: string }) => p.name === 'sort');
    assert.ok(new RegExp(sort.schema.pattern).test('-rate,name'));
    const page = list.responses['200'].content['application/json'].schema;
    assert.equal(page.anyOf.length, 2);
    const one = doc.paths['/api/currencies/{code}'].get;
    assert.deepEqual(
      one.parameters.map((p: { name: string; in: string }) => `${p.in} ${p.name}`),
      ['query fields', 'query version', 'path code'],
    );
  });

  it('documents the profile: ETag, 304 without a body, conditional headers, merge patch on PATCH', () => {
    const item = doc.paths['/api/profile'];
    assert.deepEqual(Object.keys(item.get.responses), ['200', '304', '400', '406', '412', '429', '500', '503']);
    assert.equal(item.get.responses['304'].content, undefined);
    assert.equal(item.get.responses['304'].headers.etag.schema.type, 'string');
    const headers = (operation: { parameters: { name: string; in: string }[] }) =>
      operation.parameters.filter((p) => p.in === 'header').map((p) => p.name);
    assert.deepEqual(headers(item.get), ['if-none-match', 'if-match']);
    for (const method of ['get', 'post', 'patch', 'put']) {
      const ok = item[method].responses['200'];
      assert.equal(ok.headers.etag.schema.type, 'string', method);
      assert.deepEqual(ok.content['application/json'].schema.required, ['name', 'email', 'bio'], method);
    }
    for (const method of ['post', 'patch', 'put']) {
      assert.deepEqual(headers(item[method]), ['if-match', 'if-none-match'], method);
      const body = item[method].requestBody.content;
      assert.deepEqual(
        Object.keys(body),
        method === 'patch' ? ['application/json', 'application/merge-patch+json'] : ['application/json'],
      );
      assert.equal(body['application/json'].schema.additionalProperties, false);
    }
  });

  it('documents every success body', () => {
    for (const [method, path] of OPERATIONS) {
      const type = path === '/metrics' ? 'text/plain; version=0.0.4; charset=utf-8' : 'application/json';
      assert.ok(doc.paths[path][method].responses['200'].content[type].schema, `${method} ${path}`);
    }
    for (const [method, path] of OPERATIONS) {
      const { description } = doc.paths[path][method].responses['200'];
      assert.notEqual(description, 'Default Response', `${method} ${path}`);
      assert.ok(description.length > 0);
    }
    assert.equal(doc.paths['/api/hello'].get.responses['200'].description, 'Hello message');
    const hello = doc.paths['/api/hello'].get.responses['200'].content['application/json'].schema;
    assert.deepEqual(hello.required, ['message', 'timestamp']);
  });
});

/** Whether a part of the document (a parameter, a body, a response) gives an example anywhere in it. */
function hasExample(part: unknown): boolean {
  if (part === null || typeof part !== 'object') return false;
  if ('example' in part || 'examples' in part) return true;
  return Object.values(part).some(hasExample);
}

describe('OpenAPI examples', () => {
  it('gives an example of every required parameter, every request body and every success answer', async () => {
    const client = await injectClient();
    const doc = (await client.send({ path: '/openapi.json' })).json();
    await client.close();
    for (const [method, path] of OPERATIONS) {
      const operation = doc.paths[path][method];
      for (const parameter of operation.parameters ?? []) {
        if (parameter.required) assert.ok(hasExample(parameter), `${method} ${path} ${parameter.name}`);
      }
      if (operation.requestBody !== undefined) assert.ok(hasExample(operation.requestBody), `${method} ${path} body`);
      assert.ok(hasExample(operation.responses['200']), `${method} ${path} 200`);
    }
  });
});

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SPECTRAL = join(ROOT, 'node_modules/@stoplight/spectral-cli/dist/index.js');

describe('Spectral', () => {
  it('finds no error, warning, info or hint with its OpenAPI ruleset, whatever the configuration', {
    timeout: 60_000,
  }, async () => {
    const variants: Partial<Config>[] = [{}, { contextPath: '/svc', rateLimitMax: 0, metricsEnabled: false }];
    const dir = await mkdtemp(join(tmpdir(), 'greeting-service-spectral-'));
    try {
      const files = await Promise.all(
        variants.map(async (overrides, i) => {
          const client = await injectClient(overrides);
          const file = join(dir, `openapi-${i}.json`);
          const res = await client.send({ path: `${overrides.contextPath ?? ''}/openapi.json` });
          assert.equal(res.status, 200);
          await writeFile(file, res.text);
          await client.close();
          return file;
        }),
      );
      // One run for every document: starting Spectral is most of its cost.
      const output = join(dir, 'results.json');
      const args = [
        SPECTRAL,
        'lint',
        '--ruleset',
        join(ROOT, '.spectral.yaml'),
        '--format',
        'json',
        '--output',
        output,
      ];
      await promisify(execFile)(process.execPath, [...args, ...files], { cwd: ROOT });
      const results = JSON.parse(await readFile(output, 'utf8')) as Record<'code' | 'message' | 'source', string>[];
      assert.deepEqual(
        results.map(({ code, message, source }) => `${source}: ${code}: ${message}`),
        [],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
