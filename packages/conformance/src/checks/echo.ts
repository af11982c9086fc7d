import {
  expectEnvelope,
  expectEqual,
  expectKeys,
  expectLocalNow,
  expectObject,
  expectValidation,
  fail,
  sentCode,
  show,
} from '../assert.js';
import type { Check, Context } from '../context.js';
import { canonical, memberTokens, tokenize } from '../json.js';

const CLAUSE = 'spec 4.4, 2.4; contract: The four specified endpoints';
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** Posts `text` and checks that `received` holds the same JSON, read from the answer's text. */
async function expectEchoed(ctx: Context, text: string, what: string): Promise<void> {
  const res = await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body: text });
  expectObject(res, 200);
  const received = memberTokens(tokenize(res.text), 'received');
  if (received === undefined) fail('a received member', show(res.text));
  if (canonical(received) !== canonical(tokenize(text))) {
    const answered = res.text.length > 400 ? `${res.text.slice(0, 400)}...` : res.text;
    fail(`${what} echoed unchanged: ${show(text)}`, show(answered));
  }
}

export const echoChecks: Check[] = [
  {
    id: 'echo.shape',
    group: 'echo',
    clause: CLAUSE,
    title: 'POST /api/echo answers {"received":<body>,"echo":true,"timestamp":<local>}',
    async run(ctx) {
      const res = await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body: '{"a":1}' });
      const body = expectKeys(expectObject(res, 200), ['received', 'echo', 'timestamp'], 'echo');
      expectEqual(body.received, { a: 1 }, 'received');
      expectEqual(body.echo, true, 'echo');
      expectLocalNow(body.timestamp, res, 'timestamp');
    },
  },
  {
    id: 'echo.big-integer',
    group: 'echo',
    clause: CLAUSE,
    title: 'integers beyond 2^53 keep their exact value',
    run: (ctx) => expectEchoed(ctx, '{"n":12345678901234567890,"m":-9007199254740993}', 'big integers'),
  },
  {
    id: 'echo.long-decimal',
    group: 'echo',
    clause: CLAUSE,
    title: 'decimals and exponents keep their exact value',
    run: (ctx) =>
      expectEchoed(ctx, '{"d":0.1000000000000000000001,"e":1e400,"f":-1.5E-400,"g":[0.1,100.0,1e2]}', 'decimals'),
  },
  {
    id: 'echo.proto-keys',
    group: 'echo',
    clause: CLAUSE,
    title: '__proto__ and constructor are echoed as plain data',
    run: (ctx) =>
      expectEchoed(ctx, '{"__proto__":{"x":1},"constructor":{"prototype":{"y":2}},"toString":"z"}', '__proto__'),
  },
  {
    id: 'echo.key-order',
    group: 'echo',
    clause: CLAUSE,
    title: 'key order is kept, integer-like keys included',
    run: (ctx) => expectEchoed(ctx, '{"b":1,"a":2,"10":3,"2":4,"":5,"nested":{"z":1,"1":2}}', 'key order'),
  },
  {
    id: 'echo.unicode',
    group: 'echo',
    clause: CLAUSE,
    title: 'strings keep every character: escapes, controls, astral planes, decomposed forms',
    run: (ctx) =>
      expectEchoed(ctx, '{"s":"W\\u00f6rld 🌍 \\u0000\\t\\n e\\u0301 \\u2028 \\"q\\" \\\\","k\\u00e9y":[]}', 'strings'),
  },
  {
    id: 'echo.deep-nesting',
    group: 'echo',
    clause: CLAUSE,
    title: 'a deeply nested object (1,000 levels) comes back unchanged',
    run: (ctx) => expectEchoed(ctx, `${'{"a":'.repeat(1000)}1${'}'.repeat(1000)}`, 'deep nesting'),
  },
  {
    id: 'echo.deepest-nesting',
    group: 'echo',
    clause: CLAUSE,
    title:
      'no object within the body limit gets a 500, however deeply nested: it is echoed or refused with an envelope',
    async run(ctx) {
      const depth = Math.floor((ctx.options.bodyLimit - 1) / 6);
      const body = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      const res = await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body });
      if (res.status >= 500) fail(`an answer other than 5xx to ${depth} levels of nesting`, `${res.status}`);
      if (res.status !== 200) expectEnvelope(res, res.status, sentCode(res) ?? 'an error code');
    },
  },
  {
    id: 'echo.not-an-object',
    group: 'echo',
    clause: CLAUSE,
    title: 'an array, a scalar or null is a 400 VALIDATION_ERROR naming body',
    async run(ctx) {
      for (const body of ['[1,2]', '"text"', '42', 'null', 'true']) {
        expectValidation(await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body }), 'body');
      }
    },
  },
  {
    id: 'echo.empty-body',
    group: 'echo',
    clause: CLAUSE,
    title: 'an empty body is a 400 VALIDATION_ERROR',
    async run(ctx) {
      const res = await ctx.send({ method: 'POST', path: '/api/echo', headers: JSON_HEADERS, body: '' });
      expectEnvelope(res, 400, 'VALIDATION_ERROR');
    },
  },
];
