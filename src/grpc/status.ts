import { Code, ConnectError } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import {
  codeToHttpStatus,
  endStreamFlag,
  endStreamToJson,
  errorToJsonBytes,
} from '@connectrpc/connect/protocol-connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import type { FastifyReply, FastifyRequest } from 'fastify';

type OutgoingDetail = NonNullable<ConstructorParameters<typeof ConnectError>[3]>[number];

import type { ApiError } from '../errors.js';
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RequestInfoSchema,
  RetryInfoSchema,
} from './generated/google/rpc/error_details_pb.js';

/** The status of a call that succeeded: no member of ConnectRPC's `Code`, which names errors only. */
export const OK = 0;

/** A call's status: OK or an error's code. */
export type GrpcCode = Code | typeof OK;

/** The `domain` of every ErrorInfo this service sends (AIP-193). */
const ERROR_DOMAIN = 'greeting-service';

/**
 * The gRPC status of an HTTP status, as the contract maps them (and google.rpc.Code's own HTTP
 * mapping for the statuses it leaves to it); any other 4xx is FAILED_PRECONDITION, any other 5xx
 * INTERNAL.
 */
const CODE_OF_STATUS: Readonly<Record<number, Code>> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  405: Code.Unimplemented,
  406: Code.InvalidArgument,
  408: Code.DeadlineExceeded,
  409: Code.Aborted,
  412: Code.FailedPrecondition,
  413: Code.ResourceExhausted,
  415: Code.InvalidArgument,
  416: Code.OutOfRange,
  422: Code.InvalidArgument,
  429: Code.ResourceExhausted,
  431: Code.ResourceExhausted,
  499: Code.Canceled,
  500: Code.Internal,
  501: Code.Unimplemented,
  502: Code.Unavailable,
  503: Code.Unavailable,
  504: Code.DeadlineExceeded,
};

function codeOfStatus(status: number): Code {
  return CODE_OF_STATUS[status] ?? (status < 500 ? Code.FailedPrecondition : Code.Internal);
}

/**
 * An error answer as a gRPC status: the code its HTTP status maps to (or `code`), the envelope's
 * message, and the envelope as google.rpc.Status details (AIP-193): ErrorInfo with the envelope's
 * code, BadRequest with its details, RequestInfo with the request's id, and RetryInfo where HTTP
 * sends Retry-After.
 */
export function toConnectError(
  error: ApiError,
  requestId: string,
  code = (error.grpcStatus as Code | null) ?? codeOfStatus(error.statusCode),
  retryAfter: unknown = error.headers['retry-after'],
): ConnectError {
  const details: OutgoingDetail[] = [{ desc: ErrorInfoSchema, value: { reason: error.code, domain: ERROR_DOMAIN } }];
  if (error.details.length > 0) {
    const fieldViolations = error.details.map(({ field, message }) => ({ field, description: message }));
    details.push({ desc: BadRequestSchema, value: { fieldViolations } });
  }
  details.push({ desc: RequestInfoSchema, value: { requestId } });
  const seconds = Number(retryAfter);
  if (Number.isSafeInteger(seconds) && seconds > 0) {
    details.push({ desc: RetryInfoSchema, value: { retryDelay: { seconds: BigInt(seconds) } } });
  }
  return new ConnectError(error.message, code, undefined, details);
}

/** The protocol of a gRPC route's request, by its content type; anything else is the Connect protocol's unary call. */
export type Protocol = 'grpc' | 'grpc-web' | 'connect-stream' | 'connect';

export function protocolOf(contentType: string | undefined): Protocol {
  const type = contentType?.toLowerCase() ?? '';
  if (type.startsWith('application/grpc-web')) return 'grpc-web';
  if (type.startsWith('application/grpc')) return 'grpc';
  if (type.startsWith('application/connect+')) return 'connect-stream';
  return 'connect';
}

const END_STREAM = endStreamFlag;

/**
 * Answers a gRPC route's request with `error` where no RPC handler does: refused by a hook (the
 * rate limit, a fault, HTTP's own rules) or past its deadline. gRPC and gRPC-Web get a
 * trailers-only answer, the Connect protocol its error body, in the form each protocol's clients read.
 */
export function sendGrpcError(error: ConnectError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const protocol = protocolOf(request.headers['content-type']);
  request.grpcCode = error.code;
  if (protocol === 'grpc' || protocol === 'grpc-web') {
    const status = setTrailerStatus(new Headers(), error);
    const type = request.headers['content-type'] ?? `application/${protocol}`;
    // Trailers-only: the status in the head, which over HTTP/2 goes out with END_STREAM (no body:
    // `Http2Response`), as gRPC's clients, the C core's included, read it.
    for (const [name, value] of status) reply.header(name, value);
    return reply.code(200).type(type).send();
  }
  if (protocol === 'connect-stream') {
    const end = JSON.stringify(endStreamToJson(new Headers(), error, undefined));
    const body = encodeEnvelope(END_STREAM, new TextEncoder().encode(end));
    return reply
      .code(200)
      .type(request.headers['content-type'] ?? 'application/connect+json')
      .send(Buffer.from(body));
  }
  return reply
    .code(codeToHttpStatus(error.code))
    .type('application/json')
    .send(Buffer.from(errorToJsonBytes(error, undefined)));
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A gRPC call's status once it has one: for its log line and its metrics; null for any other request. */
    grpcCode: GrpcCode | null;
  }
}
