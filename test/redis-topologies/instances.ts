import { join } from 'node:path';
import { BalancedPool } from 'undici';
import { MixedLoad, statusOf } from '../cluster/load.js';
import { type RunningServer, startServer } from '../server-process.js';
import { ProfileTraffic } from './profile-writers.js';
import { Timeline } from './recovery.js';
import { until } from './topologies.js';

/** What every instance of these tests shares: one cursor secret, and no rate limit unless asked. */
const COMMON = {
  REDIS_TIMEOUT_MS: '1000',
  RATE_LIMIT_MAX: String(2 ** 31 - 1),
  CURSOR_SECRET: 'a cursor secret shared by the instances',
};

/** Starts `count` instances of the built service with these settings, logging to `dir`, and waits until each is ready. */
export async function startInstances(
  count: number,
  env: Record<string, string>,
  dir: string,
  name: string,
): Promise<RunningServer[]> {
  const instances = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      startServer({ ...COMMON, ...env }, [], { logFile: join(dir, `${name}-${i + 1}.log`) }),
    ),
  );
  await Promise.all(
    instances.map(({ port }) =>
      until(`instance on ${port} ready`, async () => (await statusOf(`http://127.0.0.1:${port}/readyz`)) === 200),
    ),
  );
  return instances;
}

export const originOf = ({ port }: RunningServer) => `http://127.0.0.1:${port}`;

/**
 * What a failover test runs against the instances, not yet started: the paced mixed load (its
 * outages named as the test's events), the profile's writers and readers, the timeline that tells
 * the load which phase it is in, and the profile's version before any of it.
 */
export async function failoverRun(instances: RunningServer[], outages: string[], writers: number) {
  const origins = instances.map(originOf);
  const pool = new BalancedPool(origins, { connections: 4, pipelining: 1 });
  const load = new MixedLoad(pool, {
    clients: 4,
    paceMs: 25,
    maxRequests: 40_000,
    slowMs: 1500,
    outageSlowMs: 1500,
    outages,
    writer: false,
  });
  const traffic = new ProfileTraffic(origins, { writers, readers: 2, paceMs: 20 });
  const timeline = new Timeline((name) => {
    load.phase = name;
  });
  const first = Number((await fetch(`${origins[0]}/api/profile`)).headers.get('etag')?.slice(1, -1));
  return { origins, pool, load, traffic, timeline, first };
}
