import { randomUUID } from 'node:crypto';
import { type IncomingMessage, METHODS, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { type ApiError, apiError, envelope, methodNotAllowed, unsupportedVersion } from '../errors.js';
import { lingerThenClose } from '../lib/linger.js';
import { named } from '../lib/shown.js';

/**
 * Answers on a socket where Node gives Fastify no request to reply to: errors on a connection
 * before there is a request (a malformed request, 400; another major version of HTTP, 505;
 * headers over the size limit, 431; a request timeout, 408), and CONNECT (405). Each is the
 * envelope with the fixed headers a reply would have, written straight to the socket, which then
 * closes within REQUEST_TIMEOUT_MS (`lingerThenClose`; over HTTP/2, a CONNECT's stream ends);
 * logged as one line. A pipelining client gets the answers to its earlier requests first,
 * in order. Later errors on the same connection (more bytes, its timeout) add nothing; once the
 * answer is written, they end the connection.
 */

/** The methods Fastify's router routes: Node's own list, which find-my-way keeps too. */
export const ROUTABLE_METHODS: ReadonlySet<string> = new Set(METHODS);

/** The event an HTTP/2 server emits, with the request and its response, for a method outside `ROUTABLE_METHODS`. */
export const UNROUTABLE_METHOD = 'unroutableMethod';

/** What an answer written to a socket takes from the response headers. */
export interface SocketHeaders {
  /** The fixed head lines of an answer, as HTTP lines, with its request id. */
  socketHead(id: string): string;
  /** A request's id: the client's X-Request-Id when it is a safe token, else a new one. */
  requestId(request: IncomingMessage): string;
  /** The methods the routes take, which a 405 names. */
  readonly methods: readonly string[];
}

/** What Node's parser tells of bytes it could not read as a request. */
interface ParseError {
  /** The bytes it was reading, and how far into them it got. */
  rawPacket?: Buffer;
  bytesParsed?: number;
}

/** A socket of Node's HTTP server: the response being written on it, with the later ones queued behind it. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * Whether the request line the parser refused names another major version of HTTP, well formed
 * (HTTP/3.0, not HTTP/x): the parser stops right after the version.
 */
function namesOtherMajorVersion(error: NodeJS.ErrnoException): boolean {
  const { rawPacket, bytesParsed } = error as ParseError;
  if (rawPacket === undefined || bytesParsed === undefined) return false;
  const version = /HTTP\/(\d)\.\d$/.exec(rawPacket.toString('latin1', Math.max(0, bytesParsed - 8), bytesParsed));
  return version !== null && version[1] !== '1';
}

/** The answer to an error on the connection. */
function clientErrorFor(error: NodeJS.ErrnoException): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return apiError(408);
    case 'HPE_HEADER_OVERFLOW':
      return apiError(431);
    case 'HPE_PAUSED_H2_UPGRADE': // the HTTP/2 connection preface
      return unsupportedVersion();
    case 'HPE_INVALID_VERSION':
      return namesOtherMajorVersion(error) ? unsupportedVersion() : apiError(400);
    default:
      return apiError(400);
  }
}

/**
 * Calls `write` once the socket has sent every response it owes for requests read in full,
 * each given `limitMs` (then the connection is dropped). A response to a request still being
 * read is not waited for: the error is about that request.
 */
function afterOwedResponses(socket: HttpSocket, limitMs: number, write: () => void): void {
  const owed = socket._httpMessage;
  if (owed == null || !owed.req.complete) {
    write();
    return;
  }
  const timer = setTimeout(() => socket.destroy(), limitMs).unref();
  const stop = () => clearTimeout(timer);
  socket.once('close', stop);
  owed.once('finish', () => {
    stop();
    socket.off('close', stop);
    // Node has handed the socket to the next queued response, if any, before this listener runs.
    afterOwedResponses(socket, limitMs, write);
  });
}

const ignoreError = () => {};

export class SocketAnswers {
  readonly #headers: SocketHeaders;
  /** Sockets with an answer under way, or written. */
  readonly #answering = new WeakSet<Socket>();

  constructor(headers: SocketHeaders) {
    this.#headers = headers;
  }

  /** Given to Fastify as `clientErrorHandler`: errors on a connection before there is a request. */
  get clientErrorHandler(): (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket) => void {
    const answers = this;
    return function (error, socket) {
      if (error.code === 'ECONNRESET' || socket.destroyed) return;
      answers.#answer(this, socket, clientErrorFor(error), randomUUID(), error.code ?? 'unknown');
    };
  }

  /**
   * A CONNECT asks for a tunnel, which this service, no proxy, does not offer: 405, naming the
   * methods it takes. Node hands the connection over with its own listeners removed; it closes
   * as every answered socket does. Over HTTP/2, where any token is a method, one the router does
   * not know (`FOO`, a lower-case `get`; `UNROUTABLE_METHOD`), which Fastify would answer without
   * the service's hooks, gets the 400 Node's HTTP/1.1 parser gets it (`HPE_INVALID_METHOD`), not
   * RFC 9110's 501: what a client sends wrong is no server error to whoever watches the 5xx.
   * Over HTTP/2 either is a stream of its own, answered on it, and the session goes on.
   */
  refuseMethods(app: FastifyInstance): void {
    app.server.on('connect', (request: IncomingMessage, socket: Socket | Http2ServerResponse) => {
      const refusal = methodNotAllowed('CONNECT', this.#headers.methods);
      const id = this.#headers.requestId(request);
      if (request.httpVersionMajor === 2) {
        this.#answerStream(app, socket as Http2ServerResponse, refusal, id, 'CONNECT');
        return;
      }
      const connection = socket as Socket;
      this.#answer(app, connection, refusal, id, 'CONNECT');
    });
    app.server.on(UNROUTABLE_METHOD, (request: IncomingMessage, response: Http2ServerResponse) => {
      const id = this.#headers.requestId(request);
      this.#answerStream(app, response, apiError(400), id, named(request.method ?? ''));
    });
  }

  /** The answer on an HTTP/2 stream: the same envelope and headers, as HTTP/2 fields. */
  #answerStream(
    app: FastifyInstance,
    response: Http2ServerResponse,
    error: ApiError,
    id: string,
    reason: string,
  ): void {
    const status = error.statusCode;
    app.log.info({ request_id: id, status, reason }, 'client error');
    const body = JSON.stringify(envelope(error, id));
    const fixed = this.#headers
      .socketHead(id)
      .split('\r\n')
      .filter((line) => line !== '')
      .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]);
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      ...Object.fromEntries(Object.entries(error.headers).map(([name, value]) => [name.toLowerCase(), value])),
      ...Object.fromEntries(fixed),
    });
    response.end(body);
  }

  #answer(app: FastifyInstance, socket: Socket, error: ApiError, id: string, reason: string): void {
    if (this.#answering.has(socket)) {
      if (socket.writableEnded) socket.destroy();
      return;
    }
    this.#answering.add(socket);
    // A client gone meanwhile (ECONNRESET) is no error of the service's: the socket may come from an
    // owner that no longer listens (Node after CONNECT, the read-ahead of the HTTP/2 preface).
    socket.on('error', ignoreError);
    const limitMs = app.server.requestTimeout;
    const read = (socket as HttpSocket)._httpMessage;
    if (read != null && !read.req.complete && read.headersSent) {
      // The request being read was answered before its body (a 404, 405 or 413): a second answer
      // would be taken for the next request's, so the connection only closes once the first is sent.
      if (read.writableFinished) lingerThenClose(socket, limitMs);
      else read.once('finish', () => lingerThenClose(socket, limitMs));
      return;
    }
    const status = error.statusCode;
    app.log.info({ request_id: id, status, reason }, 'client error');
    const body = JSON.stringify(envelope(error, id));
    const own = Object.entries(error.headers).map(([name, value]) => `${name}: ${value}\r\n`);
    afterOwedResponses(socket, limitMs, () => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
          'Content-Type: application/json; charset=utf-8\r\n' +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          own.join('') +
          this.#headers.socketHead(id) +
          'Connection: close\r\n\r\n' +
          body,
      );
      lingerThenClose(socket, limitMs);
    });
  }
}
