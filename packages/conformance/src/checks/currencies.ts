import {
  expectEnvelope,
  expectEqual,
  expectKeys,
  expectObject,
  expectValidation,
  fail,
  isObject,
  type JsonObject,
  show,
} from '../assert.js';
import type { Check, Context, Currency } from '../context.js';
import { isExactObject, parseExact } from '../json.js';

const CLAUSE = 'spec 4.7; contract: Collections';

type Field = 'code' | 'name' | 'minor_units' | 'rate';

function compareField(a: Currency, b: Currency, field: Field): number {
  if (field === 'rate') return a.rate.cmp(b.rate);
  if (field === 'minor_units') return a.minor_units - b.minor_units;
  return a[field] < b[field] ? -1 : a[field] > b[field] ? 1 : 0;
}

/** The table in the order of a `sort` parameter, ties broken by code. */
function sorted(table: readonly Currency[], sort: string): Currency[] {
  const keys = sort
    .split(',')
    .map((key) => ({ field: key.replace(/^-/, '') as Field, sign: key.startsWith('-') ? -1 : 1 }));
  return [...table].sort((a, b) => {
    for (const { field, sign } of keys) {
      const order = compareField(a, b, field) * sign;
      if (order !== 0) return order;
    }
    return compareField(a, b, 'code');
  });
}

const matches = (text: string) => (c: Currency) =>
  c.code.toLowerCase().includes(text.toLowerCase()) || c.name.toLowerCase().includes(text.toLowerCase());

const codes = (items: readonly Currency[]) => items.map((item) => item.code);

async function page(ctx: Context, query: string): Promise<{ data: JsonObject[]; pagination: JsonObject }> {
  const body = expectKeys(expectObject(await ctx.get(`/api/currencies?${query}`), 200), ['data', 'pagination'], query);
  if (!Array.isArray(body.data) || !body.data.every(isObject))
    fail(`${query}: data, an array of objects`, show(body.data));
  if (!isObject(body.pagination)) fail(`${query}: a pagination object`, show(body.pagination));
  return { data: body.data, pagination: body.pagination };
}

const codesOf = (data: readonly JsonObject[]) => data.map((item) => item.code);

/** Every item of a cursor walk with `query`, checking each page's pagination. */
async function walk(ctx: Context, query: string, limit: number): Promise<unknown[]> {
  const seen: unknown[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 200; pages += 1) {
    const q = `${query}&limit=${limit}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const { data, pagination } = await page(ctx, q);
    expectKeys(pagination, ['next_cursor', 'has_more', 'limit'], `${q}: pagination`);
    expectEqual(pagination.limit, limit, `${q}: pagination.limit`);
    seen.push(...codesOf(data));
    if (pagination.has_more === false) {
      expectEqual(pagination.next_cursor, '', `${q}: next_cursor on the last page`);
      return seen;
    }
    if (pagination.has_more !== true || typeof pagination.next_cursor !== 'string' || pagination.next_cursor === '') {
      fail(`${q}: has_more true with a next_cursor`, show(pagination));
    }
    expectEqual(data.length, limit, `${q}: items on a page that has more`);
    cursor = pagination.next_cursor;
  }
  return fail('a cursor walk that ends', 'more than 200 pages');
}

/** The first page's cursor of a cursor walk with `query`. */
async function firstCursor(ctx: Context, query: string): Promise<string> {
  const { pagination } = await page(ctx, `${query}&limit=2`);
  if (typeof pagination.next_cursor !== 'string' || pagination.next_cursor === '')
    fail('a next_cursor', show(pagination));
  return pagination.next_cursor;
}

/** The cursor with one character changed, in its middle. */
function tampered(cursor: string): string {
  const i = Math.floor(cursor.length / 2);
  return cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1);
}

export const currencyChecks: Check[] = [
  {
    id: 'currencies.table',
    group: 'currencies',
    clause: 'contract: Exchange (the table); contract: Collections',
    title: 'at least 20 ISO 4217 currencies with names, minor units and rates per USD, by code',
    async run(ctx) {
      const table = await ctx.table();
      if (table.length < 20) fail('at least 20 currencies', `${table.length}`);
      for (const c of table) {
        if (!/^[A-Z]{3}$/.test(c.code) || c.name.trim() === '' || !Number.isInteger(c.minor_units) || c.rate.lte(0)) {
          fail(
            'each item a code, a name, integer minor units and a positive rate',
            show({ ...c, rate: c.rate.toString() }),
          );
        }
      }
      expectEqual(codes(table), [...new Set(codes(table))].sort(), 'codes, unique and in code order');
      const get = (code: string) => table.find((c) => c.code === code);
      expectEqual(get('USD')?.rate.toString(), '1', 'the rate of USD');
      for (const [code, units] of [
        ['JPY', 0],
        ['KRW', 0],
        ['KWD', 3],
        ['BHD', 3],
      ] as const) {
        expectEqual(get(code)?.minor_units, units, `minor units of ${code}`);
      }
    },
  },
  {
    id: 'currencies.offset-default',
    group: 'currencies',
    clause: CLAUSE,
    title: 'offset pagination by default: page 1, 20 per page, total and total_pages',
    async run(ctx) {
      const table = await ctx.table();
      const { data, pagination } = await page(ctx, '');
      const total = table.length;
      expectEqual(pagination, { page: 1, per_page: 20, total, total_pages: Math.ceil(total / 20) }, 'pagination');
      expectEqual(codesOf(data), codes(table).slice(0, 20), 'codes of page 1');
    },
  },
  {
    id: 'currencies.offset-walk',
    group: 'currencies',
    clause: CLAUSE,
    title: 'the pages of 7 hold every item once, in order; a page past the end is empty',
    async run(ctx) {
      const table = await ctx.table();
      const pages = Math.ceil(table.length / 7);
      const seen: unknown[] = [];
      for (let n = 1; n <= pages; n += 1) {
        const { data, pagination } = await page(ctx, `page=${n}&per_page=7`);
        expectEqual(pagination, { page: n, per_page: 7, total: table.length, total_pages: pages }, `page ${n}`);
        seen.push(...codesOf(data));
      }
      expectEqual(seen, codes(table), 'codes over every page');
      const past = await page(ctx, `page=${pages + 3}&per_page=7`);
      expectEqual(past.data, [], `data of page ${pages + 3}`);
    },
  },
  {
    id: 'currencies.offset-invalid',
    group: 'currencies',
    clause: CLAUSE,
    title: 'page below 1 and per_page outside 1-100 are a 400 naming them',
    async run(ctx) {
      for (const [field, value] of [
        ['page', '0'],
        ['page', 'abc'],
        ['per_page', '0'],
        ['per_page', '101'],
        ['per_page', '2.5'],
      ]) {
        expectValidation(await ctx.get(`/api/currencies?${field}=${value}`), field as string, value);
      }
    },
  },
  {
    id: 'currencies.cursor-walk',
    group: 'currencies',
    clause: CLAUSE,
    title: 'walking the cursors returns every item exactly once, in order',
    async run(ctx) {
      expectEqual(await walk(ctx, 'sort=code', 6), codes(await ctx.table()), 'codes over the cursor walk');
    },
  },
  {
    id: 'currencies.cursor-default-limit',
    group: 'currencies',
    clause: CLAUSE,
    title: 'a cursor page asked without limit has the default limit, 20',
    async run(ctx) {
      const all = codes(await ctx.table());
      const first = await page(ctx, 'sort=code&limit=5');
      const cursor = first.pagination.next_cursor;
      if (typeof cursor !== 'string' || cursor === '')
        return fail('sort=code&limit=5: a next_cursor', show(first.pagination));
      const q = `sort=code&cursor=${encodeURIComponent(cursor)}`;
      const next = await page(ctx, q);
      expectEqual(next.pagination.limit, 20, `${q}: pagination.limit`);
      expectEqual(codesOf(next.data), all.slice(5, 25), `${q}: the codes of the page`);
    },
  },
  {
    id: 'currencies.cursor-query',
    group: 'currencies',
    clause: CLAUSE,
    title: 'a cursor walk with a sort and a search keeps them on every page',
    async run(ctx) {
      const table = await ctx.table();
      const expected = codes(sorted(table.filter(matches('a')), '-rate'));
      expectEqual(await walk(ctx, 'sort=-rate&q=a', 4), expected, 'codes over the walk of sort=-rate&q=a');
    },
  },
  {
    id: 'currencies.cursor-tampered',
    group: 'currencies',
    clause: CLAUSE,
    title: 'a tampered cursor, or one used with another sort or filter, is a 400 VALIDATION_ERROR',
    async run(ctx) {
      const cursor = await firstCursor(ctx, 'sort=code');
      const bad = encodeURIComponent(tampered(cursor));
      expectValidation(await ctx.get(`/api/currencies?sort=code&limit=2&cursor=${bad}`), 'cursor');
      expectValidation(await ctx.get('/api/currencies?limit=2&cursor=not-a-cursor'), 'cursor');
      const good = encodeURIComponent(cursor);
      expectValidation(await ctx.get(`/api/currencies?sort=-rate&limit=2&cursor=${good}`), 'cursor');
      expectValidation(await ctx.get(`/api/currencies?sort=code&q=dollar&limit=2&cursor=${good}`), 'cursor');
      expectValidation(await ctx.get(`/api/currencies?sort=code&minor_units=2&limit=2&cursor=${good}`), 'cursor');
    },
  },
  {
    id: 'currencies.mixed-pagination',
    group: 'currencies',
    clause: CLAUSE,
    title: 'cursor or limit with page or per_page is a 400; limit outside 1-100 is a 400',
    async run(ctx) {
      expectEnvelope(await ctx.get('/api/currencies?limit=5&page=2'), 400, 'VALIDATION_ERROR');
      expectEnvelope(await ctx.get('/api/currencies?limit=5&per_page=5'), 400, 'VALIDATION_ERROR');
      expectValidation(await ctx.get('/api/currencies?limit=0'), 'limit', '0');
      expectValidation(await ctx.get('/api/currencies?limit=101'), 'limit', '101');
    },
  },
  {
    id: 'currencies.filter',
    group: 'currencies',
    clause: CLAUSE,
    title: 'code=usd,EUR and minor_units=0 filter the table',
    async run(ctx) {
      const table = await ctx.table();
      expectEqual(codesOf((await page(ctx, 'code=usd,EUR')).data), ['EUR', 'USD'], 'code=usd,EUR');
      const zero = codes(table.filter((c) => c.minor_units === 0));
      expectEqual(codesOf((await page(ctx, 'minor_units=0&per_page=100')).data), zero, 'minor_units=0');
      const cursor = await walk(ctx, 'minor_units=0', 2);
      expectEqual(cursor, zero, 'minor_units=0 with cursors');
    },
  },
  {
    id: 'currencies.search',
    group: 'currencies',
    clause: CLAUSE,
    title: 'q and search match the code or the name, in any case',
    async run(ctx) {
      const table = await ctx.table();
      for (const [param, text] of [
        ['q', 'dollar'],
        ['search', 'DOLLAR'],
        ['q', 'eu'],
        ['q', 'zzzz'],
      ] as const) {
        const expected = codes(table.filter(matches(text)));
        expectEqual(codesOf((await page(ctx, `${param}=${text}&per_page=100`)).data), expected, `${param}=${text}`);
      }
    },
  },
  {
    id: 'currencies.sort',
    group: 'currencies',
    clause: CLAUSE,
    title: 'sort by any field, - for descending, ties broken by code',
    async run(ctx) {
      const table = await ctx.table();
      for (const sort of ['-rate,name', 'name', 'minor_units', '-minor_units,-code', '-code', 'rate']) {
        const expected = codes(sorted(table, sort));
        expectEqual(codesOf((await page(ctx, `sort=${sort}&per_page=100`)).data), expected, `sort=${sort}`);
      }
    },
  },
  {
    id: 'currencies.fields',
    group: 'currencies',
    clause: CLAUSE,
    title: 'fields limits the items, on the list and on the single item',
    async run(ctx) {
      for (const item of (await page(ctx, 'fields=code,name&per_page=5')).data)
        expectKeys(item, ['code', 'name'], 'item');
      const res = await ctx.get('/api/currencies/JPY?fields=code,minor_units');
      expectEqual(expectObject(res, 200), { code: 'JPY', minor_units: 0 }, `GET ${res.request.path}`);
    },
  },
  {
    id: 'currencies.unknown-names',
    group: 'currencies',
    clause: CLAUSE,
    title: 'an unknown sort or field name is a 400 naming it',
    async run(ctx) {
      expectValidation(await ctx.get('/api/currencies?sort=price'), 'sort', 'price');
      expectValidation(await ctx.get('/api/currencies?fields=code,price'), 'fields', 'code,price');
    },
  },
  {
    id: 'currencies.item',
    group: 'currencies',
    clause: CLAUSE,
    title: '/api/currencies/{code} is the item of the table, in any case; another code is a 404',
    async run(ctx) {
      const table = await ctx.table();
      for (const code of ['EUR', 'jpy', 'Kwd']) {
        const res = await ctx.get(`/api/currencies/${code}`);
        expectKeys(expectObject(res, 200), ['code', 'name', 'minor_units', 'rate'], `GET ${res.request.path}`);
        const item = parseExact(res.text);
        const entry = table.find((c) => c.code === code.toUpperCase());
        const rate = isExactObject(item) ? item.values.get('rate') : undefined;
        const same =
          entry !== undefined &&
          isExactObject(item) &&
          item.values.get('code') === entry.code &&
          item.values.get('name') === entry.name &&
          typeof rate === 'object' &&
          rate !== null &&
          !Array.isArray(rate) &&
          !isExactObject(rate) &&
          rate.eq(entry.rate);
        if (!same) fail(`the table's ${code.toUpperCase()}`, show(res.text));
      }
      const missing = ['XYZ', 'QQQ', 'ZZZ'].find((code) => !table.some((c) => c.code === code)) ?? 'XYZ';
      expectEnvelope(await ctx.get(`/api/currencies/${missing}`), 404, 'NOT_FOUND');
    },
  },
];
