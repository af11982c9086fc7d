import { hostname } from 'node:os';
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type DestinationStream, type LevelWithSilent, levels } from 'pino';

const INFO = levels.values.info as number;

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

/**
 * The end of every request, on every path (routes, 404/405, and errors raised before routing),
 * called by Fastify once the response has finished: its one JSON log line, and the listeners that
 * count it (metrics) or wait for it (draining), in one place rather than a hook each.
 *
 * The line's `request_id` is the id in the X-Request-Id header and in any error envelope. A request
 * that failed unexpectedly is logged through pino at error level, with the error and its stack.
 * Every other line is written straight to pino's destination, in pino's own format: made by
 * joining strings, with the fields known to be safe (the id, the route, the numbers) written as
 * they are, it costs a fraction of a child logger's generic serialisation.
 */
export class RequestLog extends LogController {
  readonly #listeners: CompletionListener[] = [];
  readonly #stream: DestinationStream;
  readonly #enabled: boolean;
  readonly #prefix = `{"level":${INFO},"time":`;
  readonly #bindings = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())},"request_id":"`;
  #traceIdsOf: TraceIdsOf = () => null;
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

  // The completed line says all there is to say; a second line per request would double the volume.
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const route = request.is404 ? null : (request.routeOptions.url ?? null);
    const ms = reply.elapsedTime;
    for (const listener of this.#listeners) listener(request, reply, route, ms);
    const durationMs = Math.round(ms * 1000) / 1000;
    const failure = request.failure ?? error;
    const trace = failure != null || this.#enabled ? this.#traceIdsOf(request) : null;
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
      };
      request.log.error({ ...line, duration_ms: durationMs, err: failure }, 'request failed');
    } else if (this.#enabled) {
      // The ids are lower-case hex, written as they are.
      const ids = trace === null ? '' : `,"trace_id":"${trace.traceId}","span_id":"${trace.spanId}"`;
      this.#stream.write(
        `${this.#prefix}${Date.now()}${this.#bindings}${request.id}"${ids},"method":${JSON.stringify(request.method)}` +
          // As sent: /api/v1/hello, not the /api/hello it was routed as.
          `,"url":${JSON.stringify(request.originalUrl)}${version === undefined ? '' : `,"http_version":"${version}"`}` +
          `,"route":${route === null ? 'null' : `"${route}"`}` +
          `,"status":${reply.statusCode},"duration_ms":${durationMs},"msg":"request completed"}\n`,
      );
    }
  }
}
