import { expectEqual, expectKeys, expectObject, fail } from '../assert.js';
import type { Check } from '../context.js';

const CLAUSE = 'W3C Trace Context Level 1 (a service continues or ignores a trace, never fails for it)';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** Trace headers a service must take, and forms it must ignore: a later version, an unusable one. */
const SENT: Record<string, Record<string, string>> = {
  'a sampled traceparent with tracestate': { traceparent: TRACEPARENT, tracestate: 'rojo=00f067aa0ba902b7' },
  'an unsampled traceparent': { traceparent: TRACEPARENT.replace(/-01$/, '-00') },
  'a traceparent of a later version': { traceparent: `cc-${TRACEPARENT.slice(3)}-future` },
  'an invalid traceparent (version ff)': { traceparent: `ff-${TRACEPARENT.slice(3)}` },
};

export const traceContextChecks: Check[] = [
  {
    id: 'trace-context.never-breaks',
    group: 'trace-context',
    clause: CLAUSE,
    title: 'a request with traceparent, valid or not, is answered as without it',
    async run(ctx) {
      for (const [what, headers] of Object.entries(SENT)) {
        const hello = await ctx.get('/api/hello/Ada', headers);
        expectEqual(expectObject(hello, 200), { greeting: 'Hello, Ada!' }, `GET ${hello.request.path} with ${what}`);
        const echo = await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: { ...headers, 'Content-Type': 'application/json' },
          body: '{"a":1}',
        });
        const body = expectKeys(
          expectObject(echo, 200),
          ['received', 'echo', 'timestamp'],
          `POST ${echo.request.path} with ${what}`,
        );
        if (JSON.stringify(body.received) !== '{"a":1}')
          fail(`POST ${echo.request.path} with ${what}: received {"a":1}`, echo.text);
      }
    },
  },
];
