import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { localDateTime, utcDateTime } from '../../src/lib/local-time.js';

describe('localDateTime', () => {
  const original = process.env.TZ;
  afterEach(() => {
    process.env.TZ = original;
  });

  const instant = new Date('2026-07-01T23:45:06.007Z');
  for (const [zone, expected] of [
    ['UTC', '2026-07-01T23:45:06.007'],
    ['Asia/Kolkata', '2026-07-02T05:15:06.007'],
    ['America/New_York', '2026-07-01T19:45:06.007'], // summer time, UTC-4
    ['Pacific/Chatham', '2026-07-02T12:30:06.007'], // UTC+12:45
    ['America/St_Johns', '2026-07-01T21:15:06.007'], // UTC-2:30 in summer
  ]) {
    it(`formats in ${zone} as TZ says`, () => {
      process.env.TZ = zone;
      assert.equal(localDateTime(instant), expected);
    });
  }

  it('follows daylight saving time', () => {
    process.env.TZ = 'America/New_York';
    assert.equal(localDateTime(new Date('2026-01-15T12:00:00.000Z')), '2026-01-15T07:00:00.000');
  });

  it('always writes milliseconds and no offset, and Date reads it back as the same local instant', () => {
    process.env.TZ = 'Asia/Kolkata';
    const whole = new Date('2026-01-01T00:00:00.000Z');
    const text = localDateTime(whole);
    assert.equal(text, '2026-01-01T05:30:00.000');
    assert.equal(new Date(text).getTime(), whole.getTime());
  });

  it('formats the current time by default', () => {
    assert.ok(Math.abs(new Date(localDateTime()).getTime() - Date.now()) < 1000);
  });

  it('gives every call within a millisecond the same text, and a later millisecond a later one', () => {
    // Read against Date.now() on both sides, so a slow or busy machine cannot make it pass or fail by chance.
    let sameMillisecondSeen = false;
    for (let tries = 0; tries < 10_000 && !sameMillisecondSeen; tries++) {
      const before = Date.now();
      const first = localDateTime();
      const second = localDateTime();
      if (Date.now() !== before) continue;
      assert.equal(second, first);
      sameMillisecondSeen = true;
    }
    assert.ok(sameMillisecondSeen, 'two calls within one millisecond');
    const earlier = localDateTime();
    const earlierMs = Date.now();
    while (Date.now() === earlierMs) {}
    assert.ok(localDateTime() > earlier);
  });

  it('formats the current time in the zone TZ names from the next millisecond, even within the same second', () => {
    // The current second is formatted once and reused; a new zone must not get the old one's text.
    for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham', 'UTC']) {
      localDateTime();
      process.env.TZ = zone;
      const changed = Date.now();
      while (Date.now() === changed) {} // the text of the millisecond the zone changed in is kept
      const before = Date.now();
      const text = localDateTime();
      const after = Date.now();
      assert.match(text, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/);
      const shown = Date.parse(`${text}Z`); // the local wall-clock time, read as if it were UTC
      const offset = (instant: number) => -new Date(instant).getTimezoneOffset() * 60_000;
      assert.ok(shown >= before + offset(before) && shown <= after + offset(after), `${zone}: ${text}`);
    }
  });
});

describe('utcDateTime', () => {
  it('is ISO 8601 UTC with milliseconds', () => {
    assert.equal(utcDateTime(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6))), '2026-01-02T03:04:05.006Z');
  });
});
