import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { summary } from '../../packages/conformance/src/cli.js';
import { runConformance } from '../../packages/conformance/src/index.js';
import type { Client } from '../helpers.js';
import { http2Client, httpClient, listening } from '../helpers.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON } from '../tls-files.js';
import { notPassed, SKIPPED_OVER_HTTP1 } from './report.js';

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

  it('passes every check, writes, rate limit, slow clients and gRPC included', async () => {
    const report = await runConformance({ baseUrl: origin, write: true, rateLimit: true, slow: true, grpc: true });
    // Over HTTP/1.1: the HTTP/2 checks need --http2 (run below).
    assert.deepEqual(notPassed(report), SKIPPED_OVER_HTTP1);
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
          ['health.readyz-parameters', 'pass'],
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

describe('the conformance kit over HTTP/2', () => {
  it("passes every check, writes, rate limit and gRPC included, over h2c; the slow clients are HTTP/1.1's, checked above", async () => {
    const client = await http2Client({ rateLimitMax: 2500 });
    try {
      const address = client.app.server.address() as { port: number };
      const report = await runConformance({
        baseUrl: `http://127.0.0.1:${address.port}`,
        write: true,
        rateLimit: true,
        http2: true,
        grpc: true,
      });
      assert.deepEqual(notPassed(report), [
        'skip timeouts.slow-headers: needs --slow | ',
        'skip timeouts.slow-body: needs --slow | ',
      ]);
      assert.ok(report.results.filter((r) => r.group === 'http2' && r.outcome === 'pass').length === 4);
    } finally {
      await client.close();
    }
  });

  it('passes every check over HTTPS, h2 by ALPN, trusting a private CA', {
    skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
  }, async () => {
    const files = makeTlsFiles();
    const server = await listening({
      http2: true,
      rateLimitMax: 0,
      logLevel: 'silent',
      tlsCertFile: files.serverCert,
      tlsKeyFile: files.serverKey,
    });
    try {
      const report = await runConformance({
        baseUrl: server.origin,
        write: true,
        http2: true,
        grpc: true,
        ca: readFileSync(files.ca),
      });
      assert.deepEqual(
        notPassed(report).filter((line) => !line.startsWith('skip timeouts.') && !line.startsWith('skip rate-limit.')),
        [],
      );
      // Without the CA, the certificate is not trusted: the kit cannot reach the service.
      await assert.rejects(runConformance({ baseUrl: server.origin, http2: true, only: ['hello'] }), /cannot reach/);
      const insecure = await runConformance({ baseUrl: server.origin, http2: true, insecure: true, only: ['hello'] });
      assert.equal(insecure.failed, 0);
    } finally {
      await server.app.close();
      files.remove();
    }
  });
});
