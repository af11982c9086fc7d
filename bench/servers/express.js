/** The benchmark's endpoints in Express 5 with its defaults and no extra features. */
import express from 'express';
import * as answers from './answers.js';

const app = express();
app.get('/api/hello', (_request, response) => response.json(answers.hello()));
app.get('/api/hello/:name', (request, response) => response.json(answers.greeting(request.params.name)));
app.get('/api/search', (request, response) => {
  response.json(answers.search(request.query.keyword, Number(request.query.page ?? 1)));
});
app.post('/api/echo', express.json(), (request, response) => response.json(answers.echo(request.body)));
app.get('/api/exchange', (request, response) => {
  const { from, to, amount } = request.query;
  response.type('json').send(answers.exchange(from, to, amount));
});
app.get('/api/currencies', (_request, response) => response.json(answers.currencyPage()));

app.listen(Number(process.env.PORT), '127.0.0.1');
