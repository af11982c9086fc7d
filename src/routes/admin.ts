import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { readAdminToken } from '../config/files.js';
import { errorResponse, errorResponses, unauthorized } from '../errors.js';
import { bearerToken, sameSecret } from '../lib/bearer-token.js';
import { OPERATOR_SECURITY } from '../schemas.js';
import type { Readiness } from '../services/readiness.js';

export interface AdminRoutesOptions {
  /** The file of the operator's bearer token (ADMIN_TOKEN_FILE). */
  tokenFile: string;
  readiness: Readiness;
}

/**
 * How many Authorization fields the request has: over HTTP/1.1 Node joins them into one value, over
 * HTTP/2 it keeps the first; either way only the raw fields tell.
 */
function authorizationFields(request: FastifyRequest): number {
  const lines = request.raw.rawHeaders;
  let count = 0;
  for (let i = 0; i < lines.length; i += 2) if (lines[i]?.toLowerCase() === 'authorization') count += 1;
  return count;
}

const CHECKED_FIRST =
  'The token is checked before anything else of the request: without it, or with `Authorization` given more than once, the answer is 401 whatever the body.';

const DONE = { type: 'null', description: 'Done; no body.' } as const;

const UNAUTHORIZED = errorResponse(401, {
  'WWW-Authenticate': {
    type: 'string',
    enum: ['Bearer', 'Bearer error="invalid_token"'],
    description:
      'The scheme to authenticate with; `error="invalid_token"` when a token was sent and is not the right one.',
  },
});

/**
 * The operator's readiness switch, to rehearse draining an instance: `POST /readyz/disable` takes
 * it out of service (`/readyz` answers 503 saying so, `/healthz` and the API go on serving) and
 * `POST /readyz/enable` puts it back. Only with the bearer token of ADMIN_TOKEN_FILE, compared in
 * constant time. The file is read again at each of these requests, so that a rotated token is
 * taken without a restart; one that cannot be read then keeps the token read last.
 */
export const adminRoutes: FastifyPluginAsync<AdminRoutesOptions> = async (app, { tokenFile, readiness }) => {
  let token = readAdminToken(tokenFile);
  let unreadable: string | null = null;

  /**
   * Throws the 401 unless the request carries, once, the token the file holds now. A request hook
   * of the routes: checked before the body is read or anything else of the request is judged, so
   * that a caller without the token is told nothing but 401.
   */
  const authenticate = async (request: FastifyRequest): Promise<void> => {
    try {
      token = readAdminToken(tokenFile);
      unreadable = null;
    } catch (error) {
      const why = (error as Error).message;
      // Once per cause: every request to these routes would say it again.
      if (why !== unreadable)
        app.log.warn({ file: tokenFile, reason: why }, 'ADMIN_TOKEN_FILE: the token read last is used');
      unreadable = why;
    }
    if (authorizationFields(request) > 1) throw unauthorized('repeated');
    const given = bearerToken(request.headers.authorization);
    if (given === null || !sameSecret(given, token)) throw unauthorized(given === null ? 'none' : 'wrong');
  };

  const options = (operationId: string, summary: string, description: string) => ({
    onRequest: authenticate,
    schema: {
      operationId,
      summary,
      description: `${description} ${CHECKED_FIRST}`,
      tags: ['operations'],
      security: [{ [OPERATOR_SECURITY]: [] }],
      // No body is asked for, but one sent with the token is read as any POST's: over the limit 413, not JSON 415.
      response: { 204: DONE, 401: UNAUTHORIZED, ...errorResponses(413, 415) },
    },
  });

  app.post(
    '/readyz/disable',
    options(
      'disableReadiness',
      'Take out of service',
      'From now on `/readyz` answers 503, naming the request that did this, so that load balancers stop sending traffic; `/healthz` stays 200 and every request is still served. Again while out of service: 204, nothing changes.',
    ),
    async (request, reply) => {
      if (readiness.disable(request.id)) {
        app.log.warn(
          { request_id: request.id },
          'taken out of service by an operator: /readyz answers 503 until POST /readyz/enable',
        );
      }
      return reply.code(204).send();
    },
  );

  app.post(
    '/readyz/enable',
    options(
      'enableReadiness',
      'Put back in service',
      '`/readyz` answers 200 again, unless the service is shutting down or Redis is unavailable. Again while in service: 204, nothing changes.',
    ),
    async (request, reply) => {
      if (readiness.enable()) app.log.info({ request_id: request.id }, 'put back in service by an operator');
      return reply.code(204).send();
    },
  );
};
