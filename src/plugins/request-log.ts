import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/**
 * One JSON line per request, written by Fastify when the response has finished, on every
 * path (routes, 404/405, and errors raised before routing). Its `request_id` is the id in the
 * X-Request-Id header and in any error envelope. A request that failed unexpectedly is
 * logged at error level with the error and its stack.
 */
export class RequestLog extends LogController {
  constructor() {
    super({ requestIdLogLabel: 'request_id' });
  }

  // The completed line says all there is to say; a second line per request would double the volume.
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = {
      method: request.method,
      url: request.originalUrl, // as sent: /api/v1/hello, not the /api/hello it was routed as
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      duration_ms: Math.round(reply.elapsedTime * 1000) / 1000,
    };
    const failure = request.failure ?? error;
    if (failure == null) request.log.info(line, 'request completed');
    else request.log.error({ ...line, err: failure }, 'request failed');
  }
}
