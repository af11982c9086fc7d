import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, transports } from '../helpers.js';

const PAGE_MESSAGE = 'must be an integer from 1 to 2147483647';

for (const [transport, connect] of transports) {
  describe(`GET /api/search (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    async function search(query: string) {
      return client.send({ path: `/api/search${query}` });
    }

    it('defaults the page to 1', async () => {
      const res = await search('?keyword=books');
      assert.equal(res.status, 200);
      assert.equal(res.text, `{"keyword":"books","page":1,"results":"Search results for 'books' (page 1)"}`);
    });

    it('copies the keyword and page', async () => {
      const res = await search('?keyword=books&page=2');
      assert.deepEqual(res.json(), { keyword: 'books', page: 2, results: "Search results for 'books' (page 2)" });
    });

    it('accepts the largest page', async () => {
      const res = await search('?keyword=a&page=2147483647');
      assert.equal(res.json().page, 2147483647);
    });

    it('decodes the keyword: percent-encoding, plus as space, Unicode', async () => {
      const res = await search(`?keyword=${encodeURIComponent("naïve café 'quoted' 😀")}+x`);
      const keyword = "naïve café 'quoted' 😀 x";
      assert.deepEqual(res.json(), { keyword, page: 1, results: `Search results for '${keyword}' (page 1)` });
    });

    it('ignores unknown parameters', async () => {
      const res = await search('?keyword=a&sort=x&sort=y');
      assert.equal(res.status, 200);
    });

    it('requires the keyword', async () => {
      assertEnvelope(await search(''), 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'is required', value: null },
      ]);
      assertEnvelope(await search('?page=2'), 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'is required', value: null },
      ]);
    });

    for (const keyword of ['', '%20%20', '%09', '+']) {
      it(`rejects a blank keyword (${JSON.stringify(keyword)})`, async () => {
        const res = await search(`?keyword=${keyword}`);
        const value = decodeURIComponent(keyword.replaceAll('+', ' '));
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'keyword', message: 'must not be blank', value }]);
      });
    }

    it('rejects a repeated keyword with the values as sent', async () => {
      assertEnvelope(await search('?keyword=a&keyword=b'), 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'must be given once', value: ['a', 'b'] },
      ]);
    });

    for (const page of [
      'abc',
      '1.5',
      '0',
      '-1',
      '2147483648',
      '0x10',
      '1e3',
      '%201',
      '',
      '1.0',
      '99999999999999999999',
    ]) {
      it(`rejects page=${page} with the value as sent`, async () => {
        const res = await search(`?keyword=a&page=${page}`);
        assertEnvelope(res, 400, 'VALIDATION_ERROR', [
          { field: 'page', message: PAGE_MESSAGE, value: decodeURIComponent(page) },
        ]);
      });
    }

    it('rejects a repeated page with the values as sent', async () => {
      assertEnvelope(await search('?keyword=a&page=1&page=2'), 400, 'VALIDATION_ERROR', [
        { field: 'page', message: 'must be given once', value: ['1', '2'] },
      ]);
    });

    it('reports every invalid field at once, in schema order', async () => {
      assertEnvelope(await search('?page=abc'), 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'is required', value: null },
        { field: 'page', message: PAGE_MESSAGE, value: 'abc' },
      ]);
      assertEnvelope(await search('?page=0&keyword=%20'), 400, 'VALIDATION_ERROR', [
        { field: 'keyword', message: 'must not be blank', value: ' ' },
        { field: 'page', message: PAGE_MESSAGE, value: '0' },
      ]);
    });
  });
}
