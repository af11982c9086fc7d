import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Report } from '../../packages/conformance/src/index.js';
import { listening } from '../helpers.js';
import { type Run, run } from '../run-command.js';
import { ROOT } from '../server-process.js';
import { startBrokenServer } from './broken-server.js';

/** `greeting-service conformance ...` as a user runs it: the built process entry (npm run build first). */
function conformance(...args: string[]): Promise<Run> {
  return run(process.execPath, [join(ROOT, 'dist', 'server.js'), 'conformance', ...args]);
}

const LINE = /^(pass|fail|skip) {2}[a-z-]+\.[a-z-]+ {2}\[[^\]]+\] {2}\S.*$/;

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('greeting-service conformance', () => {
  let good: { url: string; server: Server };
  let broken: { url: string; server: Server };
  let html: Server;
  let htmlUrl: string;
  let closedUrl: string;

  before(async () => {
    good = await startBrokenServer([]);
    broken = await startBrokenServer(['html-404']);
    html = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html>hi</html>'));
    htmlUrl = await listen(html);
    const closed = createServer();
    closedUrl = await listen(closed);
    closed.close();
  });
  after(() => {
    for (const server of [good.server, broken.server, html]) server.close();
  });

  it('prints one line per check and the summary, and exits 0 when nothing failed', async () => {
    const { code, stdout, stderr } = await conformance(good.url, '--only', 'hello,echo');
    const lines = stdout.trimEnd().split('\n');
    const summary = lines.pop();
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
    for (const line of lines) assert.match(line, LINE);
    assert.ok(lines.some((line) => line.startsWith('pass  hello.greeting  [spec 4.2, 2.2]  ')));
    assert.match(summary ?? '', /^\d+ passed, 0 failed, 0 skipped$/);
    assert.equal(Number(summary?.split(' ')[0]), lines.length);
  });

  it('exits 1 when a check fails, the line saying what was expected and what came', async () => {
    const { code, stdout } = await conformance(broken.url, '--only', 'errors');
    assert.equal(code, 1);
    const line = stdout.split('\n').find((l) => l.startsWith('fail  errors.not-found  '));
    assert.match(
      line ?? '',
      /\[spec 7\.1, 7\.2; contract: Errors\] .*: expected .*application\/json.*, actual "text\/html"/,
    );
    assert.match(stdout, /^\d+ passed, 2 failed, 0 skipped$/m);
  });

  it('--json prints the report', async () => {
    const { code, stdout } = await conformance(broken.url, '--only', 'errors,hello', '--json');
    assert.equal(code, 1);
    const report = JSON.parse(stdout) as Report;
    assert.equal(report.target, broken.url);
    const failing = report.results.filter((r) => r.outcome === 'fail').map((r) => `${r.id}: ${r.actual}`);
    assert.deepEqual(
      failing.map((line) => line.split(':')[0]),
      ['errors.not-found', 'errors.not-found-outside-api'],
      failing.join('\n'),
    );
    assert.equal(report.failed, 2);
    assert.deepEqual(new Set(report.results.map((r) => r.group)), new Set(['errors', 'hello']));
    const failed = report.results.find((r) => r.outcome === 'fail');
    assert.equal(typeof failed?.expected, 'string');
    assert.equal(typeof failed?.actual, 'string');
  });

  it('--only and --skip take groups and check ids; the checks that need a flag are skipped without it', async () => {
    const { code, stdout } = await conformance(
      good.url,
      '--only',
      'hello,rate-limit',
      '--skip',
      'hello.head,hello.timestamp',
    );
    assert.equal(code, 0);
    assert.doesNotMatch(stdout, /hello\.head|hello\.timestamp|echo\./);
    assert.match(stdout, /^pass {2}hello\.greeting /m);
    assert.match(stdout, /^skip {2}rate-limit\.exceeded {2}.*: needs --rate-limit$/m);
    assert.match(stdout, /^\d+ passed, 0 failed, 2 skipped$/m);
  });

  for (const [what, args, message] of [
    [
      'an unreachable URL',
      () => [closedUrl],
      /^greeting-service conformance: cannot reach http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/,
    ],
    [
      'an ftp URL',
      () => ['ftp://x'],
      /^greeting-service conformance: not an http:\/\/ or https:\/\/ URL: ftp:\/\/x\n$/,
    ],
    ['text that is not a URL', () => ['not a url'], /^greeting-service conformance: not a URL: "not a url"/],
    [
      'a server answering HTML to everything',
      () => [htmlUrl],
      /^greeting-service conformance: .* does not look like the service/,
    ],
    ['no URL', () => [], /^greeting-service conformance: takes one base URL/],
    [
      'an unknown group',
      () => [good.url, '--only', 'nope'],
      /^greeting-service conformance: unknown group or check: nope/,
    ],
    [
      'an unknown option',
      () => [good.url, '--frobnicate'],
      /^greeting-service conformance: Unknown option '--frobnicate'/,
    ],
    [
      'a --ca file that cannot be read',
      () => [good.url, '--ca', '/nonexistent/ca.pem'],
      /^greeting-service conformance: --ca \/nonexistent\/ca\.pem cannot be read \(ENOENT\)\n$/,
    ],
    [
      'a --ca file that is no PEM',
      () => [good.url, '--ca', `${ROOT}package.json`],
      /^greeting-service conformance: --ca .*package\.json is not a PEM file of certificates\n$/,
    ],
  ] as const) {
    it(`answers ${what} with one line and exit code 2`, async () => {
      const { code, stdout, stderr } = await conformance(...args());
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.equal(stderr.split('\n').length, 2, stderr);
      assert.match(stderr, message);
    });
  }

  it('repeats at most 100 characters of any argument it refuses, in one short line', async () => {
    const long = 'x'.repeat(100_000);
    for (const args of [
      [good.url, `--${long}`],
      [`ftp://${long}`],
      [`not a url ${long}`],
      [`http://user@${long}`],
      [good.url, '--only', long],
      [good.url, '--ca', `/nonexistent/${long}`],
      [good.url, '--max-time', long],
    ]) {
      const { code, stdout, stderr } = await conformance(...args);
      const what = `${args.at(-1)?.slice(0, 20)}…`;
      assert.equal(code, 2, what);
      assert.equal(stdout, '', what);
      assert.equal(stderr.split('\n').length, 2, what);
      assert.ok(stderr.length < 500, `${what}: ${stderr.length} characters`);
      assert.match(stderr, /… \(1000\d\d characters\)/, what);
    }
  });

  it('--help describes the options and exits 0', async () => {
    const { code, stdout } = await conformance('--help');
    assert.equal(code, 0);
    assert.match(stdout, /^Usage: greeting-service conformance <base-url>/);
    assert.match(stdout, /--rate-limit/);
    assert.match(stdout, /--http2 [\s\S]*--grpc [\s\S]*--ca <file> [\s\S]*--insecure /);
  });

  it('--grpc checks the gRPC services, gRPC itself with --http2; against GRPC=false it exits 2 saying gRPC is not served', async () => {
    const server = await listening({ http2: true, rateLimitMax: 0, logLevel: 'silent' });
    const off = await listening({ grpc: false, logLevel: 'silent' });
    try {
      const { code, stdout } = await conformance(server.origin, '--http2', '--grpc', '--only', 'grpc');
      assert.equal(code, 0, stdout);
      assert.match(stdout, /^pass {2}grpc\.reflection /m);
      assert.match(stdout, /^\d+ passed, 0 failed, 1 skipped$/m);
      const refused = await conformance(off.origin, '--grpc');
      assert.equal(refused.code, 2);
      assert.equal(refused.stdout, '');
      assert.match(
        refused.stderr,
        /^greeting-service conformance: http:\/\/127\.0\.0\.1:\d+ does not serve gRPC: POST \/helloworld\.Greeter\/SayHello answered 404 .*: run without --grpc\n$/,
      );
    } finally {
      await Promise.all([server.app.close(), off.app.close()]);
    }
  });

  it('--http2 sends every request over HTTP/2 with prior knowledge, and runs the http2 checks', async () => {
    const server = await listening({ http2: true, rateLimitMax: 0, logLevel: 'silent' });
    try {
      const { code, stdout } = await conformance(server.origin, '--http2', '--only', 'hello,http2');
      assert.equal(code, 0, stdout);
      assert.match(stdout, /^pass {2}http2\.protocol /m);
      assert.match(stdout, /^pass {2}http2\.multiplexed /m);
      assert.match(stdout, /^\d+ passed, 0 failed, 0 skipped$/m);
      // Without --http2, the http2 checks say what they need.
      const plain = await conformance(server.origin, '--only', 'http2');
      assert.match(plain.stdout, /^skip {2}http2\.protocol {2}.*: needs --http2$/m);
    } finally {
      await server.app.close();
    }
  });
});
