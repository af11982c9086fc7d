/**
 * The current date-time in the server's local time zone (honours TZ), as
 * `YYYY-MM-DDTHH:mm:ss.SSS`: always milliseconds, no offset. Java's `LocalDateTime.parse`
 * and JavaScript's `Date` both read it.
 *
 * Shifting the instant by the zone's offset and taking the UTC ISO form is one native
 * formatting call instead of seven getters and paddings.
 */
export function localDateTime(now?: Date): string {
  return now === undefined ? currentLocalDateTime() : format(now);
}

function format(instant: Date): string {
  const shifted = new Date(instant.getTime() - instant.getTimezoneOffset() * 60_000);
  return shifted.toISOString().slice(0, 23);
}

/** The current second, formatted up to its milliseconds (`YYYY-MM-DDTHH:mm:ss.`), and in which zone. */
let second = { epochSecond: Number.NaN, zone: undefined as string | undefined, text: '' };
/** The current millisecond, and its text. */
let lastMs = Number.NaN;
let lastText = '';

/**
 * The current time, formatted once a millisecond: under load several answers share each one. The
 * zone's offset, the costly part, is worked out once a second, since zones change offset only at
 * whole minutes. A change of TZ (as the tests make) is seen from the next millisecond on: reading
 * the environment costs more than the rest of this function.
 */
function currentLocalDateTime(): string {
  const now = Date.now();
  if (now === lastMs) return lastText;
  const epochSecond = Math.floor(now / 1000);
  const zone = process.env.TZ;
  if (epochSecond !== second.epochSecond || zone !== second.zone) {
    second = { epochSecond, zone, text: format(new Date(epochSecond * 1000)).slice(0, 20) };
  }
  const millis = now - epochSecond * 1000;
  lastMs = now;
  lastText = second.text + (millis < 10 ? '00' : millis < 100 ? '0' : '') + millis;
  return lastText;
}

/** The current UTC date-time as `YYYY-MM-DDTHH:mm:ss.SSSZ`. */
export function utcDateTime(now: Date = new Date()): string {
  return now.toISOString();
}
