import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { context, createTraceState, propagation, ROOT_CONTEXT, TraceFlags, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { FastifyInstance } from 'fastify';
import { Agent, H2CClient } from 'undici';
import {
  ApiError,
  type Client,
  createClient,
  JsonNumber,
  NetworkError,
  PreconditionFailedError,
  TimeoutError,
} from '../../packages/client/src/index.js';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/config/index.js';
import { LogCapture, listening, rejection, testConfig } from '../helpers.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from '../redis-server.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';

/** A service listening on a free loopback port, and a client of it. */
async function serve(
  overrides: Partial<Config> = {},
): Promise<{ app: FastifyInstance; client: Client; origin: string }> {
  const app = await buildApp(testConfig(overrides));
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, client: createClient({ baseUrl: origin }), origin };
}

describe('the client, against the service in memory', () => {
  let app: FastifyInstance;
  let client: Client;
  let origin: string;
  before(async () => {
    ({ app, client, origin } = await serve());
  });
  after(() => app.close());

  it('greets, searches and reports health and its build', async () => {
    const hello = await client.hello();
    assert.equal(hello.message, 'Hello, World!');
    assert.match(hello.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/);
    assert.deepEqual(await client.greeting('Wörld 🌍 / ?#%'), { greeting: 'Hello, Wörld 🌍 / ?#%!' });
    assert.deepEqual(await client.search({ keyword: 'a&b=c', page: 2 }), {
      keyword: 'a&b=c',
      page: 2,
      results: "Search results for 'a&b=c' (page 2)",
    });
    assert.deepEqual(await client.health(), { status: 'ok' });
    // Run from the sources, as here, the build's commit and time are unknown.
    assert.deepEqual(await client.version(), {
      version: JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version,
      commit: 'unknown',
      build_time: 'unknown',
      runtime: `node ${process.version}`,
    });
    assert.deepEqual(await client.readiness(), { status: 'ready' });
    assert.deepEqual(await client.readiness({ excludeStore: true, verbose: true }), {
      status: 'ready',
      checks: { shutdown: 'ok', operator: 'ok', store: 'excluded' },
    });
  });

  it('echoes numbers beyond 2^53 and long decimals with every digit, keys and __proto__ as sent', async () => {
    const body = {
      big: 2n ** 64n + 1n,
      long: new JsonNumber('0.1000000000000000000000000001'),
      exp: new JsonNumber('1E+400'),
      list: [1, 'two', null, true],
      ['__proto__']: { x: 1 },
    };
    const { received, echo } = await client.echo(body);
    assert.equal(echo, true);
    assert.deepEqual(Object.keys(received), ['big', 'long', 'exp', 'list', '__proto__']);
    assert.equal((received.big as JsonNumber).text, '18446744073709551617');
    assert.equal((received.long as JsonNumber).text, '0.1000000000000000000000000001');
    assert.equal((received.exp as JsonNumber).text, '1E+400');
    assert.equal(Number(((received.list as unknown[])[0] as JsonNumber).text), 1);
  });

  it('converts exactly, beyond what a double holds: amount, rate and result are decimal strings', async () => {
    const result = await client.exchange({ from: 'USD', to: 'VND', amount: '999999999999.99' });
    assert.equal(typeof result.result, 'string');
    assert.equal(typeof result.rate, 'string');
    assert.equal(result.amount, '999999999999.99');
    const served = await (await fetch(`${origin}/api/exchange?from=USD&to=VND&amount=999999999999.99`)).text();
    assert.ok(served.includes(`"result":${result.result},`) || served.endsWith(`"result":${result.result}}`), served);
    assert.ok(BigInt(result.result.split('.')[0] ?? '') > 2n ** 53n, result.result);
    const same = await client.exchange({ from: 'eur', to: 'EUR', amount: 123456789012n });
    assert.deepEqual(same, { from: 'EUR', to: 'EUR', amount: '123456789012', rate: '1', result: '123456789012' });
    const precise = await client.exchange({ from: 'USD', to: 'USD', amount: new JsonNumber('0.0000000001') });
    assert.equal(precise.result, '0.0000000001');
  });

  it('lists currencies by offset and by cursor, selects fields, and walks every page', async () => {
    const first = await client.currencies.list({ per_page: 5, sort: ['-rate', 'code'], fields: ['code', 'rate'] });
    assert.ok('total' in first.pagination);
    assert.equal(first.data.length, 5);
    for (const item of first.data) {
      assert.deepEqual(Object.keys(item), ['code', 'rate']);
      assert.equal(typeof item.rate, 'string');
    }
    const total = first.pagination.total;
    const codes: string[] = [];
    for await (const currency of client.currencies.all({ limit: 7, fields: ['code'] })) codes.push(currency.code);
    assert.equal(codes.length, total);
    assert.equal(new Set(codes).size, total);
    const euro = await client.currencies.get('eur');
    assert.equal(euro.code, 'EUR');
    assert.equal(typeof euro.rate, 'string');
    assert.equal(typeof euro.minor_units, 'number');
  });

  it('makes every error an ApiError with status, code, message, details, request id and headers', async () => {
    const invalid = await rejection(client.search({ keyword: ' ', page: 0 }, { requestId: 'trace-42' }), ApiError);
    assert.equal(invalid.status, 400);
    assert.equal(invalid.code, 'VALIDATION_ERROR');
    assert.equal(invalid.requestId, 'trace-42');
    assert.equal(invalid.headers.get('x-request-id'), 'trace-42');
    assert.deepEqual(
      invalid.details.map(({ field }) => field),
      ['keyword', 'page'],
    );
    const missing = await rejection(client.currencies.get('XXX'), ApiError);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, 'NOT_FOUND');
    const unsupported = await rejection(client.exchange({ from: 'USD', to: 'XXX', amount: '1' }), ApiError);
    assert.equal(unsupported.code, 'UNSUPPORTED_CURRENCY');
  });

  it('tells an answer that is no envelope from one that is, and a failed connection from both', async () => {
    const html = createClient({
      baseUrl: origin,
      fetch: async () =>
        new Response('<h1>Bad Gateway</h1>', { status: 502, headers: { 'content-type': 'text/html' } }),
    });
    const error = await rejection(html.hello(), ApiError);
    assert.equal(error.status, 502);
    assert.equal(error.code, 'UNEXPECTED_RESPONSE');
    const closed = await serve();
    await closed.app.close();
    await rejection(closed.client.hello(), NetworkError);
  });
});

describe('the client and what the platform does to URLs and numbers', () => {
  let app: FastifyInstance;
  let client: Client;
  let origin: string;
  before(async () => {
    ({ app, client, origin } = await serve());
  });
  after(() => app.close());

  it('writes an amount given as a number or a JsonNumber as a plain decimal, never with an exponent', async () => {
    const small = await client.exchange({ from: 'USD', to: 'USD', amount: 1e-7 });
    assert.equal(small.amount, '0.0000001');
    const hundred = await client.exchange({ from: 'USD', to: 'USD', amount: new JsonNumber('1e2') });
    assert.equal(hundred.amount, '100');
    const sent: string[] = [];
    const recording = createClient({
      baseUrl: origin,
      fetch: (input, init) => {
        sent.push(new URL(String(input)).searchParams.get('amount') ?? '');
        return fetch(input, init);
      },
    });
    for (const amount of [1e21, 123.456e-3, new JsonNumber('-0.5E+1'), new JsonNumber('12.50e-4'), 5n]) {
      await recording.exchange({ from: 'USD', to: 'USD', amount }).catch(() => undefined);
    }
    assert.deepEqual(sent, ['1000000000000000000000', '0.123456', '-5', '0.001250', '5']);
  });

  it('refuses a path argument that would change the path, in every method that takes one, before sending anything', async () => {
    let calls = 0;
    const counting = createClient({
      baseUrl: origin,
      fetch: (input, init) => {
        calls++;
        return fetch(input, init);
      },
    });
    const methods = [
      ['greeting', (value: string) => counting.greeting(value)],
      ['currencies.get', (value: string) => counting.currencies.get(value)],
    ] as const;
    const refusals = [
      ['', 'an empty path segment would name another resource'],
      ['.', 'a dot-segment cannot be sent as a URL path segment'],
      ['..', 'a dot-segment cannot be sent as a URL path segment'],
      ['a\uD800', 'a lone surrogate has no UTF-8 to send'],
    ] as const;
    for (const [name, method] of methods) {
      for (const [value, why] of refusals) {
        const error = await rejection(method(value), RangeError);
        assert.equal(error.message, `${name}(${JSON.stringify(value)}): ${why}`);
      }
      const notText = await rejection(method(undefined as unknown as string), TypeError);
      assert.equal(notText.message, `${name}: undefined given where a string goes`);
    }
    assert.equal(calls, 0);
    assert.deepEqual(await counting.greeting('...'), { greeting: 'Hello, ...!' });
    assert.deepEqual(await counting.greeting('.a'), { greeting: 'Hello, .a!' });
    assert.deepEqual(await counting.greeting('%2e%2E'), { greeting: 'Hello, %2e%2E!' });
    const asSent = await rejection(counting.currencies.get('%2e%2e'), ApiError);
    assert.deepEqual(
      asSent.details.map(({ field, value }) => ({ field, value })),
      [{ field: 'code', value: '%2e%2e' }],
    );
  });
});

/** A loopback port with nothing listening on it: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

describe('the client when no answer comes', () => {
  it('names the request and the system error of a refused connection, the platform error as the cause', async () => {
    const port = await closedPort();
    const error = await rejection(createClient({ baseUrl: `http://127.0.0.1:${port}` }).hello(), NetworkError);
    assert.equal(
      error.message,
      `GET http://127.0.0.1:${port}/api/hello got no answer: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    assert.equal(error.code, 'ECONNREFUSED');
    assert.equal((error.cause as Error).message, 'fetch failed');
  });

  it('names the host a name that resolves nowhere (.invalid) and the resolver error', async () => {
    const client = createClient({ baseUrl: 'http://nowhere.invalid/svc' });
    const error = await rejection(client.greeting('Ada'), NetworkError);
    // ENOTFOUND where a resolver answers; EAI_AGAIN on a host with none configured.
    assert.match(
      error.message,
      /^GET http:\/\/nowhere\.invalid\/svc\/api\/hello\/Ada got no answer: getaddrinfo (ENOTFOUND|EAI_AGAIN) nowhere\.invalid$/,
    );
    assert.match(error.code ?? '', /^(ENOTFOUND|EAI_AGAIN)$/);
  });

  it("lists each address's error of an AggregateError (every address of a name refused), as undici throws it", async () => {
    const refused = (address: string) =>
      Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: 'ECONNREFUSED' });
    const aggregate = Object.assign(new AggregateError([refused('::1:8080'), refused('127.0.0.1:8080')], ''), {
      code: 'ECONNREFUSED',
    });
    const client = createClient({
      baseUrl: 'http://localhost:8080',
      fetch: async () => {
        throw new TypeError('fetch failed', { cause: aggregate });
      },
    });
    const error = await rejection(client.hello(), NetworkError);
    assert.equal(
      error.message,
      'GET http://localhost:8080/api/hello got no answer: connect ECONNREFUSED ::1:8080; connect ECONNREFUSED 127.0.0.1:8080',
    );
    assert.equal(error.code, 'ECONNREFUSED');
  });
});

/** A server of the test's own, answering as its handler says: its origin, and how to close it with its connections. */
async function fakeService(handler: RequestListener): Promise<{ origin: string; close: () => void }> {
  const server = createServer(handler).listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('the client when the answer is cut short', () => {
  let origin: string;
  let close: () => void;
  before(async () => {
    // Headers and the start of a body, then a reset (/reset) or silence (/stall).
    ({ origin, close } = await fakeService((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"message":');
      if (req.url?.startsWith('/api/hello/reset')) setTimeout(() => res.socket?.destroy(), 100);
    }));
  });
  after(() => close());

  it('makes a reset while the body is read a NetworkError, with the cause', async () => {
    const error = await rejection(createClient({ baseUrl: origin }).greeting('reset'), NetworkError);
    assert.equal(error.message, `GET ${origin}/api/hello/reset answer cut short: other side closed (UND_ERR_SOCKET)`);
    assert.equal(error.code, 'UND_ERR_SOCKET');
    assert.ok(error.cause instanceof Error);
  });

  it("makes a timeout while the body is read a NetworkError, with the signal's reason as the cause", async () => {
    const signal = AbortSignal.timeout(1000);
    const error = await rejection(createClient({ baseUrl: origin }).greeting('stall', { signal }), NetworkError);
    assert.equal(error.name, 'NetworkError', "the caller's own timeout is no TimeoutError of the client");
    assert.equal(
      error.message,
      `GET ${origin}/api/hello/stall answer cut short: The operation was aborted due to timeout`,
    );
    assert.equal((error.cause as Error).name, 'TimeoutError');
  });
});

describe('timeouts', () => {
  let origin: string;
  let close: () => void;
  /** The requests the server took, by path. */
  const requests: string[] = [];
  before(async () => {
    // /slow-head/<ms>: the head after ms; /stall: headers and the start of a body, then silence;
    // /busy-then/<ms>: 503 after ms with Retry-After: 0, then 200 after ms; /silent: nothing.
    let busy = true;
    ({ origin, close } = await fakeService((req, res) => {
      const path = req.url ?? '';
      requests.push(path);
      const ms = Number(path.split('/')[2]);
      const answer = (status: number) =>
        res
          .writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' })
          .end(status === 200 ? '{"message":"Hello, World!","timestamp":"x"}' : '{}');
      if (path.startsWith('/slow-head/')) setTimeout(() => answer(200), ms);
      if (path.startsWith('/busy-then/')) {
        setTimeout(() => answer(busy ? 503 : 200), ms);
        busy = !busy;
      }
      if (path === '/stall/api/hello') res.writeHead(200, { 'content-length': '100' }).write('{"message":');
    }));
  });
  after(() => close());

  it('fails an attempt whose head is late with a TimeoutError naming the method and URL, a NetworkError', {
    timeout: 10_000,
  }, async () => {
    const client = createClient({ baseUrl: `${origin}/silent`, timeout: 200 });
    const started = Date.now();
    const error = await rejection(client.hello(), TimeoutError);
    const took = Date.now() - started;
    assert.ok(took >= 190 && took < 3000, `${took} ms`);
    assert.ok(error instanceof NetworkError);
    assert.equal(error.name, 'TimeoutError');
    assert.equal(error.message, `GET ${origin}/silent/api/hello timed out after 200 ms`);
  });

  it('times the body too: an answer that stalls after its head is a TimeoutError', { timeout: 10_000 }, async () => {
    const error = await rejection(createClient({ baseUrl: `${origin}/stall`, timeout: 300 }).hello(), TimeoutError);
    assert.equal(error.message, `GET ${origin}/stall/api/hello timed out after 300 ms`);
  });

  it("takes the call's timeout over the client's, false for none", { timeout: 10_000 }, async () => {
    const patient = createClient({ baseUrl: `${origin}/slow-head/400`, timeout: false });
    await rejection(patient.hello({ timeout: 100 }), TimeoutError);
    const hasty = createClient({ baseUrl: `${origin}/slow-head/400`, timeout: 100 });
    assert.equal((await hasty.hello({ timeout: false })).message, 'Hello, World!');
    assert.equal((await hasty.hello({ timeout: 2000 })).message, 'Hello, World!');
  });

  it("composes with the caller's signal: whichever comes first ends the call, each as its own error", {
    timeout: 10_000,
  }, async () => {
    const client = createClient({ baseUrl: `${origin}/silent`, timeout: 5000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const aborted = await rejection(client.hello({ signal: controller.signal }), NetworkError);
    assert.ok(Date.now() - started < 3000);
    assert.equal(aborted.name, 'NetworkError');
    assert.equal(aborted.message, `GET ${origin}/silent/api/hello got no answer: This operation was aborted`);
    const mine = new AbortController();
    await rejection(client.hello({ signal: mine.signal, timeout: 100 }), TimeoutError);
    assert.equal(mine.signal.aborted, false, "the caller's signal is left as it was");
  });

  it('composes so where the platform has no AbortSignal.any (Safari before 17.4)', { timeout: 10_000 }, async () => {
    const any = Object.getOwnPropertyDescriptor(AbortSignal, 'any');
    Reflect.deleteProperty(AbortSignal, 'any');
    try {
      const client = createClient({ baseUrl: `${origin}/silent`, timeout: 5000 });
      const aborted = await rejection(client.hello({ signal: AbortSignal.abort() }), NetworkError);
      assert.equal(aborted.name, 'NetworkError');
      const mine = new AbortController();
      setTimeout(() => mine.abort(), 100);
      assert.equal((await rejection(client.hello({ signal: mine.signal }), NetworkError)).name, 'NetworkError');
      await rejection(client.hello({ signal: new AbortController().signal, timeout: 100 }), TimeoutError);
    } finally {
      if (any !== undefined) Object.defineProperty(AbortSignal, 'any', any);
    }
  });

  it('gives each attempt its own time, and tries no more after a timeout', { timeout: 10_000 }, async () => {
    // Two attempts of 300 ms each, 600 in all: each within 500 ms, the call not.
    const client = createClient({ baseUrl: `${origin}/busy-then/300`, timeout: 500 });
    assert.equal((await client.hello()).message, 'Hello, World!');
    requests.length = 0;
    await rejection(createClient({ baseUrl: `${origin}/silent`, timeout: 100 }).greeting('Ada'), TimeoutError);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(requests, ['/silent/api/hello/Ada']);
  });

  it('refuses a timeout that is no number of milliseconds from 1 to 2^31 - 1, or false', {
    timeout: 10_000,
  }, async () => {
    for (const timeout of [0, -1, Number.NaN, 2 ** 31, true as unknown as number]) {
      const message = `timeout: ${String(timeout)} is not false nor a number of milliseconds from 1 to 2147483647`;
      assert.throws(() => createClient({ baseUrl: origin, timeout }), { name: 'RangeError', message });
      const error = await rejection(createClient({ baseUrl: origin }).hello({ timeout }), RangeError);
      assert.equal(error.message, message);
    }
    assert.deepEqual(
      requests.filter((path) => !path.includes('silent')),
      [],
    );
  });
});

describe('the client over HTTP/2, through an undici dispatcher', {
  skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
}, () => {
  let files: TlsFiles;
  before(() => {
    files = makeTlsFiles();
  });
  after(() => files?.remove());

  it('speaks h2 over TLS with Agent({ allowH2 }), and h2c with H2CClient: the same answers, errors included', async () => {
    const secure = await listening({ http2: true, tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey });
    const cleartext = await listening({ http2: true });
    const agent = new Agent({ allowH2: true, connect: { ca: readFileSync(files.ca) } });
    const h2c = new H2CClient(cleartext.origin);
    try {
      for (const [server, dispatcher] of [
        [secure, agent],
        [cleartext, h2c],
      ] as const) {
        const client = createClient({ baseUrl: server.origin, dispatcher });
        assert.deepEqual(await client.greeting('Ada', { requestId: 'client-h2' }), { greeting: 'Hello, Ada!' });
        const { result } = await client.exchange({ from: 'USD', to: 'JPY', amount: '100.5' });
        assert.equal(result, '15160');
        const error = await rejection(client.search({ keyword: '' }), ApiError);
        assert.equal(error.code, 'VALIDATION_ERROR');
        await client.profile.update({ name: 'Ada' });
        // Written once the answer is sent: the line is looked for a moment later.
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(server.logs.lineOf('client-h2').http_version, '2.0');
      }
    } finally {
      await agent.close();
      await h2c.close();
      await secure.app.close();
      await cleartext.app.close();
    }
  });
});

describe('the profile through the client, in memory', () => {
  let app: FastifyInstance;
  let client: Client;
  before(async () => {
    ({ app, client } = await serve());
  });
  after(() => app.close());

  it('reads the profile with its ETag, writes it conditionally, and answers 304 as null', async () => {
    const read = await client.profile.get();
    assert.ok(read !== null);
    assert.match(read.etag, /^"\d+"$/);
    assert.equal(await client.profile.get({ ifNoneMatch: read.etag }), null);
    const updated = await client.profile.update({ name: 'Ada' }, { ifMatch: read.etag });
    assert.equal(updated.profile.name, 'Ada');
    assert.notEqual(updated.etag, read.etag);
    const patched = await client.profile.patch({ bio: 'Wrote the first program.' });
    assert.deepEqual(patched.profile, { ...updated.profile, bio: 'Wrote the first program.' });
    const replaced = await client.profile.replace({ email: 'ada@example.com' });
    assert.deepEqual(replaced.profile, { name: null, email: 'ada@example.com', bio: null });
  });

  it('types a read without ifNoneMatch as never null, and throws the 304 a header of its own asked for', async () => {
    const { etag } = await client.profile.get();
    const error = await rejection(client.profile.get({ headers: { 'if-none-match': etag } }), ApiError);
    assert.equal(error.status, 304);
    assert.equal(error.code, 'UNEXPECTED_RESPONSE');
    assert.equal(error.message, 'HTTP 304 to a read without `ifNoneMatch`: give the version there, not as a header.');
  });

  it('gives the loser of a race a PreconditionFailedError, and changes nothing for it', async () => {
    const read = await client.profile.get();
    assert.ok(read !== null);
    const results = await Promise.allSettled([
      client.profile.update({ name: 'first' }, { ifMatch: read.etag }),
      client.profile.update({ name: 'second' }, { ifMatch: read.etag }),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    assert.equal(won.length, 1);
    assert.equal(lost.length, 1);
    const error = (lost[0] as PromiseRejectedResult).reason;
    assert.ok(error instanceof PreconditionFailedError);
    assert.equal(error.status, 412);
    assert.equal(error.code, 'PRECONDITION_FAILED');
    const now = await client.profile.get();
    assert.equal(
      now?.profile.name,
      (won[0] as PromiseFulfilledResult<{ profile: { name: string } }>).value.profile.name,
    );
  });
});

describe('retries', () => {
  let app: FastifyInstance;
  let origin: string;
  before(async () => {
    ({ app, origin } = await serve({ rateLimitMax: 2, rateLimitWindowMs: 1000 }));
  });
  after(() => app.close());

  it('retries a GET refused with 429 after the Retry-After the service sent, and succeeds', async () => {
    const client = createClient({ baseUrl: origin });
    const started = Date.now();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await client.hello());
    assert.equal(answers.length, 3);
    assert.ok(Date.now() - started >= 500, 'the third call waited for the window to end');
  });

  it('gives up on a 429 without retrying when retries are off, with the Retry-After header', async () => {
    const client = createClient({ baseUrl: origin, retry: false });
    let error: ApiError | undefined;
    for (let i = 0; i < 3 && error === undefined; i++) {
      try {
        await client.hello();
      } catch (thrown) {
        error = thrown as ApiError;
      }
    }
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 429);
    assert.equal(error.code, 'RATE_LIMIT_EXCEEDED');
    assert.match(error.headers.get('retry-after') ?? '', /^\d+$/);
  });

  it('never retries a POST or PATCH unless asked, and stops when Retry-After is longer than allowed', async () => {
    let calls = 0;
    const busy = async () => {
      calls++;
      return new Response(
        '{"error":{"code":"SERVICE_UNAVAILABLE","message":"Busy.","details":[],"timestamp":"","request_id":"x"}}',
        {
          status: 503,
          headers: { 'content-type': 'application/json', 'retry-after': '0' },
        },
      );
    };
    const client = createClient({ baseUrl: origin, fetch: busy });
    await rejection(client.profile.update({ name: 'Ada' }), ApiError);
    assert.equal(calls, 1);
    await rejection(client.profile.replace({ name: 'Ada' }), ApiError);
    assert.equal(calls, 1 + 3, 'PUT is idempotent: three tries');
    const unsafe = createClient({ baseUrl: origin, fetch: busy, retry: { unsafeMethods: true, attempts: 2 } });
    await rejection(unsafe.profile.patch({ name: 'Ada' }), ApiError);
    assert.equal(calls, 4 + 2);
    const patient = createClient({
      baseUrl: origin,
      fetch: async () => new Response('', { status: 429, headers: { 'retry-after': '60' } }),
      retry: { maxDelayMs: 1000 },
    });
    const started = Date.now();
    await rejection(patient.hello(), ApiError);
    assert.ok(Date.now() - started < 1000, 'no wait of 60 s');
  });
});

describe('the client against two instances sharing Redis', { skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON }, () => {
  let redis: RedisServer;
  let one: Awaited<ReturnType<typeof serve>>;
  let two: Awaited<ReturnType<typeof serve>>;
  before(async () => {
    redis = await RedisServer.start();
    const shared = { redisUrl: redis.url, cursorSecret: 'a-secret-both-instances-share-0123456789' };
    one = await serve(shared);
    two = await serve(shared);
  });
  after(async () => {
    await one?.app.close();
    await two?.app.close();
    await redis?.kill();
  });

  it('writes through one instance with the ETag read from the other, and loses a race as a 412', async () => {
    const read = await one.client.profile.get();
    assert.ok(read !== null);
    const written = await two.client.profile.update({ name: 'Grace' }, { ifMatch: read.etag });
    assert.equal((await one.client.profile.get())?.etag, written.etag);
    await rejection(one.client.profile.update({ name: 'late' }, { ifMatch: read.etag }), PreconditionFailedError);
  });

  it('follows cursors issued by the other instance to the end', async () => {
    const first = await one.client.currencies.list({ limit: 10 });
    assert.ok('next_cursor' in first.pagination);
    const rest = await two.client.currencies.list({ limit: 10, cursor: first.pagination.next_cursor });
    assert.equal(rest.data.length, 10);
    assert.notDeepEqual(rest.data[0], first.data[0]);
  });
});

/** Each operation of the document, and the client's method for it. */
const METHODS: Record<string, string> = {
  getHello: 'hello',
  getGreeting: 'greeting',
  search: 'search',
  echo: 'echo',
  getProfile: 'profile.get',
  updateProfile: 'profile.update',
  patchProfile: 'profile.patch',
  replaceProfile: 'profile.replace',
  exchange: 'exchange',
  listCurrencies: 'currencies.list',
  getCurrency: 'currencies.get',
  getHealth: 'health',
  getVersion: 'version',
  getReadiness: 'readiness',
  getEvents: 'events',
};
/** Operations that are not the JSON API: the documents themselves, and Prometheus's text. */
const NOT_IN_THE_CLIENT = ['getOpenApi', 'getAsyncApi', 'getMetrics'];
/** Methods that are no operation of their own. */
const HELPERS = ['currencies.all'];

/** The dotted names of the functions of a client, one level of groups deep. */
function methodsOf(client: Client): string[] {
  return Object.entries(client).flatMap(([name, member]) =>
    typeof member === 'function' ? [name] : Object.keys(member as object).map((inner) => `${name}.${inner}`),
  );
}

describe('the client and the OpenAPI document', () => {
  it('has a method for every operation of the document, and none for an operation it does not have', async () => {
    const app = await buildApp(testConfig());
    try {
      const document = (await app.inject({ url: '/openapi.json' })).json() as {
        paths: Record<string, Record<string, { operationId?: string }>>;
      };
      const operations = Object.values(document.paths).flatMap((item) =>
        Object.values(item).flatMap((operation) =>
          operation.operationId === undefined ? [] : [operation.operationId],
        ),
      );
      assert.deepEqual(
        [...operations].sort(),
        [...Object.keys(METHODS), ...NOT_IN_THE_CLIENT].sort(),
        'the document and the table of methods name the same operations',
      );
      const client = createClient({ baseUrl: 'http://127.0.0.1:1' });
      assert.deepEqual(methodsOf(client).sort(), [...Object.values(METHODS), ...HELPERS].sort());
    } finally {
      await app.close();
    }
  });

  it('types the decimals as strings and the answers by the service schemas', async () => {
    const client = createClient({ baseUrl: 'http://127.0.0.1:1' });
    const typed = async () => {
      const result = await client.exchange({ from: 'USD', to: 'EUR', amount: '1' });
      const text: string = result.result;
      // @ts-expect-error: an exact decimal is a string, not a binary number
      const number: number = result.amount;
      const currency = await client.currencies.get('EUR', { fields: ['code'] });
      // @ts-expect-error: only the fields asked for are there
      currency.rate;
      // @ts-expect-error: the profile has no such field
      await client.profile.update({ nickname: 'Ada' });
      const { etag } = await client.profile.get({ requestId: 'r' });
      const conditional = await client.profile.get({ ifNoneMatch: etag });
      // @ts-expect-error: null when the version named is current
      conditional.etag;
      const { received } = await client.echo({ big: 2n ** 64n, list: [1, 'two'], nested: { n: 1.5, gone: undefined } });
      const exact: string = received.big.text;
      const item: JsonNumber | string | undefined = received.list[0];
      const nested: JsonNumber = received.nested.n;
      // @ts-expect-error: a member sent as undefined is left out, and not echoed
      received.nested.gone;
      const { received: some } = await client.echo({ maybe: Math.random() > 0.5 ? 1 : undefined } as {
        maybe?: number;
      });
      const maybe: JsonNumber | undefined = some.maybe;
      return [text, number, exact, item, nested, maybe];
    };
    assert.equal(typeof typed, 'function', 'checked by the type checker (npm run typecheck), not run');
  });
});

describe('the client and W3C Trace Context', () => {
  const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  let app: FastifyInstance;
  let origin: string;
  const logs = new LogCapture();
  /** The headers of every request the client sent, in order. */
  const sent: Headers[] = [];
  const recording: typeof fetch = (input, init) => {
    sent.push(new Headers(init?.headers));
    return fetch(input, init);
  };
  before(async () => {
    app = await buildApp(testConfig({ logLevel: 'info' }), { logStream: logs });
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    context.disable();
    propagation.disable();
    await app.close();
  });

  it("sends the call's traceparent and tracestate, which the service continues", async () => {
    const client = createClient({ baseUrl: origin, fetch: recording });
    await client.hello({ traceparent: TRACEPARENT, tracestate: 'rojo=1', requestId: 'client-traced' });
    const headers = sent.at(-1);
    assert.equal(headers?.get('traceparent'), TRACEPARENT);
    assert.equal(headers?.get('tracestate'), 'rojo=1');
    const line = logs.lines.find((entry) => entry.request_id === 'client-traced');
    assert.equal(line?.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('sends none without one, while no OpenTelemetry propagator is registered', async () => {
    await createClient({ baseUrl: origin, fetch: recording }).hello();
    assert.equal(sent.at(-1)?.get('traceparent'), null);
  });

  it("sends the active OpenTelemetry context's trace headers, and no other header of its propagators", async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(
      new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
    );
    const client = createClient({ baseUrl: origin, fetch: recording });
    const spanContext = {
      traceId: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
      spanId: 'bbbbbbbbbbbbbbbb',
      traceFlags: TraceFlags.SAMPLED,
      traceState: createTraceState('congo=t61rcWkgMzE'),
    };
    const active = propagation.setBaggage(
      trace.setSpanContext(ROOT_CONTEXT, spanContext),
      propagation.createBaggage({ user: { value: 'ada' } }),
    );
    await context.with(active, () => client.hello());
    const headers = sent.at(-1);
    assert.equal(headers?.get('traceparent'), '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01');
    assert.equal(headers?.get('tracestate'), 'congo=t61rcWkgMzE');
    assert.equal(headers?.get('baggage'), null);
    // The call's own traceparent wins over the context's.
    await context.with(active, () => client.hello({ traceparent: TRACEPARENT }));
    assert.equal(sent.at(-1)?.get('traceparent'), TRACEPARENT);
    assert.equal(sent.at(-1)?.get('tracestate'), null);
  });
});

describe('the client and content codings', () => {
  const seen: { encoding: string | undefined; accept: string | undefined }[] = [];
  let app: FastifyInstance;
  let origin: string;
  before(async () => {
    ({ app, origin } = await listening({}, (service) => {
      service.addHook('onRequest', (request, _reply, done) => {
        const { 'content-encoding': encoding, 'accept-encoding': accept } = request.headers;
        seen.push({ encoding, accept });
        done();
      });
    }));
  });
  after(() => app.close());

  it('asks for br, gzip and deflate, and reads a coded answer exactly', async () => {
    const client = createClient({ baseUrl: origin });
    const big = { text: 'é'.repeat(10_000), n: new JsonNumber('12345678901234567890.5') };
    const { received } = await client.echo(big);
    assert.equal(seen.at(-1)?.accept, 'br, gzip, deflate');
    assert.equal(seen.at(-1)?.encoding, undefined);
    assert.equal(received.text, big.text);
    assert.equal((received.n as JsonNumber).text, '12345678901234567890.5');
  });

  it('with gzipBodiesFrom, sends a body that large in gzip and a smaller one plain, both exact', async () => {
    const client = createClient({ baseUrl: origin, gzipBodiesFrom: 1024 });
    const big = { text: 'x'.repeat(2000), n: 2n ** 64n };
    const { received } = await client.echo(big);
    assert.equal(seen.at(-1)?.encoding, 'gzip');
    assert.equal(received.text, big.text);
    assert.equal((received.n as JsonNumber).text, '18446744073709551616');
    await client.echo({ small: true });
    assert.equal(seen.at(-1)?.encoding, undefined);
    const written = await client.profile.replace({ name: 'Ada', email: 'ada@example.com', bio: 'y'.repeat(1000) });
    assert.equal(seen.at(-1)?.encoding, 'gzip');
    assert.equal(written.profile.bio, 'y'.repeat(1000));
    assert.match(written.etag, /^"\d+-br"$/);
    const again = await client.profile.update({ name: 'Grace' }, { ifMatch: written.etag });
    assert.equal(again.profile.name, 'Grace');
  });
});
