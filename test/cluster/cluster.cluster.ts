import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Pool } from 'undici';
import { freePort } from '../ports.js';
import type { RedisServer } from '../redis-server.js';
import { exitOf, killAllServers, readLog, type ServerProcess, spawnServer, withTimeout } from '../server-process.js';
import { isStoreUnavailable, MixedLoad, statusOf } from './load.js';
import { NGINX_BIN, Nginx } from './nginx.js';
import { assertBadGateway, assertOwnAnswers } from './own-answers.js';

/**
 * The deployment as users run it: three instances of the built service on one throw-away Redis,
 * behind nginx running deploy/nginx.conf, everything on loopback. First, what nginx answers by
 * itself is held to what an instance answers, and an nginx with no instance answers 502. Then,
 * under a steady, bounded load of every endpoint and of profile writes with If-Match, each
 * instance is restarted in turn, then Redis stops answering and is killed and started afresh;
 * last, the rate limit is checked to be one count across the three. It prints its figures: requests, failures by kind, p99 per phase;
 * with CLUSTER_DEBUG=1, nginx's error log too.
 */

const MISSING = [
  NGINX_BIN === undefined && 'nginx',
  spawnSync('redis-server', ['--version']).error !== undefined && 'redis-server',
].filter(Boolean);
const SKIP_REASON = MISSING.length > 0 && `the cluster test needs ${MISSING.join(' and ')}`;
if (SKIP_REASON) process.stdout.write(`SKIPPED: ${SKIP_REASON}\n`);

/** The store timeout of the instances: how long a request may wait for a Redis that does not answer. */
const REDIS_TIMEOUT_MS = 1000;
/** What a request may take beyond it on this busy two-core machine (three instances, nginx, Redis, the load). */
const MARGIN_MS = 500;
const SHUTDOWN_TIMEOUT_MS = 10_000;
/** Concurrent clients of the mixed load, each sending a request every PACE_MS at most. */
const LOAD_CLIENTS = 6;
const PACE_MS = 25;
/** The bound on the load, whatever happens to the phases' timing. */
const MAX_LOAD_REQUESTS = 40_000;
/** The rate limit of the last phase, and the requests its client sends. */
const RATE_LIMIT = 30;
const RATE_PROBES = 45;
const CURSOR_SECRET = 'a cursor secret shared by the three instances';
/** The address nginx connects to the instances from: the one proxy they trust. */
const BALANCER_ADDRESS = '127.0.0.1';
/** Where the rate-limit phase's client connects from: another client than the load's. */
const PROBE_ADDRESS = '127.0.0.2';

interface Instance {
  port: number;
  process: ServerProcess;
  logFile: string;
}

describe('three instances behind nginx, sharing one Redis', () => {
  let dir: string;
  let redis: RedisServer;
  let nginx: Nginx;
  let origin: string;
  const instances: Instance[] = [];
  const logFiles: string[] = [];
  let generation = 0;

  const killAll = () => {
    killAllServers();
    nginx?.kill();
    void redis?.kill();
  };

  /** Starts (again) instance `i` on its port with these settings, and waits until it is ready. */
  async function startInstance(i: number, port: number, env: Record<string, string> = {}): Promise<Instance> {
    const logFile = join(dir, `instance-${i + 1}.${generation++}.log`);
    logFiles.push(logFile);
    const server = await spawnServer(
      {
        PORT: String(port),
        REDIS_URL: redis.url,
        REDIS_TIMEOUT_MS: String(REDIS_TIMEOUT_MS),
        CURSOR_SECRET,
        TRUST_PROXY: BALANCER_ADDRESS,
        RATE_LIMIT_MAX: String(2 ** 31 - 1),
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        ...env,
      },
      [],
      { logFile },
    );
    const instance = { port, process: server, logFile };
    instances[i] = instance;
    await untilReady(instance, 15_000);
    return instance;
  }

  /** Polls the instance's own /readyz until 200; returns how long that took. */
  async function untilReady({ port, process: server }: Instance, ms: number): Promise<number> {
    const started = performance.now();
    for (;;) {
      const status = await statusOf(`http://127.0.0.1:${port}/readyz`);
      if (status === 200) return performance.now() - started;
      if (server.child.exitCode !== null) throw new Error(`instance on ${port} exited:\n${server.stderr()}`);
      if (performance.now() - started > ms) throw new Error(`instance on ${port} not ready within ${ms} ms`);
      await sleep(25);
    }
  }

  async function stopInstance(instance: Instance): Promise<number> {
    const signalled = performance.now();
    instance.process.child.kill('SIGTERM');
    const exit = await withTimeout(instance.process.exited, SHUTDOWN_TIMEOUT_MS + 5000, 'exit after SIGTERM');
    assert.deepEqual(exitOf(exit), { code: 0, signal: null }, instance.process.stderr());
    return exit.at - signalled;
  }

  before(async () => {
    if (SKIP_REASON) return;
    dir = await mkdtemp(join(tmpdir(), 'cluster-'));
    process.once('exit', killAll);
    // Loaded here, so that a machine without redis-server sees one SKIPPED line, this file's.
    const { RedisServer } = await import('../redis-server.js');
    redis = await RedisServer.start();
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const [listen, ...instancePorts] = ports as [number, number, number, number];
    const file = await Nginx.configure(dir, {
      NGINX_LISTEN: `127.0.0.1:${listen}`,
      INSTANCE_1: `127.0.0.1:${instancePorts[0]}`,
      INSTANCE_2: `127.0.0.1:${instancePorts[1]}`,
      INSTANCE_3: `127.0.0.1:${instancePorts[2]}`,
    });
    await Promise.all(instancePorts.map((port, i) => startInstance(i, port)));
    nginx = await Nginx.start(dir, file, listen);
    origin = `http://127.0.0.1:${listen}`;
    const started = performance.now();
    while ((await statusOf(`${origin}/healthz`)) !== 200) {
      assert.ok(performance.now() - started < 10_000, `nginx did not answer:\n${nginx.stderr()}`);
      await sleep(25);
    }
  });

  after(async () => {
    killAll();
    process.removeListener('exit', killAll);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("answers what nginx refuses itself as the service answers it, in the service's envelope", {
    skip: SKIP_REASON,
  }, async () => {
    await assertOwnAnswers(nginx, instances[0] as Instance);
  });

  it('answers a 502 envelope when no instance is up', { skip: SKIP_REASON }, async () => {
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const alone = await mkdtemp(join(tmpdir(), 'cluster-alone-'));
    const file = await Nginx.configure(alone, {
      NGINX_LISTEN: `127.0.0.1:${ports[0]}`,
      INSTANCE_1: `127.0.0.1:${ports[1]}`,
      INSTANCE_2: `127.0.0.1:${ports[2]}`,
      INSTANCE_3: `127.0.0.1:${ports[3]}`,
    });
    const balancer = await Nginx.start(alone, file, ports[0] as number);
    try {
      const started = performance.now();
      while ((await statusOf(`http://127.0.0.1:${balancer.port}/healthz`)) !== 502) {
        assert.ok(performance.now() - started < 10_000, `nginx did not answer:\n${balancer.stderr()}`);
        await sleep(25);
      }
      await assertBadGateway(balancer);
    } finally {
      await balancer.stop();
      await rm(alone, { recursive: true, force: true });
    }
  });

  it('serves a steady load through restarts of each instance and an outage of Redis; one rate limit across all', {
    timeout: 80_000,
    skip: SKIP_REASON,
  }, async () => {
    const testStarted = performance.now();
    const pool = new Pool(origin, { connections: LOAD_CLIENTS + 1, pipelining: 1 });
    const load = new MixedLoad(pool, {
      clients: LOAD_CLIENTS,
      paceMs: PACE_MS,
      maxRequests: MAX_LOAD_REQUESTS,
      // Every answer within the store timeout, and a margin, also while Redis is stopped.
      slowMs: REDIS_TIMEOUT_MS + MARGIN_MS,
      outageSlowMs: REDIS_TIMEOUT_MS + MARGIN_MS,
      outages: ['Redis stopped'],
    });
    const { outcomes, writes } = load;
    const send = load.send.bind(load);
    await load.start();
    const figures: Record<string, unknown> = {};
    try {
      await sleep(2000);

      // Each instance in turn: SIGTERM, wait for its exit, start it again on its port.
      load.phase = 'rolling restart';
      const drains: number[] = [];
      for (let i = 0; i < instances.length; i++) {
        const instance = instances[i] as Instance;
        drains.push(Math.round(await stopInstance(instance)));
        await startInstance(i, instance.port);
        // nginx leaves an instance that refused a connection alone for 2 s (fail_timeout).
        await sleep(2000);
      }
      figures.drain_ms = drains;

      // Redis stops answering (SIGSTOP), then is killed and started afresh, empty.
      load.phase = 'Redis stopped';
      redis.pause();
      await sleep(1500);
      const whileStopped = await Promise.all(instances.map(({ port }) => timed(`http://127.0.0.1:${port}/readyz`)));
      const profileWhileStopped = await send({ method: 'GET', path: '/api/profile' });
      // Redis keeps nothing on disk here: what it held is gone.
      load.redisEpoch++;
      await redis.kill();
      await sleep(1000);
      const whileKilled = await Promise.all(instances.map(({ port }) => timed(`http://127.0.0.1:${port}/readyz`)));
      const profileWhileKilled = await send({ method: 'GET', path: '/api/profile' });
      const readyzThroughBalancer = await send({ method: 'GET', path: '/readyz' });
      await redis.restart();
      const restartedAt = performance.now();
      const recovery = await Promise.all(instances.map((instance) => untilReady(instance, 10_000)));
      load.phase = 'Redis back';
      const profileAfter = await send({ method: 'GET', path: '/api/profile' });
      figures.ready_again_after_ms = recovery.map(Math.round);
      figures.ready_again_all_ms = Math.round(performance.now() - restartedAt);
      await sleep(2000);

      await withTimeout(load.stop(), 20_000, 'the load to stop');

      for (const res of [...whileStopped, ...whileKilled]) {
        assert.equal(res.status, 503, 'readyz of an instance while Redis is down');
        assert.ok(res.ms < REDIS_TIMEOUT_MS + MARGIN_MS, `readyz took ${res.ms} ms`);
      }
      for (const res of [profileWhileStopped, profileWhileKilled]) {
        assert.ok(isStoreUnavailable(res.status, res.text), `${res.status} ${res.text}`);
        assert.ok(res.ms < REDIS_TIMEOUT_MS + MARGIN_MS, `the profile took ${res.ms} ms`);
      }
      assert.equal(readyzThroughBalancer.status, 503, readyzThroughBalancer.text);
      assert.equal(profileAfter.status, 200, profileAfter.text);

      // The rate limit: three instances started afresh with a small limit, the load stopped, and
      // a client of its own sending requests that each claim another address.
      load.phase = 'rate limit';
      await Promise.all(instances.map((instance) => stopInstance(instance)));
      await Promise.all(
        instances.map((instance, i) => startInstance(i, instance.port, { RATE_LIMIT_MAX: String(RATE_LIMIT) })),
      );
      await sleep(2100); // nginx's fail_timeout for instances it found down meanwhile
      const probe = new Client(origin, { localAddress: PROBE_ADDRESS });
      const statuses: number[] = [];
      const remaining: string[] = [];
      try {
        for (let i = 0; i < RATE_PROBES; i++) {
          const res = await probe.request({
            method: 'GET',
            path: '/api/hello',
            headers: { 'x-forwarded-for': `198.51.100.${i + 1}`, 'x-request-id': `rate-${i}` },
          });
          await res.body.dump();
          statuses.push(res.statusCode);
          remaining.push(String(res.headers['ratelimit-remaining']));
        }
      } finally {
        await probe.close();
      }
      const perInstance = await Promise.all(
        instances.map(
          async ({ logFile }) =>
            (await readLog(logFile)).filter((line) => String(line.request_id).startsWith('rate-')).length,
        ),
      );
      const served = statuses.filter((status) => status === 200).length;
      figures.rate_limit = {
        limit: RATE_LIMIT,
        sent: RATE_PROBES,
        served,
        refused_429: statuses.filter((status) => status === 429).length,
        per_instance: perInstance,
      };

      // The figures, then the verdicts.
      Object.assign(figures, load.figures(['steady', 'rolling restart', 'Redis stopped', 'Redis back']));
      figures.nginx = { ...(await nginx.accessLog()), upstream_errors: nginx.upstreamErrors() };
      if (process.env.CLUSTER_DEBUG) console.log(nginx.stderr());
      figures.run_s = Math.round((performance.now() - testStarted) / 100) / 10;
      console.log(`cluster: ${JSON.stringify(figures, null, 1)}`);

      assert.deepEqual(load.idempotentFailures(), [], 'no idempotent request fails at the client');
      assert.equal(writes.lost, 0, 'no acknowledged write lost');
      assert.equal(writes.appliedTwice, 0, 'no write applied twice');
      assert.equal(writes.unexpected412, 0, 'no write refused for a version it did not move');
      assert.ok(writes.acknowledged > 50, `${writes.acknowledged} writes`);
      assert.ok(
        outcomes.some((o) => o.phase === 'Redis stopped' && o.kind === 'store unavailable'),
        'the load met the outage',
      );
      // Fixed windows counted by one INCR in Redis: exact across instances, so no tolerance.
      assert.deepEqual(statuses, [
        ...Array<number>(RATE_LIMIT).fill(200),
        ...Array<number>(RATE_PROBES - RATE_LIMIT).fill(429),
      ]);
      assert.deepEqual(
        remaining.slice(0, RATE_LIMIT),
        Array.from({ length: RATE_LIMIT }, (_, i) => String(RATE_LIMIT - 1 - i)),
      );
      for (const count of perInstance) assert.ok(count > 0, `requests per instance: ${perInstance}`);
    } finally {
      await load.stop();
      await pool.close();
    }
  });
});

/** One GET with its time, from a fresh connection. */
async function timed(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const client = new Client(new URL(url).origin);
  try {
    const res = await client.request({ method: 'GET', path: new URL(url).pathname });
    await res.body.dump();
    return { status: res.statusCode, ms: performance.now() - started };
  } finally {
    await client.close();
  }
}
