import { expectEnvelope, expectEqual, expectObject, expectValidation, header } from '../assert.js';
import type { Check } from '../context.js';

const CLAUSE = 'spec 9; contract: Rate limiting, versioning, limits (versioning)';

export const versioningChecks: Check[] = [
  {
    id: 'versioning.path',
    group: 'versioning',
    clause: CLAUSE,
    title: '/api/v1/... serves exactly what /api/... serves',
    async run(ctx) {
      for (const path of ['/hello/Ada', '/search?keyword=x&page=3', '/currencies?per_page=3', '/currencies/EUR']) {
        const plain = expectObject(await ctx.get(`/api${path}`), 200);
        expectEqual(expectObject(await ctx.get(`/api/v1${path}`), 200), plain, `GET /api/v1${path}`);
      }
      expectEnvelope(await ctx.get('/api/v1/no-such-route'), 404, 'NOT_FOUND');
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
        expectEqual(header(await ctx.get(path), 'api-version'), '1', `GET ${path}: API-Version`);
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
