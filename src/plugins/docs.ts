import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * What the documentation page needs and nothing more: its own scripts, style sheets and images
 * (Swagger UI's style sheet draws its icons as `data:` images), and requests to this service,
 * which is what "Try it out" sends. No inline script or style, no other host, no frames, no forms.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * `GET /docs`: Swagger UI on the OpenAPI document, served from the installed package, so it works
 * with no internet access. Every route under `/docs` (the page, its assets, and the document it
 * reads at `/docs/json`) carries `DOCS_CSP` in place of the API's `default-src 'none'`.
 */
export async function docsRoutes(app: FastifyInstance, { contextPath }: { contextPath: string }): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The page links its assets by absolute path when asked for without a trailing slash.
    ...(contextPath !== '/' && { indexPrefix: contextPath }),
    staticCSP: DOCS_CSP,
    theme: { title: 'Greeting and Echo Service: API documentation' },
    uiConfig: {
      // Without the top bar, whose field loads other documents and whose logo needs an inline style.
      layout: 'BaseLayout',
      // A test target: every operation can be sent at once, and the page says how long it took.
      tryItOutEnabled: true,
      displayRequestDuration: true,
    },
  });
}
