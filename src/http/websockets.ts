import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import { WebSocket, WebSocketServer } from 'ws';
import { type ApiError, handshakeError } from '../errors.js';
import type { MemoryBudget } from '../lib/memory-budget.js';
import type { RequestLog } from '../logging/request-log.js';
import type { HeldConnections } from './held-connections.js';

/**
 * The WebSocket echo's connections, from the handshake the route has checked to their end: the
 * `101` (written by `ws`, with the headers the request's hooks gave its reply), every message sent
 * back as it came and every ping answered, the limits (message size and fragments, unsent bytes,
 * pings unanswered), one log line per connection at its end, the counts in `/metrics`, and the
 * close with 1001 on shutdown.
 */

export interface WebSocketSettings {
  maxConnections: number;
  /** The largest message, inflated: a larger one closes the connection with 1009. */
  maxMessageBytes: number;
  /** Unsent bytes past which a client is not read until it reads. */
  maxBufferedBytes: number;
  pingIntervalMs: number;
  permessageDeflate: boolean;
}

/** One open connection and what it carried. */
interface Connection {
  readonly ws: WebSocket;
  readonly socket: Socket;
  readonly id: string;
  readonly route: string | null;
  readonly opened: number;
  received: number;
  sent: number;
  bytesReceived: number;
  bytesSent: number;
  /** Whether it answered the last ping (or has had none yet). */
  alive: boolean;
  /** Whether reading it is stopped until its client reads what it was sent. */
  held: boolean;
}

/** Head fields of the reply that say nothing of a 101 or belong to the connection ws describes. */
const NOT_ON_101 = new Set(['connection', 'content-length', 'content-type', 'transfer-encoding', 'upgrade']);

/** The header whose refusal by ws names it, as a validation detail: ws words its refusals as "... Sec-WebSocket-X header". */
const NAMED_HEADER = /Sec-WebSocket-[A-Za-z]+/;

const EMPTY = Buffer.alloc(0);

/** The close of a connection the memory budget sheds: 1013, Try Again Later. */
const SHED_CODE = 1013;
const SHED_REASON = 'The service holds too much unread data; reconnect later.';

/** Deflate as ws does it, but with no context kept between messages: memory per connection stays small. */
const DEFLATE = { serverNoContextTakeover: true, clientNoContextTakeover: true, threshold: 1024 } as const;

/**
 * A message may come in one fragment per this many bytes of WS_MAX_MESSAGE_BYTES (16,384 at 1 MiB):
 * ws holds some 110 bytes for each fragment until its message is whole (measured with ws 8.23), so
 * a message's fragments hold no more than about twice what its bytes may.
 */
const BYTES_PER_FRAGMENT = 64;

/** The most fragments a message may come in, under a message limit of `maxMessageBytes`. */
function maxFragments(maxMessageBytes: number): number {
  return Math.ceil(maxMessageBytes / BYTES_PER_FRAGMENT);
}

/** The closes for a message past the limits ws enforces, each with the reason the service gives it. */
export function messageLimitCloses(maxMessageBytes: number) {
  return {
    tooLarge: { code: 1009, reason: `A message may be at most ${maxMessageBytes} bytes.` },
    tooManyFragments: {
      code: 1008,
      reason: `A message may come in at most ${maxFragments(maxMessageBytes)} fragments.`,
    },
  } as const;
}

/**
 * ws's WebSocket, whose close for a message past a limit (`messageLimitCloses`) carries its reason,
 * which ws leaves out; a close ws echoes or the service sends keeps its own.
 */
function withLimitReasons(maxMessageBytes: number): typeof WebSocket {
  const reasons = new Map<number, string>(
    Object.values(messageLimitCloses(maxMessageBytes)).map(({ code, reason }) => [code, reason]),
  );
  return class extends WebSocket {
    override close(code?: number, reason?: string | Buffer): void {
      super.close(code, reason ?? (code === undefined ? undefined : reasons.get(code)));
    }
  };
}

export class WebSocketEcho {
  readonly #settings: WebSocketSettings;
  readonly #log: FastifyBaseLogger;
  readonly #requestLog: RequestLog;
  readonly #budget: MemoryBudget;
  readonly #connections: HeldConnections;
  readonly #server: WebSocketServer;
  readonly #open = new Set<Connection>();
  readonly #pinger: NodeJS.Timeout;
  /** The head lines of the 101 being written, and ws's refusal of the handshake being completed. */
  #head: readonly string[] = [];
  #refusal: string | null = null;
  #draining = false;
  /** Called once the last connection has ended, while draining. */
  #allEnded: (() => void) | null = null;
  /** Messages each way since start, for `/metrics`. */
  #received = 0;
  #sent = 0;

  constructor(
    settings: WebSocketSettings,
    log: FastifyBaseLogger,
    requestLog: RequestLog,
    memory: { budget: MemoryBudget; connections: HeldConnections },
  ) {
    this.#settings = settings;
    this.#log = log;
    this.#requestLog = requestLog;
    this.#budget = memory.budget;
    this.#connections = memory.connections;
    this.#server = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      maxPayload: settings.maxMessageBytes,
      maxFragments: maxFragments(settings.maxMessageBytes),
      // Pings are answered in #follow: ws would end, with no close, a client with 60 pongs unsent.
      autoPong: false,
      WebSocket: withLimitReasons(settings.maxMessageBytes),
      perMessageDeflate: settings.permessageDeflate ? DEFLATE : false,
      // No subprotocol is chosen: an echo speaks none.
      handleProtocols: () => false,
    });
    this.#server.on('headers', (lines: string[]) => lines.push(...this.#head));
    // Given this listener, ws tells what it refuses rather than writing its own plain-text answer.
    this.#server.on('wsClientError', (error: Error) => {
      this.#refusal = error.message;
    });
    this.#pinger = setInterval(() => this.#ping(), settings.pingIntervalMs).unref();
  }

  /**
   * Why no WebSocket can be opened now (shutting down, as many open as allowed, the memory budget
   * full, which counts the refusal), or null.
   */
  refusal(): { max: number } | 'draining' | 'memory' | null {
    if (this.#draining) return 'draining';
    if (this.#open.size >= this.#settings.maxConnections) return { max: this.#settings.maxConnections };
    return this.#budget.admits('websocket_refused') ? null : 'memory';
  }

  /**
   * Switches the connection of a handshake the route has found valid: the 101 carries the reply's
   * headers, and the request is logged, counted and its span ended as any other, with status 101.
   * Answers what ws refuses in it (a malformed Sec-WebSocket-Protocol or Sec-WebSocket-Extensions),
   * to be answered as every refusal is, or null once the connection is a WebSocket.
   */
  accept(request: FastifyRequest, reply: FastifyReply): ApiError | null {
    const socket = request.raw.socket;
    const head: string[] = [];
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined && !NOT_ON_101.has(name)) head.push(`${name}: ${String(value)}`);
    }
    this.#head = head;
    this.#refusal = null;
    let opened: WebSocket | null = null;
    // ws completes a handshake it finds valid, or refuses it, before handleUpgrade returns.
    this.#server.handleUpgrade(request.raw, socket, EMPTY, (ws) => {
      opened = ws;
    });
    const refusal = this.#refusal;
    this.#head = [];
    if (opened === null) {
      if (refusal === null) {
        // A client gone already: ws has destroyed the socket.
        reply.hijack();
        return null;
      }
      const field = NAMED_HEADER.exec(refusal)?.[0] ?? 'headers';
      const value = request.headers[field.toLowerCase()] ?? null;
      return handshakeError([{ field, message: 'is not valid', value }]);
    }
    reply.hijack();
    reply.code(101);
    this.#requestLog.requestCompleted(null, request, reply);
    this.#follow(opened, socket, request);
    return null;
  }

  #follow(ws: WebSocket, socket: Socket, request: FastifyRequest): void {
    const connection: Connection = {
      ws,
      socket,
      id: request.id,
      route: request.routeOptions.url ?? null,
      opened: performance.now(),
      received: 0,
      sent: 0,
      bytesReceived: 0,
      bytesSent: 0,
      alive: true,
      held: false,
    };
    this.#open.add(connection);
    // The close is written, then the connection reset at once: it waits behind what its client has
    // not read, which only a reset lets the kernel free, and which a client that reads has not left.
    this.#connections.switched(socket, 'websocket_closed', (reset) => {
      ws.close(SHED_CODE, SHED_REASON);
      reset();
    });
    const release = () => {
      if (!connection.held) return;
      connection.held = false;
      ws.resume();
    };
    // A client that sends and does not read is not read either until it has taken its echoes and
    // pongs; nor is any while the memory budget is full: the kernel takes megabytes of echoes for a
    // client that does not read before the process holds any.
    const holdIfBehind = () => {
      if (connection.held) return;
      if (ws.bufferedAmount > this.#settings.maxBufferedBytes) {
        connection.held = true;
        ws.pause();
        socket.once('drain', release);
      } else if (this.#budget.full) {
        connection.held = true;
        ws.pause();
        this.#budget.whenRoom(release);
      }
    };
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      connection.received += 1;
      connection.bytesReceived += data.length;
      this.#received += 1;
      ws.send(data, { binary: isBinary });
      connection.sent += 1;
      connection.bytesSent += data.length;
      this.#sent += 1;
      this.#budget.charge(data.length);
      holdIfBehind();
    });
    // However many come at once: what its pongs hold counts as its echoes do.
    ws.on('ping', (data: Buffer) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.pong(data);
      this.#budget.charge(data.length);
      holdIfBehind();
    });
    ws.on('pong', () => {
      connection.alive = true;
    });
    // The connection ends with 'close' whatever failed: ws has already sent the close code it chose.
    ws.on('error', () => {});
    ws.on('close', (code: number) => {
      this.#open.delete(connection);
      socket.off('drain', release);
      if (this.#open.size === 0) this.#allEnded?.();
      this.#log.info(
        {
          request_id: connection.id,
          route: connection.route,
          duration_ms: Math.round(performance.now() - connection.opened),
          messages_received: connection.received,
          messages_sent: connection.sent,
          bytes_received: connection.bytesReceived,
          bytes_sent: connection.bytesSent,
          close_code: code,
        },
        'websocket closed',
      );
    });
  }

  /** Ends each connection that did not answer the last ping, and pings the others. */
  #ping(): void {
    for (const connection of this.#open) {
      if (!connection.alive) {
        connection.ws.terminate();
        continue;
      }
      connection.alive = false;
      connection.ws.ping();
    }
  }

  /** `websocket_connections_open` and `websocket_messages_total`, read when `/metrics` is. */
  registerMetrics(registry: Registry): void {
    const echo = this;
    new Gauge({
      name: 'websocket_connections_open',
      help: 'WebSocket connections open.',
      registers: [registry],
      collect() {
        this.set(echo.#open.size);
      },
    });
    new Counter({
      name: 'websocket_messages_total',
      help: 'WebSocket messages, by direction: received from clients, sent to them.',
      labelNames: ['direction'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ direction: 'received' }, echo.#received);
        this.inc({ direction: 'sent' }, echo.#sent);
      },
    });
  }

  /**
   * Shutdown: no new WebSocket, and each open one closed with 1001; those whose clients have not
   * answered the close within `graceMs` are ended. Settles once every connection has ended and
   * been logged.
   */
  close(graceMs: number): Promise<void> {
    this.#draining = true;
    clearInterval(this.#pinger);
    if (this.#open.size === 0) return Promise.resolve();
    for (const { ws } of this.#open) ws.close(1001, 'The service is shutting down.');
    const timer = setTimeout(() => {
      for (const { ws } of this.#open) ws.terminate();
    }, graceMs).unref();
    return new Promise((resolve) => {
      this.#allEnded = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
