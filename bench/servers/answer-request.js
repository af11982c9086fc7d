/** The benchmark's endpoints answered with the same bodies as the service and nothing else, for any node:http-like server. */
import * as answers from './answers.js';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };

function send(response, text) {
  response.writeHead(200, JSON_TYPE);
  response.end(text);
}

/** A request listener of node:http, node:https and node:http2 (its compatibility API) alike. */
export function answerRequest(request, response) {
  const url = new URL(request.url, 'http://localhost');
  const { pathname, searchParams } = url;
  if (pathname === '/api/hello') return send(response, JSON.stringify(answers.hello()));
  if (pathname.startsWith('/api/hello/')) {
    return send(response, JSON.stringify(answers.greeting(decodeURIComponent(pathname.slice(11)))));
  }
  if (pathname === '/api/search') {
    const page = Number(searchParams.get('page') ?? 1);
    return send(response, JSON.stringify(answers.search(searchParams.get('keyword'), page)));
  }
  if (pathname === '/api/exchange') {
    const [from, to, amount] = ['from', 'to', 'amount'].map((name) => searchParams.get(name));
    return send(response, answers.exchange(from, to, amount));
  }
  if (pathname === '/api/currencies') return send(response, JSON.stringify(answers.currencyPage()));
  if (pathname === '/api/echo' && request.method === 'POST') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => send(response, JSON.stringify(answers.echo(JSON.parse(Buffer.concat(chunks).toString())))));
    return;
  }
  response.writeHead(404, JSON_TYPE);
  response.end('{}');
}
