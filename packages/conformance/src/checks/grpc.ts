import { Decimal } from 'decimal.js';
import {
  expectEqual,
  expectKeys,
  expectLocalNow,
  expectObject,
  fail,
  header,
  isObject,
  type JsonObject,
  show,
  skip,
} from '../assert.js';
import type { Check, Context } from '../context.js';
import {
  connectCall,
  connectFailure,
  connectStream,
  connectValue,
  expectRpcError,
  expectViolation,
  grpcCall,
} from '../grpc.js';
import { isExactObject, parseExact } from '../json.js';
import { encodeMessage, type Message } from '../protobuf.js';
import { expectWhenDue } from './events.js';

const CLAUSE = 'contract: gRPC';
const SAY_HELLO = '/helloworld.Greeter/SayHello';
const SERVICE = '/greeting.v1.GreetingService';
const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
/** The services reflection must list: those of the API, and health. */
const LISTED = ['helloworld.Greeter', 'greeting.v1.GreetingService', 'grpc.health.v1.Health'];

/** The checks that speak gRPC itself need HTTP/2, which the run speaks only with --http2. */
function needsHttp2(
  ctx: Context,
  why = 'gRPC itself runs over HTTP/2 only (the Connect checks run over HTTP/1.1)',
): void {
  if (!ctx.options.http2) skip(`needs --http2: ${why}`);
}

const DECIMAL = /^\d+(?:\.\d+)?$/;

/** A field of a message that must be a decimal as text: its exact value. */
function decimalText(value: unknown, what: string): Decimal {
  if (typeof value !== 'string' || !DECIMAL.test(value)) fail(`${what}: a decimal as a string`, show(value));
  return new Decimal(value);
}

/** The REST profile: its fields that are not null, and its ETag. */
async function restProfile(ctx: Context): Promise<{ fields: JsonObject; etag: string | undefined }> {
  const res = await ctx.get('/api/profile');
  const body = expectObject(res, 200);
  return {
    fields: Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null)),
    etag: header(res, 'etag'),
  };
}

/** The profile of a GetProfile or UpdateProfile answer. */
function profileOf(value: JsonObject, what: string): { fields: JsonObject; etag: string } {
  const profile = value.profile;
  if (!isObject(profile) || typeof profile.etag !== 'string' || profile.etag === '') {
    fail(`${what}: {profile: {..., etag}}`, show(value));
  }
  const { etag, ...fields } = profile as JsonObject & { etag: string };
  return { fields, etag };
}

/** Reflection's answer to one request over gRPC: the one ServerReflectionResponse. */
async function reflect(ctx: Context, version: 'v1' | 'v1alpha', request: Buffer): Promise<Message> {
  const path = `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`;
  const { res, messages, error } = await grpcCall(ctx, path, request);
  if (error !== null) fail(`POST ${res.request.path}: OK`, `${error.code} ${show(error.message)}`);
  const [answer] = messages;
  if (messages.length !== 1 || answer === undefined)
    fail(`POST ${res.request.path}: one answer to one request`, `${messages.length}`);
  const refused = answer.message(7);
  if (refused !== null) fail(`POST ${res.request.path}: an answer`, `error_response ${show(refused.text(2))}`);
  return answer;
}

export const grpcChecks: Check[] = [
  {
    id: 'grpc.say-hello',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'helloworld.Greeter/SayHello answers {message: "Hello, <name>!"} (Connect protocol, JSON)',
    async run(ctx) {
      const { value } = await connectValue(ctx, SAY_HELLO, { name: 'Ada 🚀' });
      expectEqual(expectKeys(value, ['message'], 'HelloReply'), { message: 'Hello, Ada 🚀!' }, 'HelloReply');
    },
  },
  {
    id: 'grpc.hello',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'Hello answers "Hello, World!" and the local time now; Greet "Hello, <name>!"',
    async run(ctx) {
      const { res, value } = await connectValue(ctx, `${SERVICE}/Hello`, {});
      expectEqual(value.message, 'Hello, World!', 'HelloResponse.message');
      expectLocalNow(value.timestamp, res, 'HelloResponse.timestamp');
      const greeted = await connectValue(ctx, `${SERVICE}/Greet`, { name: 'Zoë 東京' });
      expectEqual(greeted.value, { greeting: 'Hello, Zoë 東京!' }, 'GreetResponse');
    },
  },
  {
    id: 'grpc.search',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'Search answers keyword, page (1 when absent) and results; a blank keyword is INVALID_ARGUMENT naming it',
    async run(ctx) {
      const first = await connectValue(ctx, `${SERVICE}/Search`, { keyword: 'books' });
      expectEqual(
        first.value,
        { keyword: 'books', page: 1, results: "Search results for 'books' (page 1)" },
        'SearchResponse',
      );
      const third = await connectValue(ctx, `${SERVICE}/Search`, { keyword: 'books', page: 3 });
      expectEqual(third.value.page, 3, 'SearchResponse.page');
      const blank = await connectFailure(ctx, `${SERVICE}/Search`, { keyword: '  ' });
      expectViolation(blank, expectRpcError(blank, 'invalid_argument', 'VALIDATION_ERROR'), 'keyword');
    },
  },
  {
    id: 'grpc.echo',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'Echo answers the message unchanged, echo true and the local time now',
    async run(ctx) {
      const message = { name: 'Ada', tags: ['x', 'ü'], n: 1.5, nested: { ok: true, none: null } };
      const { res, value } = await connectValue(ctx, `${SERVICE}/Echo`, { message });
      expectEqual(value.received, message, 'EchoResponse.received');
      expectEqual(value.echo, true, 'EchoResponse.echo');
      expectLocalNow(value.timestamp, res, 'EchoResponse.timestamp');
    },
  },
  {
    id: 'grpc.exchange',
    group: 'grpc',
    clause: `${CLAUSE}; contract: Exchange`,
    needs: 'grpc',
    title:
      'Exchange answers the REST conversion with every decimal as a string; an unknown currency is INVALID_ARGUMENT',
    async run(ctx) {
      for (const [from, to, amount] of [
        ['usd', 'jpy', '123456789012.5'],
        ['KWD', 'bhd', '0.00000001'],
        ['eur', 'gbp', '1000000000000'],
      ] as const) {
        const { value } = await connectValue(ctx, `${SERVICE}/Exchange`, { from, to, amount });
        const rest = await ctx.get(`/api/exchange?from=${from}&to=${to}&amount=${amount}`);
        expectObject(rest, 200);
        const exact = parseExact(rest.text);
        const what = `Exchange ${from} ${to} ${amount}`;
        expectEqual([value.from, value.to], [from.toUpperCase(), to.toUpperCase()], `${what}: from and to`);
        for (const field of ['amount', 'rate', 'result']) {
          const sent = decimalText(value[field], `${what}: ${field}`);
          const wanted = isExactObject(exact) ? exact.values.get(field) : undefined;
          if (!Decimal.isDecimal(wanted) || !sent.eq(wanted as Decimal)) {
            fail(`${what}: ${field} that of GET ${rest.request.path}, ${String(wanted)}`, show(value[field]));
          }
        }
      }
      const unknown = await connectFailure(ctx, `${SERVICE}/Exchange`, { from: 'usd', to: 'QQQ', amount: '1' });
      expectRpcError(unknown, 'invalid_argument', 'UNSUPPORTED_CURRENCY');
    },
  },
  {
    id: 'grpc.list-currencies',
    group: 'grpc',
    clause: `${CLAUSE} (AIP-158)`,
    needs: 'grpc',
    title:
      'ListCurrencies pages through the whole table by page_size and page_token (20 a page when 0); a forged token is INVALID_ARGUMENT',
    async run(ctx) {
      const table = await ctx.table();
      const listed: JsonObject[] = [];
      let token = '';
      for (let page = 0; page <= table.length; page += 1) {
        const { value } = await connectValue(ctx, `${SERVICE}/ListCurrencies`, { pageSize: 7, pageToken: token });
        const currencies = value.currencies ?? [];
        if (!Array.isArray(currencies) || currencies.length > 7 || !currencies.every(isObject))
          fail('a page of at most 7 currencies', show(currencies));
        listed.push(...currencies);
        token = typeof value.nextPageToken === 'string' ? value.nextPageToken : '';
        if (token === '') break;
      }
      expectEqual(
        listed.map((currency) => currency.code),
        table.map((currency) => currency.code),
        'the codes listed, page by page',
      );
      for (const [i, currency] of table.entries()) {
        const item = listed[i] as JsonObject;
        expectEqual(
          [item.name, item.minorUnits ?? 0],
          [currency.name, currency.minor_units],
          `${currency.code}: name and minorUnits`,
        );
        if (!decimalText(item.rate, `${currency.code}: rate`).eq(currency.rate))
          fail(`${currency.code}: rate ${currency.rate}`, show(item.rate));
      }
      const first = await connectValue(ctx, `${SERVICE}/ListCurrencies`, {});
      expectEqual(
        (first.value.currencies as unknown[] | undefined)?.length,
        Math.min(20, table.length),
        'currencies on a page of page_size 0',
      );
      const forged = await connectFailure(ctx, `${SERVICE}/ListCurrencies`, { pageToken: 'x.y' });
      expectViolation(forged, expectRpcError(forged, 'invalid_argument', 'VALIDATION_ERROR'), 'page_token');
    },
  },
  {
    id: 'grpc.get-currency',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'GetCurrency answers the currency of a code in any case; one not in the table is NOT_FOUND',
    async run(ctx) {
      const table = await ctx.table();
      const [currency] = table;
      if (currency === undefined) fail('a currency in the table', 'none');
      const { value } = await connectValue(ctx, `${SERVICE}/GetCurrency`, { code: currency.code.toLowerCase() });
      const got = isObject(value.currency) ? value.currency : {};
      expectEqual(
        [got.code, got.name, got.minorUnits ?? 0],
        [currency.code, currency.name, currency.minor_units],
        'GetCurrencyResponse.currency',
      );
      if (!decimalText(got.rate, 'currency.rate').eq(currency.rate))
        fail(`currency.rate ${currency.rate}`, show(got.rate));
      const absent = ['QQQ', 'QQX', 'QXQ'].find((code) => !table.some((row) => row.code === code)) ?? 'QQQ';
      const missing = await connectFailure(ctx, `${SERVICE}/GetCurrency`, { code: absent });
      expectRpcError(missing, 'not_found', 'NOT_FOUND');
    },
  },
  {
    id: 'grpc.profile',
    group: 'grpc',
    clause: `${CLAUSE} (AIP-154)`,
    needs: 'grpc',
    title:
      'GetProfile answers the REST profile with its ETag as etag; UpdateProfile with a stale etag is ABORTED and changes nothing',
    async run(ctx) {
      const rest = await restProfile(ctx);
      const got = profileOf((await connectValue(ctx, `${SERVICE}/GetProfile`, {})).value, 'GetProfile');
      expectEqual(got.fields, rest.fields, 'GetProfile: the fields the REST profile has');
      expectEqual(got.etag, rest.etag, "GetProfile: etag, the REST profile's ETag");
      const stale = await connectFailure(ctx, `${SERVICE}/UpdateProfile`, {
        profile: { name: 'Conformance', etag: '"conformance-stale"' },
      });
      expectRpcError(stale, 'aborted', 'PRECONDITION_FAILED');
      const after = profileOf((await connectValue(ctx, `${SERVICE}/GetProfile`, {})).value, 'GetProfile');
      expectEqual(after.etag, got.etag, 'the etag after the stale update');
    },
  },
  {
    id: 'grpc.update-profile',
    group: 'grpc',
    clause: `${CLAUSE} (AIP-154, AIP-134)`,
    needs: 'grpc',
    title:
      'UpdateProfile changes the fields of its update_mask under a current etag, answering a new one; the old one is then ABORTED (the profile is put back)',
    async run(ctx) {
      if (!ctx.options.write) skip('needs --write');
      const found = profileOf((await connectValue(ctx, `${SERVICE}/GetProfile`, {})).value, 'GetProfile');
      const changed = profileOf(
        (
          await connectValue(ctx, `${SERVICE}/UpdateProfile`, {
            profile: { name: 'Conformance gRPC', etag: found.etag },
            updateMask: 'name',
          })
        ).value,
        'UpdateProfile',
      );
      try {
        expectEqual(changed.fields, { ...found.fields, name: 'Conformance gRPC' }, 'UpdateProfile: the profile');
        if (changed.etag === found.etag) fail('UpdateProfile: a new etag', show(changed.etag));
        const stale = await connectFailure(ctx, `${SERVICE}/UpdateProfile`, {
          profile: { bio: 'x', etag: found.etag },
        });
        expectRpcError(stale, 'aborted', 'PRECONDITION_FAILED');
      } finally {
        const restored = await connectCall(ctx, `${SERVICE}/UpdateProfile`, {
          profile: { ...found.fields, etag: changed.etag },
          updateMask: 'name,email,bio',
        });
        if (restored.value === null) fail('the profile put back', `${restored.res.status} ${show(restored.res.text)}`);
      }
    },
  },
  {
    id: 'grpc.stream-greetings',
    group: 'grpc',
    clause: `${CLAUSE}; contract: Streams and content codings`,
    needs: 'grpc',
    title: 'StreamGreetings sends count greetings {id, greeting, timestamp}, each when due (Connect server stream)',
    async run(ctx) {
      const interval = 400;
      const { res, messages, error } = await connectStream(ctx, `${SERVICE}/StreamGreetings`, {
        count: 4,
        intervalMs: interval,
        name: 'Ada',
      });
      if (error !== null) fail('the stream to end OK', `${error.code} ${show(error.message)}`);
      expectEqual(
        messages.map(({ value }) => value.id),
        [1, 2, 3, 4],
        "the greetings' ids",
      );
      for (const { value } of messages) {
        expectEqual(value.greeting, 'Hello, Ada!', `greeting ${value.id}`);
        expectLocalNow(value.timestamp, res, `greeting ${value.id}: timestamp`);
      }
      expectWhenDue(
        messages.map(({ at }) => at),
        interval,
        'greeting',
      );
    },
  },
  {
    id: 'grpc.stream-resumed',
    group: 'grpc',
    clause: `${CLAUSE}; contract: Streams and content codings`,
    needs: 'grpc',
    title:
      'StreamGreetings resumes after after_id (none left: it ends OK at once); a count over 1000 ends it INVALID_ARGUMENT naming count',
    async run(ctx) {
      const path = `${SERVICE}/StreamGreetings`;
      const resumed = await connectStream(ctx, path, { count: 4, intervalMs: 0, afterId: 2 });
      if (resumed.error !== null) fail('the stream to end OK', `${resumed.error.code} ${show(resumed.error.message)}`);
      expectEqual(
        resumed.messages.map(({ value }) => value.id),
        [3, 4],
        'the ids after after_id 2',
      );
      const done = await connectStream(ctx, path, { count: 4, intervalMs: 0, afterId: 4 });
      expectEqual(
        [done.messages.length, done.error?.code ?? 'ok'],
        [0, 'ok'],
        'messages and status after after_id 4 of 4',
      );
      const invalid = await connectStream(ctx, path, { count: 1001 });
      if (invalid.error === null)
        fail('the stream to end INVALID_ARGUMENT', `${invalid.messages.length} messages, then OK`);
      expectViolation(invalid.error, expectRpcError(invalid.error, 'invalid_argument', 'VALIDATION_ERROR'), 'count');
    },
  },
  {
    id: 'grpc.errors',
    group: 'grpc',
    clause: `${CLAUSE}; AIP-193`,
    needs: 'grpc',
    title:
      'an empty name is INVALID_ARGUMENT with ErrorInfo, BadRequest naming it and RequestInfo, and x-request-id as sent',
    async run(ctx) {
      const id = 'conformance-grpc-invalid';
      const error = await connectFailure(ctx, `${SERVICE}/Greet`, { name: '' }, { 'X-Request-Id': id });
      expectEqual(header(error.res, 'x-request-id'), id, 'x-request-id of the answer');
      expectViolation(error, expectRpcError(error, 'invalid_argument', 'VALIDATION_ERROR'), 'name');
    },
  },
  {
    id: 'grpc.unimplemented',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title: 'a method GreetingService does not have is UNIMPLEMENTED (501 in the Connect protocol)',
    async run(ctx) {
      const error = await connectFailure(ctx, `${SERVICE}/NoSuchMethod`, {});
      expectEqual([error.code, error.res.status], ['unimplemented', 501], 'the code and the HTTP status');
    },
  },
  {
    id: 'grpc.health',
    group: 'grpc',
    clause: CLAUSE,
    needs: 'grpc',
    title:
      'grpc.health.v1.Health/Check is SERVING for "" and greeting.v1.GreetingService, NOT_FOUND for a service it has not',
    async run(ctx) {
      for (const service of ['', 'greeting.v1.GreetingService']) {
        const { value } = await connectValue(ctx, HEALTH_CHECK, { service });
        expectEqual(value, { status: 'SERVING' }, `Check ${show(service)}`);
      }
      const unknown = await connectFailure(ctx, HEALTH_CHECK, { service: 'no.such.Service' });
      expectEqual(unknown.code, 'not_found', 'Check "no.such.Service": the code');
    },
  },
  {
    id: 'grpc.http2-say-hello',
    group: 'grpc',
    clause: `${CLAUSE}; gRPC over HTTP/2`,
    needs: 'grpc',
    title:
      'over gRPC itself (application/grpc, protobuf, TE: trailers), SayHello answers one HelloReply and grpc-status 0 in the trailers',
    async run(ctx) {
      needsHttp2(ctx);
      const { res, messages, error } = await grpcCall(ctx, SAY_HELLO, encodeMessage([[1, 'Ada 🚀']]));
      if (error !== null) fail(`POST ${res.request.path}: grpc-status 0`, `${error.code} ${show(error.message)}`);
      expectEqual(
        messages.map((message) => message.text(1)),
        ['Hello, Ada 🚀!'],
        'HelloReply.message',
      );
      if (header(res, 'x-request-id') === undefined) fail('x-request-id in the response metadata', 'none');
    },
  },
  {
    id: 'grpc.http2-status-details',
    group: 'grpc',
    clause: `${CLAUSE}; AIP-193; gRPC over HTTP/2`,
    needs: 'grpc',
    title:
      'over gRPC itself, an empty name is grpc-status 3 with grpc-status-details-bin: ErrorInfo, BadRequest and RequestInfo',
    async run(ctx) {
      needsHttp2(ctx);
      const id = 'conformance-grpc-details';
      const { res, error } = await grpcCall(ctx, `${SERVICE}/Greet`, encodeMessage([]), { 'X-Request-Id': id });
      if (error === null) fail(`POST ${res.request.path}: INVALID_ARGUMENT`, 'OK');
      expectEqual(header(res, 'x-request-id'), id, 'x-request-id of the answer');
      expectViolation(error, expectRpcError(error, 'invalid_argument', 'VALIDATION_ERROR'), 'name');
    },
  },
  {
    id: 'grpc.http2-unimplemented',
    group: 'grpc',
    clause: `${CLAUSE}; gRPC over HTTP/2`,
    needs: 'grpc',
    title: 'over gRPC itself, a method GreetingService does not have is grpc-status 12 UNIMPLEMENTED',
    async run(ctx) {
      needsHttp2(ctx);
      const { res, error } = await grpcCall(ctx, `${SERVICE}/NoSuchMethod`, encodeMessage([]));
      expectEqual(error?.code ?? 'ok', 'unimplemented', `POST ${res.request.path}: the status`);
    },
  },
  {
    id: 'grpc.reflection',
    group: 'grpc',
    clause: `${CLAUSE}; gRPC server reflection`,
    needs: 'grpc',
    title: `server reflection v1 and v1alpha list ${LISTED.join(', ')}, and give the file that defines GreetingService`,
    async run(ctx) {
      needsHttp2(ctx, 'reflection is a bidirectional stream, which the Connect protocol carries over HTTP/2 only');
      for (const version of ['v1', 'v1alpha'] as const) {
        const listed = await reflect(ctx, version, encodeMessage([[7, '*']]));
        const names = (listed.message(6)?.messages(1) ?? []).map((service) => service.text(1));
        const missing = LISTED.filter((name) => !names.includes(name));
        if (missing.length > 0) fail(`${version} ListServices: ${LISTED.join(', ')}`, show(names));
        const defining = await reflect(ctx, version, encodeMessage([[4, 'greeting.v1.GreetingService']]));
        const files = (defining.message(4)?.messages(1) ?? []).filter((file) =>
          file.messages(6).some((service) => file.text(2) === 'greeting.v1' && service.text(1) === 'GreetingService'),
        );
        if (files.length === 0)
          fail(`${version} FileContainingSymbol: a file of package greeting.v1 with service GreetingService`, 'none');
      }
    },
  },
];
