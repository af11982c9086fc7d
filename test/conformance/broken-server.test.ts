import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { describe, it } from 'node:test';
import { runConformance } from '../../packages/conformance/src/index.js';
import { type Fault, startBrokenServer } from './broken-server.js';

/** The groups the stand-in serves. */
const GROUPS = ['hello', 'search', 'echo', 'errors', 'request-id', 'trace-context', 'exchange'];

/** The checks each fault must fail, and no other. */
const FAILS: Record<Fault, string[]> = {
  'float-exchange': ['exchange.every-pair', 'exchange.half-even'],
  'no-request-id-on-success': [
    'request-id.on-success',
    'request-id.reused',
    'request-id.replaced',
    'request-id.unique',
    'request-id.every-answer',
  ],
  'html-404': ['errors.not-found', 'errors.not-found-outside-api'],
  'lossy-echo': ['echo.big-integer', 'echo.long-decimal', 'echo.key-order'],
  'strict-traceparent': ['trace-context.never-breaks'],
  // An injected fault is no contract failure, unless it is outside the envelope.
  'html-injected-fault': ['hello.greeting-unicode'],
};

async function failing(faults: Fault[]): Promise<string[]> {
  const { url, server } = await startBrokenServer(faults);
  try {
    const report = await runConformance({ baseUrl: url, only: GROUPS });
    assert.equal(report.skipped, 0);
    return report.results.filter((result) => result.outcome === 'fail').map((result) => result.id);
  } finally {
    await close(server);
  }
}

const close = (server: Server) => new Promise((resolve) => server.close(resolve));

describe('the conformance kit against a deliberately broken server', () => {
  it('passes every check of a stand-in that keeps every clause', async () => {
    assert.deepEqual(await failing([]), []);
  });

  for (const [fault, checks] of Object.entries(FAILS) as [Fault, string[]][]) {
    it(`fails exactly ${checks.join(', ')} for ${fault}`, async () => {
      assert.deepEqual(await failing([fault]), checks);
    });
  }

  it('fails exactly the union when every fault is there, and says what it expected and what came', async () => {
    const { url, server } = await startBrokenServer(Object.keys(FAILS) as Fault[]);
    try {
      const report = await runConformance({ baseUrl: url, only: GROUPS });
      const failed = report.results.filter((result) => result.outcome === 'fail');
      assert.deepEqual(failed.map((r) => r.id).sort(), Object.values(FAILS).flat().sort());
      const pairs = failed.find((result) => result.id === 'exchange.every-pair');
      assert.match(pairs?.expected ?? '', /^GET \/api\/exchange\?from=\w{3}&to=\w{3}&amount=[\d.]+: .* result \d/);
      assert.notEqual(pairs?.actual, undefined);
      const notFound = failed.find((result) => result.id === 'errors.not-found');
      assert.match(notFound?.actual ?? '', /text\/html/);
      const injected = failed.find((result) => result.id === 'hello.greeting-unicode');
      assert.match(
        injected?.expected ?? '',
        /^an injected fault's answer to be the contract's error envelope \(contract: Errors\)/,
      );
      assert.equal(report.injected > 0, true);
      assert.equal(report.passed + report.failed, report.results.length);
    } finally {
      await close(server);
    }
  });
});
