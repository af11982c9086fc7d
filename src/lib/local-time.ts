/**
 * The current date-time in the server's local time zone (honours TZ), as
 * `YYYY-MM-DDTHH:mm:ss.SSS`: always milliseconds, no offset. Java's `LocalDateTime.parse`
 * and JavaScript's `Date` both read it.
 *
 * Shifting the instant by the zone's offset and taking the UTC ISO form is one native
 * formatting call instead of seven getters and paddings.
 */
export function localDateTime(now: Date = new Date()): string {
  const shifted = new Date(now.getTime() - now.getTimezoneOffset() * 60_000);
  return shifted.toISOString().slice(0, 23);
}

/** The current UTC date-time as `YYYY-MM-DDTHH:mm:ss.SSSZ`. */
export function utcDateTime(now: Date = new Date()): string {
  return now.toISOString();
}
