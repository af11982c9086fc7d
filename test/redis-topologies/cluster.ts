import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'undici';
import { killAllServers, type RunningServer, withTimeout } from '../server-process.js';
import { failoverRun, originOf, startInstances } from './instances.js';
import { type Recovery, readsServedSince } from './recovery.js';
import { ask, ClusterTopology, type RedisProcess, slotOf, TOPOLOGIES_SKIP_REASON, until } from './topologies.js';

/**
 * Instances of the built service on a Redis Cluster of three primaries and three replicas: the
 * profile and the rate limiter's keys fall in slots of every primary, the rate limit is one
 * count across two instances, and under a paced load of every endpoint and of profile writers
 * with If-Match, the primary holding the profile is SIGKILLed; its replica takes over, and the
 * cost is printed.
 */

const KEY_PREFIX = 'greeting-service:';
const RATE_LIMIT = 30;
const RATE_PROBES = 45;
const AFTER_FAILOVER_MS = 1000;

/** Registers the suite: called by topologies.redis.ts. */
export function clusterSuite(): void {
  describe('Cluster: three primaries, three replicas', { skip: TOPOLOGIES_SKIP_REASON }, () => {
    let topology: ClusterTopology;
    let dir: string;
    let instances: RunningServer[] = [];
    /** Instances with a small rate limit, for counting. */
    let limited: RunningServer[] = [];
    /** Loopback addresses already used by a rate-limit probe: each counts from 0 once. */
    const used = new Set<string>();

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'cluster-instances-'));
      topology = await ClusterTopology.start();
      const env = { REDIS_CLUSTER_NODES: topology.seedList };
      [instances, limited] = await Promise.all([
        startInstances(2, env, dir, 'instance'),
        startInstances(2, { ...env, RATE_LIMIT_MAX: String(RATE_LIMIT) }, dir, 'limited'),
      ]);
    });

    after(async () => {
      killAllServers();
      await topology?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    /** A loopback address not used yet whose rate-limit key is in a slot of `primary`. */
    async function addressOn(primary: RedisProcess): Promise<string> {
      const [start, end] = await topology.slotRange(primary);
      for (let i = 2; i < 255; i++) {
        const address = `127.0.0.${i}`;
        if (used.has(address)) continue;
        const slot = await slotOf(primary.port, `${KEY_PREFIX}rate-limit:${address}`);
        if (slot >= start && slot <= end) {
          used.add(address);
          return address;
        }
      }
      throw new Error(`no loopback address has its key on ${primary.address}`);
    }

    /**
     * From one address, RATE_PROBES requests sent to the two limited instances in turn: exactly
     * RATE_LIMIT served, counting down, then 429s.
     */
    async function assertOneCount(address: string): Promise<void> {
      const clients = limited.map((instance) => new Client(originOf(instance), { localAddress: address }));
      const statuses: number[] = [];
      const remaining: string[] = [];
      try {
        for (let i = 0; i < RATE_PROBES; i++) {
          const res = await (clients[i % clients.length] as Client).request({ method: 'GET', path: '/api/hello' });
          await res.body.dump();
          statuses.push(res.statusCode);
          remaining.push(String(res.headers['ratelimit-remaining']));
        }
      } finally {
        await Promise.all(clients.map((client) => client.close()));
      }
      assert.deepEqual(
        statuses,
        [...Array<number>(RATE_LIMIT).fill(200), ...Array<number>(RATE_PROBES - RATE_LIMIT).fill(429)],
        address,
      );
      assert.deepEqual(
        remaining.slice(0, RATE_LIMIT),
        Array.from({ length: RATE_LIMIT }, (_, i) => String(RATE_LIMIT - 1 - i)),
      );
    }

    it("counts each client once across two instances, whichever primary holds the client's slot", async () => {
      const primaries = await topology.primaries();
      assert.equal(primaries.length, 3);
      for (const primary of primaries) await assertOneCount(await addressOn(primary));
      // The profile is in a slot of its own too; every primary holds keys of the service.
      const profile = await fetch(`${originOf(instances[0] as RunningServer)}/api/profile`);
      assert.equal(profile.status, 200);
      for (const primary of primaries) {
        const [, keys] = (await ask(primary.port, 'SCAN', '0', 'MATCH', `${KEY_PREFIX}*`, 'COUNT', '1000')) as [
          string,
          string[],
        ];
        assert.ok(keys.length > 0, `no key of the service on ${primary.address}`);
      }
    });

    it("serves again within a second of a primary's failover, losing no acknowledged write; the count exact after", {
      timeout: 60_000,
    }, async () => {
      const { pool, load, traffic, timeline, first } = await failoverRun(instances, ['primary killed'], 2);
      const profileSlot = await slotOf(topology.nodes[0]?.port ?? 0, `${KEY_PREFIX}profile`);
      const victim = await topology.primaryOfSlot(profileSlot);
      await load.start();
      traffic.start();
      try {
        timeline.start('steady');
        await sleep(2000);

        const crash = timeline.start('primary killed');
        await victim.kill();
        await until(
          'a replica to take the slots over',
          async () => (await topology.primaryOfSlot(profileSlot)).port !== victim.port,
        );
        crash.switchedAt = performance.now();
        await until('reads served again', async () => readsServedSince(traffic.answers, crash.switchedAt ?? 0));
        await sleep(1500);
        timeline.start('after');
        await sleep(1000);
        await withTimeout(Promise.all([traffic.stop(), load.stop()]), 20_000, 'the load to stop');
        timeline.start('stopped');

        const recoveries = timeline.recoveries(traffic.answers);
        const acknowledged = traffic.acknowledged();
        const figures = {
          recoveries,
          profile: traffic.figures(),
          load: load.figures(timeline.events.map((e) => e.name)),
        };
        console.log(`cluster: ${JSON.stringify(figures, null, 1)}`);

        assert.deepEqual(traffic.violations(first), []);
        assert.ok(acknowledged.length > 30, `${acknowledged.length} acknowledged writes`);
        assert.deepEqual(load.idempotentFailures(), [], 'nothing but profile requests fails, and those with 503');
        const crashed = recoveries[1] as Recovery;
        assert.ok(
          crashed.reads_failing_ms <= (crashed.failover_ms ?? 0) + AFTER_FAILOVER_MS,
          `reads failed for ${crashed.reads_failing_ms} ms, failover ${crashed.failover_ms} ms`,
        );
        for (const recovery of recoveries) {
          for (const status of Object.keys(recovery.failed_statuses))
            assert.equal(status, '503', JSON.stringify(recovery));
        }
        // Before the failure and once over, every profile request is served.
        for (const quiet of [recoveries[0], recoveries[2]] as Recovery[])
          assert.deepEqual(quiet.failed_statuses, {}, quiet.event);
        // After the failover, the count is exact again on every primary, the promoted one included.
        for (const primary of await topology.primaries()) await assertOneCount(await addressOn(primary));
      } finally {
        await traffic.stop();
        await load.stop();
        await pool.close();
      }
    });
  });
}
