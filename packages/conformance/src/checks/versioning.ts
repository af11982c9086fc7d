import { expectEnvelope, expectEqual, expectObject, expectValidation, fail, header, show } from '../assert.js';
import type { Check, Context } from '../context.js';
import type { Request, Response } from '../http.js';
import { canonical, type Token, tokenize } from '../json.js';

const CLAUSE = 'spec 9; contract: Rate limiting, versioning, limits (versioning)';

const JSON_BODY = { 'Content-Type': 'application/json' };
const V1_ACCEPT = 'application/vnd.greeting.v1+json';

/**
 * A request to every route, as `/api/...`, successes and errors: each is sent again under every
 * form of version 1, and must be answered alike. Exchange amounts whose last digits a rounding
 * other than half-even, or a double, would change.
 */
const EVERY_ROUTE: readonly Request[] = [
  { path: '/api/hello' },
  { path: '/api/hello/W%C3%B6rld%20%F0%9F%8C%8D' },
  { path: '/api/search?keyword=caf%C3%A9&page=7' },
  { path: '/api/search?page=0' },
  {
    method: 'POST',
    path: '/api/echo',
    headers: JSON_BODY,
    body: '{"big":12345678901234567890,"long":0.1000000000000000000001,"e":1e400,"z":{"b":[1,2.50],"a":null}}',
  },
  { method: 'POST', path: '/api/echo', headers: JSON_BODY, body: '[1]' },
  { path: '/api/profile' },
  { method: 'DELETE', path: '/api/profile' },
  { path: '/api/exchange?from=USD&to=EUR&amount=100' },
  { path: '/api/exchange?from=USD&to=JPY&amount=12.345' },
  { path: '/api/exchange?from=EUR&to=KWD&amount=999999999999.9999999999' },
  { path: '/api/exchange?from=GBP&to=USD&amount=0.125' },
  { path: '/api/exchange?from=USD&to=EUR&amount=1e2' },
  { path: '/api/exchange?from=USD&to=XXX&amount=1' },
  { path: '/api/currencies' },
  { path: '/api/currencies?page=2&per_page=5&sort=-rate,name' },
  { path: '/api/currencies?limit=4&sort=name&fields=code,rate' },
  { path: '/api/currencies?q=dollar&minor_units=2' },
  { path: '/api/currencies?sort=nope' },
  { path: '/api/currencies/eur?fields=code,minor_units' },
  { path: '/api/currencies/XXX' },
  { path: '/api/no-such-route' },
];

/** The same request under the other forms of version 1: the path, the query parameter, the media type. */
function versionForms(request: Request): { form: string; request: Request }[] {
  const rest = request.path.slice('/api'.length);
  const query = (version: string) => `${request.path}${request.path.includes('?') ? '&' : '?'}version=${version}`;
  return [
    { form: '/api/v1', request: { ...request, path: `/api/v1${rest}` } },
    { form: 'version=1', request: { ...request, path: query('1') } },
    { form: 'version=v1', request: { ...request, path: query('v1') } },
    { form: `Accept: ${V1_ACCEPT}`, request: { ...request, headers: { ...request.headers, Accept: V1_ACCEPT } } },
  ];
}

/**
 * What of an answer must be the same under every version form: status and body, numbers exact;
 * not the times and ids, nor an error's message, which may name the path.
 */
function comparable(res: Response): string {
  let tokens: Token[];
  try {
    tokens = tokenize(res.text);
  } catch {
    return `${res.status}\n${res.text}`;
  }
  const stable = tokens.map((token, i) => {
    const key = tokens[i - 2];
    const names = res.status >= 400 ? ['timestamp', 'request_id', 'message'] : ['timestamp'];
    const volatile = key?.kind === 'string' && names.includes(key.value);
    return volatile && token.kind === 'string' && tokens[i - 1]?.kind === 'punct' ? { ...token, value: '' } : token;
  });
  return `${res.status}\n${canonical(stable)}`;
}

async function expectSameUnderEveryForm(ctx: Context, request: Request): Promise<void> {
  const plain = await ctx.send(request);
  const expected = comparable(plain);
  for (const { form, request: versioned } of versionForms(request)) {
    const res = await ctx.send(versioned);
    if (comparable(res) !== expected) {
      const method = request.method ?? 'GET';
      fail(
        `${method} ${res.request.path} (${form}): what ${method} ${plain.request.path} answers, ${plain.status} ${show(plain.text)}`,
        `${res.status} ${show(res.text)}`,
      );
    }
  }
}

export const versioningChecks: Check[] = [
  {
    id: 'versioning.path',
    group: 'versioning',
    clause: CLAUSE,
    title: '/api/v1/... serves exactly what /api/... serves',
    async run(ctx) {
      for (const path of ['/hello/Ada', '/search?keyword=x&page=3', '/currencies?per_page=3', '/currencies/EUR']) {
        const plain = expectObject(await ctx.get(`/api${path}`), 200);
        const versioned = await ctx.get(`/api/v1${path}`);
        expectEqual(expectObject(versioned, 200), plain, `GET ${versioned.request.path}`);
      }
      expectEnvelope(await ctx.get('/api/v1/no-such-route'), 404, 'NOT_FOUND');
    },
  },
  {
    id: 'versioning.every-route',
    group: 'versioning',
    clause: CLAUSE,
    title:
      'every route answers alike under /api, /api/v1, version=1, version=v1 and Accept: application/vnd.greeting.v1+json, errors and (with --write) a profile write included',
    async run(ctx) {
      for (const request of EVERY_ROUTE) await expectSameUnderEveryForm(ctx, request);
      if (!ctx.options.write) return;
      // A write of no field: it changes nothing another client may be using.
      await expectSameUnderEveryForm(ctx, { method: 'POST', path: '/api/profile', headers: JSON_BODY, body: '{}' });
    },
  },
  {
    id: 'versioning.query',
    group: 'versioning',
    clause: CLAUSE,
    title: 'version=1 and version=v1 are honoured',
    async run(ctx) {
      for (const version of ['1', 'v1']) {
        expectEqual(
          expectObject(await ctx.get(`/api/hello/Ada?version=${version}`), 200).greeting,
          'Hello, Ada!',
          'greeting',
        );
      }
    },
  },
  {
    id: 'versioning.accept',
    group: 'versioning',
    clause: CLAUSE,
    title: 'Accept: application/vnd.greeting.v1+json is honoured',
    async run(ctx) {
      const res = await ctx.get('/api/hello/Ada', { Accept: 'application/vnd.greeting.v1+json' });
      expectEqual(expectObject(res, 200).greeting, 'Hello, Ada!', 'greeting');
    },
  },
  {
    id: 'versioning.api-version-header',
    group: 'versioning',
    clause: CLAUSE,
    title: 'answers under /api carry API-Version: 1, errors included',
    async run(ctx) {
      for (const path of ['/api/hello', '/api/v1/hello', '/api/no-such-route', '/api/search']) {
        const res = await ctx.get(path);
        expectEqual(header(res, 'api-version'), '1', `GET ${res.request.path}: API-Version`);
      }
    },
  },
  {
    id: 'versioning.unknown-path-version',
    group: 'versioning',
    clause: CLAUSE,
    title: '/api/v2/... is a 404 NOT_FOUND',
    async run(ctx) {
      expectEnvelope(await ctx.get('/api/v2/hello'), 404, 'NOT_FOUND');
    },
  },
  {
    id: 'versioning.unknown-query-version',
    group: 'versioning',
    clause: CLAUSE,
    title: 'version=2 is a 400 VALIDATION_ERROR naming version',
    async run(ctx) {
      expectValidation(await ctx.get('/api/hello?version=2'), 'version', '2');
    },
  },
  {
    id: 'versioning.unknown-accept-version',
    group: 'versioning',
    clause: CLAUSE,
    title: 'an Accept for application/vnd.greeting.v2+json alone is a 406 NOT_ACCEPTABLE',
    async run(ctx) {
      expectEnvelope(
        await ctx.get('/api/hello', { Accept: 'application/vnd.greeting.v2+json' }),
        406,
        'NOT_ACCEPTABLE',
      );
    },
  },
];
