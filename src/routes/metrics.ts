import type { FastifyInstance } from 'fastify';

/** `GET /metrics`: Prometheus's text format. */
export async function metricsRoute(app: FastifyInstance): Promise<void> {
  const registry = app.metricsRegistry;
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description:
          'Requests by method, route template and status (`http_requests_total`), their durations ' +
          '(`http_request_duration_seconds`), readiness (`service_ready`) and the store (`store_up`), and the ' +
          'process metrics, in the Prometheus text format 0.0.4.',
        tags: ['operations'],
        response: {
          200: {
            description: 'Prometheus metrics.',
            content: {
              [registry.contentType]: {
                schema: {
                  type: 'string',
                  examples: [
                    '# HELP http_requests_total Requests answered, by method, route template and status.\n' +
                      '# TYPE http_requests_total counter\n' +
                      'http_requests_total{method="GET",route="/api/hello/:name",status="200"} 2\n',
                  ],
                },
              },
            },
          },
        },
      },
    },
    async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
  );
}
