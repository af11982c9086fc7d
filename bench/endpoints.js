/**
 * The endpoints the benchmark drives, each server answering them with the same bodies, and the
 * 1 KiB object that POST /api/echo sends.
 */

/** A JSON object of exactly `size` bytes: numbered string members, then one padding member. */
function objectOfSize(size) {
  const members = {};
  for (let i = 0; JSON.stringify(members).length < size - 40; i++) members[`key${i}`] = `value number ${i}`;
  const text = JSON.stringify({ ...members, pad: '' });
  return JSON.stringify({ ...members, pad: 'x'.repeat(size - text.length) });
}

export const ECHO_BODY = objectOfSize(1024);

export const ENDPOINTS = [
  { name: 'GET /api/hello', method: 'GET', path: '/api/hello' },
  { name: 'GET /api/hello/{name}', method: 'GET', path: '/api/hello/Ada' },
  { name: 'GET /api/search', method: 'GET', path: '/api/search?keyword=books&page=2' },
  {
    name: 'POST /api/echo (1 KiB)',
    method: 'POST',
    path: '/api/echo',
    headers: { 'content-type': 'application/json' },
    body: ECHO_BODY,
  },
  { name: 'GET /api/exchange', method: 'GET', path: '/api/exchange?from=USD&to=EUR&amount=100' },
  { name: 'GET /api/currencies', method: 'GET', path: '/api/currencies' },
];

/** The echo body of `--encodings`: 64 KiB, an answer worth compressing. */
export const LARGE_ECHO_BODY = objectOfSize(64 * 1024);

/** With `--encodings`: the OpenAPI document and a 64 KiB echo, plain and in each of `codings`. */
export function codedEndpoints(codings) {
  return ['identity', ...codings].flatMap((coding) => [
    {
      name: `GET /openapi.json, ${coding}`,
      method: 'GET',
      path: '/openapi.json',
      headers: { 'accept-encoding': coding },
      coding,
    },
    {
      name: `POST /api/echo (64 KiB), ${coding}`,
      method: 'POST',
      path: '/api/echo',
      headers: { 'content-type': 'application/json', 'accept-encoding': coding },
      body: LARGE_ECHO_BODY,
      coding,
    },
  ]);
}
