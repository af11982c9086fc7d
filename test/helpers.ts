import assert from 'node:assert/strict';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { type ClientHttp2Session, connect as connectHttp2, type IncomingHttpStatusHeader } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { after } from 'node:test';
import { connect as connectTls } from 'node:tls';
import zlib from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { request as httpRequest } from 'undici';
import { type AppOptions, buildApp } from '../src/app.js';
import { type Config, DEFAULT_CONFIG } from '../src/config/index.js';
import { conformanceOf } from './openapi-conformance.js';

export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...DEFAULT_CONFIG, host: '127.0.0.1', port: 0, logLevel: 'silent', ...overrides };
}

/** Collects the app's log lines, parsed. */
export class LogCapture extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _encoding: string, callback: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) if (line !== '') this.lines.push(JSON.parse(line));
    callback();
  }

  /** The one line logged for the request `id`, asserting there is exactly one. */
  lineOf(id: unknown): Record<string, unknown> {
    const lines = this.lines.filter((line) => line.request_id === id);
    assert.equal(lines.length, 1, `one line for ${id}`);
    return lines[0] as Record<string, unknown>;
  }

  /** The messages of the warnings logged, from line `from` on. */
  warnings(from = 0): unknown[] {
    return this.lines
      .slice(from)
      .filter((line) => line.level === 40)
      .map((line) => line.msg);
  }
}

/** An app listening on a free loopback port, with its log lines captured. */
export interface ListeningApp {
  app: FastifyInstance;
  port: number;
  origin: string;
  logs: LogCapture;
}

/** The service listening on a free loopback port, with its log lines captured, and routes of the test's own. */
export async function listening(
  overrides: Partial<Config> = {},
  routes: (app: FastifyInstance) => void = () => {},
): Promise<ListeningApp> {
  const logs = new LogCapture();
  const app = await buildApp(testConfig({ logLevel: 'info', ...overrides }), { logStream: logs });
  routes(app);
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: (app.server.address() as { port: number }).port, origin, logs };
}

/**
 * `listening` for a suite: each call a service of its own, every one closed after the suite
 * (call it in a `describe`).
 */
export function listeningInSuite(): (overrides?: Partial<Config>) => Promise<ListeningApp> {
  const servers: ListeningApp[] = [];
  after(async () => {
    for (const { app } of servers) await app.close();
  });
  return async (overrides = {}) => {
    const server = await listening(overrides);
    servers.push(server);
    return server;
  };
}

/** The error a promise rejects with, checked to be of `type`. */
export async function rejection<E extends Error>(
  promise: Promise<unknown>,
  type: new (...args: never[]) => E,
): Promise<E> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof type, `${(error as Error).name}: ${(error as Error).message}`);
    return error;
  }
  assert.fail('expected a rejection');
}

export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  /** The body decoded from its Content-Encoding, as a client that asked for it reads it. */
  text: string;
  /** The body as it came, still in its content coding (from the transports of `transports`). */
  bytes?: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON body, whose shape each assertion checks
  json(): any;
}

export interface TestRequest {
  method?: string;
  /** Sent exactly as written: percent-encode anything that is not plain ASCII. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** One way of sending requests to the service; every route test runs over each. */
export interface Client {
  readonly app: FastifyInstance;
  send(request: TestRequest): Promise<TestResponse>;
  close(): Promise<void>;
}

/** Node's zstd, where the runtime has it (22.15 and later). */
const zstdDecompressSync = (zlib as unknown as { zstdDecompressSync?: (body: Buffer) => Buffer }).zstdDecompressSync;

const DECODERS: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: (body) => zlib.gunzipSync(body),
  deflate: (body) => zlib.inflateSync(body),
  br: (body) => zlib.brotliDecompressSync(body),
  zstd: (body) => {
    assert.ok(zstdDecompressSync !== undefined, 'zstd only where the runtime has it');
    return zstdDecompressSync(body);
  },
};

/** A body decoded from the codings its Content-Encoding lists, the last applied first. */
export function decodeBody(bytes: Buffer, contentEncoding: unknown): Buffer {
  if (contentEncoding === undefined || bytes.length === 0) return bytes;
  const codings = String(contentEncoding)
    .split(',')
    .map((coding) => coding.trim());
  return codings.reduceRight((body, coding) => {
    const decode = DECODERS[coding];
    assert.ok(decode !== undefined, `a coding the tests decode: ${coding}`);
    return decode(body);
  }, bytes);
}

function response(status: number, headers: TestResponse['headers'], bytes: Buffer): TestResponse {
  const text = decodeBody(bytes, headers['content-encoding']).toString('utf8');
  return { status, headers, text, bytes, json: () => JSON.parse(text) };
}

/**
 * Requests through `app.inject`: no socket, Fastify's full request pipeline. Each answer is checked
 * against the app's OpenAPI document, as with `httpClient`, so that the document cannot drift from
 * what the service does.
 */
export async function injectClient(overrides: Partial<Config> = {}, options: AppOptions = {}): Promise<Client> {
  const app = await buildApp(testConfig(overrides), options);
  await app.ready();
  const conformance = await conformanceOf(app);
  return {
    app,
    async send(request) {
      const { method = 'GET', path, headers, body } = request;
      const res = await app.inject({ method: method as 'GET', url: path, headers, payload: body });
      const answer = response(res.statusCode, res.headers, res.rawPayload);
      conformance.check({ ...request, injected: true }, answer);
      return answer;
    },
    close: () => app.close(),
  };
}

/** One request over real HTTP to the service at `origin` (`http://127.0.0.1:8080`). */
export async function sendTo(
  origin: string,
  { method = 'GET', path, headers, body }: TestRequest,
): Promise<TestResponse> {
  const res = await httpRequest(`${origin}${path}`, { method: method as 'GET', headers, body });
  return response(res.statusCode, res.headers, Buffer.from(await res.body.arrayBuffer()));
}

/** Requests over real HTTP to the service listening on a free loopback port. */
export async function httpClient(overrides: Partial<Config> = {}, options: AppOptions = {}): Promise<Client> {
  const app = await buildApp(testConfig(overrides), options);
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  const conformance = await conformanceOf(app);
  return {
    app,
    async send(request) {
      const answer = await sendTo(origin, request);
      conformance.check(request, answer);
      return answer;
    },
    close: () => app.close(),
  };
}

/**
 * One request over an HTTP/2 session (`http2://` and `https://` origins as `connect` takes them):
 * the headers as given, lower-cased, the body as DATA frames.
 */
export function sendHttp2(
  session: ClientHttp2Session,
  { method = 'GET', path, headers = {}, body }: TestRequest,
): Promise<TestResponse> {
  return new Promise((resolve, reject) => {
    const fields: OutgoingHttpHeaders = { ':method': method, ':path': path };
    for (const [name, value] of Object.entries(headers)) fields[name.toLowerCase()] = value;
    const stream = session.request(fields, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let head: IncomingHttpHeaders & IncomingHttpStatusHeader = {};
    stream.on('response', (received) => {
      head = received;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      const { ':status': status, ...rest } = head;
      resolve(response(Number(status), rest as TestResponse['headers'], Buffer.concat(chunks)));
    });
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

/**
 * Requests over HTTP/2 with prior knowledge (h2c), on one session, to the service with HTTP2 on,
 * listening on a free loopback port: the HTTP/1.1 answers and the HTTP/2 ones are held to the same
 * tests and the same OpenAPI document.
 */
export async function http2Client(overrides: Partial<Config> = {}, options: AppOptions = {}): Promise<Client> {
  const app = await buildApp(testConfig({ http2: true, ...overrides }), options);
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  const conformance = await conformanceOf(app);
  let session: ClientHttp2Session | undefined;
  // A session the server ended (GOAWAY) is replaced, as a client would.
  const open = () => {
    if (session === undefined || session.closed || session.destroyed) session = connectHttp2(origin);
    return session;
  };
  return {
    app,
    async send(request) {
      const answer = await sendHttp2(open(), request);
      conformance.check(request, answer);
      return answer;
    },
    async close() {
      session?.close();
      await app.close();
    },
  };
}

export const transports = [
  ['inject', injectClient],
  ['http', httpClient],
  ['http2', http2Client],
] as const;

const UTC_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Asserts a complete error response: status, JSON content type, X-Request-Id, and the
 * envelope with exactly its five fields, the given code and details, a fresh UTC
 * timestamp and the header's request id. Returns the envelope's `error` for further checks.
 */
export function assertEnvelope(
  res: TestResponse,
  status: number,
  code: string,
  details: unknown[] = [],
): { code: string; message: string; details: unknown[]; timestamp: string; request_id: string } {
  assert.equal(res.status, status, res.text);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  const id = res.headers['x-request-id'];
  assert.equal(typeof id, 'string');
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error), ['code', 'message', 'details', 'timestamp', 'request_id']);
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.deepEqual(body.error.details, details);
  assert.match(body.error.timestamp, UTC_TIMESTAMP);
  assert.ok(Math.abs(Date.parse(body.error.timestamp) - Date.now()) < 10_000, 'timestamp is now');
  assert.equal(body.error.request_id, id);
  return body.error;
}

/** The local date-time form of 2.1/2.4: no offset, always milliseconds. */
export const LOCAL_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;

/** Asserts a local timestamp is within a few seconds of now in this process's zone. */
export function assertLocalNow(timestamp: string): void {
  assert.match(timestamp, LOCAL_TIMESTAMP);
  // Without an offset, Date reads it as local time: the same zone the server formats in.
  assert.ok(Math.abs(new Date(timestamp).getTime() - Date.now()) < 10_000, `${timestamp} is now`);
}

/** The samples of one metric in a Prometheus text exposition: its label sets, as written, and values. */
export function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (match?.[1] === name) found.set(match[2] ?? '', Number(match[3]));
  }
  return found;
}

/** Connects to a port of this machine, over TLS (any certificate) with `tls`, and calls `connected` once it can write. */
export function connectLocal(port: number, tls: boolean, connected: () => void): Socket {
  return tls
    ? connectTls({ port, host: '127.0.0.1', rejectUnauthorized: false }, connected)
    : connect(port, '127.0.0.1', connected);
}

/** Writes raw bytes to a listening server (over TLS with `tls`) and reads until the server closes the connection. */
export function rawExchange(port: number, bytes: string | Buffer, tls = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connectLocal(port, tls, () => socket.write(bytes));
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      data += chunk;
    });
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
}

/** One whole HTTP/1.1 response, as read from a socket, as a TestResponse. */
export function parseRawResponse(response: string): TestResponse {
  const [head = '', body = ''] = response.split('\r\n\r\n');
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, text: body, json: () => JSON.parse(body) };
}
