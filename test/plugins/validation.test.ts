import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { assertEnvelope, type Client, transports } from '../helpers.js';

const GIVEN_ONCE = 'must be given once';

/**
 * Every documented query parameter of every route, in sets that make a valid request together
 * (the cursor is filled in once the service has issued one).
 */
const ROUTES: { path: string; query: Record<string, string> }[] = [
  { path: '/api/hello', query: { version: '1' } },
  { path: '/api/search', query: { keyword: 'books', page: '2', version: 'v1' } },
  { path: '/api/exchange', query: { from: 'USD', to: 'EUR', amount: '100', version: '1' } },
  {
    path: '/api/currencies',
    query: {
      page: '1',
      per_page: '10',
      sort: '-rate,name',
      fields: 'code,rate',
      q: 'dollar',
      code: 'USD,CAD',
      minor_units: '2',
      version: '1',
    },
  },
  { path: '/api/currencies', query: { search: 'dollar' } },
  { path: '/api/currencies', query: { limit: '5', cursor: '' } },
  { path: '/api/currencies/EUR', query: { fields: 'code,name', version: '1' } },
];

/** The query string of `query` with `name` sent once per value instead. */
function queryWith(query: Record<string, string>, name: string, values: string[]): string {
  const pairs = Object.entries(query).filter(([key]) => key !== name);
  for (const value of values) pairs.push([name, value]);
  return pairs.map(([key, value]) => `${key}=${encodeURIComponent(value)}`).join('&');
}

for (const [transport, connect] of transports) {
  describe(`a query parameter sent more than once (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ rateLimitMax: 0 });
      const first = await client.send({ path: '/api/currencies?limit=5' });
      const cursorRoute = ROUTES.find((route) => 'cursor' in route.query);
      if (cursorRoute !== undefined) cursorRoute.query.cursor = first.json().pagination.next_cursor;
    });
    after(() => client.close());

    it('answers each query of the table with a 2xx as it is', async () => {
      for (const { path, query } of ROUTES) {
        const res = await client.send({ path: `${path}?${queryWith(query, '', [])}` });
        assert.equal(res.status, 200, `${path} ${res.text}`);
      }
    });

    for (const { path, query } of ROUTES) {
      for (const name of Object.keys(query)) {
        it(`says ${path} takes ${name} once, even when each value is valid`, async () => {
          const value = query[name] as string;
          const res = await client.send({ path: `${path}?${queryWith(query, name, [value, value])}` });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: name, message: GIVEN_ONCE, value: [value, value] }]);
        });
      }
    }

    it('says so for any values, reporting them as sent', async () => {
      const routes = ROUTES.flatMap(({ path, query }) => Object.keys(query).map((name) => ({ path, query, name })));
      const values = fc.array(fc.string({ unit: 'grapheme', maxLength: 8 }), { minLength: 2, maxLength: 4 });
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...routes), values, async ({ path, query, name }, sent) => {
          const res = await client.send({ path: `${path}?${queryWith(query, name, sent)}` });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: name, message: GIVEN_ONCE, value: sent }]);
        }),
        { numRuns: transport === 'inject' ? 300 : 50 },
      );
    });
  });
}

const BAD_ENCODING = 'must be valid percent-encoded UTF-8';

for (const [transport, connect] of transports) {
  describe(`a query string that is not valid percent-encoded UTF-8 (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ rateLimitMax: 0 });
    });
    after(() => client.close());

    const cases: [query: string, details: { field: string; message: string; value: string }[]][] = [
      ['keyword=%ED%A0%80', [{ field: 'keyword', message: BAD_ENCODING, value: '%ED%A0%80' }]], // a lone surrogate
      ['keyword=%ZZ', [{ field: 'keyword', message: BAD_ENCODING, value: '%ZZ' }]],
      ['keyword=50%', [{ field: 'keyword', message: BAD_ENCODING, value: '50%' }]],
      ['keyword=%C3', [{ field: 'keyword', message: BAD_ENCODING, value: '%C3' }]], // a truncated sequence
      ['keyword=%C0%AF', [{ field: 'keyword', message: BAD_ENCODING, value: '%C0%AF' }]], // an overlong '/'
      ['keyword=ok&page=%FF', [{ field: 'page', message: BAD_ENCODING, value: '%FF' }]],
      [
        'keyword=%ZZ&k%E9y=x',
        [
          { field: 'keyword', message: BAD_ENCODING, value: '%ZZ' },
          { field: 'k%E9y', message: BAD_ENCODING, value: 'x' },
        ],
      ],
      ['keyword=a&keyword=%ZZ', [{ field: 'keyword', message: BAD_ENCODING, value: '%ZZ' }]],
    ];
    for (const [query, details] of cases) {
      it(`GET /api/search?${query}: 400 naming each such parameter, its value as sent`, async () => {
        assertEnvelope(await client.send({ path: `/api/search?${query}` }), 400, 'VALIDATION_ERROR', details);
      });
    }

    it('refuses it on every route, the version parameter and routes without a query schema included', async () => {
      for (const path of [
        '/api/hello?version=%ZZ',
        '/api/hello/Ada?x=%ZZ',
        '/healthz?x=%ZZ',
        '/api/currencies?q=%ZZ',
      ]) {
        const [, query = ''] = path.split('?');
        const [field = '', value = ''] = query.split('=');
        assertEnvelope(await client.send({ path }), 400, 'VALIDATION_ERROR', [{ field, message: BAD_ENCODING, value }]);
      }
    });

    it('refuses it on a POST before reading the body', async () => {
      const res = await client.send({
        method: 'POST',
        path: '/api/echo?x=%ZZ',
        headers: { 'content-type': 'text/plain' },
        body: 'not JSON, and of a media type that is refused',
      });
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'x', message: BAD_ENCODING, value: '%ZZ' }]);
    });

    it('leaves a path no route takes to its 404', async () => {
      assertEnvelope(await client.send({ path: '/nowhere?x=%ZZ' }), 404, 'NOT_FOUND');
    });

    it('decodes every well-formed query string as before: %-escapes of any Unicode text, + as a space', async () => {
      await fc.assert(
        fc.asyncProperty(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }), async (text) => {
          fc.pre(text.trim() !== '');
          const res = await client.send({
            path: `/api/search?keyword=${encodeURIComponent(text).replaceAll('%20', '+')}`,
          });
          if (res.status === 200) assert.equal(res.json().keyword, text);
          else assert.notEqual(res.json().error.details[0]?.message, BAD_ENCODING, text);
        }),
        { numRuns: 100 },
      );
    });
  });
}
