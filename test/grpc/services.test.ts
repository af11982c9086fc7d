import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { create, type DescMessage, fromBinary, type MessageShape, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Transport } from '@connectrpc/connect';
import {
  compressionGzip,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RequestInfoSchema,
  RetryInfoSchema,
} from '../../src/grpc/generated/google/rpc/error_details_pb.js';
import {
  GreetingService,
  GreetRequestSchema,
  StreamGreetingsRequestSchema,
  StreamGreetingsResponseSchema,
} from '../../src/grpc/generated/greeting/v1/greeting_pb.js';
import { Health, HealthCheckResponse_ServingStatus } from '../../src/grpc/generated/grpc/health/v1/health_pb.js';
import { Greeter, HelloReplySchema, HelloRequestSchema } from '../../src/grpc/generated/helloworld/helloworld_pb.js';
import { LOCAL_TIMESTAMP, listening, listeningInSuite, samples } from '../helpers.js';
import { expectedDetails, statusOf } from './foreign-clients.js';

type Protocol = 'grpc' | 'grpc-web' | 'connect';

function transport(origin: string, protocol: Protocol, httpVersion: '1.1' | '2' = '2'): Transport {
  const baseUrl = origin;
  if (protocol === 'grpc') return createGrpcTransport({ baseUrl });
  if (protocol === 'grpc-web') return createGrpcWebTransport({ baseUrl, httpVersion });
  return createConnectTransport({ baseUrl, httpVersion });
}

/** The error a call rejects with. */
async function callError(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error);
  }
  assert.fail('the call succeeded');
}

const PROTOCOLS: [Protocol, '1.1' | '2'][] = [
  ['grpc', '2'],
  ['grpc-web', '2'],
  ['connect', '2'],
  ['grpc-web', '1.1'],
  ['connect', '1.1'],
];

describe('gRPC services', () => {
  const serve = listeningInSuite();

  for (const [protocol, version] of PROTOCOLS) {
    describe(`${protocol} over HTTP/${version}`, () => {
      const clients = async (overrides = {}) => {
        const server = await serve({ http2: version === '2', ...overrides });
        const through = transport(server.origin, protocol, version);
        return {
          server,
          greeter: createClient(Greeter, through),
          greeting: createClient(GreetingService, through),
          health: createClient(Health, through),
        };
      };

      test("a message over BODY_LIMIT, in a unary call and after a stream's first: RESOURCE_EXHAUSTED with the 413's envelope", async () => {
        const { greeting } = await clients({ bodyLimit: 200 });
        const assertTooLarge = (error: ConnectError, requestId: string) => {
          assert.equal(error.code, Code.ResourceExhausted);
          assert.equal(error.rawMessage, 'The request body is larger than the limit of 200 bytes.');
          assert.deepEqual(
            error.findDetails(ErrorInfoSchema).map(({ reason, domain }) => ({ reason, domain })),
            [{ reason: 'PAYLOAD_TOO_LARGE', domain: 'greeting-service' }],
          );
          assert.deepEqual(error.findDetails(BadRequestSchema), []);
          assert.equal(error.findDetails(RequestInfoSchema)[0]?.requestId, requestId);
        };
        assert.equal((await greeting.greet({ name: 'x'.repeat(190) })).greeting, `Hello, ${'x'.repeat(190)}!`);
        const big = { name: 'x'.repeat(300) };
        assertTooLarge(await callError(greeting.greet(big, { headers: { 'x-request-id': 'big-1' } })), 'big-1');
        // A stream from the client needs HTTP/2 but for gRPC-Web and Connect over HTTP/1.1.
        if (version === '1.1') return;
        async function* messages() {
          yield { message: { case: 'text' as const, value: 'a' } };
          yield { message: { case: 'text' as const, value: 'x'.repeat(300) } };
        }
        const echoed: unknown[] = [];
        const error = await callError(
          (async () => {
            for await (const echo of greeting.echoStream(messages(), { headers: { 'x-request-id': 'big-2' } })) {
              echoed.push(echo.message.value);
            }
          })(),
        );
        assert.deepEqual(echoed, ['a']);
        assertTooLarge(error, 'big-2');
      });

      test('SayHello answers as the gRPC examples define it', async () => {
        const { greeter } = await clients();
        assert.equal((await greeter.sayHello({ name: 'Ada 🚀' })).message, 'Hello, Ada 🚀!');
      });

      test('every unary method of GreetingService answers as its REST operation', async () => {
        const { greeting } = await clients();
        const hello = await greeting.hello({});
        assert.equal(hello.message, 'Hello, World!');
        assert.match(hello.timestamp, LOCAL_TIMESTAMP);
        assert.equal((await greeting.greet({ name: 'Zoë' })).greeting, 'Hello, Zoë!');
        const search = await greeting.search({ keyword: 'books' });
        assert.deepEqual(
          [search.keyword, search.page, search.results],
          ['books', 1, "Search results for 'books' (page 1)"],
        );
        const exchanged = await greeting.exchange({ from: 'usd', to: 'jpy', amount: '123456789012.5' });
        assert.equal(exchanged.from, 'USD');
        assert.equal(exchanged.to, 'JPY');
        assert.equal(exchanged.amount, '123456789012.5');
        assert.match(exchanged.result, /^\d+$/);
        const echoed = await greeting.echo({ message: { name: 'Ada', tags: ['x'], n: 1.5 } });
        assert.deepEqual(echoed.received, { name: 'Ada', tags: ['x'], n: 1.5 });
        assert.equal(echoed.echo, true);
        const currency = await greeting.getCurrency({ code: 'eur' });
        assert.deepEqual(
          { code: currency.currency?.code, minorUnits: currency.currency?.minorUnits, rate: currency.currency?.rate },
          { code: 'EUR', minorUnits: 2, rate: '0.92' },
        );
      });

      test('ListCurrencies pages by page_size and page_token (AIP-158) through the whole table', async () => {
        const { greeting } = await clients();
        const codes: string[] = [];
        let token = '';
        do {
          const page = await greeting.listCurrencies({ pageSize: 7, pageToken: token });
          assert.ok(page.currencies.length <= 7);
          codes.push(...page.currencies.map((currency) => currency.code));
          token = page.nextPageToken;
        } while (token !== '');
        assert.deepEqual(codes, [...codes].sort());
        assert.ok(codes.includes('EUR') && codes.includes('USD'));
        const tampered = await callError(greeting.listCurrencies({ pageToken: 'x.y' }));
        assert.equal(tampered.code, Code.InvalidArgument);
        assert.equal(tampered.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field, 'page_token');
      });

      test('the profile: read, updated, and a stale etag ABORTED (AIP-154)', async () => {
        const { greeting } = await clients();
        const first = (await greeting.getProfile({})).profile;
        assert.equal(first?.name, undefined);
        const updated = (await greeting.updateProfile({ profile: { name: 'Ada', etag: first?.etag ?? '' } })).profile;
        assert.equal(updated?.name, 'Ada');
        assert.notEqual(updated?.etag, first?.etag);
        const stale = await callError(greeting.updateProfile({ profile: { bio: 'x', etag: first?.etag ?? '' } }));
        assert.equal(stale.code, Code.Aborted);
        assert.equal(stale.rawMessage, 'If-Match does not match the current ETag of the profile.');
        assert.equal(stale.findDetails(ErrorInfoSchema)[0]?.reason, 'PRECONDITION_FAILED');
        const masked = await greeting.updateProfile({ profile: {}, updateMask: { paths: ['name'] } });
        assert.equal(masked.profile?.name, undefined);
        const invalid = await callError(greeting.updateProfile({ profile: { email: 'not an address' } }));
        assert.equal(invalid.code, Code.InvalidArgument);
        assert.equal(invalid.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field, 'email');
      });

      test('an empty name is INVALID_ARGUMENT with ErrorInfo, BadRequest and RequestInfo, and x-request-id', async () => {
        const { greeting } = await clients();
        let header: Headers | undefined;
        let trailer: Headers | undefined;
        const error = await callError(
          greeting.greet(
            { name: '' },
            {
              headers: { 'x-request-id': 'call-1' },
              onHeader: (received) => {
                header = received;
              },
              onTrailer: (received) => {
                trailer = received;
              },
            },
          ),
        );
        assert.equal(error.code, Code.InvalidArgument);
        assert.equal(error.rawMessage, 'The request is not valid.');
        assert.deepEqual(
          error.findDetails(ErrorInfoSchema).map(({ reason, domain }) => ({ reason, domain })),
          [{ reason: 'VALIDATION_ERROR', domain: 'greeting-service' }],
        );
        assert.deepEqual(
          error
            .findDetails(BadRequestSchema)[0]
            ?.fieldViolations.map(({ field, description }) => ({ field, description })),
          [{ field: 'name', description: 'must not be empty' }],
        );
        assert.equal(error.findDetails(RequestInfoSchema)[0]?.requestId, 'call-1');
        assert.equal(
          error.metadata.get('x-request-id') ?? header?.get('x-request-id') ?? trailer?.get('x-request-id'),
          'call-1',
        );
      });

      test('StreamGreetings sends each greeting when due, and resumes after after_id', async () => {
        const { greeting } = await clients();
        const started = performance.now();
        const received: { id: number; at: number }[] = [];
        for await (const message of greeting.streamGreetings({ count: 3, intervalMs: 200, name: 'Ada' })) {
          assert.equal(message.greeting, 'Hello, Ada!');
          assert.match(message.timestamp, LOCAL_TIMESTAMP);
          received.push({ id: message.id, at: performance.now() - started });
        }
        assert.deepEqual(
          received.map(({ id }) => id),
          [1, 2, 3],
        );
        assert.ok(received[1] !== undefined && received[1].at >= 195, `the second came at ${received[1]?.at} ms`);
        assert.ok(received[2] !== undefined && received[2].at >= 395, `the third came at ${received[2]?.at} ms`);
        const resumed: number[] = [];
        for await (const message of greeting.streamGreetings({ count: 4, intervalMs: 0, afterId: 2 })) {
          resumed.push(message.id);
        }
        assert.deepEqual(resumed, [3, 4]);
        const invalid = await callError(
          (async () => {
            for await (const _ of greeting.streamGreetings({ count: 1001 })) assert.fail('a message came');
          })(),
        );
        assert.equal(invalid.code, Code.InvalidArgument);
        assert.deepEqual(
          invalid
            .findDetails(BadRequestSchema)[0]
            ?.fieldViolations.map(({ field, description }) => ({ field, description })),
          [{ field: 'count', description: 'must be an integer from 1 to 1000' }],
        );
      });

      test('a stream quieter than the request timeout is kept open', async () => {
        const { greeting } = await clients({ requestTimeoutMs: 300, headersTimeoutMs: 300 });
        const ids: number[] = [];
        for await (const message of greeting.streamGreetings({ count: 2, intervalMs: 1200 })) ids.push(message.id);
        assert.deepEqual(ids, [1, 2]);
      });

      test('health is SERVING for the server and the service, NOT_FOUND for another', async () => {
        const { health } = await clients();
        assert.equal((await health.check({})).status, HealthCheckResponse_ServingStatus.SERVING);
        assert.equal(
          (await health.check({ service: 'greeting.v1.GreetingService' })).status,
          HealthCheckResponse_ServingStatus.SERVING,
        );
        assert.equal((await callError(health.check({ service: 'nope.Service' }))).code, Code.NotFound);
      });

      test('past RATE_LIMIT_MAX a call is RESOURCE_EXHAUSTED with RetryInfo; health is not counted', async () => {
        const { greeter, health } = await clients({ rateLimitMax: 2 });
        await greeter.sayHello({ name: 'a' });
        await health.check({});
        await greeter.sayHello({ name: 'b' });
        const over = await callError(greeter.sayHello({ name: 'c' }));
        assert.equal(over.code, Code.ResourceExhausted);
        assert.match(over.rawMessage, /^More than 2 requests in the current window; retry in \d+ s\.$/);
        assert.equal(over.findDetails(ErrorInfoSchema)[0]?.reason, 'RATE_LIMIT_EXCEEDED');
        const retry = over.findDetails(RetryInfoSchema)[0]?.retryDelay?.seconds ?? 0n;
        assert.ok(retry > 0n && retry <= 60n, `retry in ${retry} s`);
      });

      test('a fault delay past the deadline is DEADLINE_EXCEEDED at the deadline', async () => {
        const { greeter } = await clients({ faultHeaders: true });
        const started = performance.now();
        const late = await callError(
          greeter.sayHello({ name: 'a' }, { timeoutMs: 500, headers: { 'x-envoy-fault-delay-request': '2000' } }),
        );
        const took = performance.now() - started;
        assert.equal(late.code, Code.DeadlineExceeded);
        assert.ok(took >= 450 && took < 1500, `answered after ${took} ms`);
      });

      test("Envoy's gRPC abort header answers the status asked for; FAULT_ERROR_RATE its status's", async () => {
        const { greeter } = await clients({ faultHeaders: true });
        const aborted = await callError(
          greeter.sayHello({ name: 'a' }, { headers: { 'x-envoy-fault-abort-grpc-request': '9' } }),
        );
        assert.equal(aborted.code, Code.FailedPrecondition);
        assert.equal(
          aborted.rawMessage,
          'Injected fault: answered gRPC status 9 instead of being served (x-envoy-fault-abort-grpc-request).',
        );
        const { greeting } = await clients({ faultErrorRate: 1, faultErrorStatus: 503 });
        const unavailable = await callError(greeting.greet({ name: 'a' }));
        assert.equal(unavailable.code, Code.Unavailable);
        assert.equal(unavailable.findDetails(ErrorInfoSchema)[0]?.reason, 'SERVICE_UNAVAILABLE');
        assert.equal(unavailable.findDetails(RetryInfoSchema)[0]?.retryDelay?.seconds, 1n);
      });

      test('each call has one log line, with its status and its grpc_status', async () => {
        const { server, greeter, greeting } = await clients();
        await greeter.sayHello({ name: 'a' }, { headers: { 'x-request-id': 'line-ok' } });
        await callError(greeting.greet({ name: '' }, { headers: { 'x-request-id': 'line-invalid' } }));
        await new Promise((resolve) => setTimeout(resolve, 50));
        const ok = server.logs.lineOf('line-ok');
        assert.equal(ok.route, '/helloworld.Greeter/SayHello');
        assert.equal(ok.grpc_status, 0);
        const invalid = server.logs.lineOf('line-invalid');
        assert.equal(invalid.route, '/greeting.v1.GreetingService/Greet');
        assert.equal(invalid.grpc_status, Code.InvalidArgument);
        assert.equal(invalid.status, protocol === 'connect' ? 400 : 200);
      });

      test('the calls are counted in grpc_server_* and not among the HTTP requests', async () => {
        const { server, greeter } = await clients();
        await greeter.sayHello({ name: 'a' });
        await callError(createClient(GreetingService, transport(server.origin, protocol, version)).greet({ name: '' }));
        const text = await (await fetch(`${server.origin}/metrics`)).text();
        const handled = samples(text, 'grpc_server_handled_total');
        assert.equal(
          handled.get(
            '{grpc_service="helloworld.Greeter",grpc_method="SayHello",grpc_type="unary",grpc_code="OK",fault=""}',
          ),
          1,
        );
        assert.equal(
          handled.get(
            '{grpc_service="greeting.v1.GreetingService",grpc_method="Greet",grpc_type="unary",grpc_code="InvalidArgument",fault=""}',
          ),
          1,
        );
        assert.ok(!text.includes('route="/helloworld.Greeter/SayHello"'));
      });
    });
  }

  for (const [protocol, httpVersion] of [
    ['connect', '1.1'],
    ['grpc-web', '1.1'],
    ['grpc', '2'],
  ] as const) {
    test(`a ${protocol} message sent in gzip is read, and answered in gzip, in a unary call and a stream`, async () => {
      const server = await serve({ http2: httpVersion === '2' });
      const options = { baseUrl: server.origin, sendCompression: compressionGzip, compressMinBytes: 0 };
      const through =
        protocol === 'connect'
          ? createConnectTransport({ ...options, httpVersion })
          : protocol === 'grpc-web'
            ? createGrpcWebTransport({ ...options, httpVersion })
            : createGrpcTransport(options);
      let head: Headers | undefined;
      const client = createClient(GreetingService, through);
      const answer = await client.greet({ name: 'Ada'.repeat(400) }, { onHeader: (received) => (head = received) });
      assert.equal(answer.greeting, `Hello, ${'Ada'.repeat(400)}!`);
      // The answer's coding (over 1 KiB, what ConnectRPC compresses): Connect's unary answer names it as HTTP does, gRPC per message.
      assert.equal(head?.get(protocol === 'connect' ? 'content-encoding' : 'grpc-encoding'), 'gzip');
      const greetings: string[] = [];
      for await (const { greeting } of client.streamGreetings({ count: 2, intervalMs: 0, name: 'Ada'.repeat(400) })) {
        greetings.push(greeting);
      }
      assert.deepEqual(greetings, Array(2).fill(`Hello, ${'Ada'.repeat(400)}!`));
    });
  }

  test("gRPC-Web in text (base64), as browsers' grpc-web clients send it by default: read, and answered in text", async () => {
    const server = await serve({});
    /** A call in text, and its answer's frames: messages, then the trailers' frame (flag 0x80) as text. */
    const call = async <I extends DescMessage>(method: string, schema: I, message: MessageShape<I>, id: string) => {
      const bytes = toBinary(schema, message);
      const frame = Buffer.alloc(5 + bytes.length);
      frame.writeUInt32BE(bytes.length, 1);
      frame.set(bytes, 5);
      // In two pieces, each in base64 of its own, padded, as a client may send it.
      const res = await fetch(`${server.origin}/${method}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/grpc-web-text',
          accept: 'application/grpc-web-text',
          'x-request-id': id,
        },
        body: frame.subarray(0, 4).toString('base64') + frame.subarray(4).toString('base64'),
      });
      const text = await res.text();
      // Each group of four characters decodes on its own, whichever pieces the answer was padded in.
      const body = Buffer.concat(
        Array.from({ length: text.length / 4 }, (_, i) => Buffer.from(text.slice(4 * i, 4 * i + 4), 'base64')),
      );
      const frames: { trailers: boolean; data: Buffer }[] = [];
      for (let at = 0; at + 5 <= body.length; at += 5 + body.readUInt32BE(at + 1)) {
        frames.push({
          trailers: (body[at] as number) >= 0x80,
          data: body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)),
        });
      }
      return { res, frames };
    };
    const said = await call(
      'helloworld.Greeter/SayHello',
      HelloRequestSchema,
      create(HelloRequestSchema, { name: 'Ada' }),
      'text-1',
    );
    assert.equal(said.res.status, 200);
    assert.equal(said.res.headers.get('content-type'), 'application/grpc-web-text+proto');
    assert.equal(said.res.headers.get('x-request-id'), 'text-1');
    assert.deepEqual(
      said.frames.map(({ trailers, data }) =>
        trailers ? data.toString() : fromBinary(HelloReplySchema, data).message,
      ),
      ['Hello, Ada!', 'grpc-status: 0\r\n'],
    );
    const streamed = await call(
      'greeting.v1.GreetingService/StreamGreetings',
      StreamGreetingsRequestSchema,
      create(StreamGreetingsRequestSchema, { count: 2, intervalMs: 0, name: 'Ada' }),
      'text-2',
    );
    assert.deepEqual(
      streamed.frames.map(({ trailers, data }) =>
        trailers ? data.toString() : fromBinary(StreamGreetingsResponseSchema, data).greeting,
      ),
      ['Hello, Ada!', 'Hello, Ada!', 'grpc-status: 0\r\n'],
    );
    // An error: the trailers' frame alone, in text as in binary gRPC-Web, its details with it.
    const refused = await call(
      'greeting.v1.GreetingService/Greet',
      GreetRequestSchema,
      create(GreetRequestSchema, { name: '' }),
      'text-3',
    );
    assert.equal(refused.res.status, 200);
    assert.equal(refused.frames.length, 1);
    const trailers = Object.fromEntries(
      (refused.frames[0]?.data.toString() ?? '')
        .split('\r\n')
        .filter((line) => line !== '')
        .map((line) => line.split(': ')),
    );
    assert.equal(refused.frames[0]?.trailers, true);
    assert.equal(trailers['grpc-status'], String(Code.InvalidArgument));
    assert.equal(decodeURIComponent(trailers['grpc-message'] ?? ''), 'The request is not valid.');
    assert.deepEqual(
      statusOf(trailers['grpc-status-details-bin'] ?? '').details,
      expectedDetails('VALIDATION_ERROR', 'text-3', {
        violations: [{ field: 'name', description: 'must not be empty' }],
      }),
    );
  });

  test('a health Watch says NOT_SERVING when the service shuts down, and ends, so that it can', {
    timeout: 10_000,
  }, async () => {
    const server = await listening({});
    const health = createClient(Health, transport(server.origin, 'grpc-web', '1.1'));
    const statuses: HealthCheckResponse_ServingStatus[] = [];
    let closed: Promise<void> | undefined;
    const watched = (async () => {
      for await (const { status } of health.watch({})) {
        statuses.push(status);
        if (statuses.length === 1) closed = server.app.close();
      }
    })();
    const started = performance.now();
    await watched;
    await closed;
    assert.deepEqual(statuses, [
      HealthCheckResponse_ServingStatus.SERVING,
      HealthCheckResponse_ServingStatus.NOT_SERVING,
    ]);
    const took = performance.now() - started;
    assert.ok(took < 2_500, `closed after ${took} ms`);
  });

  test('an unknown method of a known service is UNIMPLEMENTED; GRPC=false serves none of it', async () => {
    const server = await serve({ http2: true });
    const response = await fetch(`${server.origin}/greeting.v1.GreetingService/Nope`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(response.status, 501);
    assert.deepEqual(await response.json(), {
      code: 'unimplemented',
      message: 'greeting.v1.GreetingService has no method Nope',
    });
    const off = await serve({ grpc: false });
    const refused = await fetch(`${off.origin}/helloworld.Greeter/SayHello`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"a"}',
    });
    assert.equal(refused.status, 404);
  });
});
