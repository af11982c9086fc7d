import type { FastifyInstance } from 'fastify';
import { VERSION } from '../version.js';

/** `GET /openapi.json`: the document, made and serialised when first asked for. */
export async function openapiRoute(app: FastifyInstance): Promise<void> {
  let text: Promise<string> | undefined;
  app.get(
    '/openapi.json',
    {
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
      text ??= app.openapi().then(({ object }) => JSON.stringify(object));
      return reply.type('application/json; charset=utf-8').send(await text);
    },
  );
}
