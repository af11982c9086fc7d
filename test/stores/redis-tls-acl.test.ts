import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { type Config, DEFAULT_CONFIG } from '../../src/config/index.js';
import { createRedisClient } from '../../src/stores/redis-client.js';
import { assertEnvelope, type Client, injectClient, LogCapture, type TestResponse } from '../helpers.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from '../redis-server.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, SERVER_NAME, type TlsFiles } from '../tls-files.js';

/**
 * Redis as it runs in production, against real redis-servers: TLS with a private CA, mutual
 * TLS, the name to check, ACL users and their passwords in a file, rotated; and /readyz telling
 * the truth about each, with a reason logged once.
 */

const TIMEOUT_MS = 1_000;
const OUTAGE_WARNING = 'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back';
const AVAILABLE_AGAIN = 'Redis is available again';

/** Every command the service runs, and its keys: the ACL docs/operations.md gives. */
const MINIMAL_ACL = [
  'resetkeys',
  '~tenant-a:*',
  'resetchannels',
  '-@all',
  ...['+info', '+eval', '+evalsha', '+hmget', '+hget', '+hset', '+time', '+incr', '+pttl', '+pexpire'],
];

interface Service {
  client: Client;
  logs: LogCapture;
}

/** The 503 of a profile request while Redis cannot serve. */
function assertStoreUnavailable(res: TestResponse): void {
  const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
  assert.equal(error.message, 'The shared store is unavailable; try again shortly.');
  assert.equal(res.headers['retry-after'], '1');
}

/** Polls /readyz until it is 200. */
async function untilReady(client: Client, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  for (let res = await client.send({ path: '/readyz' }); res.status !== 200; ) {
    assert.ok(performance.now() < deadline, `not ready in time: ${res.text}`);
    await sleep(20);
    res = await client.send({ path: '/readyz' });
  }
}

/** Polls /readyz until its 503 gives `reason`; asserts its envelope then. */
async function untilNotReady(client: Client, reason: string | RegExp, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  const matches = (message: string) => (typeof reason === 'string' ? message === reason : reason.test(message));
  let res = await client.send({ path: '/readyz' });
  while (res.status !== 503 || !matches(`${res.json().error.message}`.replace(/^Not ready: /, ''))) {
    assert.ok(performance.now() < deadline, `/readyz did not say ${reason}: ${res.text}`);
    await sleep(20);
    res = await client.send({ path: '/readyz' });
  }
  const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
  assert.ok(error.message.startsWith('Not ready: '), error.message);
}

/** The reasons of the warnings logged, and the lines saying Redis is back. */
function outages(logs: LogCapture): { warnings: unknown[]; ends: number } {
  const warnings = logs.lines.filter((line) => line.level === 40);
  for (const line of warnings) assert.equal(line.msg, OUTAGE_WARNING);
  return {
    warnings: warnings.map((line) => line.reason),
    ends: logs.lines.filter((line) => line.msg === AVAILABLE_AGAIN).length,
  };
}

describe('Redis in production: TLS and ACLs', {
  skip: (REDIS_SERVER_MISSING && REDIS_SKIP_REASON) || (OPENSSL_MISSING && OPENSSL_SKIP_REASON),
}, () => {
  let files: TlsFiles;
  /** TLS, a certificate for 127.0.0.1 and SERVER_NAME; client certificates optional. */
  let tls: RedisServer;
  /** Mutual TLS: a client certificate the CA signed, required. */
  let mutual: RedisServer;
  /** TLS, a certificate for SERVER_NAME only. */
  let nameOnly: RedisServer;
  /** No TLS: ACL users. */
  let plain: RedisServer;
  let admin: Redis;
  const open: Client[] = [];

  before(async () => {
    files = makeTlsFiles();
    const server = { cert: files.serverCert, key: files.serverKey, ca: files.ca };
    [tls, mutual, nameOnly, plain] = await Promise.all([
      RedisServer.start({ ...server, authClients: 'optional' }),
      RedisServer.start({ ...server, authClients: 'yes' }),
      RedisServer.start({ cert: files.nameOnlyCert, key: files.nameOnlyKey, ca: files.ca, authClients: 'no' }),
      RedisServer.start(),
    ]);
    admin = new Redis(plain.url);
  });
  after(async () => {
    await Promise.all(open.map((client) => client.close()));
    admin?.disconnect();
    await Promise.all([tls, mutual, nameOnly, plain].map((server) => server?.kill()));
    files?.remove();
  });

  /** An instance of the service with these Redis settings, logging into its own capture. */
  async function service(settings: Partial<Config>): Promise<Service> {
    const logs = new LogCapture();
    const client = await injectClient(
      { redisTimeoutMs: TIMEOUT_MS, logLevel: 'info', ...settings },
      { logStream: logs },
    );
    open.push(client);
    return { client, logs };
  }

  /** A file holding `password`, as a container secret would. */
  function passwordFile(name: string, password: string): string {
    const path = join(files.dir, name);
    writeFileSync(path, `${password}\n`);
    return path;
  }

  describe('TLS', () => {
    it('serves over TLS to a Redis whose certificate the private CA of REDIS_TLS_CA_FILE signed', async () => {
      const { client, logs } = await service({ redisUrl: tls.url, redisTlsCaFile: files.ca });
      await untilReady(client);
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
      assert.deepEqual(outages(logs), { warnings: [], ends: 0 });
    });

    it('refuses a certificate that no CA it trusts signed, saying so', async () => {
      const reason =
        "Redis's TLS certificate is not trusted (REDIS_TLS_CA_FILE names the CA to trust): self-signed certificate in certificate chain";
      const { client, logs } = await service({ redisUrl: tls.url, redisTlsCaFile: files.otherCa });
      await untilNotReady(client, reason);
      assertStoreUnavailable(await client.send({ path: '/api/profile' }));
      assert.deepEqual(outages(logs), { warnings: [reason], ends: 0 });
    });

    it('refuses a certificate for another name than the host reached, saying so', async () => {
      const reason =
        "Redis's TLS certificate is for another name (REDIS_TLS_SERVERNAME sets the name to check): Hostname/IP does not match certificate's altnames: Host: localhost. is not in the cert's altnames: IP Address:127.0.0.1, DNS:redis.test";
      const { client } = await service({ redisUrl: `rediss://localhost:${tls.port}`, redisTlsCaFile: files.ca });
      await untilNotReady(client, reason);
    });

    it('checks the name of REDIS_TLS_SERVERNAME in a certificate without the address reached', async () => {
      const byAddress = await service({ redisUrl: nameOnly.url, redisTlsCaFile: files.ca });
      await untilNotReady(
        byAddress.client,
        "Redis's TLS certificate is for another name (REDIS_TLS_SERVERNAME sets the name to check): Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list:",
      );
      const byName = await service({
        redisUrl: nameOnly.url,
        redisTlsCaFile: files.ca,
        redisTlsServername: SERVER_NAME,
      });
      await untilReady(byName.client);
      assert.equal((await byName.client.send({ path: '/api/profile' })).status, 200);
    });

    it('outlives a failed handshake that ends in a second error, the server alert (it would end the process)', async () => {
      // About one handshake in a thousand refused for its name ends so: many clients, trying fast.
      const uncaught: Error[] = [];
      const hear = (error: Error) => uncaught.push(error);
      process.on('uncaughtException', hear);
      const settings = { ...DEFAULT_CONFIG, redisUrl: nameOnly.url, redisTlsCaFile: files.ca };
      const clients = Array.from({ length: 30 }, () =>
        createRedisClient(settings, { retryDelay: () => 20, onPassword: () => {} }).on('error', () => {}),
      );
      try {
        await sleep(4_000);
      } finally {
        for (const client of clients) client.disconnect();
        await sleep(200);
        process.off('uncaughtException', hear);
      }
      assert.deepEqual(
        uncaught.map((error) => error.message),
        [],
      );
    });

    it('shows the client certificate of REDIS_TLS_CERT_FILE to a Redis that requires one (mutual TLS)', async () => {
      const { client } = await service({
        redisUrl: mutual.url,
        redisTlsCaFile: files.ca,
        redisTlsCertFile: files.clientCert,
        redisTlsKeyFile: files.clientKey,
      });
      await untilReady(client);
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
    });

    it('is refused by a Redis that requires a client certificate, without one or with one of another CA, saying so', async () => {
      // With TLS 1.3 a client's handshake ends before Redis checks its certificate, so Redis's
      // alert may come after a reset of the client's first write: either is the same state.
      const refused = (alert: string) =>
        new RegExp(
          `^(${alert.replace(/[()]/g, '\\$&')}|Redis closed the TLS connection before it was ready, as when it requires a client certificate \\(REDIS_TLS_CERT_FILE\\) or refuses the one shown: (write|read) (ECONNRESET|EPIPE))$`,
        );
      const without = await service({ redisUrl: mutual.url, redisTlsCaFile: files.ca });
      const reason = refused(
        'Redis refused the TLS connection: it requires a client certificate (REDIS_TLS_CERT_FILE): tlsv13 alert certificate required',
      );
      await untilNotReady(without.client, reason);
      const { warnings, ends } = outages(without.logs);
      assert.equal(ends, 0);
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(String(warnings[0]), reason);
      // The other CA's own certificate, and its key.
      const foreign = await service({
        redisUrl: mutual.url,
        redisTlsCaFile: files.ca,
        redisTlsCertFile: files.otherCa,
        redisTlsKeyFile: files.otherCa.replace(/\.pem$/, '.key'),
      });
      await untilNotReady(
        foreign.client,
        refused('Redis refused the client certificate of REDIS_TLS_CERT_FILE: tlsv1 alert unknown ca'),
      );
    });

    it('refuses at start a client certificate OpenSSL refuses (an RSA-512 key): a ConfigError naming the settings', async () => {
      await assert.rejects(
        service({
          redisUrl: mutual.url,
          redisTlsCaFile: files.ca,
          redisTlsCertFile: files.weakCert,
          redisTlsKeyFile: files.weakKey,
        }),
        {
          name: 'ConfigError',
          message: `invalid REDIS_TLS_CERT_FILE ${JSON.stringify(files.weakCert)} with REDIS_TLS_KEY_FILE ${JSON.stringify(files.weakKey)}: OpenSSL refuses it (ee key too small)`,
        },
      );
    });
  });

  describe('ACL users', () => {
    it('serves with a user allowed only its commands and the keys of REDIS_KEY_PREFIX, and keeps its keys there', async () => {
      await admin.acl('SETUSER', 'greeting', 'reset', 'on', '>greeting-pass', ...MINIMAL_ACL);
      await admin.flushall();
      const { client, logs } = await service({
        redisUrl: plain.url,
        redisUsername: 'greeting',
        redisPasswordFile: passwordFile('greeting', 'greeting-pass'),
        redisKeyPrefix: 'tenant-a:',
      });
      await untilReady(client);
      const written = await client.send({
        method: 'PUT',
        path: '/api/profile',
        headers: { 'content-type': 'application/json' },
        body: '{"name":"Ada"}',
      });
      assert.equal(written.status, 200, written.text);
      assert.equal((await client.send({ path: '/api/profile' })).json().name, 'Ada');
      // The readiness check's count expired at once; the client's (127.0.0.1) is there.
      assert.deepEqual((await admin.keys('*')).sort(), ['tenant-a:profile', 'tenant-a:rate-limit:127.0.0.1']);
      assert.deepEqual(outages(logs), { warnings: [], ends: 0 });
    });

    it('is not ready with a user missing a command it needs, naming it, logged once for any number of requests, and ready once allowed', async () => {
      const withoutHset = MINIMAL_ACL.filter((rule) => rule !== '+hset');
      await admin.acl('SETUSER', 'no-hset', 'reset', 'on', '>no-hset-pass', ...withoutHset);
      await admin.flushall();
      const { client, logs } = await service({
        redisUrl: plain.url,
        redisUsername: 'no-hset',
        redisPasswordFile: passwordFile('no-hset', 'no-hset-pass'),
        redisKeyPrefix: 'tenant-a:',
      });
      // Redis 7.0 names the script's line, from which the service names the command; later ones name it.
      const reason =
        /^Redis denied a permission the service needs: (the user may not run HSET \(ERR The user executing the script can't run this command or subcommand script: [0-9a-f]{40}, on @user_script:6\.\)|NOPERM .*'hset' command.*)$/;
      await untilNotReady(client, reason);
      for (let i = 0; i < 10; i++) {
        assertStoreUnavailable(await client.send({ path: '/api/profile' }));
        await untilNotReady(client, reason);
      }
      const { warnings, ends } = outages(logs);
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(String(warnings[0]), reason);
      assert.equal(ends, 0);
      await admin.acl('SETUSER', 'no-hset', '+hset');
      await untilReady(client);
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
      assert.deepEqual(outages(logs), { warnings, ends: 1 });
    });

    it('turns not ready when a permission is taken away while it serves, warned of once, and back once given again', async () => {
      await admin.acl('SETUSER', 'greeting', 'reset', 'on', '>greeting-pass', ...MINIMAL_ACL);
      const { client, logs } = await service({
        redisUrl: plain.url,
        redisUsername: 'greeting',
        redisPasswordFile: passwordFile('greeting', 'greeting-pass'),
        redisKeyPrefix: 'tenant-a:',
      });
      await untilReady(client);
      await admin.acl('SETUSER', 'greeting', '-hget');
      const put = { method: 'PUT', path: '/api/profile', headers: { 'content-type': 'application/json' }, body: '{}' };
      // Reading still works; the first write fails, and from then on every profile request, at once.
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
      assertStoreUnavailable(await client.send(put));
      const reason =
        /^Redis denied a permission the service needs: (the user may not run HGET \(ERR The user executing the script can't run this command or subcommand script: [0-9a-f]{40}, on @user_script:4\.\)|NOPERM .*'hget' command.*)$/;
      for (let i = 0; i < 10; i++) {
        assertStoreUnavailable(await client.send(i % 2 === 0 ? put : { path: '/api/profile' }));
        await untilNotReady(client, reason);
      }
      const { warnings, ends } = outages(logs);
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(String(warnings[0]), reason);
      assert.equal(ends, 0);
      await admin.acl('SETUSER', 'greeting', '+hget');
      await untilReady(client);
      assert.equal((await client.send(put)).status, 200);
      assert.deepEqual(outages(logs), { warnings, ends: 1 });
    });

    it('is not ready on a replica, saying so, and ready once it is promoted', async () => {
      const replica = await RedisServer.start();
      const control = new Redis(replica.url);
      try {
        await control.replicaof('127.0.0.1', plain.port);
        const reason = 'Redis is read-only: the node connected to is a replica (role:slave), not the primary.';
        const { client, logs } = await service({ redisUrl: replica.url });
        await untilNotReady(client, reason);
        assertStoreUnavailable(await client.send({ path: '/api/profile' }));
        await control.replicaof('NO', 'ONE');
        await untilReady(client);
        assert.deepEqual(outages(logs), { warnings: [reason], ends: 1 });
      } finally {
        control.disconnect();
        await replica.kill();
      }
    });

    it('says a wrong password is refused credentials, never repeating it', async () => {
      await admin.acl('SETUSER', 'greeting', 'reset', 'on', '>greeting-pass', ...MINIMAL_ACL);
      const reason = 'Redis refused the credentials: WRONGPASS invalid username-password pair or user is disabled.';
      const { client, logs } = await service({
        redisUrl: plain.url,
        redisUsername: 'greeting',
        redisPasswordFile: passwordFile('wrong', 'not-the-greeting-pass'),
        redisKeyPrefix: 'tenant-a:',
      });
      await untilNotReady(client, reason);
      assertStoreUnavailable(await client.send({ path: '/api/profile' }));
      assert.deepEqual(outages(logs), { warnings: [reason], ends: 0 });
      assert.ok(!JSON.stringify(logs.lines).includes('not-the-greeting-pass'));
    });

    it('picks up a password rotated through its file at the next reconnection, without a restart', async () => {
      await admin.acl('SETUSER', 'rotated', 'reset', 'on', '>first-pass', ...MINIMAL_ACL);
      const file = passwordFile('rotated', 'first-pass');
      const { client, logs } = await service({
        redisUrl: plain.url,
        redisUsername: 'rotated',
        redisPasswordFile: file,
        redisKeyPrefix: 'tenant-a:',
      });
      await untilReady(client);
      // Redis takes the new password first: the connection open stays, a new one needs it.
      await admin.acl('SETUSER', 'rotated', 'resetpass', '>second-pass');
      await admin.client('KILL', 'USER', 'rotated');
      const refused = 'Redis refused the credentials: WRONGPASS invalid username-password pair or user is disabled.';
      await untilNotReady(client, refused);
      writeFileSync(file, 'second-pass\n');
      await untilReady(client);
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
      // Then the file first: the next connection, after the kill, reads it.
      writeFileSync(file, 'third-pass\n');
      await admin.acl('SETUSER', 'rotated', 'resetpass', '>third-pass');
      await admin.client('KILL', 'USER', 'rotated');
      await sleep(50);
      await untilReady(client);
      assert.equal((await client.send({ path: '/api/profile' })).status, 200);
      const text = JSON.stringify(logs.lines);
      for (const password of ['first-pass', 'second-pass', 'third-pass']) assert.ok(!text.includes(password), password);
    });

    it('never repeats the password of its file in a reason', async () => {
      const { client } = await service({
        redisUrl: 'redis://s3cret-pass.invalid:6379',
        redisPasswordFile: passwordFile('in-host', 's3cret-pass'),
      });
      await untilNotReady(client, 'Redis is unreachable: getaddrinfo ENOTFOUND ***.invalid');
    });
  });
});
