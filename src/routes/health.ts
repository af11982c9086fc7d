import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { apiError, errorResponses } from '../errors.js';
import type { Readiness as ReadinessState } from '../services/readiness.js';

export interface HealthRoutesOptions {
  readiness: ReadinessState;
}

/**
 * Liveness and readiness, for load balancers and orchestrators. Readiness turns 503 as soon
 * as shutdown begins, so traffic drains away while in-flight requests finish, while an operator
 * has taken the service out, and while the stores cannot serve (Redis unreachable), saying why;
 * liveness stays 200 then, since a restart would cure none of these.
 */
export const Health = Type.Object(
  { status: Type.Literal('ok') },
  { additionalProperties: false, title: 'Health', examples: [{ status: 'ok' }] },
);

export const Readiness = Type.Object(
  { status: Type.Literal('ready') },
  { additionalProperties: false, title: 'Readiness', examples: [{ status: 'ready' }] },
);

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { readiness }) => {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        summary: 'Liveness',
        description: 'The process is up and answering.',
        tags: ['operations'],
        response: {
          200: Health,
        },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        summary: 'Readiness',
        description:
          'Ready for traffic; 503 while shutting down, while taken out of service by an operator, or while Redis is unavailable, saying why.',
        tags: ['operations'],
        response: {
          200: Readiness,
          ...errorResponses(503),
        },
      },
    },
    async () => {
      const reason = await readiness.notReadyReason();
      if (reason !== null) throw apiError(503, reason);
      return { status: 'ready' as const };
    },
  );
};
