import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Report, runConformance } from '../../packages/conformance/src/index.js';
import { xmlEscaped } from '../../packages/conformance/src/junit.js';
import { type ListeningApp, listening } from '../helpers.js';
import { type Run, run } from '../run-command.js';
import { ROOT } from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON } from '../tls-files.js';
import { startBrokenProxy, startBrokenServer } from './broken-server.js';
import { notPassed } from './report.js';

/** `greeting-service conformance ...` as a user runs it: the built process entry (npm run build first). */
function conformance(...args: string[]): Promise<Run> {
  return run(process.execPath, [join(ROOT, 'dist', 'server.js'), 'conformance', ...args]);
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** The header fields of every request a server receives, upgrades (the WebSocket handshake) included. */
function recorded(app: ListeningApp['app']): { requests: IncomingHttpHeaders[]; upgrades: IncomingHttpHeaders[] } {
  const seen = { requests: [] as IncomingHttpHeaders[], upgrades: [] as IncomingHttpHeaders[] };
  app.server.prependListener('request', (req: { headers: IncomingHttpHeaders }) => seen.requests.push(req.headers));
  app.server.prependListener('upgrade', (req: { headers: IncomingHttpHeaders }) => seen.upgrades.push(req.headers));
  return seen;
}

/**
 * A well-formed XML document: one root, every tag closed in order, attributes quoted, no `<` or
 * raw `&` in text, no character XML 1.0 forbids. Enough to hold the kit's JUnit output to.
 */
function assertWellFormed(xml: string): void {
  for (const char of xml) {
    const code = char.codePointAt(0) as number;
    const allowed =
      [0x9, 0xa, 0xd].includes(code) ||
      (code >= 0x20 && code < 0xd800) ||
      (code > 0xdfff && code < 0xfffe) ||
      code > 0xffff;
    assert.ok(allowed, `a character XML forbids: U+${code.toString(16)}`);
  }
  const body = xml.replace(/^<\?xml version="1\.0" encoding="UTF-8"\?>\n/, '');
  const stack: string[] = [];
  let roots = 0;
  const tag = /<(\/?)([A-Za-z][\w.-]*)((?:\s+[A-Za-z][\w.-]*="[^"<]*")*)\s*(\/?)>/y;
  const text = /(?:[^<&]|&(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-f]+);)*/iy;
  let at = 0;
  while (at < body.length) {
    text.lastIndex = at;
    text.exec(body);
    at = text.lastIndex;
    if (at >= body.length) break;
    tag.lastIndex = at;
    const match = tag.exec(body);
    assert.ok(match !== null, `not XML at ${at}: ${JSON.stringify(body.slice(at, at + 80))}`);
    const [, closing, name, attributes, empty] = match;
    for (const [, value] of (attributes ?? '').matchAll(/="([^"]*)"/g)) {
      assert.match(value ?? '', /^(?:[^<&]|&(?:amp|lt|gt|quot|apos|#\d+);)*$/, `attribute of ${name}`);
    }
    if (closing === '/') assert.equal(stack.pop(), name, `closing ${name}`);
    else if (empty !== '/') {
      if (stack.length === 0) roots += 1;
      stack.push(name as string);
    } else if (stack.length === 0) roots += 1;
    at = tag.lastIndex;
  }
  assert.deepEqual(stack, [], 'unclosed elements');
  assert.equal(roots, 1, 'one root element');
}

describe('the conformance kit for CI', () => {
  let good: { url: string; server: Server };
  let broken: { url: string; server: Server };
  let dir: string;

  before(async () => {
    good = await startBrokenServer([]);
    broken = await startBrokenServer(['html-404']);
    dir = mkdtempSync(join(tmpdir(), 'greeting-kit-ci-'));
  });
  after(() => {
    for (const server of [good.server, broken.server]) server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--header is sent on every request, HTTP/1.1, the WebSocket handshake and the requests written by hand included', async () => {
    const service = await listening({ rateLimitMax: 0, logLevel: 'silent' });
    const seen = recorded(service.app);
    try {
      const report = await runConformance({
        baseUrl: service.origin,
        write: true,
        headers: [
          ['X-Gateway-Token', 's3cret'],
          ['X-Tenant', 'a'],
          ['X-Tenant', 'b'],
        ],
      });
      assert.equal(report.failed, 0, notPassed(report).join('\n'));
      assert.ok(seen.requests.length > 200, `${seen.requests.length} requests`);
      assert.ok(seen.upgrades.length >= 1, 'the WebSocket handshake');
      for (const headers of [...seen.requests, ...seen.upgrades]) {
        assert.equal(headers['x-gateway-token'], 's3cret', JSON.stringify(headers));
        assert.equal(headers['x-tenant'], 'a, b');
      }
    } finally {
      await service.app.close();
    }
  });

  it('--header is sent over HTTP/2 on TLS too; with Authorization the operator switch is not tried', {
    skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
  }, async () => {
    const files = makeTlsFiles();
    const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
    // Over HTTP/2 the requests reach the routes alone, not the listener's request event.
    const server = await listening(
      { http2: true, rateLimitMax: 0, logLevel: 'silent', tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey },
      (app) =>
        app.addHook('onRequest', async (req) => {
          seen.push({ url: req.url, headers: req.headers });
        }),
    );
    try {
      const { code, stdout, stderr } = await conformance(
        server.origin,
        '--http2',
        '--ca',
        files.ca,
        '--only',
        'hello,health,http2',
        '--header',
        'Authorization: Bearer gateway-token',
      );
      assert.equal(code, 0, stdout + stderr);
      assert.match(
        stdout,
        /^skip {2}health\.operator-switch {2}.*: --header sends Authorization, which the switch may take for a token$/m,
      );
      assert.ok(seen.length > 10, `${seen.length} requests`);
      for (const { headers } of seen) assert.equal(headers.authorization, 'Bearer gateway-token');
      assert.equal(
        seen.some(({ url }) => url === '/readyz/disable'),
        false,
      );
    } finally {
      await server.app.close();
      files.remove();
    }
  });

  for (const [value, message] of [
    ['no colon', /--header takes 'NAME: VALUE' \(a field name, a colon, then visible ASCII\), not "no colon"/],
    [': no name', /--header takes 'NAME: VALUE'/],
    ['Bad Name: x', /--header takes 'NAME: VALUE'/],
    ['X-Line: a\r\nX-Smuggled: b', /--header takes 'NAME: VALUE'/],
    ['Host: elsewhere', /--header cannot set Host: the kit sets it on each request itself/],
    ['Content-Length: 5', /--header cannot set Content-Length/],
  ] as const) {
    it(`refuses --header ${JSON.stringify(value)} in one line naming the flag, exit 2`, async () => {
      const { code, stdout, stderr } = await conformance(good.url, '--header', value);
      assert.equal(code, 2);
      assert.equal(stdout, '');
      assert.equal(stderr.split('\n').length, 2, stderr);
      assert.match(stderr, /^greeting-service conformance: /);
      assert.match(stderr, message);
    });
  }

  it('--help lists --header, --junit and --fail-on-skip', async () => {
    const { code, stdout } = await conformance('--help');
    assert.equal(code, 0);
    assert.match(stdout, /--junit <file> [\s\S]*--fail-on-skip [\s\S]*--header 'NAME: VALUE'/);
  });

  it('--fail-on-skip exits 1 when a check skipped, saying why; 0 when none did', async () => {
    const skipped = await conformance(good.url, '--only', 'hello,rate-limit.exceeded', '--fail-on-skip');
    assert.equal(skipped.code, 1);
    assert.match(
      skipped.stdout,
      /^\d+ passed, 0 failed, 1 skipped \(--fail-on-skip: a skipped check fails the run\)$/m,
    );
    const without = await conformance(good.url, '--only', 'hello,rate-limit.exceeded');
    assert.equal(without.code, 0);
    const none = await conformance(good.url, '--only', 'hello', '--fail-on-skip');
    assert.equal(none.code, 0, none.stdout);
  });

  it('--junit writes a JUnit report: a testsuite per group, a testcase per check, failure and skipped', async () => {
    const file = join(dir, 'report.xml');
    const { code, stdout } = await conformance(
      broken.url,
      '--only',
      'errors,hello,rate-limit',
      '--junit',
      file,
      '--json',
    );
    assert.equal(code, 1);
    const report = JSON.parse(stdout) as Report;
    const xml = readFileSync(file, 'utf8');
    assertWellFormed(xml);
    assert.match(
      xml,
      new RegExp(
        `^<\\?xml version="1\\.0" encoding="UTF-8"\\?>\\n<testsuites name="conformance ${broken.url}" tests="${report.results.length}" failures="2" errors="0" skipped="${report.skipped}" time="[\\d.]+">`,
      ),
    );
    for (const group of ['errors', 'hello', 'rate-limit'])
      assert.match(xml, new RegExp(`<testsuite name="conformance\\.${group}" tests="\\d+"`));
    assert.equal(xml.match(/<testcase /g)?.length, report.results.length);
    assert.match(
      xml,
      /<testcase classname="errors" name="errors\.not-found" time="[\d.]+">\n {6}<failure message="expected GET \/api\/no-such-route: Content-Type application\/json; charset=utf-8, actual &quot;text\/html&quot; \(status 404\)" type="conformance">errors\.not-found \[spec 7\.1, 7\.2; contract: Errors\]/,
    );
    assert.match(
      xml,
      /<testcase classname="rate-limit" name="rate-limit\.exceeded" time="[\d.]+">\n {6}<skipped message="needs --rate-limit"\/>/,
    );
    assert.match(xml, /<testcase classname="hello" name="hello\.message" time="[\d.]+"\/>/);
  });

  it('--junit refuses a file whose directory cannot be written, before the run', async () => {
    const { code, stderr } = await conformance(good.url, '--junit', '/nonexistent/dir/report.xml');
    assert.equal(code, 2);
    assert.match(
      stderr,
      /^greeting-service conformance: --junit \/nonexistent\/dir\/report\.xml: its directory cannot be written \(ENOENT\)\n$/,
    );
  });

  it('escapes for XML what a name or message may hold: markup, quotes, line ends, control characters, lone surrogates', () => {
    const text = `a&b<c>"d'\te\nf\rg\u0000h\u001bi\ud800j\uffffk😀`;
    assert.equal(xmlEscaped(text), 'a&amp;b&lt;c&gt;&quot;d&apos;\te\nf&#13;g\\u0000h\\u001bi\\ud800j\\uffffk😀');
    assert.equal(
      xmlEscaped(text, true),
      'a&amp;b&lt;c&gt;&quot;d&apos;&#9;e&#10;f&#13;g\\u0000h\\u001bi\\ud800j\\uffffk😀',
    );
    assertWellFormed(`<a b="${xmlEscaped(text, true)}">${xmlEscaped(text)}</a>`);
  });
});

describe('the conformance kit names the flag that would fix what stopped it', () => {
  it('--http2 against a server without HTTP/2', async () => {
    const service = await listening({ rateLimitMax: 0, logLevel: 'silent' });
    try {
      const { code, stderr } = await conformance(service.origin, '--http2', '--only', 'hello');
      assert.equal(code, 2);
      assert.match(
        stderr,
        /^greeting-service conformance: cannot reach http:\/\/127\.0\.0\.1:\d+: GET \/healthz: 127\.0\.0\.1:\d+ does not answer HTTP\/2 with prior knowledge \(h2c\): run without --http2\n$/,
      );
    } finally {
      await service.app.close();
    }
  });

  it('TLS: a private CA without --ca, https:// to a port without TLS, http:// to a TLS port, h2 where ALPN offers none', {
    skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
  }, async () => {
    const files = makeTlsFiles();
    const tls = await listening({
      rateLimitMax: 0,
      logLevel: 'silent',
      tlsCertFile: files.serverCert,
      tlsKeyFile: files.serverKey,
    });
    const plain = await listening({ rateLimitMax: 0, logLevel: 'silent' });
    try {
      const untrusted = await conformance(tls.origin, '--only', 'hello');
      assert.equal(untrusted.code, 2);
      assert.match(
        untrusted.stderr,
        /^greeting-service conformance: cannot reach https:\/\/127\.0\.0\.1:\d+: GET \/healthz: the certificate of 127\.0\.0\.1:\d+ is not signed by a CA this system trusts \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\): give its CA with --ca <file>, or --insecure\n$/,
      );
      const otherCa = await conformance(tls.origin, '--only', 'hello', '--ca', files.otherCa);
      assert.match(
        otherCa.stderr,
        /is not signed by a CA of --ca \(\w+\): give the CA that signed it, or --insecure\n$/,
      );
      const noTls = await conformance(plain.origin.replace('http:', 'https:'), '--only', 'hello');
      assert.match(
        noTls.stderr,
        /^greeting-service conformance: cannot reach https:.*: 127\.0\.0\.1:\d+ does not speak TLS \(EPROTO\): use http:\/\/ for it\n$/,
      );
      const toTls = await conformance(tls.origin.replace('https:', 'http:'), '--only', 'hello');
      assert.equal(toTls.code, 2);
      assert.match(
        toTls.stderr,
        /^greeting-service conformance: http:\/\/127\.0\.0\.1:(\d+) speaks TLS: use https:\/\/127\.0\.0\.1:\1\n$/,
      );
      const h2 = await conformance(tls.origin, '--only', 'hello', '--ca', files.ca, '--http2');
      assert.match(h2.stderr, /: 127\.0\.0\.1:\d+ does not offer HTTP\/2 by ALPN \(h2\): run without --http2\n$/);
    } finally {
      await tls.app.close();
      await plain.app.close();
      files.remove();
    }
  });

  it('--timeout, where the service is slower than a request may take', async () => {
    const { url, server } = await startBrokenServer([]);
    const slow = createServer((req, res) => {
      const forward = () =>
        fetch(`${url}${req.url}`)
          .then(async (answer) => {
            res
              .writeHead(answer.status, Object.fromEntries(answer.headers))
              .end(Buffer.from(await answer.arrayBuffer()));
          })
          .catch(() => res.destroy());
      setTimeout(forward, req.url === '/healthz' ? 0 : 1500);
    });
    const slowUrl = await listen(slow);
    try {
      const { code, stderr } = await conformance(slowUrl, '--only', 'hello', '--timeout', '0.5');
      assert.equal(code, 2);
      assert.match(
        stderr,
        /^greeting-service conformance: cannot reach http:\/\/127\.0\.0\.1:\d+: no whole answer to GET \/api\/hello within 0\.5 s \(--timeout <seconds> gives each request longer\)\n$/,
      );
    } finally {
      slow.closeAllConnections();
      slow.close();
      server.close();
    }
  });
});

describe('the conformance kit says what it expected and what came, in its own words', () => {
  let service: ListeningApp;
  let proxy: { url: string; server: Server };

  before(async () => {
    service = await listening({ contextPath: '/svc', rateLimitMax: 0, logLevel: 'silent' });
    // Every error under /api an HTML page, and no X-Request-Id on the greeting: what a proxy in front may do.
    proxy = await startBrokenProxy(service.origin, (req, answer) => {
      if (req.url.startsWith('/svc/api/hello/Ada')) {
        const { 'x-request-id': _, ...headers } = answer.headers;
        return { ...answer, headers };
      }
      if (answer.status < 400 || !req.url.startsWith('/svc/api/')) return answer;
      return { ...answer, headers: { ...answer.headers, 'content-type': 'text/html' }, body: '<html>Error</html>' };
    });
  });
  after(async () => {
    proxy.server.close();
    await service.app.close();
  });

  it('never "undefined" nor a JavaScript parse error; paths as sent, under the base path', async () => {
    const report = await runConformance({
      baseUrl: `${proxy.url}/svc`,
      only: ['hello', 'search', 'echo', 'errors', 'request-id', 'exchange', 'currencies', 'versioning'],
    });
    const failed = report.results.filter((result) => result.outcome === 'fail');
    assert.ok(failed.length > 10, notPassed(report).join('\n'));
    for (const result of failed) {
      const said = `${result.expected} | ${result.actual}`;
      assert.doesNotMatch(
        said,
        /undefined|Unexpected token|in JSON at position|is not valid JSON/,
        `${result.id}: ${said}`,
      );
      assert.doesNotMatch(said, /(?<!\/svc)\/api\//, `${result.id}: ${said}`);
    }
    const byId = (id: string) => failed.find((result) => result.id === id);
    assert.equal(byId('request-id.on-error')?.expected, 'GET /svc/api/search: a JSON error envelope');
    assert.match(
      byId('request-id.unique')?.expected ?? byId('request-id.every-answer')?.actual ?? '',
      /\/svc\/api\/hello\/Ada/,
    );
  });
});
