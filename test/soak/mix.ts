/**
 * The traffic of the load runs: every endpoint, reads and writes, the versioned paths, and a
 * share of requests that must be refused, each with the status it must get.
 */

export interface MixRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** The one status this request may get. */
  status: number;
}

const JSON_TYPE = { 'content-type': 'application/json' };

/** A JSON object of about 1 KiB, as the benchmark's echo sends. */
const ECHO_BODY = JSON.stringify(
  Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`key${i}`, `value number ${i}`])),
);

export const MIX: readonly MixRequest[] = [
  { method: 'GET', path: '/api/hello', status: 200 },
  { method: 'GET', path: '/api/hello/J%C3%BCrgen%20%F0%9F%91%8B', status: 200 },
  { method: 'GET', path: '/api/v1/hello/ada?version=1', status: 200 },
  { method: 'GET', path: '/api/search?keyword=soak&page=3', status: 200 },
  { method: 'POST', path: '/api/echo', headers: JSON_TYPE, body: ECHO_BODY, status: 200 },
  { method: 'GET', path: '/api/exchange?from=usd&to=JPY&amount=1234.5', status: 200 },
  { method: 'GET', path: '/api/currencies?sort=-rate,name&per_page=10&page=2', status: 200 },
  { method: 'GET', path: '/api/currencies?limit=5&q=dollar&fields=code,rate', status: 200 },
  { method: 'GET', path: '/api/currencies/EUR', status: 200 },
  { method: 'GET', path: '/api/profile', status: 200 },
  {
    method: 'PUT',
    path: '/api/profile',
    headers: JSON_TYPE,
    body: '{"name":"Ada Lovelace","email":"ada@example.org","bio":"Analyst"}',
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/api/profile',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: '{"bio":"Wrote the first program"}',
    status: 200,
  },
  { method: 'POST', path: '/api/profile', headers: JSON_TYPE, body: '{"name":"Ada"}', status: 200 },
  { method: 'GET', path: '/healthz', status: 200 },
  { method: 'GET', path: '/readyz', status: 200 },
  { method: 'GET', path: '/openapi.json', status: 200 },
  { method: 'GET', path: '/docs', status: 200 },
  { method: 'GET', path: '/metrics', status: 200 },
  // Refused ones: their envelopes and log lines are part of the load too.
  { method: 'GET', path: '/api/search?keyword=&page=0', status: 400 },
  { method: 'POST', path: '/api/echo', headers: JSON_TYPE, body: '{"truncated":', status: 400 },
  { method: 'PUT', path: '/api/profile', headers: JSON_TYPE, body: '{"email":"not an address"}', status: 400 },
  { method: 'GET', path: '/api/exchange?from=USD&to=XXX&amount=1', status: 422 },
  { method: 'GET', path: '/api/nothing-here', status: 404 },
];
