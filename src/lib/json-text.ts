import { Decimal } from './decimal.js';
import { writeJson } from './json-writer.js';

/** What JSON.stringify escapes in a string: the quote, the backslash, control characters and surrogates (lone ones). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON escapes.
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * A string as JSON text, exactly as JSON.stringify writes it. Text with nothing to escape, as most
 * paths and methods are, costs one test instead of JSON.stringify's several hundred nanoseconds.
 */
export function jsonString(text: string): string {
  return ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Whether the character at `at` follows an odd number of backslashes, which escape it. */
function isEscaped(text: string, at: number): boolean {
  let before = at - 1;
  while (text.charCodeAt(before) === BACKSLASH) before--;
  return (at - 1 - before) % 2 === 1;
}

function isJsonWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/**
 * Removes the insignificant whitespace from a JSON text that is already known to be valid,
 * leaving every token exactly as written: numbers keep their digits, strings their escapes,
 * objects their key order and repeated keys. Iterative, so nesting depth does not matter.
 */
export function compactJson(text: string): string {
  let out = '';
  let start = 0; // beginning of the run of text not yet copied to `out`
  let i = 0;
  const length = text.length;
  while (i < length) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      // Skip the whole string, to the first quote no backslash escapes: found by indexOf, at the
      // runtime's speed rather than a character at a time.
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && isEscaped(text, end)) end = text.indexOf('"', end + 1);
      i = end === -1 ? length : end + 1; // -1: no end, which valid JSON never has
    } else if (isJsonWhitespace(code)) {
      out += text.slice(start, i);
      while (i < length && isJsonWhitespace(text.charCodeAt(i))) i++;
      start = i;
    } else {
      i++;
    }
  }
  return start === 0 ? text : out + text.slice(start);
}

/**
 * JSON text of plain data (objects, arrays, strings, numbers, booleans, null) as
 * JSON.stringify writes it, except that a Decimal is written as a JSON number with its exact
 * value in plain notation (`92`, `80484237894052649`, `0.0000000001`): never through a double,
 * never in exponent form. For response bodies whose numbers must keep every digit.
 */
export function exactJson(value: unknown): string {
  if (Decimal.isDecimal(value)) {
    if (!value.isFinite()) throw new RangeError(`JSON has no number ${value.toString()}`);
    return value.toFixed();
  }
  if (Array.isArray(value)) return `[${value.map((item) => exactJson(item ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value)
      .filter(([, member]) => member !== undefined)
      .map(([key, member]) => `${JSON.stringify(key)}:${exactJson(member)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * JSON.stringify of plain data (what JSON.parse makes) at any depth. V8's JSON.stringify recurses,
 * and overflows the stack on values nested some thousands deep, which a body within the limit can
 * hold and an error detail repeats as its `value`; those are written here without recursion.
 */
export function deepJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
  }
  return writeJson(value);
}
