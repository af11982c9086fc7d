import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import * as ws from 'ws';
import {
  type ApiError,
  type ErrorDetail,
  errorResponses,
  handshakeError,
  noWebSocketSlot,
  originForbidden,
  upgradeRequired,
  WEBSOCKET_VERSION,
} from '../errors.js';
import type { WebSocketEcho } from '../http/websockets.js';
import { ECHO_WEBSOCKET_PATH, HandshakeHeaders } from '../schemas.js';

/** ws's reader of Sec-WebSocket-Extensions (RFC 6455, 9.1), which ws exports and @types/ws does not declare. */
const { extension } = ws as unknown as { extension: { parse(field: string): object } };

/** RFC 6455 (4.1): the key is 16 random bytes in base64. */
const KEY = /^[+/0-9A-Za-z]{22}==$/;

/**
 * Whether Sec-WebSocket-Extensions is a list of extensions as RFC 6455 (9.1) writes them, read by
 * ws's own reader: one that is not is refused whatever the service speaks, while one it does not
 * speak (permessage-deflate with WS_PERMESSAGE_DEFLATE=false) is declined (9.1) by not naming it.
 */
function wellFormedExtensions(field: string): boolean {
  try {
    extension.parse(field);
    return true;
  } catch (error) {
    if (error instanceof SyntaxError) return false;
    throw error;
  }
}

/** Whether a field's comma-separated list holds `token`, in any case (RFC 9110, 7.8). */
function listHas(field: string | undefined, token: string): boolean {
  return field?.split(',').some((member) => member.trim().toLowerCase() === token) === true;
}

export interface EchoWebSocketOptions {
  echo: WebSocketEcho;
  /** Whether a page from `origin` may open the WebSocket: CORS_ORIGINS's rule. */
  originAllowed: (origin: string) => boolean;
}

/**
 * Why a handshake cannot succeed, in the contract's order: not asking to switch (426; HTTP/1.0
 * cannot, RFC 9110, 7.8), its Sec-WebSocket-Key, -Version and -Extensions and a body (400, each
 * named), its Origin (403); null if it may.
 */
function handshakeRefusal(request: FastifyRequest, originAllowed: (origin: string) => boolean): ApiError | null {
  const { headers } = request;
  // Node marks a request that asked to switch, whose connection it let go of (plugins/http-guard.ts).
  const raw = request.raw as typeof request.raw & { upgrade?: boolean };
  if (raw.httpVersion === '1.0') return upgradeRequired('1.0');
  if (request.method !== 'GET' || raw.upgrade !== true || !listHas(headers.upgrade, 'websocket')) {
    return upgradeRequired(raw.httpVersion);
  }
  const details: ErrorDetail[] = [];
  const key = headers['sec-websocket-key'];
  if (key === undefined) details.push({ field: 'Sec-WebSocket-Key', message: 'is required', value: null });
  else if (!KEY.test(key)) {
    details.push({ field: 'Sec-WebSocket-Key', message: 'must be 16 bytes in base64', value: key });
  }
  const version = headers['sec-websocket-version'];
  if (version === undefined) details.push({ field: 'Sec-WebSocket-Version', message: 'is required', value: null });
  else if (version.trim() !== WEBSOCKET_VERSION) {
    details.push({ field: 'Sec-WebSocket-Version', message: `must be ${WEBSOCKET_VERSION}`, value: version });
  }
  const extensions = headers['sec-websocket-extensions'];
  if (extensions !== undefined && !wellFormedExtensions(extensions)) {
    details.push({ field: 'Sec-WebSocket-Extensions', message: 'is not valid', value: extensions });
  }
  // The bytes after the head that Content-Length counts are the request's (RFC 9112, 6.3), never
  // the WebSocket's first frames; an echo has nothing to do with a body.
  const length = headers['content-length'];
  if (length !== undefined && Number(length) > 0) {
    details.push({ field: 'Content-Length', message: 'must be 0: a handshake has no body', value: length });
  }
  if (details.length > 0) return handshakeError(details);
  const { origin } = headers;
  return origin === undefined || originAllowed(origin) ? null : originForbidden(origin);
}

export const echoWebSocketRoutes: FastifyPluginAsyncTypebox<EchoWebSocketOptions> = async (
  app,
  { echo, originAllowed },
) => {
  app.get(
    ECHO_WEBSOCKET_PATH,
    {
      schema: {
        // A WebSocket is no request and response that OpenAPI can describe: its success is the 101
        // that switches protocols, never a 2xx or 3xx, so every linter and client generator reads
        // it as an operation that cannot succeed. The AsyncAPI document (routes/asyncapi.ts)
        // describes it, handshake and refusals included, and the OpenAPI document links to it.
        hide: true,
        headers: HandshakeHeaders,
        // The envelope's serialiser for each refusal.
        response: errorResponses(400, 403, 426, 503),
      },
    },
    (request, reply) => {
      const refusal = handshakeRefusal(request, originAllowed);
      if (refusal !== null) throw refusal;
      const full = echo.refusal();
      if (full !== null) throw noWebSocketSlot(full);
      const refused = echo.accept(request, reply);
      if (refused !== null) throw refused;
    },
  );
};
