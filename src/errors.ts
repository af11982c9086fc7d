import { STATUS_CODES } from 'node:http';
import { type Static, Type } from 'typebox';
import { utcDateTime } from './lib/local-time.js';

/** One invalid input: which field, why, and the value as the client sent it (`null` when absent). */
export const ErrorDetail = Type.Object(
  {
    field: Type.String({ description: 'Query or path parameter name, body key (dotted when nested), or `body`.' }),
    message: Type.String(),
    value: Type.Unknown({ description: 'The offending value as received; `null` when it was absent.' }),
  },
  { additionalProperties: false, title: 'ErrorDetail' },
);
export type ErrorDetail = Static<typeof ErrorDetail>;

/**
 * Every code the service answers with, and the status it comes with: the envelope's `code` is one
 * of these, and the OpenAPI document lists them all. Codes of statuses the contract does not name
 * are the status's reason phrase in upper snake case.
 */
export const ERROR_CODES = {
  VALIDATION_ERROR: 400,
  MALFORMED_JSON: 400,
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  REQUEST_TIMEOUT: 408,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RANGE_NOT_SATISFIABLE: 416,
  EXPECTATION_FAILED: 417,
  UNSUPPORTED_CURRENCY: 422,
  UPGRADE_REQUIRED: 426,
  RATE_LIMIT_EXCEEDED: 429,
  REQUEST_HEADER_FIELDS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  NOT_IMPLEMENTED: 501,
  SERVICE_UNAVAILABLE: 503,
  HTTP_VERSION_NOT_SUPPORTED: 505,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;
/**
 * The code of an error answer: one of ERROR_CODES, or, for an injected fault's status that the
 * service never answers by itself, that status's reason phrase in upper snake case (IM_A_TEAPOT).
 */
export type EnvelopeCode = ErrorCode | (string & {});

function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/** The error envelope of docs/interface-spec.md, 7.1, returned by every non-2xx/3xx response. */
export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.Unsafe<EnvelopeCode>({
          type: 'string',
          enum: Object.keys(ERROR_CODES),
          description: 'Machine-readable error code.',
          examples: ['VALIDATION_ERROR'],
        }),
        message: Type.String({ description: 'Human-readable text.' }),
        details: Type.Array(ErrorDetail),
        timestamp: Type.String({
          description: 'UTC time of the error, ISO 8601.',
          examples: ['2026-01-02T03:04:05.678Z'],
        }),
        request_id: Type.String({ description: 'The X-Request-Id of the request.' }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'ErrorEnvelope', additionalProperties: false },
);
export type ErrorEnvelope = Static<typeof ErrorEnvelope>;

/** What the OpenAPI document says of each error status a route may answer. */
const DESCRIPTIONS = {
  400: 'Validation failed (`VALIDATION_ERROR`, one detail per invalid field, `version`, `path`, `Host` and a repeated `Content-Type` included, and `body` when it is not valid data of its content coding), the body is not JSON (`MALFORMED_JSON`), or the request is not valid HTTP/1.x (`BAD_REQUEST`, answered before routing, then the connection closes).',
  401: 'No valid bearer token (`UNAUTHORIZED`); `WWW-Authenticate: Bearer` says how to authenticate.',
  403: 'A WebSocket handshake from an `Origin` that `CORS_ORIGINS` does not allow (`FORBIDDEN`).',
  404: 'No such route or resource (`NOT_FOUND`).',
  405: 'The path exists with other methods (`METHOD_NOT_ALLOWED`); `Allow` lists them.',
  406: 'Accept asks only for API versions that do not exist, or, to the event stream, takes neither `text/event-stream`, `text/*` nor `*/*` (`NOT_ACCEPTABLE`).',
  408: 'The request did not arrive within the server’s timeouts (`REQUEST_TIMEOUT`); the connection closes.',
  412: 'If-Match names no current `ETag`, or If-None-Match names it (`PRECONDITION_FAILED`); nothing was changed.',
  413: 'The body is larger than `BODY_LIMIT` (`PAYLOAD_TOO_LARGE`).',
  415: 'The body is not `application/json` or `application/*+json` in UTF-8, or comes in a content coding the service does not decode (`UNSUPPORTED_MEDIA_TYPE`; `Accept-Encoding` then lists those it does).',
  417: 'Expect asks for anything but `100-continue` (`EXPECTATION_FAILED`).',
  422: 'A well-formed currency code that is not in the table (`UNSUPPORTED_CURRENCY`, one detail per such code).',
  426: 'A WebSocket route asked without `Upgrade: websocket` and `Connection: Upgrade` over HTTP/1.1, or asked in HTTP/1.0, which cannot switch protocols (`UPGRADE_REQUIRED`); `Upgrade: websocket` names the protocol to ask for.',
  429: 'Too many requests from this client in the current window (`RATE_LIMIT_EXCEEDED`); `Retry-After` says when to try again.',
  431: 'The request’s headers are larger than the server’s limit (`REQUEST_HEADER_FIELDS_TOO_LARGE`); the connection closes.',
  500: 'Unexpected failure (`INTERNAL_ERROR`); the message is generic and `details` empty.',
  501: 'The body comes in a transfer coding other than `chunked`, which the service does not decode, or chunked in a request that asks to switch protocols (`NOT_IMPLEMENTED`).',
  503: 'Shutting down, a dependency is unavailable, too many writes or event streams at once (`SERVICE_UNAVAILABLE`); try again.',
  505: 'The request line names a major version of HTTP other than 1, or is the HTTP/2 preface while HTTP/2 is off (`HTTP_VERSION_NOT_SUPPORTED`); the connection closes.',
} as const;
export type DocumentedStatus = keyof typeof DESCRIPTIONS;

/** What the OpenAPI document says of an error status. */
export function errorDescription(status: DocumentedStatus): string {
  return DESCRIPTIONS[status];
}

export const VALIDATION_ERROR = 'VALIDATION_ERROR';
export const MALFORMED_JSON = 'MALFORMED_JSON';
export const INTERNAL_ERROR = 'INTERNAL_ERROR';
export const UNSUPPORTED_CURRENCY = 'UNSUPPORTED_CURRENCY';
export const RATE_LIMIT_EXCEEDED = 'RATE_LIMIT_EXCEEDED';
const GENERIC_MESSAGE = 'An internal error occurred.';

/**
 * An error this service means to answer with: status, code, message and details are
 * exactly what the client gets. Anything else thrown becomes a 500 with a generic text.
 */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly statusCode: number,
    readonly code: EnvelopeCode,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** Extra response headers, e.g. `Allow` on a 405. */
    readonly headers: Readonly<Record<string, string>> = {},
    /** The gRPC status a gRPC call gets, where it is not the one its HTTP status maps to. */
    readonly grpcStatus: number | null = null,
  ) {
    super(message);
  }
}

/**
 * An error for an HTTP status, its code the status's reason phrase in upper snake case
 * (404 NOT_FOUND, 415 UNSUPPORTED_MEDIA_TYPE, 431 REQUEST_HEADER_FIELDS_TOO_LARGE), as the
 * contract's codes are, except 500, which is INTERNAL_ERROR.
 */
export function apiError(
  status: number,
  message?: string,
  details: ErrorDetail[] = [],
  headers: Record<string, string> = {},
): ApiError {
  if (status === 500) return new ApiError(500, INTERNAL_ERROR, GENERIC_MESSAGE);
  const code = reasonCode(status);
  // A status the service has no code for carries no code of ours: INTERNAL_ERROR (spec 7.2, rule 2).
  const known = code !== null && isErrorCode(code) ? code : INTERNAL_ERROR;
  return new ApiError(status, known, message ?? `${STATUS_CODES[status] ?? 'Error'}.`, details, headers);
}

/**
 * A status's reason phrase in upper snake case, an apostrophe dropped (418 "I'm a Teapot" is
 * IM_A_TEAPOT), or null for a status Node has no phrase for.
 */
function reasonCode(status: number): string | null {
  const phrase = STATUS_CODES[status]?.replace(/'/g, '');
  return phrase === undefined ? null : phrase.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
}

/** The contract's codes that are not their status's reason phrase, each the one code of its status. */
const CONTRACT_CODES: Readonly<Record<number, ErrorCode>> = {
  413: 'PAYLOAD_TOO_LARGE',
  422: UNSUPPORTED_CURRENCY,
  429: RATE_LIMIT_EXCEEDED,
  500: INTERNAL_ERROR,
};

/**
 * A 426's Connection: Upgrade named (RFC 9110, 7.8), with close, since Node keeps alive a
 * connection whose answer names anything else, even one its client asked to close.
 */
const UPGRADE_CONNECTION = 'Upgrade, close';

/**
 * Extra headers an error status comes with, whoever answers it: those RFC 9110 requires of it
 * (401 WWW-Authenticate, 15.5.2; 407 Proxy-Authenticate, 15.5.8; 426 Upgrade, 15.5.22, which names
 * its protocol in Connection, 7.8, as RFC 9110's own example does), and those the service adds.
 * 405's Allow depends on the route, and is given. Not sent: 416's Content-Range, which only a range
 * request of a known length can say (a SHOULD).
 */
const STATUS_HEADERS: Readonly<Record<number, Readonly<Record<string, string>>>> = {
  401: { 'www-authenticate': 'Bearer' },
  407: { 'proxy-authenticate': 'Bearer' },
  // The service's own 408 closes the connection, as RFC 9110 (15.5.9) expects.
  408: { connection: 'close' },
  426: { upgrade: 'HTTP/3.0', connection: UPGRADE_CONNECTION },
  429: { 'retry-after': '1' },
  503: { 'retry-after': '1' },
};

/** Fields that belong to an HTTP/1.1 connection, which HTTP/2 forbids (RFC 9113, 8.2.2). */
const CONNECTION_FIELDS = new Set(['connection', 'upgrade']);

/**
 * The headers an injected error of `status` carries, for the OpenAPI document: each with whether
 * HTTP/2 has it too. Connection, which only says how the connection goes on, is left out.
 */
export function injectedHeaders(status: number): { name: string; value: string; http2: boolean }[] {
  return Object.entries(STATUS_HEADERS[status] ?? {})
    .filter(([name]) => name !== 'connection')
    .map(([name, value]) => ({ name, value, http2: !CONNECTION_FIELDS.has(name) }));
}

/**
 * The code an injected error of `status` answers with: the contract's code of that status (the
 * service's own for 400, BAD_REQUEST, which claims no field or body), else its reason phrase in
 * upper snake case (403 FORBIDDEN, 418 IM_A_TEAPOT), else, for a status without one (599),
 * INTERNAL_ERROR: an error that carries no code (spec 7.2, rule 2).
 */
export function injectedCode(status: number): EnvelopeCode {
  return CONTRACT_CODES[status] ?? reasonCode(status) ?? INTERNAL_ERROR;
}

/**
 * An error a fault injects instead of the answer: the envelope of its status, with the headers the
 * service answers that status with (`allow`, the route's methods, on a 405), but over HTTP/2 none
 * that belong to an HTTP/1.1 connection (a 426's Upgrade), and a message that says it was
 * injected and by what; a 500's is the generic one all the same (spec 7.2, rule 5).
 */
export function injectedError(
  status: number,
  by: string,
  { allow, http2, grpcStatus = null }: { allow: string; http2: boolean; grpcStatus?: number | null },
): ApiError {
  const answered = grpcStatus === null ? String(status) : `gRPC status ${grpcStatus}`;
  const message =
    status === 500 && grpcStatus === null
      ? GENERIC_MESSAGE
      : `Injected fault: answered ${answered} instead of being served (${by}).`;
  const headers: Record<string, string> = { ...STATUS_HEADERS[status], ...(status === 405 && { allow }) };
  if (http2) for (const name of CONNECTION_FIELDS) delete headers[name];
  return new ApiError(status, injectedCode(status), message, [], headers, grpcStatus);
}

/**
 * A 401 for a request without the operator's token (`none`), with another (`wrong`: RFC 6750, 3.1,
 * `invalid_token`, only when one was sent), or with Authorization given more than once (`repeated`),
 * which no protocol may read as one token.
 */
export function unauthorized(why: 'none' | 'wrong' | 'repeated'): ApiError {
  const message = {
    none: "This needs the operator's bearer token: Authorization: Bearer <token>.",
    wrong: 'The bearer token is not the right one.',
    repeated: 'Authorization must be given once: Authorization: Bearer <token>.',
  }[why];
  return new ApiError(401, 'UNAUTHORIZED', message, [], {
    'www-authenticate': why === 'wrong' ? 'Bearer error="invalid_token"' : 'Bearer',
  });
}

/** The detail's message for a parameter that takes one value and was sent several times. */
export const GIVEN_ONCE = 'must be given once';

/** A 400 naming each invalid field. */
export function validationError(details: ErrorDetail[], message = 'The request is not valid.'): ApiError {
  return new ApiError(400, VALIDATION_ERROR, message, details);
}

export function malformedJson(message: string): ApiError {
  return new ApiError(400, MALFORMED_JSON, message);
}

/** A 413 for a body over the limit, counted as it is decoded when it comes in a content coding. */
export function payloadTooLarge(limit: number): ApiError {
  return apiError(413, `The request body is larger than the limit of ${limit} bytes.`);
}

/** A 504 for a gRPC call whose deadline passed before it was answered (its status: DEADLINE_EXCEEDED). */
export function deadlineExceeded(ms: number): ApiError {
  return apiError(504, `The call's deadline of ${ms} ms passed before it was answered.`);
}

/** A 415 for a body in content codings the service does not decode; `Accept-Encoding` lists those it does. */
export function unsupportedContentCoding(sent: string, decoded: readonly string[], why: string): ApiError {
  return apiError(415, `The content coding ${sent} is not supported: ${why}.`, [], {
    'accept-encoding': decoded.join(', '),
  });
}

/** A 400 for a body that is not a valid stream of the coding it says it is in. */
export function corruptContentCoding(coding: string): ApiError {
  return validationError(
    [{ field: 'body', message: `is not valid ${coding} data`, value: null }],
    `The request body could not be decoded from ${coding}.`,
  );
}

/** A 422 with one detail per parameter holding a well-formed currency code that is not in the table. */
export function unsupportedCurrency(codes: readonly { field: string; value: string }[]): ApiError {
  const details = codes.map(({ field, value }) => ({ field, message: 'is not a supported currency', value }));
  const named = [...new Set(codes.map(({ value }) => value.toUpperCase()))];
  return new ApiError(422, UNSUPPORTED_CURRENCY, `No exchange rate for ${named.join(' and ')}.`, details);
}

/**
 * A 429 for a client over its limit. The contract names it RATE_LIMIT_EXCEEDED, not the reason
 * phrase; the rate limiter sets Retry-After and the RateLimit-* headers on the reply itself.
 */
export function rateLimitExceeded(max: number, retryAfterSeconds: number): ApiError {
  return new ApiError(
    429,
    RATE_LIMIT_EXCEEDED,
    `More than ${max} ${max === 1 ? 'request' : 'requests'} in the current window; retry in ${retryAfterSeconds} s.`,
  );
}

export function methodNotAllowed(method: string, allow: readonly string[]): ApiError {
  const list = allow.join(', ');
  return apiError(405, `${method} is not allowed here; allowed: ${list}.`, [], { allow: list });
}

/** The protocol version a WebSocket handshake must name (RFC 6455, 4.2.1). */
export const WEBSOCKET_VERSION = '13';

/**
 * A 426 for a request to a WebSocket route that does not ask to switch to it (RFC 9110, 15.5.22),
 * in the request's version of HTTP: over HTTP/1.1 with `Upgrade: websocket`; over HTTP/1.0, whose
 * Upgrade a server ignores (RFC 9110, 7.8), the same, its message saying to use HTTP/1.1; over
 * HTTP/2, which forbids the field, the message says to use HTTP/1.1.
 */
export function upgradeRequired(httpVersion: string): ApiError {
  if (httpVersion === '2.0') {
    return new ApiError(
      426,
      'UPGRADE_REQUIRED',
      'A WebSocket is opened over HTTP/1.1 here: Upgrade: websocket is not available over HTTP/2.',
    );
  }
  const message =
    httpVersion === '1.0'
      ? 'A WebSocket is opened over HTTP/1.1: an HTTP/1.0 request cannot switch protocols.'
      : 'This is a WebSocket: ask with Upgrade: websocket and Connection: Upgrade.';
  return new ApiError(426, 'UPGRADE_REQUIRED', message, [], {
    upgrade: 'websocket',
    connection: UPGRADE_CONNECTION,
  });
}

/** A 400 for a WebSocket handshake's bad headers; a bad version is told the one the service speaks (RFC 6455, 4.2.2). */
export function handshakeError(details: ErrorDetail[]): ApiError {
  const version = details.some(({ field }) => field === 'Sec-WebSocket-Version');
  return new ApiError(
    400,
    VALIDATION_ERROR,
    'The WebSocket handshake is not valid.',
    details,
    version ? { 'sec-websocket-version': WEBSOCKET_VERSION } : {},
  );
}

/** A 403 for a WebSocket handshake from a page whose origin CORS_ORIGINS does not allow. */
export function originForbidden(origin: string): ApiError {
  return new ApiError(403, 'FORBIDDEN', `Origin ${origin} may not open a WebSocket here.`, [
    { field: 'Origin', message: 'is not allowed', value: origin },
  ]);
}

/** The message of a 503 for a stream or a WebSocket refused while the memory budget is full. */
const MEMORY_FULL = 'The service holds as much unsent data for its clients as it may; try again shortly.';

/**
 * A 503 for a handshake while the service already holds as many WebSockets as it may, is shutting
 * down, or its memory budget is full.
 */
export function noWebSocketSlot(why: { max: number } | 'draining' | 'memory'): ApiError {
  const message =
    why === 'draining'
      ? 'The service is shutting down; open the WebSocket again shortly.'
      : why === 'memory'
        ? MEMORY_FULL
        : `${why.max} WebSockets are open, the most this service holds; try again shortly.`;
  return apiError(503, message, [], { 'retry-after': '1' });
}

/** A 503 for a request the shared store (Redis) could not serve: unreachable or too slow. */
export function storeUnavailable(): ApiError {
  return apiError(503, 'The shared store is unavailable; try again shortly.', [], { 'retry-after': '1' });
}

/** A 406 for a request to the event stream whose Accept takes neither `text/event-stream`, `text/*` nor `*\/*`. */
export function streamNotAcceptable(accept: string): ApiError {
  return apiError(406, `This route answers text/event-stream only; Accept asks for ${accept}.`);
}

/** A 503 for an event stream asked for while `max` are open. */
export function tooManyStreams(max: number): ApiError {
  return apiError(
    503,
    `${max} event ${max === 1 ? 'stream is' : 'streams are'} open, the most this instance serves; try again shortly.`,
    [],
    {
      'retry-after': '1',
    },
  );
}

/** A 503 for an event stream asked for while the memory budget is full. */
export function streamWhileMemoryFull(): ApiError {
  return apiError(503, MEMORY_FULL, [], { 'retry-after': '1' });
}

/** A 503 for an event stream asked for while the service shuts down: it would be ended at once. */
export function streamWhileShuttingDown(): ApiError {
  return apiError(503, 'The service is shutting down; open the stream again shortly.', [], { 'retry-after': '1' });
}

/** The generic error a client gets for any failure of ours: nothing internal in it. */
export function internalError(): ApiError {
  return apiError(500);
}

/** The answer to a request in a major version of HTTP other than 1. */
export function unsupportedVersion(): ApiError {
  return apiError(505, 'Only HTTP/1.0 and HTTP/1.1 are supported.');
}

/** The body of every error answer: the envelope, stamped now with the request's id. */
export function envelope(error: ApiError, requestId: string): ErrorEnvelope {
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

/** The header of an answer that says when to try again: a 429, and a 503 that knows. */
export const RETRY_AFTER_HEADER = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before trying again.' },
} as const;

/** The OpenAPI response entry of an error status: the shared envelope, with the headers given. */
export function errorResponse(status: DocumentedStatus, headers?: Record<string, object>): object {
  return { description: DESCRIPTIONS[status], ...Type.Ref('ErrorEnvelope'), ...(headers !== undefined && { headers }) };
}

/** OpenAPI response entries for the given error statuses, each the shared envelope. */
export function errorResponses(...statuses: DocumentedStatus[]): Record<number, object> {
  const responses: Record<number, object> = {};
  for (const status of statuses) responses[status] = errorResponse(status);
  return responses;
}
