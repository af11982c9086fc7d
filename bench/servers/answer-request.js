/** The benchmark's endpoints answered with the same bodies as the service and nothing else, for any node:http-like server. */
import { randomUUID } from 'node:crypto';
import { API_SECURITY_HEADERS } from '../../dist/plugins/response-headers.js';
import { API_VERSION } from '../../dist/version.js';
import * as answers from './answers.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * With CONTRACT_HEADERS=true, each answer carries the headers every answer of the service carries
 * (security headers, API version, Vary, request id, the rate limit's, Content-Length), written as
 * node:http writes them: what the runtime alone charges for the contract's headers.
 */
const CONTRACT_HEADERS = process.env.CONTRACT_HEADERS === 'true';
const FIXED = Object.entries({ ...API_SECURITY_HEADERS, 'api-version': API_VERSION, vary: 'Accept, Origin' });
const LIMIT = 2_147_483_647;
let counted = 0;

function send(response, text, status = 200) {
  // Set one by one, as Fastify sets a reply's: an object spread and then extended
  // (`{ ...fixed, name: value }`) is one V8 handles slowly: it doubles the CPU per request here.
  const headers = {};
  if (CONTRACT_HEADERS) {
    for (const [name, value] of FIXED) headers[name] = value;
    counted = (counted % LIMIT) + 1;
    headers['x-request-id'] = randomUUID();
    headers['ratelimit-limit'] = String(LIMIT);
    headers['ratelimit-remaining'] = String(LIMIT - counted);
    headers['ratelimit-reset'] = '60';
  }
  headers['content-type'] = JSON_TYPE;
  if (CONTRACT_HEADERS) headers['content-length'] = String(Buffer.byteLength(text));
  response.writeHead(status, headers);
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
  send(response, '{}', 404);
}
