import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { DEFAULT_CONFIG } from '../../src/config/index.js';
import { EMPTY_PROFILE } from '../../src/domain/profile.js';
import { StoreUnavailableError } from '../../src/stores/availability.js';
import { RedisConnection } from '../../src/stores/redis-connection.js';
import { RedisProfileStore } from '../../src/stores/redis-profile.js';
import { RedisRateLimitStore } from '../../src/stores/redis-rate-limit.js';
import { LogCapture } from '../helpers.js';
import { FloodingRedisProxy, REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from '../redis-server.js';
import { ADA, profileStoreContract } from './profile-store-contract.js';

// Twice the default: with three test files at a time on two cores, a reply can wait that long in a
// busy event loop, and a test of many writers at once must not time out.
const TIMEOUT_MS = 1_000;
// What a busy CI machine may add to a call that fails at its timeout; far below a stalled call.
const MARGIN_MS = 300;

/** A connection as an instance of the service holds one, logging into `logs`. */
function connect(url: string, logs = new LogCapture(), minReplicasAck = 0): RedisConnection {
  return new RedisConnection({
    settings: { ...DEFAULT_CONFIG, redisUrl: url, redisTimeoutMs: TIMEOUT_MS },
    minReplicasAck,
    log: pino({ level: 'info' }, logs),
  });
}

/** Resolves once `connection` can serve, or fails after `ms`. */
async function untilAvailable(connection: RedisConnection, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while ((await connection.unavailableReason()) !== null) {
    assert.ok(Date.now() < deadline, 'Redis did not become available');
    await sleep(20);
  }
}

/** Asserts that `call` fails with StoreUnavailableError within the timeout (plus a margin); returns the reason. */
async function assertFailsFast(call: () => Promise<unknown>): Promise<string> {
  const started = performance.now();
  const error = await call().then(
    () => assert.fail('expected the call to fail'),
    (error: unknown) => error,
  );
  assert.ok(error instanceof StoreUnavailableError, String(error));
  const elapsed = performance.now() - started;
  assert.ok(elapsed < TIMEOUT_MS + MARGIN_MS, `took ${elapsed} ms`);
  return error.message;
}

const OUTAGE_WARNING = 'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back';
const REPLICAS_WARNING = 'Redis has too few replicas in step: profile writes answer 503 until it has them again';

describe('Redis stores', { skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON }, () => {
  let server: RedisServer;
  let connection: RedisConnection;
  before(async () => {
    server = await RedisServer.start();
    connection = connect(server.url);
    await untilAvailable(connection);
  });
  after(async () => {
    await connection?.close();
    await server?.kill();
  });
  /** Runs `test` with a connection of its own, as another instance would hold, closed afterwards. */
  async function withOwnConnection(
    test: (own: RedisConnection, logs: LogCapture) => Promise<void>,
    url = server.url,
  ): Promise<void> {
    const logs = new LogCapture();
    const own = connect(url, logs);
    try {
      await test(own, logs);
    } finally {
      await own.close();
    }
  }

  beforeEach(async () => {
    // A test that stopped Redis and failed is not to fail the next ones too.
    if (!server.running) await server.restart();
    server.resume();
    await untilAvailable(connection);
    await connection.client.flushall();
  });

  describe('RedisProfileStore', () => {
    profileStoreContract(async () => new RedisProfileStore(connection));

    it("starts from Redis's clock in microseconds, and again after a flush, never repeating a version", async () => {
      const store = new RedisProfileStore(connection);
      const before = Date.now() * 1000;
      await connection.client.flushall();
      const { version } = await store.get();
      assert.ok(version >= before - 1000 && version <= Date.now() * 1000 + 1000, String(version));
      await store.compareAndSet(version, ADA);
      await connection.client.flushall();
      const again = await store.get();
      assert.deepEqual(again.profile, EMPTY_PROFILE);
      assert.ok(again.version > version + 1, `${again.version} after ${version + 1}`);
      // A write based on the version from before the flush changes nothing.
      assert.equal(await store.compareAndSet(version + 1, ADA), null);
    });

    it('is one profile for every connection: what one writes, another reads with the same version', async () => {
      await withOwnConnection(async (other) => {
        await untilAvailable(other);
        const [mine, theirs] = [new RedisProfileStore(connection), new RedisProfileStore(other)];
        // Both created it at once, and agree on its first version.
        const [a, b] = await Promise.all([mine.get(), theirs.get()]);
        assert.deepEqual(a, b);
        const written = await mine.compareAndSet(a.version, ADA);
        assert.deepEqual(await theirs.get(), written);
        assert.equal(await theirs.compareAndSet(a.version, EMPTY_PROFILE), null);
        // Of many writers on two connections holding one version, exactly one wins.
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            (i % 2 === 0 ? mine : theirs).compareAndSet(a.version + 1, { ...ADA, bio: String(i) }),
          ),
        );
        assert.equal(results.filter((result) => result !== null).length, 1);
      });
    });

    it('never makes a write the client gave up on: Redis stopped under it, then resumed, runs it too late to apply', async () => {
      const store = new RedisProfileStore(connection);
      for (let stall = 1; stall <= 3; stall++) {
        const before = await store.get();
        server.pause();
        try {
          await assertFailsFast(() => store.compareAndSet(before.version, { ...ADA, bio: `stall ${stall}` }));
        } finally {
          server.resume();
        }
        await untilAvailable(connection);
        assert.deepEqual(await store.get(), before, `stall ${stall}`);
      }
      // Answered in time, a write is made as always.
      const current = await store.get();
      assert.deepEqual(await store.compareAndSet(current.version, ADA), { profile: ADA, version: current.version + 1 });
    });

    it('answers a write that Redis made while the process was held up past the timeout: its reply is read, not a timeout', async () => {
      const store = new RedisProfileStore(connection);
      for (let hold = 1; hold <= 3; hold++) {
        const before = await store.get();
        const next = { ...ADA, bio: `held up ${hold}` };
        // Sent at once; then the event loop is held (a long collection, a paused VM or container)
        // past the timeout, while Redis runs the script in time and its reply waits in the socket.
        const write = store.compareAndSet(before.version, next);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, TIMEOUT_MS * 1.5);
        const outcome = await write.then(
          (stored) => stored,
          (error: unknown) => error,
        );
        await untilAvailable(connection);
        const stored = await store.get();
        assert.deepEqual(stored, { profile: next, version: before.version + 1 }, `hold ${hold}: Redis made the write`);
        assert.deepEqual(outcome, stored, `hold ${hold}: the write made is answered as made`);
      }
    });

    it("writes with the script's source when Redis has lost it from its cache (SCRIPT FLUSH)", async () => {
      const store = new RedisProfileStore(connection);
      const before = await store.get();
      await connection.client.script('FLUSH');
      assert.deepEqual(await store.compareAndSet(before.version, ADA), { profile: ADA, version: before.version + 1 });
      assert.deepEqual(await store.get(), { profile: ADA, version: before.version + 1 });
    });
  });

  describe('RedisRateLimitStore', () => {
    it('counts a key from 1 in a window that starts with its first request', async () => {
      const store = new RedisRateLimitStore(connection);
      const started = performance.now();
      const first = await store.incr('a', 10_000);
      assert.equal(first.current, 1);
      assert.equal(first.ttl, 10_000);
      await sleep(30);
      const second = await store.incr('a', 10_000);
      assert.equal(second.current, 2);
      assert.ok(second.ttl < first.ttl && second.ttl >= 10_000 - (performance.now() - started) - 1, String(second.ttl));
    });

    it('starts a new window from 1 once the window has ended', async () => {
      const store = new RedisRateLimitStore(connection);
      await store.incr('a', 50);
      assert.equal((await store.incr('a', 50)).current, 2);
      await sleep(60);
      const next = await store.incr('a', 50);
      assert.equal(next.current, 1);
      assert.ok(next.ttl > 0 && next.ttl <= 50, String(next.ttl));
    });

    it('counts each key on its own, and one key once across connections', async () => {
      await withOwnConnection(async (other) => {
        await untilAvailable(other);
        const [mine, theirs] = [new RedisRateLimitStore(connection), new RedisRateLimitStore(other)];
        await mine.incr('a', 10_000);
        assert.equal((await theirs.incr('b', 10_000)).current, 1);
        assert.equal((await theirs.incr('a', 10_000)).current, 2);
        assert.equal((await mine.incr('a', 10_000)).current, 3);
      });
    });

    it('keeps its keys under the service prefix, each expiring with its window', async () => {
      const started = performance.now();
      await new RedisRateLimitStore(connection).incr('10.0.0.1', 10_000);
      // keyPrefix is not applied to KEYS patterns: this is the raw key space.
      assert.deepEqual(await connection.client.keys('*'), ['greeting-service:rate-limit:10.0.0.1']);
      const ttl = await connection.client.pttl('rate-limit:10.0.0.1');
      // At most the window, less no more than the time the three calls took.
      assert.ok(ttl <= 10_000 && ttl >= 10_000 - (performance.now() - started) - 1, String(ttl));
    });
  });

  describe('RedisConnection', () => {
    it('fails every call fast while Redis is down, warns once, and recovers when it is back', async () => {
      await withOwnConnection(async (own, logs) => {
        await untilAvailable(own);
        const profile = new RedisProfileStore(own);
        const counts = new RedisRateLimitStore(own);
        await server.kill();
        for (let i = 0; i < 5; i++) {
          assert.match(await assertFailsFast(() => profile.get()), /^Redis is unreachable: /);
          await assertFailsFast(() => counts.incr('a', 1000));
        }
        // Once an attempt to reconnect has failed, the reason is that attempt's error.
        await sleep(150);
        assert.equal(
          await own.unavailableReason(),
          `Redis is unreachable: connect ECONNREFUSED 127.0.0.1:${server.port}`,
        );
        assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
        await server.restart();
        await untilAvailable(own);
        assert.deepEqual((await profile.get()).profile, EMPTY_PROFILE);
        assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
        assert.equal(logs.lines.at(-1)?.msg, 'Redis is available again');
      });
      // The other connection reconnected too.
      await untilAvailable(connection);
    });

    it('fails a call after the timeout when Redis stops answering, and recovers when it answers again', async () => {
      await withOwnConnection(async (own, logs) => {
        await untilAvailable(own);
        const profile = new RedisProfileStore(own);
        server.pause();
        try {
          assert.equal(await assertFailsFast(() => profile.get()), `Redis did not answer within ${TIMEOUT_MS} ms.`);
          assert.equal(await own.unavailableReason(), `Redis did not answer within ${TIMEOUT_MS} ms.`);
          await assertFailsFast(() => new RedisRateLimitStore(own).incr('a', 1000));
          assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
        } finally {
          server.resume();
        }
        await untilAvailable(own);
        assert.deepEqual((await profile.get()).profile, EMPTY_PROFILE);
        assert.equal(logs.lines.at(-1)?.msg, 'Redis is available again');
      });
    });

    it('drops a connection whose command timed out, and opens another: its reply may still be coming', async () => {
      const proxy = await FloodingRedisProxy.start(server.port);
      try {
        await withOwnConnection(async (own) => {
          await untilAvailable(own);
          assert.equal(proxy.connections, 1);
          server.pause();
          try {
            await assertFailsFast(() => new RedisProfileStore(own).get());
            for (let tries = 0; tries < 50 && proxy.connections < 2; tries += 1) await sleep(20);
            assert.ok(proxy.connections >= 2, `${proxy.connections} connections`);
          } finally {
            server.resume();
          }
          await untilAvailable(own);
        }, proxy.url);
      } finally {
        proxy.close();
      }
    });

    it('drops a connection on which more than 1 MiB came without a reply, says why, and serves again', async () => {
      const proxy = await FloodingRedisProxy.start(server.port);
      try {
        await withOwnConnection(async (own, logs) => {
          await untilAvailable(own);
          const profile = new RedisProfileStore(own);
          proxy.flooding = true;
          const reason = 'Redis sent a reply of more than 1048576 bytes; the connection was dropped.';
          assert.equal(await assertFailsFast(() => profile.get()), reason);
          assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
          assert.equal(logs.lines.find((line) => line.level === 40)?.reason, reason);
          proxy.flooding = false;
          await untilAvailable(own);
          assert.deepEqual((await profile.get()).profile, EMPTY_PROFILE);
          assert.ok(proxy.connections >= 2);
        }, proxy.url);
      } finally {
        proxy.close();
      }
    });

    it('starts without Redis, says why it is unavailable, and connects once Redis is there', async () => {
      await server.kill();
      await withOwnConnection(async (own, logs) => {
        await sleep(50);
        assert.equal(
          await own.unavailableReason(),
          `Redis is unreachable: connect ECONNREFUSED 127.0.0.1:${server.port}`,
        );
        await assertFailsFast(() => new RedisProfileStore(own).get());
        assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
        await server.restart();
        await untilAvailable(own);
      });
      await untilAvailable(connection);
    });

    it('keeps its keys in the database of the URL', async () => {
      await withOwnConnection(async (own) => {
        await untilAvailable(own);
        await new RedisProfileStore(own).get();
        await new RedisRateLimitStore(own).incr('a', 10_000);
        assert.deepEqual(await connection.client.keys('*'), []);
        await connection.client.select(3);
        try {
          assert.deepEqual((await connection.client.keys('*')).sort(), [
            'greeting-service:profile',
            'greeting-service:rate-limit:a',
          ]);
        } finally {
          await connection.client.select(0);
        }
      }, `${server.url}/3`);
    });

    it('never falls back to database 0 when Redis refuses the database of the URL: unavailable, saying why', async () => {
      await withOwnConnection(async (own, logs) => {
        const reason = 'Redis refused database 99999: ERR DB index is out of range';
        for (let i = 0; i < 100 && (await own.unavailableReason()) !== reason; i++) await sleep(20);
        assert.equal(await own.unavailableReason(), reason);
        // Still so after the next attempts to connect, each refused in the same way.
        await sleep(1_500);
        assert.equal(await own.unavailableReason(), reason);
        assert.equal(await assertFailsFast(() => new RedisProfileStore(own).get()), reason);
        await assertFailsFast(() => new RedisRateLimitStore(own).incr('a', 1000));
        assert.deepEqual(await connection.client.keys('*'), [], 'nothing was written to database 0');
        assert.deepEqual(logs.warnings(), [OUTAGE_WARNING]);
        assert.equal(logs.lines.find((line) => line.level === 40)?.reason, reason);
      }, `${server.url}/99999`);
    });

    it('warns again when Redis, down at first, comes back refusing the database', async () => {
      await server.kill();
      await withOwnConnection(async (own, logs) => {
        const unreachable = `Redis is unreachable: connect ECONNREFUSED 127.0.0.1:${server.port}`;
        for (let i = 0; i < 100 && (await own.unavailableReason()) !== unreachable; i++) await sleep(20);
        assert.equal(await own.unavailableReason(), unreachable);
        await server.restart();
        const refused = 'Redis refused database 99999: ERR DB index is out of range';
        for (let i = 0; i < 150 && (await own.unavailableReason()) !== refused; i++) await sleep(20);
        assert.equal(await own.unavailableReason(), refused);
        const warnings = logs.lines.filter((line) => line.level === 40);
        assert.deepEqual(
          warnings.map((line) => [line.msg, line.reason]),
          [
            [OUTAGE_WARNING, unreachable],
            [OUTAGE_WARNING, refused],
          ],
        );
      }, `${server.url}/99999`);
    });

    it('never repeats the password of the URL in a reason', async () => {
      await withOwnConnection(async (own) => {
        let reason: string | null = null;
        for (let i = 0; i < 100 && !String(reason).includes('ENOTFOUND'); i++) {
          await sleep(20);
          reason = await own.unavailableReason();
        }
        assert.equal(reason, 'Redis is unreachable: getaddrinfo ENOTFOUND ***.invalid');
      }, 'redis://:s3cret-pass@s3cret-pass.invalid:6379');
    });

    it('closes at once while Redis is down, and stops reconnecting', async () => {
      const own = connect(server.url);
      await untilAvailable(own);
      await server.kill();
      await sleep(150); // between two attempts to reconnect
      const started = performance.now();
      await own.close();
      // Well under the reconnect back-off (up to 1 s) it would otherwise wait for.
      assert.ok(performance.now() - started < MARGIN_MS);
      let reconnected = false;
      own.client.on('connect', () => {
        reconnected = true;
      });
      await server.restart();
      await sleep(300); // longer than the pending attempt's delay
      assert.equal(reconnected, false);
    });

    it('closes without waiting when Redis does not answer', async () => {
      const own = connect(server.url);
      await untilAvailable(own);
      const ended = once(own.client, 'end');
      server.pause();
      try {
        const started = performance.now();
        await own.close();
        assert.ok(performance.now() - started < TIMEOUT_MS + MARGIN_MS);
      } finally {
        server.resume();
      }
      await ended;
    });
  });

  describe('writes that wait for replicas (REDIS_MIN_REPLICAS_ACK)', () => {
    it('answers a write only once a replica has it: 503 after the timeout without one, the write then on the primary alone', async () => {
      const logs = new LogCapture();
      const own = connect(server.url, logs, 1);
      let replica: RedisServer | undefined;
      let admin: Redis | undefined;
      try {
        await untilAvailable(own);
        const profile = new RedisProfileStore(own);
        const { version } = await profile.get();
        const started = performance.now();
        const error = await profile.compareAndSet(version, ADA).then(
          () => assert.fail('expected the write to fail'),
          (error: unknown) => error,
        );
        const elapsed = performance.now() - started;
        assert.ok(error instanceof StoreUnavailableError, String(error));
        assert.equal(
          error.message,
          `Redis has too few replicas in step: 0 of 1 replicas acknowledged the write within ${TIMEOUT_MS} ms.`,
        );
        assert.ok(elapsed > TIMEOUT_MS - 50 && elapsed < TIMEOUT_MS + MARGIN_MS, `took ${elapsed} ms`);
        // Made, on the primary alone: a failover now could lose it, which is why it got no 200.
        assert.deepEqual(await profile.get(), { profile: ADA, version: version + 1 });
        // A write naming a version that is gone changes nothing, as without replicas.
        assert.equal(await profile.compareAndSet(version, EMPTY_PROFILE), null);
        // Reads, counts and readiness go on; one warning however many writes fail.
        await assertFailsFast(() => profile.compareAndSet(version + 1, EMPTY_PROFILE));
        assert.equal(await own.unavailableReason(), null);
        assert.equal((await new RedisRateLimitStore(own).incr('a', 1000)).current, 1);
        assert.deepEqual(logs.warnings(), [REPLICAS_WARNING]);

        // A replica in step: the write is answered, and the replica has it.
        await connection.client.config('SET', 'repl-diskless-sync-delay', '0'); // not 5 s
        replica = await RedisServer.start();
        admin = new Redis(replica.url);
        // Loaded from the socket, not through a dump file in the working directory.
        await admin.config('SET', 'repl-diskless-load', 'on-empty-db');
        await admin.replicaof('127.0.0.1', server.port);
        await untilReplicaOnline(connection);
        // (The write before, refused too, was made as well.)
        const written = await profile.compareAndSet(version + 2, { ...ADA, bio: 'replicated' });
        assert.equal(written?.version, version + 3);
        assert.equal(await admin.hget('greeting-service:profile', 'version'), String(version + 3));
        assert.equal(
          logs.lines.at(-1)?.msg,
          'Redis has the replicas it needs again: profile writes are answered again',
        );
      } finally {
        await own.close();
        admin?.disconnect();
        await replica?.kill();
      }
    });

    it('fails a write at once, and only the write, when the primary refuses it for want of replicas (min-replicas-to-write)', async () => {
      await withOwnConnection(async (own, logs) => {
        await untilAvailable(own);
        const profile = new RedisProfileStore(own);
        const counts = new RedisRateLimitStore(own);
        const { version } = await profile.get();
        await connection.client.config('SET', 'min-replicas-to-write', '1');
        try {
          assert.match(
            await assertFailsFast(() => profile.compareAndSet(version, ADA)),
            /^Redis has too few replicas in step: NOREPLICAS /,
          );
          await assertFailsFast(() => counts.incr('a', 1000));
          assert.equal((await profile.get()).version, version);
          assert.equal(await own.unavailableReason(), null);
          assert.deepEqual(logs.warnings(), [REPLICAS_WARNING]);
        } finally {
          await connection.client.config('SET', 'min-replicas-to-write', '0');
        }
        // The next write that Redis takes ends it, in one line.
        assert.equal((await profile.compareAndSet(version, ADA))?.version, version + 1);
        assert.equal(
          logs.lines.at(-1)?.msg,
          'Redis has the replicas it needs again: profile writes are answered again',
        );
        assert.deepEqual(logs.warnings(), [REPLICAS_WARNING]);
      });
    });
  });
});

const FULL_WARNING = 'Redis is full (maxmemory): profile writes answer 503 and rate limiting is off until it has room';

describe('Redis full: maxmemory reached, noeviction', { skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON }, () => {
  let server: RedisServer;
  let admin: Redis;
  before(async () => {
    server = await RedisServer.start();
    admin = new Redis(server.url);
  });
  after(async () => {
    admin?.disconnect();
    await server?.kill();
  });

  /** Redis refuses every write from now on, as one at its `maxmemory` with the `noeviction` policy does. */
  const fill = () => admin.config('SET', 'maxmemory', '1', 'maxmemory-policy', 'noeviction');
  const makeRoom = () => admin.config('SET', 'maxmemory', '0');

  it('filled after the start: the profile is read, only writes fail, one warning, and readiness says ready', async () => {
    await admin.flushall();
    const logs = new LogCapture();
    const own = connect(server.url, logs);
    try {
      await untilAvailable(own);
      const profile = new RedisProfileStore(own);
      const counts = new RedisRateLimitStore(own);
      const stored = await profile.get();
      await fill();
      try {
        assert.deepEqual(await profile.get(), stored);
        assert.match(
          await assertFailsFast(() => profile.compareAndSet(stored.version, ADA)),
          /^Redis is full \(maxmemory\): OOM /,
        );
        await assertFailsFast(() => counts.incr('a', 1000));
        assert.deepEqual(await profile.get(), stored, 'read after a write was refused');
        assert.equal(await own.unavailableReason(), null);
        assert.deepEqual(logs.warnings(), [FULL_WARNING]);
      } finally {
        await makeRoom();
      }
      // The next write that Redis takes ends it, in one line.
      assert.equal((await profile.compareAndSet(stored.version, ADA))?.version, stored.version + 1);
      assert.equal(logs.lines.at(-1)?.msg, 'Redis has room again: profile writes are answered again');
      assert.deepEqual(logs.warnings(), [FULL_WARNING]);
    } finally {
      await own.close();
    }
  });

  it('filled before the start, no profile stored: ready, the empty profile as version 0, which no stored profile has', async () => {
    await admin.flushall();
    await fill();
    const own = connect(server.url);
    try {
      await untilAvailable(own);
      const profile = new RedisProfileStore(own);
      assert.deepEqual(await profile.get(), { profile: EMPTY_PROFILE, version: 0 });
      assert.equal(await own.unavailableReason(), null);
      await makeRoom();
      const stored = await profile.get();
      assert.deepEqual(stored.profile, EMPTY_PROFILE);
      assert.ok(stored.version > 0);
    } finally {
      await makeRoom();
      await own.close();
    }
  });
});

/** Resolves once the primary `connection` is on has a replica online. */
async function untilReplicaOnline(connection: RedisConnection, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!/^slave0:.*state=online/m.test(await connection.client.info('replication'))) {
    assert.ok(Date.now() < deadline, 'the replica did not come online');
    await sleep(20);
  }
}
