/** `/api` under the context path: `/api`, or `/svc/api` with `CONTEXT_PATH=/svc`. */
export function apiBase(contextPath: string): string {
  return `${contextPath === '/' ? '' : contextPath}/api`;
}

/** Whether a URL (its query ignored) is `/api` under the context path, or below it. */
export type ApiPathTest = (url: string) => boolean;

/**
 * The test of where versioning and rate limiting apply, built once per app so that a request
 * costs only a comparison of strings.
 */
export function apiPathTest(contextPath: string): ApiPathTest {
  const base = apiBase(contextPath);
  const below = `${base}/`;
  return (url) => {
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    return path === base || path.startsWith(below);
  };
}
