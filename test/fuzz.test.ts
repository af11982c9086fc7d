import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { METHODS, type OutgoingHttpHeaders } from 'node:http';
import { type ClientHttp2Session, type ClientHttp2Stream, constants as http2Constants } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as connectTls } from 'node:tls';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../src/app.js';
import { type Config, DEFAULT_CONFIG } from '../src/config/index.js';
import { entityTag } from '../src/domain/profile.js';
import { HTTP2_LIMITS } from '../src/http/http2-sessions.js';
import { MemoryProfileStore } from '../src/stores/memory-profile.js';
import type { ProfileStore } from '../src/stores/profile.js';
import {
  abridged,
  adminRequest,
  CURRENT_ETAG,
  describeRequest,
  FUZZ_BODY_LIMIT,
  type FuzzRequest,
  fuzzRequest,
  fuzzRequestWithFaults,
  POLLUTED_PROPERTY,
  rawHeaders,
} from './fuzz/arbitraries.js';
import { CONNECTION_SPECIFIC, h2, readStream } from './h2-client.js';
import { decodeBody, LogCapture, parseRawResponse, type TestResponse, testConfig } from './helpers.js';
import { conformanceOf } from './openapi-conformance.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from './redis-server.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON } from './tls-files.js';
import { OtlpReceiver } from './tracing/otlp-receiver.js';

/**
 * Property-based fuzzing of every route: random methods, paths, query strings,
 * headers and bodies, most through `app.inject`, a quarter as raw bytes over a socket, and a
 * few hundred with rate limiting on. Every response is checked against the same invariants:
 * no 5xx, an X-Request-Id, the error envelope with the contract's status and code, nothing
 * internal leaked, no prototype polluted, and the profile changed only by a successful write.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 424242);
/** Requests of the main run; a quarter of them over real sockets. */
const DEFAULT_RUNS = 10_000;
const RUNS = Number(process.env.FUZZ_RUNS ?? DEFAULT_RUNS);
const HTTP_RUNS = Math.ceil(RUNS / 4);
const INJECT_RUNS = RUNS - HTTP_RUNS;
const RATE_LIMITED_RUNS = Math.ceil(RUNS / 40);
/** Requests under each optional feature, a quarter of them over real sockets: few, for the time they add to CI. */
const FEATURE_RUNS = Number(process.env.FUZZ_FEATURE_RUNS ?? Math.ceil(RUNS / 40));
/** Low enough that the rate-limited run goes over it many times. */
const RATE_LIMIT_MAX = 20;

console.log(
  `fuzz: seed ${SEED}, ${RUNS + RATE_LIMITED_RUNS} requests, and ${FEATURE_RUNS} under each optional feature; replay with FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS} FUZZ_FEATURE_RUNS=${FEATURE_RUNS}`,
);

/** Every route of the service (HEAD is each GET route's). */
const ROUTES = [
  '/api/hello',
  '/api/hello/:name',
  '/api/search',
  '/api/echo',
  '/api/profile',
  '/api/exchange',
  '/api/currencies',
  '/api/currencies/:code',
  '/healthz',
  '/readyz',
  '/openapi.json',
  '/metrics',
  '/docs',
  '/docs/json',
  '/docs/yaml',
  '/docs/static/*',
];

/** The statuses a full run must have met besides 200: proof that the generators reach each rule. */
const REACHED_STATUSES = [304, 400, 404, 405, 406, 412, 413, 415, 422, 431];

/** The codes the contract (and docs/errors.md's table for statuses it leaves open) gives each error status. */
const ERROR_CODES: Record<number, readonly string[]> = {
  400: ['VALIDATION_ERROR', 'MALFORMED_JSON', 'BAD_REQUEST'],
  // The readiness switch's, with ADMIN_TOKEN_FILE.
  401: ['UNAUTHORIZED'],
  404: ['NOT_FOUND'],
  405: ['METHOD_NOT_ALLOWED'],
  406: ['NOT_ACCEPTABLE'],
  408: ['REQUEST_TIMEOUT'],
  412: ['PRECONDITION_FAILED'],
  413: ['PAYLOAD_TOO_LARGE'],
  415: ['UNSUPPORTED_MEDIA_TYPE'],
  // The documentation's static files honour Range (RFC 9110, 14.2). The contract leaves the status
  // open, and docs/errors.md names the code of such a status by its reason phrase.
  416: ['RANGE_NOT_SATISFIABLE'],
  422: ['UNSUPPORTED_CURRENCY'],
  429: ['RATE_LIMIT_EXCEEDED'],
  431: ['REQUEST_HEADER_FIELDS_TOO_LARGE'],
};

/**
 * Statuses that may be answered to bytes that are not an HTTP request at all: with no request parsed,
 * there is no client id to reuse, and the answer gets a new one.
 */
const NOT_HTTP = new Set([400, 408, 431]);
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const UTC_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const INJECTABLE_METHODS = new Set([...METHODS, ...METHODS.map((method) => method.toLowerCase())]);

/** Fields HTTP/2 forbids in a request, and Host, which `:authority` replaces: left out of the requests sent over it. */
const NOT_HTTP2_FIELDS = new Set([...CONNECTION_SPECIFIC, 'host']);
/**
 * A `:path` HTTP/2 does not take (RFC 9113, 8.3.1): none, not absolute but `*` alone for OPTIONS, or
 * with a space, a control character or DEL in it.
 */
function malformedOverHttp2({ method, path, query }: FuzzRequest): boolean {
  const target = path + query;
  const invalid = [...target].some((character) => character <= ' ' || character === '\x7f');
  return (!path.startsWith('/') && !(target === '*' && method === 'OPTIONS')) || invalid;
}

/** Node's HTTP/2 client writes each character of a field as one byte: text beyond Latin-1 would go cut. */
function beyondLatin1({ method, path, query, headers }: FuzzRequest): boolean {
  return /[\u0100-\uffff]/.test([method, path, query, ...headers.flat()].join(''));
}

/** A header list over the service's HTTP/2 bounds: its size as HPACK counts it (32 bytes a field besides its name and value), or its fields. */
function overHttp2Limits(fields: OutgoingHttpHeaders, origin: URL): boolean {
  const pairs = [
    ...Object.entries(fields).flatMap(([name, value]) => [value].flat().map((one) => [name, String(one)])),
    // What Node's client adds.
    [':scheme', origin.protocol.slice(0, -1)],
    [':authority', origin.host],
  ];
  const size = pairs.reduce((sum, [name, value]) => sum + Buffer.byteLength(`${name}${value}`) + 32, 0);
  return size > HTTP2_LIMITS.maxHeaderListSize || pairs.length > HTTP2_LIMITS.maxHeaderListPairs;
}

/** The profile's tag, plain (`"3"`) or of a content coding (`"3-gzip"`): the version it names is the same. */
const PROFILE_TAG = /^"(\d+)(?:-(?:zstd|br|gzip|deflate))?"$/;
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** What would betray the server's insides: stack frames, source locations, its own paths. */
const LEAKS = [
  /\bat [^\s()]*\s?\(?(?:file:\/\/|node:|\/)[^\s()]*:\d+:\d+/g,
  /file:\/\//g,
  /node_modules/g,
  new RegExp(process.cwd().replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g'),
  /\/work\//g,
  /\.[cm]?[jt]sx?:\d+/g,
  /\bsrc\//g,
];

// Built-ins a polluting parser or merge would write to: their own properties, snapshotted.
const GUARDED: Record<string, object> = {
  Object,
  'Object.prototype': Object.prototype,
  'Array.prototype': Array.prototype,
  'Function.prototype': Function.prototype,
  'String.prototype': String.prototype,
};
function snapshotBuiltIns(): Record<string, [PropertyKey, PropertyDescriptor | undefined][]> {
  return Object.fromEntries(
    Object.entries(GUARDED).map(([name, target]) => [
      name,
      Reflect.ownKeys(target).map((key) => [key, Reflect.getOwnPropertyDescriptor(target, key)]),
    ]),
  );
}

function header(request: FuzzRequest, name: string): string[] {
  return request.headers.filter(([key]) => key.toLowerCase() === name).map(([, value]) => value);
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return text;
  }
}

/** Everything the client sent, raw and percent-decoded: what a response may legitimately repeat. */
function sentText(request: FuzzRequest): string {
  const target = request.path + request.query;
  const parts = [target, decoded(target), ...request.query.split(/[?&;=]/).map(decoded)];
  parts.push(...request.headers.flat(), request.body?.toString('utf8') ?? '');
  return parts.join('\n');
}

/** The response's strings, keys included, gathered without recursion (bodies may nest deeply). */
function stringsOf(value: unknown): string[] {
  const strings: string[] = [];
  const pending = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') strings.push(item);
    else if (item !== null && typeof item === 'object') {
      for (const [key, member] of Object.entries(item)) pending.push(key, member);
    }
  }
  return strings;
}

function parsed(res: TestResponse, context: string): unknown {
  try {
    return res.json();
  } catch {
    assert.fail(`the body is not JSON: ${context}`);
  }
}

/** The text of a response the leak check reads: none of the echo's body, which is the client's own. */
function inspectedTexts(res: TestResponse): string[] {
  const texts = Object.entries(res.headers).map(([name, value]) => `${name}: ${String(value)}`);
  const type = String(res.headers['content-type'] ?? '');
  const ok = res.status >= 200 && res.status < 300;
  if (ok && res.text.startsWith('{"received":')) return texts;
  // The documentation page's own scripts and style sheets are Swagger UI's, not the server's state.
  if (ok && !type.startsWith('application/json') && !type.startsWith('text/plain')) return texts;
  if (type.startsWith('application/json') && res.text !== '') {
    try {
      return [...texts, ...stringsOf(res.json())];
    } catch {
      // Not JSON after all: read as text below, and the envelope check reports it.
    }
  }
  return [...texts, res.text];
}

function assertNoLeak(request: FuzzRequest, res: TestResponse, context: string): void {
  const sent = sentText(request);
  for (const text of inspectedTexts(res)) {
    for (const pattern of LEAKS) {
      for (const [match] of text.matchAll(pattern)) {
        // A path or value the client sent may come back in a message; only what it did not send leaks.
        assert.ok(sent.includes(match), `leaked ${JSON.stringify(match)} in ${text.slice(0, 300)}: ${context}`);
      }
    }
  }
}

/**
 * An answer the service was told to give instead of serving the request (`X-Fault-Injected: abort`):
 * the status asked for, which may be any of 200 to 599.
 */
function injectedAbort(res: TestResponse): boolean {
  return String(res.headers['x-fault-injected'] ?? '')
    .split(', ')
    .includes('abort');
}

function assertEnvelopeShape(request: FuzzRequest, res: TestResponse, rateLimited: boolean, context: string): void {
  const injected = injectedAbort(res);
  // An injected error's code is its status's, which the contract's table need not name (418 IM_A_TEAPOT).
  const codes = injected ? undefined : ERROR_CODES[res.status];
  assert.ok(injected || codes !== undefined, `status ${res.status} is not in the contract's table: ${context}`);
  if (res.status === 429) {
    assert.ok(rateLimited || injected, `429 with rate limiting off: ${context}`);
    assert.match(String(res.headers['retry-after']), /^[1-9]\d*$/, `429 without Retry-After: ${context}`);
  }
  if (res.status === 405) {
    assert.match(String(res.headers.allow), /^[A-Z]+(?:, [A-Z]+)*$/, `405 without Allow: ${context}`);
  }
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', context);
  // A HEAD answer has the GET answer's headers and no body.
  if (request.method.toUpperCase() === 'HEAD' && res.text === '') return;
  const body = parsed(res, context) as { error?: Record<string, unknown> };
  assert.deepEqual(Object.keys(body), ['error'], context);
  const error = body.error as Record<string, unknown>;
  assert.deepEqual(Object.keys(error), ['code', 'message', 'details', 'timestamp', 'request_id'], context);
  assert.match(String(error.code), /^[A-Z][A-Z_]*[A-Z]$/, context);
  assert.ok(
    codes?.includes(error.code as string) ?? injected,
    `code ${String(error.code)} for ${res.status}: ${context}`,
  );
  assert.ok(typeof error.message === 'string' && error.message !== '', context);
  assert.ok(Array.isArray(error.details), context);
  for (const detail of error.details) {
    assert.deepEqual(Object.keys(detail), ['field', 'message', 'value'], context);
    assert.equal(typeof detail.field, 'string', context);
    assert.equal(typeof detail.message, 'string', context);
  }
  assert.match(String(error.timestamp), UTC_TIMESTAMP, context);
  assert.equal(error.request_id, res.headers['x-request-id'], context);
}

function assertSuccessShape(request: FuzzRequest, res: TestResponse, context: string): void {
  const type = res.headers['content-type'];
  if (type === undefined || res.text === '' || request.method.toUpperCase() === 'HEAD') return;
  if (String(type).startsWith('application/json')) {
    assert.equal(type, 'application/json; charset=utf-8', context);
    parsed(res, context);
  } else {
    // Only the metrics and the documentation page answer in anything but JSON.
    assert.match(request.path, /metrics|docs/i, `a ${String(type)} answer: ${context}`);
  }
}

interface Snapshot {
  profile: unknown;
  etag: string;
}

/** How an app under fuzzing differs from the defaults. */
interface FuzzedAppOptions {
  rateLimited?: boolean;
  /** Settings of an optional feature. */
  overrides?: Partial<Config>;
  /** Where the profile lives; a new one in memory by default. */
  store?: ProfileStore;
  /** Raw requests go over TLS. */
  tls?: boolean;
}

/** One app under fuzzing, what it was sent, and the profile it must hold. */
class FuzzedApp {
  requests = 0;
  /** How many answers had each status. */
  readonly statuses = new Map<number, number>();
  /** The route templates that gave a 2xx answer: the generators reach past the 404. */
  readonly succeeded = new Set<string>();
  readonly logs = new LogCapture();
  readonly rateLimited: boolean;
  readonly store: ProfileStore;
  expected: Snapshot = { profile: null, etag: '' };
  app!: FastifyInstance;
  port = 0;
  /** Requests sent over HTTP/2, and the session they share (opened again if the server ends it). */
  http2Requests = 0;
  #session: ClientHttp2Session | undefined;

  constructor(readonly options: FuzzedAppOptions = {}) {
    this.rateLimited = options.rateLimited ?? false;
    this.store = options.store ?? new MemoryProfileStore();
  }

  async start(): Promise<void> {
    const config = testConfig({
      logLevel: 'error',
      bodyLimit: FUZZ_BODY_LIMIT,
      rateLimitMax: this.rateLimited ? RATE_LIMIT_MAX : 0,
      // With rate limiting on, X-Forwarded-For names the client (the connection when it names no IP address).
      trustProxy: this.rateLimited,
      ...this.options.overrides,
    });
    this.app = await buildApp(config, { logStream: this.logs, profileStore: this.store });
    this.app.addHook('onResponse', async (request, reply) => {
      if (reply.statusCode < 300 && request.routeOptions.url !== undefined) {
        this.succeeded.add(request.routeOptions.url);
      }
    });
    await this.app.listen({ host: '127.0.0.1', port: 0 });
    this.port = (this.app.server.address() as { port: number }).port;
    this.expected = await this.stored();
  }

  async stored(): Promise<Snapshot> {
    const { profile, version } = await this.store.get();
    return { profile: { ...profile }, etag: entityTag(version) };
  }

  /** The request with `CURRENT_ETAG` made the profile's current tag. */
  prepared(request: FuzzRequest): FuzzRequest {
    const headers = request.headers.map(([name, value]): [string, string] => [
      name,
      value.replaceAll(CURRENT_ETAG, this.expected.etag),
    ]);
    return { ...request, headers };
  }

  async inject(generated: FuzzRequest): Promise<void> {
    // app.inject takes only the methods Node knows, in upper or lower case, and no empty URL; the
    // wire takes any token and any target. A broken connection needs a connection: those go over the wire too.
    const connectionFault = header(generated, 'x-fault-connection').length > 0;
    if (!INJECTABLE_METHODS.has(generated.method) || generated.path === '' || connectionFault) {
      return this.socket(generated, []);
    }
    const request = this.prepared(generated);
    const res = await this.app.inject({
      method: request.method as 'GET',
      url: request.path + request.query,
      headers: Object.fromEntries(request.headers),
      ...(request.body !== undefined && { payload: request.body }),
    });
    const text = decodeBody(res.rawPayload, res.headers['content-encoding']).toString('utf8');
    await this.check(
      request,
      { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) },
      true,
    );
  }

  async socket(generated: FuzzRequest, rawHeaders: [string, string][]): Promise<void> {
    // Its answers are read as text, so it asks for none in a content coding.
    const request = this.prepared({
      ...generated,
      headers: generated.headers.filter(([name]) => name.toLowerCase() !== 'accept-encoding'),
    });
    const head = [
      `${request.method} ${request.path}${request.query} HTTP/1.1`,
      'Host: localhost',
      ...[...request.headers, ...rawHeaders].map(([name, value]) => `${name}: ${value}`),
      ...(request.body === undefined ? [] : [`Content-Length: ${request.body.length}`]),
      'Connection: close',
      '',
      '',
    ].join('\r\n');
    const bytes = Buffer.concat([Buffer.from(head, 'utf8'), request.body ?? Buffer.alloc(0)]);
    const sent = { ...request, headers: [...request.headers, ...rawHeaders] };
    const connectionFault = header(sent, 'x-fault-connection').length > 0;
    const answer = await exchange(this.port, bytes, this.options.tls ?? false).catch((error: unknown) => {
      if (connectionFault) return null;
      throw error;
    });
    if (connectionFault && (answer === null || brokenOnPurpose(answer))) return this.broken();
    assert.ok(answer !== null && answer !== '', `no answer to ${JSON.stringify(head)}`);
    await this.check(sent, parseRawResponse(answer));
  }

  /**
   * Over HTTP/2 (h2c, or h2 with `tls`), on one session: the request as Node's client sends it,
   * names in lower case, without the fields HTTP/2 forbids, a body with its length. A request that
   * client will not send (a method HTTP/2 cannot carry, a field given twice that must be given
   * once, headers over the bounds, text beyond Latin-1) goes over HTTP/1.1 instead. No
   * `Accept-Encoding`: its answers are read as text.
   */
  async http2(generated: FuzzRequest): Promise<void> {
    const request = this.prepared({
      ...generated,
      headers: generated.headers.filter(
        ([name]) => !NOT_HTTP2_FIELDS.has(name.toLowerCase()) && name.toLowerCase() !== 'accept-encoding',
      ),
    });
    const fields: OutgoingHttpHeaders = { ':method': request.method, ':path': request.path + request.query };
    for (const [name, value] of request.headers) {
      const key = name.toLowerCase();
      const given = fields[key];
      fields[key] = given === undefined ? value : [...[given].flat().map(String), value];
    }
    if (request.body !== undefined) fields['content-length'] = request.body.length;
    const origin = new URL(`${this.options.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`);
    if (this.#session === undefined || this.#session.closed || this.#session.destroyed) {
      this.#session = await h2(origin.origin, { tls: { rejectUnauthorized: false } });
    }
    // Over the bounds, Node's client resets a request itself, unsent, or the server does
    // (ENHANCE_YOUR_CALM, test/http/http2.test.ts); beyond Latin-1 it would be cut. Over HTTP/1.1
    // the first gets its 431.
    if (overHttp2Limits(fields, origin) || beyondLatin1(request)) return this.socket(generated, []);
    let stream: ClientHttp2Stream;
    try {
      stream = this.#session.request(fields, { endStream: request.body === undefined });
    } catch {
      return this.socket(generated, []);
    }
    if (request.body !== undefined) stream.end(request.body);
    this.http2Requests++;
    const answer = await readStream(stream).catch(() => null);
    const context = `${describeRequest(request)} over HTTP/2 → ${answer?.status ?? `reset ${stream.rstCode}`}`;
    if (answer === null && malformedOverHttp2(request)) {
      // A malformed request is a stream error (RFC 9113, 8.1.1): reset, with no answer. nghttp2
      // lets some through (a target not absolute but `*`): those are answered as any other.
      assert.equal(stream.rstCode, http2Constants.NGHTTP2_PROTOCOL_ERROR, context);
      this.requests++;
      return;
    }
    assert.ok(answer !== null && answer.status !== 0, `no answer, the stream reset with ${stream.rstCode}: ${context}`);
    await this.check(request, answer);
  }

  closeSession(): void {
    this.#session?.destroy();
  }

  /**
   * A connection broken on purpose (`x-fault-connection`), once the request was served: nothing to
   * check of the answer, and a write may have been made, which the profile expected follows.
   */
  async broken(): Promise<void> {
    this.requests++;
    this.expected = await this.stored();
  }

  /** Every invariant, for each response, whichever way it was sent. */
  async check(request: FuzzRequest, res: TestResponse, injected = false): Promise<void> {
    this.requests++;
    this.statuses.set(res.status, (this.statuses.get(res.status) ?? 0) + 1);
    const context = `${describeRequest(request)} → ${res.status} ${abridged(res.text, 300)}`;
    assert.ok(res.status < 500 || injectedAbort(res), `a ${res.status}: ${context}`);
    // The OpenAPI document describes every answer, whatever was sent.
    const sent = {
      method: request.method,
      path: request.path + request.query,
      headers: Object.fromEntries(request.headers),
      injected,
    };
    // An injected status is the envelope of that status, or the status alone, with the route's own
    // headers: the document describes it as its default response, not as the operation's own of that status.
    if (!injectedAbort(res)) assert.deepEqual((await conformanceOf(this.app)).problems(sent, res), [], context);
    const id = res.headers['x-request-id'];
    assert.ok(typeof id === 'string' && SAFE_REQUEST_ID.test(id), `X-Request-Id ${String(id)}: ${context}`);
    const sentIds = header(request, 'x-request-id');
    if (sentIds.length === 1 && SAFE_REQUEST_ID.test(sentIds[0] as string) && !NOT_HTTP.has(res.status)) {
      assert.equal(id, sentIds[0], context);
    }
    if (res.status >= 400) assertEnvelopeShape(request, res, this.rateLimited, context);
    else assertSuccessShape(request, res, context);
    assertNoLeak(request, res, context);
    await this.checkProfile(request, res, context);
  }

  /** The profile changes only by a successful write, and then to what that write answered. */
  async checkProfile(request: FuzzRequest, res: TestResponse, context: string): Promise<void> {
    // The profile's tags are version numbers; the documentation's static files have tags of their own.
    const version = typeof res.headers.etag === 'string' ? PROFILE_TAG.exec(res.headers.etag)?.[1] : undefined;
    const etag = version === undefined ? null : `"${version}"`;
    const succeeded = res.status >= 200 && res.status < 300 && etag !== null;
    if (succeeded && WRITE_METHODS.has(request.method.toUpperCase())) {
      this.expected = { profile: res.json(), etag };
    } else if (etag !== null) {
      assert.equal(etag, this.expected.etag, `a read's ETag: ${context}`);
      if (res.status === 200 && res.text !== '') assert.deepEqual(res.json(), this.expected.profile, context);
    }
    assert.deepEqual(await this.stored(), this.expected, `the profile changed: ${context}`);
  }

  errorLines(): Record<string, unknown>[] {
    return this.logs.lines.filter((line) => Number(line.level) >= 50);
  }
}

/** An answer cut short or replaced on purpose: nothing, bytes that are no HTTP, or a head naming the fault. */
function brokenOnPurpose(answer: string): boolean {
  const head = answer.split('\r\n\r\n', 1)[0] ?? '';
  return !answer.startsWith('HTTP/1.1 ') || /^x-fault-injected:.*\b(reset|empty|truncate|malformed)\b/im.test(head);
}

/** Writes raw bytes and reads until the server closes: the answer, even if the server closed before reading all. */
function exchange(port: number, bytes: Buffer, tls = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const send = () => socket.write(bytes);
    const socket: Socket = tls
      ? connectTls({ port, host: '127.0.0.1', rejectUnauthorized: false }, send)
      : connect(port, '127.0.0.1', send);
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // The server may answer (a 413, a 400) and close before the rest of a large request is written.
      if (chunks.length > 0 && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) {
        resolve(Buffer.concat(chunks).toString('utf8'));
      } else reject(error);
    });
  });
}

describe('fuzz: every route, random requests', () => {
  const builtIns = snapshotBuiltIns();
  const fuzzed = new FuzzedApp();
  before(() => fuzzed.start());
  after(() => fuzzed.app.close());

  it(`answers ${INJECT_RUNS} requests through app.inject within the invariants`, async () => {
    await fc.assert(
      fc.asyncProperty(fuzzRequest, (request) => fuzzed.inject(request)),
      { seed: SEED, numRuns: INJECT_RUNS, includeErrorInReport: true },
    );
  });

  it(`answers ${HTTP_RUNS} requests as raw bytes over sockets within the same invariants`, async () => {
    await fc.assert(
      fc.asyncProperty(fuzzRequest, rawHeaders, (request, raw) => fuzzed.socket(request, raw)),
      { seed: SEED, numRuns: HTTP_RUNS, includeErrorInReport: true },
    );
  });

  it('sent every request, logged no error, and left the built-in prototypes untouched', () => {
    assert.ok(fuzzed.requests >= RUNS, `${fuzzed.requests} requests`);
    assert.deepEqual(fuzzed.errorLines(), []);
    assert.deepEqual(snapshotBuiltIns(), builtIns);
    // What the polluting bodies and query strings try to set, and what the profile's fields would leak as.
    for (const key of [POLLUTED_PROPERTY, 'name', 'email', 'bio']) {
      assert.equal(({} as Record<string, unknown>)[key], undefined, key);
      assert.equal(([] as unknown as Record<string, unknown>)[key], undefined, key);
    }
  });

  it('reached a 2xx on every route, and every status the contract names but 408, 429 and the 5xx', {
    skip: RUNS < DEFAULT_RUNS && 'judged on full runs only',
  }, () => {
    for (const route of ROUTES) assert.ok(fuzzed.succeeded.has(route), `no 2xx from ${route}`);
    for (const status of REACHED_STATUSES) {
      assert.ok(fuzzed.statuses.has(status), `no ${status} among ${[...fuzzed.statuses.keys()].join(', ')}`);
    }
  });
});

describe('fuzz: rate limiting on', () => {
  const fuzzed = new FuzzedApp({ rateLimited: true });
  before(() => fuzzed.start());
  after(() => fuzzed.app.close());

  it(`answers ${RATE_LIMITED_RUNS} requests within the invariants, a 429 with Retry-After allowed`, async () => {
    await fc.assert(
      fc.asyncProperty(fuzzRequest, (request) => fuzzed.inject(request)),
      { seed: SEED, numRuns: RATE_LIMITED_RUNS, includeErrorInReport: true },
    );
    assert.deepEqual(fuzzed.errorLines(), []);
    assert.ok(fuzzed.statuses.has(429), 'the rate limit was reached');
  });
});

/** An optional feature the fuzz runs under too: what it needs started, and the app's options with it on. */
interface Feature {
  name: string;
  skip?: string | false;
  /** What the requests are: the default ones, or some of the feature's own among them. */
  requests: fc.Arbitrary<FuzzRequest>;
  /**
   * Starts what the feature needs; answers the app's options and how to let go of it all afterwards.
   * `check`, if any, runs once the app has closed.
   */
  setUp(): Promise<{ options: FuzzedAppOptions; check?(): void; tearDown(): Promise<void> }>;
}

const nothingToTearDown = async () => {};

const FEATURES: Feature[] = [
  {
    name: 'FAULT_ERROR_RATE and FAULT_DELAY_RATE',
    requests: fuzzRequest,
    setUp: async () => ({
      options: { overrides: { faultErrorRate: 0.1, faultDelayRate: 0.1, faultDelayMs: { min: 0, max: 2 } } },
      tearDown: nothingToTearDown,
    }),
  },
  {
    name: 'FAULT_HEADERS, most requests asking for faults',
    requests: fc.oneof({ arbitrary: fuzzRequest, weight: 1 }, { arbitrary: fuzzRequestWithFaults, weight: 3 }),
    setUp: async () => ({ options: { overrides: { faultHeaders: true } }, tearDown: nothingToTearDown }),
  },
  {
    name: 'spans exported to an OTLP receiver',
    requests: fuzzRequest,
    async setUp() {
      const receiver = await OtlpReceiver.start();
      return {
        options: { overrides: { otelExporterOtlpEndpoint: receiver.url } },
        // The app's close flushed its spans: the export worked all along.
        check: () => assert.ok(receiver.spans.length > 0, 'no span reached the receiver'),
        tearDown: () => receiver.close(),
      };
    },
  },
  {
    name: 'Redis: the profile and the rate limit in it',
    skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON,
    requests: fuzzRequest,
    async setUp() {
      const redis = await RedisServer.start();
      const { RedisConnection } = await import('../src/stores/redis-connection.js');
      const { RedisProfileStore } = await import('../src/stores/redis-profile.js');
      const connection = new RedisConnection({
        settings: { ...DEFAULT_CONFIG, redisUrl: redis.url },
        log: pino({ level: 'silent' }),
      });
      while ((await connection.unavailableReason()) !== null) await new Promise((resolve) => setTimeout(resolve, 20));
      return {
        options: { rateLimited: true, overrides: { redisUrl: redis.url }, store: new RedisProfileStore(connection) },
        async tearDown() {
          await connection.close();
          await redis.kill();
        },
      };
    },
  },
  {
    name: 'HTTP2 (h2c beside HTTP/1.1)',
    requests: fuzzRequest,
    setUp: async () => ({ options: { overrides: { http2: true } }, tearDown: nothingToTearDown }),
  },
  {
    name: 'TLS, with HTTP2',
    skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON,
    requests: fuzzRequest,
    async setUp() {
      const files = makeTlsFiles();
      return {
        options: {
          tls: true,
          overrides: { tlsCertFile: files.serverCert, tlsKeyFile: files.serverKey, http2: true },
        },
        tearDown: async () => files.remove(),
      };
    },
  },
  {
    name: 'ADMIN_TOKEN_FILE: the readiness switch, never with its token',
    requests: fc.oneof({ arbitrary: fuzzRequest, weight: 3 }, { arbitrary: adminRequest, weight: 1 }),
    async setUp() {
      const dir = await mkdtemp(join(tmpdir(), 'fuzz-admin-'));
      const tokenFile = join(dir, 'token');
      await writeFile(tokenFile, `${randomBytes(24).toString('base64url')}\n`);
      return {
        options: { overrides: { adminTokenFile: tokenFile } },
        tearDown: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
];

describe(`fuzz: under each optional feature, ${FEATURE_RUNS} requests each`, () => {
  for (const feature of FEATURES) {
    it(feature.name, { skip: feature.skip ?? false }, async () => {
      const { options, check, tearDown } = await feature.setUp();
      const fuzzed = new FuzzedApp(options);
      await fuzzed.start();
      try {
        const socketRuns = Math.ceil(FEATURE_RUNS / 4);
        await fc.assert(
          fc.asyncProperty(feature.requests, (request) => fuzzed.inject(request)),
          { seed: SEED, numRuns: FEATURE_RUNS - socketRuns, includeErrorInReport: true },
        );
        await fc.assert(
          fc.asyncProperty(feature.requests, rawHeaders, (request, raw) => fuzzed.socket(request, raw)),
          { seed: SEED, numRuns: socketRuns, includeErrorInReport: true },
        );
        // Served over HTTP/2 as well, as many again as over HTTP/1.1, most of them sent so.
        const http2Runs = options.overrides?.http2 === true ? FEATURE_RUNS : 0;
        await fc.assert(
          fc.asyncProperty(feature.requests, (request) => fuzzed.http2(request)),
          { seed: SEED, numRuns: http2Runs, includeErrorInReport: true },
        );
        fuzzed.closeSession();
        assert.ok(fuzzed.http2Requests >= http2Runs / 2, `${fuzzed.http2Requests} of ${http2Runs} over HTTP/2`);
        assert.ok(fuzzed.requests >= FEATURE_RUNS + http2Runs, `${fuzzed.requests} requests`);
        assert.deepEqual(fuzzed.errorLines(), []);
        await fuzzed.app.close();
        check?.();
      } finally {
        fuzzed.closeSession();
        await fuzzed.app.close();
        await tearDown();
      }
    });
  }
});
