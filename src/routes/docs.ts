import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * `GET /docs`: Swagger UI on the OpenAPI document, served from the installed package, so it works
 * with no internet access. Its headers, a page's, are set with every other response's
 * (`response-headers.ts`).
 */
export async function docsRoutes(app: FastifyInstance, { contextPath }: { contextPath: string }): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The page links its assets by absolute path when asked for without a trailing slash.
    ...(contextPath !== '/' && { indexPrefix: contextPath }),
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
