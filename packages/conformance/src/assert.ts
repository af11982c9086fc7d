import { isDeepStrictEqual } from 'node:util';
import { CheckFailure, CheckSkip } from './context.js';
import type { Response } from './http.js';

/** Assertions that fail a check with what was expected and what came. */

export type JsonObject = { [key: string]: unknown };

/** A value in a line of output: JSON, cut short. */
export function show(value: unknown): string {
  if (value === undefined) return 'none';
  const text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}

export function fail(expected: string, actual: string): never {
  throw new CheckFailure(expected, actual);
}

export function skip(reason: string): never {
  throw new CheckSkip(reason);
}

const where = (res: Response) => `${res.request.method} ${res.request.path}`;

export function expectTrue(condition: boolean, expected: string, actual: () => string): asserts condition {
  if (!condition) fail(expected, actual());
}

export function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) fail(`${what} ${show(expected)}`, show(actual));
}

export function expectStatus(res: Response, status: number): void {
  if (res.status !== status) fail(`${where(res)}: status ${status}`, `${res.status} ${show(res.text.slice(0, 200))}`);
}

/** The header's value, one string (repeated fields joined as HTTP joins them). */
export function header(res: Response, name: string): string | undefined {
  const value = res.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The comma-separated members of a header, lower-cased. */
export function headerList(res: Response, name: string): string[] {
  return (header(res, name) ?? '')
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '');
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** The body as JSON, under the contract's content type. */
export function expectJson(res: Response): unknown {
  const type = header(res, 'content-type');
  if (type?.toLowerCase().replace(/\s*;\s*/g, '; ') !== JSON_TYPE) {
    fail(
      `${where(res)}: Content-Type ${JSON_TYPE}`,
      `${type === undefined ? 'none' : show(type)} (status ${res.status})`,
    );
  }
  try {
    return JSON.parse(res.text);
  } catch {
    return fail(`${where(res)}: a JSON body`, show(res.text));
  }
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Status, content type and a JSON object body. */
export function expectObject(res: Response, status: number): JsonObject {
  expectStatus(res, status);
  const body = expectJson(res);
  if (!isObject(body)) fail(`${where(res)}: a JSON object`, show(body));
  return body;
}

/** The object has exactly these keys, in any order. */
export function expectKeys(value: unknown, keys: readonly string[], what: string): JsonObject {
  if (!isObject(value)) fail(`${what}: an object with ${keys.join(', ')}`, show(value));
  const actual = Object.keys(value).sort();
  if (!isDeepStrictEqual(actual, [...keys].sort()))
    fail(`${what}: exactly the keys ${keys.join(', ')}`, actual.join(', '));
  return value;
}

const UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})$/;

/** The service's clock as its `Date` header tells it, else ours. */
function serverNow(res: Response): number {
  const date = Date.parse(header(res, 'date') ?? '');
  return Number.isNaN(date) ? Date.now() : date;
}

/**
 * A local date-time of the contract: `YYYY-MM-DDTHH:mm:ss.SSS`, a real date, and now in some
 * time zone: its distance from the `Date` header is a whole number of quarter hours (every
 * zone's offset is), at most 14 hours.
 */
export function expectLocalNow(value: unknown, res: Response, what: string): void {
  const match = typeof value === 'string' ? LOCAL.exec(value) : null;
  if (match === null) fail(`${what}: a local date-time YYYY-MM-DDTHH:mm:ss.SSS, no offset`, show(value));
  const [, y, mo, d, h, mi, s, ms] = match.map(Number) as number[];
  const asUtc = Date.UTC(y as number, (mo as number) - 1, d, h, mi, s, ms);
  const date = new Date(asUtc);
  if (date.getUTCDate() !== d || date.getUTCMonth() !== (mo as number) - 1 || (h as number) > 23) {
    fail(`${what}: a real date and time`, show(value));
  }
  const offset = asUtc - serverNow(res);
  const quarter = 15 * 60 * 1000;
  const drift = Math.abs(offset - Math.round(offset / quarter) * quarter);
  if (Math.abs(offset) > 14 * 3600 * 1000 + 5000 || drift > 5000) {
    fail(`${what}: the current local time (a whole number of quarter hours from the Date header)`, show(value));
  }
}

export function expectUtcNow(value: unknown, res: Response, what: string): void {
  if (typeof value !== 'string' || !UTC.test(value)) fail(`${what}: UTC YYYY-MM-DDTHH:mm:ss.SSSZ`, show(value));
  if (Math.abs(Date.parse(value) - serverNow(res)) > 5000) fail(`${what}: the current time`, show(value));
}

export interface ErrorBody {
  code: string;
  message: string;
  details: { field: string; message: string; value: unknown }[];
  timestamp: string;
  request_id: string;
}

/** An error answer: status, JSON, the envelope of spec 7.1 with its five fields, and the code. */
export function expectEnvelope(res: Response, status: number, code: string): ErrorBody {
  const body = expectObject(res, status);
  const error = expectKeys(
    expectKeys(body, ['error'], 'the error envelope').error,
    ['code', 'message', 'details', 'timestamp', 'request_id'],
    'error',
  );
  expectEqual(error.code, code, `${where(res)}: error.code`);
  if (typeof error.message !== 'string' || error.message === '') fail('error.message: a text', show(error.message));
  if (!Array.isArray(error.details)) fail('error.details: an array', show(error.details));
  for (const detail of error.details) {
    expectKeys(detail, ['field', 'message', 'value'], 'each of error.details');
    if (typeof detail.field !== 'string' || typeof detail.message !== 'string') {
      fail('error.details[].field and .message: texts', show(detail));
    }
  }
  expectUtcNow(error.timestamp, res, 'error.timestamp');
  const id = header(res, 'x-request-id');
  if (typeof error.request_id !== 'string' || error.request_id === '')
    fail('error.request_id: a text', show(error.request_id));
  if (id !== undefined && id !== error.request_id)
    fail(`error.request_id equal to X-Request-Id ${show(id)}`, show(error.request_id));
  return error as unknown as ErrorBody;
}

/** The envelope's code of an answer, or null when it has none. */
export function sentCode(res: Response): string | null {
  try {
    const code = (JSON.parse(res.text) as { error?: { code?: unknown } } | null)?.error?.code;
    return typeof code === 'string' ? code : null;
  } catch {
    return null;
  }
}

/** A 400 VALIDATION_ERROR whose details name `field` (with `value`, when given). */
export function expectValidation(res: Response, field: string, ...value: [] | [unknown]): ErrorBody {
  const error = expectEnvelope(res, 400, 'VALIDATION_ERROR');
  const named = error.details.filter((detail) => detail.field === field);
  if (named.length === 0) fail(`${where(res)}: a details entry for ${field}`, show(error.details));
  if (value.length > 0 && !named.some((detail) => isDeepStrictEqual(detail.value, value[0]))) {
    fail(`${where(res)}: details ${field} with value ${show(value[0])}`, show(named));
  }
  return error;
}
