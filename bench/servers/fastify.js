/**
 * Bare Fastify 5 answering the benchmark's endpoints through response schemas, with its defaults
 * and none of the service's features: what the framework itself costs.
 */
import Fastify from 'fastify';
import * as answers from './answers.js';

const string = { type: 'string' };
const object = (properties) => ({ type: 'object', properties, required: Object.keys(properties) });
const ok = (properties) => ({ response: { 200: object(properties) } });

const app = Fastify();
app.get('/api/hello', { schema: ok({ message: string, timestamp: string }) }, async () => answers.hello());
app.get('/api/hello/:name', { schema: ok({ greeting: string }) }, async (request) =>
  answers.greeting(request.params.name),
);
app.get(
  '/api/search',
  { schema: ok({ keyword: string, page: { type: 'integer' }, results: string }) },
  async (request) => answers.search(request.query.keyword, Number(request.query.page ?? 1)),
);
app.post('/api/echo', async (request) => answers.echo(request.body));
app.get('/api/exchange', async (request, reply) => {
  const { from, to, amount } = request.query;
  return reply.type('application/json; charset=utf-8').send(answers.exchange(from, to, amount));
});
app.get('/api/currencies', async () => answers.currencyPage());

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
