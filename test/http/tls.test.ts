import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ConnectionOptions, connect as connectTls } from 'node:tls';
import zlib from 'node:zlib';
import { Agent, Client, request } from 'undici';
import { CERTIFICATE_POLL_MS } from '../../src/http/certificates.js';
import { h2 } from '../h2-client.js';
import { assertEnvelope, type ListeningApp, listening, sendHttp2 } from '../helpers.js';
import { CURL_SKIP, H2LOAD_SKIP, parseH2load, run } from '../http2-tools.js';
import {
  exitOf,
  killAllServers,
  type LogLine,
  type RunningServer,
  spawnServer,
  startServer,
} from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';

/**
 * HTTPS (TLS_CERT_FILE and TLS_KEY_FILE): the port serves TLS 1.2 and 1.3 only, HTTP/1.1 alone or,
 * with HTTP2, h2 and http/1.1 by ALPN; the certificate is loaded again when its files change (as
 * Kubernetes swaps a secret's symbolic link) or on SIGHUP, for new connections only, and files
 * that cannot be used are refused with one warning while the certificate in use stays.
 */

const HEADERS_TIMEOUT_MS = 1_000;

/** What a TLS handshake with the server shows: the version, the protocol ALPN chose, the certificate. */
function handshake(
  port: number,
  options: ConnectionOptions = {},
): Promise<{ protocol: string | null; alpn: string | false; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const socket = connectTls({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options }, () => {
      resolve({
        protocol: socket.getProtocol(),
        alpn: socket.alpnProtocol ?? false,
        fingerprint: socket.getPeerCertificate().fingerprint256,
      });
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** What a cleartext connection gets: every byte the server sends before it closes. */
function cleartext(port: number, bytes: string): Promise<{ data: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let data = '';
    const socket = connectTcp(port, '127.0.0.1', () => socket.write(bytes));
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => {
      data += chunk;
    });
    socket.on('close', () => resolve({ data, elapsedMs: performance.now() - started }));
    socket.on('error', reject);
  });
}

describe('HTTPS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  let files: TlsFiles;
  /** The private CA, to trust. */
  const ca = () => readFileSync(files.ca);
  before(() => {
    files = makeTlsFiles();
  });
  after(() => {
    files?.remove();
    killAllServers();
  });

  describe('HTTP2 off: HTTP/1.1 over TLS only', () => {
    let server: ListeningApp;
    let agent: Agent;
    before(async () => {
      server = await listening({
        tlsCertFile: files.serverCert,
        tlsKeyFile: files.serverKey,
        headersTimeoutMs: HEADERS_TIMEOUT_MS,
      });
      agent = new Agent({ connect: { ca: ca() } });
    });
    after(async () => {
      await agent.close();
      await server.app.close();
    });

    it('serves HTTPS, offering only http/1.1 by ALPN, with the error envelope as ever', async () => {
      assert.match(server.origin, /^https:\/\/127\.0\.0\.1:\d+$/);
      const hello = await request(`${server.origin}/api/hello/Ada`, { dispatcher: agent });
      assert.equal(hello.statusCode, 200);
      assert.equal(await hello.body.text(), '{"greeting":"Hello, Ada!"}');
      const missing = await request(`${server.origin}/api/nope`, { dispatcher: agent });
      assertEnvelope(
        { status: missing.statusCode, headers: missing.headers, ...text(await missing.body.text()) },
        404,
        'NOT_FOUND',
      );
      assert.equal((await handshake(server.port, { ALPNProtocols: ['h2', 'http/1.1'] })).alpn, 'http/1.1');
    });

    it('serves TLS 1.2 and 1.3, and refuses 1.1', async () => {
      assert.equal((await handshake(server.port, { maxVersion: 'TLSv1.2' })).protocol, 'TLSv1.2');
      assert.equal((await handshake(server.port, { minVersion: 'TLSv1.3' })).protocol, 'TLSv1.3');
      await assert.rejects(
        handshake(server.port, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }),
        /alert protocol version|unsupported protocol|no protocols available/i,
      );
    });

    it('answers nothing in cleartext, and closes a connection without a handshake after HEADERS_TIMEOUT_MS', async () => {
      const plain = await cleartext(server.port, 'GET /api/hello HTTP/1.1\r\nHost: x\r\n\r\n');
      assert.equal(plain.data.startsWith('HTTP/'), false, 'no HTTP in cleartext');
      const silent = await cleartext(server.port, '');
      assert.equal(silent.data, '');
      assert.ok(silent.elapsedMs >= HEADERS_TIMEOUT_MS - 50 && silent.elapsedMs < HEADERS_TIMEOUT_MS + 2_000);
    });
  });

  describe('HTTP2 on: h2 and http/1.1 by ALPN', () => {
    let server: ListeningApp;
    before(async () => {
      server = await listening({ http2: true, tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey });
    });
    after(() => server.app.close());

    it('speaks h2 to a client that offers it, and HTTP/1.1 to one that does not, naming each in the log line', async () => {
      assert.equal((await handshake(server.port, { ALPNProtocols: ['h2', 'http/1.1'] })).alpn, 'h2');
      const session = await h2(server.origin, { tls: { ca: ca() } });
      try {
        const res = await sendHttp2(session, { path: '/api/hello/Ada', headers: { 'x-request-id': 'over-h2' } });
        assert.equal(res.status, 200);
        assert.equal(session.alpnProtocol, 'h2');
      } finally {
        session.close();
      }
      const client = new Client(server.origin, { connect: { ca: ca() } });
      try {
        const res = await client.request({
          path: '/api/hello/Ada',
          method: 'GET',
          headers: { 'x-request-id': 'over-h1' },
        });
        assert.equal(res.statusCode, 200);
        await res.body.dump();
      } finally {
        await client.close();
      }
      await sleep(50);
      assert.equal(server.logs.lineOf('over-h2').http_version, '2.0');
      assert.equal(server.logs.lineOf('over-h1').http_version, '1.1');
    });

    it('speaks content codings both ways over h2 and over HTTPS/1.1: a coded answer, a coded body', async () => {
      const text = `{"n":12345678901234567890,"s":"${'é'.repeat(1000)}"}`;
      const body = zlib.gzipSync(text);
      const headers = { 'content-type': 'application/json', 'content-encoding': 'gzip', 'accept-encoding': 'br' };
      const session = await h2(server.origin, { tls: { ca: ca() } });
      try {
        const res = await sendHttp2(session, { method: 'POST', path: '/api/echo', headers, body });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers['content-encoding'], 'br');
        assert.ok(res.text.startsWith(`{"received":${text},"echo":true`));
      } finally {
        session.close();
      }
      const client = new Client(server.origin, { connect: { ca: ca() } });
      try {
        const res = await client.request({ path: '/api/echo', method: 'POST', headers, body });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-encoding'], 'br');
        const answer = zlib.brotliDecompressSync(Buffer.from(await res.body.arrayBuffer())).toString('utf8');
        assert.ok(answer.startsWith(`{"received":${text},"echo":true`));
      } finally {
        await client.close();
      }
    });

    it('speaks HTTP/2 to curl --http2 and HTTP/1.1 to curl --http1.1, trusting the private CA', {
      skip: CURL_SKIP,
    }, async () => {
      const format = ['-s', '-o', '/dev/null', '-w', '%{http_version} %{http_code}', '--cacert', files.ca];
      const two = await run('curl', [...format, '--http2', `${server.origin}/api/hello`]);
      assert.equal(two.stdout, '2 200', two.stderr);
      const one = await run('curl', [...format, '--http1.1', `${server.origin}/api/hello`]);
      assert.equal(one.stdout, '1.1 200', one.stderr);
    });

    it('serves h2load over TLS: 1000 requests over 2 connections of 10 streams each, every one answered', {
      skip: H2LOAD_SKIP,
    }, async () => {
      const { stdout, stderr } = await run('h2load', ['-n', '1000', '-c', '2', '-m', '10', `${server.origin}/healthz`]);
      const result = parseH2load(stdout);
      assert.equal(result.status2xx, 1000, stdout + stderr);
    });
  });

  describe('certificate rotation, against the server process', () => {
    /**
     * A secret as Kubernetes mounts it: `tls.crt` and `tls.key` are links into `..data`, itself a
     * link to the directory of the current version, swapped in one rename when the secret changes.
     */
    let secret: string;
    let version = 0;
    let server: RunningServer;

    /** What a version of the secret holds as tls.crt or tls.key: a copy of a file, a text, a directory, or nothing. */
    type Entry = { copy: string } | { text: string } | 'directory' | 'missing';

    /** Makes a new version of the secret with these entries and swaps it in. */
    function swapSecretEntries(cert: Entry, key: Entry): void {
      version += 1;
      const dir = join(secret, `..version-${version}`);
      mkdirSync(dir);
      for (const [entry, name] of [
        [cert, 'tls.crt'],
        [key, 'tls.key'],
      ] as const) {
        const path = join(dir, name);
        if (entry === 'directory') mkdirSync(path);
        else if (entry === 'missing') continue;
        else if ('copy' in entry) copyFileSync(entry.copy, path);
        else writeFileSync(path, entry.text);
      }
      symlinkSync(`..version-${version}`, join(secret, '..data-next'));
      renameSync(join(secret, '..data-next'), join(secret, '..data'));
    }

    /** Makes a new version of the secret from these files and swaps it in. */
    function swapSecret(cert: string, key: string): void {
      swapSecretEntries({ copy: cert }, { copy: key });
    }

    const fingerprint = async () => (await handshake(server.port)).fingerprint;
    const certificateOf = (path: string) => new X509Certificate(readFileSync(path));

    before(async () => {
      secret = mkdtempSync(join(tmpdir(), 'greeting-secret-'));
      swapSecret(files.serverCert, files.serverKey);
      symlinkSync('..data/tls.crt', join(secret, 'tls.crt'));
      symlinkSync('..data/tls.key', join(secret, 'tls.key'));
      server = await startServer({
        HTTP2: 'true',
        TLS_CERT_FILE: join(secret, 'tls.crt'),
        TLS_KEY_FILE: join(secret, 'tls.key'),
      });
    });
    after(() => rmSync(secret, { recursive: true, force: true }));

    const warnings = () => server.lines.filter((line: LogLine) => line.level === 40);

    it('serves a swapped secret to new connections within 5 s, and keeps the connections open', {
      timeout: 30_000,
    }, async () => {
      const first = await fingerprint();
      const origin = `https://127.0.0.1:${server.port}`;
      const session = await h2(origin, { tls: { ca: ca() } });
      const client = new Client(origin, { connect: { ca: ca() } });
      try {
        const before = await client.request({ path: '/healthz', method: 'GET' });
        await before.body.dump();

        const other = makeTlsFiles();
        try {
          swapSecret(other.serverCert, other.serverKey);
          const swapped = performance.now();
          let now = first;
          while (now === first && performance.now() - swapped < 5_000) {
            await sleep(100);
            now = await fingerprint();
          }
          assert.notEqual(now, first, 'a new certificate within 5 s');
          console.log(`  new certificate served ${Math.round(performance.now() - swapped)} ms after the swap`);
          const loaded = await server.waitForLog((line) => line.msg === 'TLS certificate loaded');
          assert.equal(loaded.reason, 'files changed');
          assert.equal(loaded.fingerprint256, now);
        } finally {
          other.remove();
        }
        // The connections opened before still serve, on the certificate they began with.
        assert.equal((await sendHttp2(session, { path: '/healthz' })).status, 200);
        const after = await client.request({ path: '/healthz', method: 'GET' });
        assert.equal(after.statusCode, 200);
        await after.body.dump();
      } finally {
        session.close();
        await client.close();
      }
    });

    it('refuses files that cannot be used with one warning, and serves the certificate in use', {
      timeout: 30_000,
    }, async () => {
      const inUse = await fingerprint();
      const before = warnings().length;
      // A certificate that is no PEM, then a key that is not the certificate's.
      const notPem = join(secret, 'not.pem');
      writeFileSync(notPem, 'no certificate\n');
      swapSecret(notPem, files.serverKey);
      await server.waitForLog((line) => line.level === 40 && warnings().length > before, 5_000);
      await sleep(2 * CERTIFICATE_POLL_MS + 500);
      assert.equal(warnings().length, before + 1, 'one warning, however often the files are looked at');
      const warning = warnings().at(-1) as LogLine;
      assert.equal(warning.msg, 'TLS certificate not loaded: the one in use stays');
      assert.match(String(warning.error), /^invalid TLS_CERT_FILE ".*tls\.crt": is not a PEM file of certificates/);
      assert.equal(await fingerprint(), inUse);

      swapSecret(files.nameOnlyCert, files.serverKey);
      await server.waitForLog((line) => line.level === 40 && warnings().length > before + 1, 5_000);
      assert.match(
        String(warnings().at(-1)?.error),
        /^invalid TLS_KEY_FILE ".*tls\.key": is not the key of the certificate/,
      );
      assert.equal(await fingerprint(), inUse);

      // SIGHUP asks again, and is answered again: a warning, the certificate in use kept.
      server.child.kill('SIGHUP');
      await server.waitForLog((line) => line.level === 40 && line.reason === 'reload asked for', 5_000);
      assert.equal(await fingerprint(), inUse);
    });

    it('refuses every kind of bad file, and a pair OpenSSL refuses, by the watch and by SIGHUP, serving the pair in use', {
      timeout: 90_000,
    }, async () => {
      const inUse = await fingerprint();
      const half = (path: string) => {
        const text = readFileSync(path, 'utf8');
        return { text: text.slice(0, text.length / 2) };
      };
      const cases: [string, Entry, Entry, RegExp][] = [
        [
          'an RSA-512 pair',
          { copy: files.weakCert },
          { copy: files.weakKey },
          /^invalid TLS_CERT_FILE ".*tls\.crt" with TLS_KEY_FILE ".*tls\.key": OpenSSL refuses to serve the pair \(ee key too small\)$/,
        ],
        [
          'an empty certificate',
          { text: '' },
          { copy: files.serverKey },
          /^invalid TLS_CERT_FILE .*: is not a PEM file/,
        ],
        [
          'a truncated certificate',
          half(files.serverCert),
          { copy: files.serverKey },
          /^invalid TLS_CERT_FILE .*: is not a PEM file/,
        ],
        [
          'an empty key',
          { copy: files.serverCert },
          { text: '' },
          /^invalid TLS_KEY_FILE .*: is not a PEM private key/,
        ],
        [
          'a truncated key',
          { copy: files.serverCert },
          half(files.serverKey),
          /^invalid TLS_KEY_FILE .*: is not a PEM private key/,
        ],
        [
          'an encrypted key',
          { copy: files.serverCert },
          { copy: files.encryptedKey },
          /^invalid TLS_KEY_FILE .*: is an encrypted key/,
        ],
        ['a directory', 'directory', { copy: files.serverKey }, /^invalid TLS_CERT_FILE .*: cannot be read \(EISDIR\)/],
        ['a missing key', { copy: files.serverCert }, 'missing', /^invalid TLS_KEY_FILE .*: cannot be read \(ENOENT\)/],
      ];
      for (const [what, cert, key, error] of cases) {
        const before = warnings().length;
        swapSecretEntries(cert, key);
        const watched = await server.waitForLog((line) => line.level === 40 && warnings().length > before, 5_000);
        assert.equal(watched.reason, 'files changed', what);
        assert.match(String(watched.error), error, what);
        assert.equal(await fingerprint(), inUse, what);
        server.child.kill('SIGHUP');
        const asked = await server.waitForLog(
          (line) => line.level === 40 && warnings().length > before + 1 && line.reason === 'reload asked for',
          5_000,
        );
        assert.match(String(asked.error), error, what);
        assert.equal(await fingerprint(), inUse, what);
        assert.equal(server.child.exitCode, null, `${what}: still running`);
      }
    });

    it('a FIFO in place of the certificate: refused with one warning, never waited on', {
      timeout: 30_000,
    }, async () => {
      const inUse = await fingerprint();
      const before = warnings().length;
      const fifo = join(secret, 'fifo.pem');
      assert.equal((await run('mkfifo', [fifo])).code, 0);
      // The new version's tls.crt is a link to the FIFO, which no one ever writes to.
      swapSecret(files.serverCert, files.serverKey);
      const crt = join(secret, `..version-${version}`, 'tls.crt');
      rmSync(crt);
      symlinkSync(fifo, crt);
      await server.waitForLog((line) => line.level === 40 && warnings().length > before, 5_000);
      assert.match(
        String(warnings().at(-1)?.error),
        /^invalid TLS_CERT_FILE ".*tls\.crt": is not a regular file but a FIFO$/,
      );
      server.child.kill('SIGHUP');
      await server.waitForLog((line) => line.level === 40 && line.reason === 'reload asked for', 5_000);
      assert.equal(await fingerprint(), inUse);
    });

    it('SIGHUP loads the files at once, and SIGTERM still ends it with 0', { timeout: 30_000 }, async () => {
      swapSecret(files.nameOnlyCert, files.nameOnlyKey);
      server.child.kill('SIGHUP');
      const loaded = await server.waitForLog(
        (line) =>
          line.msg === 'TLS certificate loaded' &&
          line.fingerprint256 === certificateOf(files.nameOnlyCert).fingerprint256,
        5_000,
      );
      assert.ok(['reload asked for', 'files changed'].includes(String(loaded.reason)));
      assert.equal(await fingerprint(), certificateOf(files.nameOnlyCert).fingerprint256);
      server.child.kill('SIGTERM');
      assert.deepEqual(exitOf(await server.exited), { code: 0, signal: null });
    });
  });

  for (const http2 of [false, true]) {
    it(`SIGTERM with connections still in their handshake, one served beside them: exit 0 at once (HTTP2=${http2})`, {
      timeout: 30_000,
    }, async () => {
      const server = await startServer({
        TLS_CERT_FILE: files.serverCert,
        TLS_KEY_FILE: files.serverKey,
        HTTP2: String(http2),
        SHUTDOWN_TIMEOUT_MS: '5000',
      });
      // The first bytes of a ClientHello, then silence; and a connection whose handshake is done.
      const partial = Array.from({ length: 3 }, () => {
        const socket = connectTcp({ port: server.port, host: '127.0.0.1' }, () => {
          socket.write(Buffer.from('16030100c8010000c4', 'hex'));
        });
        socket.on('error', () => {});
        return socket;
      });
      const done = connectTls({ port: server.port, host: '127.0.0.1', rejectUnauthorized: false });
      done.on('error', () => {});
      await new Promise((resolve) => done.once('secureConnect', resolve));
      await sleep(200);
      try {
        const signalledAt = performance.now();
        server.child.kill('SIGTERM');
        const exit = await server.exited;
        const tookMs = Math.round(exit.at - signalledAt);
        const state = `exited ${JSON.stringify(exitOf(exit))} ${tookMs} ms after SIGTERM\n${server.stderr()}`;
        assert.deepEqual(exitOf(exit), { code: 0, signal: null }, state);
        assert.ok(tookMs < 3_000, state);
        assert.equal(server.stderr(), '');
      } finally {
        for (const socket of [...partial, done]) socket.destroy();
      }
    });
  }

  it('refuses a pair OpenSSL refuses at start (an RSA-512 key): one line naming the settings, exit 1', {
    timeout: 30_000,
  }, async () => {
    const server = await spawnServer({ TLS_CERT_FILE: files.weakCert, TLS_KEY_FILE: files.weakKey });
    assert.deepEqual(exitOf(await server.exited), { code: 1, signal: null });
    assert.equal(server.stdout(), '');
    assert.equal(
      server.stderr(),
      `greeting-service: invalid TLS_CERT_FILE ${JSON.stringify(files.weakCert)} with TLS_KEY_FILE ${JSON.stringify(files.weakKey)}: OpenSSL refuses to serve the pair (ee key too small)\n`,
    );
  });

  it("refuses a key that is not the certificate's at start: one line, exit 1", { timeout: 30_000 }, async () => {
    const server = await spawnServer({ TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.clientKey });
    assert.deepEqual(exitOf(await server.exited), { code: 1, signal: null });
    assert.equal(server.stdout(), '');
    assert.equal(
      server.stderr(),
      `greeting-service: invalid TLS_KEY_FILE ${JSON.stringify(files.clientKey)}: is not the key of the certificate in TLS_CERT_FILE ${JSON.stringify(files.serverCert)}\n`,
    );
  });
});

/** A body as the envelope assertions take it. */
function text(body: string) {
  return { text: body, json: () => JSON.parse(body) };
}
