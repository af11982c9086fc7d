import { performance } from 'node:perf_hooks';
import {
  type Attributes,
  type Context,
  context,
  createTraceState,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { newSpanId, parseTraceParent, parseTraceState } from '../lib/trace-context.js';
import type { RequestLog } from '../logging/request-log.js';
import type { SpanExport } from '../tracing/export.js';
import { withRedisSpans } from '../tracing/redis-spans.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The service's span of this request, while spans are exported; null before it begins, absent if refused before routing. */
    span?: Span | null;
    /** The context its work runs in, Redis commands included; null unless the span records, absent if refused before routing. */
    traceContext?: Context | null;
  }
}

export interface TracingOptions {
  requestLog: RequestLog;
  /** Where spans go; null when they are not exported. */
  spanExport: SpanExport | null;
  shutdownTimeoutMs: number;
}

/** The methods HTTP's semantic conventions name; any other is `_OTHER`. */
/**
 * The gRPC statuses that make a server's span an error (OpenTelemetry's RPC conventions): UNKNOWN,
 * DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE and DATA_LOSS; the others are the client's.
 */
const SERVER_FAULT_CODES = new Set([2, 4, 12, 13, 14, 15]);

const KNOWN_METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
  'QUERY',
]);

/** The caller's `traceparent`: a header sent twice is a list, which is no single parent. */
function traceParentOf(request: FastifyRequest) {
  const header = request.headers.traceparent;
  return typeof header === 'string' ? parseTraceParent(header) : null;
}

/** The caller's span as the parent of the service's, with its `tracestate`; the root when there is none. */
function parentContext(request: FastifyRequest): Context {
  const parent = traceParentOf(request);
  if (parent === null) return ROOT_CONTEXT;
  const header = request.headers.tracestate;
  const state = parseTraceState(Array.isArray(header) ? header.join(',') : header);
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.parentId,
    traceFlags: parent.flags,
    isRemote: true,
    ...(state !== undefined && { traceState: createTraceState(state) }),
  });
}

/**
 * W3C Trace Context and OpenTelemetry's spans. A request whose `traceparent` is valid continues
 * that trace: its log line carries the trace's id and the id of the service's own span of it.
 *
 * Without export, that is all, and it is worked out as the line is written: no hook, and nothing
 * at all for a request without `traceparent`. With export, every request gets a server span from
 * its first hook to its end, named and attributed per the HTTP semantic conventions, its parent
 * the caller's span; the request's hooks and handler run in its context, so that the Redis
 * commands they send are its children; and the spans still queued are sent when the app closes.
 */
export const tracingPlugin = fp(
  async (app: FastifyInstance, { requestLog, spanExport, shutdownTimeoutMs }: TracingOptions) => {
    if (spanExport === null) {
      requestLog.traceIdsOf((request) => {
        const parent = traceParentOf(request);
        return parent === null ? null : { traceId: parent.traceId, spanId: newSpanId() };
      });
      return;
    }
    const { tracer } = spanExport;

    /**
     * The request's span, begun `startTime` ago when the request was refused before its hooks could
     * run. Its attributes are worked out only when it records: the samplers the settings offer
     * decide by the trace alone, so a request left out costs no more than the decision.
     */
    const begin = (request: FastifyRequest, startTime?: number): Span => {
      const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER';
      const route = request.is404 ? undefined : request.routeOptions.url;
      const rpc = request.is404 ? undefined : request.routeOptions.config.rpc;
      const name =
        rpc === undefined
          ? `${method === '_OTHER' ? 'HTTP' : method}${route === undefined ? '' : ` ${route}`}`
          : `${rpc.service}/${rpc.method}`;
      const options = { kind: SpanKind.SERVER, ...(startTime !== undefined && { startTime }) };
      const span = tracer.startSpan(name, options, parentContext(request));
      if (!span.isRecording()) return span;
      const url = request.originalUrl;
      const query = url.indexOf('?');
      const attributes: Attributes = {
        'http.request.method': method,
        'url.scheme': request.protocol,
        'url.path': query === -1 ? url : url.slice(0, query),
        'server.address': request.hostname,
        // Semantic conventions write HTTP/2 as "2", Node "2.0".
        'network.protocol.version': request.raw.httpVersionMajor === 2 ? '2' : request.raw.httpVersion,
        'client.address': request.ip,
        request_id: request.id,
      };
      if (query !== -1) attributes['url.query'] = url.slice(query + 1);
      if (method === '_OTHER') attributes['http.request.method_original'] = request.method;
      if (route !== undefined) attributes['http.route'] = route;
      if (request.port !== null) attributes['server.port'] = request.port;
      if (rpc !== undefined) {
        const connect = !request.headers['content-type']?.startsWith('application/grpc');
        attributes['rpc.system'] = connect ? 'connect_rpc' : 'grpc';
        attributes['rpc.service'] = rpc.service;
        attributes['rpc.method'] = rpc.method;
      }
      const userAgent = request.headers['user-agent'];
      if (userAgent !== undefined) attributes['user_agent.original'] = userAgent;
      return span.setAttributes(attributes);
    };

    app.decorateRequest('span', null);
    app.decorateRequest('traceContext', null);

    // The first hook of every request: what follows it runs in the span's context.
    app.addHook('onRequest', (request, _reply, done) => {
      const span = begin(request);
      request.span = span;
      if (!span.isRecording()) return done();
      request.traceContext = withRedisSpans(trace.setSpan(context.active(), span), tracer);
      context.with(request.traceContext, done);
    });
    // A body is read in the socket's events, outside that context: the handler enters it again.
    app.addHook('onRoute', (route) => {
      const handler = route.handler;
      route.handler = function (this: FastifyInstance, request, reply) {
        const traced = request.traceContext ?? null;
        return traced === null
          ? handler.call(this, request, reply)
          : context.with(traced, handler, this, request, reply);
      };
    });

    requestLog.onCompleted((request, reply, _route, ms) => {
      // Refused before routing (a path that is not valid percent-encoding), the request had no hook.
      const span = request.span ?? begin(request, performance.timeOrigin + performance.now() - ms);
      request.span = span;
      if (!span.isRecording()) return;
      const status = reply.statusCode;
      span.setAttribute('http.response.status_code', status);
      const grpcStatus = request.grpcCode ?? null;
      if (grpcStatus !== null) {
        span.setAttribute('rpc.grpc.status_code', grpcStatus);
        if (SERVER_FAULT_CODES.has(grpcStatus)) {
          span.setStatus({ code: SpanStatusCode.ERROR });
          span.setAttribute('error.type', String(grpcStatus));
        }
      } else if (status >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', String(status));
      }
      span.end();
    });
    requestLog.traceIdsOf((request) => {
      const ids = request.span?.spanContext();
      return ids === undefined ? null : { traceId: ids.traceId, spanId: ids.spanId };
    });

    let closingAt = 0;
    app.addHook('preClose', (done) => {
      closingAt = performance.now();
      done();
    });
    // The time the shutdown has left once the requests are done is the flush's.
    app.addHook('onClose', () => spanExport.flush(shutdownTimeoutMs - (performance.now() - closingAt)));
  },
  { name: 'tracing' },
);
