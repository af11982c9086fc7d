import {
  constants,
  createServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Duplex } from 'node:stream';
import { apiError } from '../errors.js';

/**
 * HTTP/2 for the service: every session held to the limits below, each stream to the request
 * timeout, an idle session closed, and on shutdown a GOAWAY to each session, which then ends once
 * its streams have. Sessions are made on connections handed over (`accept`) by the server that
 * listens, once it knows they speak HTTP/2: this server never listens itself.
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
   * Streams a client may reset (RST_STREAM) in a session, beyond which, once they are more than
   * half of its streams, the session is closed with GOAWAY ENHANCE_YOUR_CALM (Rapid Reset,
   * CVE-2023-44487): a client whose streams mostly end as they should never comes near it.
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
} as const;

export interface Http2SessionOptions {
  /** The time a stream has to send its whole request, as REQUEST_TIMEOUT_MS is for an HTTP/1.1 request. */
  requestTimeoutMs: number;
  /** The time a stream on which nothing moves may stay open: a client that stopped reading, say. */
  streamIdleTimeoutMs: number;
  /** The time a session with no open stream may stay, as KEEP_ALIVE_TIMEOUT_MS is for an HTTP/1.1 connection. */
  keepAliveTimeoutMs: number;
}

type Handler = (request: Http2ServerRequest, response: Http2ServerResponse) => void;

/** What the service keeps of each session: its streams, those open, and those its client reset. */
interface SessionState {
  streams: number;
  open: number;
  resets: number;
}

export class Http2Sessions {
  readonly server: Http2Server;
  readonly #sessions = new Map<ServerHttp2Session, SessionState>();
  readonly #options: Http2SessionOptions;
  /** Streams the service reset itself. */
  readonly #cancelled = new WeakSet<ServerHttp2Stream>();
  #closing = false;

  constructor(handler: Handler, options: Http2SessionOptions) {
    this.#options = options;
    const { maxConcurrentStreams, maxHeaderListSize, maxClientResets: _, ...limits } = HTTP2_LIMITS;
    this.server = createServer({ ...limits, settings: { maxConcurrentStreams, maxHeaderListSize } }, (req, res) => {
      if (!req.stream.endAfterHeaders) this.#watchBody(req, res);
      handler(req, res);
    });
    this.server.on('session', (session) => this.#begin(session));
    this.server.on('stream', (stream: ServerHttp2Stream) => this.#follow(stream));
  }

  /** Takes a connection whose client speaks HTTP/2: the preface was read, or ALPN chose h2. */
  accept(socket: Duplex): void {
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
    const state: SessionState = { streams: 0, open: 0, resets: 0 };
    this.#sessions.set(session, state);
    session.once('close', () => this.#sessions.delete(session));
    // A session's errors (a peer that broke the protocol, a reset connection) end it; they are the client's.
    session.on('error', () => {});
    session.setTimeout(this.#options.keepAliveTimeoutMs, () => {
      if (state.open === 0) session.close();
    });
    if (this.#closing) session.close();
  }

  /** Counts the stream as open until it closes, and a reset by its client against the session. */
  #follow(stream: ServerHttp2Stream): void {
    const session = stream.session as ServerHttp2Session | undefined;
    const state = session === undefined ? undefined : this.#sessions.get(session);
    if (session === undefined || state === undefined) return;
    state.streams += 1;
    state.open += 1;
    stream.setTimeout(this.#options.streamIdleTimeoutMs, () => this.#cancel(stream));
    stream.once('close', () => {
      state.open -= 1;
      if (stream.rstCode === constants.NGHTTP2_NO_ERROR || this.#cancelled.has(stream)) return;
      state.resets += 1;
      const { maxClientResets } = HTTP2_LIMITS;
      if (state.resets > maxClientResets && 2 * state.resets > state.streams && !session.destroyed) {
        session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
        session.destroy();
      }
    });
  }

  /** The service gives up on a stream: RST_STREAM CANCEL, which is no reset by the client. */
  #cancel(stream: ServerHttp2Stream): void {
    this.#cancelled.add(stream);
    stream.close(constants.NGHTTP2_CANCEL);
  }

  /**
   * A request whose body has not all arrived within the request timeout gets the 408 envelope,
   * as over HTTP/1.1, while the service is still reading it. A request answered before its whole
   * body came (that 408, a 413, a 404 to a POST) is then reset with NO_ERROR, which tells the
   * client to stop sending it (RFC 9113, 8.1): Node does so by itself only for a body never read.
   */
  #watchBody(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const { stream } = req;
    const timer = setTimeout(() => {
      if (req.complete || res.writableEnded) return;
      // Fastify reads the body and listens for its errors: it answers this one with the envelope.
      if (!res.headersSent && req.listenerCount('error') > 0) req.emit('error', apiError(408));
      else this.#cancel(stream);
    }, this.#options.requestTimeoutMs);
    timer.unref();
    req.once('end', () => clearTimeout(timer));
    stream.once('close', () => clearTimeout(timer));
    stream.once('finish', () => {
      clearTimeout(timer);
      if (!req.complete) setImmediate(resetOnceAnswered, stream);
    });
  }
}

/**
 * Resets a stream with NO_ERROR once the last frame of its answer (END_STREAM) has gone out, as
 * RFC 9113 asks: the answer may still be waiting for the client's flow-control window.
 */
function resetOnceAnswered(stream: ServerHttp2Stream): void {
  if (stream.closed || stream.destroyed) return;
  if (stream.state.localClose === 1) stream.close(constants.NGHTTP2_NO_ERROR);
  else setTimeout(resetOnceAnswered, 10, stream);
}
