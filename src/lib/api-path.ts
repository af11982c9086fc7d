import FindMyWay from 'find-my-way';

/** `/api` under the context path: `/api`, or `/svc/api` with `CONTEXT_PATH=/svc`. */
export function apiBase(contextPath: string): string {
  return `${contextPath === '/' ? '' : contextPath}/api`;
}

/**
 * Whether the router reads a URL as `/api` under the context path or below it, or as a method of
 * one of the RPC services given, however it is spelled: `/%61pi/x`, `http://host/api/x` and
 * `/api#x` are under `/api`; `/API/x`, `//api/x` and `/api%2Fx` are not, as no route under `/api`
 * could match them.
 */
export type ApiPathTest = (url: string) => boolean;

/** The scheme and authority of an absolute-form target (`http://host:8080`), which find-my-way takes off. */
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * The test of where versioning and rate limiting apply, built once per app. A URL that starts
 * with `/api/` as sent costs one comparison; any other is read by a router of the same library as
 * Fastify's that knows only `/api` and `/api/*`, so that percent-escapes and fragments are decoded
 * exactly as the router that serves the request decodes them. An absolute-form target is read as
 * its path would be: under `/api` even where the router refuses it (a fragment, a bad escape), so
 * that its 400 has the API's headers and counts against the rate limit, as the path's own would.
 */
export function apiPathTest(contextPath: string, rpcServices: readonly string[] = []): ApiPathTest {
  const base = apiBase(contextPath);
  const below = `${base}/`;
  const router = FindMyWay();
  const found = () => {};
  router.on('GET', base, found);
  router.on('GET', `${below}*`, found);
  for (const service of rpcServices) router.on('GET', `/${service}/*`, found);
  return (url) => {
    if (url.startsWith(below)) return true;
    const path = url.charCodeAt(0) === SLASH ? url : url.replace(ABSOLUTE_FORM, '');
    return path.startsWith(below) || router.find('GET', path) !== null;
  };
}

const SLASH = 0x2f;
