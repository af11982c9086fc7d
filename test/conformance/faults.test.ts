import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runConformance } from '../../packages/conformance/src/index.js';
import { httpClient, type ListeningApp, listening } from '../helpers.js';
import { run } from '../run-command.js';
import { ROOT, startServer } from '../server-process.js';
import { startBrokenProxy } from './broken-server.js';
import { notPassed } from './report.js';

/** What an injected 503 names in a skip. */
const INJECTED =
  /^an injected fault answered (GET|HEAD|POST|PUT|PATCH|RAW) \S+.*: 503 SERVICE_UNAVAILABLE \(x-fault-injected: abort\)$/;

describe('the conformance kit against a deployment that answers every request under /api with an injected fault', () => {
  it('fails nothing: each check an injected answer reached, its own or the table it shares or the WebSocket handshake, skips naming it', async () => {
    const client = await httpClient({ faultErrorRate: 1, rateLimitMax: 0 });
    try {
      const { port } = client.app.server.address() as { port: number };
      const report = await runConformance({ baseUrl: `http://127.0.0.1:${port}`, write: true });
      assert.equal(report.failed, 0, notPassed(report).join('\n'));
      const reason = (id: string) => report.results.find((result) => result.id === id)?.reason ?? '';
      assert.match(reason('websocket.echo'), /^an injected fault answered GET \/api\/v1\/echo\/websocket: 503 /);
      for (const result of report.results.filter((r) => r.group === 'currencies' || r.group === 'exchange')) {
        assert.equal(result.outcome, 'skip', result.id);
        assert.match(result.reason ?? '', INJECTED, result.id);
      }
      // Not one check that asks the table first reads it from an answer of its own.
      assert.match(reason('exchange.every-pair'), /answered GET \/api\/currencies\?per_page=100&page=1: 503/);
    } finally {
      await client.close();
    }
  });

  it('the built service with FAULT_ERROR_RATE=1: the command exits 0, the faults noted', async () => {
    const server = await startServer({ FAULT_ERROR_RATE: '1' });
    try {
      const { code, stdout, stderr } = await run(process.execPath, [
        join(ROOT, 'dist', 'server.js'),
        'conformance',
        `http://127.0.0.1:${server.port}`,
      ]);
      assert.equal(
        code,
        0,
        `${stderr}\n${stdout
          .split('\n')
          .filter((line) => line.startsWith('fail'))
          .join('\n')}`,
      );
      assert.match(stdout, /^the deployment injects faults: \d+ of \d+ answers named one/m);
      assert.match(stdout, /^\d+ passed, 0 failed, \d+ skipped$/m);
    } finally {
      server.kill();
      await server.exited;
    }
  });
});

describe('the conformance kit where an injected fault answered the first read of the table', () => {
  let service: ListeningApp;
  let proxy: { url: string; server: Server };
  let tableReads = 0;

  before(async () => {
    service = await listening({ rateLimitMax: 0, logLevel: 'silent' });
    proxy = await startBrokenProxy(service.origin, (req, answer) => {
      if (!req.url.startsWith('/api/currencies?per_page=100&page=1')) return answer;
      tableReads += 1;
      if (tableReads > 1) return answer;
      const body = JSON.stringify({
        error: {
          code: 'SERVICE_UNAVAILABLE',
          message: 'Injected.',
          details: [],
          timestamp: new Date().toISOString(),
          request_id: 'injected-1',
        },
      });
      const headers = {
        ...answer.headers,
        'x-fault-injected': 'abort',
        'x-request-id': 'injected-1',
        'retry-after': '1',
      };
      return { status: 503, headers, body };
    });
  });
  after(async () => {
    proxy.server.close();
    await service.app.close();
  });

  it('skips the check that met it, naming it, and reads the table again for the next', async () => {
    const report = await runConformance({
      baseUrl: proxy.url,
      only: ['currencies', 'exchange.example', 'exchange.case'],
    });
    const skipped = report.results.filter((result) => result.outcome === 'skip');
    assert.deepEqual(
      skipped.map((result) => result.id),
      ['currencies.table'],
    );
    assert.match(
      skipped[0]?.reason ?? '',
      /^an injected fault answered GET \/api\/currencies\?per_page=100&page=1: 503 SERVICE_UNAVAILABLE/,
    );
    assert.equal(report.failed, 0, notPassed(report).join('\n'));
    assert.equal(tableReads, 2);
  });
});
