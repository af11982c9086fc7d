import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type Config,
  ConfigError,
  checkTimeZone,
  DEFAULT_CONFIG,
  listenError,
  loadConfig,
  otlpTracesUrl,
  parseCommandLine,
  readAdminToken,
  readSecretFile,
  readTlsKeyPair,
  redisTlsOn,
  SETTINGS,
} from '../src/config.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from './tls-files.js';

/** A configuration without its OTEL_ settings, which have tests of their own below. */
/** The settings but tracing's, fault injection's and the operator's, each tested on its own below. */
const withoutTracing = (config: Config) =>
  Object.fromEntries(Object.entries(config).filter(([key]) => !/^(otel|fault|admin)/.test(key)));

const PERCENT_ENCODED =
  "its user name and password must be percent-encoded: any character but letters, digits and -._~!$&'()*+,;= as %XX (%40 for @, %25 for %, %20 for a space)";

describe('loadConfig', () => {
  it('defaults to port 8080 on all interfaces, context path /, info logs, 1 MiB bodies, 10 s shutdown, 1000 requests a minute, no proxy, any origin, 10 s/30 s/72 s timeouts, no Redis', () => {
    assert.deepEqual(withoutTracing(loadConfig([], {})), {
      port: 8080,
      host: '0.0.0.0',
      contextPath: '/',
      logLevel: 'info',
      bodyLimit: 1048576,
      shutdownTimeoutMs: 10000,
      cursorSecret: DEFAULT_CONFIG.cursorSecret,
      rateLimitMax: 1000,
      rateLimitWindowMs: 60000,
      trustProxy: false,
      corsOrigins: '*',
      headersTimeoutMs: 10000,
      requestTimeoutMs: 30000,
      keepAliveTimeoutMs: 72000,
      http2: false,
      tlsCertFile: null,
      tlsKeyFile: null,
      metricsEnabled: true,
      redisUrl: null,
      redisSentinels: null,
      redisSentinelName: null,
      redisClusterNodes: null,
      redisUsername: null,
      redisPasswordFile: null,
      redisTls: null,
      redisTlsCaFile: null,
      redisTlsCertFile: null,
      redisTlsKeyFile: null,
      redisTlsServername: null,
      redisSentinelUsername: null,
      redisSentinelPasswordFile: null,
      redisKeyPrefix: 'greeting-service:',
      redisMinReplicasAck: 0,
      redisTimeoutMs: 500,
    });
    assert.deepEqual(loadConfig([], {}), DEFAULT_CONFIG);
  });

  it('defaults the cursor secret to 32 random bytes of this process', () => {
    assert.match(DEFAULT_CONFIG.cursorSecret, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(DEFAULT_CONFIG.cursorSecret, 'base64url').length, 32);
    const other = spawnSync(
      process.execPath,
      ['--import', 'tsx', '-e', 'import("./src/config.ts").then((m) => console.log(m.DEFAULT_CONFIG.cursorSecret))'],
      { encoding: 'utf8' },
    );
    assert.equal(other.status, 0, other.stderr);
    assert.match(other.stdout.trim(), /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(other.stdout.trim(), DEFAULT_CONFIG.cursorSecret);
  });

  it('reads every variable', () => {
    const env = {
      PORT: '9000',
      HOST: '127.0.0.1',
      CONTEXT_PATH: '/svc',
      LOG_LEVEL: 'debug',
      BODY_LIMIT: '2048',
      SHUTDOWN_TIMEOUT_MS: '0',
      CURSOR_SECRET: 'a shared secret of at least 32 characters',
      RATE_LIMIT_MAX: '0',
      RATE_LIMIT_WINDOW_MS: '1',
      TRUST_PROXY: 'true',
      CORS_ORIGINS: 'https://a.example,http://localhost:3000',
      HEADERS_TIMEOUT_MS: '5000',
      REQUEST_TIMEOUT_MS: '5000',
      KEEP_ALIVE_TIMEOUT_MS: '65000',
      HTTP2: 'TRUE',
      METRICS_ENABLED: 'false',
      REDIS_URL: 'redis://redis.internal:6379/2',
      REDIS_TIMEOUT_MS: '1000',
    };
    assert.deepEqual(withoutTracing(loadConfig([], env)), {
      port: 9000,
      host: '127.0.0.1',
      contextPath: '/svc',
      logLevel: 'debug',
      bodyLimit: 2048,
      shutdownTimeoutMs: 0,
      cursorSecret: 'a shared secret of at least 32 characters',
      rateLimitMax: 0,
      rateLimitWindowMs: 1,
      trustProxy: true,
      corsOrigins: ['https://a.example', 'http://localhost:3000'],
      headersTimeoutMs: 5000,
      requestTimeoutMs: 5000,
      keepAliveTimeoutMs: 65000,
      http2: true,
      tlsCertFile: null,
      tlsKeyFile: null,
      metricsEnabled: false,
      redisUrl: 'redis://redis.internal:6379/2',
      redisSentinels: null,
      redisSentinelName: null,
      redisClusterNodes: null,
      redisUsername: null,
      redisPasswordFile: null,
      redisTls: null,
      redisTlsCaFile: null,
      redisTlsCertFile: null,
      redisTlsKeyFile: null,
      redisTlsServername: null,
      redisSentinelUsername: null,
      redisSentinelPasswordFile: null,
      redisKeyPrefix: 'greeting-service:',
      redisMinReplicasAck: 0,
      redisTimeoutMs: 1000,
    });
  });

  it('reads TRUST_PROXY true and false in any case as booleans, and 0 as false', () => {
    for (const [raw, value] of [
      ['true', true],
      ['TRUE', true],
      ['false', false],
      ['False', false],
      ['0', false],
    ] as const) {
      assert.equal(loadConfig([], { TRUST_PROXY: raw }).trustProxy, value, raw);
    }
  });

  it('reads TRUST_PROXY 1 and above as a number of hops: 1 is one proxy, not every hop', () => {
    for (const [raw, value] of [
      ['1', 1],
      ['2', 2],
      ['007', 7],
    ] as const) {
      assert.equal(loadConfig([], { TRUST_PROXY: raw }).trustProxy, value, raw);
    }
  });

  it('reads TRUST_PROXY as a list of addresses, CIDR ranges and named ranges, trimmed', () => {
    for (const [raw, value] of [
      ['127.0.0.1', ['127.0.0.1']],
      ['10.0.0.0/8, 192.168.1.7', ['10.0.0.0/8', '192.168.1.7']],
      ['::1,fd00::/8,2001:db8::/128', ['::1', 'fd00::/8', '2001:db8::/128']],
      ['loopback,linklocal , uniquelocal', ['loopback', 'linklocal', 'uniquelocal']],
      ['172.16.0.0/12,0.0.0.0/0', ['172.16.0.0/12', '0.0.0.0/0']],
    ] as const) {
      assert.deepEqual(loadConfig([], { TRUST_PROXY: raw }).trustProxy, value, raw);
    }
  });

  it('lets --port and --host win over PORT and HOST', () => {
    const config = loadConfig(['--port', '9001', '--host=::1'], { PORT: '9000', HOST: '127.0.0.1' });
    assert.equal(config.port, 9001);
    assert.equal(config.host, '::1');
  });

  it('accepts a cursor secret of 32 characters or more', () => {
    assert.equal(loadConfig([], { CURSOR_SECRET: 'x'.repeat(32) }).cursorSecret, 'x'.repeat(32));
  });

  it('reads REDIS_URL as a redis:// or rediss:// URL, user and password included', () => {
    for (const url of [
      'redis://localhost',
      'rediss://user:p%40ss@redis.example:6380/1',
      'redis://:secret@10.0.0.5:6379',
      'redis://[::1]:6379/0',
      'redis://redis.example/15',
      'redis://redis.example:6379/2147483647',
      'redis://redis.example/',
      "redis://u:p%40ss%20%C3%A4!$&'()*+,;=~-._:x@127.0.0.1",
    ]) {
      assert.equal(loadConfig([], { REDIS_URL: url }).redisUrl, url);
    }
  });

  it('reads an empty variable as unset', () => {
    assert.equal(loadConfig([], { PORT: '' }).port, 8080);
  });

  it('normalises the context path', () => {
    assert.equal(loadConfig([], { CONTEXT_PATH: '/svc/' }).contextPath, '/svc');
    assert.equal(loadConfig([], { CONTEXT_PATH: '/a/b' }).contextPath, '/a/b');
    assert.equal(loadConfig([], { CONTEXT_PATH: '/' }).contextPath, '/');
  });

  it('reads CORS_ORIGINS as * or a list of origins, spaces around them ignored', () => {
    assert.equal(loadConfig([], { CORS_ORIGINS: '*' }).corsOrigins, '*');
    assert.deepEqual(loadConfig([], { CORS_ORIGINS: ' https://a.example , https://b.example:8443 ' }).corsOrigins, [
      'https://a.example',
      'https://b.example:8443',
    ]);
  });

  it('rejects a headers timeout set longer than the request timeout', () => {
    const message = 'invalid HEADERS_TIMEOUT_MS 20000: must not be more than REQUEST_TIMEOUT_MS (10000)';
    assert.throws(
      () => loadConfig([], { HEADERS_TIMEOUT_MS: '20000', REQUEST_TIMEOUT_MS: '10000' }),
      new ConfigError(message),
    );
    assert.throws(
      () => loadConfig([], { HEADERS_TIMEOUT_MS: '40000' }),
      new ConfigError('invalid HEADERS_TIMEOUT_MS 40000: must not be more than REQUEST_TIMEOUT_MS (30000)'),
    );
  });

  it('takes a request timeout under the headers timeout left unset: the headers get the same', () => {
    const config = loadConfig([], { REQUEST_TIMEOUT_MS: '3000' });
    assert.deepEqual([config.headersTimeoutMs, config.requestTimeoutMs], [3000, 3000]);
    const longer = loadConfig([], { REQUEST_TIMEOUT_MS: '60000' });
    assert.deepEqual([longer.headersTimeoutMs, longer.requestTimeoutMs], [10_000, 60_000]);
  });

  const bad: [string[], Record<string, string>, string][] = [
    [[], { PORT: 'abc' }, 'invalid PORT "abc": must be an integer from 0 to 65535'],
    [[], { PORT: '65536' }, 'invalid PORT "65536": must be an integer from 0 to 65535'],
    [[], { PORT: '-1' }, 'invalid PORT "-1": must be an integer from 0 to 65535'],
    [[], { PORT: '80.5' }, 'invalid PORT "80.5": must be an integer from 0 to 65535'],
    [[], { HOST: 'a b' }, 'invalid HOST "a b": must be a host name or IP address'],
    [[], { CONTEXT_PATH: 'svc' }, 'invalid CONTEXT_PATH "svc": must be "/" or a path such as "/svc"'],
    [[], { CONTEXT_PATH: '/a//b' }, 'invalid CONTEXT_PATH "/a//b": must be "/" or a path such as "/svc"'],
    [[], { CONTEXT_PATH: '/a b' }, 'invalid CONTEXT_PATH "/a b": must be "/" or a path such as "/svc"'],
    // Fastify reads these as a wildcard (which crashed the start) and a path parameter.
    ...['/*', '/svc*', '/:tenant', '/a:b'].map((value): [string[], Record<string, string>, string] => [
      [],
      { CONTEXT_PATH: value },
      `invalid CONTEXT_PATH ${JSON.stringify(value)}: must be "/" or a path such as "/svc"`,
    ]),
    [
      [],
      { LOG_LEVEL: 'loud' },
      'invalid LOG_LEVEL "loud": must be one of fatal, error, warn, info, debug, trace, silent',
    ],
    [[], { BODY_LIMIT: '0' }, 'invalid BODY_LIMIT "0": must be an integer from 1 to 2147483647'],
    [[], { BODY_LIMIT: '1mb' }, 'invalid BODY_LIMIT "1mb": must be an integer from 1 to 2147483647'],
    [
      [],
      { SHUTDOWN_TIMEOUT_MS: 'soon' },
      'invalid SHUTDOWN_TIMEOUT_MS "soon": must be an integer from 0 to 2147483647',
    ],
    [[], { RATE_LIMIT_MAX: '-1' }, 'invalid RATE_LIMIT_MAX "-1": must be an integer from 0 to 2147483647'],
    [[], { RATE_LIMIT_MAX: '1e3' }, 'invalid RATE_LIMIT_MAX "1e3": must be an integer from 0 to 2147483647'],
    [[], { RATE_LIMIT_WINDOW_MS: '0' }, 'invalid RATE_LIMIT_WINDOW_MS "0": must be an integer from 1 to 2147483647'],
    [[], { RATE_LIMIT_WINDOW_MS: '1m' }, 'invalid RATE_LIMIT_WINDOW_MS "1m": must be an integer from 1 to 2147483647'],
    [
      [],
      { TRUST_PROXY: 'yes' },
      'invalid TRUST_PROXY "yes": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '10.0.0.0/33' },
      'invalid TRUST_PROXY "10.0.0.0/33": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '10.0.0.1,' },
      'invalid TRUST_PROXY "10.0.0.1,": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '10.0.0.1,10.0.0.300' },
      'invalid TRUST_PROXY "10.0.0.1,10.0.0.300": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: 'fd00::/129' },
      'invalid TRUST_PROXY "fd00::/129": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '10.0.0.0/8/8' },
      'invalid TRUST_PROXY "10.0.0.0/8/8": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '10.0.0.0/+8' },
      'invalid TRUST_PROXY "10.0.0.0/+8": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: 'proxy.internal' },
      'invalid TRUST_PROXY "proxy.internal": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [
      [],
      { TRUST_PROXY: '-1' },
      'invalid TRUST_PROXY "-1": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [[], { TRUST_PROXY: '2147483648' }, 'invalid TRUST_PROXY "2147483648": must be an integer from 0 to 2147483647'],
    [[], { METRICS_ENABLED: 'off' }, 'invalid METRICS_ENABLED "off": must be true, false, 1 or 0'],
    // An inherited property of an object is no boolean.
    [
      [],
      { TRUST_PROXY: 'constructor' },
      'invalid TRUST_PROXY "constructor": must be true, false, a number of proxies, or a comma-separated list of IP addresses, CIDR ranges (10.0.0.0/8) and loopback, linklocal or uniquelocal',
    ],
    [[], { HEADERS_TIMEOUT_MS: '0' }, 'invalid HEADERS_TIMEOUT_MS "0": must be an integer from 1 to 2147483647'],
    [[], { REQUEST_TIMEOUT_MS: '1s' }, 'invalid REQUEST_TIMEOUT_MS "1s": must be an integer from 1 to 2147483647'],
    [
      [],
      { KEEP_ALIVE_TIMEOUT_MS: '-1' },
      'invalid KEEP_ALIVE_TIMEOUT_MS "-1": must be an integer from 1 to 2147483647',
    ],
    // A secret is not repeated in the message, not even a bad one.
    [[], { CURSOR_SECRET: 'too short, 31 characters long..' }, 'invalid CURSOR_SECRET: must be at least 32 characters'],
    ...[
      'http://redis.example',
      'redis.example:6379',
      'REDISS://redis.example',
      'redis://:secret@',
      'redis://:secret@ bad',
    ].map((value): [string[], Record<string, string>, string] => [
      [],
      { REDIS_URL: value },
      'invalid REDIS_URL: must be a URL such as redis://host:6379 or rediss://user:password@host:6380/0',
    ]),
    // Unchecked, ioredis would read each of these as SELECT NaN (a crash), a URIError, or database 0 in silence.
    ...(
      [
        ['redis://127.0.0.1:6379/abc', 'its database, the path, must be an integer from 0 to 2147483647'],
        ['redis://127.0.0.1:6379/-1', 'its database, the path, must be an integer from 0 to 2147483647'],
        ['redis://127.0.0.1:6379/1.5', 'its database, the path, must be an integer from 0 to 2147483647'],
        ['redis://127.0.0.1:6379/+1', 'its database, the path, must be an integer from 0 to 2147483647'],
        ['redis://127.0.0.1:6379/2147483648', 'its database, the path, must be an integer from 0 to 2147483647'],
        ['redis://127.0.0.1:6379/0/1', 'its database, the path, must be an integer from 0 to 2147483647'],
        [
          'redis://127.0.0.1:6379/?db=abc',
          'must have no query string or fragment (a ? or # in the password is written %3F or %23)',
        ],
        [
          'redis://127.0.0.1:6379/0?keyPrefix=x',
          'must have no query string or fragment (a ? or # in the password is written %3F or %23)',
        ],
        [
          'redis://127.0.0.1:6379/0#x',
          'must have no query string or fragment (a ? or # in the password is written %3F or %23)',
        ],
        ['redis://:%ZZ@127.0.0.1', PERCENT_ENCODED],
        ['redis://:%FF@127.0.0.1', PERCENT_ENCODED],
        ['redis://us%er:pass@127.0.0.1', PERCENT_ENCODED],
        ['redis://u:p@ss@127.0.0.1', PERCENT_ENCODED],
        ['redis://u:p ss@127.0.0.1', PERCENT_ENCODED],
        ['redis://u:pässword@127.0.0.1', PERCENT_ENCODED],
        ['redis://u:p"ss@127.0.0.1', PERCENT_ENCODED],
        ['redis://u:p[ss@127.0.0.1', PERCENT_ENCODED],
        ['redis://127.0.0.1:0', 'its port must be from 1 to 65535'],
      ] as const
    ).map(([value, reason]): [string[], Record<string, string>, string] => [
      [],
      { REDIS_URL: value },
      `invalid REDIS_URL: ${reason}`,
    ]),
    [[], { REDIS_TIMEOUT_MS: '0' }, 'invalid REDIS_TIMEOUT_MS "0": must be an integer from 1 to 60000'],
    [['--port', 'abc'], {}, 'invalid --port "abc": must be an integer from 0 to 65535'],
    ...[
      'a.example',
      'https://a.example/',
      'https://A.example',
      'ftp://a.example',
      'https://a.example,',
      '*,https://a.example',
    ].map((value): [string[], Record<string, string>, string] => [
      [],
      { CORS_ORIGINS: value },
      `invalid CORS_ORIGINS ${JSON.stringify(value)}: must be * or a comma-separated list of origins such as https://app.example`,
    ]),
  ];
  for (const [argv, env, message] of bad) {
    it(`rejects ${argv.join(' ') || JSON.stringify(env)} naming it`, () => {
      assert.throws(() => loadConfig(argv, env), new ConfigError(message));
    });
  }

  it('reads --help, -h and --version apart from the settings', () => {
    assert.deepEqual(parseCommandLine(['--help']), { help: true, version: false, flags: {} });
    assert.deepEqual(parseCommandLine(['-h', '--port', '1']), { help: true, version: false, flags: { port: '1' } });
    assert.deepEqual(parseCommandLine(['--version']), { help: false, version: true, flags: {} });
    assert.deepEqual(parseCommandLine(['--host=::1']), { help: false, version: false, flags: { host: '::1' } });
  });

  it('repeats at most 100 characters of a refused value in its line, saying how long it was', () => {
    const long = 'x'.repeat(100_000);
    const cut = `"${'x'.repeat(100)}"… (100000 characters)`;
    const integer = 'must be an integer from 0 to 65535';
    assert.throws(() => loadConfig([], { PORT: long }), new ConfigError(`invalid PORT ${cut}: ${integer}`));
    assert.throws(() => loadConfig(['--port', long], {}), new ConfigError(`invalid --port ${cut}: ${integer}`));
    const hundred = 'x'.repeat(100);
    assert.throws(() => loadConfig([], { PORT: hundred }), new ConfigError(`invalid PORT "${hundred}": ${integer}`));
    assert.throws(
      () => loadConfig([], { TLS_CERT_FILE: `/${long}`, TLS_KEY_FILE: '/tls.key' }),
      new ConfigError(`invalid TLS_CERT_FILE "/${'x'.repeat(99)}"… (100001 characters): cannot be read (ENAMETOOLONG)`),
    );
    assert.throws(
      () => checkTimeZone(long),
      (error: Error) => error.message.startsWith(`invalid TZ ${cut}: `),
    );
  });

  it('rejects unknown flags and stray arguments', () => {
    assert.throws(() => loadConfig(['--nope'], {}), ConfigError);
    assert.throws(() => loadConfig(['serve'], {}), ConfigError);
    assert.throws(() => loadConfig(['--port'], {}), ConfigError);
  });
});

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

describe('the FAULT_ settings and ADMIN_TOKEN_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-config-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('default to no fault and no operator routes', () => {
    const config = loadConfig([], {});
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => /^(fault|admin)/.test(key))), {
      faultErrorRate: 0,
      faultErrorStatus: 503,
      faultDelayRate: 0,
      faultDelayMs: { min: 1000, max: 1000 },
      faultHeaders: false,
      adminTokenFile: null,
    });
  });

  it('reads every variable: shares as decimals, a delay as N or MIN-MAX, the token file checked', () => {
    const token = file('token', 'Zm9vYmFyYmF6cXV4cXV1eA==\n');
    const config = loadConfig([], {
      FAULT_ERROR_RATE: '0.05',
      FAULT_ERROR_STATUS: '500',
      FAULT_DELAY_RATE: '.5',
      FAULT_DELAY_MS: '100-2000',
      FAULT_HEADERS: 'TRUE',
      ADMIN_TOKEN_FILE: token,
    });
    assert.equal(config.faultErrorRate, 0.05);
    assert.equal(config.faultErrorStatus, 500);
    assert.equal(config.faultDelayRate, 0.5);
    assert.deepEqual(config.faultDelayMs, { min: 100, max: 2000 });
    assert.equal(config.faultHeaders, true);
    assert.equal(config.adminTokenFile, token);
    const fixed = loadConfig([], { FAULT_DELAY_RATE: '1', FAULT_DELAY_MS: '60000' });
    assert.deepEqual(fixed.faultDelayMs, { min: 60000, max: 60000 });
    assert.deepEqual(loadConfig([], { FAULT_DELAY_RATE: '1', FAULT_DELAY_MS: '0-0' }).faultDelayMs, { min: 0, max: 0 });
  });

  it('reads the token without one trailing newline, and refuses one a client could not send', () => {
    assert.equal(readAdminToken(file('plain', 'abcdefghijklmnop')), 'abcdefghijklmnop');
    assert.equal(readAdminToken(file('crlf', 'abc-._~+/0123456789==\r\n')), 'abc-._~+/0123456789==');
    const shape =
      'must hold a bearer token of at least 16 characters: letters, digits and -._~+/, then = padding (openssl rand -base64 32 makes one)';
    for (const text of [
      'short',
      'has a space in it somewhere',
      'abcdefghijklmnop\n\n',
      '=abcdefghijklmnop',
      'abcdefghijklmnopé',
    ]) {
      assert.throws(() => readAdminToken(file('bad', text)), new Error(shape), JSON.stringify(text));
    }
  });

  const bad: [Record<string, string>, string][] = [
    [{ FAULT_ERROR_RATE: '1.5' }, 'invalid FAULT_ERROR_RATE "1.5": must be a decimal number from 0 to 1, such as 0.25'],
    [{ FAULT_ERROR_RATE: '5%' }, 'invalid FAULT_ERROR_RATE "5%": must be a decimal number from 0 to 1, such as 0.25'],
    [
      { FAULT_DELAY_RATE: '-0.1' },
      'invalid FAULT_DELAY_RATE "-0.1": must be a decimal number from 0 to 1, such as 0.25',
    ],
    ...['399', '600', '200', '5xx'].map((status): [Record<string, string>, string] => [
      { FAULT_ERROR_RATE: '0.1', FAULT_ERROR_STATUS: status },
      `invalid FAULT_ERROR_STATUS ${JSON.stringify(status)}: must be an integer from 400 to 599`,
    ]),
    ...['60001', '2000-100', '-5', '1s', '100-', '1.5', '100-200-300'].map((ms): [Record<string, string>, string] => [
      { FAULT_DELAY_RATE: '0.1', FAULT_DELAY_MS: ms },
      `invalid FAULT_DELAY_MS ${JSON.stringify(ms)}: must be milliseconds such as 500, or a range such as 100-2000 (the smaller first), 0 to 60000`,
    ]),
    [
      { FAULT_ERROR_STATUS: '500' },
      'invalid FAULT_ERROR_STATUS: applies to the requests FAULT_ERROR_RATE chooses, and it is not set',
    ],
    [
      { FAULT_DELAY_MS: '100' },
      'invalid FAULT_DELAY_MS: applies to the requests FAULT_DELAY_RATE chooses, and it is not set',
    ],
    [{ FAULT_HEADERS: 'yes' }, 'invalid FAULT_HEADERS "yes": must be true, false, 1 or 0'],
    [
      { ADMIN_TOKEN_FILE: '/nonexistent/admin-token' },
      'invalid ADMIN_TOKEN_FILE "/nonexistent/admin-token": cannot be read (ENOENT)',
    ],
  ];
  for (const [env, message] of bad) {
    it(`rejects ${JSON.stringify(env)} naming it`, () => {
      assert.throws(() => loadConfig([], env), new ConfigError(message));
    });
  }

  it('rejects a token file that is empty, unreadable or holds no token, naming it', () => {
    const empty = file('empty', '\n');
    assert.throws(
      () => loadConfig([], { ADMIN_TOKEN_FILE: empty }),
      new ConfigError(`invalid ADMIN_TOKEN_FILE ${JSON.stringify(empty)}: is empty`),
    );
    assert.throws(
      () => loadConfig([], { ADMIN_TOKEN_FILE: dir }),
      new ConfigError(`invalid ADMIN_TOKEN_FILE ${JSON.stringify(dir)}: cannot be read (EISDIR)`),
    );
    const loose = file('loose', 'not a token\n');
    assert.throws(
      () => loadConfig([], { ADMIN_TOKEN_FILE: loose }),
      /^ConfigError: invalid ADMIN_TOKEN_FILE .*must hold a bearer token/,
    );
    if (process.getuid?.() !== 0) {
      const locked = file('locked', 'abcdefghijklmnop');
      chmodSync(locked, 0o000);
      assert.throws(() => loadConfig([], { ADMIN_TOKEN_FILE: locked }), /cannot be read \(EACCES\)/);
    }
  });
});

describe('loadConfig: HTTP/2 and TLS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  let files: TlsFiles;
  let chain: string;
  before(() => {
    files = makeTlsFiles();
    // The certificate followed by its CA: a chain, as TLS_CERT_FILE may hold one.
    chain = join(files.dir, 'chain.pem');
    writeFileSync(chain, readFileSync(files.serverCert, 'utf8') + readFileSync(files.ca, 'utf8'));
  });
  after(() => files?.remove());

  it('reads HTTP2 as a boolean in any case, and the certificate, its chain and its key', () => {
    for (const [raw, value] of [
      ['true', true],
      ['1', true],
      ['False', false],
      ['0', false],
    ] as const) {
      assert.equal(loadConfig([], { HTTP2: raw }).http2, value);
    }
    const config = loadConfig([], { HTTP2: 'true', TLS_CERT_FILE: chain, TLS_KEY_FILE: files.serverKey });
    assert.deepEqual([config.http2, config.tlsCertFile, config.tlsKeyFile], [true, chain, files.serverKey]);
    const pair = readTlsKeyPair(chain, files.serverKey);
    assert.equal(pair.cert, readFileSync(chain, 'utf8'));
    assert.equal(pair.key, readFileSync(files.serverKey, 'utf8'));
    assert.equal(pair.certificate.subject, 'CN=redis.test');
  });

  it('rejects each bad HTTP2 or TLS setting in one line naming it', () => {
    const missing = join(files.dir, 'missing.pem');
    const pem = 'is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)';
    const cases: [Record<string, string>, string][] = [
      [{ HTTP2: 'yes' }, 'invalid HTTP2 "yes": must be true, false, 1 or 0'],
      [{ TLS_CERT_FILE: files.serverCert }, 'invalid TLS_CERT_FILE: needs TLS_KEY_FILE, the key of the certificate'],
      [
        { TLS_KEY_FILE: files.serverKey },
        'invalid TLS_KEY_FILE: needs TLS_CERT_FILE, the certificate it is the key of',
      ],
      [
        { TLS_CERT_FILE: missing, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(missing)}: cannot be read (ENOENT)`,
      ],
      [
        { TLS_CERT_FILE: files.notPem, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(files.notPem)}: ${pem}`,
      ],
      [
        { TLS_CERT_FILE: files.serverKey, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(files.serverKey)}: ${pem}`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.serverCert },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.serverCert)}: is not a PEM private key (-----BEGIN PRIVATE KEY-----)`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.dir },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.dir)}: cannot be read (EISDIR)`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.clientKey },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.clientKey)}: is not the key of the certificate in TLS_CERT_FILE ${JSON.stringify(files.serverCert)}`,
      ],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig([], env), new ConfigError(message), JSON.stringify(env));
    }
    // Read again at a reload, the files are refused alike.
    assert.throws(
      () => readTlsKeyPair(files.notPem, files.serverKey),
      new ConfigError(`invalid TLS_CERT_FILE ${JSON.stringify(files.notPem)}: ${pem}`),
    );
    assert.throws(
      () => readTlsKeyPair(chain, files.clientKey),
      new ConfigError(
        `invalid TLS_KEY_FILE ${JSON.stringify(files.clientKey)}: is not the key of the certificate in TLS_CERT_FILE ${JSON.stringify(chain)}`,
      ),
    );
  });
});

describe('the OTEL_ settings', () => {
  it('default to no export: parent-based sampling of everything, protobuf, no headers or attributes', () => {
    const config = loadConfig([], {});
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => key.startsWith('otel'))), {
      otelSdkDisabled: false,
      otelTracesExporter: null,
      otelExporterOtlpEndpoint: null,
      otelExporterOtlpTracesEndpoint: null,
      otelExporterOtlpProtocol: 'http/protobuf',
      otelExporterOtlpHeaders: [],
      otelServiceName: null,
      otelResourceAttributes: [],
      otelTracesSampler: 'parentbased_always_on',
      otelTracesSamplerArg: 1,
    });
    assert.equal(otlpTracesUrl(config), null);
  });

  it('reads every variable, headers and attributes percent-decoded', () => {
    const config = loadConfig([], {
      OTEL_SDK_DISABLED: 'FALSE',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/v1/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%3Dcret, x-tenant = a%20b',
      OTEL_SERVICE_NAME: 'greeter',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.namespace=a%2Cb',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => key.startsWith('otel'))), {
      otelSdkDisabled: false,
      otelTracesExporter: 'otlp',
      otelExporterOtlpEndpoint: 'http://collector:4318/',
      otelExporterOtlpTracesEndpoint: 'https://traces.example/v1/traces',
      otelExporterOtlpProtocol: 'http/json',
      otelExporterOtlpHeaders: [
        ['api-key', 's=cret'],
        ['x-tenant', 'a b'],
      ],
      otelServiceName: 'greeter',
      otelResourceAttributes: [
        ['deployment.environment.name', 'prod'],
        ['service.namespace', 'a,b'],
      ],
      otelTracesSampler: 'parentbased_traceidratio',
      otelTracesSamplerArg: 0.25,
    });
  });

  it('export where an endpoint or OTEL_TRACES_EXPORTER=otlp says, unless disabled or none', () => {
    const url = (env: Record<string, string>) => otlpTracesUrl(loadConfig([], env));
    assert.equal(url({ OTEL_TRACES_EXPORTER: 'otlp' }), 'http://localhost:4318/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), 'http://c:4318/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/base/' }), 'http://c:4318/base/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:9/x' }), 'http://c:9/x');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), null);
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), null);
  });

  const bad: [Record<string, string>, string][] = [
    [{ OTEL_SDK_DISABLED: 'yes' }, 'invalid OTEL_SDK_DISABLED "yes": must be true, false, 1 or 0'],
    [
      { OTEL_TRACES_EXPORTER: 'console' },
      'invalid OTEL_TRACES_EXPORTER "console": must be one of otlp, none (console, zipkin and jaeger are not supported)',
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      'invalid OTEL_EXPORTER_OTLP_ENDPOINT "collector:4318": must be an http:// or https:// URL such as http://collector:4318',
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://c:4317' },
      'invalid OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "grpc://c:4317": must be an http:// or https:// URL such as http://collector:4318',
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'invalid OTEL_EXPORTER_OTLP_PROTOCOL "grpc": must be one of http/protobuf, http/json (grpc is not supported)',
    ],
    // A secret: its value is not repeated.
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'api-key' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded',
    ],
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'bad key=1' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded',
    ],
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'k=%0D%0Ax' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded, with no line breaks or NUL',
    ],
    [
      { OTEL_RESOURCE_ATTRIBUTES: 'a=%ZZ' },
      'invalid OTEL_RESOURCE_ATTRIBUTES "a=%ZZ": must be a comma-separated list of key=value such as deployment.environment.name=prod, the values percent-encoded',
    ],
    [
      { OTEL_TRACES_SAMPLER: 'xray' },
      'invalid OTEL_TRACES_SAMPLER "xray": must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (jaeger_remote and xray are not supported)',
    ],
    ...['1.5', '-0.1', 'half', '.', '1e-1'].map((value): [Record<string, string>, string] => [
      { OTEL_TRACES_SAMPLER_ARG: value },
      `invalid OTEL_TRACES_SAMPLER_ARG ${JSON.stringify(value)}: must be a decimal number from 0 to 1, such as 0.25`,
    ]),
  ];
  for (const [env, message] of bad) {
    it(`rejects ${JSON.stringify(env)} naming it`, () => {
      assert.throws(() => loadConfig([], env), new ConfigError(message));
    });
  }
});

describe('listenError', () => {
  /** The error Node's listen or its address lookup fails with. */
  function failure(code: string, syscall = 'listen'): NodeJS.ErrnoException {
    return Object.assign(new Error(`${syscall} ${code}: as Node says it`), { code, syscall });
  }
  const at = { port: 8080, host: '127.0.0.1' };

  for (const [error, config, argv, message] of [
    [failure('EADDRINUSE'), at, [], 'PORT 8080 is already in use on 127.0.0.1'],
    [failure('EADDRINUSE'), at, ['--port', '8080'], '--port 8080 is already in use on 127.0.0.1'],
    [
      failure('EACCES'),
      { ...at, port: 80 },
      [],
      'PORT 80 needs privileges this process does not have: most systems keep the ports below 1024 for root',
    ],
    [
      failure('ENOTFOUND', 'getaddrinfo'),
      { ...at, host: '999.1.1.1' },
      [],
      'HOST "999.1.1.1" cannot be resolved to an address (ENOTFOUND)',
    ],
    [
      failure('EAI_AGAIN', 'getaddrinfo'),
      { ...at, host: 'db.example' },
      ['--host', 'db.example'],
      '--host "db.example" cannot be resolved to an address (EAI_AGAIN)',
    ],
    [failure('EADDRNOTAVAIL'), { ...at, host: '192.0.2.1' }, [], 'HOST "192.0.2.1" is not an address of this machine'],
    [
      failure('EAFNOSUPPORT'),
      { ...at, host: '::1' },
      [],
      'HOST "::1" is of an address family this machine does not support',
    ],
    [failure('EINVAL'), at, [], 'cannot listen on HOST "127.0.0.1", PORT 8080: listen EINVAL: as Node says it'],
  ] as const) {
    it(`${error.code} with ${argv.join(' ') || 'the variables'}: ${message}`, () => {
      assert.deepEqual(listenError(error, config, argv), new ConfigError(message));
    });
  }
});

describe('checkTimeZone', () => {
  /** Checks `tz` as a process started with TZ=tz would: Node follows a change of process.env.TZ at once. */
  function check(tz: string): void {
    const saved = process.env.TZ;
    process.env.TZ = tz;
    try {
      checkTimeZone(tz);
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  }

  // Names Node knows, aliases among them, and POSIX forms whose offset it reads.
  for (const tz of [
    'UTC',
    'Etc/UTC',
    'GMT',
    'Asia/Kolkata',
    'Europe/Berlin',
    'America/New_York',
    'Etc/GMT+5',
    'US/Eastern',
    'EST5EDT',
    'GMT+5',
    ':Asia/Kolkata',
    'JST-9',
  ]) {
    it(`accepts TZ=${tz}`, () => {
      check(tz);
    });
  }

  it('accepts an empty or unset TZ: the system zone', () => {
    checkTimeZone('');
    checkTimeZone(undefined);
  });

  // Each of these, Node runs as UTC in silence: misspelt, in the wrong case, with a stray space,
  // an offset or a POSIX form it does not read, or UTC in a form that cannot be told from that.
  for (const tz of [
    'Invalid/Zone',
    'Europe/Berln',
    'asia/kolkata',
    'Asia/Kolkata ',
    '+05:30',
    'IST-5:30',
    '<+0530>-5:30',
    'CET-1CEST,M3.5.0,M10.5.0/3',
    'UTC0',
  ]) {
    it(`rejects TZ=${JSON.stringify(tz)}`, () => {
      assert.throws(
        () => check(tz),
        new ConfigError(
          `invalid TZ ${JSON.stringify(tz)}: must be a time zone that Node knows, such as UTC, Europe/Berlin or Asia/Kolkata (names are case-sensitive)`,
        ),
      );
    });
  }
});

describe('SETTINGS', () => {
  it("states each integer setting's range in its help, as its parser holds it", () => {
    for (const { env, help, parse } of Object.values(SETTINGS)) {
      let message = '';
      try {
        (parse as (raw: string) => unknown)('x');
      } catch (error) {
        message = (error as Error).message;
      }
      const range = /^must be an integer from (\d+) to (\d+)$/.exec(message);
      if (range !== null) assert.ok(help.includes(`${range[1]} to ${range[2]}`), `${env}: ${help}`);
    }
  });
});
