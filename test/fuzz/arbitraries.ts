import zlib from 'node:zlib';
import fc from 'fast-check';
import { CURRENCIES } from '../../src/domain/currencies.js';

/**
 * Generators of HTTP requests for the fuzz suite: every route, odd methods, paths, query
 * strings, headers and bodies, weighted so that many requests are valid or nearly valid for
 * their route and reach its deeper code, not only the 404.
 */

/** The body limit the fuzzed apps run with: small, so that bodies near and over it stay cheap. */
export const FUZZ_BODY_LIMIT = 64 * 1024;

/** Replaced by the profile's current ETag when the request is sent, so that preconditions can match. */
export const CURRENT_ETAG = '<current-etag>';

/** Keys that would pollute a prototype if a parser or a merge assigned them naively, and what they try to set. */
const POLLUTION_KEYS = ['__proto__', 'constructor', 'prototype'] as const;
export const POLLUTED_PROPERTY = 'fuzzPolluted';

export interface FuzzRequest {
  method: string;
  /** The request target's path as it goes on the wire, with no query. */
  path: string;
  /** `''`, or the query string with its leading `?`. */
  query: string;
  /** Header names and values; the transports add Host, Content-Length and Connection. */
  headers: [string, string][];
  body: Buffer | undefined;
}

const utf8 = (text: string) => Buffer.from(text, 'utf8');

/** Percent-encodes every byte of the text's UTF-8 (a lone surrogate becomes U+FFFD, as on the wire). */
function percentEncodeAll(text: string): string {
  return [...utf8(text)].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

/** Percent-encodes what a URL component must not carry as it is, keeping the rest readable. */
function percentEncode(text: string): string {
  return [...utf8(text)]
    .map((byte) =>
      /[A-Za-z0-9\-._~!$'()*,:@]/.test(String.fromCharCode(byte)) && byte < 0x80
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

/**
 * Other spellings of a path that the router reads as the same path: some of its unreserved
 * characters percent-escaped, with hex digits in either case (`/api/hello` as `/%61pi/hell%6f` or `/a%70i/hell%6F`).
 */
export function spelledPath(path: string): fc.Arbitrary<string> {
  return fc
    .array(fc.constantFrom('as is', 'lower', 'upper'), { minLength: path.length, maxLength: path.length })
    .map((choices) =>
      [...path]
        .map((char, i) => {
          const choice = choices[i];
          if (choice === 'as is' || !/[A-Za-z0-9._~-]/.test(char)) return char;
          const hex = char.charCodeAt(0).toString(16);
          return `%${choice === 'upper' ? hex.toUpperCase() : hex}`;
        })
        .join(''),
    );
}

const CURRENCY_CODES = CURRENCIES.map((currency) => currency.code);

/** Text of every kind: ASCII, any Unicode (lone surrogates included), white space. */
const anyText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.constantFrom('', ' ', '\t', '\u00a0', 'é', '世界', '😀', '\ud800', '\udfff', '\u0000', '\ufeff', 'a b'),
);

/** Percent-encodings a decoder may trip on. */
const BAD_PERCENT = ['%', '%2', '%zz', '%00', '%C0%AF', '%FF', '%2F', '%2f', '%5C', '%25', '%E2%82', '%ED%A0%80', '%%'];
const badPercent = fc.constantFrom(...BAD_PERCENT);

/** A path or query component: valid text percent-encoded, raw Unicode, or broken encodings. */
const component = fc.oneof(
  { arbitrary: anyText.map(percentEncode), weight: 5 },
  { arbitrary: anyText.map(percentEncodeAll), weight: 1 },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }), weight: 1 },
  { arbitrary: fc.tuple(fc.string({ maxLength: 4 }).map(percentEncode), badPercent).map(([a, b]) => a + b), weight: 2 },
  { arbitrary: fc.constantFrom('.', '..', '%2e%2e', '.%2E', '~', '+', ';x=1', 'a?b', '#frag'), weight: 1 },
);

const currencyCode = fc.oneof(
  { arbitrary: fc.constantFrom(...CURRENCY_CODES), weight: 6 },
  { arbitrary: fc.constantFrom(...CURRENCY_CODES).map((code) => code.toLowerCase()), weight: 2 },
  { arbitrary: fc.constantFrom('XXX', 'ABC', 'ZZZ', 'XAU'), weight: 1 },
  { arbitrary: fc.constantFrom('US', 'USDD', 'U5D', '', 'ÉUR', 'usd ', '%55SD'), weight: 1 },
  { arbitrary: component, weight: 1 },
);

const amount = fc.oneof(
  { arbitrary: fc.nat({ max: 1_000_000 }).map(String), weight: 4 },
  {
    arbitrary: fc
      .tuple(fc.bigInt({ min: 0n, max: 1_000_000_000_000n }), fc.stringMatching(/^\d{1,11}$/))
      .map(([whole, fraction]) => `${whole}.${fraction}`),
    weight: 3,
  },
  {
    arbitrary: fc.constantFrom('0', '1000000000000', '1000000000000.01', '-1', '-0', '+1', '1e3', '0x10', '.5', '5.'),
    weight: 2,
  },
  { arbitrary: fc.constantFrom('1,5', '', 'NaN', 'Infinity', '007.50', '9'.repeat(400)), weight: 1 },
  { arbitrary: component, weight: 1 },
);

const integerText = fc.oneof(
  { arbitrary: fc.integer({ min: 1, max: 200 }).map(String), weight: 4 },
  {
    arbitrary: fc.constantFrom('0', '-1', '2147483647', '2147483648', '1.5', '1e3', '0x10', ' 1', '', '007', 'abc'),
    weight: 2,
  },
  { arbitrary: fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String), weight: 1 },
);

const FIELD_NAMES = ['code', 'name', 'minor_units', 'rate'];
const fieldList = fc.oneof(
  fc
    .subarray(FIELD_NAMES, { minLength: 1 })
    .chain((names) => fc.shuffledSubarray(names, { minLength: 1 }))
    .map((names) => names.join(',')),
  fc.constantFrom('', ',', 'price', 'code,,name', 'CODE', 'code,code'),
);
const sortList = fc.oneof(
  fc
    .array(fc.tuple(fc.boolean(), fc.constantFrom(...FIELD_NAMES)), { minLength: 1, maxLength: 3 })
    .map((keys) => keys.map(([descending, name]) => (descending ? `-${name}` : name)).join(',')),
  fc.constantFrom('', '-', 'price', '--rate', '+rate', 'rate,'),
);

type Pair = [string, string | null];

/** Query parameters: `[key, value]`, value `null` for a key written without `=`. */
function pairs(...entries: fc.Arbitrary<Pair>[]): fc.Arbitrary<Pair[]> {
  return fc
    .tuple(...entries.map((entry) => fc.option(entry, { freq: 4, nil: undefined })))
    .map((all) => all.filter((entry): entry is Pair => entry !== undefined));
}

const pair = (key: string, value: fc.Arbitrary<string>): fc.Arbitrary<Pair> => value.map((v) => [key, v]);

const versionParameter = fc.oneof(
  { arbitrary: fc.constant<Pair[]>([]), weight: 12 },
  { arbitrary: fc.constantFrom<Pair[]>([['version', '1']], [['version', 'v1']]), weight: 2 },
  {
    arbitrary: fc.constantFrom<Pair[]>(
      [['version', '2']],
      [['version', '']],
      [['version', null]],
      [
        ['version', '1'],
        ['version', '1'],
      ],
    ),
    weight: 1,
  },
);

/** Parameters that a query parser might turn into prototype pollution, or trip over. */
const hostileParameters: fc.Arbitrary<Pair[]> = fc.array(
  fc.oneof(
    fc.tuple(
      fc.constantFrom(
        ...POLLUTION_KEYS,
        `__proto__[${POLLUTED_PROPERTY}]`,
        `constructor[prototype][${POLLUTED_PROPERTY}]`,
        `__proto__.${POLLUTED_PROPERTY}`,
        'hasOwnProperty',
        'toString',
        'valueOf',
      ),
      fc.option(fc.constantFrom('1', '', POLLUTED_PROPERTY), { nil: null }),
    ),
    fc.tuple(component, fc.option(component, { nil: null })),
    fc.tuple(fc.constantFrom('', '='), fc.option(component, { nil: null })),
    fc.tuple(
      fc.constantFrom('keyword', 'q', 'page'),
      fc.integer({ min: 1000, max: 20_000 }).map((n) => 'x'.repeat(n)),
    ),
  ),
  { maxLength: 4 },
);

function queryString(parameters: Pair[], separator: string): string {
  if (parameters.length === 0) return '';
  return `?${parameters.map(([key, value]) => (value === null ? key : `${key}=${value}`)).join(separator)}`;
}

interface Target {
  method: string;
  path: string;
  parameters: Pair[];
  headers: [string, string][];
  body: Buffer | undefined;
}

const encodedText = anyText.map(percentEncode);

/** Profile field values: valid, at and over their limits, wrong types. */
const profileValue = (maxLength: number) =>
  fc.oneof(
    { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }), weight: 4 },
    { arbitrary: fc.constant(null), weight: 2 },
    {
      arbitrary: fc
        .constantFrom(maxLength, maxLength + 1)
        .chain((n) => fc.constantFrom('a'.repeat(n), '😀'.repeat(n), 'e\u0301'.repeat(Math.ceil(n / 2)))),
      weight: 1,
    },
    { arbitrary: fc.constantFrom('', '  ', '\u00a0', 42, true, [], {}, ['x'], { name: 'x' }), weight: 1 },
  );
const email = fc.oneof(
  { arbitrary: fc.emailAddress(), weight: 4 },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: fc.constantFrom('ada@example', '@b.c', 'a@@b.c', 'a b@c.d', `${'a'.repeat(250)}@b.cd`, 7), weight: 1 },
);
const profileFields = fc.record(
  { name: profileValue(100), email, bio: profileValue(1000) },
  { requiredKeys: [] },
) as fc.Arbitrary<Record<string, unknown>>;

/** A profile body's JSON text: fields, now and then with a key that is not allowed (prototype keys among them) or repeated. */
const profileBody = fc.oneof(
  { arbitrary: profileFields.map((fields) => JSON.stringify(fields)), weight: 8 },
  {
    arbitrary: fc
      .tuple(profileFields, fc.constantFrom(...POLLUTION_KEYS, 'age', 'Name'))
      .map(([fields, key]) => `{"${key}":{"${POLLUTED_PROPERTY}":"yes"},${JSON.stringify(fields).slice(1)}`),
    weight: 1,
  },
  { arbitrary: fc.constant('{"name":"a","name":"b"}'), weight: 1 },
);

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', 'application/merge-patch+json'];
const jsonType = fc.constantFrom(...JSON_TYPES);

const zstdCompressSync = (zlib as unknown as { zstdCompressSync?: (body: Buffer) => Buffer }).zstdCompressSync;

/** Each coding the runtime has, as a client applies it. */
const CODERS_BY_NAME: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: (body) => zlib.gzipSync(body),
  deflate: (body) => zlib.deflateSync(body),
  br: (body) => zlib.brotliCompressSync(body),
  ...(zstdCompressSync !== undefined && { zstd: (body: Buffer) => zstdCompressSync(body) }),
};
const CODING_NAMES = Object.keys(CODERS_BY_NAME);

/** `body` in `coding`; gzip and zstd in two members or frames when `split`, zstd after a skippable frame when `skip`. */
function coded(coding: string, body: Buffer, split: boolean, skip: boolean): Buffer {
  const code = CODERS_BY_NAME[coding] as (body: Buffer) => Buffer;
  const half = body.length >> 1;
  const streams =
    split && (coding === 'gzip' || coding === 'zstd')
      ? [code(body.subarray(0, half)), code(body.subarray(half))]
      : [code(body)];
  // A skippable zstd frame of 3 bytes, which no decoder takes for the body.
  const skippable = Buffer.from([0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]);
  return Buffer.concat(skip && coding === 'zstd' ? [skippable, ...streams] : streams);
}

/** A gzip member of `mib` MiB of empty stored blocks, which decodes to nothing, in brotli: a hundred bytes or so. */
function stackedBomb(mib: number): Buffer {
  const blocks = Buffer.alloc(5 * 209_715 * mib).fill(Buffer.from([0, 0, 0, 0xff, 0xff]));
  const member = Buffer.concat([
    Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]),
    blocks,
    Buffer.from([3, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
  ]);
  return zlib.brotliCompressSync(member, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } });
}

/** Bodies that cost a service that decodes them whole far more than they weigh, each with its Content-Encoding. */
const CODED_BOMBS: readonly (readonly [Buffer, string])[] = [
  [stackedBomb(64), 'gzip, br'],
  [zlib.gzipSync(stackedBomb(64)), 'gzip, br, gzip'],
  [Buffer.concat(Array.from({ length: 3000 }, () => zlib.gzipSync(''))), 'gzip'],
  [zlib.gzipSync(Buffer.alloc(16 * FUZZ_BODY_LIMIT, ' ')), 'gzip'],
  ...(zstdCompressSync === undefined
    ? []
    : [[Buffer.concat(Array.from({ length: 1000 }, () => zstdCompressSync(Buffer.alloc(0)))), 'zstd'] as const]),
];

/**
 * An echo in content codings that its Content-Encoding names: one to three, in several gzip members
 * or zstd frames, cut short or followed by bytes of no stream, now and then; and the bombs.
 */
const codedEcho: fc.Arbitrary<Target> = fc
  .oneof(
    {
      arbitrary: fc
        .tuple(
          fc.json({ maxDepth: 3 }),
          fc.array(fc.tuple(fc.constantFrom(...CODING_NAMES), fc.boolean(), fc.boolean()), {
            minLength: 1,
            maxLength: 3,
          }),
          fc.constantFrom('whole', 'whole', 'cut', 'followed'),
          fc.nat(),
        )
        .map(([json, codings, damage, at]): readonly [Buffer, string] => {
          const body = codings.reduce<Buffer>(
            (body, [coding, split, skip]) => coded(coding, body, split, skip),
            utf8(`{"value":${json}}`),
          );
          const sent =
            damage === 'cut'
              ? body.subarray(0, at % body.length)
              : damage === 'followed'
                ? Buffer.concat([body, Buffer.from([at % 256])])
                : body;
          return [sent, codings.map(([coding]) => coding).join(', ')];
        }),
      weight: 8,
    },
    { arbitrary: fc.constantFrom(...CODED_BOMBS), weight: 1 },
  )
  .map(([body, contentEncoding]) => ({
    method: 'POST',
    path: '/api/echo',
    parameters: [],
    headers: [
      ['content-type', 'application/json'],
      ['content-encoding', contentEncoding],
    ],
    body,
  }));

/** Requests shaped for one route, valid or nearly so. */
const routeTargets: fc.Arbitrary<Target>[] = [
  codedEcho,
  fc.constantFrom('/api/hello', '/healthz', '/readyz').map((path) => ({
    method: 'GET',
    path,
    parameters: [],
    headers: [],
    body: undefined,
  })),
  encodedText.map((name) => ({
    method: 'GET',
    path: `/api/hello/${name}`,
    parameters: [],
    headers: [],
    body: undefined,
  })),
  pairs(pair('keyword', encodedText), pair('page', integerText)).map((parameters) => ({
    method: 'GET',
    path: '/api/search',
    parameters,
    headers: [],
    body: undefined,
  })),
  pairs(pair('from', currencyCode), pair('to', currencyCode), pair('amount', amount)).map((parameters) => ({
    method: 'GET',
    path: '/api/exchange',
    parameters,
    headers: [],
    body: undefined,
  })),
  pairs(
    pair('page', integerText),
    pair('per_page', integerText),
    pair('limit', integerText),
    pair('cursor', fc.oneof(fc.base64String({ maxLength: 40 }), encodedText)),
    pair(
      'code',
      fc.array(currencyCode, { minLength: 1, maxLength: 3 }).map((codes) => codes.join(',')),
    ),
    pair('minor_units', fc.constantFrom('0', '2', '3', '0,3', 'x', '-1', '')),
    pair('q', encodedText),
    pair('search', encodedText),
    pair('sort', sortList),
    pair('fields', fieldList),
  ).map((parameters) => ({ method: 'GET', path: '/api/currencies', parameters, headers: [], body: undefined })),
  fc.tuple(currencyCode, fc.option(pair('fields', fieldList), { nil: undefined })).map(([code, fields]) => ({
    method: 'GET',
    path: `/api/currencies/${code}`,
    parameters: fields === undefined ? [] : [fields],
    headers: [],
    body: undefined,
  })),
  fc.json({ maxDepth: 4 }).map((json) => ({
    method: 'POST',
    path: '/api/echo',
    parameters: [],
    headers: [['content-type', 'application/json']],
    body: utf8(json.startsWith('{') ? json : `{"value":${json}}`),
  })),
  fc
    .tuple(
      fc.constantFrom('GET', 'HEAD'),
      fc.option(fc.constantFrom(CURRENT_ETAG, '*', `W/${CURRENT_ETAG}`, '"1"', `"0", ${CURRENT_ETAG}`), { nil: null }),
    )
    .map(([method, tag]) => ({
      method,
      path: '/api/profile',
      parameters: [],
      headers: tag === null ? [] : [['if-none-match', tag]],
      body: undefined,
    })),
  fc
    .tuple(
      fc.constantFrom('POST', 'PATCH', 'PUT'),
      profileBody,
      jsonType,
      fc.option(fc.constantFrom(CURRENT_ETAG, '*', '"1"', `W/${CURRENT_ETAG}`, 'garbage'), { nil: null }),
    )
    .map(([method, body, type, tag]) => ({
      method,
      path: '/api/profile',
      parameters: [],
      headers:
        tag === null
          ? [['content-type', type]]
          : [
              ['content-type', type],
              ['if-match', tag],
            ],
      body: utf8(body),
    })),
];

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
// CONNECT is not among them: its target is a host, not a path, and its 405 on a connection that
// then closes has tests of its own (test/http-protocol.test.ts).
const ODD_METHODS = [
  'TRACE',
  'PROPFIND',
  'SEARCH',
  'QUERY',
  'PURGE',
  'LOCK',
  'MKCOL',
  'get',
  'Post',
  'FOO',
  'M-SEARCH',
];
const method = fc.oneof(
  { arbitrary: fc.constantFrom(...METHODS), weight: 8 },
  { arbitrary: fc.constantFrom(...ODD_METHODS), weight: 1 },
);

const ROUTE_PATHS = [
  '/api/hello',
  '/api/hello/Ada',
  '/api/search',
  '/api/echo',
  '/api/profile',
  '/api/exchange',
  '/api/currencies',
  '/api/currencies/EUR',
  '/healthz',
  '/readyz',
  '/openapi.json',
  '/metrics',
  '/docs',
  '/docs/',
  '/docs/json',
  '/docs/yaml',
  '/docs/static/index.css',
  '/api',
  '/',
];

/** A path of the service bent out of shape, or none of the service's. */
const oddPath = fc.oneof(
  fc.constantFrom(...ROUTE_PATHS),
  fc.array(component, { minLength: 1, maxLength: 5 }).map((segments) => `/${segments.join('/')}`),
  fc
    .tuple(fc.constantFrom(...ROUTE_PATHS), fc.array(component, { minLength: 1, maxLength: 3 }))
    .map(([path, segments]) => `${path}/${segments.join('/')}`),
  fc.constantFrom(...ROUTE_PATHS).map((path) => path.replace('/', '//')),
  fc.constantFrom(...ROUTE_PATHS).map((path) => `/x/..${path}`),
  fc.constantFrom(...ROUTE_PATHS).map((path) => path.replace(/\/(\w)/, '/./$1')),
  fc.constantFrom(...ROUTE_PATHS).map((path) => path.replace(/\//g, '%2F')),
  fc.constantFrom(...ROUTE_PATHS).map((path) => path.toUpperCase()),
  fc.constantFrom('/api/v2/hello', '/api/V1/hello', '/api/v1/v1/hello', '/api/v1', '/api/v1/', '/api/v1x/hello'),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => `/api/hello/${'a'.repeat(n)}`),
  fc.constantFrom('*', '', 'api/hello', 'http://localhost/api/hello', '/api/hello\\..\\profile', '/%2e%2e/api/hello'),
);

/** A route's request, or a random one; then bent by the versioned prefix and a trailing slash. */
const target: fc.Arbitrary<Target> = fc
  .tuple(
    fc.oneof(
      { arbitrary: fc.oneof(...routeTargets), weight: 6 },
      {
        arbitrary: fc.record({ method, path: oddPath, parameters: hostileParameters }).map((t) => ({
          ...t,
          headers: [],
          body: undefined,
        })),
        weight: 3,
      },
    ),
    fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
    fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
    fc.oneof({ arbitrary: fc.constant<string | null>(null), weight: 6 }, { arbitrary: method, weight: 1 }),
    versionParameter,
    fc.oneof({ arbitrary: fc.constant<Pair[]>([]), weight: 5 }, { arbitrary: hostileParameters, weight: 1 }),
  )
  .map(([base, versioned, trailingSlash, otherMethod, version, hostile]) => ({
    ...base,
    method: otherMethod ?? base.method,
    path: `${versioned ? base.path.replace(/^\/api(?=\/|$)/, '/api/v1') : base.path}${trailingSlash ? '/' : ''}`,
    parameters: [...base.parameters, ...version, ...hostile],
  }));

const DEEP = 10_000;
/** Bodies that are cheap to pick and expensive to parse, built once. */
const BIG_BODIES = [
  `{"a":${'['.repeat(DEEP)}${']'.repeat(DEEP)}}`,
  `${'{"a":'.repeat(DEEP)}1${'}'.repeat(DEEP)}`,
  // Deeper than JSON.stringify can write: repeated as the `value` of an error detail.
  `{"name":${'['.repeat(30_000)}${']'.repeat(30_000)}}`,
  `${'['.repeat(30_000)}${']'.repeat(30_000)}`,
  '['.repeat(DEEP),
  `${'{"__proto__":'.repeat(DEEP)}{"${POLLUTED_PROPERTY}":1}${'}'.repeat(DEEP)}`,
  ...[-1, 0, 1, 1000].map((over) => `{"s":"${'x'.repeat(FUZZ_BODY_LIMIT - 8 + over)}"}`),
  `{"bio":"${'é'.repeat(FUZZ_BODY_LIMIT / 2)}"}`,
].map(utf8);

/** A JSON text that nests prototype keys to some depth around a property to pollute with. */
const pollutingJson = fc
  .tuple(fc.array(fc.constantFrom(...POLLUTION_KEYS, 'a', 'name'), { minLength: 1, maxLength: 30 }), fc.boolean())
  .map(([keys, asArray]) =>
    keys.reduceRight(
      (value, key) => `{"${key}":${asArray ? `[${value}]` : value}}`,
      `{"${POLLUTED_PROPERTY}":"yes","toString":1,"hasOwnProperty":null}`,
    ),
  );

/** The codings a body comes in, each as a client applies it. */
const CODERS: readonly ((body: Buffer) => Buffer)[] = [
  (body) => zlib.gzipSync(body),
  (body) => zlib.deflateSync(body),
  (body) => zlib.brotliCompressSync(body),
];

/**
 * Bodies in content codings, to go with any Content-Encoding: JSON in one or two codings, cut short
 * or not, and the bombs.
 */
const codedBody: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .tuple(fc.json({ maxDepth: 3 }), fc.array(fc.constantFrom(...CODERS), { minLength: 1, maxLength: 2 }), fc.nat())
    .map(([json, coders, cut]) => {
      const coded = coders.reduce<Buffer>((body, code) => code(body), utf8(json));
      return cut % 3 === 0 ? coded.subarray(0, cut % coded.length) : coded;
    }),
  fc.constantFrom(...CODED_BOMBS.map(([body]) => body)),
);

const body: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 6 },
  { arbitrary: fc.json({ maxDepth: 5 }).map(utf8), weight: 3 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => utf8(JSON.stringify({ value }))), weight: 1 },
  { arbitrary: pollutingJson.map(utf8), weight: 2 },
  { arbitrary: profileBody.map(utf8), weight: 2 },
  {
    arbitrary: fc
      .tuple(fc.json({ maxDepth: 3 }), fc.nat())
      .map(([json, cut]) => utf8(json.slice(0, json.length > 1 ? cut % json.length : 0))),
    weight: 1,
  },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(utf8), weight: 1 },
  {
    arbitrary: fc
      .constantFrom(
        '',
        ' ',
        'null',
        '[]',
        '"x"',
        '{"a":1,"a":2}',
        '{"s":"\\ud800"}',
        '\ufeff{"a":1}',
        '{"a":1}garbage',
        '{"a":01}',
        '{"a":NaN}',
        '{a:1}',
        "{'a':1}",
        '{"a":1e99999}',
        '{"a":"\u0000"}',
      )
      .map(utf8),
    weight: 1,
  },
  {
    arbitrary: fc.constantFrom(
      Buffer.from([0xff, 0xfe, 0x7b, 0x7d]),
      Buffer.from('{"a":"caf\xe9"}', 'latin1'),
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d]),
      Buffer.from('{"a":1}', 'utf16le'),
    ),
    weight: 1,
  },
  { arbitrary: fc.constantFrom(...BIG_BODIES), weight: 1 },
  { arbitrary: codedBody, weight: 2 },
);

const contentType = fc.oneof(
  { arbitrary: jsonType, weight: 6 },
  {
    arbitrary: fc.constantFrom(
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/json;charset="UTF-8"',
      'APPLICATION/JSON',
      'application/vnd.api+json',
      'application/json-patch+json',
      'text/plain',
      'text/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      'application/json; charset=',
      'application/',
      '',
      ';',
      'application/json, text/plain',
    ),
    weight: 2,
  },
  { arbitrary: fc.string({ maxLength: 20 }), weight: 1 },
);

const requestId = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
  fc.constantFrom('x'.repeat(129), '', ' ', 'a b', 'a/b', 'é', '<script>', 'id\ttab'),
);

/** Header values a client can send; `CURRENT_ETAG` becomes the profile's tag when sent. */
const headerEntry: fc.Arbitrary<[string, string]> = fc.oneof(
  {
    arbitrary: fc
      .constantFrom(
        'application/json',
        '*/*',
        'application/vnd.greeting.v1+json',
        'application/vnd.greeting.v2+json',
        'application/vnd.greeting.v2+json, application/vnd.greeting.v3+json',
        'application/vnd.greeting.v1+json;q=0, application/vnd.greeting.v2+json',
        'application/vnd.greeting.v+json',
        'application/vnd.greeting.v2+json;q=abc',
        'text/html',
        'application/xml;q=0',
        '',
        ',,,',
      )
      .map((value): [string, string] => ['accept', value]),
    weight: 3,
  },
  {
    arbitrary: fc
      .constantFrom(
        'gzip',
        'br',
        'deflate',
        'zstd',
        'gzip, deflate, br, zstd',
        '*',
        '*;q=0',
        'identity;q=0',
        'br;q=0, gzip;q=0.5',
        'gzip;q=2',
        'gzip;q=0.0001',
        'x-gzip',
        'compress',
        ',,,',
        '',
      )
      .map((value): [string, string] => ['accept-encoding', value]),
    weight: 2,
  },
  { arbitrary: contentType.map((value): [string, string] => ['content-type', value]), weight: 4 },
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom('if-match', 'if-none-match'),
        fc.oneof(
          fc.constantFrom(
            CURRENT_ETAG,
            '*',
            `W/${CURRENT_ETAG}`,
            '"1"',
            '""',
            '"',
            'W/',
            '*, "1"',
            `"1",${CURRENT_ETAG}`,
          ),
          fc.string({ maxLength: 20 }),
        ),
      )
      .map(([name, value]): [string, string] => [name, value]),
    weight: 3,
  },
  { arbitrary: requestId.map((value): [string, string] => ['x-request-id', value]), weight: 2 },
  {
    arbitrary: fc.constantFrom<[string, string]>(
      ['range', 'bytes=0-3'],
      ['range', 'bytes=999999999-'],
      ['range', 'bytes=5-1'],
      ['range', 'bytes=0-1,3-4'],
      ['range', 'garbage'],
      ['if-range', '"x"'],
      ['if-modified-since', 'Mon, 01 Jan 2001 00:00:00 GMT'],
      ['if-unmodified-since', 'Mon, 01 Jan 2001 00:00:00 GMT'],
      ['if-unmodified-since', 'not a date'],
    ),
    weight: 1,
  },
  {
    arbitrary: fc
      .constantFrom(
        'gzip',
        'identity',
        'IDENTITY',
        'br',
        'deflate',
        'zstd',
        'x-gzip',
        'deflate, gzip',
        'gzip, br',
        'gzip, identity',
        'gzip, gzip, gzip, gzip',
        'gzip, br, deflate',
        'zstd, gzip',
        'br, zstd',
        'gzip,,br',
        'gzip;q=1',
        'x-garbage',
        '',
      )
      .map((value): [string, string] => ['content-encoding', value]),
    weight: 1,
  },
  {
    arbitrary: fc
      .oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('unknown', '1.2.3.4, 5.6.7.8', 'not an ip', ''))
      .map((value): [string, string] => ['x-forwarded-for', value]),
    weight: 1,
  },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('https://app.example', 'null', ''), fc.constantFrom('GET', 'POST', 'DELETE', ''))
      .chain(([origin, requested]) =>
        fc.constantFrom<[string, string]>(['origin', origin], ['access-control-request-method', requested]),
      ),
    weight: 1,
  },
  {
    arbitrary: fc
      .tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/), fc.string({ maxLength: 30 }))
      .map(([name, value]): [string, string] => [`x-${name}`, value]),
    weight: 1,
  },
);

/**
 * Headers that only a raw socket sends as they are: names that are no tokens, control characters and
 * bytes above 0x7F. No CR or LF: those would end the header, and the rest would be another request.
 */
export const rawHeaders: fc.Arbitrary<[string, string][]> = fc.oneof(
  { arbitrary: fc.constant<[string, string][]>([]), weight: 6 },
  {
    arbitrary: fc.array(
      fc.tuple(
        fc.constantFrom('x-raw', 'accept', 'content-type', 'if-match', 'x-request-id', 'bad name', 'x:y', ''),
        fc
          .oneof(
            fc.string({ unit: 'binary', maxLength: 10 }),
            fc.constantFrom('\u0000', '\u0001', '\u007f', 'caf\u00e9'),
          )
          .map((value) => value.replace(/[\r\n]/g, '')),
      ),
      { minLength: 1, maxLength: 2 },
    ),
    weight: 1,
  },
);

/** Turns a header value into one that an in-process request (and a valid HTTP message) can carry. */
export function wireSafe(value: string): string {
  return value.replace(/[^\t\x20-\x7e]/g, '?');
}

/** A whole request: a route's or a random one, with random headers and, now and then, a random body. */
export const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    target,
    fc.array(headerEntry, { maxLength: 4 }),
    fc.oneof({ arbitrary: fc.constant<Buffer | null>(null), weight: 4 }, { arbitrary: body, weight: 1 }),
    fc.constantFrom('&', '&', '&', ';', '&&'),
  )
  .map(([t, headers, replacement, separator]) =>
    described({
      method: t.method,
      path: t.path,
      query: queryString(t.parameters, separator),
      headers: [...t.headers, ...headers].map(([name, value]): [string, string] => [name, wireSafe(value)]),
      body: replacement === null ? t.body : replacement,
    }),
  );

/** Text of a long string or body that fits in a report: its start and its length. */
export function abridged(text: string, length = 200): string {
  return text.length <= length ? text : `${text.slice(0, length)}… (${text.length} characters)`;
}

/** A request as fast-check reports a counterexample: readable, and short even for the large bodies. */
export function describeRequest(request: FuzzRequest): string {
  const body = request.body === undefined ? '' : ` body ${JSON.stringify(abridged(request.body.toString('latin1')))}`;
  return `${request.method} ${abridged(request.path + request.query)} headers ${JSON.stringify(request.headers)}${body}`;
}

function described(request: FuzzRequest): FuzzRequest {
  return Object.defineProperty(request, fc.toStringMethod, { value: () => describeRequest(request) });
}

/**
 * The headers that ask for faults (Envoy's and `x-fault-connection`), for a service run with
 * FAULT_HEADERS: statuses of every class and none, short delays (the longest ones would only slow
 * the run), fast paces, percentages, each kind of broken connection, and text where numbers belong.
 */
export const faultHeader: fc.Arbitrary<[string, string]> = fc.oneof(
  fc
    .oneof(
      fc.integer({ min: 200, max: 599 }).map(String),
      fc.constantFrom('0', '199', '600', '-503', '503.5', ' 503', '503abc', '', 'abc', '99999999999999999999'),
    )
    .map((value): [string, string] => ['x-envoy-fault-abort-request', value]),
  fc
    .oneof(fc.integer({ min: 0, max: 3 }).map(String), fc.constantFrom('-1', '1.5', 'x', '60001', ''))
    .map((value): [string, string] => ['x-envoy-fault-delay-request', value]),
  fc
    .oneof(fc.integer({ min: 4096, max: 1_000_000 }).map(String), fc.constantFrom('0', '-1', 'fast', ''))
    .map((value): [string, string] => ['x-envoy-fault-throughput-response', value]),
  fc
    .tuple(
      fc.constantFrom(
        'x-envoy-fault-abort-request-percentage',
        'x-envoy-fault-delay-request-percentage',
        'x-envoy-fault-throughput-response-percentage',
      ),
      fc.oneof(fc.integer({ min: 0, max: 150 }).map(String), fc.constantFrom('-5', '50.5', 'half', '')),
    )
    .map(([name, value]): [string, string] => [name, value]),
  fc
    .constantFrom('reset', 'empty', 'truncate', 'malformed', 'RESET', 'other', '')
    .map((value): [string, string] => ['x-fault-connection', value]),
);

/** A fuzz request with fault headers of its own. */
export const fuzzRequestWithFaults: fc.Arbitrary<FuzzRequest> = fc
  .tuple(fuzzRequest, fc.array(faultHeader, { minLength: 1, maxLength: 3 }))
  .map(([request, faults]) => described({ ...request, headers: [...request.headers, ...faults] }));

/**
 * Requests for the readiness switch of a service run with ADMIN_TOKEN_FILE, any method and path
 * spelling, with credentials that are never its token: missing, of another scheme, empty, of odd
 * characters or very long.
 */
export const adminRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.constantFrom('POST', 'POST', 'GET', 'PUT', 'DELETE', 'OPTIONS', 'HEAD'),
    fc.constantFrom('/readyz/disable', '/readyz/enable', '/readyz/disable/', '/READYZ/disable', '/readyz/%64isable'),
    fc.option(
      fc.oneof(
        fc.constantFrom(
          'Bearer',
          'Bearer ',
          'bearer x',
          'Basic dXNlcjpwYXNz',
          'Bearer a b',
          `Bearer ${'A'.repeat(10_000)}`,
        ),
        fc.string({ maxLength: 40 }).map((token) => `Bearer ${token}`),
        anyText,
      ),
      { nil: null },
    ),
    fc.option(headerEntry, { nil: null }),
  )
  .map(([method, path, authorization, extra]) =>
    described({
      method,
      path,
      query: '',
      headers: [
        ...(authorization === null ? [] : [['authorization', authorization] as [string, string]]),
        ...(extra === null ? [] : [extra]),
      ].map(([name, value]): [string, string] => [name, wireSafe(value)]),
      body: undefined,
    }),
  );
