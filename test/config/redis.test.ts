import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readSecretFile } from '../../src/config/files.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { redisTlsOn } from '../../src/config/redis.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';

describe('loadConfig: Redis', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  let files: TlsFiles;
  let passwordFile: string;
  let emptyFile: string;
  before(() => {
    files = makeTlsFiles();
    passwordFile = join(files.dir, 'password');
    writeFileSync(passwordFile, 's3cret\n');
    emptyFile = join(files.dir, 'empty');
    writeFileSync(emptyFile, '\n');
  });
  after(() => files?.remove());

  it('reads Sentinel: the sentinels, the name of the primary, credentials of both, TLS and its files for both', () => {
    const config = loadConfig([], {
      REDIS_SENTINELS: '10.0.0.1:26379, sentinel.internal:26380,[fd00::1]:26379',
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_USERNAME: 'greeting',
      REDIS_PASSWORD_FILE: passwordFile,
      REDIS_SENTINEL_USERNAME: 'watcher',
      REDIS_SENTINEL_PASSWORD_FILE: passwordFile,
      REDIS_TLS: 'TRUE',
      REDIS_TLS_CA_FILE: files.ca,
      REDIS_TLS_CERT_FILE: files.clientCert,
      REDIS_TLS_KEY_FILE: files.clientKey,
      REDIS_TLS_SERVERNAME: 'redis.internal',
      REDIS_KEY_PREFIX: 'tenant-a:{x}',
      REDIS_MIN_REPLICAS_ACK: '1',
    });
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => key.startsWith('redis'))), {
      redisUrl: null,
      redisSentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: 'sentinel.internal', port: 26380 },
        { host: 'fd00::1', port: 26379 },
      ],
      redisSentinelName: 'mymaster',
      redisClusterNodes: null,
      redisUsername: 'greeting',
      redisPasswordFile: passwordFile,
      redisTls: true,
      redisTlsCaFile: files.ca,
      redisTlsCertFile: files.clientCert,
      redisTlsKeyFile: files.clientKey,
      redisTlsServername: 'redis.internal',
      redisSentinelUsername: 'watcher',
      redisSentinelPasswordFile: passwordFile,
      redisKeyPrefix: 'tenant-a:{x}',
      redisMinReplicasAck: 1,
      redisTimeoutMs: 500,
    });
  });

  it('reads a Cluster of seed nodes, and a URL with a user name and the password in a file', () => {
    const cluster = loadConfig([], { REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6380', REDIS_TLS: '1' });
    assert.deepEqual(cluster.redisClusterNodes, [
      { host: '10.0.0.1', port: 6379 },
      { host: '10.0.0.2', port: 6380 },
    ]);
    assert.equal(cluster.redisTls, true);
    const url = loadConfig([], { REDIS_URL: 'rediss://greeting@redis.example', REDIS_PASSWORD_FILE: passwordFile });
    assert.equal(url.redisPasswordFile, passwordFile);
    assert.equal(loadConfig([], { REDIS_URL: 'rediss://redis.example', REDIS_TLS: 'true' }).redisTls, true);
  });

  it('reads the password of a file without one trailing newline, again each time', () => {
    assert.equal(readSecretFile(passwordFile), 's3cret');
    writeFileSync(passwordFile, 'rotated\r\n');
    assert.equal(readSecretFile(passwordFile), 'rotated');
    writeFileSync(passwordFile, 'two lines\n\n');
    assert.equal(readSecretFile(passwordFile), 'two lines\n');
    writeFileSync(passwordFile, 's3cret\n');
  });

  it('turns TLS on with rediss:// or REDIS_TLS=true, and off otherwise', () => {
    assert.equal(redisTlsOn(loadConfig([], { REDIS_URL: 'rediss://redis.example' })), true);
    assert.equal(redisTlsOn(loadConfig([], { REDIS_URL: 'redis://redis.example' })), false);
    assert.equal(redisTlsOn(loadConfig([], { REDIS_CLUSTER_NODES: 'a:1', REDIS_TLS: 'true' })), true);
    assert.equal(redisTlsOn(loadConfig([], { REDIS_CLUSTER_NODES: 'a:1' })), false);
  });

  /** Each bad value or combination, and the one line that names it. */
  const bad = (): [Record<string, string>, string][] => {
    const sentinel = { REDIS_SENTINELS: '10.0.0.1:26379', REDIS_SENTINEL_NAME: 'mymaster' };
    const tls = { REDIS_URL: 'rediss://redis.example' };
    const addresses = (example: string) => `must be a comma-separated list of host:port such as ${example}`;
    return [
      [
        { REDIS_SENTINELS: '10.0.0.1' },
        `invalid REDIS_SENTINELS "10.0.0.1": ${addresses('10.0.0.1:26379,10.0.0.2:26379')}`,
      ],
      [{ REDIS_SENTINELS: 'a:1,' }, `invalid REDIS_SENTINELS "a:1,": ${addresses('10.0.0.1:26379,10.0.0.2:26379')}`],
      [{ REDIS_SENTINELS: 'a:0' }, `invalid REDIS_SENTINELS "a:0": ${addresses('10.0.0.1:26379,10.0.0.2:26379')}`],
      [
        { REDIS_SENTINELS: '::1:26379' },
        `invalid REDIS_SENTINELS "::1:26379": ${addresses('10.0.0.1:26379,10.0.0.2:26379')}`,
      ],
      [
        { REDIS_CLUSTER_NODES: 'a:65536' },
        `invalid REDIS_CLUSTER_NODES "a:65536": ${addresses('10.0.0.1:6379,10.0.0.2:6379')}`,
      ],
      [
        { REDIS_CLUSTER_NODES: 'redis://a:1' },
        `invalid REDIS_CLUSTER_NODES "redis://a:1": ${addresses('10.0.0.1:6379,10.0.0.2:6379')}`,
      ],
      [
        { REDIS_SENTINEL_NAME: 'my master', REDIS_SENTINELS: 'a:1' },
        'invalid REDIS_SENTINEL_NAME "my master": must be 1 to 128 printable ASCII characters, no spaces',
      ],
      // One topology.
      [
        { REDIS_URL: 'redis://a', REDIS_CLUSTER_NODES: 'b:1' },
        'REDIS_URL and REDIS_CLUSTER_NODES are both set: Redis is one of REDIS_URL, REDIS_SENTINELS (with REDIS_SENTINEL_NAME) or REDIS_CLUSTER_NODES',
      ],
      [
        { ...sentinel, REDIS_URL: 'redis://a' },
        'REDIS_URL and REDIS_SENTINELS are both set: Redis is one of REDIS_URL, REDIS_SENTINELS (with REDIS_SENTINEL_NAME) or REDIS_CLUSTER_NODES',
      ],
      [
        { ...sentinel, REDIS_CLUSTER_NODES: 'b:1' },
        'REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set: Redis is one of REDIS_URL, REDIS_SENTINELS (with REDIS_SENTINEL_NAME) or REDIS_CLUSTER_NODES',
      ],
      [
        { REDIS_SENTINELS: 'a:1' },
        'invalid REDIS_SENTINELS: needs REDIS_SENTINEL_NAME, the name under which the sentinels monitor the primary',
      ],
      [
        { REDIS_SENTINEL_NAME: 'mymaster' },
        'invalid REDIS_SENTINEL_NAME: needs REDIS_SENTINELS, the sentinels that monitor it',
      ],
      // Settings that would do nothing.
      ...(
        [
          ['REDIS_USERNAME', 'greeting'],
          ['REDIS_TLS', 'true'],
          ['REDIS_KEY_PREFIX', 'x:'],
          ['REDIS_MIN_REPLICAS_ACK', '1'],
          ['REDIS_TLS_SERVERNAME', 'redis.internal'],
        ] as const
      ).map(([name, value]): [Record<string, string>, string] => [
        { [name]: value },
        `invalid ${name}: no Redis is set to apply it to (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES)`,
      ]),
      [
        { REDIS_URL: 'redis://a', REDIS_SENTINEL_USERNAME: 'watcher' },
        'invalid REDIS_SENTINEL_USERNAME: applies to the sentinels, and REDIS_SENTINELS is not set',
      ],
      [
        { REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINEL_PASSWORD_FILE: passwordFile },
        'invalid REDIS_SENTINEL_PASSWORD_FILE: applies to the sentinels, and REDIS_SENTINELS is not set',
      ],
      [
        { ...tls, REDIS_TLS_CA_FILE: files.ca, REDIS_TLS: 'false' },
        'invalid REDIS_TLS "false": REDIS_URL is rediss://, with TLS',
      ],
      [
        { REDIS_URL: 'redis://a', REDIS_TLS: 'true' },
        'invalid REDIS_TLS "true": REDIS_URL is redis://, without TLS: write rediss://',
      ],
      ...(['REDIS_TLS_CA_FILE', 'REDIS_TLS_SERVERNAME'] as const).map((name): [Record<string, string>, string] => [
        { REDIS_URL: 'redis://a', [name]: name === 'REDIS_TLS_CA_FILE' ? files.ca : 'redis.internal' },
        `invalid ${name}: TLS is off: turn it on with rediss:// or REDIS_TLS=true`,
      ]),
      [
        {
          REDIS_CLUSTER_NODES: 'a:1',
          REDIS_TLS: 'false',
          REDIS_TLS_CERT_FILE: files.clientCert,
          REDIS_TLS_KEY_FILE: files.clientKey,
        },
        'invalid REDIS_TLS_CERT_FILE: TLS is off: turn it on with rediss:// or REDIS_TLS=true',
      ],
      // Credentials in one place.
      [
        { REDIS_URL: 'redis://:pw@a', REDIS_PASSWORD_FILE: passwordFile },
        'invalid REDIS_PASSWORD_FILE: REDIS_URL has a password too: give it in one place',
      ],
      [
        { REDIS_URL: 'redis://u@a', REDIS_USERNAME: 'greeting', REDIS_PASSWORD_FILE: passwordFile },
        'invalid REDIS_USERNAME: REDIS_URL has a user name too: give it in one place',
      ],
      [
        { REDIS_URL: 'redis://a', REDIS_USERNAME: 'greeting' },
        'invalid REDIS_USERNAME: needs REDIS_PASSWORD_FILE, the password of the user',
      ],
      [
        { ...sentinel, REDIS_SENTINEL_USERNAME: 'watcher' },
        'invalid REDIS_SENTINEL_USERNAME: needs REDIS_SENTINEL_PASSWORD_FILE, the password of the user',
      ],
      // Files: readable, PEM, a key that fits its certificate.
      [
        { REDIS_URL: 'redis://a', REDIS_PASSWORD_FILE: join(files.dir, 'missing') },
        `invalid REDIS_PASSWORD_FILE ${JSON.stringify(join(files.dir, 'missing'))}: cannot be read (ENOENT)`,
      ],
      [
        { REDIS_URL: 'redis://a', REDIS_PASSWORD_FILE: files.dir },
        `invalid REDIS_PASSWORD_FILE ${JSON.stringify(files.dir)}: cannot be read (EISDIR)`,
      ],
      [
        { REDIS_URL: 'redis://a', REDIS_PASSWORD_FILE: emptyFile },
        `invalid REDIS_PASSWORD_FILE ${JSON.stringify(emptyFile)}: is empty`,
      ],
      [
        { ...sentinel, REDIS_SENTINEL_PASSWORD_FILE: join(files.dir, 'missing') },
        `invalid REDIS_SENTINEL_PASSWORD_FILE ${JSON.stringify(join(files.dir, 'missing'))}: cannot be read (ENOENT)`,
      ],
      [
        { ...tls, REDIS_TLS_CA_FILE: files.notPem },
        `invalid REDIS_TLS_CA_FILE ${JSON.stringify(files.notPem)}: is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)`,
      ],
      [
        { ...tls, REDIS_TLS_CA_FILE: files.clientKey },
        `invalid REDIS_TLS_CA_FILE ${JSON.stringify(files.clientKey)}: is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)`,
      ],
      [
        { ...tls, REDIS_TLS_CA_FILE: join(files.dir, 'missing') },
        `invalid REDIS_TLS_CA_FILE ${JSON.stringify(join(files.dir, 'missing'))}: cannot be read (ENOENT)`,
      ],
      [
        { ...tls, REDIS_TLS_CERT_FILE: files.notPem, REDIS_TLS_KEY_FILE: files.clientKey },
        `invalid REDIS_TLS_CERT_FILE ${JSON.stringify(files.notPem)}: is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)`,
      ],
      [
        { ...tls, REDIS_TLS_CERT_FILE: files.clientCert, REDIS_TLS_KEY_FILE: files.clientCert },
        `invalid REDIS_TLS_KEY_FILE ${JSON.stringify(files.clientCert)}: is not a PEM private key (-----BEGIN PRIVATE KEY-----)`,
      ],
      [
        { ...tls, REDIS_TLS_CERT_FILE: files.clientCert },
        'invalid REDIS_TLS_CERT_FILE: needs REDIS_TLS_KEY_FILE, the key of the certificate',
      ],
      [
        { ...tls, REDIS_TLS_KEY_FILE: files.clientKey },
        'invalid REDIS_TLS_KEY_FILE: needs REDIS_TLS_CERT_FILE, the certificate it is the key of',
      ],
      [
        { ...tls, REDIS_TLS_CERT_FILE: files.clientCert, REDIS_TLS_KEY_FILE: files.serverKey },
        `invalid REDIS_TLS_KEY_FILE ${JSON.stringify(files.serverKey)}: is not the key of the certificate in REDIS_TLS_CERT_FILE ${JSON.stringify(files.clientCert)}`,
      ],
      ...['127.0.0.1', '::1', 'redis_internal', 'redis.internal.', '-redis'].map(
        (name): [Record<string, string>, string] => [
          { ...tls, REDIS_TLS_SERVERNAME: name },
          `invalid REDIS_TLS_SERVERNAME ${JSON.stringify(name)}: must be a DNS name such as redis.internal, as in the server's certificate (an address is checked as it is reached)`,
        ],
      ),
      // Keys.
      [
        { ...tls, REDIS_KEY_PREFIX: 'a b' },
        'invalid REDIS_KEY_PREFIX "a b": must be 1 to 64 printable ASCII characters, no spaces',
      ],
      [
        { ...tls, REDIS_KEY_PREFIX: 'x'.repeat(65) },
        `invalid REDIS_KEY_PREFIX "${'x'.repeat(65)}": must be 1 to 64 printable ASCII characters, no spaces`,
      ],
      [
        { ...tls, REDIS_KEY_PREFIX: 'ä:' },
        'invalid REDIS_KEY_PREFIX "ä:": must be 1 to 64 printable ASCII characters, no spaces',
      ],
      [
        { REDIS_CLUSTER_NODES: 'a:1', REDIS_KEY_PREFIX: 'app{1}:' },
        'invalid REDIS_KEY_PREFIX "app{1}:": must have no { or } with REDIS_CLUSTER_NODES: a brace makes a hash tag, which would put every key in one slot',
      ],
      [
        { ...tls, REDIS_MIN_REPLICAS_ACK: '17' },
        'invalid REDIS_MIN_REPLICAS_ACK "17": must be an integer from 0 to 16',
      ],
      [{ ...tls, REDIS_TLS: 'yes' }, 'invalid REDIS_TLS "yes": must be true, false, 1 or 0'],
    ];
  };
  it('rejects each bad Redis setting or combination in one line naming it', () => {
    for (const [env, message] of bad()) {
      assert.throws(() => loadConfig([], env), new ConfigError(message), JSON.stringify(env));
    }
  });
});
