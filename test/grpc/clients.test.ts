import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { create, type JsonValue, toBinary } from '@bufbuild/protobuf';
import { request } from 'undici';
import { HelloRequestSchema } from '../../src/grpc/generated/helloworld/helloworld_pb.js';
import { LOCAL_TIMESTAMP, samples } from '../helpers.js';
import { run } from '../run-command.js';
import { killAllServers, type RunningServer, startServer } from '../server-process.js';
import {
  BUF_SKIP,
  bufCurl,
  bufError,
  bufResponseHeaders,
  bufResponses,
  buildDescriptorSet,
  CURL_SKIP,
  connectDetails,
  type Detail,
  expectedDetails,
  GRPCIO_SKIP,
  type GrpcioResult,
  grpcio,
  grpcioDetails,
  grpcioStreaming,
  metadataOf,
  servicesOf,
  statusOf,
} from './foreign-clients.js';

/**
 * The service's gRPC, gRPC-Web and Connect protocol, called by clients no one here wrote: the gRPC
 * project's C core (python3-grpcio, with message classes made at run time from the .proto files),
 * buf curl (Connect's Go client) over each protocol, by reflection and from the schema, and curl's
 * own HTTP/1.1 for the Connect protocol. Each against the built service.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const NOT_VALID = 'The request is not valid.';
const EMPTY_NAME = [{ field: 'name', description: 'must not be empty' }];
/** The services reflection lists: those a client calls; reflection itself is served, not listed. */
const SERVED = ['greeting.v1.GreetingService', 'grpc.health.v1.Health', 'helloworld.Greeter'];
const GREETER = 'helloworld.Greeter/SayHello';
const GREET = 'greeting.v1.GreetingService/Greet';

let descriptorSet: string;
before(async () => {
  if (BUF_SKIP === undefined) descriptorSet = await buildDescriptorSet();
});
after(killAllServers);

/** A server for one describe block, started before its tests and killed after them. */
function serverFor(env: Record<string, string>): () => RunningServer {
  let server: RunningServer | undefined;
  before(async () => {
    server = await startServer(env);
  });
  after(() => server?.kill());
  return () => server as RunningServer;
}

/** The one response of a call that succeeded. */
function only<T = JsonValue>(result: GrpcioResult): T {
  assert.equal(result.code, 'OK', result.message);
  assert.equal(result.responses.length, 1);
  return result.responses[0]?.message as T;
}

const url = (server: RunningServer, method: string) => `http://127.0.0.1:${server.port}/${method}`;

/** curl's Connect POST in JSON to `target`, with `args` (headers, the body): its HTTP status and its body. */
async function curlConnect(
  target: string,
  args: string[],
): Promise<{ status: number; body: { code?: string; message?: string; details?: { type: string; value: string }[] } }> {
  const { stdout } = await run('curl', [
    '-s',
    '-w',
    '\\n%{http_code}',
    '-H',
    'Content-Type: application/json',
    ...args,
    target,
  ]);
  const [json = '', status = ''] = stdout.split('\n');
  return { status: Number(status), body: JSON.parse(json) };
}

async function metricsOf(server: RunningServer): Promise<string> {
  const res = await request(`http://127.0.0.1:${server.port}/metrics`);
  return res.body.text();
}

/** A metric's value summed over the samples that carry these labels (and any others), as PromQL's `sum` gives it. */
function total(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const [set, value] of samples(text, name)) {
    const found = new Map(
      [...set.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, label, labelValue]) => [label, labelValue]),
    );
    if (Object.entries(labels).every(([label, labelValue]) => found.get(label) === labelValue)) sum += value;
  }
  return sum;
}

describe('grpcio (the gRPC C core) over h2c', { skip: GRPCIO_SKIP ?? BUF_SKIP }, () => {
  const server = serverFor({ HTTP2: 'true' });
  const call = (method: string, messages: unknown[] = [{}], more: object = {}) =>
    grpcio(descriptorSet, server().port, { method: `/${method}`, messages: messages as never, ...more });

  it('calls helloworld.Greeter/SayHello as every gRPC tutorial does, the request id in the metadata', async () => {
    const result = await call(GREETER, [{ name: 'Ada' }], { metadata: [['x-request-id', 'tutorial-1']] });
    assert.equal(result.code, 'OK', result.message);
    assert.deepEqual(
      result.responses.map(({ message }) => message),
      [{ message: 'Hello, Ada!' }],
    );
    assert.equal(result.initial_metadata['x-request-id'], 'tutorial-1');
  });

  it('gives a call without a usable x-request-id a new one', async () => {
    for (const metadata of [[], [['x-request-id', 'not valid!']]]) {
      const result = await call(GREETER, [{ name: 'Ada' }], { metadata });
      assert.equal(result.code, 'OK', result.message);
      assert.match(result.initial_metadata['x-request-id'] ?? '', UUID, JSON.stringify(metadata));
    }
  });

  it('answers an empty Greet name with INVALID_ARGUMENT and the envelope as google.rpc.Status', async () => {
    const result = await call(GREET, [{ name: '' }], { metadata: [['x-request-id', 'grpcio-empty-name']] });
    assert.equal(result.code, 'INVALID_ARGUMENT');
    assert.equal(result.message, NOT_VALID);
    assert.equal(metadataOf(result)['x-request-id'], 'grpcio-empty-name');
    assert.equal(result.status_details?.code, 3);
    assert.equal(result.status_details?.message, NOT_VALID);
    assert.deepEqual(
      grpcioDetails(result),
      expectedDetails('VALIDATION_ERROR', 'grpcio-empty-name', { violations: EMPTY_NAME }),
    );
  });

  it('serves every method of greeting.v1.GreetingService under the REST API rules', async () => {
    const hello = await call('greeting.v1.GreetingService/Hello');
    assert.equal(hello.code, 'OK', hello.message);
    const [helloResponse] = hello.responses.map(({ message }) => message) as { message: string; timestamp: string }[];
    assert.equal(helloResponse?.message, 'Hello, World!');
    assert.match(helloResponse?.timestamp ?? '', LOCAL_TIMESTAMP);

    const unary: [string, unknown, unknown][] = [
      [GREET, { name: 'Wörld 🌍' }, { greeting: 'Hello, Wörld 🌍!' }],
      [
        'greeting.v1.GreetingService/Search',
        { keyword: 'books', page: 2 },
        { keyword: 'books', page: 2, results: "Search results for 'books' (page 2)" },
      ],
      [
        'greeting.v1.GreetingService/Search',
        { keyword: 'books' },
        { keyword: 'books', page: 1, results: "Search results for 'books' (page 1)" },
      ],
      [
        'greeting.v1.GreetingService/Exchange',
        { from: 'usd', to: 'EUR', amount: '100' },
        { from: 'USD', to: 'EUR', amount: '100', rate: '0.92', result: '92' },
      ],
      [
        'greeting.v1.GreetingService/Exchange',
        { from: 'KWD', to: 'VND', amount: '1000000000000' },
        { from: 'KWD', to: 'VND', amount: '1000000000000', rate: '80484.237894', result: '80484237894052649' },
      ],
      [
        'greeting.v1.GreetingService/GetCurrency',
        { code: 'eur' },
        { currency: { code: 'EUR', name: 'Euro', minorUnits: 2, rate: '0.92' } },
      ],
    ];
    for (const [method, message, expected] of unary) {
      const result = await call(method, [message]);
      assert.equal(result.code, 'OK', `${method}: ${result.message}`);
      assert.deepEqual(
        result.responses.map((response) => response.message),
        [expected],
        method,
      );
    }

    const echo = await call('greeting.v1.GreetingService/Echo', [
      { message: { a: 1, b: 'x', c: [true, null], d: {} } },
    ]);
    assert.equal(echo.code, 'OK', echo.message);
    const [echoed] = echo.responses.map(({ message }) => message) as {
      received: unknown;
      echo: boolean;
      timestamp: string;
    }[];
    assert.deepEqual(echoed?.received, { a: 1, b: 'x', c: [true, null], d: {} });
    assert.equal(echoed?.echo, true);
    assert.match(echoed?.timestamp ?? '', LOCAL_TIMESTAMP);

    const stream = await call('greeting.v1.GreetingService/EchoStream', [
      { text: 'één' },
      { binary: 'AP8=' },
      { text: '' },
    ]);
    assert.equal(stream.code, 'OK', stream.message);
    assert.deepEqual(
      stream.responses.map(({ message }) => message),
      [{ text: 'één' }, { binary: 'AP8=' }, { text: '' }],
    );
  });

  it('pages through the currencies as the REST API lists them (AIP-158)', async () => {
    const rest = await request(`http://127.0.0.1:${server().port}/api/currencies?per_page=4`);
    const { data } = (await rest.body.json()) as {
      data: { code: string; name: string; minor_units: number; rate: number }[];
    };
    const table = data.map(({ code, name, minor_units, rate }) => ({
      code,
      name,
      minorUnits: minor_units,
      rate: String(rate),
    }));

    const first = await call('greeting.v1.GreetingService/ListCurrencies', [{ pageSize: 2 }]);
    assert.equal(first.code, 'OK', first.message);
    const page = only<{ currencies: unknown[]; nextPageToken: string }>(first);
    assert.deepEqual(page.currencies, table.slice(0, 2));
    assert.ok(page.nextPageToken, 'a next_page_token');

    const second = await call('greeting.v1.GreetingService/ListCurrencies', [
      { pageSize: 2, pageToken: page.nextPageToken },
    ]);
    assert.equal(second.code, 'OK', second.message);
    assert.deepEqual(only<{ currencies: unknown[] }>(second).currencies, table.slice(2, 4));
  });

  it('maps the REST errors of each method to their gRPC status, with the envelope’s message and details', async () => {
    const cases: [string, unknown, string, string, string, { field: string; description: string }[]][] = [
      [
        'greeting.v1.GreetingService/Search',
        { keyword: ' ' },
        'INVALID_ARGUMENT',
        NOT_VALID,
        'VALIDATION_ERROR',
        [{ field: 'keyword', description: 'must not be blank' }],
      ],
      [
        'greeting.v1.GreetingService/Exchange',
        { from: 'XXX', to: 'ABC', amount: '1' },
        'INVALID_ARGUMENT',
        'No exchange rate for XXX and ABC.',
        'UNSUPPORTED_CURRENCY',
        [
          { field: 'from', description: 'is not a supported currency' },
          { field: 'to', description: 'is not a supported currency' },
        ],
      ],
      [
        'greeting.v1.GreetingService/GetCurrency',
        { code: 'XYZ' },
        'NOT_FOUND',
        'No currency XYZ in the table.',
        'NOT_FOUND',
        [],
      ],
    ];
    for (const [method, message, code, text, reason, violations] of cases) {
      const id = randomUUID();
      const result = await call(method, [message], { metadata: [['x-request-id', id]] });
      assert.deepEqual([result.code, result.message], [code, text], method);
      assert.deepEqual(grpcioDetails(result), expectedDetails(reason, id, { violations }), method);
      assert.equal(metadataOf(result)['x-request-id'], id, method);
    }
  });

  it('keeps the profile’s etag as the REST API’s ETag, and refuses a stale one with ABORTED (AIP-154)', async () => {
    const profileUrl = `http://127.0.0.1:${server().port}/api/profile`;
    const restEtag = async () => (await request(profileUrl)).headers.etag;

    const got = await call('greeting.v1.GreetingService/GetProfile');
    assert.equal(got.code, 'OK', got.message);
    const { etag } = only<{ profile: { etag: string } }>(got).profile;
    assert.equal(etag, await restEtag());

    const updated = await call('greeting.v1.GreetingService/UpdateProfile', [
      { profile: { name: 'Ada Lovelace', email: 'ada@example.com', etag } },
    ]);
    assert.equal(updated.code, 'OK', updated.message);
    const profile = only<{ profile: { etag: string } }>(updated).profile;
    assert.notEqual(profile.etag, etag);
    assert.deepEqual(profile, { name: 'Ada Lovelace', email: 'ada@example.com', etag: await restEtag() });

    const masked = await call('greeting.v1.GreetingService/UpdateProfile', [
      { profile: { bio: 'Wrote the first program.' }, updateMask: 'bio,email' },
    ]);
    assert.equal(masked.code, 'OK', masked.message);
    const afterMask = only<{ profile: Record<string, string> }>(masked).profile;
    assert.deepEqual(afterMask, { name: 'Ada Lovelace', bio: 'Wrote the first program.', etag: await restEtag() });

    const id = randomUUID();
    const stale = await call('greeting.v1.GreetingService/UpdateProfile', [{ profile: { bio: 'stale', etag } }], {
      metadata: [['x-request-id', id]],
    });
    assert.deepEqual(
      [stale.code, stale.message],
      ['ABORTED', 'If-Match does not match the current ETag of the profile.'],
    );
    assert.deepEqual(grpcioDetails(stale), expectedDetails('PRECONDITION_FAILED', id));
    assert.deepEqual(
      only(await call('greeting.v1.GreetingService/GetProfile')),
      { profile: afterMask },
      'a refused update changes nothing',
    );
  });

  it('streams greetings, each when it is due', async () => {
    const result = await call('greeting.v1.GreetingService/StreamGreetings', [
      { count: 3, intervalMs: 200, name: 'Ada' },
    ]);
    assert.equal(result.code, 'OK', result.message);
    const messages = result.responses.map(({ message }) => message) as {
      id: number;
      greeting: string;
      timestamp: string;
    }[];
    assert.deepEqual(
      messages.map(({ id, greeting }) => ({ id, greeting })),
      [1, 2, 3].map((id) => ({ id, greeting: 'Hello, Ada!' })),
    );
    for (const { timestamp } of messages) assert.match(timestamp, LOCAL_TIMESTAMP);
    // Due at 0, 200 and 400 ms: not together, not a second apart; a busy machine delays each a little.
    const [first = 0, second = 0, third = 0] = result.responses.map(({ at_ms }) => at_ms);
    assert.ok(second - first >= 150 && third - second >= 150, `came at ${first}, ${second}, ${third} ms`);
    assert.ok(third - first < 1200, `came at ${first}, ${second}, ${third} ms`);
  });

  it('resumes a stream after after_id', async () => {
    const result = await call('greeting.v1.GreetingService/StreamGreetings', [{ count: 3, intervalMs: 0, afterId: 1 }]);
    assert.equal(result.code, 'OK', result.message);
    assert.deepEqual(
      result.responses.map(({ message }) => (message as { id: number }).id),
      [2, 3],
    );
  });

  it('reports health SERVING for the server and greeting.v1.GreetingService, NOT_FOUND for a service it does not know', async () => {
    for (const service of ['', 'greeting.v1.GreetingService']) {
      const result = await call('grpc.health.v1.Health/Check', [{ service }]);
      assert.equal(result.code, 'OK', result.message);
      assert.deepEqual(only(result), { status: 'SERVING' }, service);
      const watched = await call('grpc.health.v1.Health/Watch', [{ service }], { take: 1 });
      assert.deepEqual(
        watched.responses.map(({ message }) => message),
        [{ status: 'SERVING' }],
        service,
      );
    }
    const unknown = await call('grpc.health.v1.Health/Check', [{ service: 'nope.v1.Nope' }]);
    assert.equal(unknown.code, 'NOT_FOUND');
  });

  it('lists exactly the services it serves by reflection, v1 and v1alpha', async () => {
    for (const version of ['v1', 'v1alpha']) {
      const result = await call(`grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`, [
        { listServices: '' },
      ]);
      assert.equal(result.code, 'OK', result.message);
      const listed = only<{ listServicesResponse: { service: { name: string }[] } }>(result).listServicesResponse
        .service;
      assert.deepEqual(listed.map(({ name }) => name).sort(), SERVED, version);
    }
  });

  it('describes by reflection the types of its error details, which clients decode by it', async () => {
    const symbols = ['google.rpc.ErrorInfo', 'google.rpc.BadRequest', 'google.rpc.RequestInfo', 'google.rpc.RetryInfo'];
    const result = await call(
      'grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
      symbols.map((fileContainingSymbol) => ({ fileContainingSymbol })),
    );
    assert.equal(result.code, 'OK', result.message);
    assert.deepEqual(
      result.responses.map(({ message }) => Object.keys(message as object).sort()),
      symbols.map(() => ['fileDescriptorResponse', 'originalRequest']),
      JSON.stringify(result.responses.map(({ message }) => (message as { errorResponse?: unknown }).errorResponse)),
    );
  });

  it('answers a method it does not have with UNIMPLEMENTED', async () => {
    for (const [service, method] of [
      ['greeting.v1.GreetingService', 'Nope'],
      ['helloworld.Greeter', 'sayhello'],
    ]) {
      const result = await call(`${service}/${method}`);
      assert.deepEqual([result.code, result.message], ['UNIMPLEMENTED', `${service} has no method ${method}`]);
      assert.match(metadataOf(result)['x-request-id'] ?? '', UUID);
    }
    // No route at all: an HTTP 404, which gRPC's clients read as UNIMPLEMENTED.
    assert.equal((await call('nope.v1.Nope/Call')).code, 'UNIMPLEMENTED');
  });
});

describe('grpcio: health while readiness is switched off', { skip: GRPCIO_SKIP ?? BUF_SKIP }, () => {
  const token = 'a-token-of-at-least-thirty-two-characters';
  let dir: string;
  let server: RunningServer;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'grpc-admin-'));
    await writeFile(join(dir, 'token'), token);
    server = await startServer({ HTTP2: 'true', ADMIN_TOKEN_FILE: join(dir, 'token') });
  });
  after(async () => {
    server?.kill();
    await rm(dir, { recursive: true, force: true });
  });

  it('watches SERVING turn NOT_SERVING when readiness is switched off, and Check says so', async () => {
    const switchOff = async () => {
      const res = await request(`http://127.0.0.1:${server.port}/readyz/disable`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(res.statusCode, 204);
    };
    const watched = await grpcioStreaming(
      descriptorSet,
      server.port,
      {
        method: '/grpc.health.v1.Health/Watch',
        messages: [{ service: 'greeting.v1.GreetingService' }],
        take: 2,
        timeout: 10,
      },
      switchOff,
    );
    assert.deepEqual(
      watched.responses.map(({ message }) => message),
      [{ status: 'SERVING' }, { status: 'NOT_SERVING' }],
    );
    for (const service of ['', 'greeting.v1.GreetingService']) {
      const checked = await grpcio(descriptorSet, server.port, {
        method: '/grpc.health.v1.Health/Check',
        messages: [{ service }],
      });
      assert.deepEqual(only(checked), { status: 'NOT_SERVING' }, service);
    }
  });
});

describe('limits and faults', { skip: GRPCIO_SKIP ?? BUF_SKIP }, () => {
  describe('past RATE_LIMIT_MAX', () => {
    const server = serverFor({ HTTP2: 'true', RATE_LIMIT_MAX: '2' });

    it('counts a stream once, then answers RESOURCE_EXHAUSTED with RetryInfo', async () => {
      const say = (id: string) =>
        grpcio(descriptorSet, server().port, {
          method: `/${GREETER}`,
          messages: [{ name: 'Ada' }],
          metadata: [['x-request-id', id]],
        });
      const stream = await grpcio(descriptorSet, server().port, {
        method: '/greeting.v1.GreetingService/StreamGreetings',
        messages: [{ count: 3, intervalMs: 0 }],
      });
      assert.equal(stream.responses.length, 3, stream.message);
      assert.equal((await say('second')).code, 'OK');

      const limited = await say('third');
      assert.equal(limited.code, 'RESOURCE_EXHAUSTED');
      const seconds = Number(
        /^More than 2 requests in the current window; retry in (\d+) s\.$/.exec(limited.message)?.[1],
      );
      assert.ok(seconds >= 1 && seconds <= 60, limited.message);
      assert.deepEqual(
        grpcioDetails(limited),
        expectedDetails('RATE_LIMIT_EXCEEDED', 'third', { retrySeconds: seconds }),
      );
      assert.equal(metadataOf(limited)['x-request-id'], 'third');
    });
  });

  describe('past RATE_LIMIT_MAX, by buf curl', () => {
    const server = serverFor({ HTTP2: 'true', RATE_LIMIT_MAX: '1' });

    it('answers RESOURCE_EXHAUSTED with RetryInfo', async () => {
      const say = (id: string) =>
        bufCurl(['--protocol', 'grpc', '-H', `x-request-id: ${id}`, '-d', '{"name":"Ada"}', url(server(), GREETER)]);
      assert.equal((await say('first')).code, 0);
      const limited = await say('second');
      assert.equal(limited.code, 8 << 3, limited.stderr);
      const error = bufError(limited.stderr);
      const seconds = Number(
        /^More than 1 request in the current window; retry in (\d+) s\.$/.exec(error.message)?.[1],
      );
      assert.ok(seconds >= 1 && seconds <= 60, error.message);
      assert.deepEqual(error, {
        code: 'resource_exhausted',
        message: error.message,
        details: expectedDetails('RATE_LIMIT_EXCEEDED', 'second', { retrySeconds: seconds }),
      });
    });
  });

  describe('BODY_LIMIT=200 FAULT_HEADERS=true, by buf curl', () => {
    const server = serverFor({ HTTP2: 'true', BODY_LIMIT: '200', FAULT_HEADERS: 'true' });
    const greet = (name: string, headers: string[] = []) =>
      bufCurl([
        '--protocol',
        'grpc',
        ...headers.flatMap((header) => ['-H', header]),
        '-d',
        JSON.stringify({ name }),
        url(server(), GREET),
      ]);

    for (const protocol of ['grpc', 'grpcweb', 'connect']) {
      it(`answers a message over BODY_LIMIT with RESOURCE_EXHAUSTED and the 413's envelope, over ${protocol}`, async () => {
        const call = (name: string, id: string) =>
          bufCurl([
            '--protocol',
            protocol,
            '-H',
            `x-request-id: ${id}`,
            '-d',
            JSON.stringify({ name }),
            url(server(), GREET),
          ]);
        assert.equal((await call('x'.repeat(190), 'small')).code, 0);
        const refused = await call('x'.repeat(300), 'too-large');
        assert.equal(refused.code, 8 << 3, refused.stderr);
        assert.deepEqual(bufError(refused.stderr), {
          code: 'resource_exhausted',
          message: 'The request body is larger than the limit of 200 bytes.',
          details: expectedDetails('PAYLOAD_TOO_LARGE', 'too-large'),
        });
      });
    }

    it('reads a Connect POST in gzip, and refuses one that decodes past BODY_LIMIT as it would refuse it sent plain', {
      skip: CURL_SKIP,
    }, async () => {
      const directory = await mkdtemp(join(tmpdir(), 'grpc-gzip-'));
      try {
        const post = async (name: string) => {
          const file = join(directory, 'body.gz');
          await writeFile(file, gzipSync(JSON.stringify({ name })));
          const headers = ['-H', 'Content-Encoding: gzip', '-H', 'X-Request-Id: curl-gzip'];
          return curlConnect(url(server(), GREET), [...headers, '--data-binary', `@${file}`]);
        };
        assert.deepEqual(await post('Ada'), { status: 200, body: { greeting: 'Hello, Ada!' } });
        // Some 60 bytes of gzip that decode to 312.
        const refused = await post('x'.repeat(300));
        assert.deepEqual(
          { status: refused.status, ...refused.body, details: connectDetails(refused.body.details ?? []) },
          {
            status: 429,
            code: 'resource_exhausted',
            message: 'The request body is larger than the limit of 200 bytes.',
            details: expectedDetails('PAYLOAD_TOO_LARGE', 'curl-gzip'),
          },
        );
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    });

    it('aborts a call with the gRPC status x-envoy-fault-abort-grpc-request names', async () => {
      const aborted = await greet('Ada', ['x-envoy-fault-abort-grpc-request: 14']);
      assert.equal(aborted.code, 14 << 3, aborted.stdout);
      assert.equal(bufError(aborted.stderr).code, 'unavailable');
    });
  });

  describe('FAULT_DELAY_RATE=1 FAULT_DELAY_MS=2000', () => {
    const server = serverFor({ HTTP2: 'true', FAULT_DELAY_RATE: '1', FAULT_DELAY_MS: '2000' });

    it('ends a call with a 500 ms deadline with DEADLINE_EXCEEDED at the deadline', async () => {
      const result = await grpcio(descriptorSet, server().port, {
        method: `/${GREETER}`,
        messages: [{ name: 'Ada' }],
        timeout: 0.5,
      });
      assert.equal(result.code, 'DEADLINE_EXCEEDED', result.message);
      assert.ok(result.elapsed_ms >= 450 && result.elapsed_ms < 1500, `after ${result.elapsed_ms} ms`);
    });

    // Clients that set no deadline of their own: only the service can end the call at 500 ms.
    it('honours grpc-timeout over gRPC-Web', async () => {
      const started = performance.now();
      const res = await request(url(server(), GREETER), {
        method: 'POST',
        headers: {
          'content-type': 'application/grpc-web+proto',
          'grpc-timeout': '500m',
          'x-request-id': 'web-deadline',
        },
        body: grpcWebFrame(toBinary(HelloRequestSchema, create(HelloRequestSchema, { name: 'Ada' }))),
      });
      const trailers = grpcWebTrailers(res.headers, Buffer.from(await res.body.arrayBuffer()));
      const elapsed = performance.now() - started;
      assert.equal(res.statusCode, 200);
      assert.equal(trailers['grpc-status'], '4', JSON.stringify(trailers));
      assert.equal(res.headers['x-request-id'], 'web-deadline');
      assert.ok(elapsed >= 450 && elapsed < 1500, `after ${elapsed} ms`);
      assertDeadlineDetails(statusOf(trailers['grpc-status-details-bin'] ?? '').details, 'web-deadline');
    });

    it('honours Connect-Timeout-Ms over the Connect protocol', async () => {
      const started = performance.now();
      const res = await request(url(server(), GREETER), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'connect-timeout-ms': '500',
          'x-request-id': 'connect-deadline',
        },
        body: JSON.stringify({ name: 'Ada' }),
      });
      const body = (await res.body.json()) as { code: string; details?: { type: string; value: string }[] };
      const elapsed = performance.now() - started;
      assert.equal(res.statusCode, 504);
      assert.equal(body.code, 'deadline_exceeded');
      assert.ok(elapsed >= 450 && elapsed < 1500, `after ${elapsed} ms`);
      assertDeadlineDetails(connectDetails(body.details ?? []), 'connect-deadline');
    });
  });
});

/** A deadline's details: an ErrorInfo of the service's domain and the request's id, as every error has. */
function assertDeadlineDetails(details: Detail[], requestId: string): void {
  assert.deepEqual(
    details.map(({ type }) => type),
    ['google.rpc.ErrorInfo', 'google.rpc.RequestInfo'],
  );
  const [errorInfo, requestInfo] = details.map(({ value }) => value as Record<string, unknown>);
  assert.equal(errorInfo?.domain, 'greeting-service');
  assert.deepEqual(requestInfo, { requestId });
}

/** A gRPC-Web request body: one uncompressed message frame. */
function grpcWebFrame(message: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** A gRPC-Web answer's status: its trailer frame, or its headers when it is trailers-only. */
function grpcWebTrailers(headers: Record<string, unknown>, body: Buffer): Record<string, string> {
  for (let offset = 0; offset + 5 <= body.length; ) {
    const length = body.readUInt32BE(offset + 1);
    if ((body[offset] ?? 0) & 0x80) {
      const text = body.subarray(offset + 5, offset + 5 + length).toString('latin1');
      return Object.fromEntries(
        text
          .split('\r\n')
          .filter(Boolean)
          .map((line) => {
            const colon = line.indexOf(':');
            return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
          }),
      );
    }
    offset += 5 + length;
  }
  return Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('grpc-'))) as Record<
    string,
    string
  >;
}

describe('grpc_server_* metrics', { skip: GRPCIO_SKIP ?? BUF_SKIP }, () => {
  const server = serverFor({ HTTP2: 'true' });

  it('counts each call by service, method, type and code, as the gRPC ecosystem’s interceptors name them', async () => {
    const say = () => grpcio(descriptorSet, server().port, { method: `/${GREETER}`, messages: [{ name: 'Ada' }] });
    await say();
    await say();
    await grpcio(descriptorSet, server().port, { method: `/${GREET}`, messages: [{ name: '' }] });
    await grpcio(descriptorSet, server().port, {
      method: '/greeting.v1.GreetingService/StreamGreetings',
      messages: [{ count: 2, intervalMs: 0 }],
    });
    const text = await metricsOf(server());
    const labels = (service: string, method: string, type: string) => ({
      grpc_service: service,
      grpc_method: method,
      grpc_type: type,
    });
    const sayHello = labels('helloworld.Greeter', 'SayHello', 'unary');
    const greet = labels('greeting.v1.GreetingService', 'Greet', 'unary');
    const stream = labels('greeting.v1.GreetingService', 'StreamGreetings', 'server_stream');
    assert.equal(total(text, 'grpc_server_started_total', sayHello), 2);
    assert.equal(total(text, 'grpc_server_handled_total', { ...sayHello, grpc_code: 'OK' }), 2);
    assert.equal(total(text, 'grpc_server_handled_total', sayHello), 2);
    assert.equal(total(text, 'grpc_server_handled_total', { ...greet, grpc_code: 'InvalidArgument' }), 1);
    assert.equal(total(text, 'grpc_server_handled_total', { ...stream, grpc_code: 'OK' }), 1);
    assert.equal(total(text, 'grpc_server_handling_seconds_count', sayHello), 2);
  });
});

describe('buf curl over h2c, by reflection', { skip: BUF_SKIP }, () => {
  const server = serverFor({ HTTP2: 'true' });

  it('lists exactly the services and methods it serves, by reflection v1 and v1alpha', async () => {
    const listed = (name: string) => SERVED.includes(name.split('/', 1)[0] ?? '');
    const all = await servicesOf(descriptorSet);
    const services = all.services.filter(listed);
    const methods = all.methods.filter(listed);
    assert.deepEqual(services, SERVED);
    for (const protocol of ['grpc-v1', 'grpc-v1alpha']) {
      const listed = await bufCurl(['--reflect-protocol', protocol, '--list-services', url(server(), '')]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(listed.stdout.trim().split('\n').sort(), services, protocol);
      const listedMethods = await bufCurl(['--reflect-protocol', protocol, '--list-methods', url(server(), '')]);
      assert.equal(listedMethods.code, 0, listedMethods.stderr);
      assert.deepEqual(listedMethods.stdout.trim().split('\n').sort(), methods, protocol);
    }
  });

  for (const protocol of ['grpc', 'grpcweb', 'connect']) {
    it(`greets by reflection over ${protocol}, the request id in the response headers`, async () => {
      const greeted = await bufCurl([
        '--protocol',
        protocol,
        '-v',
        '-H',
        `x-request-id: buf-${protocol}`,
        '-d',
        '{"name":"Ada"}',
        url(server(), GREET),
      ]);
      assert.equal(greeted.code, 0, greeted.stderr);
      assert.equal(greeted.stdout, '{\n  "greeting": "Hello, Ada!"\n}\n');
      assert.equal(bufResponseHeaders(greeted.stderr)['x-request-id'], `buf-${protocol}`);

      const said = await bufCurl(['--protocol', protocol, '-d', '{"name":"Ada"}', url(server(), GREETER)]);
      assert.deepEqual(bufResponses(said.stdout), [{ message: 'Hello, Ada!' }], said.stderr);
    });

    it(`reads the empty name's INVALID_ARGUMENT and its details over ${protocol}`, async () => {
      const refused = await bufCurl([
        '--protocol',
        protocol,
        '-H',
        `x-request-id: buf-${protocol}-empty`,
        '-d',
        '{"name":""}',
        url(server(), GREET),
      ]);
      assert.equal(refused.code, 3 << 3, refused.stderr);
      assert.deepEqual(bufError(refused.stderr), {
        code: 'invalid_argument',
        message: NOT_VALID,
        details: expectedDetails('VALIDATION_ERROR', `buf-${protocol}-empty`, { violations: EMPTY_NAME }),
      });
    });

    it(`streams greetings and checks health over ${protocol}`, async () => {
      const streamed = await bufCurl([
        '--protocol',
        protocol,
        '-d',
        '{"count":2,"interval_ms":0}',
        url(server(), 'greeting.v1.GreetingService/StreamGreetings'),
      ]);
      assert.equal(streamed.code, 0, streamed.stderr);
      assert.deepEqual(
        bufResponses(streamed.stdout).map((message) => {
          const { timestamp, ...rest } = message as { timestamp: string };
          assert.match(timestamp, LOCAL_TIMESTAMP);
          return rest;
        }),
        [
          { id: 1, greeting: 'Hello, World!' },
          { id: 2, greeting: 'Hello, World!' },
        ],
      );
      const health = await bufCurl(['--protocol', protocol, url(server(), 'grpc.health.v1.Health/Check')]);
      assert.deepEqual(bufResponses(health.stdout), [{ status: 'SERVING' }], health.stderr);
    });
  }

  it('echoes a bidirectional stream', async () => {
    const echoed = await bufCurl([
      '--protocol',
      'grpc',
      '-d',
      '{"text":"a"} {"binary":"AP8="}',
      url(server(), 'greeting.v1.GreetingService/EchoStream'),
    ]);
    assert.equal(echoed.code, 0, echoed.stderr);
    assert.deepEqual(bufResponses(echoed.stdout), [{ text: 'a' }, { binary: 'AP8=' }]);
  });
});

describe('gRPC-Web and the Connect protocol over HTTP/1.1 (HTTP2 off)', { skip: BUF_SKIP }, () => {
  const server = serverFor({});

  for (const protocol of ['grpcweb', 'connect']) {
    it(`serves buf curl over ${protocol} from the schema, errors included`, async () => {
      const schema = ['--schema', descriptorSet, '--protocol', protocol];
      const said = await bufCurl([
        ...schema,
        '-v',
        '-H',
        'x-request-id: h1-hello',
        '-d',
        '{"name":"Ada"}',
        url(server(), GREETER),
      ]);
      assert.equal(said.code, 0, said.stderr);
      assert.deepEqual(bufResponses(said.stdout), [{ message: 'Hello, Ada!' }]);
      assert.match(said.stderr, /^buf: < \(#1\) HTTP\/1\.1 200 OK$/m);
      assert.equal(bufResponseHeaders(said.stderr)['x-request-id'], 'h1-hello');

      const refused = await bufCurl([
        ...schema,
        '-H',
        'x-request-id: h1-empty',
        '-d',
        '{"name":""}',
        url(server(), GREET),
      ]);
      assert.equal(refused.code, 3 << 3, refused.stderr);
      assert.deepEqual(bufError(refused.stderr), {
        code: 'invalid_argument',
        message: NOT_VALID,
        details: expectedDetails('VALIDATION_ERROR', 'h1-empty', { violations: EMPTY_NAME }),
      });

      const streamed = await bufCurl([
        ...schema,
        '-d',
        '{"count":2,"interval_ms":0,"name":"Ada"}',
        url(server(), 'greeting.v1.GreetingService/StreamGreetings'),
      ]);
      assert.equal(streamed.code, 0, streamed.stderr);
      assert.deepEqual(
        bufResponses(streamed.stdout).map((message) => (message as { greeting: string }).greeting),
        ['Hello, Ada!', 'Hello, Ada!'],
      );
    });
  }

  it('answers curl’s Connect POST in JSON, and its error with the HTTP status its code maps to', {
    skip: CURL_SKIP,
  }, async () => {
    const post = (body: string) => curlConnect(url(server(), GREET), ['-H', 'X-Request-Id: curl-connect', '-d', body]);
    assert.deepEqual(await post('{"name":"Ada"}'), { status: 200, body: { greeting: 'Hello, Ada!' } });
    const refused = await post('{"name":""}');
    assert.deepEqual(
      { status: refused.status, ...refused.body, details: connectDetails(refused.body.details ?? []) },
      {
        status: 400,
        code: 'invalid_argument',
        message: NOT_VALID,
        details: expectedDetails('VALIDATION_ERROR', 'curl-connect', { violations: EMPTY_NAME }),
      },
    );
  });
});

describe('GRPC=false', { skip: GRPCIO_SKIP ?? BUF_SKIP }, () => {
  const server = serverFor({ HTTP2: 'true', GRPC: 'false' });

  it('serves no gRPC, gRPC-Web or Connect: a path no route takes', async () => {
    const result = await grpcio(descriptorSet, server().port, { method: `/${GREETER}`, messages: [{ name: 'Ada' }] });
    assert.equal(result.code, 'UNIMPLEMENTED', result.message);
    const health = await grpcio(descriptorSet, server().port, { method: '/grpc.health.v1.Health/Check' });
    assert.equal(health.code, 'UNIMPLEMENTED', health.message);
    const listed = await bufCurl(['--list-services', url(server(), '')]);
    assert.notEqual(listed.code, 0, listed.stdout);

    const res = await request(url(server(), GREETER), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"Ada"}',
    });
    assert.equal(res.statusCode, 404);
    const body = (await res.body.json()) as { error: { code: string; message: string } };
    assert.deepEqual([body.error.code, body.error.message], ['NOT_FOUND', `No route for POST /${GREETER}.`]);
  });
});
