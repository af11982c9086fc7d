import {
  expectEnvelope,
  expectEqual,
  expectObject,
  expectStatus,
  expectValidation,
  fail,
  header,
  isObject,
  type JsonObject,
  show,
  skip,
} from '../assert.js';
import type { Check } from '../context.js';
import type { Response } from '../http.js';

const OPERATIONS = 'contract: Operations';

/** Every route of the contract, with its methods. */
const ROUTES: Record<string, string[]> = {
  '/api/hello': ['get'],
  '/api/hello/{name}': ['get'],
  '/api/search': ['get'],
  '/api/echo': ['post'],
  '/api/profile': ['get', 'post', 'patch', 'put'],
  '/api/exchange': ['get'],
  '/api/currencies': ['get'],
  '/api/currencies/{code}': ['get'],
  '/healthz': ['get'],
  '/readyz': ['get'],
};

const READINESS_CHECKS = ['shutdown', 'operator', 'store'];

/** Each check's state in a verbose `/readyz`: its `checks` when ready, its 503's details when not. */
function checkStates(res: Response): JsonObject {
  if (res.status === 503) {
    const { details } = expectEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
    return Object.fromEntries(details.map((detail) => [detail.field, detail.value]));
  }
  const { checks } = expectObject(res, 200);
  if (!isObject(checks)) fail(`GET ${res.request.path}: "checks", an object`, show(checks));
  return checks;
}

export const healthChecks: Check[] = [
  {
    id: 'health.healthz',
    group: 'health',
    clause: OPERATIONS,
    title: 'GET /healthz answers 200 {"status":"ok"}, neither rate-limited nor versioned',
    async run(ctx) {
      const res = await ctx.get('/healthz');
      expectEqual(expectObject(res, 200), { status: 'ok' }, 'GET /healthz');
      const extra = ['ratelimit-limit', 'ratelimit-remaining', 'api-version'].filter(
        (n) => res.headers[n] !== undefined,
      );
      expectEqual(extra, [], 'GET /healthz: rate-limit or version headers');
    },
  },
  {
    id: 'health.readyz',
    group: 'health',
    clause: OPERATIONS,
    title: 'GET /readyz answers 200 {"status":"ready"}, or a 503 SERVICE_UNAVAILABLE envelope',
    async run(ctx) {
      const res = await ctx.get('/readyz');
      if (res.status === 503) expectEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
      else expectEqual(expectObject(res, 200), { status: 'ready' }, 'GET /readyz');
      expectEqual(res.headers['ratelimit-limit'], undefined, 'GET /readyz: RateLimit-Limit');
    },
  },
  {
    id: 'health.readyz-parameters',
    group: 'health',
    clause: OPERATIONS,
    title:
      'GET /readyz?exclude=store leaves the store out and ?verbose lists the checks shutdown, operator and store; any other exclude is a 400 VALIDATION_ERROR naming it',
    async run(ctx) {
      expectValidation(await ctx.get('/readyz?exclude=no-such-check'), 'exclude', 'no-such-check');
      const excluded = await ctx.get('/readyz?exclude=store&verbose');
      expectEqual(checkStates(excluded).store, 'excluded', 'GET /readyz?exclude=store&verbose: the store');
      expectEqual(
        Object.keys(checkStates(await ctx.get('/readyz?verbose'))),
        READINESS_CHECKS,
        'GET /readyz?verbose: the checks',
      );
    },
  },
  {
    id: 'health.operator-switch',
    group: 'health',
    clause: 'contract: Protocols, faults and the operator; Errors',
    title:
      'POST /readyz/disable without a token is a 401 UNAUTHORIZED envelope with WWW-Authenticate: Bearer (404 where the switch is not served)',
    async run(ctx) {
      // A gateway's token may be the operator's too: sent, it would take the deployment out of service.
      if (ctx.http.sendsHeader('authorization'))
        skip('--header sends Authorization, which the switch may take for a token');
      const res = await ctx.send({ method: 'POST', path: '/readyz/disable' });
      if (res.status === 404) {
        expectEnvelope(res, 404, 'NOT_FOUND');
        return;
      }
      expectEnvelope(res, 401, 'UNAUTHORIZED');
      const challenge = header(res, 'www-authenticate');
      if (!/^Bearer(?:\s|$)/i.test(challenge ?? '')) fail('WWW-Authenticate: Bearer', show(challenge));
      // Refused, it changed nothing.
      const ready = await ctx.get('/readyz');
      if (ready.status === 503 && /operator/i.test(ready.text))
        fail('/readyz unchanged by a refused switch', ready.text);
    },
  },
];

/**
 * The document's path items by the path a client sends, under the base URL: each path key joined to
 * the path of every server that serves it (the path item's own servers, else the document's; `/` when
 * there are none), as OpenAPI resolves them, variables at their defaults, relative URLs against the
 * document's own; a path under `/api/v1` documents the same path under `/api` too.
 */
function documentedPaths(doc: JsonObject, documentUrl: URL, prefix: string): Map<string, JsonObject> {
  const servers = (value: unknown): string[] => {
    const list = Array.isArray(value) ? value.filter(isObject) : [];
    return list.map((server) => {
      let url = typeof server.url === 'string' ? server.url : '/';
      const variables = isObject(server.variables) ? server.variables : {};
      for (const [name, variable] of Object.entries(variables)) {
        const value = isObject(variable) && typeof variable.default === 'string' ? variable.default : '';
        url = url.replaceAll(`{${name}}`, value);
      }
      return new URL(url, documentUrl).pathname.replace(/\/$/, '');
    });
  };
  const rootServers = servers(doc.servers);
  const items = new Map<string, JsonObject>();
  for (const [key, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    if (!isObject(item)) continue;
    const own = servers(item.servers);
    const bases = own.length > 0 ? own : rootServers.length > 0 ? rootServers : [''];
    for (const base of bases) {
      const full = base + key;
      const path = full.startsWith(`${prefix}/`) ? full.slice(prefix.length) : full;
      items.set(path, item);
      // The contract's `/api/v1/...` serves exactly what `/api/...` does: either documents the route.
      const unversioned = path.replace(/^\/api\/v1\//, '/api/');
      if (!items.has(unversioned)) items.set(unversioned, item);
    }
  }
  return items;
}

/** The document the service serves, and its path items by the path a client sends. */
async function documentOf(
  ctx: Parameters<Check['run']>[0],
): Promise<{ doc: JsonObject; paths: Map<string, JsonObject> }> {
  const doc = expectObject(await ctx.get('/openapi.json'), 200);
  const documentUrl = new URL(`${ctx.http.prefix}/openapi.json`, ctx.http.origin);
  return { doc, paths: documentedPaths(doc, documentUrl, ctx.http.prefix) };
}

export const openapiChecks: Check[] = [
  {
    id: 'openapi.document',
    group: 'openapi',
    clause: OPERATIONS,
    title: 'GET /openapi.json is an OpenAPI 3.1 document of every route and method',
    async run(ctx) {
      const { doc, paths } = await documentOf(ctx);
      if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1.')) fail('openapi: 3.1.x', show(doc.openapi));
      const missing: string[] = [];
      for (const [path, methods] of Object.entries(ROUTES)) {
        const item = paths.get(path);
        for (const method of methods)
          if (!isObject(item) || !isObject(item[method])) missing.push(`${method.toUpperCase()} ${path}`);
      }
      expectEqual(missing, [], 'operations missing from the document');
    },
  },
  {
    id: 'openapi.error-responses',
    group: 'openapi',
    clause: OPERATIONS,
    title: 'each /api operation documents its success (a 2xx, or a WebSocket’s 101) and its error answers',
    async run(ctx) {
      const { paths } = await documentOf(ctx);
      const bare: string[] = [];
      for (const [path, item] of paths) {
        if (!path.startsWith('/api/')) continue;
        for (const [method, operation] of Object.entries(item)) {
          if (!isObject(operation) || !isObject(operation.responses)) continue;
          const codes = Object.keys(operation.responses);
          // A WebSocket's handshake succeeds with 101 Switching Protocols, never a 2xx.
          if (!codes.some((code) => /^(2|101$)/.test(code)) || !codes.some((code) => /^[45]/.test(code))) {
            bare.push(`${method.toUpperCase()} ${path}`);
          }
        }
      }
      expectEqual(bare, [], 'operations without a 2xx and an error response');
    },
  },
  {
    id: 'openapi.answers-match',
    group: 'openapi',
    clause: OPERATIONS,
    title: 'the documented success bodies have the fields the service answers with',
    async run(ctx) {
      const { doc, paths } = await documentOf(ctx);
      const resolve = (schema: unknown): JsonObject => {
        let node = schema;
        for (let hops = 0; isObject(node) && typeof node.$ref === 'string' && hops < 10; hops += 1) {
          const pointer = node.$ref.replace(/^#\//, '').split('/');
          node = pointer.reduce<unknown>((at, key) => (isObject(at) ? at[key] : undefined), doc);
        }
        return isObject(node) ? node : {};
      };
      for (const [route, path] of [
        ['/api/hello', '/api/hello'],
        ['/api/hello/{name}', '/api/hello/Ada'],
        ['/api/search', '/api/search?keyword=x'],
        ['/api/exchange', '/api/exchange?from=USD&to=EUR&amount=1'],
        ['/api/currencies/{code}', '/api/currencies/EUR'],
        ['/api/profile', '/api/profile'],
        ['/healthz', '/healthz'],
      ] as const) {
        const item = paths.get(route);
        const get = isObject(item) ? item.get : undefined;
        const ok = isObject(get) && isObject(get.responses) ? resolve(get.responses['200']) : {};
        const media = isObject(ok.content) ? ok.content['application/json'] : undefined;
        const schema = resolve(isObject(media) ? media.schema : undefined);
        const documented = Object.keys(isObject(schema.properties) ? schema.properties : {}).sort();
        const answered = Object.keys(expectObject(await ctx.get(path), 200)).sort();
        expectEqual(documented, answered, `the documented fields of GET ${route}, against its answer`);
      }
    },
  },
  {
    id: 'openapi.docs-page',
    group: 'openapi',
    clause: OPERATIONS,
    title: 'GET /docs serves the documentation page (HTML)',
    async run(ctx) {
      let res = await ctx.get('/docs');
      const location = header(res, 'location');
      if (res.status >= 300 && res.status < 400 && location !== undefined) {
        const target = new URL(location, `${ctx.http.origin.origin}${ctx.http.prefix}/docs`);
        if (target.origin !== ctx.http.origin.origin) fail('a redirect within the service', show(location));
        res = await ctx.get(target.pathname.slice(ctx.http.prefix.length) + target.search);
      }
      expectStatus(res, 200);
      if (!/^text\/html\b/.test(header(res, 'content-type') ?? ''))
        fail(`GET ${res.request.path}: text/html`, show(header(res, 'content-type')));
    },
  },
  {
    id: 'openapi.metrics',
    group: 'openapi',
    clause: OPERATIONS,
    title: 'GET /metrics is Prometheus text with request counts and latencies by route and status',
    async run(ctx) {
      const res = await ctx.get('/metrics');
      if (res.status === 404) {
        expectEnvelope(res, 404, 'NOT_FOUND');
        skip('/metrics is turned off on this deployment');
      }
      expectStatus(res, 200);
      if (!/^text\/plain\b/.test(header(res, 'content-type') ?? ''))
        fail(`GET ${res.request.path}: text/plain`, show(header(res, 'content-type')));
      const samples = res.text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
      const byRoute = samples.filter((line) => /route="[^"]*"/.test(line) && /status="\d{3}"/.test(line));
      if (!byRoute.some((line) => /_bucket\{/.test(line))) fail('a latency histogram by route and status', 'none');
      if (!byRoute.some((line) => !/_(bucket|sum|count)\{/.test(line) && /_total\{/.test(line))) {
        fail('a request counter by route and status', 'none');
      }
      if (!samples.some((line) => line.startsWith('process_'))) fail('process metrics', 'none');
    },
  },
];
