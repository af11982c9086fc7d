import { expectEnvelope, expectEqual, expectObject, fail, header, show } from '../assert.js';
import type { Check } from '../context.js';
import type { Response } from '../http.js';

const HTTP2 = 'contract: Protocols, faults and the operator (HTTP2); RFC 9113';

/** Fields a message over HTTP/2 must not carry (RFC 9113, 8.2.2). */
const CONNECTION_SPECIFIC = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'];

function expectHttp2(res: Response): void {
  if (res.httpVersion !== '2.0')
    fail(`${res.request.method} ${res.request.path} over HTTP/2`, `HTTP/${res.httpVersion}`);
}

/** The checks that need --http2: what HTTP/2 adds to the contract, every other check running over it too. */
export const http2Checks: Check[] = [
  {
    id: 'http2.protocol',
    group: 'http2',
    clause: HTTP2,
    needs: 'http2',
    title: 'the service speaks HTTP/2: with prior knowledge (h2c) on http://, by ALPN (h2) on https://',
    async run(ctx) {
      const res = await ctx.get('/api/hello');
      expectHttp2(res);
      expectObject(res, 200);
    },
  },
  {
    id: 'http2.connection-specific-fields',
    group: 'http2',
    clause: `${HTTP2}, 8.2.2`,
    needs: 'http2',
    title: 'no answer carries a connection-specific field (Connection, Keep-Alive, Transfer-Encoding, Upgrade)',
    async run(ctx) {
      const answers = [
        await ctx.get('/api/hello'),
        await ctx.get('/api/no-such-route'),
        await ctx.send({ method: 'DELETE', path: '/api/hello' }),
        await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: { 'Content-Type': 'application/json' },
          body: '{',
        }),
        await ctx.get('/healthz'),
      ];
      for (const res of answers) {
        expectHttp2(res);
        const present = CONNECTION_SPECIFIC.filter((name) => header(res, name) !== undefined);
        if (present.length > 0) fail(`${res.request.method} ${res.request.path}: none of them`, show(present));
      }
    },
  },
  {
    id: 'http2.multiplexed',
    group: 'http2',
    clause: HTTP2,
    needs: 'http2',
    title: 'twenty requests at once on one connection are each answered with their own request id',
    async run(ctx) {
      const names = Array.from({ length: 20 }, (_, i) => `n${i}`);
      const answers = await Promise.all(
        names.map((name) =>
          ctx.send({ path: `/api/hello/${name}`, headers: { 'X-Request-Id': `conformance-multiplexed-${name}` } }),
        ),
      );
      answers.forEach((res, i) => {
        expectHttp2(res);
        expectEqual(expectObject(res, 200).greeting, `Hello, ${names[i]}!`, `the greeting of ${res.request.path}`);
        expectEqual(header(res, 'x-request-id'), `conformance-multiplexed-${names[i]}`, 'X-Request-Id');
      });
    },
  },
  {
    id: 'http2.body-without-length',
    group: 'http2',
    clause: `${HTTP2}, 8.1; contract: Errors (415)`,
    needs: 'http2',
    title: 'a body sent as DATA frames without Content-Length is read; without Content-Type either, it is a 415',
    async run(ctx) {
      // The kit sends no Content-Length unless a check writes one: over HTTP/2 the frames end the body.
      const echoed = await ctx.send({
        method: 'POST',
        path: '/api/echo',
        headers: { 'Content-Type': 'application/json' },
        body: '{"framed":true}',
      });
      expectHttp2(echoed);
      expectEqual(JSON.stringify(expectObject(echoed, 200).received), '{"framed":true}', 'the echo');
      expectEnvelope(await ctx.send({ method: 'POST', path: '/api/echo', body: '{}' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    },
  },
];
