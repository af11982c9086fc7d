import { expectEqual, expectStatus, fail, header, headerList, show, skip } from '../assert.js';
import type { Check, Context } from '../context.js';
import type { Response } from '../http.js';

const CORS = 'contract: Rate limiting, versioning, limits (CORS)';
const SECURITY = 'contract: Rate limiting, versioning, limits (security headers)';

/** The allowed origin for ours: `*` or our origin echoed; skips when this deployment does not allow it. */
function allowedOrigin(ctx: Context, res: Response): string {
  const allowed = header(res, 'access-control-allow-origin');
  if (allowed === undefined) skip(`the deployment does not allow the origin ${ctx.options.origin} (pass --origin)`);
  if (allowed !== '*' && allowed !== ctx.options.origin)
    fail(`Access-Control-Allow-Origin * or ${ctx.options.origin}`, show(allowed));
  if (allowed !== '*' && !headerList(res, 'vary').includes('origin'))
    fail('Vary: Origin with an echoed origin', show(header(res, 'vary')));
  if (header(res, 'access-control-allow-credentials') !== undefined) {
    fail('no Access-Control-Allow-Credentials', show(header(res, 'access-control-allow-credentials')));
  }
  return allowed;
}

const EXPOSED = [
  'x-request-id',
  'etag',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'retry-after',
  'api-version',
];

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
};

const PAGE_ONLY = [
  'x-xss-protection',
  'x-download-options',
  'x-dns-prefetch-control',
  'x-permitted-cross-domain-policies',
  'origin-agent-cluster',
  'cross-origin-opener-policy',
  'cross-origin-resource-policy',
  'referrer-policy',
  'x-powered-by',
];

export const corsChecks: Check[] = [
  {
    id: 'cors.no-origin',
    group: 'cors',
    clause: CORS,
    title: 'no CORS headers on a request without Origin',
    async run(ctx) {
      const res = await ctx.get('/api/hello');
      const cors = Object.keys(res.headers).filter((name) => name.startsWith('access-control-'));
      expectEqual(cors, [], 'CORS headers without Origin');
    },
  },
  {
    id: 'cors.simple',
    group: 'cors',
    clause: CORS,
    title: 'a request with Origin gets the allowed origin, no credentials, and the exposed headers',
    async run(ctx) {
      const res = await ctx.get('/api/hello', { Origin: ctx.options.origin });
      expectStatus(res, 200);
      allowedOrigin(ctx, res);
      const exposed = headerList(res, 'access-control-expose-headers');
      const missing = EXPOSED.filter((name) => !exposed.includes(name));
      if (missing.length > 0)
        fail(
          `Access-Control-Expose-Headers with ${missing.join(', ')}`,
          show(header(res, 'access-control-expose-headers')),
        );
    },
  },
  {
    id: 'cors.on-errors',
    group: 'cors',
    clause: CORS,
    title: 'error answers carry the CORS headers too',
    async run(ctx) {
      const res = await ctx.get('/api/no-such-route', { Origin: ctx.options.origin });
      expectStatus(res, 404);
      allowedOrigin(ctx, res);
    },
  },
  {
    id: 'cors.preflight',
    group: 'cors',
    clause: CORS,
    title: 'a preflight for a conditional PUT of the profile is answered',
    async run(ctx) {
      const res = await ctx.send({
        method: 'OPTIONS',
        path: '/api/profile',
        headers: {
          Origin: ctx.options.origin,
          'Access-Control-Request-Method': 'PUT',
          'Access-Control-Request-Headers': 'content-type,if-match,x-request-id',
        },
      });
      allowedOrigin(ctx, res);
      if (res.status !== 204 && res.status !== 200) fail('OPTIONS preflight: 204 or 200', `${res.status}`);
      const methods = headerList(res, 'access-control-allow-methods').map((m) => m.toUpperCase());
      if (!methods.includes('PUT') && !methods.includes('*'))
        fail('Access-Control-Allow-Methods with PUT', show(methods));
      const allowed = headerList(res, 'access-control-allow-headers');
      const missing = ['content-type', 'if-match', 'x-request-id'].filter((name) => !allowed.includes(name));
      if (missing.length > 0 && !allowed.includes('*'))
        fail(`Access-Control-Allow-Headers with ${missing.join(', ')}`, show(allowed));
    },
  },
];

export const securityChecks: Check[] = [
  {
    id: 'security.json-headers',
    group: 'security',
    clause: SECURITY,
    title: 'JSON answers carry nosniff, DENY, the API CSP and no-store, errors included',
    async run(ctx) {
      for (const path of ['/api/hello', '/api/currencies/EUR', '/api/no-such-route', '/healthz', '/nope']) {
        const res = await ctx.get(path);
        for (const [name, value] of Object.entries({ ...SECURITY_HEADERS, 'cache-control': 'no-store' })) {
          expectEqual(header(res, name), value, `GET ${res.request.path}: ${name}`);
        }
      }
    },
  },
  {
    id: 'security.profile-cache',
    group: 'security',
    clause: SECURITY,
    title: 'the profile, which offers revalidation, is Cache-Control: no-cache',
    async run(ctx) {
      const res = await ctx.get('/api/profile');
      expectEqual(header(res, 'cache-control'), 'no-cache', `GET ${res.request.path}: cache-control`);
    },
  },
  {
    id: 'security.no-page-headers',
    group: 'security',
    clause: SECURITY,
    title: 'no X-Powered-By, and none of the headers for HTML pages on JSON answers',
    async run(ctx) {
      for (const path of ['/api/hello', '/api/no-such-route', '/healthz']) {
        const res = await ctx.get(path);
        const extra = PAGE_ONLY.filter((name) => res.headers[name] !== undefined);
        expectEqual(extra, [], `GET ${res.request.path}: headers that belong on /docs only`);
      }
    },
  },
];
