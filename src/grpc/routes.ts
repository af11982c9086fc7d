import type { DescService } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createConnectRouter,
  createContextKey,
  createContextValues,
  type Interceptor,
} from '@connectrpc/connect';
import type { UniversalServerResponse } from '@connectrpc/connect/protocol';
import { codeFromHttpStatus } from '@connectrpc/connect/protocol-connect';
import { parseTimeout } from '@connectrpc/connect/protocol-grpc';
import { compressionGzip, universalRequestFromNodeRequest } from '@connectrpc/connect-node';
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, deadlineExceeded } from '../errors.js';
import { timeBodyByProgress } from '../http/http2-sessions.js';
import { toApiError } from '../plugins/errors.js';
import { keptWhileQuiet } from '../routes/events.js';
import { readMessagesWithin } from './messages.js';
import type { GrpcMetrics } from './metrics.js';
import { type GrpcCode, OK, protocolOf, sendGrpcError, toConnectError } from './status.js';
import { asWebText, binaryFromWebText, webTextType } from './web-text.js';

/** The request a call answers, for its handlers: its id, its server, its readers. */
export const FASTIFY_REQUEST = createContextKey<FastifyRequest | null>(null);

/** The kind of a method as the gRPC ecosystem's metrics name it. */
const CALL_TYPES = {
  unary: 'unary',
  server_streaming: 'server_stream',
  client_streaming: 'client_stream',
  bidi_streaming: 'bidi_stream',
} as const;

export type CallType = (typeof CALL_TYPES)[keyof typeof CALL_TYPES];

export interface GrpcRoutesOptions {
  /** Registers the services on the router. */
  services: (router: ConnectRouter) => void;
  /** The services that may be called, for the UNIMPLEMENTED of their unknown methods. */
  known: readonly DescService[];
  /** The most a message may hold, compressed or not: BODY_LIMIT. */
  bodyLimit: number;
  /** The most a unary call may take, whatever its deadline: REQUEST_TIMEOUT_MS. */
  requestTimeoutMs: number;
  metrics: GrpcMetrics | null;
}

/** What a handler throws as its call's status: the contract's errors become their gRPC status and details. */
function statusOf(error: unknown, request: FastifyRequest): ConnectError {
  // A status the handler chose stands; anything else is shaped as for HTTP: a failure it did not mean is INTERNAL, logged.
  if (error instanceof ConnectError) {
    request.grpcCode = error.code;
    return error;
  }
  const shaped = toApiError(error as FastifyError, request);
  if (shaped.statusCode >= 500 && !(error instanceof ApiError)) request.failure = error as Error;
  const status = toConnectError(shaped, request.id);
  request.grpcCode = status.code;
  return status;
}

/** A stream's messages, its call's status noted when it ends. */
async function* noted<T>(messages: AsyncIterable<T>, request: FastifyRequest): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    throw statusOf(error, request);
  }
  request.grpcCode = OK;
}

/** Each call's status, noted for its log line and metrics, its errors as the contract's. */
const outcome: Interceptor = (next) => async (call) => {
  const request = call.contextValues.get(FASTIFY_REQUEST);
  if (request === null) return next(call); // every call of the routes below has its request
  try {
    const answer = await next(call);
    if (answer.stream) return { ...answer, message: noted(answer.message, request) };
    request.grpcCode = OK;
    return answer;
  } catch (error) {
    throw statusOf(error, request);
  }
};

/** A call's deadline, in ms from now: its `grpc-timeout` (gRPC, gRPC-Web) or `connect-timeout-ms`; null for none. */
function timeoutOf(request: FastifyRequest): number | null {
  const grpc = request.headers['grpc-timeout'];
  if (typeof grpc === 'string') return parseTimeout(grpc, Number.POSITIVE_INFINITY).timeoutMs ?? null;
  const connect = request.headers['connect-timeout-ms'];
  return typeof connect === 'string' && /^\d{1,10}$/.test(connect) ? Number(connect) : null;
}

/** What a call holds from its first hook to its end: the signal its deadline aborts. */
interface Call {
  readonly controller: AbortController;
  timer: NodeJS.Timeout | undefined;
  /** Its deadline as asked for, in ms; null for none (or one not understood, which ConnectRPC refuses). */
  readonly timeoutMs: number | null;
  /** Whether its handler has begun: its answer is then the handler's to write. */
  handled: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    grpcCall: Call | null;
  }
  interface FastifyContextConfig {
    /** An RPC's route: its service and method, for its span (OpenTelemetry's RPC conventions). */
    rpc?: { service: string; method: string };
  }
}

/** The longest a Node timer waits: longer is taken as 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The message codings a call may send, as each gRPC answer tells its client (`grpc-accept-encoding`). */
const ACCEPTED_CODINGS = [compressionGzip];
const ACCEPT_ENCODING = ACCEPTED_CODINGS.map((coding) => coding.name).join(',');

/**
 * The services as Fastify routes, one per method (`POST /<package>.<Service>/<Method>`), served
 * by ConnectRPC in the gRPC, gRPC-Web and Connect protocols, so that every hook of the app (the
 * request id, the rate limit, faults, the log line) holds for each call. The body is read by
 * ConnectRPC, message by message under `bodyLimit`. Each call's deadline runs from its first hook,
 * so that a fault's delay counts against it; an error raised before the handler, or the deadline
 * passing then, is answered in the call's protocol by `sendGrpcError`.
 */
export const grpcRoutes: FastifyPluginAsync<GrpcRoutesOptions> = async (app, options) => {
  const { bodyLimit, requestTimeoutMs, metrics } = options;
  const router = createConnectRouter({
    readMaxBytes: bodyLimit,
    acceptCompression: ACCEPTED_CODINGS,
    interceptors: [outcome],
  });
  options.services(router);

  app.decorateRequest('grpcCall', null);
  app.decorateRequest('grpcCode', null);
  app.removeAllContentTypeParsers();
  // ConnectRPC reads the body itself, a message at a time.
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  app.setErrorHandler((error, request, reply) => {
    const shaped = toApiError(error as FastifyError, request);
    // The rate limit's Retry-After is set on the reply, not carried by its error.
    const retryAfter = shaped.headers['retry-after'] ?? reply.getHeader('retry-after');
    return sendGrpcError(toConnectError(shaped, request.id, undefined, retryAfter), request, reply);
  });

  const endCall = (request: FastifyRequest): void => {
    const call = request.grpcCall;
    if (call !== null) clearTimeout(call.timer);
  };

  for (const handler of router.handlers) {
    const type = CALL_TYPES[handler.method.methodKind];
    const service = handler.service.typeName;
    const method = handler.method.name;
    const unary = type === 'unary';
    app.route({
      method: handler.allowedMethods,
      url: handler.requestPath,
      schema: { hide: true },
      config: { rpc: { service, method }, bodyReadByHandler: true },
      onRequest: (request, reply, done) => {
        const timeout = timeoutOf(request);
        const call: Call = { controller: new AbortController(), timer: undefined, timeoutMs: timeout, handled: false };
        request.grpcCall = call;
        metrics?.started(service, method, type);
        // A stream of messages from the client goes on as long as they keep coming.
        if (type === 'client_stream' || type === 'bidi_stream') timeBodyByProgress(reply.raw);
        const limit = unary ? Math.min(timeout ?? requestTimeoutMs, requestTimeoutMs) : timeout;
        // A deadline past what a timer can hold (about 24.8 days) is no deadline for a server.
        if (limit !== null && limit <= MAX_TIMER_MS) {
          call.timer = setTimeout(() => {
            const late = toConnectError(deadlineExceeded(limit), request.id);
            call.controller.abort(late);
            if (!call.handled && !reply.sent) sendGrpcError(late, request, reply);
          }, limit);
        }
        reply.raw.once('close', () => {
          endCall(request);
          // No status sent: the client left (or reset the stream) first.
          request.grpcCode ??= Code.Canceled;
          metrics?.handled(request, service, method, type, reply);
        });
        done();
      },
      handler: async (request, reply) => {
        const call = request.grpcCall as Call;
        call.handled = true;
        reply.hijack();
        const res = reply.raw;
        if (!unary) keptWhileQuiet(res);
        const universal = universalRequestFromNodeRequest(
          request.raw,
          res,
          undefined,
          createContextValues().set(FASTIFY_REQUEST, request),
        );
        // One signal for the client's leaving and the deadline: the call's, which the request's aborts
        // (AbortSignal.any would make a third, and track both sources, on every call).
        const left = universal.signal;
        left.addEventListener('abort', () => call.controller.abort(left.reason), { once: true });
        universal.signal = call.controller.signal;
        const text = binaryFromWebText(universal);
        readMessagesWithin(universal, protocolOf(request.headers['content-type']), bodyLimit, request.id);
        // The deadline is the route's: ConnectRPC's own timer would take one past a timer's range as 1 ms.
        if (call.timeoutMs !== null) {
          universal.header.delete('grpc-timeout');
          universal.header.delete('connect-timeout-ms');
        }
        const answer = await handler(universal);
        // The headers every answer carries (the request id, the rate limit's), set by the hooks on the reply.
        for (const [name, value] of Object.entries(reply.getHeaders())) {
          if (value !== undefined) res.setHeader(name, value);
        }
        await sendAnswer(answer, request, res, text);
      },
    });
  }

  // A method no service has: UNIMPLEMENTED, as gRPC clients expect (a path outside them is a 404).
  for (const service of options.known) {
    app.route({
      method: 'POST',
      url: `/${service.typeName}/*`,
      schema: { hide: true },
      handler: (request, reply) => {
        const name = request.url.slice(service.typeName.length + 2);
        sendGrpcError(
          new ConnectError(`${service.typeName} has no method ${name}`, Code.Unimplemented),
          request,
          reply,
        );
      },
    });
  }
};

type NodeResponse = FastifyReply['raw'];

/** Writes a piece of an answer, resolving once it has gone out; rejecting if the answer closes first. */
function sent(res: NodeResponse, piece: Uint8Array | string): Promise<void> {
  return new Promise((resolve, reject) => {
    const closed = () => reject(new ConnectError('the client left', Code.Canceled));
    res.once('close', closed);
    (res.write as (chunk: Uint8Array | string, done: (error?: Error | null) => void) => boolean)(piece, (error) => {
      res.off('close', closed);
      if (error) reject(error);
      else resolve();
    });
  });
}

/**
 * Sends a call's answer: its head once its first message (or its end) is known, each message once
 * the one before has gone out, then its trailers. A message at a time: a client that takes none
 * holds one message of the service's, where the stream's buffer would take hundreds of small ones
 * unsent, each write queued costing many times its bytes. An answer without a message (an error
 * before any) goes out trailers-only, its status in its head with END_STREAM, as gRPC's own servers
 * send it and as its clients read it. A call in gRPC-Web's text gets its answer in text.
 */
async function sendAnswer(
  answer: UniversalServerResponse,
  request: FastifyRequest,
  res: NodeResponse,
  text: boolean,
): Promise<void> {
  const messages = answer.body?.[Symbol.asyncIterator]();
  try {
    let next = messages === undefined ? undefined : await messages.next();
    res.statusCode = answer.status;
    for (const [name, value] of answer.header ?? []) res.setHeader(name, value);
    if (text) res.setHeader('content-type', webTextType(String(res.getHeader('content-type'))));
    // gRPC (its answers alone have trailers apart): the codings it may send, as an UNIMPLEMENTED for another must say.
    if (answer.trailer !== undefined) res.setHeader('grpc-accept-encoding', ACCEPT_ENCODING);
    if (next?.done !== false && answer.trailer !== undefined) {
      for (const [name, value] of asGrpcSays(answer.trailer)) res.setHeader(name, value);
    } else {
      for (; next !== undefined && next.done !== true; next = await messages?.next()) {
        await sent(res, text ? asWebText(next.value) : next.value);
      }
      if (answer.trailer !== undefined) res.addTrailers(Object.fromEntries(asGrpcSays(answer.trailer)));
    }
    // Refused before any handler ran (a message too big, a coding it cannot read): as the answer says.
    request.grpcCode ??= grpcCodeOf(answer.status, answer.header, answer.trailer);
    res.end();
  } catch (error) {
    // The client left, or reset the stream: the handler is told, and the call's line says so.
    await messages?.throw?.(error).catch(() => undefined);
  } finally {
    await messages?.return?.().catch(() => undefined);
  }
}

const INVALID_ARGUMENT = String(Code.InvalidArgument);

/**
 * A request ConnectRPC could not read (its `grpc-timeout`, its compressed message, its message)
 * is INVALID_ARGUMENT to it, and INTERNAL to gRPC, which never sends INVALID_ARGUMENT itself
 * (doc/statuscodes.md), as gRPC's own servers answer it. Those are the INVALID_ARGUMENTs without
 * details: every one the services send has an ErrorInfo.
 */
function asGrpcSays(trailer: Headers): Headers {
  if (trailer.get('grpc-status') === INVALID_ARGUMENT && !trailer.has('grpc-status-details-bin')) {
    trailer.set('grpc-status', String(Code.Internal));
  }
  return trailer;
}

/** A call's status as its answer says it: in its trailers or head (gRPC, gRPC-Web), or by its HTTP status (Connect). */
function grpcCodeOf(status: number, header: Headers | undefined, trailer: Headers | undefined): GrpcCode {
  const sent = trailer?.get('grpc-status') ?? header?.get('grpc-status');
  if (sent != null) return Number(sent) as GrpcCode;
  return status === 200 ? OK : codeFromHttpStatus(status);
}
