/**
 * The benchmark's endpoints answered with the same bodies as the service and the least work that
 * yields them, for any node:http-like server: the path read without a URL object, a
 * Content-Length on every answer (none chunked).
 */
import { randomUUID } from 'node:crypto';
import * as answers from './answers.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/** The route of a request, as the service's router would find it: the key of SERVICE_HEADERS. */
export function routeOf(method, url) {
  const query = url.indexOf('?');
  const path = query < 0 ? url : url.slice(0, query);
  if (path === '/api/hello') return 'hello';
  if (path.startsWith('/api/hello/')) return 'greeting';
  if (path === '/api/search') return 'search';
  if (path === '/api/exchange') return 'exchange';
  if (path === '/api/currencies') return 'currencies';
  if (path === '/api/echo' && method === 'POST') return 'echo';
  return 'none';
}

/**
 * With SERVICE_HEADERS (JSON: per route, the service's header fields as one live answer of it
 * had them), each answer writes those same names and values, a fresh request id and a counted
 * RateLimit-Remaining: what the runtime alone charges for the headers the service sends.
 */
const SERVICE_HEADERS = process.env.SERVICE_HEADERS === undefined ? null : JSON.parse(process.env.SERVICE_HEADERS);
const LIMIT = 2_147_483_647;
let counted = 0;

function send(route, response, text, status = 200) {
  // Set one by one, as Fastify sets a reply's: an object spread and then extended
  // (`{ ...fixed, name: value }`) is one V8 handles slowly.
  const headers = {};
  if (SERVICE_HEADERS === null) headers['content-type'] = JSON_TYPE;
  else {
    for (const [name, value] of SERVICE_HEADERS[route] ?? []) headers[name] = value;
    counted = (counted % LIMIT) + 1;
    if ('x-request-id' in headers) headers['x-request-id'] = randomUUID();
    if ('ratelimit-remaining' in headers) headers['ratelimit-remaining'] = String(LIMIT - counted);
  }
  headers['content-length'] = String(Buffer.byteLength(text));
  response.writeHead(status, headers);
  response.end(text);
}

/** The query's parameters: the part after `?` alone, as the service's router reads it. */
const paramsOf = (url) => new URLSearchParams(url.slice(url.indexOf('?') + 1));

/** A request listener of node:http, node:https and node:http2 (its compatibility API) alike. */
export function answerRequest(request, response) {
  const { url } = request;
  const route = routeOf(request.method, url);
  if (route === 'hello') return send(route, response, JSON.stringify(answers.hello()));
  if (route === 'greeting') {
    const end = url.indexOf('?');
    const name = decodeURIComponent(url.slice(11, end < 0 ? undefined : end));
    return send(route, response, JSON.stringify(answers.greeting(name)));
  }
  if (route === 'search') {
    const params = paramsOf(url);
    return send(
      route,
      response,
      JSON.stringify(answers.search(params.get('keyword'), Number(params.get('page') ?? 1))),
    );
  }
  if (route === 'exchange') {
    const params = paramsOf(url);
    return send(route, response, answers.exchange(params.get('from'), params.get('to'), params.get('amount')));
  }
  if (route === 'currencies') return send(route, response, JSON.stringify(answers.currencyPage()));
  if (route === 'echo') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () =>
      send(route, response, JSON.stringify(answers.echo(JSON.parse(Buffer.concat(chunks).toString())))),
    );
    return;
  }
  send(route, response, '{}', 404);
}
