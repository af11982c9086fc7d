import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { apiError, errorResponses } from '../errors.js';

/**
 * Liveness and readiness, for load balancers and orchestrators. Readiness turns 503 as soon
 * as shutdown begins, so traffic drains away while in-flight requests finish.
 */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        summary: 'Liveness',
        description: 'The process is up and answering.',
        tags: ['operations'],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok') },
            { additionalProperties: false, examples: [{ status: 'ok' }] },
          ),
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
        description: 'Ready for traffic; 503 while shutting down.',
        tags: ['operations'],
        response: {
          200: Type.Object(
            { status: Type.Literal('ready') },
            { additionalProperties: false, examples: [{ status: 'ready' }] },
          ),
          ...errorResponses(503),
        },
      },
    },
    async () => {
      if (app.draining) throw apiError(503, 'The service is shutting down.');
      return { status: 'ready' as const };
    },
  );
};
