import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { assertEnvelope, type Client, injectClient, transports } from '../helpers.js';

/** The table as the tests expect it, written out independently of the service's copy. */
const TABLE = [
  ['AED', 'UAE Dirham', 2, '3.6725'],
  ['AUD', 'Australian Dollar', 2, '1.5325'],
  ['BHD', 'Bahraini Dinar', 3, '0.376'],
  ['BRL', 'Brazilian Real', 2, '5.0235'],
  ['CAD', 'Canadian Dollar', 2, '1.3555'],
  ['CHF', 'Swiss Franc', 2, '0.8865'],
  ['CLP', 'Chilean Peso', 0, '966.4'],
  ['CNY', 'Chinese Yuan', 2, '7.1995'],
  ['CZK', 'Czech Koruna', 2, '23.285'],
  ['DKK', 'Danish Krone', 2, '6.8635'],
  ['EUR', 'Euro', 2, '0.92'],
  ['GBP', 'Pound Sterling', 2, '0.786'],
  ['HKD', 'Hong Kong Dollar', 2, '7.8245'],
  ['HUF', 'Hungarian Forint', 2, '366.45'],
  ['IDR', 'Indonesian Rupiah', 2, '15705'],
  ['INR', 'Indian Rupee', 2, '83.04'],
  ['ISK', 'Icelandic Krona', 0, '137.65'],
  ['JOD', 'Jordanian Dinar', 3, '0.709'],
  ['JPY', 'Japanese Yen', 0, '150.85'],
  ['KRW', 'South Korean Won', 0, '1339.5'],
  ['KWD', 'Kuwaiti Dinar', 3, '0.3077'],
  ['MXN', 'Mexican Peso', 2, '16.745'],
  ['NOK', 'Norwegian Krone', 2, '10.653'],
  ['NZD', 'New Zealand Dollar', 2, '1.6505'],
  ['OMR', 'Omani Rial', 3, '0.3845'],
  ['PLN', 'Polish Zloty', 2, '3.9835'],
  ['SAR', 'Saudi Riyal', 2, '3.7502'],
  ['SEK', 'Swedish Krona', 2, '10.448'],
  ['SGD', 'Singapore Dollar', 2, '1.3425'],
  ['THB', 'Thai Baht', 2, '36.09'],
  ['TRY', 'Turkish Lira', 2, '32.205'],
  ['USD', 'US Dollar', 2, '1'],
  ['VND', 'Vietnamese Dong', 0, '24765'],
  ['ZAR', 'South African Rand', 2, '18.925'],
] as const;

type Row = (typeof TABLE)[number];
type FieldName = 'code' | 'name' | 'minor_units' | 'rate';
const FIELDS: readonly FieldName[] = ['code', 'name', 'minor_units', 'rate'];

function row(code: string): Row {
  const found = TABLE.find(([c]) => c === code);
  assert.ok(found, code);
  return found;
}

/**
 * An item's JSON text, its rate written as the table's decimal text: a body equal to this
 * proves the rate came out with exactly the table's digits.
 */
function itemText([code, name, minorUnits, rate]: Row, fields: readonly FieldName[] = FIELDS): string {
  const members = {
    code: `"code":"${code}"`,
    name: `"name":${JSON.stringify(name)}`,
    minor_units: `"minor_units":${minorUnits}`,
    rate: `"rate":${rate}`,
  };
  return `{${FIELDS.filter((f) => fields.includes(f))
    .map((f) => members[f])
    .join(',')}}`;
}

function offsetText(codes: readonly string[], pagination: string, fields?: readonly FieldName[]): string {
  return `{"data":[${codes.map((code) => itemText(row(code), fields)).join(',')}],"pagination":${pagination}}`;
}

const ALL_CODES = TABLE.map(([code]) => code);
const SORT_MESSAGE = 'must be a comma-separated list of code, name, minor_units, rate, each optionally preceded by -';
const FIELDS_MESSAGE = 'must be a comma-separated list of code, name, minor_units, rate';
const SIZE_MESSAGE = 'must be an integer from 1 to 100';
const ALTERED = 'is not a cursor of this service, or was altered';
const OTHER_QUERY = 'belongs to another sort, filter or search';
const MIXED = 'cannot be combined with page or per_page';

/** The model the property test checks against: filter, search, sort and project, computed here. */
interface Query {
  codes?: string[];
  minorUnits?: number[];
  search?: { name: 'q' | 'search'; text: string };
  sort?: { field: FieldName; descending: boolean }[];
  fields?: FieldName[];
}

/** A field's value for ordering: rates as numbers, which the table's rates are exactly. */
function sortValue([code, name, minorUnits, rate]: Row, field: FieldName): string | number {
  return { code, name, minor_units: minorUnits, rate: Number(rate) }[field];
}

function expected(query: Query): Row[] {
  const compare = (a: Row, b: Row, field: FieldName): number => {
    const [x, y] = [sortValue(a, field), sortValue(b, field)];
    return x < y ? -1 : x > y ? 1 : 0;
  };
  const text = query.search?.text.toLowerCase() ?? '';
  return TABLE.filter(
    ([code, name, minorUnits]) =>
      (query.codes === undefined || query.codes.some((c) => c.toUpperCase() === code)) &&
      (query.minorUnits === undefined || query.minorUnits.includes(minorUnits)) &&
      (code.toLowerCase().includes(text) || name.toLowerCase().includes(text)),
  ).sort((a, b) => {
    for (const { field, descending } of [...(query.sort ?? []), { field: 'code' as const, descending: false }]) {
      const order = compare(a, b, field);
      if (order !== 0) return descending ? -order : order;
    }
    return 0;
  });
}

function queryString(query: Query): string {
  const parts: string[] = [];
  if (query.codes) parts.push(`code=${query.codes.join(',')}`);
  if (query.minorUnits) parts.push(`minor_units=${query.minorUnits.join(',')}`);
  if (query.search) parts.push(`${query.search.name}=${encodeURIComponent(query.search.text)}`);
  if (query.sort)
    parts.push(`sort=${query.sort.map(({ field, descending }) => (descending ? '-' : '') + field).join(',')}`);
  if (query.fields) parts.push(`fields=${query.fields.join(',')}`);
  return parts.join('&');
}

const queries: fc.Arbitrary<Query> = fc.record(
  {
    codes: fc.array(
      fc.oneof(
        fc.constantFrom(...ALL_CODES),
        fc.constantFrom(...ALL_CODES).map((c) => c.toLowerCase()),
        fc.constant('ZZZ'),
      ),
      { minLength: 1, maxLength: 12 },
    ),
    minorUnits: fc.array(fc.constantFrom(0, 2, 3, 4), { minLength: 1, maxLength: 3 }),
    search: fc.record({
      name: fc.constantFrom('q' as const, 'search' as const),
      text: fc.oneof(fc.constantFrom('', 'a', 'DOL', 'an', 'eu', 'r', 'k', 'zz', 'n d'), fc.string({ maxLength: 2 })),
    }),
    sort: fc.array(fc.record({ field: fc.constantFrom(...FIELDS), descending: fc.boolean() }), {
      minLength: 1,
      maxLength: 4,
    }),
    fields: fc.subarray([...FIELDS], { minLength: 1 }).chain((f) => fc.shuffledSubarray(f, { minLength: f.length })),
  },
  { requiredKeys: [] },
);

for (const [transport, connect] of transports) {
  describe(`GET /api/currencies (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    function list(query: string) {
      return client.send({ path: `/api/currencies${query}` });
    }

    async function assertBody(query: string, body: string): Promise<void> {
      const res = await list(query);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(res.text, body);
    }

    /** The next_cursor of a cursor page, checking the page's items. */
    async function nextCursor(query: string, codes: readonly string[]): Promise<string> {
      const res = await list(query);
      assert.equal(res.status, 200, res.text);
      const body = res.json();
      assert.deepEqual(
        body.data.map((item: { code: string }) => item.code),
        codes,
      );
      assert.equal(body.pagination.has_more, true);
      return body.pagination.next_cursor;
    }

    it('answers the first 20 currencies by code, with offset pagination', async () => {
      await assertBody('', offsetText(ALL_CODES.slice(0, 20), '{"page":1,"per_page":20,"total":34,"total_pages":2}'));
    });

    it('answers further pages, and an empty page past the end', async () => {
      await assertBody(
        '?page=2',
        offsetText(ALL_CODES.slice(20), '{"page":2,"per_page":20,"total":34,"total_pages":2}'),
      );
      await assertBody('?page=3', offsetText([], '{"page":3,"per_page":20,"total":34,"total_pages":2}'));
      await assertBody(
        '?page=2147483647&per_page=100',
        offsetText([], '{"page":2147483647,"per_page":100,"total":34,"total_pages":1}'),
      );
      await assertBody(
        '?page=12&per_page=3',
        offsetText(['ZAR'], '{"page":12,"per_page":3,"total":34,"total_pages":12}'),
      );
    });

    it('writes every rate with exactly the table’s digits', async () => {
      await assertBody('?per_page=100', offsetText(ALL_CODES, '{"page":1,"per_page":100,"total":34,"total_pages":1}'));
      for (const [, , , rate] of TABLE) assert.equal(String(Number(rate)), rate);
    });

    it('filters by code, in any case', async () => {
      await assertBody(
        '?code=usd,EUR,Jpy',
        offsetText(['EUR', 'JPY', 'USD'], '{"page":1,"per_page":20,"total":3,"total_pages":1}'),
      );
      await assertBody('?code=ZZZ', offsetText([], '{"page":1,"per_page":20,"total":0,"total_pages":0}'));
    });

    it('filters by minor units', async () => {
      await assertBody(
        '?minor_units=0',
        offsetText(['CLP', 'ISK', 'JPY', 'KRW', 'VND'], '{"page":1,"per_page":20,"total":5,"total_pages":1}'),
      );
      await assertBody(
        '?minor_units=3,0&code=KWD,JPY,USD',
        offsetText(['JPY', 'KWD'], '{"page":1,"per_page":20,"total":2,"total_pages":1}'),
      );
    });

    it('searches codes and names in any case, by q or search', async () => {
      const dollars = ['AUD', 'CAD', 'HKD', 'NZD', 'SGD', 'USD'];
      const pagination = '{"page":1,"per_page":20,"total":6,"total_pages":1}';
      await assertBody('?q=DOLLAR', offsetText(dollars, pagination));
      await assertBody('?search=dollar', offsetText(dollars, pagination));
      await assertBody('?q=eu', offsetText(['EUR'], '{"page":1,"per_page":20,"total":1,"total_pages":1}'));
      await assertBody(
        '?q=',
        offsetText(ALL_CODES.slice(0, 20), '{"page":1,"per_page":20,"total":34,"total_pages":2}'),
      );
    });

    it('sorts by several fields, descending with -, ties broken by code', async () => {
      await assertBody(
        '?sort=-rate&per_page=3',
        offsetText(['VND', 'IDR', 'KRW'], '{"page":1,"per_page":3,"total":34,"total_pages":12}'),
      );
      await assertBody(
        '?sort=minor_units&per_page=6',
        offsetText(['CLP', 'ISK', 'JPY', 'KRW', 'VND', 'AED'], '{"page":1,"per_page":6,"total":34,"total_pages":6}'),
      );
      await assertBody(
        '?sort=-minor_units,-name&per_page=5',
        offsetText(['OMR', 'KWD', 'JOD', 'BHD', 'USD'], '{"page":1,"per_page":5,"total":34,"total_pages":7}'),
      );
      await assertBody(
        '?sort=name&minor_units=3',
        offsetText(['BHD', 'JOD', 'KWD', 'OMR'], '{"page":1,"per_page":20,"total":4,"total_pages":1}'),
      );
      // Rates compared as numbers: as text, 1339.5 would come first and 966.4 last.
      await assertBody(
        '?sort=rate&minor_units=0&fields=code,rate',
        offsetText(['ISK', 'JPY', 'CLP', 'KRW', 'VND'], '{"page":1,"per_page":20,"total":5,"total_pages":1}', [
          'code',
          'rate',
        ]),
      );
    });

    it('selects fields, keeping the item’s order of keys', async () => {
      await assertBody(
        '?fields=name,code&per_page=2',
        offsetText(['AED', 'AUD'], '{"page":1,"per_page":2,"total":34,"total_pages":17}', ['code', 'name']),
      );
      await assertBody(
        '?fields=rate,rate,minor_units&code=JPY',
        offsetText(['JPY'], '{"page":1,"per_page":20,"total":1,"total_pages":1}', ['minor_units', 'rate']),
      );
    });

    it('pages by cursor when limit or cursor is given, to the last page', async () => {
      const query = 'limit=15&fields=code';
      const first = await nextCursor(`?${query}`, ALL_CODES.slice(0, 15));
      const second = await nextCursor(`?${query}&cursor=${first}`, ALL_CODES.slice(15, 30));
      await assertBody(
        `?${query}&cursor=${second}`,
        `{"data":[${ALL_CODES.slice(30)
          .map((code) => `{"code":"${code}"}`)
          .join(',')}],"pagination":{"next_cursor":"","has_more":false,"limit":15}}`,
      );
      await assertBody(
        '?limit=2&code=USD,EUR',
        `{"data":[${itemText(row('EUR'))},${itemText(row('USD'))}],"pagination":{"next_cursor":"","has_more":false,"limit":2}}`,
      );
      const res = await list('?cursor=');
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [
        { field: 'cursor', message: 'must be the next_cursor of a previous page', value: '' },
      ]);
    });

    it('defaults the cursor page size to 20', async () => {
      const cursor = await nextCursor(
        '?limit=20&sort=-rate',
        expected({ sort: [{ field: 'rate', descending: true }] })
          .slice(0, 20)
          .map(([c]) => c),
      );
      const res = await list(`?cursor=${cursor}&sort=-rate`);
      assert.equal(res.json().data.length, 14);
      assert.equal(res.json().pagination.limit, 20);
    });

    it('walks every matching item exactly once, in order, by cursor and by page', async () => {
      // Fewer runs over real HTTP: every run walks every page twice.
      const numRuns = transport === 'inject' ? 150 : 25;
      await fc.assert(
        fc.asyncProperty(queries, fc.integer({ min: 1, max: 12 }), async (query, size) => {
          const want = expected(query);
          const fields = query.fields ?? FIELDS;
          const wantText = want.map((r) => itemText(r, fields));
          const base = queryString(query);

          const walked: string[] = [];
          let cursor = '';
          let pages = 0;
          do {
            const res = await list(`?${base}&limit=${size}${cursor && `&cursor=${cursor}`}`);
            assert.equal(res.status, 200, res.text);
            const { data, pagination } = res.json();
            walked.push(...data.map((item: unknown) => JSON.stringify(item)));
            assert.equal(pagination.has_more, pagination.next_cursor !== '');
            assert.equal(pagination.limit, size);
            cursor = pagination.next_cursor;
            pages++;
          } while (cursor !== '');
          assert.deepEqual(walked, wantText);
          assert.equal(pages, Math.max(1, Math.ceil(want.length / size)));

          const offset: string[] = [];
          const totalPages = Math.ceil(want.length / size);
          for (let page = 1; page <= totalPages + 1; page++) {
            const res = await list(`?${base}&page=${page}&per_page=${size}`);
            assert.equal(res.status, 200, res.text);
            const { data, pagination } = res.json();
            assert.deepEqual(pagination, { page, per_page: size, total: want.length, total_pages: totalPages });
            offset.push(...data.map((item: unknown) => JSON.stringify(item)));
          }
          assert.deepEqual(offset, wantText);
        }),
        { numRuns },
      );
    });

    it('refuses a cursor altered in any character', async () => {
      const cursor = await nextCursor('?limit=5&sort=name', ['AUD', 'BHD', 'BRL', 'CAD', 'CLP']);
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      for (let i = 0; i < cursor.length; i++) {
        const char = cursor[i] as string;
        const replacement = alphabet[(alphabet.indexOf(char) + 1) % alphabet.length] ?? 'A';
        const altered = cursor.slice(0, i) + replacement + cursor.slice(i + 1);
        assertEnvelope(await list(`?limit=5&sort=name&cursor=${altered}`), 400, 'VALIDATION_ERROR', [
          { field: 'cursor', message: ALTERED, value: altered },
        ]);
      }
    });

    it('refuses a cursor whose position was changed and signed again without the key', async () => {
      const cursor = await nextCursor('?limit=5', ALL_CODES.slice(0, 5));
      const [payload, mac] = cursor.split('.') as [string, string];
      const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      assert.deepEqual(decoded.after, ['CAD']);
      const moved = Buffer.from(JSON.stringify({ ...decoded, after: ['USD'] })).toString('base64url');
      const { createHash, createHmac } = await import('node:crypto');
      for (const forged of [
        `${moved}.${mac}`,
        `${moved}.${createHmac('sha256', '').update(moved).digest('base64url')}`,
        `${moved}.${createHmac('sha256', 'secret').update(moved).digest('base64url')}`,
        `${moved}.${createHash('sha256').update(moved).digest('base64url')}`,
        moved,
      ]) {
        assertEnvelope(await list(`?limit=5&cursor=${forged}`), 400, 'VALIDATION_ERROR', [
          { field: 'cursor', message: ALTERED, value: forged },
        ]);
      }
    });

    it('refuses a cursor used with another sort, filter or search', async () => {
      const query = 'limit=2&sort=-rate&minor_units=2&q=a';
      const cursor = await nextCursor(`?${query}`, ['IDR', 'HUF']);
      for (const other of [
        'limit=2&minor_units=2&q=a',
        'limit=2&sort=rate&minor_units=2&q=a',
        'limit=2&sort=-rate,name&minor_units=2&q=a',
        'limit=2&sort=-rate&q=a',
        'limit=2&sort=-rate&minor_units=2,3&q=a',
        'limit=2&sort=-rate&minor_units=2&q=an',
        'limit=2&sort=-rate&minor_units=2',
        'limit=2&sort=-rate&minor_units=2&q=a&code=IDR',
      ]) {
        assertEnvelope(await list(`?${other}&cursor=${cursor}`), 400, 'VALIDATION_ERROR', [
          { field: 'cursor', message: OTHER_QUERY, value: cursor },
        ]);
      }
    });

    it('accepts a cursor with other fields, another limit, or the same query written differently', async () => {
      const cursor = await nextCursor('?limit=2&code=usd,eur,gbp&q=U', ['EUR', 'GBP']);
      await assertBody(
        `?cursor=${cursor}&code=GBP,EUR,USD,usd&search=u&fields=code&limit=50`,
        '{"data":[{"code":"USD"}],"pagination":{"next_cursor":"","has_more":false,"limit":50}}',
      );
      // Without limit, the default size.
      const res = await list(`?cursor=${cursor}&code=USD,GBP,EUR&q=u`);
      assert.equal(res.json().pagination.limit, 20);
    });

    it('refuses mixing offset and cursor pagination', async () => {
      assertEnvelope(await list('?page=1&limit=5'), 400, 'VALIDATION_ERROR', [
        { field: 'limit', message: MIXED, value: 5 },
      ]);
      assertEnvelope(await list('?per_page=5&cursor=abc'), 400, 'VALIDATION_ERROR', [
        { field: 'cursor', message: MIXED, value: 'abc' },
      ]);
      assertEnvelope(await list('?page=2&per_page=5&cursor=abc&limit=5'), 400, 'VALIDATION_ERROR', [
        { field: 'cursor', message: MIXED, value: 'abc' },
        { field: 'limit', message: MIXED, value: 5 },
      ]);
    });

    it('refuses q and search together', async () => {
      assertEnvelope(await list('?q=dollar&search=dollar'), 400, 'VALIDATION_ERROR', [
        { field: 'search', message: 'is an alias of q: send one of them', value: 'dollar' },
      ]);
    });

    for (const [name, max] of [
      ['page', '2147483647'],
      ['per_page', '100'],
      ['limit', '100'],
    ] as const) {
      const message = `must be an integer from 1 to ${max}`;
      const beyond = String(BigInt(max) + 1n);
      for (const value of ['0', '-1', beyond, '1.5', 'abc', '', '1e1']) {
        it(`rejects ${name}=${value}`, async () => {
          assertEnvelope(await list(`?${name}=${value}`), 400, 'VALIDATION_ERROR', [{ field: name, message, value }]);
        });
      }
      it(`accepts ${name} from 1 to ${max}`, async () => {
        assert.equal((await list(`?${name}=1`)).status, 200);
        assert.equal((await list(`?${name}=${max}`)).status, 200);
      });
    }

    it('reports every invalid parameter at once, naming it with its value', async () => {
      assertEnvelope(
        await list('?sort=-price&fields=code,symbol&per_page=0&code=US,EUR&minor_units=two&q=a&q=b'),
        400,
        'VALIDATION_ERROR',
        [
          { field: 'per_page', message: SIZE_MESSAGE, value: '0' },
          { field: 'sort', message: SORT_MESSAGE, value: '-price' },
          { field: 'fields', message: FIELDS_MESSAGE, value: 'code,symbol' },
          { field: 'q', message: 'must be given once', value: ['a', 'b'] },
          { field: 'code', message: 'must be a comma-separated list of currency codes', value: 'US,EUR' },
          { field: 'minor_units', message: 'must be a comma-separated list of integers', value: 'two' },
        ],
      );
    });

    for (const sort of ['', 'rate,', ',rate', '--rate', 'Rate', 'rate desc', '+rate', 'rate,,name']) {
      it(`rejects sort=${JSON.stringify(sort)}`, async () => {
        assertEnvelope(await list(`?sort=${encodeURIComponent(sort)}`), 400, 'VALIDATION_ERROR', [
          { field: 'sort', message: SORT_MESSAGE, value: sort },
        ]);
      });
    }

    it('rejects an empty or repeated field list', async () => {
      assertEnvelope(await list('?fields='), 400, 'VALIDATION_ERROR', [
        { field: 'fields', message: FIELDS_MESSAGE, value: '' },
      ]);
      assertEnvelope(await list('?fields=code&fields=name'), 400, 'VALIDATION_ERROR', [
        { field: 'fields', message: 'must be given once', value: ['code', 'name'] },
      ]);
    });

    it('ignores unknown parameters', async () => {
      await assertBody(
        '?per_page=1&status=active',
        offsetText(['AED'], '{"page":1,"per_page":1,"total":34,"total_pages":34}'),
      );
    });
  });

  describe(`GET /api/currencies/{code} (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    function get(path: string) {
      return client.send({ path: `/api/currencies/${path}` });
    }

    it('answers the currency, for a code in any case', async () => {
      for (const code of ['EUR', 'eur', 'eUr']) {
        const res = await get(code);
        assert.equal(res.status, 200);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(res.text, '{"code":"EUR","name":"Euro","minor_units":2,"rate":0.92}');
      }
      assert.equal((await get('KWD')).text, '{"code":"KWD","name":"Kuwaiti Dinar","minor_units":3,"rate":0.3077}');
    });

    it('selects fields in the item’s order', async () => {
      assert.equal((await get('jpy?fields=rate,code')).text, '{"code":"JPY","rate":150.85}');
      assertEnvelope(await get('JPY?fields=symbol'), 400, 'VALIDATION_ERROR', [
        { field: 'fields', message: FIELDS_MESSAGE, value: 'symbol' },
      ]);
    });

    it('answers 404 for a code that is not in the table', async () => {
      const error = assertEnvelope(await get('xyz'), 404, 'NOT_FOUND');
      assert.equal(error.message, 'No currency XYZ in the table.');
    });

    for (const code of ['US', 'USDD', 'U1D', '%20USD']) {
      it(`answers 400 for the malformed code ${code}`, async () => {
        assertEnvelope(await get(code), 400, 'VALIDATION_ERROR', [
          { field: 'code', message: 'must be a three-letter currency code', value: decodeURIComponent(code) },
        ]);
      });
    }
  });
}

describe('CURSOR_SECRET', () => {
  it('lets instances that share it accept each other’s cursors, and only those', async () => {
    const secret = 'a secret shared by every instance!';
    const [issuer, peer, stranger] = await Promise.all([
      injectClient({ cursorSecret: secret }),
      injectClient({ cursorSecret: secret }),
      injectClient(),
    ]);
    try {
      const cursor = (await issuer.send({ path: '/api/currencies?limit=30' })).json().pagination.next_cursor;
      const next = await peer.send({ path: `/api/currencies?limit=30&fields=code&cursor=${cursor}` });
      assert.equal(
        next.text,
        '{"data":[{"code":"TRY"},{"code":"USD"},{"code":"VND"},{"code":"ZAR"}],' +
          '"pagination":{"next_cursor":"","has_more":false,"limit":30}}',
      );
      assertEnvelope(
        await stranger.send({ path: `/api/currencies?limit=30&cursor=${cursor}` }),
        400,
        'VALIDATION_ERROR',
        [{ field: 'cursor', message: ALTERED, value: cursor }],
      );
    } finally {
      await Promise.all([issuer.close(), peer.close(), stranger.close()]);
    }
  });
});
