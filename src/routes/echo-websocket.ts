import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import * as ws from 'ws';
import {
  type ApiError,
  type ErrorDetail,
  errorResponse,
  errorResponses,
  handshakeError,
  noWebSocketSlot,
  originForbidden,
  RETRY_AFTER_HEADER,
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
        operationId: 'echoWebSocket',
        summary: 'A WebSocket that echoes every message',
        description:
          'The handshake of a WebSocket (RFC 6455) over HTTP/1.1 or HTTPS. Every message comes back ' +
          'unchanged, of the same type (text or binary) and with the same bytes; every ping is answered. ' +
          'The messages are described by the AsyncAPI document at `/asyncapi.json`. A message larger than ' +
          '`WS_MAX_MESSAGE_BYTES` closes the connection with 1009, one in more fragments than one per 64 bytes ' +
          'of it with 1008, each with a reason; a client that does not read its echoes and pongs is ' +
          'not read past `WS_MAX_BUFFERED_BYTES`; a client that does not answer a ping by the next one ' +
          '(`WS_PING_INTERVAL_MS`) is ended; on shutdown each connection is closed with 1001. HTTP/1.0 cannot ' +
          'switch (426), and a handshake has no body (400).',
        tags: ['echo'],
        headers: HandshakeHeaders,
        response: {
          101: {
            description: 'Switching Protocols: the connection is now a WebSocket.',
            type: 'null',
            headers: {
              Upgrade: { type: 'string', const: 'websocket' },
              Connection: { type: 'string', const: 'Upgrade' },
              'Sec-WebSocket-Accept': {
                type: 'string',
                description: 'The key’s answer (RFC 6455, 4.2.2).',
                examples: ['s3pPLMBiTxaQ9kYGzzhZRbK+xOo='],
              },
            },
          },
          400: errorResponse(400, {
            'Sec-WebSocket-Version': {
              type: 'string',
              const: WEBSOCKET_VERSION,
              description: 'The version the service speaks, with a handshake that names another or none.',
            },
          }),
          ...errorResponses(403),
          426: errorResponse(426, {
            Upgrade: {
              type: 'string',
              const: 'websocket',
              description: 'Over HTTP/1.1: the protocol to ask for.',
              required: false,
            },
          }),
          503: errorResponse(503, RETRY_AFTER_HEADER),
        },
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
