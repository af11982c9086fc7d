import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { killAllServers, type RunningServer, withTimeout } from '../server-process.js';
import { failoverRun, startInstances } from './instances.js';
import { type Recovery, readsServedSince } from './recovery.js';
import {
  ask,
  type RedisProcess,
  SENTINEL_NAME,
  SentinelTopology,
  TOPOLOGIES_SKIP_REASON,
  until,
} from './topologies.js';

/**
 * Two instances of the built service following a primary through three sentinels, under a paced
 * load of every endpoint and of profile writers with If-Match, every write acknowledged by every replica:
 * the primary SIGKILLed, the old primary started again empty, then a planned SENTINEL FAILOVER.
 * The history of the profile is held to the acknowledged writes, and each event's cost is printed.
 */

/** The bound of the issue: 503s for at most the failover's own time plus this. */
const AFTER_FAILOVER_MS = 1000;

/**
 * Registers the suite: called by topologies.redis.ts. `replicas` replicas, and REDIS_MIN_REPLICAS_ACK
 * and the nodes' min-replicas-to-write at `ack`.
 */
export function sentinelSuite(replicas = 1, ack = replicas): void {
  describe(`Sentinel: a primary, ${replicas === 1 ? 'a replica' : `${replicas} replicas`}, three sentinels`, {
    skip: TOPOLOGIES_SKIP_REASON,
  }, () => {
    let topology: SentinelTopology;
    let dir: string;
    let instances: RunningServer[] = [];

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'sentinel-instances-'));
      topology = await SentinelTopology.start(replicas, ack);
      instances = await startInstances(
        2,
        {
          REDIS_SENTINELS: topology.sentinelList,
          REDIS_SENTINEL_NAME: SENTINEL_NAME,
          REDIS_MIN_REPLICAS_ACK: String(ack),
        },
        dir,
        'instance',
      );
    });

    after(async () => {
      killAllServers();
      await topology?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('loses and doubles no acknowledged write, serves only from the primary, and is back within a second of each failover', {
      timeout: 90_000,
    }, async () => {
      const { origins, pool, load, traffic, timeline, first } = await failoverRun(
        instances,
        ['primary killed', 'old primary back', 'planned failover'],
        3,
      );
      await load.start();
      traffic.start();
      try {
        timeline.start('steady');
        await sleep(2000);

        // A crash: the sentinels see it after down-after-milliseconds, and promote the replica.
        const killed = topology.nodes[0] as RedisProcess;
        assert.equal((await topology.primary()).port, killed.port);
        let watch = await topology.nextSwitch();
        const crash = timeline.start('primary killed');
        await killed.kill();
        crash.switchedAt = await withTimeout(watch.switched, 20_000, 'a failover after the crash');
        watch.close();
        await until('reads served again', async () => readsServedSince(traffic.answers, crash.switchedAt ?? 0));
        await sleep(1000);

        // The old primary back, empty: the sentinels make it a replica of the new one, which copies its data.
        const back = timeline.start('old primary back');
        await killed.start();
        const promoted = await topology.primary();
        assert.notEqual(promoted.port, killed.port);
        await topology.untilReplicated(promoted, 30_000);
        const resyncedMs = performance.now() - back.at;
        await sleep(1000);

        // A planned failover, as for maintenance: the sentinels swap the two.
        watch = await topology.nextSwitch();
        const planned = timeline.start('planned failover');
        assert.equal(await ask(topology.sentinels[0]?.port ?? 0, 'SENTINEL', 'FAILOVER', SENTINEL_NAME), 'OK');
        planned.switchedAt = await withTimeout(watch.switched, 20_000, 'the planned failover');
        watch.close();
        await until('reads served again', async () => readsServedSince(traffic.answers, planned.switchedAt ?? 0));
        await topology.untilReplicated(await topology.primary(), 30_000);
        const plannedResyncedMs = performance.now() - planned.at;
        await sleep(1000);
        timeline.start('after');
        await sleep(1000);

        await withTimeout(Promise.all([traffic.stop(), load.stop()]), 20_000, 'the load to stop');
        timeline.start('stopped');

        const recoveries = timeline.recoveries(traffic.answers);
        const acknowledged = traffic.acknowledged();
        const finalRead = (await (await fetch(`${origins[1]}/api/profile`)).json()) as { bio: string };
        const figures = {
          recoveries,
          replica_in_step_ms: {
            'old primary back': Math.round(resyncedMs),
            'planned failover': Math.round(plannedResyncedMs),
          },
          profile: traffic.figures(),
          load: load.figures(timeline.events.map((e) => e.name)),
        };
        console.log(`sentinel: ${JSON.stringify(figures, null, 1)}`);

        assert.deepEqual(traffic.violations(first), []);
        assert.ok(acknowledged.length > 50, `${acknowledged.length} acknowledged writes`);
        const newest = acknowledged.reduce((a, b) => (a.version > b.version ? a : b));
        assert.equal(finalRead.bio, newest.wrote, 'the newest acknowledged write is the profile at the end');
        assert.deepEqual(load.idempotentFailures(), [], 'nothing but profile requests fails, and those with 503');
        const [, crashed, restarted, switched] = recoveries as Recovery[];
        for (const recovery of [crashed, switched] as Recovery[]) {
          assert.ok(
            recovery.reads_failing_ms <= (recovery.failover_ms ?? 0) + AFTER_FAILOVER_MS,
            `${recovery.event}: reads failed for ${recovery.reads_failing_ms} ms, failover ${recovery.failover_ms} ms`,
          );
        }
        // The old primary coming back costs reads nothing.
        assert.equal(restarted?.failed_reads, 0);
        for (const recovery of recoveries) {
          for (const status of Object.keys(recovery.failed_statuses))
            assert.equal(status, '503', JSON.stringify(recovery));
        }
        // Before the failure and once over, every profile request is served.
        for (const quiet of [recoveries[0], recoveries[4]] as Recovery[])
          assert.deepEqual(quiet.failed_statuses, {}, quiet.event);
      } finally {
        await traffic.stop();
        await load.stop();
        await pool.close();
      }
    });
  });
}
