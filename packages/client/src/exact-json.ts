/**
 * JSON with exact numbers, for the client: `JSON.parse` reads every number as a binary double,
 * which rounds integers beyond 2^53 and decimals with more than about 17 significant digits.
 * Here a number is a `JsonNumber` holding its text as written; no platform API beyond the language.
 */

import { writeJson } from '../../../src/lib/json-writer.js';

/** A JSON number exactly as written: `text` keeps every digit; `Number(n)` and `BigInt(n.text)` convert it. */
export class JsonNumber {
  readonly text: string;

  /** `text` must be a JSON number (`-12.5e3`, not `+1`, `.5` or `NaN`). */
  constructor(text: string) {
    if (!NUMBER.test(text)) throw new SyntaxError(`Not a JSON number: ${text}`);
    this.text = text;
  }

  valueOf(): number {
    return Number(this.text);
  }

  toString(): string {
    return this.text;
  }

  /** For `JSON.stringify`: the exact text where the platform can write raw JSON, else the nearest double. */
  toJSON(): unknown {
    return rawJson === undefined ? Number(this.text) : rawJson(this.text);
  }
}

/** A JSON value as `parseExactJson` reads it and `stringifyExactJson` writes it. */
export type ExactJson = null | boolean | string | JsonNumber | ExactJson[] | { [key: string]: ExactJson };

/** What `stringifyExactJson` writes: JSON values whose numbers may also be `number` and `bigint`. */
export type JsonInput =
  | null
  | boolean
  | string
  | number
  | bigint
  | JsonNumber
  | readonly JsonInput[]
  | { readonly [key: string]: JsonInput | undefined };

const rawJson = (JSON as { rawJSON?: (text: string) => unknown }).rawJSON;

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const NUMBER_AT = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const WHITESPACE_AT = /[ \t\n\r]*/y;
// A string's extent; JSON.parse then judges its escapes and refuses raw control characters.
const STRING_AT = /"(?:[^"\\]|\\.)*"/y;

/** An object or array being read, with the key its next value goes under. */
interface Open {
  readonly value: ExactJson[] | { [key: string]: ExactJson };
  key: string | null;
}

/** Sets a member as `JSON.parse` does: an own property, `__proto__` included, the last of repeated keys winning. */
function setMember(target: { [key: string]: ExactJson }, key: string, value: ExactJson): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Reads a JSON text as `JSON.parse` does, except that every number is a `JsonNumber`. Without
 * recursion, so nesting depth does not matter. Throws a SyntaxError on text that is not JSON.
 */
export function parseExactJson(text: string): ExactJson {
  const stack: Open[] = [];
  let position = 0;
  let result: ExactJson | undefined;

  const fail = (what: string): never => {
    throw new SyntaxError(`Invalid JSON at position ${position}: ${what}`);
  };
  const skipWhitespace = () => {
    WHITESPACE_AT.lastIndex = position;
    WHITESPACE_AT.test(text);
    position = WHITESPACE_AT.lastIndex;
  };
  const readString = (): string => {
    STRING_AT.lastIndex = position;
    const match = STRING_AT.exec(text);
    if (match === null) return fail('expected a string');
    position = STRING_AT.lastIndex;
    return JSON.parse(match[0]) as string;
  };
  /** Puts a finished value where it belongs: in the open container, or as the result. */
  const place = (value: ExactJson) => {
    const open = stack.at(-1);
    if (open === undefined) result = value;
    else if (Array.isArray(open.value)) open.value.push(value);
    else setMember(open.value, open.key as string, value);
  };

  for (;;) {
    skipWhitespace();
    // A value is expected here.
    const char = text[position];
    let value: ExactJson | undefined;
    if (char === '{') {
      position++;
      skipWhitespace();
      if (text[position] === '}') {
        position++;
        value = {};
      } else {
        const key = readString();
        skipWhitespace();
        if (text[position++] !== ':') fail('expected ":"');
        stack.push({ value: {}, key });
        continue;
      }
    } else if (char === '[') {
      position++;
      skipWhitespace();
      if (text[position] === ']') {
        position++;
        value = [];
      } else {
        stack.push({ value: [], key: null });
        continue;
      }
    } else if (char === '"') {
      value = readString();
    } else if (text.startsWith('true', position)) {
      position += 4;
      value = true;
    } else if (text.startsWith('false', position)) {
      position += 5;
      value = false;
    } else if (text.startsWith('null', position)) {
      position += 4;
      value = null;
    } else {
      NUMBER_AT.lastIndex = position;
      const match = NUMBER_AT.exec(text);
      if (match === null) fail('expected a value');
      position = NUMBER_AT.lastIndex;
      value = new JsonNumber((match as RegExpExecArray)[0]);
    }
    place(value);

    // After a value: a comma and the next member, or the end of one container or more.
    for (;;) {
      skipWhitespace();
      const open = stack.at(-1);
      if (open === undefined) {
        if (position !== text.length) fail('unexpected text after the value');
        return result as ExactJson;
      }
      const array = Array.isArray(open.value);
      const next = text[position++];
      if (next === ',') {
        if (!array) {
          skipWhitespace();
          open.key = readString();
          skipWhitespace();
          if (text[position++] !== ':') fail('expected ":"');
        }
        break;
      }
      if (next !== (array ? ']' : '}')) fail(array ? 'expected "," or "]"' : 'expected "," or "}"');
      stack.pop();
      place(open.value);
    }
  }
}

/** How the client writes the values `JSON.stringify` cannot write exactly. */
function exactLeaf(value: unknown): string | undefined {
  if (value instanceof JsonNumber) return value.text;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && !Number.isFinite(value)) throw new RangeError(`JSON has no number ${value}`);
  return undefined;
}

/**
 * JSON text of a value with exact numbers: a `JsonNumber` as its text, a `bigint` as its digits,
 * a `number` as `JSON.stringify` writes it (not finite: an error). Members that are `undefined`
 * are left out, as `JSON.stringify` does. Without recursion, so nesting depth does not matter.
 */
export function stringifyExactJson(value: JsonInput): string {
  return writeJson(value, exactLeaf);
}
