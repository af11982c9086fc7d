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
import { MIX, type MixRequest } from '../soak/mix.js';
import { NGINX_BIN, Nginx } from './nginx.js';

/**
 * The deployment as users run it: three instances of the built service on one throw-away Redis,
 * behind nginx running deploy/nginx.conf, everything on loopback. Under a steady, bounded load of
 * every endpoint and of profile writes with If-Match, each instance is restarted in turn, then
 * Redis stops answering and is killed and started afresh; last, the rate limit is checked to be
 * one count across the three. It prints its figures: requests, failures by kind, p99 per phase;
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

type Phase = 'steady' | 'rolling restart' | 'Redis stopped' | 'Redis back' | 'rate limit';

interface Outcome {
  phase: Phase;
  ms: number;
  /** `ok`, `store unavailable` (a 503 that is the answer while Redis is down) or the failure's kind. */
  kind: string;
  idempotent: boolean;
  request: string;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** The mixed load: every endpoint through the balancer but `/readyz`, which is each instance's own. */
function loadMix(cursor: string): MixRequest[] {
  return [
    // Unconditional profile writes would race the writer's If-Match chain: the writer writes.
    ...MIX.filter(({ method, path }) => path !== '/readyz' && !(path === '/api/profile' && method !== 'GET')),
    // A cursor issued by one instance, honoured by all: they share CURSOR_SECRET.
    { method: 'GET', path: `/api/currencies?limit=3&cursor=${cursor}`, status: 200 },
  ];
}

const percentile = (values: number[], p: number): number => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number);
};

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

  async function statusOf(url: string): Promise<number | string> {
    const client = new Client(new URL(url).origin);
    try {
      const res = await client.request({ method: 'GET', path: new URL(url).pathname, headersTimeout: 5000 });
      await res.body.dump();
      return res.statusCode;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code ?? String(error);
    } finally {
      await client.close();
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

  it('serves a steady load through restarts of each instance and an outage of Redis; one rate limit across all', {
    timeout: 80_000,
    skip: SKIP_REASON,
  }, async () => {
    const testStarted = performance.now();
    const pool = new Pool(origin, { connections: LOAD_CLIENTS + 1, pipelining: 1 });
    let phase: Phase = 'steady';
    let stopped = false;
    let sent = 0;
    /** How many times Redis, which keeps nothing on disk, has been killed: the profile it held is gone. */
    let redisEpoch = 0;
    const outcomes: Outcome[] = [];

    async function send(
      request: Omit<MixRequest, 'status'>,
    ): Promise<{ status: number; text: string; ms: number; etag?: string; error?: string }> {
      const started = performance.now();
      sent++;
      try {
        const res = await pool.request({
          method: request.method,
          path: request.path,
          headers: request.headers,
          body: request.body,
          headersTimeout: 15_000,
          bodyTimeout: 15_000,
        });
        const text = await res.body.text();
        const etag = res.headers.etag;
        return {
          status: res.statusCode,
          text,
          ms: performance.now() - started,
          etag: typeof etag === 'string' ? etag : undefined,
        };
      } catch (error) {
        return {
          status: 0,
          text: '',
          ms: performance.now() - started,
          error: (error as NodeJS.ErrnoException).code ?? String(error),
        };
      }
    }

    const isStoreUnavailable = (status: number, text: string) =>
      status === 503 && /"code":"SERVICE_UNAVAILABLE"/.test(text) && /shared store is unavailable/.test(text);

    // A cursor from the first page, issued by whichever instance answers.
    const first = await send({ method: 'GET', path: '/api/currencies?limit=3' });
    const cursor = encodeURIComponent(JSON.parse(first.text).pagination.next_cursor as string);
    const mix = loadMix(cursor);

    async function loadClient(offset: number): Promise<void> {
      for (let seq = 0; !stopped && sent < MAX_LOAD_REQUESTS; seq++) {
        const request = mix[(offset + seq) % mix.length] as MixRequest;
        const at = phase;
        const res = await send(request);
        const idempotent = IDEMPOTENT.has(request.method);
        let kind = 'ok';
        if (res.status !== request.status) {
          const needsStore = request.path.startsWith('/api/profile');
          kind =
            needsStore &&
            isStoreUnavailable(res.status, res.text) &&
            (at === 'Redis stopped' || phase === 'Redis stopped')
              ? 'store unavailable'
              : `${request.method} ${request.path.split('?')[0]}: ${res.error ?? res.status}`;
        }
        // Nothing hangs: every answer within the store timeout, and a margin, also while Redis is stopped.
        if (kind === 'ok' || kind === 'store unavailable') {
          if (res.ms > REDIS_TIMEOUT_MS + MARGIN_MS) kind = `slow (${Math.round(res.ms)} ms)`;
        }
        outcomes.push({ phase: at, ms: res.ms, kind, idempotent, request: `${request.method} ${request.path}` });
        await sleep(Math.max(0, PACE_MS - res.ms));
      }
    }

    // The one writer of the profile: each write names the version it read (If-Match), so none can
    // apply twice; each is checked for being applied once, and no acknowledged one lost.
    const writes = {
      acknowledged: 0,
      refusedWhileStoreDown: 0,
      failed: new Map<string, number>(),
      appliedUnacknowledged: 0,
      lost: 0,
      appliedTwice: 0,
      unexpected412: 0,
    };
    const note = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
    const version = (etag: string | undefined) => Number(etag?.slice(1, -1));

    async function read(): Promise<{ etag: string; bio: string | null; epoch: number } | null> {
      for (let attempt = 0; attempt < 200 && !stopped; attempt++) {
        const res = await send({ method: 'GET', path: '/api/profile' });
        const epoch = redisEpoch;
        if (res.status === 200 && res.etag !== undefined)
          return { etag: res.etag, bio: JSON.parse(res.text).bio, epoch };
        await sleep(50);
      }
      return null;
    }

    async function writer(): Promise<void> {
      let current = await read();
      for (let n = 1; !stopped && current !== null && sent < MAX_LOAD_REQUESTS; n++) {
        const bio = `write ${n}`;
        const method = (['PATCH', 'PUT', 'POST'] as const)[n % 3] ?? 'PATCH';
        const at = phase;
        const res = await send({
          method,
          path: '/api/profile',
          headers: {
            'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
            'if-match': current.etag,
          },
          body: JSON.stringify(method === 'PUT' ? { name: 'Ada', bio } : { bio }),
        });
        const idempotent = IDEMPOTENT.has(method);
        if (res.status === 200) {
          writes.acknowledged++;
          const ackedIn = redisEpoch;
          if (version(res.etag) !== version(current.etag) + 1 && ackedIn === current.epoch) writes.appliedTwice++;
          outcomes.push({ phase: at, ms: res.ms, kind: 'ok', idempotent, request: `${method} /api/profile` });
          // Read back, through whichever instance: the write is there, once.
          const seen = await read();
          if (seen !== null && (seen.etag !== res.etag || seen.bio !== bio)) {
            // A Redis killed in between forgets it, as it keeps nothing on disk; anything else is a lost write.
            if (seen.epoch === ackedIn) writes.lost++;
          }
          current = seen;
          await sleep(PACE_MS);
          continue;
        }
        let kind = `${method} /api/profile: ${res.error ?? res.status}`;
        if (isStoreUnavailable(res.status, res.text) && (at === 'Redis stopped' || phase === 'Redis stopped')) {
          writes.refusedWhileStoreDown++;
          kind = 'store unavailable';
        } else if (res.status === 412 && redisEpoch !== current.epoch) {
          // The version it named was of the Redis killed since: part of the outage.
          kind = 'store unavailable';
        } else if (res.status === 412) {
          writes.unexpected412++;
        } else {
          note(writes.failed, kind);
        }
        outcomes.push({ phase: at, ms: res.ms, kind, idempotent, request: `${method} /api/profile` });
        // Whether it applied is read back: a write retried with the same If-Match can never apply twice.
        const seen = await read();
        if (seen?.bio === bio && version(seen.etag) === version(current.etag) + 1) writes.appliedUnacknowledged++;
        current = seen;
        await sleep(PACE_MS);
      }
    }

    const load = Promise.all([...Array.from({ length: LOAD_CLIENTS }, (_, i) => loadClient(i * 3)), writer()]);
    const figures: Record<string, unknown> = {};
    try {
      await sleep(2000);

      // Each instance in turn: SIGTERM, wait for its exit, start it again on its port.
      phase = 'rolling restart';
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
      phase = 'Redis stopped';
      redis.pause();
      await sleep(1500);
      const whileStopped = await Promise.all(instances.map(({ port }) => timed(`http://127.0.0.1:${port}/readyz`)));
      const profileWhileStopped = await send({ method: 'GET', path: '/api/profile' });
      redisEpoch++;
      await redis.kill();
      await sleep(1000);
      const whileKilled = await Promise.all(instances.map(({ port }) => timed(`http://127.0.0.1:${port}/readyz`)));
      const profileWhileKilled = await send({ method: 'GET', path: '/api/profile' });
      const readyzThroughBalancer = await send({ method: 'GET', path: '/readyz' });
      await redis.restart();
      const restartedAt = performance.now();
      const recovery = await Promise.all(instances.map((instance) => untilReady(instance, 10_000)));
      phase = 'Redis back';
      const profileAfter = await send({ method: 'GET', path: '/api/profile' });
      figures.ready_again_after_ms = recovery.map(Math.round);
      figures.ready_again_all_ms = Math.round(performance.now() - restartedAt);
      await sleep(2000);

      stopped = true;
      await withTimeout(load, 20_000, 'the load to stop');

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
      phase = 'rate limit';
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
      const phases: Phase[] = ['steady', 'rolling restart', 'Redis stopped', 'Redis back'];
      figures.requests = outcomes.length;
      figures.by_phase = Object.fromEntries(
        phases.map((name) => {
          const these = outcomes.filter((o) => o.phase === name);
          return [
            name,
            {
              requests: these.length,
              p99_ms: percentile(
                these.map((o) => o.ms),
                99,
              ),
              max_ms: Math.round(Math.max(0, ...these.map((o) => o.ms))),
              store_unavailable: these.filter((o) => o.kind === 'store unavailable').length,
              failed: these.filter((o) => o.kind !== 'ok' && o.kind !== 'store unavailable').length,
              slowest: these
                .sort((a, b) => b.ms - a.ms)
                .slice(0, 3)
                .map((o) => `${o.request} ${Math.round(o.ms)} ms`),
            },
          ];
        }),
      );
      const failures = new Map<string, number>();
      for (const o of outcomes) {
        if (o.kind !== 'ok' && o.kind !== 'store unavailable') {
          note(failures, `${o.idempotent ? 'idempotent' : 'non-idempotent'} ${o.kind} (${o.phase})`);
        }
      }
      figures.failures = Object.fromEntries(failures);
      figures.writes = { ...writes, failed: Object.fromEntries(writes.failed) };
      figures.nginx = { ...(await nginx.accessLog()), upstream_errors: nginx.upstreamErrors() };
      if (process.env.CLUSTER_DEBUG) console.log(nginx.stderr());
      figures.run_s = Math.round((performance.now() - testStarted) / 100) / 10;
      console.log(`cluster: ${JSON.stringify(figures, null, 1)}`);

      const idempotentFailures = outcomes.filter(
        (o) => o.idempotent && o.kind !== 'ok' && o.kind !== 'store unavailable',
      );
      assert.deepEqual(
        idempotentFailures.map((o) => `${o.kind} (${o.phase})`),
        [],
        'no idempotent request fails at the client',
      );
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
      stopped = true;
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
