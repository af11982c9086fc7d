import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { summary } from '../../src/conformance/cli.js';
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

describe('the conformance kit against a deployment that injects faults', () => {
  it('skips, naming the injected answer, the checks an injected error answered, and says the deployment injects faults', async () => {
    const client = await httpClient({ faultErrorRate: 1, faultErrorStatus: 418, rateLimitMax: 0 });
    try {
      const { port } = client.app.server.address() as { port: number };
      const report = await runConformance({ baseUrl: `http://127.0.0.1:${port}`, only: ['hello', 'health'] });
      assert.equal(report.failed, 0, JSON.stringify(notPassed(report)));
      const hello = report.results.filter((result) => result.group === 'hello');
      assert.ok(hello.length >= 5);
      for (const result of hello) {
        assert.equal(result.outcome, 'skip', result.id);
        assert.match(
          result.reason ?? '',
          /^an injected fault answered (GET|HEAD) \/api\/hello\S*: 418( IM_A_TEAPOT)? \(x-fault-injected: abort\)$/,
        );
      }
      // Outside /api, nothing is injected: the health checks pass, the operator switch's 404 included.
      assert.deepEqual(
        report.results.filter((result) => result.group === 'health').map((result) => [result.id, result.outcome]),
        [
          ['health.healthz', 'pass'],
          ['health.readyz', 'pass'],
          ['health.operator-switch', 'pass'],
        ],
      );
      assert.ok(report.injected >= hello.length, `${report.injected} injected answers`);
      assert.match(summary(report), /^\d+ passed, 0 failed, \d+ skipped$/);
    } finally {
      await client.close();
    }
  });

  it("passes the operator switch's check where it is served: 401 with WWW-Authenticate: Bearer", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'greeting-kit-'));
    const token = join(dir, 'token');
    writeFileSync(token, 'a-token-the-kit-never-sends-0123456789\n');
    const client = await httpClient({ adminTokenFile: token });
    try {
      const { port } = client.app.server.address() as { port: number };
      const report = await runConformance({ baseUrl: `http://127.0.0.1:${port}`, only: ['health'] });
      assert.deepEqual(notPassed(report), []);
      assert.equal(report.injected, 0);
    } finally {
      await client.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
