import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runConformance } from '../../src/conformance/index.js';
import type { Client } from '../helpers.js';
import { httpClient } from '../helpers.js';
import { notPassed } from './report.js';

describe('the conformance kit against the service in memory', () => {
  let client: Client;
  let origin: string;

  before(async () => {
    // Short timeouts, so that the slow-client checks end within seconds; a limit the run can exhaust.
    client = await httpClient({ rateLimitMax: 2500, headersTimeoutMs: 1000, requestTimeoutMs: 2000 });
    const address = client.app.server.address() as { port: number };
    origin = `http://127.0.0.1:${address.port}`;
  });
  after(() => client.close());

  it('passes every check, writes, rate limit and slow clients included', async () => {
    const report = await runConformance({ baseUrl: origin, write: true, rateLimit: true, slow: true });
    assert.deepEqual(notPassed(report), []);
    assert.equal(report.failed, 0);
    assert.ok(report.passed > 90, `${report.passed} checks passed`);
  });

  it('leaves the profile as it found it', async () => {
    // From another address: this one has spent its rate limit.
    const res = await client.app.inject({ url: '/api/profile', remoteAddress: '192.0.2.1' });
    assert.deepEqual(res.json(), { name: null, email: null, bio: null });
  });
});

describe('the conformance kit against a service under a context path', () => {
  let client: Client;
  let origin: string;

  before(async () => {
    client = await httpClient({ contextPath: '/svc', rateLimitMax: 0 });
    const address = client.app.server.address() as { port: number };
    origin = `http://127.0.0.1:${address.port}`;
  });
  after(() => client.close());

  it('checks the routes under the base URL path, and skips the rate-limit headers when there is no limit', async () => {
    const report = await runConformance({
      baseUrl: `${origin}/svc/`,
      only: ['hello', 'errors', 'versioning', 'health', 'openapi', 'rate-limit', 'currencies'],
    });
    assert.deepEqual(notPassed(report), [
      'skip rate-limit.headers: no RateLimit-* headers: rate limiting is off on this deployment | ',
      'skip rate-limit.exceeded: needs --rate-limit | ',
    ]);
  });
});
