import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { apiError } from '../errors.js';
import { protoFiles } from '../proto-files.js';

const PROTO_TYPE = 'text/plain; charset=utf-8';

/**
 * `GET /proto/<import path>`: the `.proto` files of the gRPC services, to generate a client from
 * (`buf generate`, `protoc`), each at the path its imports name it by; `GET /proto` lists them.
 */
export const protoRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const files = protoFiles();
  // As bytes, each compressed once per coding (`keptAnswer`).
  const bytes = new Map([...files].map(([path, text]) => [path, Buffer.from(text)]));
  const list = Buffer.from(`${[...files.keys()].join('\n')}\n`);

  // Files for download, as the documentation page's are: no operations of the OpenAPI document.
  app.get('/proto', { config: { keptAnswer: true }, schema: { hide: true } }, async (_request, reply) =>
    reply.type(PROTO_TYPE).send(list),
  );

  app.get(
    '/proto/*',
    {
      config: { keptAnswer: true },
      schema: { hide: true, params: Type.Object({ '*': Type.String() }) },
    },
    async (request, reply) => {
      const path = request.params['*'];
      const file = bytes.get(path);
      if (file === undefined) throw apiError(404, `No .proto file ${path}.`);
      return reply.type(PROTO_TYPE).send(file as unknown as string);
    },
  );
};
