import type { ErrorObject } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import {
  ApiError,
  apiError,
  type ErrorDetail,
  ErrorEnvelope,
  envelope,
  INTERNAL_ERROR,
  internalError,
  methodNotAllowed,
  payloadTooLarge,
  storeUnavailable,
  validationError,
} from '../errors.js';
import { pointerSegments } from '../lib/json-pointer.js';
import { deepJson } from '../lib/json-text.js';
import { StoreUnavailableError } from '../stores/availability.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The unexpected error behind a 500, kept for the request's log line; absent if refused before routing. */
    failure?: Error | null;
  }
}

/**
 * Errors are shaped here and only here: whatever was thrown, by our code, a plugin or
 * Fastify, the client gets the envelope of docs/interface-spec.md, 7.1, with the request's id.
 */

function notFound(request: FastifyRequest): ApiError {
  return apiError(404, `No route for ${request.method} ${request.originalUrl.split('?', 1)[0]}.`);
}

type Part = 'body' | 'querystring' | 'params' | 'headers';

function valueAt(root: unknown, segments: readonly string[]): unknown {
  let node = root;
  for (const segment of segments) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, segment)) return null;
    node = (node as Record<string, unknown>)[segment];
  }
  return node === undefined ? null : node;
}

/** Where an Ajv error points, and the message the client gets for it. */
function locate(error: ErrorObject): { segments: string[]; message: string } {
  const segments = pointerSegments(error.instancePath);
  switch (error.keyword) {
    case 'required':
      return { segments: [...segments, String(error.params.missingProperty)], message: 'is required' };
    case 'additionalProperties':
      return { segments: [...segments, String(error.params.additionalProperty)], message: 'is not allowed' };
    default:
      return { segments, message: error.message ?? 'is not valid' };
  }
}

/**
 * One detail per invalid field, in the order Ajv reports them (keys that are not allowed first,
 * then the properties in schema order): the field's name (dotted when nested,
 * `body` for the body as a whole), the message, and the value as the client sent it.
 */
export function validationDetails(errors: readonly ErrorObject[], part: Part, source: unknown): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const { segments, message } = locate(error);
    const field = segments.length === 0 ? (part === 'body' ? 'body' : part) : segments.join('.');
    if (seen.has(field)) continue;
    seen.add(field);
    details.push({ field, message, value: segments.length === 0 ? (source ?? null) : valueAt(source, segments) });
  }
  return details;
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
  FST_ERR_CTP_BODY_TOO_LARGE: (_, request) => payloadTooLarge(request.routeOptions.bodyLimit),
  // @fastify/static refuses a path that could leave its folder (a backslash, a NUL byte): for the
  // client, as for any other path that names no file, there is nothing there.
  FST_STATIC_FORBIDDEN_PATH: (_, request) => notFound(request),
  FST_ERR_BAD_URL: (_, request) =>
    validationError([{ field: 'path', message: 'must be valid percent-encoded UTF-8', value: request.originalUrl }]),
};

function isHttpError(error: object): boolean {
  return typeof (error as { expose?: unknown }).expose === 'boolean';
}

/** Anything thrown as the contract's error: what it means to answer, or the 500 that hides it. */
export function toApiError(error: FastifyError | ApiError, request: FastifyRequest): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StoreUnavailableError) return storeUnavailable();
  if (error.validation !== undefined && error.validationContext !== undefined) {
    const part = error.validationContext as Part;
    const source: unknown = part === 'querystring' ? request.query : request[part];
    return validationError(validationDetails(error.validation, part, source));
  }
  const framework = FRAMEWORK_ERRORS[error.code];
  if (framework !== undefined) return framework(error, request);
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // docs/interface-spec.md, 7.2, rule 2: an error that carries no code is INTERNAL_ERROR, whatever its status. An HTTP
    // error (http-errors, marked by its `expose` flag) is named by its status: it is how the
    // documentation's static files report a failed If-Match (412) or an unsatisfiable Range (416).
    const code: unknown = error.code;
    return typeof code === 'string' || isHttpError(error)
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

/**
 * 404 for a path no route matches, 405 with `Allow` for a path that exists with other
 * methods. A second router holds every route's path so that the methods a path allows can
 * be found by matching, with the same rules as the real router.
 */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    app.addSchema(ErrorEnvelope);
    app.decorateRequest('failure', null);

    // Matching as the app's own router does.
    const paths = FindMyWay(app.initialConfig.routerOptions);
    const methods = new Set<HTTPMethod>();
    app.addHook('onRoute', (route) => {
      for (const method of [route.method].flat() as HTTPMethod[]) {
        methods.add(method);
        if (!paths.hasRoute(method, route.url)) paths.on(method, route.url, () => {});
      }
    });

    app.setErrorHandler(sendError);
    const unrouted = (request: FastifyRequest): ApiError => {
      // Matched as routed (/api/v1/hello as /api/hello), reported as sent.
      const path = request.url.split('?', 1)[0] ?? '/';
      const allow = [...methods].filter((method) => paths.find(method, path) !== null);
      // A route that takes this method can still find nothing (a file the documentation does not have).
      return allow.length > 0 && !allow.includes(request.method as HTTPMethod)
        ? methodNotAllowed(request.method, allow)
        : notFound(request);
    };
    // The route first, then the body: a request no route takes is answered before its body is read,
    // so a body that is no JSON or over the limit does not hide the 404 or 405. Fastify runs the
    // hooks given with the handler after the app's own (those of HTTP's rules and versioning).
    const beforeTheBody: preParsingHookHandler = (request, _reply, payload, done) => done(unrouted(request), payload);
    app.setNotFoundHandler(
      { preParsing: beforeTheBody } as Parameters<typeof app.setNotFoundHandler>[0],
      (request, reply) => sendError(unrouted(request), request, reply),
    );
  },
  { name: 'errors' },
);
