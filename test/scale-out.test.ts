import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { type Config, DEFAULT_CONFIG } from '../src/config/index.js';
import type { ProfileStore } from '../src/stores/profile.js';
import { RedisConnection } from '../src/stores/redis-connection.js';
import { RedisProfileStore } from '../src/stores/redis-profile.js';
import { assertEnvelope, type Client, httpClient, LogCapture, type TestResponse } from './helpers.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from './redis-server.js';

/**
 * The Redis timeout of these instances: how long a request may wait for a Redis that does not
 * answer. Twice the default: with three test files at a time on two cores, a reply can wait that
 * long in a busy event loop, and 50 writers at once must not time out.
 */
const TIMEOUT_MS = 1_000;
/** What a request may take beyond that timeout on a busy test machine. */
const MARGIN_MS = 300;
const OUTAGE_WARNING = 'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back';

interface Instance {
  client: Client;
  logs: LogCapture;
}

/** One instance of the service on its own port, logging into its own capture. */
async function instance(redisUrl: string, overrides: Partial<Config> = {}): Promise<Instance> {
  const logs = new LogCapture();
  const client = await httpClient(
    { redisUrl, redisTimeoutMs: TIMEOUT_MS, logLevel: 'info', ...overrides },
    { logStream: logs },
  );
  return { client, logs };
}

/** Polls /readyz until it is 200; returns how long that took. */
async function untilReady(client: Client, ms = 5000): Promise<number> {
  const started = performance.now();
  while ((await client.send({ path: '/readyz' })).status !== 200) {
    assert.ok(performance.now() - started < ms, 'not ready in time');
    await sleep(20);
  }
  return performance.now() - started;
}

/** Sends a request, asserting it is answered within the Redis timeout plus a margin and never with a 500. */
async function sendQuickly(client: Client, request: Parameters<Client['send']>[0]): Promise<TestResponse> {
  const started = performance.now();
  const res = await client.send(request);
  const elapsed = performance.now() - started;
  assert.ok(elapsed < TIMEOUT_MS + MARGIN_MS, `${request.path} took ${elapsed} ms`);
  assert.notEqual(res.status, 500, res.text);
  return res;
}

function writeProfile(
  client: Client,
  method: 'POST' | 'PUT' | 'PATCH',
  fields: object,
  headers: Record<string, string> = {},
): Promise<TestResponse> {
  return client.send({
    method,
    path: '/api/profile',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(fields),
  });
}

function assertStoreUnavailable(res: TestResponse): void {
  const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
  assert.equal(error.message, 'The shared store is unavailable; try again shortly.');
  assert.equal(res.headers['retry-after'], '1');
}

function assertNotReady(res: TestResponse, reason: RegExp): void {
  const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
  assert.match(error.message, reason);
}

describe('several instances sharing one Redis', { skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON }, () => {
  let server: RedisServer;
  let admin: Redis;
  let a: Instance;
  let b: Instance;
  const open: Instance[] = [];
  before(async () => {
    server = await RedisServer.start();
    admin = new Redis(server.url);
    admin.on('error', () => {}); // it reconnects by itself after the tests that stop Redis
    a = await instance(server.url);
    b = await instance(server.url);
    open.push(a, b);
    await Promise.all([untilReady(a.client), untilReady(b.client)]);
  });
  after(async () => {
    await Promise.all(open.map(({ client }) => client.close()));
    admin?.disconnect();
    await server?.kill();
  });
  beforeEach(async () => {
    // A test that stopped Redis and failed is not to fail the next ones too.
    if (!server.running) await server.restart();
    server.resume();
    await Promise.all([untilReady(a.client), untilReady(b.client)]);
    await admin.flushall();
  });

  it('reads back from B, with the same ETag, the profile written through A', async () => {
    const written = await writeProfile(a.client, 'POST', { name: 'Ada', email: 'ada@example.com' });
    assert.equal(written.status, 200, written.text);
    const read = await b.client.send({ path: '/api/profile' });
    assert.equal(read.status, 200);
    assert.deepEqual(read.json(), { name: 'Ada', email: 'ada@example.com', bio: null });
    assert.equal(read.headers.etag, written.headers.etag);
    const notModified = await b.client.send({
      path: '/api/profile',
      headers: { 'if-none-match': String(written.headers.etag) },
    });
    assert.equal(notModified.status, 304);
  });

  it('answers 412 on B to an If-Match taken from A before a write on A, and changes nothing', async () => {
    const taken = String((await a.client.send({ path: '/api/profile' })).headers.etag);
    const written = await writeProfile(a.client, 'PATCH', { name: 'Ada' });
    assert.equal(written.status, 200);
    assert.notEqual(written.headers.etag, taken);
    const stale = await writeProfile(b.client, 'PUT', { name: 'Grace' }, { 'if-match': taken });
    const error = assertEnvelope(stale, 412, 'PRECONDITION_FAILED');
    assert.equal(error.message, 'If-Match does not match the current ETag of the profile.');
    const read = await b.client.send({ path: '/api/profile' });
    assert.deepEqual(read.json(), { name: 'Ada', email: null, bio: null });
    assert.equal(read.headers.etag, written.headers.etag);
  });

  it('REDIS_MIN_REPLICAS_ACK=1 on a Redis with no replica: a write 503 after the timeout, made on the primary alone; reads go on', async () => {
    const durable = await instance(server.url, { redisMinReplicasAck: 1 });
    open.push(durable);
    await untilReady(durable.client);
    const taken = String((await durable.client.send({ path: '/api/profile' })).headers.etag);
    const started = performance.now();
    const refused = await writeProfile(durable.client, 'PUT', { name: 'Ada' }, { 'if-match': taken });
    const elapsed = performance.now() - started;
    assertStoreUnavailable(refused);
    assert.ok(elapsed > TIMEOUT_MS - 50 && elapsed < TIMEOUT_MS + MARGIN_MS, `took ${elapsed} ms`);
    // Not known to be durable, but made: read back from another instance, and a retry with the
    // same If-Match cannot make it twice.
    const read = await b.client.send({ path: '/api/profile' });
    assert.deepEqual(read.json(), { name: 'Ada', email: null, bio: null });
    assert.notEqual(read.headers.etag, taken);
    assertEnvelope(
      await writeProfile(durable.client, 'PUT', { name: 'Ada' }, { 'if-match': taken }),
      412,
      'PRECONDITION_FAILED',
    );
    assert.equal((await durable.client.send({ path: '/readyz' })).status, 200);
    assert.deepEqual(durable.logs.warnings(), [
      'Redis has too few replicas in step: profile writes answer 503 until it has them again',
    ]);
  });

  it('lets exactly one of 50 writers with the same If-Match, split across A and B, win; 49 get 412', async () => {
    const taken = String((await b.client.send({ path: '/api/profile' })).headers.etag);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        writeProfile((i % 2 === 0 ? a : b).client, 'PATCH', { bio: `writer ${i}` }, { 'if-match': taken }),
      ),
    );
    const won = answers.filter((res) => res.status === 200);
    assert.equal(won.length, 1);
    for (const res of answers.filter((res) => res.status !== 200)) assertEnvelope(res, 412, 'PRECONDITION_FAILED');
    const read = await a.client.send({ path: '/api/profile' });
    assert.deepEqual(read.json(), won[0]?.json());
    assert.equal(read.headers.etag, won[0]?.headers.etag);
    assert.equal(read.headers.etag, `"${Number(taken.slice(1, -1)) + 1}"`);
  });

  it('limits a client to N requests in total across A and B, then answers 429 from either', async () => {
    const limitedA = await instance(server.url, { rateLimitMax: 5 });
    const limitedB = await instance(server.url, { rateLimitMax: 5 });
    open.push(limitedA, limitedB);
    await Promise.all([untilReady(limitedA.client), untilReady(limitedB.client)]);
    const pair = [limitedA.client, limitedB.client];
    // Twelve at once, six through each: five are served, whichever instance they reach.
    const burst = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? limitedA : limitedB).client.send({ path: '/api/hello' })),
    );
    const served = burst.filter((res) => res.status === 200);
    assert.deepEqual(served.map((res) => res.headers['ratelimit-remaining']).sort(), ['0', '1', '2', '3', '4']);
    for (const res of [
      ...burst.filter((res) => res.status !== 200),
      ...(await Promise.all(pair.map((client) => client.send({ path: '/api/hello' })))),
    ]) {
      const error = assertEnvelope(res, 429, 'RATE_LIMIT_EXCEEDED');
      assert.equal(
        error.message,
        `More than 5 requests in the current window; retry in ${res.headers['retry-after']} s.`,
      );
      assert.equal(res.headers['ratelimit-remaining'], '0');
    }
  });

  it('Redis killed: profile 503 at once, /readyz 503 saying why, the rest served unlimited, one warning; restarted: all recovers', async () => {
    const written = await writeProfile(a.client, 'POST', { name: 'Ada' });
    const logged = [a.logs.lines.length, b.logs.lines.length];
    await server.kill();
    for (let round = 0; round < 5; round++) {
      for (const { client } of [a, b]) {
        assertStoreUnavailable(await sendQuickly(client, { path: '/api/profile' }));
        assertStoreUnavailable(
          await sendQuickly(client, {
            method: 'PUT',
            path: '/api/profile',
            headers: { 'content-type': 'application/json' },
            body: '{"name":"Grace"}',
          }),
        );
        // Rate limiting fails open: served, and the headers show no count.
        const hello = await sendQuickly(client, { path: '/api/hello' });
        assert.equal(hello.status, 200, hello.text);
        assert.equal(hello.headers['ratelimit-remaining'], '1000');
        assertNotReady(await sendQuickly(client, { path: '/readyz' }), /^Not ready: Redis is unreachable: /);
      }
    }
    // Once an attempt to reconnect has failed, /readyz names that attempt's error.
    await sleep(150);
    assertNotReady(
      await a.client.send({ path: '/readyz' }),
      new RegExp(`^Not ready: Redis is unreachable: connect ECONNREFUSED 127\\.0\\.0\\.1:${server.port}$`),
    );
    assert.equal((await a.client.send({ path: '/healthz' })).status, 200);
    // One warning per instance for the whole outage, whatever the number of requests.
    for (const [i, { logs }] of [a, b].entries()) assert.deepEqual(logs.warnings(logged[i]), [OUTAGE_WARNING]);

    await server.restart();
    const recoveredIn = await untilReady(a.client);
    await untilReady(b.client);
    assert.ok(recoveredIn < 1500, `ready again after ${recoveredIn} ms`);
    // This Redis keeps nothing on disk: the profile starts again, at a version never used before.
    const read = await b.client.send({ path: '/api/profile' });
    assert.equal(read.status, 200);
    assert.deepEqual(read.json(), { name: null, email: null, bio: null });
    assert.ok(Number(String(read.headers.etag).slice(1, -1)) > Number(String(written.headers.etag).slice(1, -1)));
    // Counting again, in the new Redis: the profile read above, through B, was the first request.
    const counted = await a.client.send({ path: '/api/hello' });
    assert.equal(counted.headers['ratelimit-remaining'], '998');
    for (const [i, { logs }] of [a, b].entries()) {
      assert.deepEqual(logs.warnings(logged[i]), [OUTAGE_WARNING]);
      const recovered = logs.lines.slice(logged[i]).filter((line) => line.msg === 'Redis is available again');
      assert.equal(recovered.length, 1);
    }
  });

  it('Redis not answering: no request waits longer than the timeout, /readyz 503; answering again: all recovers', async () => {
    server.pause();
    try {
      for (const { client } of [a, b]) {
        assertStoreUnavailable(await sendQuickly(client, { path: '/api/profile' }));
        assert.equal((await sendQuickly(client, { path: '/api/hello' })).status, 200);
        assertNotReady(
          await sendQuickly(client, { path: '/readyz' }),
          new RegExp(`^Not ready: Redis did not answer within ${TIMEOUT_MS} ms\\.$`),
        );
      }
    } finally {
      server.resume();
    }
    await Promise.all([untilReady(a.client), untilReady(b.client)]);
    assert.equal((await b.client.send({ path: '/api/profile' })).status, 200);
  });

  it('eight If-Match writes whose compare-and-set Redis gets only once stopped: each 503, none made once it resumes; the retry is 200', async () => {
    // The instance's profile store, with Redis stopped once all eight writes have read the profile
    // and are about to send their compare-and-set: each then waits past the timeout, and Redis
    // runs it only when resumed.
    const connection = new RedisConnection({
      settings: { ...DEFAULT_CONFIG, redisUrl: server.url, redisTimeoutMs: TIMEOUT_MS },
      log: pino({ level: 'silent' }),
    });
    const store = new RedisProfileStore(connection);
    /** Whether the writes stop Redis under them. */
    let stopping = false;
    let arrived = 0;
    const stalling: ProfileStore = {
      get: () => store.get(),
      async compareAndSet(version, next) {
        if (!stopping) return store.compareAndSet(version, next);
        arrived += 1;
        if (arrived === 8) {
          server.pause();
          await sleep(50); // stopped for sure before anything is sent
        }
        while (arrived < 8) await sleep(1);
        return store.compareAndSet(version, next);
      },
    };
    const writer = await httpClient({ redisUrl: server.url, redisTimeoutMs: TIMEOUT_MS }, { profileStore: stalling });
    try {
      for (let stall = 1; stall <= 3; stall++) {
        await untilReady(writer);
        while ((await connection.unavailableReason()) !== null) await sleep(20);
        const before = await writer.send({ path: '/api/profile' });
        const ifMatch = String(before.headers.etag);
        arrived = 0;
        stopping = true;
        let writes: TestResponse[];
        try {
          writes = await Promise.all(
            Array.from({ length: 8 }, (_, i) =>
              writeProfile(writer, 'PUT', { bio: `stall ${stall}, writer ${i}` }, { 'if-match': ifMatch }),
            ),
          );
        } finally {
          stopping = false;
          server.resume();
        }
        for (const res of writes) assertStoreUnavailable(res);
        await untilReady(a.client);
        const after = await a.client.send({ path: '/api/profile' });
        assert.deepEqual(after.json(), before.json(), `stall ${stall}`);
        assert.equal(after.headers.etag, ifMatch);
        // A writer tries again with the same If-Match, and finds no write of its own in the way.
        const retry = await writeProfile(a.client, 'PUT', { bio: `stall ${stall}, retried` }, { 'if-match': ifMatch });
        assert.equal(retry.status, 200, retry.text);
      }
    } finally {
      await writer.close();
      await connection.close();
    }
  });

  it('Redis unreachable at start: the service starts, /readyz 503 saying why; Redis started: ready', async () => {
    await server.kill();
    const late = await instance(server.url);
    open.push(late);
    const reason = new RegExp(`^Not ready: Redis is unreachable: connect ECONNREFUSED 127\\.0\\.0\\.1:${server.port}$`);
    let res = await sendQuickly(late.client, { path: '/readyz' });
    for (let i = 0; i < 50 && !reason.test(res.json().error.message); i++) {
      await sleep(20);
      res = await sendQuickly(late.client, { path: '/readyz' });
    }
    assertNotReady(res, reason);
    assertStoreUnavailable(await sendQuickly(late.client, { path: '/api/profile' }));
    assert.equal((await sendQuickly(late.client, { path: '/api/hello' })).status, 200);
    assert.deepEqual(late.logs.warnings(), [OUTAGE_WARNING]);
    await server.restart();
    await untilReady(late.client);
    assert.equal((await late.client.send({ path: '/api/profile' })).status, 200);
  });
});
