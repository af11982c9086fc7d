import { serverSentEvents } from './event-stream.js';
import { type ExactJson, type JsonInput, JsonNumber, parseExactJson, stringifyExactJson } from './exact-json.js';

/**
 * A typed client of the Greeting and Echo Service: one method per operation, typed as the service's
 * schemas say, exact decimals, typed errors and safe retries. An ES module that needs
 * nothing but the platform's `fetch`: Node 20 and later, and browsers.
 */

export { type ExactJson, type JsonInput, JsonNumber, parseExactJson, stringifyExactJson };

/** A decimal number as the service wrote it, every digit kept: `"80484237894052649.31"`. */
export type DecimalString = string;

/** The service's local date-time, to the millisecond, without an offset: `2026-01-02T03:04:05.678`. */
export type LocalDateTime = string;

export interface HelloMessage {
  message: string;
  timestamp: LocalDateTime;
}
export interface Greeting {
  greeting: string;
}
export interface SearchResult {
  keyword: string;
  page: number;
  results: string;
}
/** `keyword`, not blank; `page` 1-1000, default 1. */
export interface SearchQuery {
  keyword: string;
  page?: number;
}
export interface Profile {
  name: string | null;
  email: string | null;
  bio: string | null;
}
/** The fields a write sets: for `update` and `patch` those given, `null` included; for `replace` all, missing ones `null`. */
export type ProfileChanges = Partial<Profile>;
export interface Health {
  status: 'ok';
}
/** Which build answers; `commit` and `build_time` are `unknown` where the build did not know them. */
export interface BuildVersion {
  version: string;
  commit: string;
  build_time: string;
  runtime: string;
}
/** The data of one event of `GET /api/events`. */
export interface GreetingEvent {
  id: number;
  greeting: string;
  timestamp: LocalDateTime;
}
/** The stream's query: `count` (1-1000, default 10), `interval_ms` (0-60000, default 1000), `name`. */
export interface EventsQuery {
  count?: number;
  interval_ms?: number;
  name?: string;
}
export interface Readiness {
  status: 'ready';
  /** With `verbose`: each check and its state, `ok` or `excluded`. */
  checks?: { shutdown: string; operator: string; store: string };
}

/** A conversion: `amount`, `rate` and `result` as exact decimal strings, never through a binary double. */
export interface ExchangeResult {
  from: string;
  to: string;
  amount: DecimalString;
  rate: DecimalString;
  result: DecimalString;
}

/** A currency of the table, its `rate` an exact decimal string. */
export interface Currency {
  code: string;
  name: string;
  minor_units: number;
  rate: DecimalString;
}
export type CurrencyField = keyof Currency;

/** A body the echo takes: any JSON object; `bigint` and `JsonNumber` values are written with every digit. */
export type EchoBody = { readonly [key: string]: JsonInput | undefined };

/**
 * What the echo gives back of a value sent: the same, but every number a `JsonNumber` with every
 * digit, and without the members that were `undefined`, which JSON leaves out.
 */
export type Echoed<T> = T extends number | bigint | JsonNumber
  ? JsonNumber
  : T extends string | boolean | null
    ? T
    : T extends readonly unknown[]
      ? { -readonly [K in keyof T]: Echoed<T[K]> }
      : { -readonly [K in keyof T as [T[K]] extends [undefined] ? never : K]: Echoed<Exclude<T[K], undefined>> };

/** What the echo answers: the body as the service received it, typed by what was sent (`Echoed`). */
export interface EchoResult<T extends EchoBody = EchoBody> {
  received: Echoed<T>;
  echo: true;
  timestamp: LocalDateTime;
}

/** The query of `currencies.list`: the service's, with `sort` and `fields` as lists. */
export interface CurrencyQuery<F extends CurrencyField = CurrencyField> {
  /** Offset pagination: the page, from 1. */
  page?: number;
  /** Offset pagination: items per page. */
  per_page?: number;
  /** Cursor pagination: the `next_cursor` of the previous page. */
  cursor?: string;
  /** Cursor pagination: items per page. */
  limit?: number;
  /** Only currencies whose code or name contains this text, in any case. */
  q?: string;
  /** The same as `q`. */
  search?: string;
  /** Field names, each ascending, or descending with a leading `-`. */
  sort?: readonly (CurrencyField | `-${CurrencyField}`)[];
  fields?: readonly F[];
}

export interface OffsetPage<T> {
  data: T[];
  pagination: { page: number; per_page: number; total: number; total_pages: number };
}
export interface CursorPage<T> {
  data: T[];
  pagination: { next_cursor: string; has_more: boolean; limit: number };
}

/** The profile and the entity tag of its version, for conditional writes. */
export interface VersionedProfile {
  profile: Profile;
  etag: string;
}

/** `profile.get`: never `null` without `ifNoneMatch`, which alone can make the answer a 304. */
export interface ProfileRead {
  (callOptions?: CallOptions & { ifNoneMatch?: undefined }): Promise<VersionedProfile>;
  (callOptions: CallOptions & { ifNoneMatch?: string | undefined }): Promise<VersionedProfile | null>;
}

export interface RetryOptions {
  /** Tries in all, the first included; 1 turns retries off. Default 3. */
  attempts?: number;
  /** The longest wait before a retry; a `Retry-After` beyond it ends the retries. Default 10 000 ms. */
  maxDelayMs?: number;
  /** Also retry POST and PATCH, which may then be applied twice. Default false. */
  unsafeMethods?: boolean;
}

export interface ClientOptions {
  /** The service's address, with its context path if it has one: `http://localhost:8080`, `https://host/svc`. */
  baseUrl: string | URL;
  /** The `fetch` to send with; the platform's by default. */
  fetch?: typeof fetch;
  /**
   * On Node.js, an undici dispatcher that every request is sent through, given to `fetch` as its
   * `dispatcher`: `new Agent({ allowH2: true })` for HTTP/2 over TLS (h2 by ALPN), `new H2CClient(url)`
   * for HTTP/2 with prior knowledge (h2c). Browsers choose the protocol themselves.
   */
  dispatcher?: object;
  /** Headers sent with every request. */
  headers?: Readonly<Record<string, string>>;
  /** Retries of 429 and 503 answers; `false` for none. */
  retry?: RetryOptions | false;
  /**
   * Milliseconds each attempt may take to get its answer (see `CallOptions.timeout`); `false` for
   * no limit. Default 10 000, as ky's.
   */
  timeout?: number | false;
  /**
   * Request bodies of at least this many bytes are sent in gzip (`Content-Encoding: gzip`), made by
   * the platform's `CompressionStream`; the service decodes them under its body limit. Unset: every
   * body goes plain.
   */
  gzipBodiesFrom?: number;
}

/**
 * The codings answers are asked in. Browsers send their own Accept-Encoding and ignore this one;
 * Node's `fetch` decodes each of them, and sends only gzip and deflate when not told.
 */
const ACCEPT_ENCODING = 'br, gzip, deflate';

/** A body in gzip, by the platform's CompressionStream (Node.js 18 and later, and browsers). */
async function gzipped(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export interface CallOptions {
  /** Sent as `X-Request-Id`: 1 to 128 of `A-Z a-z 0-9 . _ : -`, or the service makes its own. */
  requestId?: string;
  /**
   * The caller's span, as W3C Trace Context writes it (`00-<trace id>-<span id>-<flags>`), with its
   * `tracestate`. Without it, the active OpenTelemetry context's, when the application uses
   * `@opentelemetry/api` and has registered a propagator.
   */
  traceparent?: string;
  tracestate?: string;
  signal?: AbortSignal;
  /**
   * Milliseconds each attempt (each retry has its own) may take to get its answer, its body
   * included, before it fails with a `TimeoutError` and is not tried again; `false` for no limit.
   * For `events`, only the wait for the stream's head counts. Default: the client's `timeout`.
   */
  timeout?: number | false;
  headers?: Readonly<Record<string, string>>;
}

export interface EventsOptions extends CallOptions {
  /** The id of the last event already received: the stream starts after it. Default 0, from the first. */
  lastEventId?: number;
  /**
   * A stream that ends before its last event (the service shut down) or breaks is opened again with
   * `Last-Event-ID`, after `delayMs` (default 1000), at most `attempts` times in a row without an
   * event between (default 3); `false` for never.
   */
  reconnect?: { attempts?: number; delayMs?: number } | false;
}

export interface WriteOptions extends CallOptions {
  /** The write is made only if this names the profile's current version (`etag` of a read), else 412. */
  ifMatch?: string;
  /** `*`: the write is made only if the profile has no version the client knows of; else 412. */
  ifNoneMatch?: string;
}

/** One item of an error envelope's `details`. */
export interface ErrorDetail {
  field: string;
  message: string;
  value: unknown;
}

/** The service answered with an error: its status, and the envelope's code, message, details and request id. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  /** The envelope's code (`VALIDATION_ERROR`, ...), or `UNEXPECTED_RESPONSE` for an answer that is no envelope. */
  readonly code: string;
  readonly details: ErrorDetail[];
  /** The request's id: the envelope's `request_id`, else the `X-Request-Id` header. */
  readonly requestId: string | null;
  readonly headers: Headers;

  constructor(
    status: number,
    code: string,
    message: string,
    details: ErrorDetail[],
    requestId: string | null,
    headers: Headers,
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.requestId = requestId;
    this.headers = headers;
  }
}

/** A 412: the profile's version is not the one the write named (`ifMatch`); read it again and retry. */
export class PreconditionFailedError extends ApiError {
  override name = 'PreconditionFailedError';
}

/**
 * No answer came: the service could not be reached, the connection failed, or the call was aborted.
 * The message names the request and the system's error (`connect ECONNREFUSED 127.0.0.1:8080`), the
 * platform's own error is the `cause`.
 */
export class NetworkError extends Error {
  override name = 'NetworkError';
  /** The system's error code found in the cause (`ECONNREFUSED`, `ENOTFOUND`, `UND_ERR_SOCKET`), or null. */
  readonly code: string | null;

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.code = failureOf(options.cause).code;
  }
}

/** An attempt took longer than the `timeout` of the call or the client, and was aborted. */
export class TimeoutError extends NetworkError {
  override name = 'TimeoutError';
}

/** An error with a system's code: Node's `code`, which DOMException's (a number) is not. */
function hasCode(error: Error): error is Error & { code: string } {
  return typeof (error as { code?: unknown }).code === 'string';
}

/**
 * What the platform says of a failure, where it says it: undici's `fetch failed` holds the system's
 * error as its `cause` (`connect ECONNREFUSED 127.0.0.1:8080`, code `ECONNREFUSED`), and, when every
 * address of a name was tried, an AggregateError of one per address. Browsers say no more than their
 * own message.
 */
function failureOf(error: unknown): { code: string | null; text: string } {
  let deepest = error;
  while (deepest instanceof Error && deepest.cause instanceof Error && !hasCode(deepest)) deepest = deepest.cause;
  if (!(deepest instanceof Error)) return { code: null, text: String(deepest) };
  const code = hasCode(deepest) ? deepest.code : null;
  const parts = deepest instanceof AggregateError && deepest.message === '' ? deepest.errors : [deepest];
  const text = parts.map((part) => (part instanceof Error ? part.message : String(part))).join('; ');
  if (code === null) return { code, text };
  return { code, text: text.includes(code) ? text : `${text} (${code})` };
}

/** The W3C Trace Context headers: all the client takes from an OpenTelemetry propagator (not baggage, say). */
const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

/** What the client uses of `@opentelemetry/api`. */
interface OpenTelemetryApi {
  context: { active(): unknown };
  propagation: { inject(context: unknown, carrier: Record<string, string>): void };
}

/**
 * `@opentelemetry/api`, an optional peer: imported once, by a name that bundlers leave alone, and
 * null where it is not installed (or cannot be imported, as in a browser without an import map).
 */
const OPENTELEMETRY_API = '@opentelemetry/api';
let openTelemetry: Promise<OpenTelemetryApi | null> | undefined;
function openTelemetryApi(): Promise<OpenTelemetryApi | null> {
  openTelemetry ??= import(/* @vite-ignore */ /* webpackIgnore: true */ OPENTELEMETRY_API).then(
    (api: OpenTelemetryApi) => api,
    () => null,
  );
  return openTelemetry;
}

/** Sets the trace headers of the call, or of the active OpenTelemetry context; a header already set wins. */
async function setTraceHeaders(headers: Headers, { traceparent, tracestate }: CallOptions): Promise<void> {
  if (traceparent !== undefined) {
    headers.set('traceparent', traceparent);
    if (tracestate !== undefined) headers.set('tracestate', tracestate);
    return;
  }
  if (headers.has('traceparent')) return;
  const api = await openTelemetryApi();
  if (api === null) return;
  const carrier: Record<string, string> = {};
  api.propagation.inject(api.context.active(), carrier);
  for (const name of TRACE_HEADERS) if (carrier[name] !== undefined) headers.set(name, carrier[name]);
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
const RETRIED_STATUSES = new Set([429, 503]);
const DEFAULT_RETRY: Required<RetryOptions> = { attempts: 3, maxDelayMs: 10_000, unsafeMethods: false };
const DEFAULT_RECONNECT = { attempts: 3, delayMs: 1000 };
/** Each attempt's time to get its answer, as ky's. */
const DEFAULT_TIMEOUT_MS = 10_000;
/** The service's own default `count`, sent with every stream so that the client knows its last event. */
const DEFAULT_EVENT_COUNT = 10;
/** The fields of a currency and of an exchange whose numbers are exact decimals. */
const CURRENCY_DECIMALS = ['rate'] as const;
const EXCHANGE_DECIMALS = ['amount', 'rate', 'result'] as const;

interface Call extends CallOptions {
  method: string;
  path: string;
  query?: Record<string, string | undefined>;
  body?: JsonInput;
  contentType?: string;
  ifMatch?: string;
  ifNoneMatch?: string;
}

/** Milliseconds to wait that `Retry-After` asks for (seconds or an HTTP date), or null when it says nothing usable. */
function retryAfterMs(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new NetworkError('The call was aborted.', { cause: signal.reason }));
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(new NetworkError('The call was aborted.', { cause: signal.reason }));
      },
      { once: true },
    );
  });
}

/** The longest wait `setTimeout` keeps (2^31 - 1 ms); a longer one would fire at once. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** A `timeout` as given, once it is known to be one: `false`, or milliseconds from 1 to 2^31 - 1. */
function checkedTimeout(value: number | false): number | false {
  if (value === false || (typeof value === 'number' && value >= 1 && value <= MAX_TIMEOUT_MS)) return value;
  throw new RangeError(
    `timeout: ${String(value)} is not false nor a number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`,
  );
}

/** One try of a request: the signal it is sent with, its clock, and the errors it makes. */
interface Attempt {
  /** The caller's signal and the clock's: either aborts the attempt. */
  readonly signal: AbortSignal | undefined;
  /** Stops the clock: what the attempt does after it is not timed. */
  stop(): void;
  /** The error a failure of the attempt makes: a TimeoutError once its time ran out, else a NetworkError. */
  failure(what: string, error: unknown): NetworkError;
}

/** Starts an attempt of the request `where` (`GET http://host/api/hello`) with `ms` to get its answer. */
function startAttempt(where: string, ms: number | false, caller: AbortSignal | undefined): Attempt {
  const failure = (what: string, error: unknown) =>
    new NetworkError(`${where} ${what}: ${failureOf(error).text}`, { cause: error });
  const limit = checkedTimeout(ms);
  if (limit === false) return { signal: caller, stop: () => {}, failure };
  const clock = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    clock.abort();
  }, limit);
  return {
    signal: caller === undefined ? clock.signal : bothSignals(caller, clock),
    stop: () => clearTimeout(timer),
    failure: (what, error) =>
      expired && !caller?.aborted
        ? new TimeoutError(`${where} timed out after ${limit} ms`, { cause: error })
        : failure(what, error),
  };
}

/** A signal that aborts with either: `AbortSignal.any` (Node.js 20.3, current browsers), else `caller` forwarded to `own`. */
function bothSignals(caller: AbortSignal, own: AbortController): AbortSignal {
  if (typeof AbortSignal.any === 'function') return AbortSignal.any([caller, own.signal]);
  if (caller.aborted) own.abort(caller.reason);
  else caller.addEventListener('abort', () => own.abort(caller.reason), { once: true });
  return own.signal;
}

/** The decimals of an answer's object as their exact text, every other number as a `number`. */
function withDecimals<T>(value: ExactJson, decimals: readonly string[]): T {
  const object = value as Record<string, ExactJson>;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(object)) {
    if (member instanceof JsonNumber) out[key] = decimals.includes(key) ? member.text : Number(member.text);
    else out[key] = member;
  }
  return out as T;
}

/**
 * A JSON number's text as a plain decimal, its exponent applied: `1e-7` is `0.0000001`, `1.50e1` is
 * `15.0`. Every digit written is kept; what is not a finite JSON number is left as it is.
 */
function plainDecimal(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$/.exec(text);
  if (match === null) return text;
  const [, sign, whole = '', fraction = '', exponent = ''] = match;
  const digits = whole + fraction;
  const point = whole.length + Number(exponent);
  // An exponent past any amount the service takes: its plain form would only be a longer refusal.
  if (Math.abs(point) > 1000) return text;
  const padded = point <= 0 ? '0'.repeat(1 - point) + digits : digits.padEnd(point, '0');
  const at = Math.max(point, 1);
  const integer = padded.slice(0, at).replace(/^0+(?=\d)/, '');
  const rest = padded.slice(at);
  return `${sign}${integer}${rest === '' ? '' : `.${rest}`}`;
}

/**
 * An argument of `method` as one path segment, percent-encoded. What would change the path's
 * meaning is refused before anything is sent: not a string; empty (`/api/hello/` is no greeting);
 * `.` and `..`, which WHATWG URLs, and so every `fetch`, drop or follow, percent-encoded or not;
 * a lone surrogate, which no UTF-8 holds.
 */
function pathSegment(method: string, value: string): string {
  if (typeof value !== 'string') throw new TypeError(`${method}: ${typeof value} given where a string goes`);
  const refused = (why: string, cause?: unknown) =>
    new RangeError(`${method}(${JSON.stringify(value)}): ${why}`, { cause });
  if (value === '') throw refused('an empty path segment would name another resource');
  if (value === '.' || value === '..') throw refused('a dot-segment cannot be sent as a URL path segment');
  try {
    return encodeURIComponent(value);
  } catch (error) {
    throw refused('a lone surrogate has no UTF-8 to send', error);
  }
}

function ensureSlash(url: URL): URL {
  return url.pathname.endsWith('/') ? url : new URL(`${url.pathname}/`, url);
}

/** The client. `createClient({ baseUrl: 'http://localhost:8080' })`. */
export function createClient(options: ClientOptions) {
  const base = ensureSlash(new URL(options.baseUrl));
  const send = options.fetch ?? globalThis.fetch;
  const retry = options.retry === false ? { ...DEFAULT_RETRY, attempts: 1 } : { ...DEFAULT_RETRY, ...options.retry };
  const gzipFrom = options.gzipBodiesFrom;
  const timeout = checkedTimeout(options.timeout ?? DEFAULT_TIMEOUT_MS);

  /**
   * Sends a request, retrying where that is safe: the answer (2xx or 304), its body not read yet
   * and its attempt's clock still running, or the error it makes.
   */
  async function open(request: Call): Promise<{ response: Response; attempt: Attempt }> {
    const url = new URL(request.path.replace(/^\//, ''), base);
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) url.searchParams.append(name, value);
    }
    const headers = new Headers({
      accept: 'application/json',
      'accept-encoding': ACCEPT_ENCODING,
      ...options.headers,
      ...request.headers,
    });
    if (request.requestId !== undefined) headers.set('x-request-id', request.requestId);
    if (request.ifMatch !== undefined) headers.set('if-match', request.ifMatch);
    if (request.ifNoneMatch !== undefined) headers.set('if-none-match', request.ifNoneMatch);
    await setTraceHeaders(headers, request);
    const json = request.body === undefined ? undefined : stringifyExactJson(request.body);
    if (json !== undefined) headers.set('content-type', request.contentType ?? 'application/json');
    const coded = json !== undefined && gzipFrom !== undefined && new TextEncoder().encode(json).length >= gzipFrom;
    if (coded) headers.set('content-encoding', 'gzip');
    const body = coded ? await gzipped(json) : json;
    const retried = IDEMPOTENT.has(request.method) || retry.unsafeMethods;

    const where = `${request.method} ${url.origin}${url.pathname}`;
    for (let tries = 1; ; tries++) {
      const attempt = startAttempt(where, request.timeout ?? timeout, request.signal);
      let response: Response;
      try {
        const init = { method: request.method, headers, body, signal: attempt.signal };
        // undici's own option, which the type of the platform's `fetch` names after its undici.
        response = await send(
          url,
          options.dispatcher === undefined ? init : ({ ...init, dispatcher: options.dispatcher } as RequestInit),
        );
      } catch (error) {
        attempt.stop();
        throw attempt.failure('got no answer', error);
      }
      if (response.ok || response.status === 304) return { response, attempt };
      const text = await textOf(attempt, response);
      const wait = retryAfterMs(response.headers.get('retry-after')) ?? 0;
      if (retried && RETRIED_STATUSES.has(response.status) && tries < retry.attempts && wait <= retry.maxDelayMs) {
        await sleep(wait, request.signal);
        continue;
      }
      throw errorOf(response, text);
    }
  }

  /** Sends a request as `open` does: the answer's status, headers and text. */
  async function call(request: Call): Promise<{ status: number; headers: Headers; text: string }> {
    const { response, attempt } = await open(request);
    const text = await textOf(attempt, response);
    return { status: response.status, headers: response.headers, text };
  }

  async function getProfile(
    callOptions: CallOptions & { ifNoneMatch?: string | undefined } = {},
  ): Promise<VersionedProfile | null> {
    const { status, headers, text } = await call({ method: 'GET', path: '/api/profile', ...callOptions });
    if (status === 304) {
      if (callOptions.ifNoneMatch !== undefined) return null;
      // Typed as never null without `ifNoneMatch`: a 304 asked for by a header of `headers` breaks that.
      const message = 'HTTP 304 to a read without `ifNoneMatch`: give the version there, not as a header.';
      throw new ApiError(304, 'UNEXPECTED_RESPONSE', message, [], headers.get('x-request-id'), headers);
    }
    return { profile: JSON.parse(text) as Profile, etag: headers.get('etag') ?? '' };
  }

  const profile = {
    /** The profile and its ETag. With `ifNoneMatch` naming the current tag: `null`, the caller's copy is current. */
    get: getProfile as ProfileRead,
    /** POST: the fields given change, `null` included; the others stay. */
    update: (changes: ProfileChanges, writeOptions: WriteOptions = {}) => write('POST', changes, writeOptions),
    /** PATCH as a JSON merge patch: the same as `update`. */
    patch: (changes: ProfileChanges, writeOptions: WriteOptions = {}) =>
      write('PATCH', changes, writeOptions, 'application/merge-patch+json'),
    /** PUT: the whole profile; fields not given become `null`. */
    replace: (fields: ProfileChanges, writeOptions: WriteOptions = {}) => write('PUT', fields, writeOptions),
  };

  async function write(
    method: string,
    changes: ProfileChanges,
    writeOptions: WriteOptions,
    contentType?: string,
  ): Promise<VersionedProfile> {
    const { headers, text } = await call({
      method,
      path: '/api/profile',
      body: changes as JsonInput,
      ...(contentType !== undefined && { contentType }),
      ...writeOptions,
    });
    return { profile: JSON.parse(text) as Profile, etag: headers.get('etag') ?? '' };
  }

  function currencyQuery(query: CurrencyQuery): Record<string, string | undefined> {
    const { sort, fields, ...rest } = query;
    const out: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(rest)) out[name] = value === undefined ? undefined : String(value);
    if (sort !== undefined) out.sort = sort.join(',');
    if (fields !== undefined) out.fields = fields.join(',');
    return out;
  }

  const currencies = {
    /** One page: offset pagination by default, cursor pagination with `limit` or `cursor`. */
    async list<F extends CurrencyField = CurrencyField>(
      query: CurrencyQuery<F> = {},
      callOptions: CallOptions = {},
    ): Promise<OffsetPage<Pick<Currency, F>> | CursorPage<Pick<Currency, F>>> {
      const { text } = await call({
        method: 'GET',
        path: '/api/currencies',
        query: currencyQuery(query),
        ...callOptions,
      });
      const page = parseExactJson(text) as { data: ExactJson[]; pagination: ExactJson };
      return {
        data: page.data.map((item) => withDecimals<Pick<Currency, F>>(item, CURRENCY_DECIMALS)),
        pagination: withDecimals(page.pagination, []),
      } as OffsetPage<Pick<Currency, F>> | CursorPage<Pick<Currency, F>>;
    },
    /** Every currency that matches, page after page, following the cursors to the end. */
    async *all<F extends CurrencyField = CurrencyField>(
      query: Omit<CurrencyQuery<F>, 'page' | 'per_page' | 'cursor'> = {},
      callOptions: CallOptions = {},
    ): AsyncGenerator<Pick<Currency, F>, void, undefined> {
      let cursor: string | undefined;
      do {
        const page = (await currencies.list<F>(
          { ...query, limit: query.limit ?? 100, ...(cursor !== undefined && { cursor }) },
          callOptions,
        )) as CursorPage<Pick<Currency, F>>;
        yield* page.data;
        cursor = page.pagination.has_more ? page.pagination.next_cursor : undefined;
      } while (cursor !== undefined);
    },
    /** One currency by its code, in any case. */
    async get<F extends CurrencyField = CurrencyField>(
      code: string,
      query: { fields?: readonly F[] } = {},
      callOptions: CallOptions = {},
    ): Promise<Pick<Currency, F>> {
      const { text } = await call({
        method: 'GET',
        path: `/api/currencies/${pathSegment('currencies.get', code)}`,
        query: { fields: query.fields?.join(',') },
        ...callOptions,
      });
      return withDecimals(parseExactJson(text), CURRENCY_DECIMALS);
    },
  };

  return {
    async hello(callOptions: CallOptions = {}): Promise<HelloMessage> {
      return JSON.parse((await call({ method: 'GET', path: '/api/hello', ...callOptions })).text);
    },
    async greeting(name: string, callOptions: CallOptions = {}): Promise<Greeting> {
      const path = `/api/hello/${pathSegment('greeting', name)}`;
      return JSON.parse((await call({ method: 'GET', path, ...callOptions })).text);
    },
    async search(query: SearchQuery, callOptions: CallOptions = {}): Promise<SearchResult> {
      const params = { keyword: query.keyword, page: query.page === undefined ? undefined : String(query.page) };
      return JSON.parse((await call({ method: 'GET', path: '/api/search', query: params, ...callOptions })).text);
    },
    /** Posts any JSON object; `bigint` and `JsonNumber` values are sent with every digit. */
    async echo<T extends EchoBody>(body: T, callOptions: CallOptions = {}): Promise<EchoResult<T>> {
      const { text } = await call({ method: 'POST', path: '/api/echo', body, ...callOptions });
      const answer = parseExactJson(text) as Record<string, ExactJson>;
      return { received: answer.received as Echoed<T>, echo: true, timestamp: answer.timestamp as string };
    },
    profile,
    /** Converts `amount` (a decimal string, or a number, bigint or JsonNumber written exactly) from one currency to another. */
    async exchange(
      query: { from: string; to: string; amount: DecimalString | number | bigint | JsonNumber },
      callOptions: CallOptions = {},
    ): Promise<ExchangeResult> {
      const amount =
        typeof query.amount === 'string' || typeof query.amount === 'bigint'
          ? String(query.amount)
          : plainDecimal(query.amount instanceof JsonNumber ? query.amount.text : String(query.amount));
      const { text } = await call({
        method: 'GET',
        path: '/api/exchange',
        query: { from: query.from, to: query.to, amount },
        ...callOptions,
      });
      return withDecimals(parseExactJson(text), EXCHANGE_DECIMALS);
    },
    currencies,
    /**
     * The stream of greetings, event by event as each comes; done after the last (`count`). A stream
     * that ends early (the service shut down) or breaks is opened again after the last event received,
     * with `Last-Event-ID`, as an EventSource does. Leaving the loop closes the stream.
     */
    async *events(query: EventsQuery = {}, eventsOptions: EventsOptions = {}): AsyncGenerator<GreetingEvent> {
      const { lastEventId = 0, reconnect, ...callOptions } = eventsOptions;
      const again = reconnect === false ? { attempts: 0, delayMs: 0 } : { ...DEFAULT_RECONNECT, ...reconnect };
      const count = query.count ?? DEFAULT_EVENT_COUNT;
      const params = {
        count: String(count),
        interval_ms: query.interval_ms === undefined ? undefined : String(query.interval_ms),
        name: query.name,
      };
      let last = lastEventId;
      let attemptsLeft = again.attempts;
      // The service is asked even for what it will refuse (count 0): the refusal is its to make.
      for (;;) {
        const { response, attempt } = await open({
          method: 'GET',
          path: '/api/events',
          query: params,
          ...callOptions,
          headers: { ...callOptions.headers, accept: 'text/event-stream', 'last-event-id': String(last) },
        });
        // The timeout is the wait for the stream's head: events may come as far apart as asked.
        attempt.stop();
        // Nothing left to send: the answer to Last-Event-ID = count, which stops an EventSource too.
        if (response.status === 204) return;
        let failure: unknown;
        try {
          for await (const event of serverSentEvents(response.body ?? new ReadableStream())) {
            if (event.event !== 'greeting') continue;
            const greeting = JSON.parse(event.data) as GreetingEvent;
            last = greeting.id;
            attemptsLeft = again.attempts;
            yield greeting;
          }
        } catch (error) {
          if (callOptions.signal?.aborted) throw new NetworkError('The call was aborted.', { cause: error });
          failure = error;
        }
        if (last >= count) return;
        if (attemptsLeft <= 0) {
          const why = failure === undefined ? 'ended' : `broke: ${(failure as Error).message}`;
          throw new NetworkError(`GET /api/events ${why} after event ${last} of ${count}.`, { cause: failure });
        }
        attemptsLeft -= 1;
        await sleep(again.delayMs, callOptions.signal);
      }
    },
    async health(callOptions: CallOptions = {}): Promise<Health> {
      return JSON.parse((await call({ method: 'GET', path: '/healthz', ...callOptions })).text);
    },
    /** Which build answers: its version, commit, build time and runtime (`GET /version`). */
    async version(callOptions: CallOptions = {}): Promise<BuildVersion> {
      return JSON.parse((await call({ method: 'GET', path: '/version', ...callOptions })).text);
    },
    /**
     * `{ status: 'ready' }`, with each check's state in `checks` when `verbose`; a service that is
     * not ready answers 503, thrown as an ApiError (its `details` list the checks when `verbose`).
     * `excludeStore` leaves the store every instance shares out, as the Kubernetes probes do.
     */
    async readiness(
      query: { excludeStore?: boolean; verbose?: boolean } = {},
      callOptions: CallOptions = {},
    ): Promise<Readiness> {
      const params = { exclude: query.excludeStore ? 'store' : undefined, verbose: query.verbose ? 'true' : undefined };
      return JSON.parse((await call({ method: 'GET', path: '/readyz', query: params, ...callOptions })).text);
    },
  };
}

export type Client = ReturnType<typeof createClient>;

/** An answer's text, within its attempt's time; a body that breaks off is a NetworkError. */
async function textOf(attempt: Attempt, response: Response): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    throw attempt.failure('answer cut short', error);
  } finally {
    attempt.stop();
  }
}

/** The error a non-2xx answer makes: the envelope's fields when it is one, `UNEXPECTED_RESPONSE` otherwise. */
function errorOf(response: Response, text: string): ApiError {
  const headerId = response.headers.get('x-request-id');
  let envelope: { code?: unknown; message?: unknown; details?: unknown; request_id?: unknown } | undefined;
  try {
    envelope = (JSON.parse(text) as { error?: typeof envelope }).error;
  } catch {
    envelope = undefined;
  }
  const Kind = response.status === 412 ? PreconditionFailedError : ApiError;
  if (envelope === undefined || typeof envelope.code !== 'string' || typeof envelope.message !== 'string') {
    const type = response.headers.get('content-type') ?? 'no content type';
    const message = `HTTP ${response.status} with ${type}, not the service's error envelope.`;
    return new Kind(response.status, 'UNEXPECTED_RESPONSE', message, [], headerId, response.headers);
  }
  const details = Array.isArray(envelope.details) ? (envelope.details as ErrorDetail[]) : [];
  const id = typeof envelope.request_id === 'string' ? envelope.request_id : headerId;
  return new Kind(response.status, envelope.code, envelope.message, details, id, response.headers);
}
