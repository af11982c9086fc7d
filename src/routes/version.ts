import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BUILD_INFO, UNKNOWN } from '../version.js';

/**
 * Which build answers, as podinfo's `/version` and Kubernetes' tell it: for an operator who asks
 * what runs where, and for a rollout that waits until every instance runs the new commit. Read
 * once at start-up, from what the build wrote (src/version.ts); nothing is computed per request.
 */
export const Version = Type.Object(
  {
    version: Type.String({ description: "The package's version (package.json).", examples: ['0.1.0'] }),
    commit: Type.String({
      description: `The commit the service was built from (the full SHA of \`git rev-parse HEAD\`, or \`SOURCE_COMMIT\` as the build was given it); \`${UNKNOWN}\` for a build that knew neither, and when run from the sources.`,
      examples: ['7231d226130522d9d15b364cb336e7b1fd15d8e4'],
    }),
    build_time: Type.String({
      description: `When the service was built, in ISO 8601 UTC (\`SOURCE_DATE_EPOCH\` when the build was given it); \`${UNKNOWN}\` when run from the sources.`,
      examples: ['2026-11-29T11:37:41.000Z'],
    }),
    runtime: Type.String({
      description: 'The Node.js that runs the service: `node` and its version.',
      examples: ['node v24.11.1'],
    }),
  },
  {
    additionalProperties: false,
    title: 'Version',
    examples: [
      {
        version: '0.1.0',
        commit: '7231d226130522d9d15b364cb336e7b1fd15d8e4',
        build_time: '2026-11-29T11:37:41.000Z',
        runtime: 'node v24.11.1',
      },
    ],
  },
);

export const versionRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/version',
    {
      schema: {
        operationId: 'getVersion',
        summary: 'Build',
        description:
          'The version, commit and build time of the running service and the Node.js that runs it: the same facts as the `build_info` metric and `greeting-service --version`.',
        tags: ['operations'],
        response: { 200: Version },
      },
    },
    async () => BUILD_INFO,
  );
};
