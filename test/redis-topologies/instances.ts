import { join } from 'node:path';
import { statusOf } from '../cluster/load.js';
import { type RunningServer, startServer } from '../server-process.js';
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
