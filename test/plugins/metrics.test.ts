import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { UNMATCHED_ROUTE } from '../../src/plugins/metrics.js';
import { assertEnvelope, type Client, injectClient, samples, transports } from '../helpers.js';

const labels = (method: string, route: string, status: number) =>
  `{method="${method}",route="${route}",status="${status}"}`;

for (const [transport, connect] of transports) {
  describe(`GET /metrics (${transport})`, () => {
    let client: Client;
    let text: string;
    before(async () => {
      client = await connect();
      for (const name of ['a', 'b', 'a', 'W%C3%B6rld']) await client.send({ path: `/api/hello/${name}` });
      await client.send({ path: '/api/v1/hello/c' });
      await client.send({ path: '/api/search' }); // 400
      await client.send({ path: '/no/such/path' }); // 404
      await client.send({ path: '/api/hello', method: 'DELETE' }); // 405
      await client.send({ path: '/api/hello/%E0%A4%A' }); // 400, refused before routing
      const res = await client.send({ path: '/metrics' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
      assert.equal(typeof res.headers['x-request-id'], 'string');
      text = res.text;
    });
    after(() => client.close());

    it('counts requests by method, route template and status: one series for /api/hello/:name, not one per name', () => {
      assert.deepEqual(
        samples(text, 'http_requests_total'),
        new Map([
          [labels('GET', '/api/hello/:name', 200), 5],
          [labels('GET', '/api/search', 400), 1],
          [labels('GET', UNMATCHED_ROUTE, 404), 1],
          [labels('DELETE', UNMATCHED_ROUTE, 405), 1],
          [labels('GET', UNMATCHED_ROUTE, 400), 1],
        ]),
      );
      assert.match(text, /^# TYPE http_requests_total counter$/m);
      assert.doesNotMatch(text, /\/api\/hello\/a|\/no\/such\/path/, 'no raw URL is a label');
    });

    it('measures their durations in a histogram of the same series, in seconds', () => {
      assert.match(text, /^# TYPE http_request_duration_seconds histogram$/m);
      const counts = samples(text, 'http_request_duration_seconds_count');
      assert.deepEqual(counts, samples(text, 'http_requests_total'));
      const bucket = (le: string) =>
        samples(text, 'http_request_duration_seconds_bucket').get(
          `{le="${le}",${labels('GET', '/api/hello/:name', 200).slice(1)}`,
        );
      assert.equal(bucket('+Inf'), 5);
      assert.notEqual(bucket('0.0005'), undefined, 'buckets below a millisecond');
      const sum = samples(text, 'http_request_duration_seconds_sum').get(labels('GET', '/api/hello/:name', 200));
      assert.ok(sum !== undefined && sum > 0 && sum < 5, `a plausible total: ${sum} s`);
    });

    it('counts the scrapes themselves once they are answered', async () => {
      const again = (await client.send({ path: '/metrics' })).text;
      assert.equal(samples(again, 'http_requests_total').get(labels('GET', '/metrics', 200)), 1);
    });

    it('includes the process metrics', () => {
      for (const name of [
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_heap_size_used_bytes',
      ]) {
        assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
      }
      assert.match(text, /^nodejs_eventloop_lag_seconds \S+$/m);
    });
  });
}

describe('metrics per app', () => {
  it('keeps each app’s counts apart', async () => {
    const first = await injectClient();
    const second = await injectClient();
    try {
      await first.send({ path: '/healthz' });
      const text = (await second.send({ path: '/metrics' })).text;
      assert.equal(samples(text, 'http_requests_total').size, 0);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('labels routes with their templates under a context path', async () => {
    const client = await injectClient({ contextPath: '/svc' });
    try {
      await client.send({ path: '/svc/api/hello/x' });
      const text = (await client.send({ path: '/svc/metrics' })).text;
      assert.equal(samples(text, 'http_requests_total').get(labels('GET', '/svc/api/hello/:name', 200)), 1);
    } finally {
      await client.close();
    }
  });
});

describe('readiness and the store in /metrics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-metrics-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const token = 'bWV0cmljcy1yZWFkaW5lc3MtdG9rZW4=';
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${token}\n`);

  const gauges = async (client: Client) => {
    const text = (await client.send({ path: '/metrics' })).text;
    assert.match(text, /^# TYPE service_ready gauge$/m);
    assert.match(text, /^# TYPE store_up gauge$/m);
    return { ready: samples(text, 'service_ready').get(''), store: samples(text, 'store_up') };
  };

  it('ready, the memory store up: 1 and 1; taken out by the operator: service_ready 0, the store still 1', async () => {
    const client = await injectClient({ adminTokenFile: tokenFile });
    try {
      assert.deepEqual(await gauges(client), { ready: 1, store: new Map([['{store="memory"}', 1]]) });
      const headers = { authorization: `Bearer ${token}` };
      assert.equal((await client.send({ method: 'POST', path: '/readyz/disable', headers })).status, 204);
      assert.deepEqual(await gauges(client), { ready: 0, store: new Map([['{store="memory"}', 1]]) });
      assert.equal((await client.send({ method: 'POST', path: '/readyz/enable', headers })).status, 204);
      assert.equal((await gauges(client)).ready, 1);
    } finally {
      await client.close();
    }
  });

  it('Redis unreachable: store_up{store="redis"} 0 and service_ready 0, as /readyz says', async () => {
    const client = await injectClient({ redisUrl: 'redis://127.0.0.1:9', redisTimeoutMs: 200 });
    try {
      assert.equal((await client.send({ path: '/readyz' })).status, 503);
      assert.deepEqual(await gauges(client), { ready: 0, store: new Map([['{store="redis"}', 0]]) });
    } finally {
      await client.close();
    }
  });
});

describe('METRICS_ENABLED=false', () => {
  let client: Client;
  before(async () => {
    client = await injectClient({ metricsEnabled: false });
  });
  after(() => client.close());

  it('answers /metrics 404 with the error envelope', async () => {
    assertEnvelope(await client.send({ path: '/metrics' }), 404, 'NOT_FOUND');
  });

  it('installs no metrics hook and documents no /metrics', async () => {
    assert.equal(client.app.hasDecorator('metricsRegistry'), false);
    const document = (await client.send({ path: '/openapi.json' })).json();
    assert.equal(document.paths['/metrics'], undefined);
  });
});
