import { randomUUID } from 'node:crypto';
import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import {
  ApiError,
  apiError,
  type ErrorEnvelope,
  ErrorEnvelope as ErrorEnvelopeSchema,
  INTERNAL_ERROR,
  internalError,
  methodNotAllowed,
  storeUnavailable,
  validationError,
} from '../errors.js';
import { deepJson } from '../lib/json-text.js';
import { utcDateTime } from '../lib/local-time.js';
import { StoreUnavailableError } from '../stores/health.js';
import { socketAnswerHead } from './response-headers.js';
import { validationDetails } from './validation.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The unexpected error behind a 500, kept for the request's log line. */
    failure: Error | null;
  }
}

/**
 * Errors are shaped here and only here: whatever was thrown, by our code, a plugin or
 * Fastify, the client gets the envelope of spec 7.1 with the request's id.
 */

function envelope(error: ApiError, requestId: string): ErrorEnvelope {
  return {
    error: {
      code: error.code,
      message: error.message,
      details: error.details,
      timestamp: utcDateTime(),
      request_id: requestId,
    },
  };
}

function notFound(request: FastifyRequest): ApiError {
  return apiError(404, `No route for ${request.method} ${request.originalUrl.split('?', 1)[0]}.`);
}

/** Fastify's own errors, translated to the contract's. */
const FRAMEWORK_ERRORS: Record<string, (error: FastifyError, request: FastifyRequest) => ApiError> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: (_, request) =>
    apiError(
      415,
      !request.headers['content-type']?.trim()
        ? 'A request body needs Content-Type: application/json.'
        : `The request body must be application/json, not ${request.headers['content-type']}.`,
    ),
  FST_ERR_CTP_BODY_TOO_LARGE: (_, request) =>
    apiError(413, `The request body is larger than the limit of ${request.routeOptions.bodyLimit} bytes.`),
  // @fastify/static refuses a path that could leave its folder (a backslash, a NUL byte): for the
  // client, as for any other path that names no file, there is nothing there.
  FST_STATIC_FORBIDDEN_PATH: (_, request) => notFound(request),
  FST_ERR_BAD_URL: (_, request) =>
    validationError([{ field: 'path', message: 'must be valid percent-encoded UTF-8', value: request.originalUrl }]),
};

function isHttpError(error: object): boolean {
  return typeof (error as { expose?: unknown }).expose === 'boolean';
}

function toApiError(error: FastifyError | ApiError, request: FastifyRequest): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StoreUnavailableError) return storeUnavailable();
  if (error.validation !== undefined && error.validationContext !== undefined) {
    return validationError(validationDetails(error.validation, error.validationContext, request));
  }
  const framework = FRAMEWORK_ERRORS[error.code];
  if (framework !== undefined) return framework(error, request);
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // Spec 7.2 rule 2: an error that carries no code is INTERNAL_ERROR, whatever its status. An HTTP
    // error (http-errors, marked by its `expose` flag) is named by its status: it is how the
    // documentation's static files report a failed If-Match (412) or an unsatisfiable Range (416).
    return typeof error.code === 'string' || isHttpError(error)
      ? apiError(status, error.message)
      : new ApiError(status, INTERNAL_ERROR, error.message);
  }
  return internalError();
}

/** The error handler of every route and of the errors Fastify raises before routing. */
export function sendError(error: FastifyError | ApiError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const shaped = toApiError(error, request);
  if (shaped.statusCode >= 500 && !(error instanceof ApiError)) request.failure = error;
  // Written here rather than by the route's serializer: a detail's value is what the client sent,
  // nested as deep as the body limit allows, and the serializer's recursion would overflow on it.
  return reply
    .code(shaped.statusCode)
    .headers(shaped.headers)
    .type('application/json; charset=utf-8')
    .send(deepJson(envelope(shaped, request.id)));
}

/** What Node's parser tells of bytes it could not read as a request. */
interface ParseError {
  /** The bytes it was reading, and how far into them it got. */
  rawPacket?: Buffer;
  bytesParsed?: number;
}

/** A socket of Node's HTTP server: the response being written on it, with the later ones queued behind it. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/** The answer to a request in a major version of HTTP other than 1. */
export function unsupportedVersion(): ApiError {
  return apiError(505, 'Only HTTP/1.0 and HTTP/1.1 are supported.');
}

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

/** Sockets with an answer of answerOnSocket's under way, or written. */
const answering = new WeakSet<Socket>();

/**
 * Answers on a socket where Node gives Fastify no request to reply to: an error before there is a
 * request, or a CONNECT. The envelope and the fixed headers, as a reply would have them, written
 * straight to the socket, which then closes; logged as one line. A pipelining client gets the
 * answers to its earlier requests first, in order. Later errors on the same connection (more
 * bytes, its timeout) add nothing; once the answer is written, they end the connection.
 */
export function answerOnSocket(
  app: FastifyInstance,
  socket: Socket,
  error: ApiError,
  id: string,
  reason: string,
): void {
  if (answering.has(socket)) {
    if (socket.writableEnded) socket.destroy();
    return;
  }
  answering.add(socket);
  const status = error.statusCode;
  app.log.info({ request_id: id, status, reason }, 'client error');
  const body = JSON.stringify(envelope(error, id));
  const own = Object.entries(error.headers).map(([name, value]) => `${name}: ${value}\r\n`);
  afterOwedResponses(socket, app.server.requestTimeout, () => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        own.join('') +
        socketAnswerHead(id) +
        'Connection: close\r\n\r\n' +
        body,
    );
  });
}

/**
 * Errors raised on a connection before there is a request: a malformed request (400), another
 * major version of HTTP (505), headers over the size limit (431), a request timeout (408).
 * Given to Fastify as `clientErrorHandler`.
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  answerOnSocket(this, socket, clientErrorFor(error), randomUUID(), error.code ?? 'unknown');
}

/**
 * 404 for a path no route matches, 405 with `Allow` for a path that exists with other
 * methods. A second router holds every route's path so that the methods a path allows can
 * be found by matching, with the same rules as the real router.
 */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    app.addSchema(ErrorEnvelopeSchema);
    app.decorateRequest('failure', null);

    const paths = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: Number.MAX_SAFE_INTEGER });
    const methods = new Set<HTTPMethod>();
    app.addHook('onRoute', (route) => {
      for (const method of [route.method].flat() as HTTPMethod[]) {
        methods.add(method);
        if (!paths.hasRoute(method, route.url)) paths.on(method, route.url, () => {});
      }
    });

    app.setErrorHandler(sendError);
    app.setNotFoundHandler((request, reply) => {
      // Matched as routed (/api/v1/hello as /api/hello), reported as sent.
      const path = request.url.split('?', 1)[0] ?? '/';
      const allow = [...methods].filter((method) => paths.find(method, path) !== null);
      // A route that takes this method can still find nothing (a file the documentation does not have).
      const error =
        allow.length > 0 && !allow.includes(request.method as HTTPMethod)
          ? methodNotAllowed(request.method, allow)
          : notFound(request);
      return sendError(error, request, reply);
    });
  },
  { name: 'errors' },
);
