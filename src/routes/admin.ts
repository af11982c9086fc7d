import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { readAdminToken } from '../config.js';
import { errorResponse, errorResponses, unauthorized } from '../errors.js';
import { bearerToken, sameSecret } from '../lib/bearer-token.js';
import { OPERATOR_SECURITY } from '../schemas.js';
import type { Readiness } from '../services/readiness.js';

export interface AdminRoutesOptions {
  /** The file of the operator's bearer token (ADMIN_TOKEN_FILE). */
  tokenFile: string;
  readiness: Readiness;
}

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

  /** Throws the 401 unless the request carries the token the file holds now. */
  const authenticate = (request: FastifyRequest): void => {
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
    const given = bearerToken(request.headers.authorization);
    if (given === null || !sameSecret(given, token)) throw unauthorized(given !== null);
  };

  const schema = (operationId: string, summary: string, description: string) => ({
    operationId,
    summary,
    description,
    tags: ['operations'],
    security: [{ [OPERATOR_SECURITY]: [] }],
    // No body is asked for, but one sent is read as any POST's: over the limit 413, not JSON 415.
    response: { 204: DONE, 401: UNAUTHORIZED, ...errorResponses(413, 415) },
  });

  app.post(
    '/readyz/disable',
    {
      schema: schema(
        'disableReadiness',
        'Take out of service',
        'From now on `/readyz` answers 503, naming the request that did this, so that load balancers stop sending traffic; `/healthz` stays 200 and every request is still served. Again while out of service: 204, nothing changes.',
      ),
    },
    async (request, reply) => {
      authenticate(request);
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
    {
      schema: schema(
        'enableReadiness',
        'Put back in service',
        '`/readyz` answers 200 again, unless the service is shutting down or Redis is unavailable. Again while in service: 204, nothing changes.',
      ),
    },
    async (request, reply) => {
      authenticate(request);
      if (readiness.enable()) app.log.info({ request_id: request.id }, 'put back in service by an operator');
      return reply.code(204).send();
    },
  );
};
