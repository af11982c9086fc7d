import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from 'typebox';
import { errorResponses } from '../errors.js';
import { compactJson } from '../lib/json-text.js';
import { localDateTime } from '../lib/local-time.js';
import { LocalDateTime } from '../schemas.js';

const AnyObject = Type.Object(
  {},
  {
    additionalProperties: true,
    title: 'JsonObject',
    description: 'Any JSON object.',
    errorMessage: 'must be a JSON object',
    examples: [{ name: 'Ada', tags: ['x'], n: 1.5 }],
  },
);

export const Echo = Type.Object(
  {
    received: Type.Object({}, { additionalProperties: true, description: 'The request body, unchanged in content.' }),
    echo: Type.Literal(true),
    timestamp: LocalDateTime,
  },
  { additionalProperties: false, title: 'Echo' },
);

export const echoRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/api/echo',
    {
      // The body's own text is echoed, so numbers keep every digit and keys stay as sent.
      config: { rawJson: true },
      schema: {
        operationId: 'echo',
        summary: 'Echo of a posted object',
        description:
          'Returns the posted JSON object exactly: every key (`__proto__` included), key order, ' +
          'Unicode and every number with its exact decimal value.',
        tags: ['echo'],
        body: AnyObject,
        response: { 200: Echo, ...errorResponses(400, 413, 415) },
      },
    },
    async (request, reply) => {
      // Validation has passed, so the parser kept the text of a JSON object.
      const received = compactJson(request.rawJson as string);
      const text = `{"received":${received},"echo":true,"timestamp":"${localDateTime()}"}`;
      // Already-serialised JSON: Fastify sends a string with a JSON content type as it is.
      return reply.type('application/json; charset=utf-8').send(text as unknown as Static<typeof Echo>);
    },
  );
};
