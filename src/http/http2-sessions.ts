import type { OutgoingHttpHeaders } from 'node:http';
import {
  constants,
  createServer,
  type Http2Server,
  Http2ServerRequest,
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
   * What an answer waiting for its client's flow-control window holds beside its unsent bytes, as
   * the memory budget counts it: its stream's and its handler's state (a gRPC server stream's is
   * some 60 KiB of heap and 30 of native memory). Flow control keeps what a client that reads
   * nothing leaves unsent out of every queue: a thousand such streams would otherwise hold some
   * 90 MiB the budget never saw.
   */
  waitingAnswerBytes: 64 * 1024,
  /**
   * Bytes a client may send on a stream before the service reads them (SETTINGS_INITIAL_WINDOW_SIZE,
   * HTTP/2's default): what a stream whose body is not being read holds at most.
   */
  initialWindowSize: 65_535,
  /**
   * Bytes of request bodies held at once across all sessions, each counted as its bytes arrive (a
   * body in a content coding, once it has all come, as BODY_LIMIT: what it may decode to) until its
   * stream closes: an answer can be as large as its request's body (the echo), and one its client
   * does not read is held, on the heap, until then. Beyond it, the service reads no more of any
   * session's bodies but its oldest one still coming (a quarter of the 128 MiB heap the Kubernetes
   * recipe gives); those held back are read again as bytes are let go, a session at a time in
   * turn. What sessions hold beyond it, each its oldest body and its streams' windows, the memory
   * budget counts.
   */
  maxBodyBytesServed: 32 * 1024 * 1024,
  /**
   * A session's share of them (an eighth: however many streams one declares large bodies on, the
   * others are read): beyond it, the service reads no more of the session's bodies but its oldest
   * one still coming, and not that one either while the bodies the session has whole (their answers
   * under way) hold as much. A body not read holds its stream's window (initialWindowSize) at most.
   */
  maxSessionBodyBytes: 4 * 1024 * 1024,
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

/** What the sessions' request bodies hold together, and the sessions some of whose bodies are not read for it. */
interface BodyPool {
  bytes: number;
  /** In the order they are to be read again: a session goes to the back each time its turn comes. */
  held: Set<Session>;
}

/**
 * A request over HTTP/2 whose body, once served, is counted against its session's share and the
 * pool as it arrives (compat pushes each chunk of the stream into the request), and is not read
 * while the session says so: its stream paused, its client's window for it stays closed.
 */
class Http2Request extends Http2ServerRequest {
  /** The session counting its body, from the moment it is served until its stream closes. */
  counted: Session | undefined;
  /** Bytes of its body counted: those that came, and for a body in a content coding, once it has all come, BODY_LIMIT. */
  bytes = 0;
  /** Its Content-Length: nghttp2 lets no more come. */
  declared = Number.POSITIVE_INFINITY;
  /** All of its body has come. */
  whole = false;
  /** Its body is in a content coding: what it decodes to is not what comes. */
  coded = false;
  /** Its answer, once served. */
  answer: Http2Response | undefined;

  override push(chunk: Buffer | null, encoding?: BufferEncoding): boolean {
    this.counted?.take(this, chunk);
    if (chunk !== null) this.answer?.bodyCame();
    return super.push(chunk, encoding);
  }

  // Paused by its session, its stream is resumed by the session, not by the body's reader.
  override _read(size: number): void {
    if (this.counted?.held.has(this) !== true) super._read(size);
  }
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
 * - its unsent bytes, and while there are any its state, held against the memory budget, which
 *   sheds it with RST_STREAM CANCEL.
 */
class Http2Response extends Http2ServerResponse<Http2Request> implements Holding {
  readonly action = 'stream_reset';
  /** The request timeout of a request with a body, until the answer ends. */
  timer: NodeJS.Timeout | undefined;
  /** Bytes of the answer's body given to the stream. */
  given = 0;
  /** Bytes of them sent when last looked at, and when that count last grew (or nothing was waiting). */
  sentSeen = 0;
  progressAt = performance.now();
  /** Its head said `content-length: 0`: held until its end, which sends it with END_STREAM. */
  #bodiless = false;
  /** Its request's body is a stream without a set end: its timer runs from the body's last chunk. */
  endless = false;

  /** A chunk of its request's body came: for a body without a set end, the request timer starts again. */
  bodyCame(): void {
    if (this.endless) this.timer?.refresh();
  }

  /** Bytes given to the stream and not sent yet: what its client's flow-control window holds back. */
  get unsent(): number {
    return this.stream.bufferSize;
  }

  get bytes(): number {
    const unsent = this.unsent;
    return unsent === 0 ? 0 : unsent + HTTP2_LIMITS.waitingAnswerBytes;
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
    const bytes = byteLength(chunk, rest[0]);
    // The empty body of a head held for its end: writing it would send the head without END_STREAM.
    if (this.#bodiless && bytes === 0 && !this.headersSent) {
      const done = rest.find((arg) => typeof arg === 'function');
      if (done !== undefined) process.nextTick(done as () => void);
      return true;
    }
    this.given += bytes;
    return (super.write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  }

  override setHeader(name: string, value: number | string | readonly string[]): this {
    if (name.toLowerCase() !== 'connection') super.setHeader(name, value);
    return this;
  }

  override writeHead(status: number, ...rest: [(string | OutgoingHttpHeaders)?, OutgoingHttpHeaders?]): this {
    const headers = rest.at(-1);
    if (typeof headers === 'object' && headers !== null) {
      delete headers.connection;
      // A head with no body after it goes out with its end, as one HEADERS frame with END_STREAM, not
      // followed by an empty DATA frame: a gRPC client reads a trailers-only answer (a status given
      // before any message) only so.
      if (!this.#bodiless && String(headers['content-length']) === '0') {
        this.#bodiless = true;
        for (const [name, value] of Object.entries(headers)) if (value !== undefined) this.setHeader(name, value);
        this.statusCode = status;
        return this;
      }
    }
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

/**
 * Holds a request to the request timeout from the last chunk of its body rather than from its
 * start: a body that is a stream of messages without a set end (a gRPC call streaming from its
 * client), reset once none has come for the request timeout.
 */
export function timeBodyByProgress(res: object): void {
  if (res instanceof Http2Response) res.endless = true;
}

/** The bytes of a chunk written as Node writes it. */
function byteLength(chunk: string | Uint8Array, encoding: unknown): number {
  if (typeof chunk !== 'string') return chunk.byteLength;
  return Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
}

/** A request waiting to be served while its session holds too many unsent bytes. */
interface Waiting {
  req: Http2Request;
  res: Http2Response;
  since: number;
}

/**
 * What the service keeps of each session; for the memory budget, what its requests' bodies hold
 * (counted, and in their streams unread), shed by ending the session.
 */
class Session implements Holding {
  readonly action = 'connection_reset';
  leaving = false;
  /** What its bodies held when last measured (`measure`). */
  bytes = 0;
  /** Streams opened, and those its client reset before they were served. */
  streams = 0;
  resets = 0;
  /** Sent GOAWAY ENHANCE_YOUR_CALM: it takes no more streams. */
  refused = false;
  /** Streams open now. */
  open = 0;
  /** Runs while no stream is open: the keep-alive timeout. */
  idle: NodeJS.Timeout | undefined;
  /** The answers being given, and the requests waiting for the session's unsent bytes to fall. */
  readonly answers = new Set<Http2Response>();
  waiting: Waiting[] = [];
  /** Bytes of bodies counted; those of the bodies come whole. */
  bodyBytes = 0;
  wholeBytes = 0;
  /** The bodies served and still coming, oldest first; those of them not read meanwhile. */
  readonly coming = new Set<Http2Request>();
  readonly held = new Set<Http2Request>();
  readonly http2: ServerHttp2Session;
  readonly #pool: BodyPool;
  readonly #bodyLimit: number;

  constructor(http2: ServerHttp2Session, pool: BodyPool, bodyLimit: number) {
    this.http2 = http2;
    this.#pool = pool;
    this.#bodyLimit = bodyLimit;
  }

  /** Measures what its requests' bodies hold: those counted, and what waits unread in their streams. */
  measure(): void {
    let bytes = this.bodyBytes;
    for (const { req } of this.waiting) bytes += req.stream.readableLength;
    for (const res of this.answers) bytes += res.stream.readableLength;
    this.bytes = bytes;
  }

  shed(): void {
    this.leaving = true;
    this.http2.destroy();
  }

  /** The bytes of answers the session holds, not yet sent. */
  get unsent(): number {
    let bytes = 0;
    for (const res of this.answers) bytes += res.unsent;
    return bytes;
  }

  /** Counts a served request's body from now on. */
  count(req: Http2Request): void {
    const { 'content-encoding': coding, 'content-length': length } = req.headers;
    req.coded = coding !== undefined;
    if (length !== undefined) req.declared = Number(length);
    req.counted = this;
    this.coming.add(req);
  }

  /** A chunk of a request's body, or its end (null). */
  take(req: Http2Request, chunk: Buffer | null): void {
    if (chunk === null) {
      this.#whole(req);
      return;
    }
    this.#add(req, chunk.length);
    // A body come whole is not held back: that would keep out nothing.
    if (req.bytes < req.declared && !this.#mayRead(req)) this.#hold(req);
  }

  #add(req: Http2Request, bytes: number): void {
    req.bytes += bytes;
    this.bodyBytes += bytes;
    this.#pool.bytes += bytes;
  }

  #whole(req: Http2Request): void {
    if (req.whole) return;
    req.whole = true;
    if (req.coded && req.bytes < this.#bodyLimit) this.#add(req, this.#bodyLimit - req.bytes);
    this.wholeBytes += req.bytes;
    this.coming.delete(req);
    this.held.delete(req);
    this.#readOldest();
  }

  /** Lets go of a request's body, its stream closed; whether it held bytes others may wait for. */
  release(req: Http2Request): boolean {
    if (req.counted !== this) return false;
    req.counted = undefined;
    this.bodyBytes -= req.bytes;
    this.#pool.bytes -= req.bytes;
    if (req.whole) this.wholeBytes -= req.bytes;
    this.coming.delete(req);
    this.held.delete(req);
    this.#readOldest();
    return req.bytes > 0;
  }

  /**
   * Whether more of a body may be read now: under the session's share and the pool's, any; over
   * either, its oldest one still coming, unless the bodies it has whole hold its share.
   */
  #mayRead(req: Http2Request): boolean {
    if (this.bodyBytes < HTTP2_LIMITS.maxSessionBodyBytes && this.#pool.bytes < HTTP2_LIMITS.maxBodyBytesServed) {
      return true;
    }
    return this.wholeBytes < HTTP2_LIMITS.maxSessionBodyBytes && this.coming.values().next().value === req;
  }

  #hold(req: Http2Request): void {
    this.held.add(req);
    req.stream.pause();
    this.#pool.held.add(this);
  }

  #read(req: Http2Request): void {
    this.held.delete(req);
    req.stream.resume();
  }

  /** The oldest body still coming is read again, if held and it may be. */
  #readOldest(): void {
    const oldest = this.coming.values().next().value;
    if (oldest !== undefined && this.held.has(oldest) && this.#mayRead(oldest)) this.#read(oldest);
  }

  /**
   * Reads again, oldest first, the held bodies that may be read, each counted as the window it may
   * bring before it is looked at again, while `room` lasts; the room left.
   */
  readHeld(room: number): number {
    let left = room;
    for (const req of this.held) {
      if (left <= 0 || this.bodyBytes + (room - left) >= HTTP2_LIMITS.maxSessionBodyBytes) break;
      this.#read(req);
      left -= HTTP2_LIMITS.initialWindowSize;
    }
    return left;
  }
}

export class Http2Sessions {
  readonly server: Http2Server;
  readonly #handler: Handler;
  readonly #sessions = new Map<ServerHttp2Session, Session>();
  readonly #options: Http2SessionOptions;
  #closing = false;
  readonly #pool: BodyPool = { bytes: 0, held: new Set() };
  /** Looks at every session's answers and waiting requests while there are sessions. */
  #watch: NodeJS.Timeout | undefined;

  constructor(handler: Handler, options: Http2SessionOptions) {
    this.#handler = handler;
    this.#options = options;
    const { maxConcurrentStreams, maxHeaderListSize, initialWindowSize, maxClientResets: _, ...limits } = HTTP2_LIMITS;
    const serverOptions = {
      ...limits,
      settings: { maxConcurrentStreams, maxHeaderListSize, initialWindowSize },
      Http2ServerRequest: Http2Request,
      Http2ServerResponse: Http2Response,
    };
    // A request is served a turn after it came, once the frames read with it are taken in: a
    // stream its client reset at once (Rapid Reset) is closed by then, and costs the service nothing more.
    this.server = createServer(serverOptions, (req, res) =>
      setImmediate(this.#serve, req, res),
    ) as unknown as Http2Server;
    this.server.on('session', (session) => this.#begin(session));
    options.budget.add(() => this.#holdings());
    this.server.on('checkContinue', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      continueWhenRead(req, res);
      this.server.emit('request', req, res);
    });
  }

  /** For the memory budget: the answers being given in every session, and each session's bodies. */
  *#holdings(): Iterable<Holding> {
    for (const state of this.#sessions.values()) {
      yield* state.answers;
      state.measure();
      yield state;
    }
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
    const state = new Session(session, this.#pool, this.#options.bodyLimit);
    this.#sessions.set(session, state);
    this.#watch ??= setInterval(this.#look, Math.min(1000, this.#options.requestTimeoutMs / 4)).unref();
    session.once('close', () => {
      clearTimeout(state.idle);
      this.#sessions.delete(session);
      this.#pool.held.delete(state);
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
  #idle(session: ServerHttp2Session, state: Session): void {
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
  #follow(session: ServerHttp2Session, state: Session, stream: ServerHttp2Stream): void {
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
    if (state.waiting.length > 0 || state.unsent >= HTTP2_LIMITS.maxUnsentBytes) {
      // Streams reset while they wait are dropped here too: no more wait than may be open at once.
      if (state.waiting.length >= HTTP2_LIMITS.maxConcurrentStreams) {
        state.waiting = state.waiting.filter((waiting) => !waiting.req.stream.destroyed);
      }
      state.waiting.push({ req: req as Http2Request, res: res as Http2Response, since: performance.now() });
      return;
    }
    this.#answer(state, req as Http2Request, res as Http2Response);
  };

  #answer(state: Session, req: Http2Request, res: Http2Response): void {
    const { stream } = req;
    // A request that waited has the whole request timeout again once served.
    res.progressAt = performance.now();
    state.answers.add(res);
    if (!stream.endAfterHeaders) state.count(req);
    stream.once('close', () => {
      state.answers.delete(res);
      // An answer cut short never ends: its timer would hold it, and its body, for the request timeout.
      clearTimeout(res.timer);
      // Any session's bodies may be held back for these bytes.
      if (state.release(req)) this.#readHeld();
      this.#serveWaiting(state);
    });
    if (!stream.endAfterHeaders) res.timer = this.#requestTimer(req, res);
    req.answer = res;
    this.#handler(req, res);
  }

  /** Serves the requests that wait, in turn, while the session's unsent bytes are under the bound. */
  #serveWaiting(state: Session): void {
    while (state.waiting.length > 0 && state.unsent < HTTP2_LIMITS.maxUnsentBytes) {
      const next = state.waiting.shift() as Waiting;
      if (!next.req.stream.destroyed) this.#answer(state, next.req, next.res);
    }
  }

  /**
   * Reads again the bodies held back while the pool has room, a session at a time in the order they
   * were held back, each going to the back once its turn has come: no session is read first each
   * time because it came first.
   */
  #readHeld(): void {
    if (this.#pool.held.size === 0) return;
    let room = HTTP2_LIMITS.maxBodyBytesServed - this.#pool.bytes;
    for (const state of [...this.#pool.held]) {
      if (room <= 0) return;
      const left = state.readHeld(room);
      this.#pool.held.delete(state);
      if (state.held.size > 0) this.#pool.held.add(state);
      room = left;
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
  #countReset(session: ServerHttp2Session, state: Session): void {
    state.resets += 1;
    if (state.refused || state.resets <= HTTP2_LIMITS.maxClientResets || 2 * state.resets <= state.streams) return;
    state.refused = true;
    session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    setTimeout(() => session.destroy(), GOAWAY_GRACE_MS).unref();
  }
}
