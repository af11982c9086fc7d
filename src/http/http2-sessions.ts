import type { OutgoingHttpHeaders } from 'node:http';
import {
  constants,
  createServer,
  type Http2Server,
  type Http2ServerRequest,
  Http2ServerResponse,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { apiError } from '../errors.js';
import { continueWhenRead } from '../lib/expect-continue.js';
import { lingerThenClose } from '../lib/linger.js';
import type { Holding, MemoryBudget } from '../lib/memory-budget.js';

/**
 * HTTP/2 for the service: every session held to the limits below, each request to the request
 * timeout, a session on which nothing moves closed, and on shutdown a GOAWAY to each session, which
 * then ends once its streams have. Sessions are made on connections handed over (`accept`) by the
 * server that listens, once it knows they speak HTTP/2: this server never listens itself.
 */

/** What every session is held to, advertised in the server's SETTINGS where HTTP/2 has a setting for it. */
export const HTTP2_LIMITS = {
  /** Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS): Node advertises no bound by default. */
  maxConcurrentStreams: 100,
  /** The request's header list, as HPACK counts it (SETTINGS_MAX_HEADER_LIST_SIZE): HTTP/1.1's 16 KiB of headers. */
  maxHeaderListSize: 16 * 1024,
  /** Header fields of a request, pseudo-headers included: over it, the stream is refused. */
  maxHeaderListPairs: 128,
  /**
   * Streams a client may reset (RST_STREAM) before they are served, in a session, beyond which,
   * once they are more than half of its streams, the session is closed with GOAWAY
   * ENHANCE_YOUR_CALM (Rapid Reset, CVE-2023-44487): a client whose streams mostly end as they
   * should never comes near it.
   */
  maxClientResets: 100,
  /** Memory nghttp2 may hold for a session, in MiB (Node's default): over it, new streams are refused. */
  maxSessionMemory: 10,
  /** PINGs sent by the server and not yet acknowledged; the server sends none of its own. */
  maxOutstandingPings: 10,
  /** Frames that break the protocol a session may send before it is closed. */
  maxSessionInvalidFrames: 100,
  /** Streams refused (over the concurrency limit, or after GOAWAY) before the session is closed. */
  maxSessionRejectedStreams: 100,
  /**
   * Bytes of answers a session may hold unsent, waiting for its client's flow-control windows (the
   * default BODY_LIMIT): while it holds more, its next requests wait, each for REQUEST_TIMEOUT_MS at
   * most. A session so holds at most this and the answers under way, however many streams it opens.
   */
  maxUnsentBytes: 1024 * 1024,
  /**
   * Bytes of request bodies being served at once across all sessions, each counted as its
   * Content-Length declares or else as BODY_LIMIT, from the moment it is served until its stream
   * closes: an answer can be as large as its request's body (the echo), and one its client does not
   * read is held, on the heap, until then. Beyond it, the next requests with a body wait as above
   * (a quarter of the 128 MiB heap the Kubernetes recipe gives); one is always served.
   */
  maxBodyBytesServed: 32 * 1024 * 1024,
} as const;

export interface Http2SessionOptions {
  /**
   * The time a stream has to send its whole request, as REQUEST_TIMEOUT_MS is for an HTTP/1.1
   * request; and the longest a stream may wait to be served, or make no progress in sending its
   * answer (its client's window closed), before it is reset.
   */
  requestTimeoutMs: number;
  /**
   * The time a session with no stream open may stay, as KEEP_ALIVE_TIMEOUT_MS is for an idle
   * HTTP/1.1 connection, whatever else its client sends (PINGs, SETTINGS).
   */
  keepAliveTimeoutMs: number;
  /** BODY_LIMIT: the most a request's body may hold, and so its answer, when it declares no length. */
  bodyLimit: number;
  /** The process's memory budget, which measures each answer's unsent bytes and may reset its stream. */
  budget: MemoryBudget;
}

type Handler = (request: Http2ServerRequest, response: Http2ServerResponse) => void;

/** How long a session told to go away for its resets is kept open for the GOAWAY to be read, in ms. */
const GOAWAY_GRACE_MS = 1000;

const destroyStream = (stream: ServerHttp2Stream): void => {
  stream.destroy();
};

/**
 * Resets a stream with NO_ERROR once the last frame of its answer (END_STREAM) has gone out, as
 * RFC 9113 (8.1) asks: the answer may still be waiting for the client's flow-control window.
 */
function resetOnceAnswered(stream: ServerHttp2Stream): void {
  if (stream.closed || stream.destroyed) return;
  if (stream.state.localClose === 1) stream.close(constants.NGHTTP2_NO_ERROR);
  else setTimeout(resetOnceAnswered, 10, stream);
}

/**
 * An answer over HTTP/2, as Node makes it, with what the service adds to every one:
 * - no `Connection` field, which code written for HTTP/1.1 sets (Fastify, after a body it could
 *   not read): HTTP/2 has no such field (RFC 9113, 8.2.2), and Node, which leaves it out too,
 *   would say so on stderr;
 * - given before the whole body of its request came (a 413, a 408, a 404 to a POST), it is
 *   followed by RST_STREAM NO_ERROR, which tells the client to stop sending (RFC 9113, 8.1): Node
 *   does so by itself only for a body nobody read;
 * - the request's timer, which its end clears;
 * - its unsent bytes held against the memory budget, which sheds it with RST_STREAM CANCEL.
 */
class Http2Response extends Http2ServerResponse implements Holding {
  readonly action = 'stream_reset';
  /** The request timeout of a request with a body, until the answer ends. */
  timer: NodeJS.Timeout | undefined;
  /** Bytes of the answer's body given to the stream. */
  given = 0;
  /** Bytes of them sent when last looked at, and when that count last grew (or nothing was waiting). */
  sentSeen = 0;
  progressAt = performance.now();

  /** Bytes given to the stream and not sent yet: what its client's flow-control window holds back. */
  get unsent(): number {
    return this.stream.bufferSize;
  }

  get bytes(): number {
    return this.unsent;
  }

  shed(): void {
    this.cancel();
  }

  /** Resets the stream of an answer that cannot go out: logged and counted with status 0, the status of no answer. */
  cancel(): void {
    // As faults.ts says no answer; its descriptor, so that neither ever redefines the other's.
    if (this.statusCode !== 0) Object.defineProperty(this, 'statusCode', { value: 0 });
    this.stream.close(constants.NGHTTP2_CANCEL);
  }

  override write(chunk: string | Uint8Array, ...rest: unknown[]): boolean {
    this.given += byteLength(chunk, rest[0]);
    return (super.write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  }

  override setHeader(name: string, value: number | string | readonly string[]): this {
    if (name.toLowerCase() !== 'connection') super.setHeader(name, value);
    return this;
  }

  override writeHead(status: number, ...rest: [(string | OutgoingHttpHeaders)?, OutgoingHttpHeaders?]): this {
    const headers = rest.at(-1);
    if (typeof headers === 'object' && headers !== null) delete headers.connection;
    return super.writeHead(status, ...(rest as [string, OutgoingHttpHeaders]));
  }

  // The body given to end() goes through write(), which counts it.
  override end(...args: unknown[]): this {
    (super.end as (...args: unknown[]) => this).apply(this, args);
    if (this.timer === undefined) return this;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.req.complete) setImmediate(resetOnceAnswered, this.stream);
    return this;
  }
}

/** The bytes of a chunk written as Node writes it. */
function byteLength(chunk: string | Uint8Array, encoding: unknown): number {
  if (typeof chunk !== 'string') return chunk.byteLength;
  return Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
}

/** A request waiting to be served while its session holds too many unsent bytes. */
interface Waiting {
  req: Http2ServerRequest;
  res: Http2Response;
  since: number;
  bodyBytes: number;
}

/** What the service keeps of each session. */
interface SessionState {
  /** Streams opened, and those its client reset before they were served. */
  streams: number;
  resets: number;
  /** Sent GOAWAY ENHANCE_YOUR_CALM: it takes no more streams. */
  refused: boolean;
  /** Streams open now. */
  open: number;
  /** Runs while no stream is open: the keep-alive timeout. */
  idle: NodeJS.Timeout | undefined;
  /** The answers being given, and the requests waiting for the session's unsent bytes to fall. */
  answers: Set<Http2Response>;
  waiting: Waiting[];
}

/** The bytes of answers the session holds, not yet sent. */
function unsentOf(state: SessionState): number {
  let bytes = 0;
  for (const res of state.answers) bytes += res.unsent;
  return bytes;
}

export class Http2Sessions {
  readonly server: Http2Server;
  readonly #handler: Handler;
  readonly #sessions = new Map<ServerHttp2Session, SessionState>();
  readonly #options: Http2SessionOptions;
  #closing = false;
  /** The bytes of request bodies served and whose streams are still open, in all sessions (maxBodyBytesServed). */
  #bodyBytesServed = 0;
  /** Looks at every session's answers and waiting requests while there are sessions. */
  #watch: NodeJS.Timeout | undefined;

  constructor(handler: Handler, options: Http2SessionOptions) {
    this.#handler = handler;
    this.#options = options;
    const { maxConcurrentStreams, maxHeaderListSize, maxClientResets: _, ...limits } = HTTP2_LIMITS;
    const serverOptions = {
      ...limits,
      settings: { maxConcurrentStreams, maxHeaderListSize },
      Http2ServerResponse: Http2Response,
    };
    // A request is served a turn after it came, once the frames read with it are taken in: a
    // stream its client reset at once (Rapid Reset) is closed by then, and costs the service nothing more.
    this.server = createServer(serverOptions, (req, res) =>
      setImmediate(this.#serve, req, res),
    ) as unknown as Http2Server;
    this.server.on('session', (session) => this.#begin(session));
    options.budget.add(() => this.#answers());
    this.server.on('checkContinue', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      continueWhenRead(req, res);
      this.server.emit('request', req, res);
    });
  }

  /** The answers being given in every session, for the memory budget. */
  *#answers(): Iterable<Http2Response> {
    for (const state of this.#sessions.values()) yield* state.answers;
  }

  /** Takes a connection whose client speaks HTTP/2: the preface was read, or ALPN chose h2. */
  accept(socket: Duplex): void {
    // node:http keeps a connection half open when its client ends its side, and answers it itself;
    // a session ends with its connection, as on node:http2's own server.
    socket.allowHalfOpen = false;
    // Once its session has ended the service's side (GOAWAY), what the client still sends is read
    // and dropped, REQUEST_TIMEOUT_MS at most: Node's session leaves the connection to its client.
    socket.once('finish', () => lingerThenClose(socket as Socket, this.#options.requestTimeoutMs));
    this.server.emit('connection', socket);
  }

  /**
   * Shutdown: each session gets a GOAWAY naming the last stream it will serve (streams the client
   * opens after it are refused, and it may send them elsewhere), and ends once those have ended.
   */
  close(): void {
    this.#closing = true;
    for (const session of this.#sessions.keys()) session.close();
  }

  #begin(session: ServerHttp2Session): void {
    const state: SessionState = {
      streams: 0,
      resets: 0,
      refused: false,
      open: 0,
      idle: undefined,
      answers: new Set(),
      waiting: [],
    };
    this.#sessions.set(session, state);
    this.#watch ??= setInterval(this.#look, Math.min(1000, this.#options.requestTimeoutMs / 4)).unref();
    session.once('close', () => {
      clearTimeout(state.idle);
      this.#sessions.delete(session);
      if (this.#sessions.size > 0) return;
      clearInterval(this.#watch);
      this.#watch = undefined;
    });
    // A session's errors (a peer that broke the protocol, a reset connection) end it; they are the client's.
    session.on('error', () => {});
    session.on('stream', (stream: ServerHttp2Stream) => this.#follow(session, state, stream));
    this.#idle(session, state);
    if (this.#closing) session.close();
  }

  /**
   * No stream open for the keep-alive timeout, whatever frames come meanwhile (a PING refreshes
   * Node's own timer): GOAWAY, which ends the session at once unless its client opened a stream
   * meanwhile; that one has the request timeout to end, then the connection is closed.
   */
  #idle(session: ServerHttp2Session, state: SessionState): void {
    state.idle = setTimeout(() => {
      session.close();
      setTimeout(() => session.destroy(), this.#options.requestTimeoutMs).unref();
    }, this.#options.keepAliveTimeoutMs).unref();
  }

  /**
   * Counts a stream of the session, and a reset by its client that came before the stream could be
   * served: Node tells of a new stream once the frames read with it are taken in, so a stream reset
   * at once (Rapid Reset) is already closed then.
   */
  #follow(session: ServerHttp2Session, state: SessionState, stream: ServerHttp2Stream): void {
    state.streams += 1;
    if (stream.destroyed) {
      this.#countReset(session, state);
      return;
    }
    state.open += 1;
    clearTimeout(state.idle);
    stream.once('close', () => {
      state.open -= 1;
      if (state.open === 0 && !session.closed) this.#idle(session, state);
    });
  }

  readonly #serve = (req: Http2ServerRequest, res: Http2ServerResponse): void => {
    const { stream } = req;
    // Reset by its client meanwhile (counted as it came, if it was then), or its session gone.
    if (stream.destroyed) return;
    if (stream.closed) {
      stream.destroy();
      return;
    }
    // Reset by its client (RST_STREAM) before its answer ends: with NO_ERROR, Node keeps the stream
    // until the writes it holds are done, which those waiting for the client's window never are (an
    // event stream's slot was never freed). Nobody can read that answer now.
    stream.once('aborted', () => process.nextTick(destroyStream, stream));
    const state = this.#sessions.get(stream.session as ServerHttp2Session);
    if (state === undefined || state.refused) {
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    const bodyBytes = stream.endAfterHeaders ? 0 : this.#bodyBytesOf(req);
    if (state.waiting.length > 0 || unsentOf(state) >= HTTP2_LIMITS.maxUnsentBytes || !this.#bodyFits(bodyBytes)) {
      // Streams reset while they wait are dropped here too: no more wait than may be open at once.
      if (state.waiting.length >= HTTP2_LIMITS.maxConcurrentStreams) {
        state.waiting = state.waiting.filter((waiting) => !waiting.req.stream.destroyed);
      }
      state.waiting.push({ req, res: res as Http2Response, since: performance.now(), bodyBytes });
      return;
    }
    this.#answer(state, req, res as Http2Response, bodyBytes);
  };

  /** What a request's body may hold: its declared length, or BODY_LIMIT when it declares none or is coded (it may decode to that). */
  #bodyBytesOf(req: Http2ServerRequest): number {
    const { bodyLimit } = this.#options;
    const { 'content-length': declared, 'content-encoding': coding } = req.headers;
    if (declared === undefined || coding !== undefined) return bodyLimit;
    const length = Number(declared);
    return length >= 0 && length < bodyLimit ? length : bodyLimit;
  }

  /** Whether a request with a body of so many bytes may be served now: always, if no other body is. */
  #bodyFits(bodyBytes: number): boolean {
    return (
      bodyBytes === 0 ||
      this.#bodyBytesServed === 0 ||
      this.#bodyBytesServed + bodyBytes <= HTTP2_LIMITS.maxBodyBytesServed
    );
  }

  #answer(state: SessionState, req: Http2ServerRequest, res: Http2Response, bodyBytes: number): void {
    const { stream } = req;
    // A request that waited has the whole request timeout again once served.
    res.progressAt = performance.now();
    state.answers.add(res);
    this.#bodyBytesServed += bodyBytes;
    stream.once('close', () => {
      state.answers.delete(res);
      // An answer cut short never ends: its timer would hold it, and its body, for the request timeout.
      clearTimeout(res.timer);
      if (bodyBytes === 0) {
        this.#serveWaiting(state);
        return;
      }
      // Any session's requests may be waiting for these bytes.
      this.#bodyBytesServed -= bodyBytes;
      for (const waiting of this.#sessions.values()) this.#serveWaiting(waiting);
    });
    if (!stream.endAfterHeaders) res.timer = this.#requestTimer(req, res);
    this.#handler(req, res);
  }

  /**
   * Serves the requests that wait, in turn, while the session's unsent bytes are under the bound and
   * the next one's body fits the bound of all sessions.
   */
  #serveWaiting(state: SessionState): void {
    while (state.waiting.length > 0 && unsentOf(state) < HTTP2_LIMITS.maxUnsentBytes) {
      const next = state.waiting[0] as Waiting;
      if (!next.req.stream.destroyed && !this.#bodyFits(next.bodyBytes)) return;
      state.waiting.shift();
      if (!next.req.stream.destroyed) this.#answer(state, next.req, next.res, next.bodyBytes);
    }
  }

  /**
   * Resets each stream that made no progress for the request timeout, whatever else its session
   * does: an answer none of whose bytes went out (its client's window stays closed), a request that
   * waited that long to be served.
   */
  readonly #look = (): void => {
    const now = performance.now();
    const limit = this.#options.requestTimeoutMs;
    for (const state of this.#sessions.values()) {
      for (const res of state.answers) {
        const unsent = res.unsent;
        const sent = res.given - unsent;
        if (unsent === 0 || sent > res.sentSeen) {
          res.sentSeen = sent;
          res.progressAt = now;
        } else if (now - res.progressAt >= limit) {
          res.cancel();
        }
      }
      while (state.waiting.length > 0 && now - (state.waiting[0] as Waiting).since >= limit) {
        (state.waiting.shift() as Waiting).req.stream.close(constants.NGHTTP2_CANCEL);
      }
      this.#serveWaiting(state);
    }
  };

  /**
   * A request whose body has not all arrived within the request timeout gets the 408 envelope, as
   * over HTTP/1.1, while the service is still reading it; else its stream is reset.
   */
  #requestTimer(req: Http2ServerRequest, res: Http2ServerResponse): NodeJS.Timeout {
    return setTimeout(() => {
      if (req.complete || res.writableEnded || req.stream.destroyed) return;
      // Sent whole (END_STREAM) but not read yet, as while a fault holds the request: it has arrived.
      if (req.stream.state.remoteClose === 1) return;
      // Fastify reads the body and listens for its errors: it answers this one with the envelope.
      if (!res.headersSent && req.listenerCount('error') > 0) req.emit('error', apiError(408));
      else req.stream.close(constants.NGHTTP2_CANCEL);
    }, this.#options.requestTimeoutMs).unref();
  }

  /**
   * A stream its client reset before it was served. Past the limit, and once they are more than
   * half of the session's streams, the session gets GOAWAY ENHANCE_YOUR_CALM: the streams the
   * client opens after it are refused by nghttp2 without reaching the service. The connection ends
   * a little later: closed at once with the client's frames still unread, it would be reset, and
   * the GOAWAY lost with it.
   */
  #countReset(session: ServerHttp2Session, state: SessionState): void {
    state.resets += 1;
    if (state.refused || state.resets <= HTTP2_LIMITS.maxClientResets || 2 * state.resets <= state.streams) return;
    state.refused = true;
    session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    setTimeout(() => session.destroy(), GOAWAY_GRACE_MS).unref();
  }
}
