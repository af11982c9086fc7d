import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { onFirstUse } from '../lib/compile-on-first-use.js';
import { type ContentCodingsOptions, contentCodingsPlugin } from '../plugins/content-codings.js';

/** The OpenAPI document as `app.openapi()` makes it. */
type OpenapiDocument = Awaited<ReturnType<FastifyInstance['openapi']>>;

export interface DocsOptions {
  contextPath: string;
  /** The service's error handling (`plugins/errors.ts`), for what the page's own app answers. */
  errors: FastifyPluginAsync;
  /** The service's content codings (`plugins/content-codings.ts`), in which the page's own app answers too. */
  codings: ContentCodingsOptions;
}

/**
 * The paths of the page under `/docs`, as @fastify/swagger-ui adds them (a test holds the two
 * lists alike): the page, its document as JSON and YAML, and its files.
 */
export const PAGE_PATHS = ['', '/static/index.html', '/static/swagger-initializer.js', '/json', '/yaml', '/static/*'];

/** The page's old address, which redirects to the page (`/docs/`), its query string kept. */
const INDEX_HTML = '/static/index.html';

/**
 * The page as @fastify/swagger-ui serves it, in the app of its own that it is served by. Swagger UI
 * reads the document through `swagger()`, the decorator of @fastify/swagger, which it names as its
 * dependency; the document is made on first use (`plugins/openapi.ts`), so each of the page's
 * requests waits for it first, and `swagger()` is given here in that plugin's place.
 */
async function swaggerUiPage(
  page: FastifyInstance,
  { base, openapi }: { base: string; openapi: () => Promise<OpenapiDocument> },
): Promise<void> {
  const { default: swaggerUi } = await import('@fastify/swagger-ui');
  let document: OpenapiDocument | undefined;
  const swagger = ((options?: { yaml?: boolean }) => {
    if (document === undefined) throw new Error('The OpenAPI document is asked for before it is made');
    return options?.yaml === true ? document.yaml() : document.object;
  }) as FastifyInstance['swagger'];
  await page.register(
    fp(
      async (app) => {
        app.decorate('swagger', swagger);
      },
      { name: '@fastify/swagger' },
    ),
  );
  await page.register(swaggerUi, {
    // The whole path, context path included: the page links its assets by it when asked for
    // without a trailing slash.
    routePrefix: `${base}/docs`,
    theme: { title: 'Greeting and Echo Service: API documentation' },
    uiConfig: {
      // Without the top bar, whose field loads other documents and whose logo needs an inline style.
      layout: 'BaseLayout',
      // A test target: every operation can be sent at once, and the page says how long it took.
      tryItOutEnabled: true,
      displayRequestDuration: true,
    },
    uiHooks: {
      onRequest: async () => {
        document ??= await openapi();
      },
    },
  });
}

/**
 * `GET /docs`: Swagger UI on the OpenAPI document, served from the installed package, so it works
 * with no internet access.
 *
 * Swagger UI and the file server under it cost some 12 MB of memory and a fifth of the start-up's
 * work, which a service nobody asks for its page need not pay: they are loaded, in an app of their
 * own, when the page is first asked for. The service routes the page's paths itself, so that they
 * get what every request gets (the id, a page's headers, set with every other response's in
 * `response-headers.ts`, the log line, the metrics), then hands each request to that app, which
 * answers it with the same id, the service's own error handling and content codings, and reports
 * a failure back to the request's log line. The redirect of `INDEX_HTML` is the service's own.
 */
export async function docsRoutes(app: FastifyInstance, { contextPath, errors, codings }: DocsOptions): Promise<void> {
  const prefix = contextPath === '/' ? '' : contextPath;
  const forwarded = new WeakMap<IncomingMessage, FastifyRequest>();
  const page = onFirstUse(async () => {
    const served = Fastify({
      routerOptions: app.initialConfig.routerOptions,
      genReqId: (raw) => forwarded.get(raw)?.id ?? randomUUID(),
    });
    await served.register(errors);
    await served.register(contentCodingsPlugin, codings);
    served.addHook('onSend', async (request) => {
      const outer = forwarded.get(request.raw);
      if (outer !== undefined && request.failure != null) outer.failure = request.failure;
    });
    // Not `prefix`, which Fastify would take as the routes' prefix: the context path is given whole.
    await served.register(swaggerUiPage, { base: prefix, openapi: () => app.openapi() });
    await served.ready();
    return served;
  });
  for (const path of PAGE_PATHS) {
    if (path === INDEX_HTML) {
      // Swagger UI sends the page's old address to the page by rewriting the request's target: a
      // query string made it redirect to itself, and an absolute-form target put its host in Location.
      app.get(`/docs${path}`, { schema: { hide: true } }, (request, reply) => {
        const query = request.url.indexOf('?');
        return reply.redirect(`${prefix}/docs/${query === -1 ? '' : request.url.slice(query)}`);
      });
      continue;
    }
    app.get(`/docs${path}`, { schema: { hide: true } }, async (request, reply) => {
      const served = await page();
      for (const [name, value] of Object.entries(reply.getHeaders())) {
        if (value !== undefined) reply.raw.setHeader(name, value);
      }
      forwarded.set(request.raw, request);
      reply.hijack();
      served.routing(request.raw, reply.raw);
    });
  }
}
