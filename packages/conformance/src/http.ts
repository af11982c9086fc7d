import { type IncomingHttpHeaders, request as plainRequest } from 'node:http';
import { type ClientHttp2Session, connect as connectHttp2, constants as http2 } from 'node:http2';
import { request as tlsRequest } from 'node:https';
import { isIP, connect as plainConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import zlib from 'node:zlib';

/**
 * The one way checks reach the service: every request goes to the origin given and nowhere else
 * (a request names a path, never a URL), headers as written, no redirect followed: over HTTP/1.1
 * on a connection of its own, or with `http2` as a stream of one HTTP/2 session (h2c with prior
 * knowledge for http://, ALPN h2 for https://). What no client library sends (`raw`, `connect`)
 * is HTTP/1.1 either way. A per-request timeout and a budget of requests and time bound the run.
 */

/** Why the tool itself cannot go on: a usage error, exit code 2. */
export class ToolError extends Error {}

/** The request budget or the time budget is spent: the checks still to run are skipped. */
export class BudgetError extends Error {}

export interface Request {
  method?: string;
  /** Path and query under the base URL, sent exactly as written (percent-encode what is not ASCII). */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The request may be refused with 429: answer it as it comes instead of waiting for the window. */
  spendQuota?: boolean;
  /**
   * A load balancer in front may refuse the request itself (a path it cannot decode, a body over its
   * own limit): its answer then lacks the RateLimit headers, which only the service can count.
   */
  refusableInFront?: boolean;
  /** Told of each piece of the body as it arrives: a stream's events, to see when each came. */
  onData?: (chunk: Buffer) => void;
  /** The path is under the origin, not the base URL: a gRPC method's, at the root whatever the context path. */
  atRoot?: boolean;
}

export interface Response {
  /**
   * What was asked, and when it was sent (ms since the epoch): the answer was made between then and
   * its receipt. `path` is as sent, the base URL's path included (`/svc/api/hello`); `route` is the
   * path under the base URL (`/api/hello`).
   */
  readonly request: { method: string; path: string; route: string; refusableInFront?: boolean; sentAt: number };
  /** The version of HTTP it came over: `1.1`, `2.0`. */
  readonly httpVersion: string;
  readonly status: number;
  /** Lower-case names; a repeated field keeps every value. */
  readonly headers: IncomingHttpHeaders;
  /** The body as it came, in its content coding if it has one. */
  readonly body: Buffer;
  /** The body as text, decoded from its content coding (`decodedBody`). */
  readonly text: string;
  /** The trailer fields that came after the body, lower-case names (gRPC's status over HTTP/2); none when absent. */
  readonly trailers?: IncomingHttpHeaders;
}

/** Node's zstd decoder, where the runtime has it (22.15 and later). */
const zstdDecompressSync = (zlib as unknown as { zstdDecompressSync?: (body: Buffer, options: object) => Buffer })
  .zstdDecompressSync;

const DECODERS: Readonly<Record<string, (body: Buffer, options: zlib.ZlibOptions) => Buffer>> = {
  gzip: zlib.gunzipSync,
  'x-gzip': zlib.gunzipSync,
  deflate: zlib.inflateSync,
  br: zlib.brotliDecompressSync,
  ...(zstdDecompressSync !== undefined && { zstd: zstdDecompressSync }),
};

/** The codings the kit decodes. */
export const DECODED_CODINGS = Object.keys(DECODERS).filter((coding) => coding !== 'x-gzip');

/**
 * An answer's body decoded from the codings its Content-Encoding lists, the last applied first, at
 * most MAX_BODY bytes; null when it names a coding the kit does not decode, or is not valid data of it.
 */
export function decodedBody(body: Buffer, contentEncoding: string | undefined): Buffer | null {
  if (contentEncoding === undefined || body.length === 0) return body;
  let decoded = body;
  for (const coding of contentEncoding.split(',').reverse()) {
    const name = coding.trim().toLowerCase();
    if (name === 'identity') continue;
    const decode = DECODERS[name];
    if (decode === undefined) return null;
    try {
      decoded = decode(decoded, { maxOutputLength: MAX_BODY });
    } catch {
      return null;
    }
  }
  return decoded;
}

/** An answer's text: its body decoded, or as it came when it cannot be. */
function textOf(body: Buffer, contentEncoding: string | undefined): string {
  return (decodedBody(body, contentEncoding) ?? body).toString('utf8');
}

/** How to reach the service: HTTP/2 or not, which TLS certificates to trust for https://, and what to add to every request. */
export interface Transport {
  http2: boolean;
  /** Header fields sent on every request, the WebSocket handshake and raw requests included (`--header`). */
  headers?: readonly (readonly [string, string])[];
  /** CA certificates (PEM) to trust instead of the system's. */
  ca?: string | Buffer;
  /** Trust any certificate: a private one, for a test deployment. */
  insecure?: boolean;
}

/** Fields HTTP/2 forbids in a request (RFC 9113, 8.2.2), and Host, which is its :authority. */
const NOT_HTTP2 = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host']);

export interface Budget {
  /** Most requests the whole run may send. */
  maxRequests: number;
  /** Milliseconds the whole run may take. */
  maxTimeMs: number;
  /** Milliseconds one request may take. */
  requestTimeoutMs: number;
}

const MAX_BODY = 16 * 1024 * 1024;

/** The data of a chunked body, as far as it arrived. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16);
    if (eol < 0 || !(size > 0)) return Buffer.concat(parts);
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** The TLS errors of a certificate signed by a CA the client does not trust. */
const UNTRUSTED_CERTIFICATE = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** Lowest count of requests left in the window before the client waits for the next window. */
const QUOTA_RESERVE = 8;

/** A gRPC method's path, `/<package>.<Service>/<Method>`: a call in gRPC, gRPC-Web or the Connect protocol. */
export const RPC_PATH = /^\/[A-Za-z_][\w.]*\.[A-Za-z_]\w*\/[A-Za-z_]\w*$/;

/** The header with which the service names the faults it injected into an answer (`abort`, `delay, abort`). */
export const INJECTED_HEADER = 'x-fault-injected';

/** Whether an answer says it is an injected fault instead of the service's answer: an abort. */
export function isInjectedAbort(response: Response): boolean {
  const kinds = String(response.headers[INJECTED_HEADER] ?? '').split(',');
  return kinds.some((kind) => kind.trim() === 'abort');
}

export class Http {
  readonly origin: URL;
  /** The base URL's path without its trailing slash: a context path such as `/svc`, or ''. */
  readonly prefix: string;
  readonly #budget: Budget;
  readonly #transport: Transport;
  readonly #deadline: number;
  #session: ClientHttp2Session | undefined;
  #sent = 0;
  /** The rate-limit window as the last answer under /api told it. */
  #quota: { remaining: number; resetAt: number } | undefined;
  /** Told of each wait for the rate-limit window, for the progress line. */
  onWait: (seconds: number) => void = () => {};
  /** Told of every answer, as it comes. */
  onAnswer: (response: Response) => void = () => {};
  /** The answers that name faults injected into them (X-Fault-Injected), in the order they came. */
  readonly injected: Response[] = [];

  constructor(base: URL, budget: Budget, transport: Transport = { http2: false }) {
    this.origin = new URL(base.origin);
    this.prefix = base.pathname.replace(/\/+$/, '');
    this.#budget = budget;
    this.#transport = transport;
    this.#deadline = Date.now() + budget.maxTimeMs;
  }

  get sent(): number {
    return this.#sent;
  }

  /** Milliseconds left of the time budget. */
  get timeLeft(): number {
    return this.#deadline - Date.now();
  }

  get requestsLeft(): number {
    return this.#budget.maxRequests - this.#sent;
  }

  get requestTimeoutMs(): number {
    return this.#budget.requestTimeoutMs;
  }

  /** Whether the rate limit counts a request to `path`: under /api, or a gRPC method's. */
  #limited(path: string): boolean {
    return /^\/api(?:[/?#]|$)/.test(path) || RPC_PATH.test(path);
  }

  #spend(): void {
    if (this.#sent >= this.#budget.maxRequests) {
      throw new BudgetError(`the request budget (${this.#budget.maxRequests}) is spent`);
    }
    if (this.timeLeft <= 0) throw new BudgetError(`the time budget (${this.#budget.maxTimeMs / 1000} s) is spent`);
    this.#sent += 1;
  }

  async #sleep(ms: number): Promise<void> {
    if (ms > this.timeLeft) {
      throw new BudgetError(`waiting ${Math.ceil(ms / 1000)} s for the rate-limit window exceeds the time budget`);
    }
    this.onWait(Math.ceil(ms / 1000));
    await new Promise((resolve) => setTimeout(resolve, ms));
  }

  async send(request: Request): Promise<Response> {
    const api = this.#limited(request.path);
    if (api && !request.spendQuota && this.#quota !== undefined && this.#quota.remaining <= QUOTA_RESERVE) {
      const wait = this.#quota.resetAt - Date.now();
      this.#quota = undefined;
      // A window longer than the run has left may be a RateLimit-Reset in other units than seconds:
      // go on, and let a 429's Retry-After say how long to wait.
      if (wait > 0 && wait + 100 <= this.timeLeft) await this.#sleep(wait + 100);
    }
    for (let attempt = 0; ; attempt += 1) {
      const response = this.note(await this.#once(request));
      if (api) this.#noteQuota(response);
      // An injected 429 says nothing of this client's quota.
      if (response.status !== 429 || request.spendQuota || attempt === 2 || isInjectedAbort(response)) return response;
      // Another client from this address spent the window: wait for the next one.
      const retryAfter = Number(response.headers['retry-after']);
      if (!Number.isInteger(retryAfter) || retryAfter < 0) return response;
      await this.#sleep(retryAfter * 1000 + 100);
    }
  }

  /** Records an answer the run received: the audit of every answer sees it, and the injected faults are counted. */
  note(response: Response): Response {
    this.onAnswer(response);
    if (response.headers[INJECTED_HEADER] !== undefined) this.injected.push(response);
    return response;
  }

  #noteQuota(response: Response): void {
    const remaining = Number(response.headers['ratelimit-remaining']);
    const reset = Number(response.headers['ratelimit-reset']);
    if (response.headers['ratelimit-remaining'] === undefined || !Number.isFinite(remaining)) return;
    this.#quota = { remaining, resetAt: Date.now() + (Number.isFinite(reset) ? reset : 1) * 1000 };
  }

  /** Whether requests go over HTTP/2. */
  get http2(): boolean {
    return this.#transport.http2;
  }

  /** The TLS options of every connection to an https:// origin. */
  get #tls(): { ca?: string | Buffer; rejectUnauthorized: boolean } {
    const { ca, insecure = false } = this.#transport;
    return { ...(ca !== undefined && { ca }), rejectUnauthorized: !insecure };
  }

  /** A request's fields: those of every request (`--header`) but the names it sets itself, then its own. */
  #fields(own: Record<string, string>): Record<string, string | string[]> {
    const names = new Set(Object.keys(own).map((name) => name.toLowerCase()));
    const fields: Record<string, string | string[]> = {};
    for (const [name, value] of this.#transport.headers ?? []) {
      const key = name.toLowerCase();
      if (names.has(key)) continue;
      const had = fields[key];
      fields[key] = had === undefined ? value : [had, value].flat();
    }
    return { ...fields, ...own };
  }

  /** Whether every request carries a field of this name (`--header`). */
  sendsHeader(name: string): boolean {
    return (this.#transport.headers ?? []).some(([sent]) => sent.toLowerCase() === name.toLowerCase());
  }

  /** The bytes of a request written by hand, with the fields of every request (`--header`) after its request line. */
  withHeaders(bytes: string): string {
    const lines = (this.#transport.headers ?? []).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    const eol = bytes.indexOf('\r\n');
    return lines === '' || eol < 0 ? bytes : `${bytes.slice(0, eol + 2)}${lines}${bytes.slice(eol + 2)}`;
  }

  /** A request given up on at the request timeout, naming the flag that gives it longer. */
  #tooSlow(method: string, path: string, what: string): string {
    const ms = this.#budget.requestTimeoutMs;
    return `${what} to ${method} ${path} within ${ms / 1000} s (--timeout <seconds> gives each request longer)`;
  }

  /** Why a request got no answer, in the kit's words, naming the flag that would fix it where one would. */
  #failed(method: string, path: string, error: NodeJS.ErrnoException): string {
    const code = error.code ?? '';
    const host = this.origin.host;
    const detail = error.message.split('\n')[0] ?? '';
    const why = (() => {
      if (UNTRUSTED_CERTIFICATE.has(code)) {
        return this.#transport.ca === undefined
          ? `the certificate of ${host} is not signed by a CA this system trusts (${code}): give its CA with --ca <file>, or --insecure`
          : `the certificate of ${host} is not signed by a CA of --ca (${code}): give the CA that signed it, or --insecure`;
      }
      if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
        return `the certificate of ${host} does not name ${this.origin.hostname} (${detail}): use the name it has, or --insecure`;
      }
      if (/wrong version number|packet length too long/i.test(detail)) {
        return `${host} does not speak TLS (${code}): use http:// for it`;
      }
      if (this.#transport.http2 && /no application protocol/i.test(detail)) {
        return `${host} does not offer HTTP/2 by ALPN (h2): run without --http2`;
      }
      if (this.#transport.http2 && code === 'ERR_HTTP2_ERROR' && this.origin.protocol === 'http:') {
        return `${host} does not answer HTTP/2 with prior knowledge (h2c): run without --http2`;
      }
      return `${code} ${detail}`.trim();
    })();
    return `${method} ${path}: ${why}`;
  }

  /** Ends the HTTP/2 session, if there is one. */
  close(): void {
    this.#session?.close();
    this.#session = undefined;
  }

  /** The HTTP/2 session, opened again when the service has ended the last one. */
  #http2Session(): ClientHttp2Session {
    if (this.#session === undefined || this.#session.closed || this.#session.destroyed) {
      const session = connectHttp2(this.origin, this.origin.protocol === 'https:' ? this.#tls : {});
      // A failed session fails the streams it carries; the error is theirs to report.
      session.on('error', () => {});
      this.#session = session;
    }
    return this.#session;
  }

  #once(request: Request): Promise<Response> {
    this.#spend();
    return this.#transport.http2 ? this.#onceHttp2(request) : this.#onceHttp1(request);
  }

  #onceHttp2({
    method = 'GET',
    path,
    headers = {},
    body,
    refusableInFront,
    onData,
    atRoot,
  }: Request): Promise<Response> {
    const sentAt = Date.now();
    const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const fullPath = (atRoot ? '' : this.prefix) + path;
    const fields: Record<string, string | string[]> = { ':method': method, ':path': fullPath };
    for (const [name, value] of Object.entries(this.#fields(headers))) {
      if (!NOT_HTTP2.has(name.toLowerCase())) fields[name.toLowerCase()] = value;
    }
    const timeoutMs = this.#budget.requestTimeoutMs;
    return new Promise((resolve, reject) => {
      const stream = this.#http2Session().request(fields, { endStream: payload === undefined });
      const chunks: Buffer[] = [];
      let size = 0;
      let status = 0;
      let received: IncomingHttpHeaders = {};
      let trailers: IncomingHttpHeaders = {};
      const timer = setTimeout(() => {
        stream.close(http2.NGHTTP2_CANCEL);
        reject(new Error(this.#tooSlow(method, fullPath, 'no whole answer')));
      }, timeoutMs);
      stream.on('response', ({ ':status': code, ...rest }) => {
        status = Number(code);
        received = rest as IncomingHttpHeaders;
      });
      stream.on('trailers', (fields) => {
        trailers = fields as IncomingHttpHeaders;
      });
      stream.on('data', (chunk: Buffer) => {
        onData?.(chunk);
        size += chunk.length;
        if (size > MAX_BODY) {
          stream.close(http2.NGHTTP2_CANCEL);
          reject(new Error(`answer larger than ${MAX_BODY} bytes`));
        } else chunks.push(chunk);
      });
      stream.on('end', () => {
        clearTimeout(timer);
        const data = Buffer.concat(chunks);
        resolve({
          request: { method, path: fullPath, route: path, refusableInFront, sentAt },
          httpVersion: '2.0',
          status,
          headers: received,
          body: data,
          text: textOf(data, received['content-encoding'] as string | undefined),
          trailers,
        });
      });
      stream.on('error', (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new Error(this.#failed(method, fullPath, error)));
      });
      stream.end(payload);
    });
  }

  #onceHttp1({
    method = 'GET',
    path,
    headers = {},
    body,
    refusableInFront,
    onData,
    atRoot,
  }: Request): Promise<Response> {
    const sentAt = Date.now();
    const fullPath = (atRoot ? '' : this.prefix) + path;
    const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const sent = this.#fields(headers);
    if (payload !== undefined && !Object.keys(sent).some((name) => name.toLowerCase() === 'content-length')) {
      sent['Content-Length'] = String(payload.length);
    }
    const requestFn = this.origin.protocol === 'https:' ? tlsRequest : plainRequest;
    return new Promise((resolve, reject) => {
      const req = requestFn(
        {
          protocol: this.origin.protocol,
          hostname: this.origin.hostname.replace(/^\[|\]$/g, ''),
          port: this.origin.port || undefined,
          method,
          path: fullPath,
          headers: sent,
          agent: false,
          timeout: this.#budget.requestTimeoutMs,
          ...(this.origin.protocol === 'https:' && this.#tls),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            onData?.(chunk);
            size += chunk.length;
            if (size > MAX_BODY) req.destroy(new Error(`answer larger than ${MAX_BODY} bytes`));
            else chunks.push(chunk);
          });
          res.on('end', () => {
            const data = Buffer.concat(chunks);
            resolve({
              request: { method, path: fullPath, route: path, refusableInFront, sentAt },
              httpVersion: res.httpVersion,
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: data,
              text: textOf(data, res.headers['content-encoding']),
              trailers: res.trailers,
            });
          });
          res.on('error', reject);
        },
      );
      const timer = setTimeout(
        () => req.destroy(new Error(this.#tooSlow(method, fullPath, 'no whole answer'))),
        this.#budget.requestTimeoutMs,
      );
      req.on('close', () => clearTimeout(timer));
      req.on('timeout', () => req.destroy(new Error(this.#tooSlow(method, fullPath, 'no answer'))));
      req.on('error', (error: NodeJS.ErrnoException) => {
        // An answer to HEAD has no body: bytes after its headers are what the parser stumbles on.
        if (method === 'HEAD' && error.code?.startsWith('HPE_')) {
          reject(new Error(`HEAD ${fullPath} answered with a body (bytes after the headers: ${error.code})`));
        } else {
          reject(error.code === undefined ? error : new Error(this.#failed(method, fullPath, error)));
        }
      });
      req.end(payload);
    });
  }

  /**
   * Writes `bytes` as they are (what a client library will not send: a malformed request) and
   * reads the one answer until the service closes the connection or the request timeout.
   */
  async raw(bytes: string, what: string): Promise<Response> {
    const socket = await this.connect();
    const sentAt = Date.now();
    const chunks: Buffer[] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => socket.destroy(), this.#budget.requestTimeoutMs);
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.on('error', () => socket.destroy());
      // Not half-closed: some proxies drop a connection whose client has ended its side. The
      // requests ask for Connection: close, so the service closes once it has answered.
      socket.write(this.withHeaders(bytes));
    });
    const data = Buffer.concat(chunks);
    const split = data.indexOf('\r\n\r\n');
    const head = data.subarray(0, split < 0 ? data.length : split).toString('latin1');
    const [statusLine = '', ...lines] = head.split('\r\n');
    const headers: IncomingHttpHeaders = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    let body: Buffer = split < 0 ? Buffer.alloc(0) : data.subarray(split + 4);
    const length = Number(headers['content-length']);
    if (/chunked/i.test(String(headers['transfer-encoding']))) body = dechunk(body);
    else if (Number.isInteger(length)) body = body.subarray(0, length);
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
    return this.note({
      request: { method: 'RAW', path: what, route: what, sentAt },
      httpVersion: /^HTTP\/(1\.[01])/.exec(statusLine)?.[1] ?? '',
      status,
      headers,
      body,
      text: body.toString('utf8'),
    });
  }

  /** A raw connection to the origin, for what a client library will not send. */
  async connect(): Promise<Socket> {
    this.#spend();
    const port = Number(this.origin.port || (this.origin.protocol === 'https:' ? 443 : 80));
    const host = this.origin.hostname.replace(/^\[|\]$/g, '');
    return new Promise((resolve, reject) => {
      const socket =
        this.origin.protocol === 'https:'
          ? tlsConnect({ host, port, ...(isIP(host) === 0 && { servername: host }), ...this.#tls }, () =>
              resolve(socket),
            )
          : plainConnect({ host, port }, () => resolve(socket));
      socket.once('error', reject);
    });
  }
}

/** Whether `origin` (an http:// one) completes a TLS handshake instead: an https:// port. */
export function speaksTls(origin: URL, timeoutMs: number): Promise<boolean> {
  const host = origin.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = tlsConnect({ host, port: Number(origin.port || 80), rejectUnauthorized: false }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
  });
}
