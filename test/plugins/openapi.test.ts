import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import openapiTS from 'openapi-typescript';
import { parse } from 'yaml';
import type { Config } from '../../src/config/index.js';
import { ERROR_CODES } from '../../src/errors.js';
import { CODINGS } from '../../src/lib/content-coding.js';
import { FORMATS, VISIBLE_LINE } from '../../src/schemas.js';
import { type Client, injectClient } from '../helpers.js';

const run = promisify(execFile);

const API_ERRORS = [400, 404, 405, 406, 408, 417, 429, 431, 500, 501, 505];
const OTHER_ERRORS = [400, 404, 405, 408, 417, 431, 500, 501, 505];

/** Each operation: method, path from the host's root, id, the statuses of its own, its success body's schema. */
const OPERATIONS = [
  ['get', '/api/v1/hello', 'getHello', [], 'HelloMessage'],
  ['get', '/api/v1/hello/{name}', 'getGreeting', [], 'Greeting'],
  ['get', '/api/v1/search', 'search', [], 'SearchResult'],
  ['get', '/api/v1/events', 'getEvents', [204, 503], undefined],
  ['post', '/api/v1/echo', 'echo', [413, 415], 'Echo'],
  ['get', '/api/v1/profile', 'getProfile', [304, 412, 503], 'Profile'],
  ['post', '/api/v1/profile', 'updateProfile', [412, 413, 415, 503], 'Profile'],
  ['patch', '/api/v1/profile', 'patchProfile', [412, 413, 415, 503], 'Profile'],
  ['put', '/api/v1/profile', 'replaceProfile', [412, 413, 415, 503], 'Profile'],
  ['get', '/api/v1/exchange', 'exchange', [422], 'ExchangeResult'],
  ['get', '/api/v1/currencies', 'listCurrencies', [], undefined],
  ['get', '/api/v1/currencies/{code}', 'getCurrency', [], 'Currency'],
  ['get', '/healthz', 'getHealth', [], 'Health'],
  ['get', '/readyz', 'getReadiness', [503], 'Readiness'],
  ['get', '/version', 'getVersion', [], 'Version'],
  ['get', '/openapi.json', 'getOpenApi', [], undefined],
  ['get', '/asyncapi.json', 'getAsyncApi', [], undefined],
  ['get', '/metrics', 'getMetrics', [], undefined],
] as const;

/** The formats that strict validators know: JSON Schema's and OpenAPI's own. */
const KNOWN_FORMATS = new Set([
  'date-time',
  'date',
  'time',
  'duration',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'uri',
  'uri-reference',
  'uuid',
  'int32',
  'int64',
  'float',
  'double',
  'byte',
  'binary',
  'password',
]);

const underApi = (path: string) => path.startsWith('/api/v1/');

// biome-ignore lint/suspicious/noExplicitAny: the document, whose shape each assertion checks
type Json = any;

/** A part of the document, its `$ref` followed. */
function resolve(doc: Json, part: Json): Json {
  if (part?.$ref === undefined) return part;
  return resolve(
    doc,
    (part.$ref as string)
      .slice(2)
      .split('/')
      .reduce((node: Json, key) => node[key], doc),
  );
}

describe('GET /openapi.json', () => {
  let client: Client;
  let doc: Json;
  before(async () => {
    client = await injectClient();
    const res = await client.send({ path: '/openapi.json' });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    doc = res.json();
  });
  after(() => client.close());

  it('is OpenAPI 3.1 with the service name, version and licence, and no authentication', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.title, 'Greeting and Echo Service');
    assert.match(doc.info.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(doc.info.license, { name: 'MIT', identifier: 'MIT' });
    assert.deepEqual(doc.security, []);
  });

  it('is the document /docs/json serves', async () => {
    assert.deepEqual((await client.send({ path: '/docs/json' })).json(), doc);
  });

  it('has one server, the host’s root, and every path from it, /api/v1 the canonical path of /api', () => {
    assert.deepEqual(
      doc.servers.map((server: { url: string }) => server.url),
      ['/'],
    );
    for (const item of Object.values<Json>(doc.paths)) assert.equal(item.servers, undefined);
    assert.match(doc.info.description, /`\/api\/v1`, the canonical/);
    assert.match(
      doc.info.description,
      /also served without the version segment \(`\/api\/hello` for `\/api\/v1\/hello`\)/,
    );
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

  it('leaves the WebSocket echo to the AsyncAPI document, and links to it where the echo is', () => {
    assert.deepEqual(
      Object.keys(doc.paths).filter((path) => path.includes('websocket')),
      [],
    );
    const link =
      /The WebSocket echo, `GET \/api\/v1\/echo\/websocket` .* \[AsyncAPI 3\.0 document\]\(\/asyncapi\.json\)/;
    assert.match(doc.info.description, link);
    assert.match(doc.tags.find((tag: { name: string }) => tag.name === 'echo').description, link);
  });

  it('lists every error each operation answers, each the envelope by reference', () => {
    for (const [method, path, , own] of OPERATIONS) {
      const responses = doc.paths[path][method].responses;
      const errors = Object.keys(responses).filter((s) => Number(s) >= 400);
      const expected = [...(underApi(path) ? API_ERRORS : OTHER_ERRORS), ...own.filter((s) => s >= 400)];
      assert.deepEqual(errors, [...new Set(expected)].sort().map(String), `${method} ${path}`);
      for (const status of errors) {
        const response = resolve(doc, responses[status]);
        assert.equal(response.content['application/json'].schema.$ref, '#/components/schemas/ErrorEnvelope');
        assert.ok(response.description.length > 0);
      }
      // The errors any operation of its kind gives are shared components.
      assert.match(responses['404'].$ref, /^#\/components\/responses\/(Api)?NotFound$/);
    }
    const envelope = doc.components.schemas.ErrorEnvelope;
    assert.deepEqual(envelope.required, ['error']);
    assert.deepEqual(envelope.properties.error.required, ['code', 'message', 'details', 'timestamp', 'request_id']);
    assert.deepEqual(envelope.properties.error.properties.code.enum, Object.keys(ERROR_CODES));
  });

  it('documents the headers of every response, required where always sent', () => {
    const limits = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
    for (const [method, path] of OPERATIONS) {
      for (const [status, entry] of Object.entries<Json>(doc.paths[path][method].responses)) {
        const headers: Record<string, Json> = Object.fromEntries(
          Object.entries<Json>(resolve(doc, entry).headers).map(([name, header]) => [name, resolve(doc, header)]),
        );
        const where = `${method} ${path} ${status}`;
        const socket = ['408', '431'].includes(status);
        const routed = underApi(path) && !socket;
        const alwaysRouted = routed && !['400', '505'].includes(status);
        const expected = [
          'X-Request-Id',
          'X-Content-Type-Options',
          'X-Frame-Options',
          'Content-Security-Policy',
          'Cache-Control',
          'Vary',
          ...(socket ? [] : ['Content-Encoding']),
          ...(routed ? ['API-Version', ...limits] : []),
          ...(status === '405' ? ['Allow'] : []),
          ...(status === '429' || (status === '503' && path !== '/readyz') ? ['Retry-After'] : []),
          ...(path === '/api/v1/events' && status === '200' ? ['X-Accel-Buffering'] : []),
          ...(path === '/api/v1/profile' && ['200', '304'].includes(status) ? ['ETag'] : []),
        ];
        assert.deepEqual(Object.keys(headers).sort(), expected.sort(), where);
        for (const [name, header] of Object.entries(headers)) {
          const optional = (!alwaysRouted && ['API-Version', ...limits].includes(name)) || name === 'Content-Encoding';
          assert.equal(header.required, !optional, `${where} ${name}`);
        }
        for (const name of limits) if (routed) assert.equal(headers[name].schema.type, 'integer');
        if (status === '429') assert.equal(headers['Retry-After'].schema.type, 'integer');
        if (alwaysRouted) assert.equal(headers['API-Version'].schema.const, '1', where);
        if (!socket) assert.deepEqual(headers['Content-Encoding'].schema.enum, [...CODINGS], where);
        const vary = socket ? 'Origin' : `${routed ? 'Accept, ' : ''}Accept-Encoding, Origin`;
        if (headers.Vary.schema.const !== undefined) assert.equal(headers.Vary.schema.const, vary, where);
      }
    }
    const profile = doc.paths['/api/v1/profile'].get.responses;
    assert.equal(profile['200'].headers['Cache-Control'].schema.const, 'no-cache');
    assert.equal(
      resolve(doc, doc.paths['/api/v1/hello'].get.responses['200'].headers['Cache-Control']).schema.const,
      'no-store',
    );
  });

  it('documents the Content-Encoding of every request body, and of no other request', () => {
    for (const [method, path] of OPERATIONS) {
      const operation = doc.paths[path][method];
      const parameters = (operation.parameters ?? []).map((p: Json) => resolve(doc, p));
      const coding = parameters.find((p: { name: string }) => p.name === 'Content-Encoding');
      assert.equal(coding !== undefined, operation.requestBody !== undefined, `${method} ${path}`);
      if (coding !== undefined) {
        assert.equal(coding.in, 'header');
        assert.equal(coding.required, false);
        for (const name of CODINGS) assert.match(coding.description, new RegExp(`\\b${name}\\b`));
      }
    }
  });

  it('documents the version parameter on every operation under /api only', () => {
    for (const [method, path] of OPERATIONS) {
      const parameters = (doc.paths[path][method].parameters ?? []).map((p: Json) => resolve(doc, p));
      const version = parameters.find((p: { name: string }) => p.name === 'version');
      assert.equal(version !== undefined, underApi(path), `${method} ${path}`);
      if (version !== undefined) {
        assert.deepEqual([version.in, version.required, version.schema.enum], ['query', false, ['1', 'v1']]);
      }
    }
  });

  it('documents no 429 and no RateLimit-* headers when rate limiting is off', async () => {
    const off = await injectClient({ rateLimitMax: 0 });
    const text = (await off.send({ path: '/openapi.json' })).text;
    await off.close();
    assert.doesNotMatch(text, /"429"|RateLimit-|TooManyRequests/);
  });

  it('leaves out the validation messages, which are no OpenAPI keyword', () => {
    assert.doesNotMatch(JSON.stringify(doc), /errorMessage/);
  });

  it('documents parameters from the validating schemas', () => {
    const parameters = doc.paths['/api/v1/search'].get.parameters;
    const keyword = parameters.find((p: { name: string }) => p.name === 'keyword');
    const page = parameters.find((p: { name: string }) => p.name === 'page');
    assert.equal(keyword.in, 'query');
    assert.equal(keyword.required, true);
    assert.equal(page.required, false);
    assert.equal(page.schema.type, 'integer');
    assert.equal(page.schema.maximum, 2147483647);
    const name = doc.paths['/api/v1/hello/{name}'].get.parameters.find((p: { in: string }) => p.in === 'path');
    assert.deepEqual([name.name, name.in, name.required], ['name', 'path', true]);
  });

  it('documents every media type a body may have', () => {
    assert.deepEqual(Object.keys(doc.paths['/api/v1/echo'].post.requestBody.content), [
      'application/json',
      'application/*+json',
    ]);
    const item = doc.paths['/api/v1/profile'];
    for (const method of ['post', 'patch', 'put']) {
      const body = item[method].requestBody.content;
      assert.deepEqual(
        Object.keys(body),
        method === 'patch'
          ? ['application/json', 'application/merge-patch+json', 'application/*+json']
          : ['application/json', 'application/*+json'],
        method,
      );
      for (const media of Object.values<Json>(body)) {
        assert.equal(media.schema.$ref, '#/components/schemas/ProfileUpdate');
      }
    }
  });

  it('documents the exchange amount as exact decimal text and the numbers of the answer as exact decimals', () => {
    const exchange = doc.paths['/api/v1/exchange'].get;
    const amount = exchange.parameters.find((p: { name: string }) => p.name === 'amount');
    assert.deepEqual([amount.in, amount.required, amount.schema.type], ['query', true, 'string']);
    assert.equal(typeof amount.schema.pattern, 'string');
    assert.equal(
      exchange.responses['200'].content['application/json'].schema.$ref,
      '#/components/schemas/ExchangeResult',
    );
    const result = doc.components.schemas.ExchangeResult;
    assert.deepEqual(result.required, ['from', 'to', 'amount', 'rate', 'result']);
    for (const name of ['amount', 'rate', 'result']) {
      const property = result.properties[name];
      assert.deepEqual([property.type, property.format, property['x-format']], ['number', undefined, 'decimal'], name);
      assert.match(property.description, /exact decimal/);
    }
    assert.equal(doc.components.schemas.Currency.properties.rate['x-format'], 'decimal');
  });

  it('uses only the formats strict validators know, and states the profile name’s rule as a pattern', () => {
    const formats = [...JSON.stringify(doc).matchAll(/"format":"([^"]*)"/g)].map((match) => match[1]);
    assert.deepEqual(
      formats.filter((format) => !KNOWN_FORMATS.has(format as string)),
      [],
    );
    const name = doc.components.schemas.Profile.properties.name.anyOf[0];
    assert.deepEqual(Object.keys(name).sort(), ['maxLength', 'minLength', 'pattern', 'type']);
    const pattern = new RegExp(name.pattern);
    for (const text of ['Ada Lovelace', ' x ', '', ' ', '\u200b\u3000\ufeff', 'a\nb', 'a\u0085', 'a\u00ad']) {
      assert.equal(pattern.test(text), FORMATS[VISIBLE_LINE]?.(text), JSON.stringify(text));
    }
    // Every character of the Basic Multilingual Plane is judged by the pattern as the service does.
    const differ: string[] = [];
    for (let code = 0; code <= 0xffff; code += 1) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const text = String.fromCharCode(code);
      if (pattern.test(text) !== FORMATS[VISIBLE_LINE]?.(text)) differ.push(code.toString(16));
    }
    assert.deepEqual(differ, []);
  });

  it('documents every parameter of the currencies collection, the lists as arrays of comma-separated values', () => {
    const list = doc.paths['/api/v1/currencies'].get;
    const parameters = list.parameters.map((p: Json) => resolve(doc, p));
    assert.deepEqual(
      parameters.map((p: { name: string; in: string }) => `${p.in} ${p.name}`),
      ['page', 'per_page', 'cursor', 'limit', 'sort', 'fields', 'q', 'search', 'code', 'minor_units', 'version'].map(
        (n) => `query ${n}`,
      ),
    );
    for (const parameter of parameters) {
      assert.equal(parameter.required, false, parameter.name);
      assert.ok(parameter.description.length > 0, parameter.name);
    }
    for (const name of ['sort', 'fields', 'code', 'minor_units']) {
      const parameter = parameters.find((p: { name: string }) => p.name === name);
      assert.deepEqual([parameter.schema.type, parameter.style, parameter.explode], ['array', 'form', false], name);
    }
    const sort = parameters.find((p: { name: string }) => p.name === 'sort');
    assert.ok(sort.schema.items.enum.includes('-rate'));
    assert.deepEqual(
      list.responses['200'].content['application/json'].schema.anyOf.map((s: Json) => s.$ref),
      ['#/components/schemas/CurrencyOffsetPage', '#/components/schemas/CurrencyCursorPage'],
    );
    const one = doc.paths['/api/v1/currencies/{code}'].get;
    assert.deepEqual(
      one.parameters.map((p: Json) => resolve(doc, p)).map((p: { name: string; in: string }) => `${p.in} ${p.name}`),
      ['query fields', 'query version', 'path code'],
    );
  });

  it('documents the statuses of its own below 400 of each operation', () => {
    for (const [method, path, , own] of OPERATIONS) {
      for (const status of own.filter((s) => s < 400)) {
        assert.ok(doc.paths[path][method].responses[String(status)], `${method} ${path} ${status}`);
      }
    }
  });

  it('documents the event stream resumed at its end: 204 without a body', () => {
    const done = doc.paths['/api/v1/events'].get.responses['204'];
    assert.equal(done.content, undefined);
    assert.match(done.description, /Last-Event-ID/);
  });

  it('documents the profile: ETag, 304 without a body, conditional headers', () => {
    const item = doc.paths['/api/v1/profile'];
    assert.equal(item.get.responses['304'].content, undefined);
    assert.equal(item.get.responses['304'].headers.ETag.schema.type, 'string');
    const headers = (operation: { parameters: { name: string; in: string }[] }) =>
      operation.parameters.filter((p) => p.in === 'header').map((p) => p.name);
    assert.deepEqual(headers(item.get), ['if-none-match', 'if-match']);
    for (const method of ['post', 'patch', 'put'])
      assert.deepEqual(headers(item[method]), ['if-match', 'if-none-match']);
    assert.deepEqual(doc.components.schemas.Profile.required, ['name', 'email', 'bio']);
  });

  it('names every success body, referenced where used', () => {
    for (const [method, path, , , schema] of OPERATIONS) {
      const response = doc.paths[path][method].responses['200'];
      const type =
        path === '/metrics'
          ? 'text/plain; version=0.0.4; charset=utf-8'
          : path === '/api/v1/events'
            ? 'text/event-stream'
            : 'application/json';
      const content = response.content[type].schema;
      assert.ok(content, `${method} ${path}`);
      if (schema !== undefined) assert.equal(content.$ref, `#/components/schemas/${schema}`, `${method} ${path}`);
      assert.notEqual(response.description, 'Default Response', `${method} ${path}`);
      assert.ok(response.description.length > 0);
    }
    assert.equal(doc.paths['/api/v1/hello'].get.responses['200'].description, 'Hello message');
    assert.deepEqual(doc.components.schemas.HelloMessage.required, ['message', 'timestamp']);
    // One schema, not one copy per operation.
    assert.equal(JSON.stringify(doc.paths).match(/"name":\{"anyOf"/g), null);
  });
});

/** Whether a part of the document (a parameter, a body, a response) gives an example anywhere in it. */
function hasExample(doc: Json, part: Json): boolean {
  if (part === null || typeof part !== 'object') return false;
  if ('example' in part || 'examples' in part) return true;
  if (typeof part.$ref === 'string') return hasExample(doc, resolve(doc, part));
  return Object.values(part).some((sub) => hasExample(doc, sub));
}

describe('OpenAPI examples', () => {
  it('gives an example of every required parameter, every request body and every success answer', async () => {
    const client = await injectClient();
    const doc = (await client.send({ path: '/openapi.json' })).json();
    await client.close();
    for (const [method, path] of OPERATIONS) {
      const operation = doc.paths[path][method];
      for (const parameter of operation.parameters ?? []) {
        if (parameter.required) assert.ok(hasExample(doc, parameter), `${method} ${path} ${parameter.name}`);
      }
      if (operation.requestBody !== undefined) {
        assert.ok(hasExample(doc, operation.requestBody), `${method} ${path} body`);
      }
      const success = operation.responses['200'];
      assert.ok(hasExample(doc, success), `${method} ${path} success`);
    }
  });
});

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SPECTRAL = join(ROOT, 'node_modules/@stoplight/spectral-cli/dist/index.js');
const REDOCLY = join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** The configurations that change the document; the last one's token file is written in `dir`. */
const variants = (dir: string): Partial<Config>[] => [
  {},
  { contextPath: '/svc' },
  { rateLimitMax: 0 },
  { metricsEnabled: false },
  { faultErrorRate: 0.1, faultHeaders: true, adminTokenFile: join(dir, 'admin-token') },
];

/**
 * Spectral's and Redocly's own rulesets, as a user runs them on the document with no configuration
 * of this project's: a ruleset file that only extends `spectral:oas`, and `--extends recommended`
 * where there is no redocly.yaml.
 */
describe('the linters, with their default rulesets', { timeout: 120_000 }, () => {
  let dir: string;
  let files: string[];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'greeting-service-openapi-'));
    await writeFile(join(dir, 'admin-token'), 'a-token-for-the-document-0123456789\n');
    files = await Promise.all(
      variants(dir).map(async (overrides, i) => {
        const client = await injectClient(overrides);
        const file = join(dir, `openapi-${i}.json`);
        const res = await client.send({ path: `${overrides.contextPath ?? ''}/openapi.json` });
        assert.equal(res.status, 200);
        await writeFile(file, res.text);
        await client.close();
        return file;
      }),
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('Spectral finds no error, warning, info or hint with spectral:oas, whatever the configuration', async () => {
    const ruleset = join(dir, 'ruleset.yaml');
    await writeFile(ruleset, 'extends: ["spectral:oas"]\n');
    // One run for every document: starting Spectral is most of its cost.
    const output = join(dir, 'spectral.json');
    const args = [
      SPECTRAL,
      'lint',
      '--ruleset',
      ruleset,
      '--fail-severity',
      'hint',
      '--format',
      'json',
      '--output',
      output,
    ];
    // It exits 1 on any finding: the findings are in the output, and the assertion names them.
    await run(process.execPath, [...args, ...files], { cwd: dir }).catch(() => undefined);
    const results = JSON.parse(await readFile(output, 'utf8')) as (Record<'code' | 'message' | 'source', string> & {
      path: string[];
    })[];
    assert.deepEqual(
      results.map(({ code, message, source, path }) => `${source}: ${code}: ${message} (${path.join('.')})`),
      [],
    );
  });

  it('Redocly finds no error and no warning with recommended, whatever the configuration', async () => {
    // No usage report and no look for a newer version: the test talks to no one.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const args = [REDOCLY, 'lint', '--extends', 'recommended', '--format', 'json'];
    const { stdout } = await run(process.execPath, [...args, ...files], { cwd: dir, env }).catch(
      (error: { stdout: string }) => ({ stdout: error.stdout }),
    );
    // One JSON report per document, one after the other.
    const reports = stdout
      .split(/(?=\{\s*"totals")/)
      .filter((text) => text.trim() !== '')
      .map((text) => JSON.parse(text));
    assert.equal(reports.length, files.length, stdout);
    const problems = reports.flatMap((report: Json, i: number) =>
      report.problems.map((p: Json) => `${files[i]}: ${p.ruleId}: ${p.message} (${p.location?.[0]?.pointer})`),
    );
    assert.deepEqual(problems, []);
  });

  it("the project's own configurations are those rulesets, with nothing turned off", async () => {
    assert.deepEqual(parse(await readFile(join(ROOT, '.spectral.yaml'), 'utf8')), { extends: ['spectral:oas'] });
    assert.deepEqual(parse(await readFile(join(ROOT, 'redocly.yaml'), 'utf8')), { extends: ['recommended'] });
  });
});

describe('a client generated with openapi-typescript', { timeout: 60_000 }, () => {
  it('names the schemas and types the exact decimals as text, not numbers', async () => {
    const client = await injectClient();
    const doc = (await client.send({ path: '/openapi.json' })).json();
    await client.close();
    // What a client that reads decimals exactly does: the generator's transform for the extension.
    const types = await openapiTS(doc, {
      transform: (schema) => ((schema as { 'x-format'?: string })['x-format'] === 'decimal' ? 'string' : undefined),
    });
    const dir = await mkdtemp(join(tmpdir(), 'greeting-service-client-'));
    try {
      await writeFile(join(dir, 'api.d.ts'), types);
      await writeFile(
        join(dir, 'uses.ts'),
        `import type { components, paths } from './api';
type Schemas = components['schemas'];
export const profile: Schemas['Profile'] = { name: 'Ada', email: null, bio: 'x' };
export const exchange: Schemas['ExchangeResult'] = { from: 'USD', to: 'EUR', amount: '100', rate: '0.92', result: '92' };
export const currency: Schemas['Currency'] = { code: 'EUR', rate: '0.92' };
export const offset: Schemas['CurrencyOffsetPage'] = { data: [currency], pagination: { page: 1, per_page: 20, total: 1, total_pages: 1 } };
export const cursor: Schemas['CurrencyCursorPage'] = { data: [], pagination: { next_cursor: '', has_more: false, limit: 20 } };
export const hello: Schemas['HelloMessage'] = { message: 'Hello, World!', timestamp: '2026-01-02T03:04:05.678' };
export const greeting: Schemas['Greeting'] = { greeting: 'Hello, Ada!' };
export const search: Schemas['SearchResult'] = { keyword: 'k', page: 1, results: 'r' };
export const echo: Schemas['Echo'] = { received: {}, echo: true, timestamp: '2026-01-02T03:04:05.678' };
export const health: Schemas['Health'] = { status: 'ok' };
export const code: Schemas['ErrorEnvelope']['error']['code'] = 'RATE_LIMIT_EXCEEDED';
export const answer: paths['/api/v1/profile']['get']['responses'][200]['content']['application/json'] = profile;
`,
      );
      await writeFile(
        join(dir, 'misuses.ts'),
        `import type { components } from './api';
export function total(exchange: components['schemas']['ExchangeResult']): number {
  return exchange.amount * 2;
}
`,
      );
      const tsc = (file: string) =>
        run(
          process.execPath,
          [
            TSC,
            '--noEmit',
            '--strict',
            '--module',
            'esnext',
            '--moduleResolution',
            'bundler',
            '--target',
            'es2022',
            file,
          ],
          {
            cwd: dir,
          },
        );
      await tsc('uses.ts');
      const failed = await tsc('misuses.ts').then(
        () => '',
        (error: { stdout: string }) => error.stdout,
      );
      assert.match(failed, /misuses\.ts.*error TS2362/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
