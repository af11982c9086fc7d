import { createHash } from 'node:crypto';
import { Decimal } from '../lib/decimal.js';
import { signToken, verifyToken } from '../lib/signed-token.js';

/**
 * Listing a collection as docs/interface-spec.md, 4.7, describes it, written once for any collection: filtering,
 * search, sorting, field selection, and offset or cursor pagination. Free of HTTP: a query
 * takes the request's parameters once they have passed the schema that `collectionQuery`
 * (src/schemas.ts) builds from the same definition, and gives back the page, or the problems
 * that only the collection can see (a cursor that is not genuine, styles mixed).
 */

/** The values a field may hold: they travel in cursors as JSON. */
export type Scalar = string | number;

/** How one field of the items is ordered and, optionally, filtered and searched. */
export interface Field<T extends Scalar> {
  /** Ascending order: negative when `a` comes first, 0 when they are equal, positive otherwise. */
  compare(a: T, b: T): number;
  /** Present when the field can be filtered by a comma-separated list of values, any of which matches. */
  readonly filter?: Filter<T>;
  /** Whether search (`q`) looks into the field's text. */
  readonly searchable?: boolean;
}

export interface Filter<T extends Scalar> {
  /** Regular expression (unanchored source) for one value of the list. */
  readonly pattern: string;
  /** What the values are, for messages and documentation: "currency codes". */
  readonly values: string;
  /** One value of the list, matching `pattern`, as the field's value it selects (e.g. a code in upper case). */
  parse(raw: string): T;
}

export interface CollectionDefinition<Item extends { readonly [K in keyof Item]: Scalar }> {
  /** Names the collection in its cursors, so that one collection's cursors mean nothing to another. */
  readonly name: string;
  /**
   * The items, in any order: a fixed table, whose orders are then worked out once per sort, or a
   * function read by every query, for a collection that may change between pages.
   */
  readonly items: readonly Item[] | (() => readonly Item[]);
  /** The fields of an item, in the order of the keys of each item answered. */
  readonly fields: { readonly [K in keyof Item]: Field<Item[K]> };
  /** The field whose values are unique: the default sort and the last tie-breaker of every sort; filterable. */
  readonly key: keyof Item & string;
}

/** The query parameters of docs/interface-spec.md, 4.7, as the collection's query schema has validated them. */
export interface CollectionParams {
  readonly page?: number | undefined;
  readonly per_page?: number | undefined;
  readonly cursor?: string | undefined;
  readonly limit?: number | undefined;
  readonly sort?: string | undefined;
  readonly fields?: string | undefined;
  readonly q?: string | undefined;
  readonly search?: string | undefined;
  /** The filters: a filterable field's name, with a comma-separated list of values. */
  readonly [filter: string]: string | number | undefined;
}

const STANDARD_PARAMETERS = ['page', 'per_page', 'cursor', 'limit', 'sort', 'fields', 'q', 'search'];
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface OffsetPage<T> {
  readonly data: T[];
  readonly pagination: { page: number; per_page: number; total: number; total_pages: number };
}

export interface CursorPage<T> {
  readonly data: T[];
  readonly pagination: { next_cursor: string; has_more: boolean; limit: number };
}

/** A parameter the collection refuses, with its value as the collection received it (a number as read). */
export interface QueryIssue {
  readonly field: string;
  readonly message: string;
  readonly value: unknown;
}

export type QueryResult<T> = { ok: true; page: OffsetPage<T> | CursorPage<T> } | { ok: false; issues: QueryIssue[] };

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Text, in code-unit order: the same on every machine, unlike a locale's collation. */
export function textField(options: { searchable?: boolean; filter?: Filter<string> } = {}): Field<string> {
  return { compare: byCodeUnits, ...options };
}

/** An integer; when filterable, by lists of decimal integers (`0,3`). */
export function integerField(options: { filterable?: boolean } = {}): Field<number> {
  const filter: Filter<number> = { pattern: '\\d+', values: 'integers', parse: Number };
  return { compare: (a, b) => a - b, ...(options.filterable === true && { filter }) };
}

/** A decimal held as text (`'0.92'`), ordered by its exact value. */
export function decimalField(): Field<string> {
  return { compare: (a, b) => new Decimal(a).comparedTo(b) };
}

interface SortKey {
  readonly name: string;
  readonly field: Field<Scalar>;
  readonly descending: boolean;
}

interface ValueFilter {
  readonly name: string;
  readonly field: Field<Scalar>;
  /** The values asked for, parsed, without repeats, in the field's order. */
  readonly values: Scalar[];
}

/** Orders two lists of values of the sort keys, key by key. */
function compareBy(sort: readonly SortKey[], a: readonly Scalar[], b: readonly Scalar[]): number {
  for (const [i, { field, descending }] of sort.entries()) {
    const order = field.compare(a[i] as Scalar, b[i] as Scalar);
    if (order !== 0) return descending ? -order : order;
  }
  return 0;
}

/** Most sort orders a fixed table keeps; the sorts a query can name are fewer for any small item. */
const MAX_KEPT_ORDERS = 1000;

export class Collection<Item extends { readonly [K in keyof Item]: Scalar }> {
  readonly #definition: CollectionDefinition<Item>;
  readonly #fields: ReadonlyMap<string, Field<Scalar>>;
  readonly #cursorSecret: string;
  /** A fixed table's items in each order asked for so far, by the sort's canonical text. */
  readonly #orders = new Map<string, readonly Item[]>();
  /** The field selections asked for so far, by the selected names: at most one per subset of the fields. */
  readonly #selections = new Map<string, (item: Item) => Partial<Item>>();
  /** Whether every item has the fields as its keys, in their order, and nothing else: a fixed table's may. */
  readonly #itemsAreExact: boolean;

  /** `cursorSecret` keys the HMAC of the cursors: collections that share it accept each other's cursors. */
  constructor(definition: CollectionDefinition<Item>, cursorSecret: string) {
    this.#definition = definition;
    this.#fields = new Map(Object.entries<Field<Scalar>>(definition.fields));
    this.#cursorSecret = cursorSecret;
    for (const [name, field] of this.#fields) {
      if (field.filter !== undefined && STANDARD_PARAMETERS.includes(name)) {
        throw new Error(`the filter ${name} would take the place of a query parameter`);
      }
    }
    if (this.#fields.get(definition.key)?.filter === undefined) throw new Error('the key field must be filterable');
    const names = [...this.#fields.keys()].join(',');
    const { items } = definition;
    this.#itemsAreExact = typeof items !== 'function' && items.every((item) => Object.keys(item).join(',') === names);
  }

  /** Filters, searches and sorts the items, and answers one page of them with the selected fields. */
  query(params: CollectionParams): QueryResult<Partial<Item>> {
    const issues: QueryIssue[] = [];
    if (params.q !== undefined && params.search !== undefined) {
      issues.push({ field: 'search', message: 'is an alias of q: send one of them', value: params.search });
    }
    const cursorStyle = params.cursor !== undefined || params.limit !== undefined;
    if (cursorStyle && (params.page !== undefined || params.per_page !== undefined)) {
      for (const field of ['cursor', 'limit']) {
        const value = params[field];
        if (value !== undefined) issues.push({ field, message: 'cannot be combined with page or per_page', value });
      }
    }
    if (issues.length > 0) return { ok: false, issues };

    const sort = this.#sort(params.sort ?? this.#definition.key);
    const filters = this.#filters(params);
    const search = (params.q ?? params.search ?? '').toLowerCase();
    const position = (item: Item): Scalar[] => sort.map(({ name }) => item[name as keyof Item]);
    const sorted = this.#sorted(sort, position);
    const matching =
      filters.length === 0 && search === '' ? sorted : sorted.filter((item) => this.#matches(item, filters, search));
    const select = this.#selection(params.fields);

    if (!cursorStyle) {
      const page = params.page ?? 1;
      const perPage = params.per_page ?? DEFAULT_PAGE_SIZE;
      const start = (page - 1) * perPage;
      const pagination = {
        page,
        per_page: perPage,
        total: matching.length,
        total_pages: Math.ceil(matching.length / perPage),
      };
      return { ok: true, page: { data: matching.slice(start, start + perPage).map(select), pagination } };
    }

    // Cursors hold the last item's sort values (a keyset position, not an offset, so that items
    // added or removed between pages neither repeat nor go missing) and the query they belong to.
    const query = this.#fingerprint(sort, filters, search);
    let rest = matching;
    if (params.cursor !== undefined) {
      const after = this.#position(params.cursor, query);
      if (!Array.isArray(after)) return { ok: false, issues: [after] };
      rest = matching.filter((item) => compareBy(sort, position(item), after) > 0);
    }
    const limit = params.limit ?? DEFAULT_PAGE_SIZE;
    const data = rest.slice(0, limit);
    const last = data.at(-1);
    const hasMore = rest.length > limit && last !== undefined;
    const next = hasMore ? signToken(JSON.stringify({ query, after: position(last) }), this.#cursorSecret) : '';
    return { ok: true, page: { data: data.map(select), pagination: { next_cursor: next, has_more: hasMore, limit } } };
  }

  /** The item whose key is `key` (read as a filter value of the key field, so `usd` is USD), with the selected fields. */
  find(key: string, fields?: string): Partial<Item> | undefined {
    const { key: name } = this.#definition;
    const field = this.#fields.get(name) as Field<Scalar> & { filter: Filter<Scalar> };
    const wanted = field.filter.parse(key);
    const item = this.#items().find((candidate) => field.compare(candidate[name], wanted) === 0);
    return item === undefined ? undefined : this.#selection(fields)(item);
  }

  #items(): readonly Item[] {
    const { items } = this.#definition;
    return typeof items === 'function' ? items() : items;
  }

  /** The items in the sort's order: a fixed table's worked out once per sort, a changing one's every time. */
  #sorted(sort: readonly SortKey[], position: (item: Item) => Scalar[]): readonly Item[] {
    const order = (): Item[] => [...this.#items()].sort((a, b) => compareBy(sort, position(a), position(b)));
    if (typeof this.#definition.items === 'function') return order();
    const key = sort.map(({ name, descending }) => (descending ? `-${name}` : name)).join(',');
    let sorted = this.#orders.get(key);
    if (sorted === undefined) {
      sorted = order();
      if (this.#orders.size < MAX_KEPT_ORDERS) this.#orders.set(key, sorted);
    }
    return sorted;
  }

  /** `-rate,name` as sort keys, repeats dropped, ending with the key field (ascending unless it was named). */
  #sort(text: string): SortKey[] {
    const sort: SortKey[] = [];
    for (const part of text.split(',')) {
      const descending = part.startsWith('-');
      const name = descending ? part.slice(1) : part;
      const field = this.#fields.get(name);
      if (field === undefined) throw new Error(`sort by an unknown field ${name}: validate the query first`);
      if (!sort.some((key) => key.name === name)) sort.push({ name, field, descending });
    }
    const { key } = this.#definition;
    const last = sort.findIndex(({ name }) => name === key);
    // The key is unique, so the keys after it never decide anything.
    if (last >= 0) return sort.slice(0, last + 1);
    return [...sort, { name: key, field: this.#fields.get(key) as Field<Scalar>, descending: false }];
  }

  #filters(params: CollectionParams): ValueFilter[] {
    const filters: ValueFilter[] = [];
    for (const [name, field] of this.#fields) {
      const { filter } = field;
      const raw = params[name];
      if (filter === undefined || raw === undefined) continue;
      const values = String(raw)
        .split(',')
        .map((value) => filter.parse(value))
        .sort((a, b) => field.compare(a, b));
      filters.push({
        name,
        field,
        values: values.filter((value, i) => i === 0 || field.compare(values[i - 1] as Scalar, value) !== 0),
      });
    }
    return filters;
  }

  #matches(item: Item, filters: readonly ValueFilter[], search: string): boolean {
    const value = (name: string): Scalar => item[name as keyof Item];
    const filtered = filters.every(({ name, field, values }) =>
      values.some((v) => field.compare(value(name), v) === 0),
    );
    if (!filtered || search === '') return filtered;
    for (const [name, field] of this.#fields) {
      if (field.searchable === true && String(value(name)).toLowerCase().includes(search)) return true;
    }
    return false;
  }

  /**
   * The selected fields of an item, in the definition's order whatever the order asked for. All of
   * them, the default, is the item itself when its keys are exactly the fields.
   */
  #selection(fields: string | undefined): (item: Item) => Partial<Item> {
    const wanted = fields === undefined ? undefined : new Set(fields.split(','));
    const names = [...this.#fields.keys()].filter((name) => wanted === undefined || wanted.has(name));
    const key = names.join(',');
    let select = this.#selections.get(key);
    if (select === undefined) {
      select =
        names.length === this.#fields.size && this.#itemsAreExact
          ? (item) => item
          : (item) => Object.fromEntries(names.map((name) => [name, item[name as keyof Item]])) as Partial<Item>;
      this.#selections.set(key, select);
    }
    return select;
  }

  /**
   * What a cursor is bound to: the collection, the sort and the filters and search in a
   * canonical form (so `code=usd,EUR` and `code=EUR,USD` agree); not the fields or the limit,
   * which may change from page to page.
   */
  #fingerprint(sort: readonly SortKey[], filters: readonly ValueFilter[], search: string): string {
    const canonical = JSON.stringify([
      this.#definition.name,
      sort.map(({ name, descending }) => [name, descending]),
      filters.map(({ name, values }) => [name, values]),
      search,
    ]);
    return createHash('sha256').update(canonical).digest('base64url');
  }

  /** The position a cursor continues after, or the issue with it. */
  #position(cursor: string, query: string): Scalar[] | QueryIssue {
    const text = verifyToken(cursor, this.#cursorSecret);
    if (text === undefined) {
      return { field: 'cursor', message: 'is not a cursor of this service, or was altered', value: cursor };
    }
    const payload = JSON.parse(text) as { query: string; after: Scalar[] };
    if (payload.query !== query) {
      return { field: 'cursor', message: 'belongs to another sort, filter or search', value: cursor };
    }
    return payload.after;
  }
}
