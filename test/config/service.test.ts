import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/index.js';
import { checkTimeZone } from '../../src/config/service.js';

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
