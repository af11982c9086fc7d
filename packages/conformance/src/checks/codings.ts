import zlib from 'node:zlib';
import {
  expectEnvelope,
  expectEqual,
  expectJson,
  expectStatus,
  expectTrue,
  fail,
  header,
  headerList,
  show,
  skip,
} from '../assert.js';
import type { Check, Context } from '../context.js';
import { DECODED_CODINGS, decodedBody, type Response } from '../http.js';

const CLAUSE = 'contract: Streams and content codings (RFC 9110, 8.4 and 12.5.3)';
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** The codings the contract names that the kit can decode, in the order a tie goes. */
const CODINGS = ['zstd', 'br', 'gzip', 'deflate'].filter((coding) => DECODED_CODINGS.includes(coding));

/** A coding the service names must be the one asked for, and decode to the plain answer's JSON. */
function expectCoded(res: Response, coding: string, plain: unknown): void {
  expectStatus(res, 200);
  expectEqual(header(res, 'content-encoding'), coding, `${res.request.path} in ${coding}: Content-Encoding`);
  const decoded = decodedBody(res.body, coding);
  if (decoded === null)
    fail(`${res.request.path}: valid ${coding} data`, `${res.body.length} bytes that do not decode`);
  let body: unknown;
  try {
    body = JSON.parse(decoded.toString('utf8'));
  } catch {
    fail(`${res.request.path} decoded from ${coding}: JSON`, show(decoded.toString('utf8')));
  }
  expectEqual(body, plain, `${res.request.path} decoded from ${coding}`);
  expectVaries(res);
}

function expectVaries(res: Response): void {
  const vary = headerList(res, 'vary').map((name) => name.toLowerCase());
  expectTrue(vary.includes('accept-encoding'), `${res.request.path}: Vary naming Accept-Encoding`, () =>
    show(header(res, 'vary') ?? 'none'),
  );
}

/**
 * The OpenAPI document (the largest answer), plain and in each coding. When every one came plain, the
 * deployment does not compress (COMPRESSION=false), or something in front of it takes Accept-Encoding
 * away or decodes the answers: that is said, as a skip, since the service itself is not to blame.
 */
async function codedAnswers(ctx: Context): Promise<{ plain: unknown; coded: Map<string, Response> }> {
  const plainRes = await ctx.get('/openapi.json', { 'Accept-Encoding': 'identity' });
  expectStatus(plainRes, 200);
  const plain = expectJson(plainRes);
  const coded = new Map<string, Response>();
  for (const coding of CODINGS) coded.set(coding, await ctx.get('/openapi.json', { 'Accept-Encoding': coding }));
  if ([...coded.values()].every((res) => header(res, 'content-encoding') === undefined)) {
    skip(
      'every answer came plain, whatever coding was asked for: the deployment does not compress (COMPRESSION=false), or a proxy in front of it strips Accept-Encoding or decodes the answers',
    );
  }
  return { plain, coded };
}

/** Bodies in each coding the client applies, as `Content-Encoding` lists them. */
const ENCODERS: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: (body) => zlib.gzipSync(body),
  deflate: (body) => zlib.deflateSync(body),
  br: (body) => zlib.brotliCompressSync(body),
};

export const codingChecks: Check[] = [
  {
    id: 'codings.answers',
    group: 'codings',
    clause: CLAUSE,
    title: 'a large answer comes in each coding asked for, decoding to the plain answer, with Vary: Accept-Encoding',
    async run(ctx) {
      const { plain, coded } = await codedAnswers(ctx);
      for (const [coding, res] of coded) expectCoded(res, coding, plain);
    },
  },
  {
    id: 'codings.preference',
    group: 'codings',
    clause: CLAUSE,
    title: 'the coding the client prefers: q-values, q=0 refused, identity, ties in the order zstd, br, gzip, deflate',
    async run(ctx) {
      const { plain } = await codedAnswers(ctx);
      const cases: [string, string | undefined][] = [
        ['gzip;q=0.5, deflate', 'deflate'],
        ['br;q=0, gzip', 'gzip'],
        ['deflate, gzip', 'gzip'],
        ['gzip;q=0', undefined],
        ['identity', undefined],
        ['gzip;q=0.5, identity', undefined],
      ];
      for (const [accept, coding] of cases) {
        const res = await ctx.get('/openapi.json', { 'Accept-Encoding': accept });
        if (coding === undefined) {
          expectEqual(header(res, 'content-encoding'), undefined, `Accept-Encoding: ${accept}: Content-Encoding`);
          expectEqual(expectJson(res), plain, `Accept-Encoding: ${accept}: the document`);
        } else expectCoded(res, coding, plain);
      }
    },
  },
  {
    id: 'codings.head',
    group: 'codings',
    clause: `${CLAUSE}; contract: Everywhere (HEAD)`,
    title: 'HEAD says what GET would: the same Content-Encoding and Content-Length, no body',
    async run(ctx) {
      const { coded } = await codedAnswers(ctx);
      for (const [coding, get] of coded) {
        const head = await ctx.send({ method: 'HEAD', path: '/openapi.json', headers: { 'Accept-Encoding': coding } });
        expectStatus(head, 200);
        for (const name of ['content-encoding', 'content-length']) {
          expectEqual(header(head, name), header(get, name), `HEAD in ${coding}: ${name}`);
        }
        expectEqual(head.body.length, 0, `HEAD in ${coding}: body bytes`);
      }
    },
  },
  {
    id: 'codings.small-plain',
    group: 'codings',
    clause: CLAUSE,
    title: 'an answer under COMPRESSION_MIN_BYTES goes plain, still with Vary: Accept-Encoding',
    async run(ctx) {
      await codedAnswers(ctx);
      const res = await ctx.get('/api/hello', { 'Accept-Encoding': CODINGS.join(', ') });
      expectStatus(res, 200);
      expectEqual(header(res, 'content-encoding'), undefined, `GET ${res.request.path}: Content-Encoding`);
      expectVaries(res);
    },
  },
  {
    id: 'codings.request-bodies',
    group: 'codings',
    clause: CLAUSE,
    title: 'a body in gzip, deflate, br or a list of them is decoded before parsing, every digit and key kept',
    async run(ctx) {
      const text = '{"n":12345678901234567890,"b":1,"a":"W\\u00f6rld 🌍"}';
      for (const list of ['gzip', 'deflate', 'br', 'gzip, br']) {
        const body = list
          .split(', ')
          .reduce<Buffer>((coded, coding) => (ENCODERS[coding] as (body: Buffer) => Buffer)(coded), Buffer.from(text));
        const res = await ctx.send({
          method: 'POST',
          path: '/api/echo',
          headers: { ...JSON_HEADERS, 'Content-Encoding': list },
          body,
        });
        expectStatus(res, 200);
        const echoed = res.text.slice(0, `{"received":${text}`.length);
        expectEqual(echoed, `{"received":${text}`, `a body in ${list}, echoed`);
      }
    },
  },
  {
    id: 'codings.request-refused',
    group: 'codings',
    clause: `${CLAUSE}; contract: Errors`,
    title: 'an unknown coding is a 415 whose Accept-Encoding lists those decoded; a corrupt one a 400 naming body',
    async run(ctx) {
      const unknown = await ctx.send({
        method: 'POST',
        path: '/api/echo',
        headers: { ...JSON_HEADERS, 'Content-Encoding': 'compress' },
        body: '{}',
      });
      expectEnvelope(unknown, 415, 'UNSUPPORTED_MEDIA_TYPE');
      const listed = headerList(unknown, 'accept-encoding').map((coding) => coding.toLowerCase());
      expectTrue(
        ['br', 'gzip', 'deflate'].every((coding) => listed.includes(coding)),
        'Accept-Encoding listing br, gzip and deflate',
        () => show(header(unknown, 'accept-encoding') ?? 'none'),
      );
      const corrupt = await ctx.send({
        method: 'POST',
        path: '/api/echo',
        headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' },
        body: '{"a":1}',
      });
      const { details } = expectEnvelope(corrupt, 400, 'VALIDATION_ERROR');
      expectEqual(
        details.map((detail) => detail.field),
        ['body'],
        'the fields a corrupt gzip body is reported under',
      );
    },
  },
];
