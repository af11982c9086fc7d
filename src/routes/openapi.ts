import type { FastifyInstance } from 'fastify';
import { VERSION } from '../version.js';

/** `GET /openapi.json`: the document, made and serialised when first asked for. */
export async function openapiRoute(app: FastifyInstance): Promise<void> {
  // Its bytes, encoded once: an 80 KB string encoded again for every answer was most of its cost.
  let bytes: Promise<Buffer> | undefined;
  app.get(
    '/openapi.json',
    {
      config: { keptAnswer: true },
      schema: {
        operationId: 'getOpenApi',
        summary: 'OpenAPI document',
        description: 'This document: OpenAPI 3.1 of every route.',
        tags: ['operations'],
        response: {
          200: {
            type: 'object',
            additionalProperties: true,
            description: 'OpenAPI 3.1 document.',
            examples: [{ openapi: '3.1.0', info: { title: 'Greeting and Echo Service', version: VERSION }, paths: {} }],
          },
        },
      },
    },
    async (_request, reply) => {
      bytes ??= app.openapi().then(({ object }) => Buffer.from(JSON.stringify(object)));
      return reply.type('application/json; charset=utf-8').send(await bytes);
    },
  );
}
