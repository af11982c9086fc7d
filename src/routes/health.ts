import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { apiError, errorResponses } from '../errors.js';
import { type CheckResults, EXCLUDABLE_CHECK, type Readiness as ReadinessState } from '../services/readiness.js';

export interface HealthRoutesOptions {
  readiness: ReadinessState;
}

/**
 * Liveness and readiness, for load balancers and orchestrators. Readiness turns 503 as soon
 * as shutdown begins, so traffic drains away while in-flight requests finish, while an operator
 * has taken the service out, and while the stores cannot serve (Redis unreachable), saying why;
 * liveness stays 200 then, since a restart would cure none of these. As the Kubernetes API
 * server's own `/readyz`, it takes `exclude=store` and `verbose`.
 */
export const Health = Type.Object(
  { status: Type.Literal('ok') },
  { additionalProperties: false, title: 'Health', examples: [{ status: 'ok' }] },
);

const CheckState = Type.String({ enum: ['ok', 'excluded'] });

const CheckStates = Type.Object(
  { shutdown: CheckState, operator: CheckState, store: CheckState },
  { additionalProperties: false, description: 'With `verbose`: each check and its state.' },
);

export const Readiness = Type.Object(
  { status: Type.Literal('ready'), checks: Type.Optional(CheckStates) },
  {
    additionalProperties: false,
    title: 'Readiness',
    examples: [{ status: 'ready' }, { status: 'ready', checks: { shutdown: 'ok', operator: 'ok', store: 'excluded' } }],
  },
);

export const ReadinessQuery = Type.Object({
  exclude: Type.Optional(
    Type.Literal(EXCLUDABLE_CHECK, {
      description:
        "Leave the shared store (Redis) out: shutting down and the operator's switch still count. For probes that must not take every instance out when the store every instance shares fails.",
      errorMessage: `must be ${EXCLUDABLE_CHECK}, the one check that can be left out`,
      examples: [EXCLUDABLE_CHECK],
    }),
  ),
  verbose: Type.Optional(
    Type.String({
      enum: ['', 'true', 'false'],
      description:
        "Present (empty or `true`): list each check (`shutdown`, `operator`, `store`) and its state, in `checks` when ready and in the 503's `details` when not.",
      errorMessage: 'must be empty, true or false',
      examples: [''],
    }),
  ),
});

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
          'Ready for traffic; 503 while shutting down, while taken out of service by an operator, or while Redis is unavailable, saying why. `exclude=store` leaves Redis out; `verbose` lists each check.',
        tags: ['operations'],
        querystring: ReadinessQuery,
        response: {
          200: Readiness,
          ...errorResponses(400, 503),
        },
      },
    },
    async (request) => {
      const excludeStore = request.query.exclude === EXCLUDABLE_CHECK;
      const { verbose } = request.query;
      if (verbose === undefined || verbose === 'false') {
        const reason = await readiness.notReadyReason(excludeStore);
        if (reason !== null) throw apiError(503, reason);
        return { status: 'ready' as const };
      }
      const checks = await readiness.checks(excludeStore);
      const failed = Object.values(checks).find((check) => check.state === 'failed');
      if (failed !== undefined) throw apiError(503, failed.reason ?? undefined, checkDetails(checks));
      const { shutdown, operator, store } = checks;
      return {
        status: 'ready' as const,
        checks: { shutdown: shutdown.state, operator: operator.state, store: store.state },
      };
    },
  );
};

/** Each check as one detail of the 503's envelope: the check, what it found, its state. */
function checkDetails(checks: CheckResults) {
  return Object.entries(checks).map(([check, { state, reason }]) => ({
    field: check,
    message: reason ?? state,
    value: state,
  }));
}
