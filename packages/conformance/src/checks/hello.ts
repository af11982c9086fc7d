import { expectEqual, expectKeys, expectLocalNow, expectObject, expectStatus, header } from '../assert.js';
import type { Check } from '../context.js';

/** Names sent as percent-encoded UTF-8, each to come back exactly (no normalisation, no escaping). */
const NAMES = [
  'Ada',
  'Wörld 🌍',
  '東京',
  'שלום',
  'e\u0301', // decomposed é: must not be normalised to U+00E9
  "O'Brien & <Co>",
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '100%',
];

export const helloChecks: Check[] = [
  {
    id: 'hello.message',
    group: 'hello',
    clause: 'spec 4.1, 2.1',
    title: 'GET /api/hello answers 200 {"message":"Hello, World!","timestamp"}',
    async run(ctx) {
      const res = await ctx.get('/api/hello');
      const body = expectKeys(expectObject(res, 200), ['message', 'timestamp'], `GET ${res.request.path}`);
      expectEqual(body.message, 'Hello, World!', 'message');
    },
  },
  {
    id: 'hello.timestamp',
    group: 'hello',
    clause: 'spec 2.1; contract: Everywhere',
    title: 'the hello timestamp is the local date-time now, with milliseconds and no offset',
    async run(ctx) {
      const res = await ctx.get('/api/hello');
      expectLocalNow(expectObject(res, 200).timestamp, res, 'timestamp');
    },
  },
  {
    id: 'hello.greeting',
    group: 'hello',
    clause: 'spec 4.2, 2.2',
    title: 'GET /api/hello/{name} answers {"greeting":"Hello, <name>!"}',
    async run(ctx) {
      const res = await ctx.get('/api/hello/Ada');
      expectEqual(expectKeys(expectObject(res, 200), ['greeting'], 'greeting'), { greeting: 'Hello, Ada!' }, 'body');
    },
  },
  {
    id: 'hello.greeting-unicode',
    group: 'hello',
    clause: 'contract: The four specified endpoints',
    title: 'any Unicode name is percent-decoded and returned exactly',
    async run(ctx) {
      for (const name of NAMES) {
        const res = await ctx.get(`/api/hello/${encodeURIComponent(name)}`);
        expectEqual(expectObject(res, 200).greeting, `Hello, ${name}!`, `greeting for ${JSON.stringify(name)}`);
      }
    },
  },
  {
    id: 'hello.head',
    group: 'hello',
    clause: 'contract: Everywhere',
    title: 'HEAD /api/hello answers like GET, without a body',
    async run(ctx) {
      const res = await ctx.send({ method: 'HEAD', path: '/api/hello' });
      expectStatus(res, 200);
      expectEqual(res.body.length, 0, 'HEAD body length');
      expectEqual(header(res, 'content-type'), 'application/json; charset=utf-8', 'HEAD Content-Type');
    },
  },
  {
    id: 'hello.trailing-slash',
    group: 'hello',
    clause: 'contract: Everywhere',
    title: '/api/hello/ is /api/hello',
    async run(ctx) {
      const res = await ctx.get('/api/hello/');
      expectEqual(expectObject(res, 200).message, 'Hello, World!', `GET ${res.request.path} message`);
    },
  },
];
