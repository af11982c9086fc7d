import assert from 'node:assert/strict';
import { assertEnvelope, parseRawResponse, rawExchange } from '../helpers.js';

/**
 * What nginx answers by itself, before any instance sees the request: each of these is the
 * service's error envelope, with the status, code and details the service gives the same request.
 */

const line = (method: string, target: string, headers: string) =>
  `${method} ${target} HTTP/1.1\r\n${headers}Connection: close\r\n\r\n`;

/** Requests nginx refuses itself, as raw bytes for a server at `host`. */
const REFUSED_BY_NGINX: { what: string; api?: false; bytes: (host: string) => string }[] = [
  {
    what: 'Content-Length with Transfer-Encoding',
    bytes: (host) =>
      `${line('GET', '/api/hello', `Host: ${host}\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n`)}0\r\n\r\n`,
  },
  { what: 'no Host', bytes: () => line('GET', '/api/hello', '') },
  {
    what: 'a path that is not percent-encoded',
    bytes: (host) => line('GET', '/api/hello/%ZZ?x=1', `Host: ${host}\r\n`),
  },
  { what: 'a path ending in %', bytes: (host) => line('GET', '/api/hello/%', `Host: ${host}\r\n`) },
  // A request id the service would not reuse: a fresh one, and nothing of it in nginx's JSON.
  {
    what: 'a path that is not percent-encoded, with a request id the service would not reuse',
    bytes: (host) => line('GET', '/api/hello/%ZZ', `Host: ${host}\r\nX-Request-Id: a"b\\c\r\n`),
  },
  { what: 'TRACE', bytes: (host) => line('TRACE', '/api/hello', `Host: ${host}\r\n`) },
  {
    what: 'a request line over 16 KiB',
    bytes: (host) => line('GET', `/api/hello/${'a'.repeat(17_000)}`, `Host: ${host}\r\n`),
  },
  {
    what: "nginx's error page asked for",
    api: false,
    bytes: (host) => line('GET', '/.nginx-error', `Host: ${host}\r\n`),
  },
];

/** The headers of the service's answers that nginx's own repeat (RateLimit's it cannot know). */
const SAME_HEADERS = [
  'content-type',
  'x-content-type-options',
  'x-frame-options',
  'content-security-policy',
  'cache-control',
];

async function exchange(port: number, bytes: string) {
  return parseRawResponse(await rawExchange(port, bytes));
}

/**
 * Sends each request nginx refuses to the balancer and to an instance of the service, and holds
 * the balancer's answer to the service's: status, code and details, in the whole envelope.
 * Returns how many were compared.
 */
export async function assertOwnAnswers(balancer: { port: number }, service: { port: number }): Promise<number> {
  for (const { what, api = true, bytes } of REFUSED_BY_NGINX) {
    const expected = await exchange(service.port, bytes(`127.0.0.1:${service.port}`));
    const actual = await exchange(balancer.port, bytes(`127.0.0.1:${balancer.port}`));
    const error = expected.json().error;
    try {
      assertEnvelope(actual, expected.status, error.code, error.details);
      for (const name of SAME_HEADERS) assert.equal(actual.headers[name], expected.headers[name], name);
      // Under /api, API-Version as on every answer of the service there, even where Node's parser left it no path.
      assert.equal(actual.headers['api-version'], api ? '1' : undefined, 'api-version');
    } catch (cause) {
      assert.fail(
        `${what}: the service answers ${expected.status} ${expected.text}\nnginx ${actual.status} ${actual.text}\n${cause}`,
      );
    }
  }
  // Over nginx's own limit (2 MiB): refused before a byte of the body is read.
  const tooLarge = await exchange(
    balancer.port,
    line(
      'POST',
      '/api/echo',
      `Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${3 * 2 ** 20}\r\n`,
    ),
  );
  assertEnvelope(tooLarge, 413, 'PAYLOAD_TOO_LARGE');
  assert.equal(tooLarge.headers['api-version'], '1');
  assert.equal(tooLarge.headers['x-frame-options'], 'DENY');
  return REFUSED_BY_NGINX.length + 1;
}

/** With no instance to answer: a 502 envelope, for a GET as for a POST. */
export async function assertBadGateway(balancer: { port: number }): Promise<void> {
  for (const method of ['GET', 'POST']) {
    const body = method === 'POST' ? '{}' : '';
    const headers = `Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n`;
    const res = await exchange(balancer.port, `${line(method, '/api/echo', headers)}${body}`);
    assertEnvelope(res, 502, 'BAD_GATEWAY');
  }
}
