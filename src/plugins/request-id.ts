import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const ACCEPTED_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request's id: the client's `X-Request-Id` when it is a safe token (so a trace can
 * cross services), otherwise a new UUID. Given to Fastify as `genReqId`.
 */
export function requestId(request: IncomingMessage): string {
  const incoming = request.headers['x-request-id'];
  return typeof incoming === 'string' && ACCEPTED_ID.test(incoming) ? incoming : randomUUID();
}
