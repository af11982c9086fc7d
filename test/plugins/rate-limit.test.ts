import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import { type AddressInfo, isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { Pool, Client as UndiciClient } from 'undici';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/config/index.js';
import { clientKey } from '../../src/plugins/rate-limit.js';
import { MemoryRateLimitStore } from '../../src/stores/memory-rate-limit.js';
import { spelledPath } from '../fuzz/arbitraries.js';
import {
  assertEnvelope,
  type Client,
  injectClient,
  parseRawResponse,
  rawExchange,
  type TestResponse,
  testConfig,
  transports,
} from '../helpers.js';
import { killAllServers, rssMiB, startServer } from '../server-process.js';

const LIMIT_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after'];

/** Asserts the RateLimit-* headers of a response within its window, and no Retry-After. */
function assertLimits(res: TestResponse, limit: number, remaining: number, windowSeconds: number): void {
  assert.equal(res.headers['ratelimit-limit'], String(limit), res.text);
  assert.equal(res.headers['ratelimit-remaining'], String(remaining));
  const reset = Number(res.headers['ratelimit-reset']);
  assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= windowSeconds, String(reset));
  assert.equal(res.headers['retry-after'], undefined);
}

/** Asserts the 429 of a client over its limit: the envelope, Retry-After and the RateLimit-* headers. */
function assertLimited(res: TestResponse, limit: number, windowSeconds: number): void {
  assertEnvelope(res, 429, 'RATE_LIMIT_EXCEEDED');
  const retryAfter = res.headers['retry-after'];
  assert.match(String(retryAfter), /^[1-9]\d*$/);
  assert.ok(Number(retryAfter) <= windowSeconds);
  assert.equal(res.headers['ratelimit-limit'], String(limit));
  assert.equal(res.headers['ratelimit-remaining'], '0');
  assert.equal(res.headers['ratelimit-reset'], retryAfter);
}

function assertNoLimits(res: TestResponse): void {
  for (const name of LIMIT_HEADERS) assert.equal(res.headers[name], undefined, `${name} on ${res.text}`);
}

for (const [transport, connect] of transports) {
  describe(`rate limiting (${transport})`, () => {
    const open: Client[] = [];
    async function client(overrides: Partial<Config>): Promise<Client> {
      const made = await connect(overrides);
      open.push(made);
      return made;
    }
    after(() => Promise.all(open.map((made) => made.close())));

    it('counts down RateLimit-Remaining and answers the request over the limit with a 429', async () => {
      const c = await client({ rateLimitMax: 3 });
      for (const remaining of [2, 1, 0]) {
        const res = await c.send({ path: '/api/hello' });
        assert.equal(res.status, 200);
        assertLimits(res, 3, remaining, 60);
      }
      const over = await c.send({ path: '/api/hello' });
      assertLimited(over, 3, 60);
      assert.match(over.json().error.message, /^More than 3 requests in the current window; retry in \d+ s\.$/);
      // Still over: every further request in the window is refused too.
      assertLimited(await c.send({ path: '/api/hello/Ada' }), 3, 60);
    });

    it('gives a client one counter for all /api routes, errors included', async () => {
      const c = await client({ rateLimitMax: 8 });
      const requests = [
        { path: '/api/search?keyword=a', status: 200 },
        // The route decides, not the spelling of the path.
        { path: '/%61pi/hello/', status: 200 },
        { path: '/api/search', status: 400 },
        { path: '/api/nope', status: 404 },
        { path: '/api', status: 404 },
        { path: '/api/hello', method: 'DELETE', status: 405 },
        { path: '/api/echo', method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x', status: 415 },
        // Refused before routing, and counted all the same.
        { path: '/api/%E0%A4%A', status: 400 },
      ];
      for (const [i, { status, ...request }] of requests.entries()) {
        const res = await c.send(request);
        assert.equal(res.status, status, res.text);
        assertLimits(res, 8, 7 - i, 60);
      }
      assertLimited(await c.send({ path: '/api/nope' }), 8, 60);
      assertLimited(await c.send({ path: '/api/hello' }), 8, 60);
      assertLimited(await c.send({ path: '/api/%E0%A4%A' }), 8, 60);
    });

    it('does not count CORS preflights, which carry no RateLimit headers', async () => {
      const c = await client({ rateLimitMax: 2 });
      const preflight = {
        method: 'OPTIONS',
        path: '/api/echo',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
      };
      for (let i = 0; i < 5; i++) {
        const res = await c.send(preflight);
        assert.equal(res.status, 204);
        assertNoLimits(res);
      }
      assertLimits(await c.send({ path: '/api/hello' }), 2, 1, 60);
      assertLimits(await c.send({ path: '/api/hello' }), 2, 0, 60);
      assertLimited(await c.send({ path: '/api/hello' }), 2, 60);
      // Over the limit, a preflight is still answered: the request it asks about gets the 429.
      const res = await c.send(preflight);
      assert.equal(res.status, 204);
      assertNoLimits(res);
    });

    it('starts counting again when the window ends', async () => {
      const c = await client({ rateLimitMax: 2, rateLimitWindowMs: 400 });
      assertLimits(await c.send({ path: '/api/hello' }), 2, 1, 1);
      assertLimits(await c.send({ path: '/api/hello' }), 2, 0, 1);
      const over = await c.send({ path: '/api/hello' });
      assertLimited(over, 2, 1);
      assert.equal(over.headers['retry-after'], '1');
      await sleep(450);
      const again = await c.send({ path: '/api/hello' });
      assert.equal(again.status, 200);
      assertLimits(again, 2, 1, 1);
    });

    it('never limits /healthz, /readyz, /version, /openapi.json or paths outside /api, and adds no headers there', async () => {
      const c = await client({ rateLimitMax: 1 });
      assert.equal((await c.send({ path: '/api/hello' })).status, 200);
      const over = await c.send({ path: '/api/hello' });
      assert.equal(over.status, 429);
      assert.match(over.json().error.message, /^More than 1 request in the current window; retry in \d+ s\.$/);
      for (let i = 0; i < 3; i++) {
        for (const [path, status] of [
          ['/healthz', 200],
          ['/readyz', 200],
          ['/version', 200],
          ['/openapi.json', 200],
          ['/nope', 404],
          ['/apis', 404],
        ] as const) {
          const res = await c.send({ path });
          assert.equal(res.status, status, path);
          assertNoLimits(res);
        }
      }
    });

    it('limits nothing and adds no headers with RATE_LIMIT_MAX=0', async () => {
      const c = await client({ rateLimitMax: 0 });
      for (let i = 0; i < 30; i++) {
        const res = await c.send({ path: i % 2 ? '/api/hello' : '/api/nope' });
        assert.equal(res.status, i % 2 ? 200 : 404);
        assertNoLimits(res);
      }
    });

    it('ignores X-Forwarded-For without TRUST_PROXY', async () => {
      const c = await client({ rateLimitMax: 1 });
      assert.equal((await c.send({ path: '/api/hello', headers: { 'x-forwarded-for': '192.0.2.1' } })).status, 200);
      const res = await c.send({ path: '/api/hello', headers: { 'x-forwarded-for': '192.0.2.2' } });
      assertLimited(res, 1, 60);
    });

    it('counts each X-Forwarded-For client on its own with TRUST_PROXY', async () => {
      const c = await client({ rateLimitMax: 1, trustProxy: true });
      const from = (address: string) => c.send({ path: '/api/hello', headers: { 'x-forwarded-for': address } });
      assertLimits(await from('192.0.2.1'), 1, 0, 60);
      assertLimits(await from('192.0.2.2'), 1, 0, 60);
      assertLimited(await from('192.0.2.1'), 1, 60);
      // The client is the first address of the list, the one farthest from the service.
      assertLimited(await from('192.0.2.2, 198.51.100.7'), 1, 60);
    });

    it('counts a client whose X-Forwarded-For starts with no IP address as its connection, with TRUST_PROXY', async () => {
      const c = await client({ rateLimitMax: 3, trustProxy: true });
      const from = (value: string) => c.send({ path: '/api/hello', headers: { 'x-forwarded-for': value } });
      assertLimits(await from('unknown'), 3, 2, 60);
      assertLimits(await from(randomBytes(6144).toString('base64')), 3, 1, 60);
      assertLimits(await c.send({ path: '/api/hello' }), 3, 0, 60);
      const over = await from('192.0.2.1:8080, 192.0.2.1');
      assertLimited(over, 3, 60);
      assert.match(over.json().error.message, /^More than 3 requests in the current window; retry in \d+ s\.$/);
      // An address is still a client of its own.
      assertLimits(await from('192.0.2.1'), 3, 2, 60);
    });

    it('limits the /api routes under the context path only', async () => {
      const c = await client({ rateLimitMax: 1, contextPath: '/svc' });
      assertLimits(await c.send({ path: '/svc/api/hello' }), 1, 0, 60);
      assertLimited(await c.send({ path: '/svc/api/currencies/EUR' }), 1, 60);
      for (const path of ['/svc/healthz', '/api/hello', '/svc/openapi.json']) assertNoLimits(await c.send({ path }));
    });
  });
}

for (const prefix of ['', '/svc']) {
  describe(`rate limiting of a path as the router reads it, context path ${prefix || '/'} (raw HTTP)`, () => {
    let app: FastifyInstance;
    let port: number;
    before(async () => {
      app = await buildApp(testConfig({ rateLimitMax: 1_000_000, contextPath: prefix || '/' }));
      await app.listen({ host: '127.0.0.1', port: 0 });
      port = (app.server.address() as { port: number }).port;
    });
    after(() => app.close());

    async function send(method: string, target: string): Promise<TestResponse> {
      return parseRawResponse(
        await rawExchange(port, `${method} ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`),
      );
    }

    it('counts every request the router resolves under /api once, 404s included, however it is spelled', async () => {
      // [method, target, status]: each reaches /api by the router's reading of the path.
      const counted: [string, string, number][] = [
        ['GET', `${prefix}/%61pi/nope`, 404],
        ['GET', `${prefix}/%61%70%69`, 404],
        ['GET', `${prefix}/%61pi/`, 404],
        ['GET', `${prefix}/api#x`, 404],
        ['GET', `${prefix}/%61pi/nope#x`, 404],
        ['GET', `http://localhost${prefix}/api/nope`, 404],
        ['GET', `HTTP://localhost${prefix}/%61pi/nope`, 404],
        // Only /api/v1 as sent is the versioned path; spelled otherwise it is a path no route has.
        ['GET', `${prefix}/%61pi/v1/hello`, 404],
        ['GET', `${prefix}/%61pi/hello`, 200],
        ['GET', `${prefix}/api/hello#x`, 200],
        ['GET', `http://localhost${prefix}/api/hello`, 200],
        ['DELETE', `${prefix}/%61pi/hello`, 405],
        ...(prefix === '' ? [] : ([['GET', '/%73vc/%61pi/nope', 404]] as [string, string, number][])),
      ];
      let remaining = Number((await send('GET', `${prefix}/api/hello`)).headers['ratelimit-remaining']);
      for (const [method, target, status] of counted) {
        const res = await send(method, target);
        remaining -= 1;
        assert.equal(res.status, status, `${method} ${target}: ${res.text}`);
        assert.equal(res.headers['ratelimit-remaining'], String(remaining), `${method} ${target}`);
        if (status === 404) {
          const error = assertEnvelope(res, 404, 'NOT_FOUND');
          assert.equal(error.message, `No route for ${method} ${target}.`);
        }
      }
    });

    it('counts nothing the router does not resolve under /api', async () => {
      for (const target of [
        `${prefix}/API/nope`,
        `/${prefix}/api/nope`,
        `${prefix}//api/nope`,
        `${prefix}/%2561pi/nope`,
        `${prefix}/api%2Fnope`,
        `${prefix}/apis`,
        `http://localhost${prefix}/apis`,
      ]) {
        const res = await send('GET', target);
        assertEnvelope(res, 404, 'NOT_FOUND');
        assertNoLimits(res);
      }
    });

    it('counts any spelling of a path under /api once, and of a path outside it never', async () => {
      const limited = ['/api/hello', '/api/hello/Ada', '/api/currencies/EUR', '/api/nope', '/api'];
      const path = fc.constantFrom(...limited.map((p) => [p, true] as const), ['/healthz', false], ['/apis', false]);
      const request = path.chain(([p, counted]) => spelledPath(prefix + p).map((url) => ({ url, counted })));
      await fc.assert(
        fc.asyncProperty(request, async ({ url, counted }) => {
          const before = Number((await app.inject({ url: `${prefix}/api/hello` })).headers['ratelimit-remaining']);
          const remaining = (await app.inject({ url })).headers['ratelimit-remaining'];
          assert.equal(remaining, counted ? String(before - 1) : undefined, url);
        }),
        { numRuns: 300 },
      );
    });
  });
}

describe('rate limiting per client address (inject)', () => {
  let client: Client;
  let store: MemoryRateLimitStore;
  const from = (remoteAddress: string) => client.app.inject({ url: '/api/hello', remoteAddress });
  before(async () => {
    store = new MemoryRateLimitStore({ capacity: 50 });
    client = await injectClient({ rateLimitMax: 2 }, { rateLimitStore: store });
  });
  after(() => client.close());

  it('counts each address on its own', async () => {
    for (const address of ['203.0.113.1', '203.0.113.2']) {
      assert.equal((await from(address)).headers['ratelimit-remaining'], '1');
      assert.equal((await from(address)).headers['ratelimit-remaining'], '0');
      assert.equal((await from(address)).statusCode, 429);
    }
  });

  it('counts an IPv6 client by its /64 network, as one host may hold all of it', async () => {
    assert.equal((await from('2001:db8:1:2::1')).statusCode, 200);
    assert.equal((await from('2001:db8:1:2::ffff')).statusCode, 200);
    assert.equal((await from('2001:db8:1:2:abcd::1')).statusCode, 429);
    assert.equal((await from('2001:db8:1:3::1')).statusCode, 200);
  });

  it('keeps the store within its bound however many addresses come, and the recent ones counted', async () => {
    for (let i = 0; i < 1000; i++) {
      assert.equal((await from(`10.0.${i >> 8}.${i & 255}`)).statusCode, 200);
      assert.ok(store.size <= 50, String(store.size));
    }
    assert.equal(store.size, 50);
    // The latest address (the 1000th, 10.0.3.231) keeps its count and gets its 429 on time.
    assert.equal((await from('10.0.3.231')).headers['ratelimit-remaining'], '0');
    assert.equal((await from('10.0.3.231')).statusCode, 429);
  });
});

describe('rate limiting with TRUST_PROXY and a hostile X-Forwarded-For (inject)', () => {
  const CONNECTION = '192.0.2.7';
  let client: Client;
  let store: MemoryRateLimitStore;
  before(async () => {
    store = new MemoryRateLimitStore({ capacity: 1000 });
    client = await injectClient({ rateLimitMax: 1_000_000, trustProxy: true }, { rateLimitStore: store });
  });
  after(() => client.close());

  const send = (forwardedFor?: string) =>
    client.app.inject({
      url: '/api/hello',
      remoteAddress: CONNECTION,
      ...(forwardedFor !== undefined && { headers: { 'x-forwarded-for': forwardedFor } }),
    });
  const remaining = async (forwardedFor?: string) => Number((await send(forwardedFor)).headers['ratelimit-remaining']);

  it('keeps one key for 5,000 requests with random 8 KB values: no fresh count, no memory', async () => {
    let left = await remaining();
    for (let i = 0; i < 5000; i++) {
      const res = await send(randomBytes(6144).toString('base64'));
      assert.equal(res.statusCode, 200);
      left -= 1;
      assert.equal(res.headers['ratelimit-remaining'], String(left));
    }
    assert.deepEqual([store.size, store.keyCharacters], [1, CONNECTION.length]);
  });

  it('counts any value whose first entry is no IP address as the connection (property)', async () => {
    const entry = fc.oneof(
      fc.string({ maxLength: 2000 }),
      fc.constantFrom('unknown', '_hidden', '192.0.2.1:80', '[::1]', '192.0.2.01', '2001:db8::g', 'for=192.0.2.1'),
    );
    // The client is the first entry that is not empty (all empty: the connection), as the header is read.
    const value = fc
      .array(fc.oneof(entry, fc.ipV4(), fc.ipV6()), { minLength: 1, maxLength: 4 })
      .map((entries) => entries.join(', '))
      .filter((joined) => {
        const first = joined.split(',').find((e) => e.trim() !== '');
        return first === undefined || isIP(first.trim()) === 0;
      });
    await fc.assert(
      fc.asyncProperty(value, async (forwardedFor) => {
        const before = await remaining();
        assert.equal(await remaining(forwardedFor), before - 1, forwardedFor.slice(0, 100));
        assert.deepEqual([store.size, store.keyCharacters], [1, CONNECTION.length]);
      }),
      { numRuns: 500 },
    );
  });
});

describe('rate limiting with TRUST_PROXY and a hostile X-Forwarded-For (server process)', () => {
  after(() => killAllServers());

  it('keeps its memory flat over 10,000 requests, each with a random 8 KB value', { timeout: 120_000 }, async () => {
    const MAX = 1_000_000;
    const logFile = join(await mkdtemp(join(tmpdir(), 'rate-limit-')), 'server.log');
    const server = await startServer({ TRUST_PROXY: 'true', RATE_LIMIT_MAX: String(MAX) }, [], { logFile });
    const pool = new Pool(`http://127.0.0.1:${server.port}`, { connections: 4 });
    const get = async (forwardedFor?: string) => {
      const res = await pool.request({
        method: 'GET',
        path: '/api/hello',
        headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
      });
      await res.body.dump();
      assert.equal(res.statusCode, 200);
      return Number(res.headers['ratelimit-remaining']);
    };
    /** `count` requests, four at a time, each with the X-Forwarded-For `value(i)` gives. */
    const flood = async (count: number, value: (i: number) => string) => {
      let next = 0;
      const worker = async () => {
        while (next < count) await get(value(next++));
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
    };
    try {
      // Warm-up: the heap grows to its working size, with a count for each of 5,000 addresses.
      await flood(5000, (i) => `10.0.${i >> 8}.${i & 255}`);
      const before = await rssMiB(server.child.pid as number);
      await flood(10_000, () => randomBytes(6144).toString('base64'));
      const grown = (await rssMiB(server.child.pid as number)) - before;
      console.log(
        `  10,000 random 8 KB X-Forwarded-For values: resident memory ${before.toFixed(0)} MiB, then +${grown.toFixed(1)} MiB`,
      );
      assert.ok(grown < 30, `grew by ${grown.toFixed(1)} MiB`);
      // Every spoofed value was counted as the connection itself, 127.0.0.1: no fresh count for any.
      assert.equal(await get(), MAX - 10_001);
    } finally {
      await pool.close();
    }
  });
});

/**
 * A reverse proxy as load balancers are: it forwards each request from its own address, 127.0.0.1,
 * appending the address it was called from to X-Forwarded-For (nginx's $proxy_add_x_forwarded_for).
 */
async function appendingProxy(target: string): Promise<{ origin: string; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const proxy = createServer((req, res) => {
    const forwardedFor = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
    const upstream = httpRequest(
      {
        host: hostname,
        port,
        localAddress: '127.0.0.1',
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-for': forwardedFor },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(upstream);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return {
    origin: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    close: async () => {
      proxy.closeAllConnections();
      proxy.close();
      await once(proxy, 'close');
    },
  };
}

describe('rate limiting behind a proxy that appends to X-Forwarded-For (http)', () => {
  /** Three requests from 127.0.0.2 through the proxy, each claiming another address; their statuses. */
  async function spoofed(trustProxy: Config['trustProxy']): Promise<number[]> {
    const app = await buildApp(testConfig({ rateLimitMax: 2, trustProxy }));
    const proxy = await appendingProxy(await app.listen({ host: '127.0.0.1', port: 0 }));
    try {
      return await claimingStatuses(proxy.origin);
    } finally {
      await proxy.close();
      await app.close();
    }
  }

  /** The statuses of three requests to `origin` from 127.0.0.2, each claiming another address in X-Forwarded-For. */
  async function claimingStatuses(origin: string): Promise<number[]> {
    const client = new UndiciClient(origin, { localAddress: '127.0.0.2' });
    try {
      const statuses: number[] = [];
      for (const claimed of ['192.0.2.1', '192.0.2.2', '192.0.2.3']) {
        const res = await client.request({
          method: 'GET',
          path: '/api/hello',
          headers: { 'x-forwarded-for': claimed },
        });
        await res.body.dump();
        statuses.push(res.statusCode);
      }
      return statuses;
    } finally {
      await client.close();
    }
  }

  it("counts the address the proxy saw, whatever the client claims, with TRUST_PROXY set to the proxy's address", async () => {
    assert.deepEqual(await spoofed(['127.0.0.1']), [200, 200, 429]);
  });

  it('counts the address the proxy saw with TRUST_PROXY=1 (one hop)', async () => {
    assert.deepEqual(await spoofed(1), [200, 200, 429]);
  });

  it('gives each claimed address a fresh count with TRUST_PROXY=true, which believes every hop', async () => {
    assert.deepEqual(await spoofed(true), [200, 200, 200]);
  });

  it('believes no X-Forwarded-For from a client that is not the listed proxy', async () => {
    const app = await buildApp(testConfig({ rateLimitMax: 2, trustProxy: ['127.0.0.1'] }));
    const origin = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      assert.deepEqual(await claimingStatuses(origin), [200, 200, 429]);
    } finally {
      await app.close();
    }
  });
});

describe('clientKey', () => {
  it('counts an IPv4 address as itself, an IPv6 one by its /64, and an IPv4-mapped one as the IPv4', () => {
    const connection = '198.51.100.9';
    assert.equal(clientKey('192.0.2.1', connection), '192.0.2.1');
    assert.equal(clientKey('2001:db8:1:2:abcd::1', connection), '2001:db8:1:2::');
    assert.equal(clientKey('2001:0DB8:0001:0002:0000:0000:0000:0001', connection), '2001:db8:1:2::');
    assert.equal(clientKey('fe80::1%eth0', connection), 'fe80::');
    assert.equal(clientKey('::ffff:192.0.2.1', connection), '192.0.2.1');
    assert.equal(clientKey('::FFFF:C000:0201', connection), '192.0.2.1');
    assert.equal(clientKey('::1', connection), '::');
  });

  it("counts text that is not an IP address as the connection's address", () => {
    for (const text of [
      '',
      'unknown',
      '192.0.2.1:8080',
      '[2001:db8::1]',
      '[2001:db8::1]:443',
      '192.0.2.01',
      '192.0.2.256',
      '192.0.2',
      ' 192.0.2.1',
      '0x7f.0.0.1',
      '2001:db8::1::2',
      `fe80::1%${'a'.repeat(100)}`,
      'a'.repeat(8192),
      undefined,
    ]) {
      assert.equal(clientKey(text, '198.51.100.9'), '198.51.100.9', String(text).slice(0, 40));
      assert.equal(clientKey(text, '2001:db8:9:9::5'), '2001:db8:9:9::', String(text).slice(0, 40));
    }
    assert.equal(clientKey('unknown', undefined), '');
  });

  it('makes keys of at most 21 characters whatever the text', () => {
    const text = fc.oneof(fc.string({ maxLength: 100 }), fc.ipV4(), fc.ipV4Extended(), fc.ipV6());
    fc.assert(
      fc.property(text, text, (ip, connection) => {
        const key = clientKey(ip, connection);
        assert.ok(key.length <= 21, key);
        assert.ok(key === '' || isIP(key) !== 0, key);
      }),
      { numRuns: 5000 },
    );
  });
});
