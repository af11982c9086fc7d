import assert from 'node:assert/strict';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Decimal } from 'decimal.js';
import { runConformance } from '../../packages/conformance/src/index.js';
import { CURRENCIES } from '../../src/domain/currencies.js';
import { type ListeningApp, listening } from '../helpers.js';
import { type Alteration, startBrokenProxy } from './broken-server.js';
import { notPassed } from './report.js';

/** The request's path without its query, and whether it is one of `paths` or under one of them. */
const on = (url: string, ...paths: string[]) => paths.some((path) => url.split('?')[0]?.startsWith(path));

/** The answer without the headers named. */
function without(answer: Parameters<Alteration>[1], ...names: string[]): Parameters<Alteration>[1] {
  const headers = { ...answer.headers };
  for (const name of names) delete headers[name];
  return { ...answer, headers };
}

/** An exchange that rounds its results in `rounding` instead of half-even, from the service's own table. */
function roundingExchange(rounding: Decimal.Rounding): Alteration {
  const Exactly = Decimal.clone({ precision: 80 });
  return (req, answer) => {
    if (!on(req.url, '/api/exchange') || answer.status !== 200) return answer;
    const params = new URL(req.url, 'http://proxy').searchParams;
    const [from, to] = ['from', 'to'].map((field) =>
      CURRENCIES.find((c) => c.code === params.get(field)?.toUpperCase()),
    );
    if (from === undefined || to === undefined || from === to) return answer;
    const result = new Exactly(params.get('amount') ?? '0')
      .times(to.rate)
      .div(from.rate)
      .toDecimalPlaces(to.minor_units, rounding)
      .toFixed();
    return { ...answer, body: answer.body.replace(/"result":[^,}]+/, `"result":${result}`) };
  };
}

interface Deployment {
  /** What the proxy breaks. */
  alter: Alteration;
  /** The groups and checks the run takes. */
  only: string[];
  /** The checks that must fail, and no other. */
  fails: string[];
  /** What the first failure says came instead. */
  actual?: RegExp;
}

const RATE_LIMIT = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];

/** Single-defect deployments: the real service behind a proxy that breaks one thing. */
const DEPLOYMENTS: Record<string, Deployment> = {
  'X-Request-Id missing on /api/currencies and /api/exchange': {
    alter: (req, answer) =>
      on(req.url, '/api/currencies', '/api/exchange') ? without(answer, 'x-request-id') : answer,
    only: ['currencies', 'exchange.example', 'exchange.unsupported', 'request-id'],
    fails: ['request-id.every-answer'],
  },
  'the security headers missing on /api/exchange, /api/echo and /api/search': {
    alter: (req, answer) =>
      on(req.url, '/api/exchange', '/api/echo', '/api/search')
        ? without(answer, 'x-content-type-options', 'x-frame-options', 'content-security-policy')
        : answer,
    only: ['search', 'echo', 'exchange.example', 'exchange.unsupported', 'security'],
    fails: ['security.every-answer'],
  },
  'Content-Type text/plain on /api/v1/search': {
    alter: (req, answer) =>
      on(req.url, '/api/v1/search')
        ? { ...answer, headers: { ...answer.headers, 'content-type': 'text/plain; charset=utf-8' } }
        : answer,
    only: ['versioning.every-route', 'http.every-answer'],
    fails: ['http.every-answer'],
  },
  'API-Version missing on /api/currencies': {
    alter: (req, answer) => (on(req.url, '/api/currencies') ? without(answer, 'api-version') : answer),
    only: ['currencies', 'versioning'],
    fails: ['versioning.every-answer'],
  },
  '/api/v1/hello saying "Hello, World."': {
    alter: (req, answer) =>
      req.url === '/api/v1/hello' ? { ...answer, body: answer.body.replace('Hello, World!', 'Hello, World.') } : answer,
    only: ['versioning'],
    fails: ['versioning.every-route'],
  },
  '/api/v1/echo rounding numbers to doubles': {
    alter: (req, answer) =>
      on(req.url, '/api/v1/echo') && answer.status === 200
        ? { ...answer, body: JSON.stringify(JSON.parse(answer.body)) }
        : answer,
    only: ['versioning'],
    fails: ['versioning.every-route'],
  },
  '/api/v1/exchange rounding results down': {
    alter: (req, answer) =>
      on(req.url, '/api/v1/exchange')
        ? { ...answer, body: answer.body.replace(/("result":\d+\.\d*)[1-9](?=})/, '$10') }
        : answer,
    only: ['versioning'],
    fails: ['versioning.every-route'],
  },
  'Accept: application/vnd.greeting.v1+json answering another search page': {
    alter: (req, answer) =>
      on(req.url, '/api/search') && String(req.headers.accept).includes('vnd.greeting.v1')
        ? { ...answer, body: answer.body.replace(/"page":(\d+)/, '"page":1') }
        : answer,
    only: ['versioning'],
    fails: ['versioning.every-route'],
  },
  'version=v1 leaving out the last currency of a page': {
    alter: (req, answer) =>
      on(req.url, '/api/currencies') && req.url.includes('version=v1') && answer.status === 200
        ? { ...answer, body: answer.body.replace(/,\{[^{}]*\}\]/, ']') }
        : answer,
    only: ['versioning'],
    fails: ['versioning.every-route'],
  },
  'an exchange rounding half-up': {
    alter: roundingExchange(Decimal.ROUND_HALF_UP),
    only: ['exchange.half-even'],
    fails: ['exchange.half-even'],
  },
  'an exchange rounding half-down': {
    alter: roundingExchange(Decimal.ROUND_HALF_DOWN),
    only: ['exchange.half-even'],
    fails: ['exchange.half-even'],
  },
  'an exchange truncating': {
    alter: roundingExchange(Decimal.ROUND_DOWN),
    only: ['exchange.half-even'],
    fails: ['exchange.half-even'],
  },
  'an exchange rounding up': {
    alter: roundingExchange(Decimal.ROUND_UP),
    only: ['exchange.half-even'],
    fails: ['exchange.half-even'],
  },
  'DELETE /api/profile answered 405 with Allow: GET, POST': {
    alter: (req, answer) =>
      req.method === 'DELETE' && on(req.url, '/api/profile')
        ? { ...answer, headers: { ...answer.headers, allow: 'GET, POST' } }
        : answer,
    only: ['errors.method-not-allowed'],
    fails: ['errors.method-not-allowed'],
  },
  'a cursor page without limit defaulting to 10': {
    alter: (req, answer) => {
      if (!on(req.url, '/api/currencies') || !req.url.includes('cursor=') || req.url.includes('limit=')) return answer;
      const body = JSON.parse(answer.body) as { data: unknown[]; pagination: { limit: number } };
      return {
        ...answer,
        body: JSON.stringify({ ...body, data: body.data.slice(0, 10), pagination: { ...body.pagination, limit: 10 } }),
      };
    },
    only: ['currencies'],
    fails: ['currencies.cursor-default-limit'],
  },
  // What a balancer in front refuses itself never reached the service's count.
  'RateLimit headers missing on what a balancer refuses itself (a path not percent-encoded, a body over its limit)': {
    alter: (req, answer) =>
      on(req.url, '/api/hello/%') || (on(req.url, '/api/echo') && Number(req.headers['content-length']) > 2 ** 21)
        ? without(answer, ...RATE_LIMIT)
        : answer,
    only: ['http.bad-percent-encoding', 'errors.payload-too-large', 'rate-limit.headers'],
    fails: [],
  },
  'RateLimit headers missing on /api/search': {
    alter: (req, answer) => (on(req.url, '/api/search') ? without(answer, ...RATE_LIMIT) : answer),
    only: ['search', 'rate-limit.headers'],
    fails: ['rate-limit.headers'],
  },
  'HEAD answered with a body': {
    alter: (req, answer) => (req.method === 'HEAD' ? { ...answer, body: '{"message":"Hello, World!"}' } : answer),
    only: ['hello', 'http.head'],
    fails: ['hello.head', 'http.head'],
    actual: /^HEAD \/api\/hello answered with a body/,
  },
};

describe('the conformance kit against the service behind a proxy that breaks one thing', () => {
  let service: ListeningApp;
  before(async () => {
    service = await listening({ rateLimitMax: 1_000_000, logLevel: 'silent' });
  });
  after(() => service.app.close());

  async function failing(alter: Alteration, only: string[]) {
    const { url, server } = await startBrokenProxy(service.origin, alter);
    try {
      const report = await runConformance({ baseUrl: url, write: true, only });
      return report.results.filter((result) => result.outcome === 'fail');
    } finally {
      await close(server);
    }
  }

  it('passes every check of the groups below through a proxy that breaks nothing', async () => {
    const groups = [...new Set(Object.values(DEPLOYMENTS).flatMap((deployment) => deployment.only))];
    const { url, server } = await startBrokenProxy(service.origin, (_req, answer) => answer);
    try {
      const report = await runConformance({ baseUrl: url, write: true, only: groups });
      assert.deepEqual(notPassed(report), []);
    } finally {
      await close(server);
    }
  });

  it('says plainly, as skips, that a proxy strips content codings, and fails nothing for it', async () => {
    const stripped = (headers: IncomingHttpHeaders) => {
      const { 'accept-encoding': _, ...passed } = headers;
      return passed;
    };
    const { url, server } = await startBrokenProxy(service.origin, (_req, answer) => answer, stripped);
    try {
      const report = await runConformance({ baseUrl: url, only: ['codings'] });
      assert.equal(report.failed, 0, JSON.stringify(report.results.filter((r) => r.outcome === 'fail')));
      const skipped = report.results.filter((result) => result.outcome === 'skip');
      assert.deepEqual(
        skipped.map((result) => result.id),
        ['codings.answers', 'codings.preference', 'codings.head', 'codings.small-plain'],
      );
      for (const result of skipped) assert.match(result.reason ?? '', /a proxy in front of it strips Accept-Encoding/);
      assert.deepEqual(
        report.results.filter((result) => result.outcome === 'pass').map((result) => result.id),
        ['codings.request-bodies', 'codings.request-refused'],
      );
    } finally {
      await close(server);
    }
  });

  it("fails profile.stale-if-match alone where a stale If-Match is taken for any, restoring the kit's own stale write", async () => {
    const anyTag = (headers: IncomingHttpHeaders) =>
      headers['if-match'] === '"conformance-stale"' ? { ...headers, 'if-match': '*' } : headers;
    const { url, server } = await startBrokenProxy(service.origin, (_req, answer) => answer, anyTag);
    try {
      const report = await runConformance({ baseUrl: url, write: true, only: ['profile'] });
      assert.deepEqual(
        report.results.filter((result) => result.outcome !== 'pass').map((result) => result.id),
        ['profile.stale-if-match'],
        notPassed(report).join('\n'),
      );
      const res = await service.app.inject({ url: '/api/profile' });
      assert.deepEqual(res.json(), { name: null, email: null, bio: null });
    } finally {
      await close(server);
    }
  });

  for (const [name, { alter, only, fails, actual }] of Object.entries(DEPLOYMENTS)) {
    it(`fails exactly ${fails.join(', ') || 'nothing'} for ${name}`, async () => {
      const failed = await failing(alter, only);
      assert.deepEqual(
        failed.map((result) => result.id),
        fails,
      );
      if (actual !== undefined) assert.match(failed[0]?.actual ?? '', actual);
    });
  }
});

describe('the conformance kit against a rate-limited service behind a proxy that breaks its RateLimit headers', () => {
  let service: ListeningApp;
  before(async () => {
    // A limit the run meets, in a window long enough to see RateLimit-Reset count down.
    service = await listening({ rateLimitMax: 40, rateLimitWindowMs: 6000, logLevel: 'silent' });
  });
  after(() => service.app.close());

  const ONLY = ['hello', 'search', 'echo', 'rate-limit'];

  async function run(alter: Alteration) {
    const { url, server } = await startBrokenProxy(service.origin, alter);
    try {
      return await runConformance({ baseUrl: url, only: ONLY });
    } finally {
      await close(server);
    }
  }

  it('passes through a proxy that breaks nothing, waiting for the windows', async () => {
    const report = await run((_req, answer) => answer);
    assert.deepEqual(notPassed(report), ['skip rate-limit.exceeded: needs --rate-limit | ']);
  });

  it('fails rate-limit.headers, not skips it, when the headers are removed in a run that met 429s', async () => {
    const report = await run((_req, answer) => without(answer, ...RATE_LIMIT));
    const failed = report.results.filter((result) => result.outcome === 'fail');
    assert.deepEqual(
      failed.map((result) => result.id),
      ['rate-limit.headers'],
    );
    assert.match(failed[0]?.actual ?? '', /^none, after \d+ answers 429/);
  });

  it('fails rate-limit.headers for a RateLimit-Reset in milliseconds, and does not wait for it', async () => {
    const report = await run((_req, answer) => {
      const reset = answer.headers['ratelimit-reset'];
      return typeof reset === 'string'
        ? { ...answer, headers: { ...answer.headers, 'ratelimit-reset': String(Number(reset) * 1000) } }
        : answer;
    });
    assert.deepEqual(
      report.results.filter((result) => result.outcome === 'fail').map((result) => result.id),
      ['rate-limit.headers'],
    );
    assert.equal(report.results.filter((result) => result.reason?.startsWith('budget')).length, 0);
    assert.ok(report.durationMs < 120_000, `${report.durationMs} ms`);
  });
});

const close = (server: Server) => new Promise((resolve) => server.close(resolve));
