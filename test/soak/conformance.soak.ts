import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { runConformance } from '../../packages/conformance/src/index.js';
import { notPassed, SKIPPED_OVER_HTTP1 } from '../conformance/report.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from '../redis-server.js';
import { killAllServers, type RunningServer, startServer } from '../server-process.js';

/*
 * The conformance kit against two instances of the built server sharing one Redis, through a
 * round-robin proxy: with its own two processes and a Redis it takes longer than the tests of
 * test/conformance/, so it runs once, with the soak suites.
 */

/**
 * A load balancer in a few lines: each connection goes to the next instance in turn. The kit
 * opens a connection per request, so its requests alternate between the two.
 */
async function roundRobin(ports: readonly number[]): Promise<{ server: Server; url: string; counts: number[] }> {
  const counts = ports.map(() => 0);
  let next = 0;
  const server = createServer((client) => {
    const i = next++ % ports.length;
    counts[i] = (counts[i] ?? 0) + 1;
    const upstream = connect(ports[i] as number, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    // An instance that answers before the whole body has come (a 413) and closes: the rest of the
    // body is read and dropped, as a load balancer does, so that the client reads the answer.
    upstream.on('close', () => {
      client.unpipe(upstream);
      client.resume();
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.end());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, counts };
}

describe('the conformance kit against two instances sharing one Redis', {
  skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON,
}, () => {
  let redis: RedisServer;
  let instances: RunningServer[];
  let balancer: Awaited<ReturnType<typeof roundRobin>>;

  before(async () => {
    redis = await RedisServer.start();
    const env = {
      REDIS_URL: redis.url,
      CURSOR_SECRET: 'a secret the two instances share, for cursors',
      RATE_LIMIT_MAX: '2500',
    };
    instances = await Promise.all([startServer(env), startServer(env)]);
    balancer = await roundRobin(instances.map((instance) => instance.port));
  });
  after(async () => {
    balancer?.server.close();
    killAllServers();
    await redis?.kill();
  });

  it('passes every check but the slow ones and HTTP/2, writes, gRPC and the shared rate limit included', async () => {
    const report = await runConformance({ baseUrl: balancer.url, write: true, rateLimit: true, grpc: true });
    assert.deepEqual(notPassed(report), [
      ...SKIPPED_OVER_HTTP1,
      'skip timeouts.slow-headers: needs --slow | ',
      'skip timeouts.slow-body: needs --slow | ',
    ]);
    // Both instances answered about half: the rate limit was exhausted across the two, as one count.
    const [a = 0, b = 0] = balancer.counts;
    assert.ok(Math.abs(a - b) <= 1 && a > 1000, `${a} and ${b} connections`);
  });
});
