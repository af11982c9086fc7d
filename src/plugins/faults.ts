import type { OutgoingHttpHeaders } from 'node:http';
import { type Http2ServerRequest, constants as http2 } from 'node:http2';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler, onSendHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  type ConnectionFault,
  FAULT_HEADERS,
  FAULT_KINDS,
  FaultChooser,
  type FaultKind,
  type FaultPlan,
  type FaultSettings,
  type FaultSource,
} from '../domain/faults.js';
import { injectedError } from '../errors.js';
import type { ApiPathTest } from '../lib/api-path.js';
import type { RequestLog } from '../logging/request-log.js';

/**
 * Fault injection under `/api`, for testing what stands around the service: registered only when a
 * FAULT_ setting turns it on, so that off, no route has a hook of it and no request pays for it.
 * Each route under `/api` gets a request hook that holds the request (a delay, on a timer) and then
 * answers it with an error instead of serving it (an abort); with FAULT_HEADERS, also a send hook
 * that paces the answer's body or, instead of answering, breaks the connection. Every fault is
 * counted in `/metrics` (`faults_injected_total`, by kind and source), named in the request's log
 * line (`fault`) and in the answer's `X-Fault-Injected`. A request given no whole answer (its
 * connection broken, or its client gone while it was held) is logged with status 0.
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The faults planned for this request and those injected so far; null for none, absent if refused before routing. */
    faults?: { plan: FaultPlan; injected: FaultKind[] } | null;
  }
}

export interface FaultsOptions {
  settings: FaultSettings;
  isApiPath: ApiPathTest;
  requestLog: RequestLog;
  /** Where the faults are counted; null without metrics. */
  registry: Registry | null;
  /** Whether faults are injected here on purpose (FAULTS_EXPECTED): `faults_expected`, which the alerts read. */
  expected: boolean;
  shutdownTimeoutMs: number;
}

/** The answer's header that names the faults injected into it, for clients and the conformance kit. */
export const INJECTED_HEADER = 'x-fault-injected';

/** Bytes that no HTTP client can read as a response. */
const MALFORMED = 'NOT HTTP: an injected fault (x-fault-connection: malformed)\r\n\r\n';

/** A paced body goes out in a slice every this many ms. */
const PACE_TICK_MS = 50;

/** Something that holds a request or its answer back: told, once draining, by when to be done. */
interface Hold {
  hurry(deadline: number): void;
}

const flat = <T>(hooks: T | T[] | undefined): T[] => (hooks === undefined ? [] : ([hooks].flat() as T[]));

const isHttp2 = (request: FastifyRequest): boolean => request.raw.httpVersionMajor === 2;

/**
 * Calls `gone` once the request's connection (HTTP/2: its stream) closes; answers the function that
 * stops watching. Over HTTP/2, before the compatibility layer's own listener, which finishes the
 * response, so that `gone` has set the status its line is written with.
 */
function watchClose(request: FastifyRequest, reply: FastifyReply, gone: () => void): () => void {
  if (isHttp2(request)) {
    const stream = (request.raw as unknown as Http2ServerRequest).stream;
    stream.prependOnceListener('close', gone);
    return () => stream.off('close', gone);
  }
  reply.raw.once('close', gone);
  return () => reply.raw.off('close', gone);
}

/** Does nothing: the listener that tells node:http a socket's timeout is taken care of. */
const ignore = (): void => {};

/**
 * Keeps an HTTP/1.1 connection whose request is held from being closed by its idle timeout (the
 * connection timeout Fastify derives from REQUEST_TIMEOUT_MS), which would end the hold in an
 * empty reply: node:http closes a socket that times out only when neither its response nor its
 * server listens for the timeout. The service is the one waiting; the request has come, and a
 * client that leaves still ends the hold. Answers the function that lets the timeout close it again.
 * Over HTTP/2, the session's own timers tell a held stream from a stalled one.
 */
function keepIdleSocket(request: FastifyRequest, reply: FastifyReply): () => void {
  if (isHttp2(request)) return ignore;
  reply.raw.on('timeout', ignore);
  return () => reply.raw.off('timeout', ignore);
}

/**
 * What a fault does with an answer's body: its bytes, and how many it announces: all of them, or
 * none of its own for a stream (its length unknown: chunked over HTTP/1.1) or an answer with no body
 * (a HEAD keeps the length Fastify gave it; a 204 or 304 has none).
 */
interface Body {
  bytes: Buffer;
  length: number | null;
}

const NO_BYTES = Buffer.alloc(0);

/** The first half of a body's bytes: what a truncated answer sends of it. */
const half = (body: Body): Buffer => body.bytes.subarray(0, Math.floor(body.bytes.length / 2));

/** The body of an answer with this payload: serialised JSON, nothing, or a stream (the event stream). */
function bodyOf(payload: unknown): Body {
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) {
    const bytes = Buffer.from(payload);
    return { bytes, length: bytes.length };
  }
  return { bytes: NO_BYTES, length: null };
}

/** Sends the head of the reply's answer at once, announcing the body's length when it has one of its own. */
function sendHead(reply: FastifyReply, body: Body): void {
  const headers = reply.getHeaders() as OutgoingHttpHeaders;
  if (body.length !== null) headers['content-length'] = String(body.length);
  reply.raw.writeHead(reply.statusCode, headers);
  reply.raw.flushHeaders();
}

export const faultsPlugin = fp(
  async (
    app: FastifyInstance,
    { settings, isApiPath, requestLog, registry, expected, shutdownTimeoutMs }: FaultsOptions,
  ) => {
    const chooser = new FaultChooser(settings);
    const counter =
      registry === null
        ? null
        : new Counter({
            name: 'faults_injected_total',
            help: 'Faults injected into requests to /api, by kind and by source (the FAULT_ settings, or the request headers).',
            labelNames: ['kind', 'source'] as const,
            registers: [registry],
          });
    // Every series the settings can make is there from the start, at 0, for rates and alerts.
    if (settings.errorRate > 0) counter?.labels('abort', 'settings').inc(0);
    if (settings.delayRate > 0) counter?.labels('delay', 'settings').inc(0);
    if (settings.headers) for (const kind of FAULT_KINDS) counter?.labels(kind, 'headers').inc(0);
    const answers =
      registry === null
        ? null
        : new Counter({
            name: 'faults_injected_answers_total',
            help:
              'Answers to /api replaced by an injected fault, by the status sent (0: the connection or stream ' +
              'broken instead): what an SLO counts apart from the answers the service itself gave.',
            labelNames: ['status'] as const,
            registers: [registry],
          });
    // A status's series is found by number; those the settings make are there from the start, at 0.
    const answersOf = new Map<number, Counter.Internal>();
    const answerCounter = (status: number): Counter.Internal | undefined => {
      if (answers === null) return undefined;
      let child = answersOf.get(status);
      if (child === undefined) {
        child = answers.labels(String(status));
        answersOf.set(status, child);
      }
      return child;
    };
    if (registry !== null) {
      new Gauge({
        name: 'faults_expected',
        help: '1 when FAULTS_EXPECTED says faults are injected here on purpose, 0 when an injected fault is a mistake (GreetingServiceFaultsInjected).',
        registers: [registry],
      }).set(expected ? 1 : 0);
    }
    if (settings.errorRate > 0) answerCounter(settings.errorStatus)?.inc(0);
    if (settings.headers) answerCounter(0)?.inc(0);

    app.decorateRequest('faults', null);
    // A plan may come to nothing (a pace with no body to pace, a broken connection a 101 cannot have): no fault then.
    requestLog.faultsOf((request) => {
      const injected = request.faults?.injected ?? [];
      return injected.length === 0 ? null : injected.join(',');
    });

    /** Counts a fault, and names it in the log line and the answer. */
    const injected = (request: FastifyRequest, reply: FastifyReply, kind: FaultKind, source: FaultSource): void => {
      const faults = request.faults as NonNullable<FastifyRequest['faults']>;
      faults.injected.push(kind);
      counter?.labels(kind, source).inc();
      reply.header(INJECTED_HEADER, faults.injected.join(', '));
    };

    /**
     * The end of a request that got no whole answer: status 0, and its one line and its listeners.
     * Over HTTP/2 the response finishes as its stream closes, and Fastify ends the request then; but
     * Node's response to a HEAD finishes only if it was ended, so a broken HEAD is ended here.
     */
    const noAnswer = (request: FastifyRequest, reply: FastifyReply): void => {
      // Read by the log line, the metrics and the span alike; HTTP/2's response refuses 0 through its setter.
      Object.defineProperty(reply.raw, 'statusCode', { value: 0 });
      if (!isHttp2(request)) requestLog.requestCompleted(null, request, reply);
      else if (request.method === 'HEAD') {
        const stream = (request.raw as unknown as Http2ServerRequest).stream;
        stream.once('close', () => requestLog.requestCompleted(null, request, reply));
      }
    };

    // While the service drains, nothing held may outlast half of SHUTDOWN_TIMEOUT_MS: the request is
    // served, or its body sent whole, by then, and the rest of the time is left to answer it.
    const holds = new Set<Hold>();
    let deadline = Number.POSITIVE_INFINITY;
    app.addHook('preClose', (done) => {
      deadline = performance.now() + shutdownTimeoutMs / 2;
      for (const hold of holds) hold.hurry(deadline);
      done();
    });

    /** Holds a request for `ms` on a timer, then `then`; a client that leaves meanwhile ends it. */
    const delay = (request: FastifyRequest, reply: FastifyReply, ms: number, then: () => void): void => {
      const endsAt = performance.now() + ms;
      let timer: NodeJS.Timeout;
      let target = endsAt;
      const schedule = (at: number) => {
        clearTimeout(timer);
        target = at;
        timer = setTimeout(fire, Math.max(0, at - performance.now()));
      };
      const hold: Hold = { hurry: (by) => schedule(Math.min(endsAt, by)) };
      const gone = () => {
        clearTimeout(timer);
        holds.delete(hold);
        idleAllowed();
        noAnswer(request, reply);
      };
      const fire = () => {
        // A timer counts from the loop's last tick, so it can fire a little early: hold the rest.
        if (performance.now() < target) return schedule(target);
        holds.delete(hold);
        unwatch();
        idleAllowed();
        then();
      };
      holds.add(hold);
      const unwatch = watchClose(request, reply, gone);
      const idleAllowed = keepIdleSocket(request, reply);
      schedule(Math.min(endsAt, deadline));
    };

    /** The route's methods, for the `Allow` of an injected 405. */
    const methods = new Map<string, Set<string>>();

    /** Answers the request as its plan says instead of serving it, or lets it be served. */
    const abortOrServe = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void => {
      const abort = request.faults?.plan.abort ?? null;
      if (abort === null) {
        done();
        return;
      }
      injected(request, reply, 'abort', abort.source);
      const { status, grpcStatus } = abort;
      answerCounter(status)?.inc();
      const header = grpcStatus === null ? FAULT_HEADERS.abort : FAULT_HEADERS.abortGrpc;
      const by = abort.source === 'settings' ? 'FAULT_ERROR_RATE' : header;
      if (status >= 400) {
        const allow = [...(methods.get(request.routeOptions.url ?? '') ?? [])].join(', ');
        done(injectedError(status, by, { allow, http2: isHttp2(request), grpcStatus }));
        return;
      }
      // A success or a redirect has no envelope: the status alone, with no body, as Envoy answers it.
      reply.code(status).send();
    };

    const injectFaults: onRequestHookHandler = function injectFaults(request, reply, done) {
      const plan = chooser.plan(request.headers, request.routeOptions.config.rpc !== undefined);
      if (plan === null) return done();
      request.faults = { plan, injected: [] };
      if (plan.delay === null) return abortOrServe(request, reply, done);
      injected(request, reply, 'delay', plan.delay.source);
      delay(request, reply, plan.delay.ms, () => abortOrServe(request, reply, done));
    };

    /** Sends the answer's body no faster than `kibps` KiB/s: its head at once, then a slice every tick. */
    const pace = (request: FastifyRequest, reply: FastifyReply, body: Buffer, kibps: number): void => {
      const res = reply.raw;
      const slice = Math.max(1, Math.floor((kibps * 1024 * PACE_TICK_MS) / 1000));
      let sent = 0;
      /** Its last byte sent: over HTTP/2, a stream its client reset also says it finished writing. */
      let whole = false;
      let hurried = Number.POSITIVE_INFINITY;
      let timer: NodeJS.Timeout;
      const hold: Hold = {
        hurry: (by) => {
          hurried = by;
        },
      };
      const next = () => {
        const end = performance.now() >= hurried ? body.length : Math.min(sent + slice, body.length);
        const chunk = body.subarray(sent, end);
        sent = end;
        if (sent < body.length) {
          res.write(chunk);
          timer = setTimeout(next, PACE_TICK_MS);
          return;
        }
        holds.delete(hold);
        res.end(chunk, () => {
          whole = true;
        });
      };
      watchClose(request, reply, () => {
        clearTimeout(timer);
        holds.delete(hold);
        // Once finished, the request's line is Fastify's to write; a client gone first gets none from it.
        if (!whole) noAnswer(request, reply);
      });
      sendHead(reply, { bytes: body, length: body.length });
      holds.add(hold);
      if (deadline !== Number.POSITIVE_INFINITY) hold.hurry(deadline);
      timer = setTimeout(next, PACE_TICK_MS);
    };

    /**
     * Over HTTP/2 the stream is broken, never the connection, which carries other requests: reset
     * and malformed are RST_STREAM (INTERNAL_ERROR, PROTOCOL_ERROR), empty is RST_STREAM (NO_ERROR)
     * before any header, truncate the head and half the body, then RST_STREAM (INTERNAL_ERROR).
     * A head with no body after it (HEAD, 204, 304) ends its stream: truncate then sends it alone.
     */
    const breakStream = (request: FastifyRequest, reply: FastifyReply, body: Body, kind: ConnectionFault): void => {
      const stream = (request.raw as unknown as Http2ServerRequest).stream;
      const code = {
        reset: http2.NGHTTP2_INTERNAL_ERROR,
        empty: http2.NGHTTP2_NO_ERROR,
        truncate: http2.NGHTTP2_INTERNAL_ERROR,
        malformed: http2.NGHTTP2_PROTOCOL_ERROR,
      }[kind];
      if (kind !== 'truncate') {
        stream.close(code);
        return;
      }
      sendHead(reply, body);
      if (stream.writableEnded) stream.close(code);
      else reply.raw.write(half(body), () => stream.close(code));
    };

    /** Breaks the connection instead of sending `body` (HTTP/1.1: the request has been read whole by now). */
    const breakConnection = (request: FastifyRequest, reply: FastifyReply, body: Body, kind: ConnectionFault): void => {
      if (isHttp2(request)) {
        breakStream(request, reply, body, kind);
        noAnswer(request, reply);
        return;
      }
      const socket = request.raw.socket;
      const res = reply.raw;
      switch (kind) {
        case 'reset':
          socket.resetAndDestroy();
          break;
        case 'empty':
          socket.destroy();
          break;
        case 'malformed':
          socket.end(MALFORMED);
          break;
        case 'truncate': {
          // The answer's own head, its Content-Length the whole body's, and half of the body: closed once they are out.
          sendHead(reply, body);
          res.write(half(body), () => socket.destroy());
          break;
        }
      }
      noAnswer(request, reply);
    };

    const replaceAnswer: onSendHookHandler = function replaceAnswer(request, reply, payload, done) {
      const plan = request.faults?.plan;
      if (plan === undefined) return done(null, payload);
      const body = bodyOf(payload);
      if (plan.connection !== null) {
        injected(request, reply, plan.connection, 'headers');
        answerCounter(0)?.inc();
        breakConnection(request, reply, body, plan.connection);
        return;
      }
      if (plan.throughput !== null && body.bytes.length > 0 && request.method !== 'HEAD') {
        injected(request, reply, 'throughput', 'headers');
        pace(request, reply, body.bytes, plan.throughput);
        return;
      }
      done(null, payload);
    };

    // Decided once per route, as it is added: a route outside /api gets nothing.
    app.addHook('onRoute', (route) => {
      if (!isApiPath(route.url)) return;
      const known = methods.get(route.url) ?? new Set<string>();
      for (const method of flat(route.method)) known.add(method);
      methods.set(route.url, known);
      route.onRequest = [...flat(route.onRequest), injectFaults];
      if (settings.headers) route.onSend = [...flat(route.onSend), replaceAnswer];
    });
  },
  { name: 'faults', dependencies: ['errors'] },
);
