import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { getHeapStatistics } from 'node:v8';
import {
  CONCERNS,
  type Config,
  ConfigError,
  DEFAULT_CONFIG,
  listenError,
  loadConfig,
  parseCommandLine,
  SETTINGS,
} from '../../src/config/index.js';
import { checkTimeZone } from '../../src/config/service.js';

/** The settings but tracing's, fault injection's, the operator's and the streams', each tested on its own. */
const withoutTracing = (config: Config) =>
  Object.fromEntries(Object.entries(config).filter(([key]) => !/^(otel|fault|admin|streams)/.test(key)));

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
      // A quarter of the heap limit of the process running the test.
      memoryBudgetBytes: Math.floor(getHeapStatistics().heap_size_limit / 4),
      compression: true,
      compressionMinBytes: 1024,
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
      grpc: true,
      tlsCertFile: null,
      tlsKeyFile: null,
      wsMaxConnections: 1000,
      wsMaxMessageBytes: 1048576,
      wsMaxBufferedBytes: 4194304,
      wsPingIntervalMs: 30000,
      wsPermessageDeflate: false,
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
      [
        '--import',
        'tsx',
        '-e',
        'import("./src/config/index.ts").then((m) => console.log(m.DEFAULT_CONFIG.cursorSecret))',
      ],
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
      MEMORY_BUDGET_BYTES: '16777216',
      COMPRESSION: 'FALSE',
      COMPRESSION_MIN_BYTES: '0',
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
      GRPC: 'false',
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
      memoryBudgetBytes: 16777216,
      compression: false,
      compressionMinBytes: 0,
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
      grpc: false,
      tlsCertFile: null,
      tlsKeyFile: null,
      wsMaxConnections: 1000,
      wsMaxMessageBytes: 2048,
      wsMaxBufferedBytes: 4194304,
      wsPingIntervalMs: 30000,
      wsPermessageDeflate: false,
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
    [[], { COMPRESSION: 'gzip' }, 'invalid COMPRESSION "gzip": must be true, false, 1 or 0'],
    [
      [],
      { COMPRESSION_MIN_BYTES: '1k' },
      'invalid COMPRESSION_MIN_BYTES "1k": must be an integer from 0 to 2147483647',
    ],
    [
      [],
      { COMPRESSION_MIN_BYTES: '-1' },
      'invalid COMPRESSION_MIN_BYTES "-1": must be an integer from 0 to 2147483647',
    ],
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
    assert.throws(() => loadConfig(['--nope'], {}), new ConfigError("Unknown option '--nope'"));
    assert.throws(() => loadConfig(['serve'], {}), ConfigError);
    assert.throws(() => loadConfig(['--port'], {}), ConfigError);
  });

  it('repeats at most 100 characters of an unknown flag or a stray argument in its line', () => {
    const long = 'x'.repeat(100_000);
    assert.throws(
      () => loadConfig([`--${long}`], {}),
      new ConfigError(`Unknown option "--${'x'.repeat(98)}"… (100002 characters)`),
    );
    assert.throws(
      () => loadConfig([`--${long}=1`], {}),
      new ConfigError(`Unknown option "--${'x'.repeat(98)}"… (100002 characters)`),
    );
    assert.throws(
      () => loadConfig([long], {}),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message.startsWith(`Unexpected argument "${'x'.repeat(100)}"… (100000 characters)`) &&
        error.message.length < 300,
    );
  });
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

  it('names each setting, variable and flag in one concern only', () => {
    const all = CONCERNS.flatMap(({ settings }) => Object.entries(settings));
    for (const [what, of] of [
      ['key', ([key]: (typeof all)[number]) => key],
      ['variable', ([, { env }]: (typeof all)[number]) => env],
      ['flag', ([, { flag }]: (typeof all)[number]) => flag],
    ] as const) {
      const names = all.map(of).filter((name) => name !== undefined);
      assert.deepEqual(
        names.filter((name, i) => names.indexOf(name) !== i),
        [],
        `a ${what} in two concerns`,
      );
    }
    assert.equal(Object.keys(SETTINGS).length, all.length);
  });
});
