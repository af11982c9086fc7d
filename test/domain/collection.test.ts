import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  Collection,
  type CollectionDefinition,
  type CollectionParams,
  decimalField,
  integerField,
  type QueryResult,
  textField,
} from '../../src/domain/collection.js';

/** A collection of another shape than the currencies: what a second collection would declare. */
interface Book {
  readonly isbn: string;
  readonly title: string;
  readonly year: number;
  readonly price: string;
}

const SECRET = 's'.repeat(32);

function books(items: CollectionDefinition<Book>['items']): CollectionDefinition<Book> {
  return {
    name: 'books',
    items,
    fields: {
      isbn: textField({ filter: { pattern: '\\d{3}', values: 'ISBNs', parse: (raw) => raw } }),
      title: textField({ searchable: true }),
      year: integerField({ filterable: true }),
      price: decimalField(),
    },
    key: 'isbn',
  };
}

const SHELF: Book[] = [
  { isbn: '003', title: 'Emma', year: 1815, price: '9.5' },
  { isbn: '001', title: 'Dracula', year: 1897, price: '10' },
  { isbn: '002', title: 'Persuasion', year: 1817, price: '0.10' },
  { isbn: '004', title: 'Ulysses', year: 1922, price: '0.1' },
  { isbn: '005', title: 'emma (annotated)', year: 1815, price: '12.25' },
];

const shelf = new Collection(
  books(() => SHELF),
  SECRET,
);

function page<T>(result: QueryResult<T>) {
  assert.ok(result.ok, JSON.stringify(result));
  return result.page;
}

function isbns(params: CollectionParams, collection = shelf): string[] {
  return page(collection.query(params)).data.map((book) => book.isbn as string);
}

function issues(params: CollectionParams, collection = shelf) {
  const result = collection.query(params);
  assert.ok(!result.ok);
  return result.issues;
}

/** Every item of a cursor walk, page by page, with the parameters of every request. */
function walk(collection: Collection<Book>, params: CollectionParams, between: () => void = () => {}): string[] {
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const current = page(collection.query({ ...params, cursor }));
    assert.ok('next_cursor' in current.pagination);
    seen.push(...current.data.map((book) => book.isbn as string));
    cursor = current.pagination.next_cursor || undefined;
    between();
  } while (cursor !== undefined);
  return seen;
}

describe('Collection', () => {
  it('sorts by the key by default, and breaks ties by it', () => {
    assert.deepEqual(isbns({}), ['001', '002', '003', '004', '005']);
    assert.deepEqual(isbns({ sort: 'year' }), ['003', '005', '002', '001', '004']);
    assert.deepEqual(isbns({ sort: '-year' }), ['004', '001', '002', '003', '005']);
  });

  it('orders text by code units and decimals by their exact value', () => {
    assert.deepEqual(isbns({ sort: 'title' }), ['001', '003', '002', '004', '005']);
    // 0.1 and 0.10 are equal (tie broken by the key), 9.5 comes before 10.
    assert.deepEqual(isbns({ sort: 'price' }), ['002', '004', '003', '001', '005']);
    assert.deepEqual(isbns({ sort: '-price,-isbn' }), ['005', '001', '003', '004', '002']);
  });

  it('filters by lists of values and searches the searchable fields in any case', () => {
    assert.deepEqual(isbns({ year: '1815,1922' }), ['003', '004', '005']);
    assert.deepEqual(isbns({ year: '1815', isbn: '005,001' }), ['005']);
    assert.deepEqual(isbns({ q: 'EMMA' }), ['003', '005']);
    assert.deepEqual(isbns({ search: 'ss' }), ['004']);
    // The year is not searchable, the ISBN neither.
    assert.deepEqual(isbns({ q: '18' }), []);
    assert.deepEqual(isbns({ q: '' }), ['001', '002', '003', '004', '005']);
  });

  it('selects fields in the definition’s order', () => {
    const [first] = page(shelf.query({ fields: 'price,isbn', per_page: 1 })).data;
    assert.deepEqual(Object.keys(first ?? {}), ['isbn', 'price']);
    assert.deepEqual(shelf.find('002', 'year,title'), { title: 'Persuasion', year: 1817 });
    assert.equal(shelf.find('999'), undefined);
  });

  it('pages by offset by default', () => {
    assert.deepEqual(page(shelf.query({ per_page: 2, page: 3 })), {
      data: [{ isbn: '005', title: 'emma (annotated)', year: 1815, price: '12.25' }],
      pagination: { page: 3, per_page: 2, total: 5, total_pages: 3 },
    });
    assert.deepEqual(page(shelf.query({ page: 4, per_page: 2 })).data, []);
    assert.deepEqual(page(shelf.query({ year: '2000' })).pagination, {
      page: 1,
      per_page: 20,
      total: 0,
      total_pages: 0,
    });
  });

  it('pages by cursor when a cursor or a limit is given', () => {
    const first = page(shelf.query({ limit: 2, sort: '-year' }));
    assert.deepEqual(
      first.data.map((book) => book.isbn),
      ['004', '001'],
    );
    assert.ok('has_more' in first.pagination && first.pagination.has_more);
    assert.deepEqual(walk(shelf, { limit: 2, sort: '-year' }), ['004', '001', '002', '003', '005']);
    const last = page(shelf.query({ limit: 5 }));
    assert.deepEqual(last.pagination, { next_cursor: '', has_more: false, limit: 5 });
  });

  it('binds a cursor to the sort, filters and search, not to the fields or the limit', () => {
    const { pagination } = page(shelf.query({ limit: 1, year: '1815,1817' }));
    assert.ok('next_cursor' in pagination);
    const cursor = pagination.next_cursor;
    assert.deepEqual(isbns({ cursor, year: '1817,1815,1815', fields: 'isbn', limit: 5 }), ['003', '005']);
    const other = { field: 'cursor', message: 'belongs to another sort, filter or search', value: cursor };
    assert.deepEqual(issues({ cursor, year: '1815' }), [other]);
    assert.deepEqual(issues({ cursor, year: '1815,1817', sort: '-isbn' }), [other]);
    assert.deepEqual(issues({ cursor, year: '1815,1817', q: 'e' }), [other]);
    // Sorting by the key and then anything else is sorting by the key: the same query.
    assert.deepEqual(isbns({ cursor, year: '1815,1817', sort: 'isbn,title' }), ['003', '005']);
  });

  it('accepts only cursors signed with its secret', () => {
    const { pagination } = page(shelf.query({ limit: 1 }));
    assert.ok('next_cursor' in pagination);
    const cursor = pagination.next_cursor;
    assert.deepEqual(
      isbns(
        { cursor },
        new Collection(
          books(() => SHELF),
          SECRET,
        ),
      ),
      ['002', '003', '004', '005'],
    );
    assert.deepEqual(
      issues(
        { cursor },
        new Collection(
          books(() => SHELF),
          't'.repeat(32),
        ),
      ),
      [{ field: 'cursor', message: 'is not a cursor of this service, or was altered', value: cursor }],
    );
    const other = new Collection({ ...books(() => SHELF), name: 'magazines' }, SECRET);
    assert.equal(issues({ cursor }, other)[0]?.message, 'belongs to another sort, filter or search');
  });

  it('refuses mixed pagination styles and both names of the search', () => {
    assert.deepEqual(issues({ page: 1, limit: 5, cursor: 'c' }), [
      { field: 'cursor', message: 'cannot be combined with page or per_page', value: 'c' },
      { field: 'limit', message: 'cannot be combined with page or per_page', value: 5 },
    ]);
    assert.deepEqual(issues({ per_page: 5, limit: 5, q: 'a', search: 'b' }), [
      { field: 'search', message: 'is an alias of q: send one of them', value: 'b' },
      { field: 'limit', message: 'cannot be combined with page or per_page', value: 5 },
    ]);
  });

  it('walks a changing collection: no item repeated, none that stays missed', () => {
    const items: Book[] = [...SHELF];
    const changing = new Collection(
      books(() => items),
      SECRET,
    );
    const book = (isbn: string): Book => ({ isbn, title: 'New', year: 2000, price: '1' });
    const changes = [
      // After page 1 (001, 002): an item before the position, never to be seen.
      () => items.push(book('000')),
      // After page 2 (003, 004): one item added after the position, one removed after it.
      () =>
        items.splice(
          items.findIndex((b) => b.isbn === '005'),
          1,
          book('006'),
        ),
    ];
    assert.deepEqual(
      walk(changing, { limit: 2 }, () => changes.shift()?.()),
      ['001', '002', '003', '004', '006'],
    );
  });

  it('refuses definitions that cannot work', () => {
    const base = books(() => SHELF);
    assert.throws(
      () => new Collection({ ...base, fields: { ...base.fields, year: integerField() }, key: 'year' }, SECRET),
      /key field must be filterable/,
    );
    const page = integerField({ filterable: true });
    const clashing = { ...base, fields: { ...base.fields, page } } as unknown as CollectionDefinition<Book>;
    assert.throws(() => new Collection(clashing, SECRET), /filter page would take the place of a query parameter/);
  });
});

describe('a fixed table', () => {
  const table = new Collection(books(SHELF), SECRET);

  it('answers every sort, filter, search and page as a changing collection of the same items does', () => {
    const queries: CollectionParams[] = [
      {},
      { sort: '-price' },
      { sort: 'year,-title' },
      { sort: '-year', page: 2, per_page: 2 },
      { q: 'emma', sort: 'price' },
      { year: '1815,1922', sort: '-isbn' },
      { fields: 'title', sort: 'title' },
      { limit: 2, sort: '-price' },
    ];
    for (const params of [...queries, ...queries]) {
      assert.deepEqual(page(table.query(params)), page(shelf.query(params)), JSON.stringify(params));
    }
  });

  it('never answers a key that is not a field, whichever fields are selected', () => {
    const extra = SHELF.map((book) => ({ ...book, secret: 'x' }));
    const padded = new Collection(books(extra), SECRET);
    for (const fields of [undefined, 'isbn,title,year,price', 'title']) {
      for (const book of page(padded.query({ fields })).data) assert.equal('secret' in book, false);
      assert.equal('secret' in (padded.find('001', fields) ?? {}), false);
    }
  });
});
