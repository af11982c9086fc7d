import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { errorResponses } from '../errors.js';
import { localDateTime } from '../lib/local-time.js';
import { LocalDateTime } from '../schemas.js';

export const GREETING = 'Hello, World!';

export const HelloMessage = Type.Object(
  { message: Type.String({ examples: [GREETING] }), timestamp: LocalDateTime },
  { additionalProperties: false, title: 'HelloMessage' },
);

export const Greeting = Type.Object(
  { greeting: Type.String({ examples: ['Hello, Ada!'] }) },
  { additionalProperties: false, title: 'Greeting' },
);

export const GreetingParams = Type.Object({
  name: Type.String({
    description: 'Any text, percent-encoded in the path; not empty.',
    minLength: 1,
    errorMessage: 'must not be empty',
    examples: ['Ada'],
  }),
});

export const helloRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/api/hello',
    {
      schema: {
        operationId: 'getHello',
        summary: 'Hello message',
        description: 'A fixed greeting with the server’s local date-time.',
        tags: ['greeting'],
        response: { 200: HelloMessage },
      },
    },
    async () => ({ message: GREETING, timestamp: localDateTime() }),
  );

  app.get(
    '/api/hello/:name',
    {
      schema: {
        operationId: 'getGreeting',
        summary: 'Greeting for a name',
        description: 'Greets `name`, percent-decoded and returned exactly, whatever its script.',
        tags: ['greeting'],
        params: GreetingParams,
        response: { 200: Greeting, ...errorResponses(400) },
      },
    },
    async (request) => ({ greeting: `Hello, ${request.params.name}!` }),
  );
};
