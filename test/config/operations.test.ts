import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { readAdminToken } from '../../src/config/files.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';

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
      faultsExpected: false,
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
      FAULTS_EXPECTED: 'true',
      ADMIN_TOKEN_FILE: token,
    });
    assert.equal(config.faultErrorRate, 0.05);
    assert.equal(config.faultErrorStatus, 500);
    assert.equal(config.faultDelayRate, 0.5);
    assert.deepEqual(config.faultDelayMs, { min: 100, max: 2000 });
    assert.equal(config.faultHeaders, true);
    assert.equal(config.faultsExpected, true);
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
