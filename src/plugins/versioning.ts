import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, apiError, GIVEN_ONCE, validationError } from '../errors.js';
import { acceptedRanges } from '../lib/accept.js';
import { type ApiPathTest, apiBase } from '../lib/api-path.js';
import { API_VERSION } from '../version.js';

/** Values of the `version` query parameter that name the current version. */
const VERSION_VALUES = new Set([API_VERSION, `v${API_VERSION}`]);

/** A media range that asks for a version of this API: `application/vnd.greeting.v1+json`. */
const VERSIONED_MEDIA_TYPE = /^application\/vnd\.greeting\.v([^+]*)\+json$/;

/**
 * Given to Fastify as `rewriteUrl`: `/api/v1/...` is served by the route of `/api/...`, so every
 * route, present and future, has its versioned path without being registered twice. Only the
 * current version is stripped: `/api/v2/hello` stays as it is, and no route matches it (404).
 * Fastify keeps the URL as sent in `request.originalUrl`, for messages and logs.
 */
export function versionedUrlRewriter(contextPath: string): (request: IncomingMessage) => string {
  const base = apiBase(contextPath);
  const versioned = `${base}/v${API_VERSION}`;
  return (request) => {
    const url = request.url ?? '/';
    if (!url.startsWith(versioned)) return url;
    const rest = url.slice(versioned.length);
    return rest === '' || rest.startsWith('/') || rest.startsWith('?') ? base + rest : url;
  };
}

/**
 * The versioning rules of every request under `/api`: a `version` parameter must name the
 * current version (400 otherwise), and an Accept header that asks only for other versions of
 * this API cannot be satisfied (406). Any other Accept is left alone: every body is JSON.
 */
function versionError(request: FastifyRequest): ApiError | null {
  const { version } = request.query as Record<string, unknown>;
  if (version !== undefined && !(typeof version === 'string' && VERSION_VALUES.has(version))) {
    return validationError([
      {
        field: 'version',
        message: Array.isArray(version) ? GIVEN_ONCE : `must be ${API_VERSION} or v${API_VERSION}`,
        value: version,
      },
    ]);
  }
  const accept = request.headers.accept;
  if (accept === undefined) return null;
  const ranges = acceptedRanges(accept);
  const versions = ranges.map((range) => VERSIONED_MEDIA_TYPE.exec(range)?.[1]);
  if (versions.length > 0 && versions.every((v) => v !== undefined && v !== API_VERSION)) {
    return apiError(
      406,
      `Only API version ${API_VERSION} exists (application/vnd.greeting.v${API_VERSION}+json); Accept asks for ${ranges.join(', ')}.`,
    );
  }
  return null;
}

/**
 * Versioning of every request under `/api`; the versioned paths are `versionedUrlRewriter`'s, and
 * the `API-Version` and `Vary: Accept` headers are the security plugin's, set with the others.
 * The version is checked once the request hooks are done, so that its 400 or 406 carries the CORS
 * headers a browser needs to read it, and so that a CORS preflight, answered in those hooks, is
 * not judged by the query of the request it asks about. It is still checked before the body is read.
 */
export const versioningPlugin = fp(
  async (app: FastifyInstance, { isApiPath }: { isApiPath: ApiPathTest }) => {
    app.addHook('preParsing', (request, _reply, payload, done) => {
      done(isApiPath(request.url) ? versionError(request) : null, payload);
    });
  },
  { name: 'versioning', dependencies: ['errors'] },
);
