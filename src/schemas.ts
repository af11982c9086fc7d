import { type TSchema, Type } from 'typebox';
import {
  type CollectionDefinition,
  DEFAULT_PAGE_SIZE,
  type Field,
  MAX_PAGE_SIZE,
  type Scalar,
} from './domain/collection.js';
import { CURRENCY_CODE_PATTERN } from './domain/currencies.js';

/** Schemas shared by several routes. */

/**
 * The string formats of this service, for rules that a portable pattern cannot state: Unicode
 * properties need a pattern's `u` flag, which not every OpenAPI tool gives it. The validator
 * checks them; the document shows each as the standard keywords of its `DOCUMENTED_AS` form.
 */
export const VISIBLE_LINE = 'visible-line';
export const FORMATS: Record<string, (text: string) => boolean> = {
  // One line of text that shows: no control character (C0, DEL, C1), and at least one character
  // that is not white space nor a default-ignorable code point (U+200B, U+2060, U+FEFF, U+E0020...).
  [VISIBLE_LINE]: (text) =>
    !/\p{Cc}/u.test(text) && /[^\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cc}]/u.test(text),
};

/** The control characters (C0, DEL, C1) as a character class's ranges. */
export const CONTROL_CHARACTERS = '\\u0000-\\u001f\\u007f-\\u009f';
// Controls, white space and the default-ignorable code points of the Basic Multilingual Plane, as
// \u escapes, which every regular expression engine of OpenAPI tools reads without the `u` flag.
const INVISIBLE_CHARACTERS =
  '\\u0000-\\u0020\\u007f-\\u00a0\\u00ad\\u034f\\u061c\\u115f-\\u1160\\u1680\\u17b4-\\u17b5\\u180b-\\u180f' +
  '\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufff8';

/**
 * `visible-line` as a standard pattern, for the document: exact for every character of the Basic
 * Multilingual Plane; the few invisible characters beyond it (tags, U+E0020...) are refused by the
 * service and left to the schema's description.
 */
export const VISIBLE_LINE_PATTERN = `^[^${CONTROL_CHARACTERS}]*[^${INVISIBLE_CHARACTERS}][^${CONTROL_CHARACTERS}]*$`;

/**
 * What a schema is in the OpenAPI document when that differs from what validates it: a comma list,
 * validated as text by a pattern so that the service reads it as it always has, is an array there.
 * A symbol, so that no validator or serialiser sees it; src/plugins/openapi.ts puts it in place.
 */
export const DOCUMENTED_AS = Symbol.for('greeting-service.documented-as');

/** A one-line string that shows (`visible-line`), documented as the standard keywords that say so. */
export function visibleLine(options: { minLength: number; maxLength: number }) {
  const schema = Type.String({ ...options, format: VISIBLE_LINE });
  const documented = { type: 'string', ...options, pattern: VISIBLE_LINE_PATTERN };
  return Object.assign(schema, { [DOCUMENTED_AS]: documented }) as typeof schema;
}

/** The request body media types the service parses (src/plugins/json-body.ts): JSON, under any `+json` type. */
export const JSON_BODY_MEDIA_TYPES = ['application/json', 'application/*+json'] as const;

/**
 * The OpenAPI Format Registry's name for a number that is an exact decimal, carried as the vendor
 * extension `x-format` rather than as `format`: strict validators (Postman's, openapi-backend's)
 * refuse a format they do not know, while every tool ignores an `x-` keyword, and a generator's
 * transform can still map it to BigDecimal, decimal.Decimal or a string.
 */
const DECIMAL = { 'x-format': 'decimal' } as const;

/** A JSON number written with its exact decimal value, which a double may not hold. */
export function exactDecimal(description: string, examples: number[]) {
  return Type.Number({
    ...DECIMAL,
    description:
      `${description} An exact decimal that may have more significant digits than a double holds: ` +
      'read it as a decimal (BigDecimal, decimal.Decimal), not as a floating-point number.',
    examples,
  });
}

export const LocalDateTime = Type.String({
  description: 'The server’s local date-time (honours TZ), `YYYY-MM-DDTHH:mm:ss.SSS`, no offset.',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}$',
  examples: ['2026-01-02T03:04:05.678'],
});

/** A currency code parameter: three ASCII letters in any case; whether it is in the table is the route's business. */
export function currencyCode(description: string, example: string) {
  return Type.String({
    description,
    pattern: `^${CURRENCY_CODE_PATTERN}$`,
    errorMessage: 'must be a three-letter currency code',
    examples: [example],
  });
}

/*
 * The query parameters of a collection (docs/interface-spec.md, 4.7), built from its definition in
 * src/domain/collection.ts: the names of its fields become the patterns of `sort` and
 * `fields`, its filterable fields become parameters. Every parameter is checked here, all at
 * once; the collection itself then judges only what a schema cannot (cursors, mixed styles).
 * Nothing has a `default`: validation would insert it, and the collection could no longer tell
 * which pagination style the client chose.
 */

type Definition<Item extends { readonly [K in keyof Item]: Scalar }> = CollectionDefinition<Item>;

const MAX_PAGE = 2_147_483_647;

function fieldsOf<Item extends { readonly [K in keyof Item]: Scalar }>(definition: Definition<Item>) {
  return Object.entries<Field<Scalar>>(definition.fields);
}

/** A comma-separated list of values matching `pattern`. */
function listPattern(pattern: string): string {
  return `^(?:${pattern})(?:,(?:${pattern}))*$`;
}

/**
 * A comma-separated list parameter: validated as text matching `pattern`, documented as the array
 * of `item` it is, with `examples` as lists.
 */
function listParameter(
  options: { description: string; pattern: string; errorMessage: string },
  item: object,
  example?: string[],
) {
  const schema = Type.String({
    ...options,
    pattern: listPattern(options.pattern),
    ...(example !== undefined && { examples: [example.join(',')] }),
  });
  const documented = {
    type: 'array',
    minItems: 1,
    items: item,
    description: options.description,
    ...(example !== undefined && { examples: [example] }),
  };
  // Typed as the string it validates: the document's form is no part of the request's type.
  return Type.Optional(Object.assign(schema, { [DOCUMENTED_AS]: documented }) as typeof schema);
}

function pageSize(description: string, note = '', examples: number[] = []) {
  return Type.Optional(
    Type.Integer({
      description: `${description}, 1 to ${MAX_PAGE_SIZE}; default ${DEFAULT_PAGE_SIZE}.${note}`,
      minimum: 1,
      maximum: MAX_PAGE_SIZE,
      errorMessage: `must be an integer from 1 to ${MAX_PAGE_SIZE}`,
      ...(examples.length > 0 && { examples }),
    }),
  );
}

/** `fields`: which fields each item has, for a list and for a single item alike. */
export function fieldSelection<Item extends { readonly [K in keyof Item]: Scalar }>(definition: Definition<Item>) {
  const names = fieldsOf(definition).map(([name]) => name);
  return listParameter(
    {
      description:
        `Only these fields, a comma-separated list of ${names.join(', ')}; ` +
        'the answer keeps the usual order of the fields. Default: all.',
      pattern: names.join('|'),
      errorMessage: `must be a comma-separated list of ${names.join(', ')}`,
    },
    { type: 'string', enum: names },
    names.slice(0, 2),
  );
}

/** The query string schema of a collection's list operation. */
export function collectionQuery<Item extends { readonly [K in keyof Item]: Scalar }>(definition: Definition<Item>) {
  const fields = fieldsOf(definition);
  const names = fields.map(([name]) => name);
  const searchable = fields.filter(([, field]) => field.searchable === true).map(([name]) => name);
  const filters: Record<string, TSchema> = {};
  for (const [name, { filter }] of fields) {
    if (filter === undefined) continue;
    filters[name] = listParameter(
      {
        description: `Filter: only items whose ${name} is one of these ${filter.values}, a comma-separated list.`,
        pattern: filter.pattern,
        errorMessage: `must be a comma-separated list of ${filter.values}`,
      },
      { type: 'string', pattern: `^(?:${filter.pattern})$` },
    );
  }
  const search = (description: string, examples: string[] = []) =>
    Type.Optional(Type.String({ description, ...(examples.length > 0 && { examples }) }));
  // The documentation page sends every example: together they make one valid request, so the
  // cursor-style parameters and the alias of q have none.
  return Type.Object({
    page: Type.Optional(
      Type.Integer({
        description: `Offset pagination (the default): the page, 1 to ${MAX_PAGE}; default 1. A page past the end is empty.`,
        minimum: 1,
        maximum: MAX_PAGE,
        errorMessage: `must be an integer from 1 to ${MAX_PAGE}`,
        examples: [1],
      }),
    ),
    per_page: pageSize('Offset pagination: items per page', '', [10]),
    cursor: Type.Optional(
      Type.String({
        description:
          'Cursor pagination: the `next_cursor` of the previous page, sent with the same sort, filters and ' +
          'search. Opaque and signed: an altered cursor, or one used with another query, is a 400.',
        minLength: 1,
        errorMessage: 'must be the next_cursor of a previous page',
      }),
    ),
    limit: pageSize(
      'Cursor pagination: items per page',
      ' Giving `limit` or `cursor` chooses cursor pagination, which cannot be mixed with `page` or `per_page`.',
    ),
    sort: listParameter(
      {
        description:
          `Order: a comma-separated list of ${names.join(', ')}, each ascending, or descending with a leading \`-\`. ` +
          `Default ${definition.key}; ties are broken by ${definition.key}.`,
        pattern: `-?(?:${names.join('|')})`,
        errorMessage: `must be a comma-separated list of ${names.join(', ')}, each optionally preceded by -`,
      },
      { type: 'string', enum: names.flatMap((name) => [name, `-${name}`]) },
      [`-${names.at(-1)}`, `${names[0]}`],
    ),
    fields: fieldSelection(definition),
    q: search(`Search: only items whose ${searchable.join(' or ')} contains this text, in any case.`, ['dollar']),
    search: search('The same as `q`, under another name; send one of them.'),
    ...filters,
  });
}

/**
 * The answer of a collection's list operation: offset pagination, or cursor pagination; `name`,
 * the item's, names the two pages in the OpenAPI document (`CurrencyOffsetPage`).
 */
export function collectionPage(item: TSchema, name: string) {
  return Type.Union([
    Type.Object(
      {
        data: Type.Array(item),
        pagination: Type.Object(
          {
            page: Type.Integer({ examples: [1] }),
            per_page: Type.Integer({ examples: [DEFAULT_PAGE_SIZE] }),
            total: Type.Integer({ description: 'Items matching the filters and search.', examples: [34] }),
            total_pages: Type.Integer({
              description: 'Pages of `per_page` items; 0 when nothing matches.',
              examples: [2],
            }),
          },
          { additionalProperties: false, title: 'OffsetPagination' },
        ),
      },
      { additionalProperties: false, description: 'Offset pagination (the default).', title: `${name}OffsetPage` },
    ),
    Type.Object(
      {
        data: Type.Array(item),
        pagination: Type.Object(
          {
            next_cursor: Type.String({
              description: 'The `cursor` of the next page; empty when there is none.',
              examples: ['eyJxdWVyeSI6Ii4uLiJ9.c2lnbmF0dXJl'],
            }),
            has_more: Type.Boolean({ examples: [true] }),
            limit: Type.Integer({ examples: [DEFAULT_PAGE_SIZE] }),
          },
          { additionalProperties: false, title: 'CursorPagination' },
        ),
      },
      {
        additionalProperties: false,
        description: 'Cursor pagination, when `cursor` or `limit` is given.',
        title: `${name}CursorPage`,
      },
    ),
  ]);
}

/** The OpenAPI security scheme of the operator's routes, which take the bearer token of ADMIN_TOKEN_FILE. */
export const OPERATOR_SECURITY = 'operatorToken';
export const OPERATOR_SECURITY_SCHEME = {
  type: 'http',
  scheme: 'bearer',
  description:
    'The operator’s token, the content of the file `ADMIN_TOKEN_FILE` names: `Authorization: Bearer <token>`.',
} as const;

/** Where the WebSocket echo is, under the context path; `/api/v1/echo/websocket` is its canonical path. */
export const ECHO_WEBSOCKET_PATH = '/api/echo/websocket';

/**
 * The handshake's headers, documented (here and in the AsyncAPI document); never refused by the
 * schema, which would not say 426 where it is due.
 */
export const HandshakeHeaders = Type.Object({
  upgrade: Type.Optional(Type.String({ description: 'Must name `websocket`.', examples: ['websocket'] })),
  connection: Type.Optional(Type.String({ description: 'Must name `Upgrade`.', examples: ['Upgrade'] })),
  'sec-websocket-key': Type.Optional(
    Type.String({ description: '16 random bytes in base64 (RFC 6455, 4.1).', examples: ['dGhlIHNhbXBsZSBub25jZQ=='] }),
  ),
  'sec-websocket-version': Type.Optional(Type.String({ description: 'Must be `13`.', examples: ['13'] })),
  origin: Type.Optional(
    Type.String({ description: 'Sent by browsers: must be an origin `CORS_ORIGINS` allows. Absent: allowed.' }),
  ),
});
