import { hostname } from 'node:os';
import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type Bindings, type ChildLoggerOptions, type DestinationStream, type LevelWithSilent, levels } from 'pino';
import { jsonString } from '../lib/json-text.js';
import { turnClock } from '../lib/turn-clock.js';

const INFO = levels.values.info as number;

/** What a line begins with, to its request id: its `time` (the epoch's milliseconds, as pino writes it) made once per turn of the event loop. */
const BINDINGS = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())},"request_id":"`;
const lineHead = turnClock(() => `{"level":${INFO},"time":${Date.now()}${BINDINGS}`);

/** How many methods have their piece of the line kept: any token is a method over HTTP/2. */
const KEPT_METHODS = 64;

/** What else must know of every finished request: the route template (null for none) and its duration. */
export type CompletionListener = (
  request: FastifyRequest,
  reply: FastifyReply,
  route: string | null,
  ms: number,
) => void;

/** The trace a request belongs to, and the service's own span of it, for its log line. */
export interface TraceIds {
  traceId: string;
  spanId: string;
}

/** A request's trace, or null when it has none. */
export type TraceIdsOf = (request: FastifyRequest) => TraceIds | null;

/** The faults injected into a request, as its line names them (`delay,abort`: plain words), or null for none. */
export type FaultsOf = (request: FastifyRequest) => string | null;

/** The events a request's stream sent, or null for a request that is no stream. */
export type EventsSentOf = (request: FastifyRequest) => number | null;

/**
 * A request's logger: a pino child with the request's id, made only once something logs through
 * it. Most requests never do (their one line is `RequestLog`'s), and making a child for each
 * costs more than the rest of their logging.
 */
class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  #log(level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace', args: unknown[]): void {
    const logger = this.#logger;
    (logger[level] as (...args: unknown[]) => void).apply(logger, args);
  }

  get level(): string {
    return this.#logger.level;
  }

  set level(level: string) {
    this.#logger.level = level;
  }

  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }

  error(...args: unknown[]): void {
    this.#log('error', args);
  }

  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }

  info(...args: unknown[]): void {
    this.#log('info', args);
  }

  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }

  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: each request's logger, made when first used (see `RequestLogger`). */
export function requestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new RequestLogger(logger, bindings, options);
}

/**
 * The end of every request, on every path (routes, 404/405, and errors raised before routing),
 * called by Fastify once the response has finished: its one JSON log line, and the listeners that
 * count it (metrics) or wait for it (draining), in one place rather than a hook each.
 *
 * The line's `request_id` is the id in the X-Request-Id header and in any error envelope. A request
 * that failed unexpectedly is logged through pino at error level, with the error and its stack.
 * Every other line is written straight to pino's destination, in pino's own format: made by
 * joining strings, with the fields known to be safe (the id, the route, the numbers) written as
 * they are, it costs a fraction of a child logger's generic serialisation. A test holds it to the
 * line pino writes for the same fields.
 */
export class RequestLog extends LogController {
  readonly #listeners: CompletionListener[] = [];
  readonly #stream: DestinationStream;
  readonly #enabled: boolean;
  /** The line's pieces from the method to the url, and from the route to the status, made once for each method and route. */
  readonly #methodPieces = new Map<string, string>();
  readonly #routePieces = new Map<string | null, string>([[null, ',"route":null,"status":']]);
  #traceIdsOf: TraceIdsOf = () => null;
  /** Null unless faults are injected: then a line names them. */
  #faultsOf: FaultsOf | null = null;
  #eventsSentOf: EventsSentOf = () => null;
  /** Whether lines name the request's version of HTTP: where HTTP/2 is served beside HTTP/1.1. */
  readonly #httpVersion: boolean;

  /** `stream` and `level` are those of the app's pino logger; `httpVersion`: lines name the version of HTTP. */
  constructor(stream: DestinationStream, level: LevelWithSilent, httpVersion = false) {
    super({ requestIdLogLabel: 'request_id' });
    this.#stream = stream;
    this.#enabled = level !== 'silent' && (levels.values[level] ?? Number.POSITIVE_INFINITY) <= INFO;
    this.#httpVersion = httpVersion;
  }

  /** Adds a listener, called for every finished request before its log line is written. */
  onCompleted(listener: CompletionListener): void {
    this.#listeners.push(listener);
  }

  /** Where each line's `trace_id` and `span_id` come from; without it, lines have none. */
  traceIdsOf(find: TraceIdsOf): void {
    this.#traceIdsOf = find;
  }

  /** Where each line's `fault` comes from, when faults are injected. */
  faultsOf(find: FaultsOf): void {
    this.#faultsOf = find;
  }

  /** Where a stream's line finds the events it sent (`events_sent`). */
  eventsSentOf(find: EventsSentOf): void {
    this.#eventsSentOf = find;
  }

  #methodPiece(method: string): string {
    let piece = this.#methodPieces.get(method);
    if (piece === undefined) {
      piece = `,"method":${jsonString(method)},"url":`;
      if (this.#methodPieces.size < KEPT_METHODS) this.#methodPieces.set(method, piece);
    }
    return piece;
  }

  #routePiece(route: string | null): string {
    let piece = this.#routePieces.get(route);
    if (piece === undefined) {
      piece = `,"route":"${route}","status":`;
      this.#routePieces.set(route, piece);
    }
    return piece;
  }

  // The completed line says all there is to say; a second line per request would double the volume.
  override incomingRequest(): void {}

  // A stream whose client left before its end is a request like another: its one line says so.
  override streamError(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE')
      super.streamError(error, request, reply);
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const route = request.is404 ? null : (request.routeOptions.url ?? null);
    const ms = reply.elapsedTime;
    for (const listener of this.#listeners) listener(request, reply, route, ms);
    const durationMs = Math.round(ms * 1000) / 1000;
    const failure = request.failure ?? error;
    const trace = failure != null || this.#enabled ? this.#traceIdsOf(request) : null;
    const fault = this.#faultsOf === null ? null : this.#faultsOf(request);
    const eventsSent = this.#eventsSentOf(request);
    // A gRPC call's status, as its grpc-status says it; undefined on a request of no gRPC route.
    const grpcStatus = request.grpcCode ?? null;
    // "1.1" or "2.0", as Node's parser read it.
    const version = this.#httpVersion ? request.raw.httpVersion : undefined;
    if (failure != null) {
      const ids = trace === null ? {} : { trace_id: trace.traceId, span_id: trace.spanId };
      const line = {
        ...ids,
        method: request.method,
        url: request.originalUrl,
        ...(version !== undefined && { http_version: version }),
        route,
        status: reply.statusCode,
        ...(fault !== null && { fault }),
        ...(eventsSent !== null && { events_sent: eventsSent }),
        ...(grpcStatus !== null && { grpc_status: grpcStatus }),
      };
      request.log.error({ ...line, duration_ms: durationMs, err: failure }, 'request failed');
    } else if (this.#enabled) {
      // The ids are lower-case hex, written as they are.
      const ids = trace === null ? '' : `,"trace_id":"${trace.traceId}","span_id":"${trace.spanId}"`;
      this.#stream.write(
        `${lineHead()}${request.id}"${ids}${this.#methodPiece(request.method)}${jsonString(request.originalUrl)}` +
          // As sent: /api/v1/hello, not the /api/hello it was routed as.
          `${version === undefined ? '' : `,"http_version":"${version}"`}${this.#routePiece(route)}` +
          `${reply.statusCode}${fault === null ? '' : `,"fault":"${fault}"`}` +
          `${eventsSent === null ? '' : `,"events_sent":${eventsSent}`}` +
          `${grpcStatus === null ? '' : `,"grpc_status":${grpcStatus}`}` +
          `,"duration_ms":${durationMs},"msg":"request completed"}\n`,
      );
    }
  }
}
