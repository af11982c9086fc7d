import { createServer as createHttpServer, type Server as HttpServer, type RequestListener } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyServerFactory } from 'fastify';
import type { MemoryBudget } from '../lib/memory-budget.js';
import type { ServerCertificate } from './certificates.js';
import { connectionKey } from './held-connections.js';
import { Http2Sessions } from './http2-sessions.js';
import { ROUTABLE_METHODS, UNROUTABLE_METHOD } from './socket-answers.js';

/**
 * The server the service listens with, for the protocols configured. With neither HTTP2 nor TLS it
 * is Fastify's own node:http server, untouched. Otherwise it is Node's node:http (cleartext) or
 * node:https (TLS, 1.2 and 1.3) server as Fastify would make it, so that HTTP/1.1 is served exactly
 * as without them, and with HTTP2 its connections that speak HTTP/2 are handed to the sessions of
 * `Http2Sessions`: in cleartext those that open with the HTTP/2 preface (prior knowledge, h2c),
 * over TLS those for which ALPN chose h2.
 */

/** The HTTP/2 connection preface (RFC 9113, 3.4), which a client with prior knowledge sends first. */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface ProtocolOptions {
  http2: boolean;
  /** The certificate served, or null for cleartext. */
  certificate: ServerCertificate | null;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** BODY_LIMIT, which bounds what HTTP/2 requests with bodies hold together. */
  bodyLimit: number;
  /** The process's memory budget, which HTTP/2's unsent answers count against. */
  budget: MemoryBudget;
}

/** Fastify's server options the factory applies as Fastify applies them to its own server. */
interface FastifyServerOptions {
  http?: object;
  keepAliveTimeout: number;
  requestTimeout: number;
  connectionTimeout: number;
}

/** The answer to a request, over HTTP/1.1 or HTTP/2: Fastify's handler takes both. */
type Handler = RequestListener & ((request: Http2ServerRequest, response: Http2ServerResponse) => void);

const ignoreError = () => {};

/**
 * Reads the first bytes of a cleartext connection until they are the HTTP/2 preface, or cannot be
 * (a byte differs), and hands the connection over with those bytes unread: to `http2` or `http1`.
 * A connection that says nothing for the headers timeout gets `silent` instead. The connection
 * keeps an `error` listener for its whole life, across the hand-over: a client may reset it at any
 * moment, before its new owner listens (or after it stopped), and an `error` event no one listens
 * to ends the process.
 */
function sniffPreface(
  socket: Socket,
  timeoutMs: number,
  sniffing: Set<Socket>,
  http1: (socket: Socket) => void,
  http2: (socket: Socket) => void,
  silent: (socket: Socket) => void,
): void {
  let seen: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => {
    stop();
    silent(socket);
  }, timeoutMs);
  sniffing.add(socket);
  const stop = () => {
    sniffing.delete(socket);
    clearTimeout(timer);
    socket.off('readable', read);
    socket.off('end', gone);
    socket.off('close', stop);
  };
  const gone = () => {
    stop();
    socket.destroy();
  };
  const read = () => {
    for (let chunk: Buffer | null = socket.read(); chunk !== null; chunk = socket.read()) {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    }
    const n = Math.min(seen.length, PREFACE.length);
    const preface = seen.compare(PREFACE, 0, n, 0, n) === 0;
    if (preface && seen.length < PREFACE.length) return;
    stop();
    // Read ahead: the HTTP/1.1 parser or the session reads these bytes first.
    if (seen.length > 0) socket.unshift(seen);
    if (preface) http2(socket);
    else {
      http1(socket);
      socket.resume();
    }
  };
  socket.on('readable', read);
  socket.once('end', gone);
  // A reset destroys the socket, whose close then stops the reading.
  socket.on('error', ignoreError);
  // Closed meanwhile (shutdown closes the connections that have sent nothing): nothing to wait for.
  socket.once('close', stop);
}

/**
 * Hands each HTTP/2 connection of `server` to `sessions`, and the others to the server's own
 * HTTP/1.1 listener; `event` is where the server takes its connections.
 */
function divertHttp2(server: HttpServer | HttpsServer, sessions: Http2Sessions, options: ProtocolOptions): void {
  const event = options.certificate === null ? 'connection' : 'secureConnection';
  const [http1] = server.listeners(event) as ((socket: Socket) => void)[];
  if (http1 === undefined) throw new Error(`node:http has no ${event} listener to take HTTP/1.1 from`);
  server.removeListener(event, http1);
  const toHttp1 = (socket: Socket) => http1.call(server, socket);
  const toHttp2 = (socket: Socket) => sessions.accept(socket);
  /** The cleartext connections whose first bytes are being read. */
  const sniffing = new Set<Socket>();
  if (options.certificate !== null) {
    server.on(event, (socket: TLSSocket) => (socket.alpnProtocol === 'h2' ? toHttp2(socket) : toHttp1(socket)));
  } else {
    // A connection that says nothing gets the HTTP/1.1 408 it gets without HTTP/2, from the same handler.
    const timedOut = (socket: Socket) =>
      server.emit(
        'clientError',
        Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }),
        socket,
      );
    server.on(event, (socket: Socket) =>
      sniffPreface(socket, options.headersTimeoutMs, sniffing, toHttp1, toHttp2, timedOut),
    );
  }
  // Closing the server (shutdown) sends each session its GOAWAY, and closes the connections still
  // sending the preface: no request is on them, and a session would be refused any.
  beforeClose(server, () => {
    sessions.close();
    for (const socket of sniffing) socket.destroy();
  });
}

/** Runs `first` when the server is closed (shutdown), before Node's own close. */
function beforeClose(server: HttpServer | HttpsServer, first: () => void): void {
  const close = server.close;
  server.close = function (this: typeof server, callback?: (error?: Error) => void) {
    first();
    return close.call(this, callback);
  } as typeof server.close;
}

/**
 * Closes, when the server is closed (shutdown), the connections still in their TLS handshake: no
 * request is on them, and each would hold the shutdown up until its handshake timeout. A
 * connection is known by its client's address and port, which the TLS socket made of it shares.
 */
function closeHandshakesOnClose(server: HttpsServer): void {
  const handshaking = new Map<string, Socket>();
  server.on('connection', (socket: Socket) => {
    const at = connectionKey(socket);
    handshaking.set(at, socket);
    socket.once('close', () => {
      if (handshaking.get(at) === socket) handshaking.delete(at);
    });
  });
  server.on('secureConnection', (socket: TLSSocket) => handshaking.delete(connectionKey(socket)));
  beforeClose(server, () => {
    for (const socket of handshaking.values()) socket.destroy();
  });
}

/**
 * Fastify's `serverFactory` for HTTP2, TLS or both. With neither, the service keeps Fastify's own
 * node:http server and does not load this module.
 */
export function protocolServerFactory(options: ProtocolOptions): FastifyServerFactory {
  return (handler, fastify) => {
    const { http, keepAliveTimeout, requestTimeout, connectionTimeout } = fastify as unknown as FastifyServerOptions;
    const serve = handler as Handler;
    const { certificate } = options;
    const server: HttpServer | HttpsServer =
      certificate === null
        ? createHttpServer({ ...http }, serve)
        : createHttpsServer(
            {
              ...http,
              ...certificate.serverOptions,
              ALPNProtocols: options.http2 ? ['h2', 'http/1.1'] : ['http/1.1'],
              // A connection that has not finished its handshake within the headers timeout is closed.
              handshakeTimeout: options.headersTimeoutMs,
            },
            serve,
          );
    // As Fastify sets its own server.
    server.keepAliveTimeout = keepAliveTimeout;
    server.requestTimeout = requestTimeout;
    server.setTimeout(connectionTimeout);
    if (certificate !== null) {
      // A handshake that fails has no HTTP to answer in: node:https would hand it to the HTTP/1.1
      // client errors, whose answers are HTTP text.
      server.removeAllListeners('tlsClientError');
      server.on('tlsClientError', (_error: Error, socket: TLSSocket) => socket.destroy());
      closeHandshakesOnClose(server as HttpsServer);
    }
    if (options.http2) {
      // Over HTTP/2 any token is a method: one Fastify's router cannot route is refused (socket-answers.ts).
      const routed = (request: Http2ServerRequest, response: Http2ServerResponse): void => {
        if (ROUTABLE_METHODS.has(request.method)) serve(request, response);
        else server.emit(UNROUTABLE_METHOD, request, response);
      };
      const sessions = new Http2Sessions(routed, {
        requestTimeoutMs: options.requestTimeoutMs,
        keepAliveTimeoutMs: options.keepAliveTimeoutMs,
        bodyLimit: options.bodyLimit,
        budget: options.budget,
      });
      // What Node would answer by itself, with a bare status, goes where it goes over HTTP/1.1: an
      // Expect it cannot meet, and CONNECT.
      for (const event of ['checkExpectation', 'connect'] as const) {
        sessions.server.on(event, (request: Http2ServerRequest, response: Http2ServerResponse) => {
          server.emit(ROUTABLE_METHODS.has(request.method) ? event : UNROUTABLE_METHOD, request, response);
        });
      }
      divertHttp2(server, sessions, options);
    }
    return server as unknown as HttpServer;
  };
}
