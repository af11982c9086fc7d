import assert from 'node:assert/strict';
import { connect as connectHttp2 } from 'node:http2';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/config/index.js';
import type { ProfileStore } from '../../src/stores/profile.js';
import { LogCapture, sendHttp2, testConfig } from '../helpers.js';
import { freePort } from '../ports.js';
import { REDIS_SERVER_MISSING, REDIS_SKIP_REASON, RedisServer } from '../redis-server.js';
import { exitOf, startServer, withTimeout } from '../server-process.js';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
import { PARENT_ID, TRACE_ID, VALID_TRACEPARENT } from './traceparents.js';

const UNSAMPLED_PARENT = VALID_TRACEPARENT.replace(/-01$/, '-00');
const SERVER = 2;
const CLIENT = 3;

/** An app exporting to `receiver`, with its log; closing it flushes the spans. */
async function exportingApp(receiver: OtlpReceiver, overrides: Partial<Config> = {}, profileStore?: ProfileStore) {
  const logs = new LogCapture();
  const app = await buildApp(testConfig({ logLevel: 'info', otelExporterOtlpEndpoint: receiver.url, ...overrides }), {
    logStream: logs,
    ...(profileStore !== undefined && { profileStore }),
  });
  await app.ready();
  return { app, logs };
}

function lineOf(logs: LogCapture, id: string): Record<string, unknown> {
  const lines = logs.lines.filter((line) => line.request_id === id);
  assert.equal(lines.length, 1, `one line for ${id}`);
  return lines[0] as Record<string, unknown>;
}

function spanOf(receiver: OtlpReceiver, requestId: string): ReceivedSpan {
  const spans = receiver.spans.filter((span) => span.attributes.request_id === requestId);
  assert.equal(spans.length, 1, `one span for ${requestId}`);
  return spans[0] as ReceivedSpan;
}

describe('the span of a gRPC call', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await OtlpReceiver.start();
    const broken = () => Promise.reject(new Error('broken'));
    const { app } = await exportingApp(receiver, {}, { get: broken, compareAndSet: broken });
    const call = (url: string, body: string, id: string, contentType = 'application/json') =>
      app.inject({ method: 'POST', url, payload: body, headers: { 'content-type': contentType, 'x-request-id': id } });
    await call('/helloworld.Greeter/SayHello', '{"name":"Ada"}', 'rpc-ok');
    await call('/greeting.v1.GreetingService/Greet', '{"name":""}', 'rpc-invalid');
    await call('/greeting.v1.GreetingService/GetProfile', '{}', 'rpc-failed');
    await app.close();
  });
  after(() => receiver.close());

  it('is named service/method and attributed per the RPC conventions, with its gRPC status', () => {
    const ok = spanOf(receiver, 'rpc-ok');
    assert.equal(ok.name, 'helloworld.Greeter/SayHello');
    assert.equal(ok.kind, SERVER);
    assert.equal(ok.attributes['rpc.system'], 'connect_rpc');
    assert.equal(ok.attributes['rpc.service'], 'helloworld.Greeter');
    assert.equal(ok.attributes['rpc.method'], 'SayHello');
    assert.equal(ok.attributes['rpc.grpc.status_code'], 0);
    assert.equal(ok.status.code, 0);
  });

  it("marks a server's fault as an error, and not a client's", () => {
    const invalid = spanOf(receiver, 'rpc-invalid');
    assert.equal(invalid.attributes['rpc.grpc.status_code'], 3);
    assert.equal(invalid.status.code, 0);
    const failed = spanOf(receiver, 'rpc-failed');
    assert.equal(failed.attributes['rpc.grpc.status_code'], 13);
    assert.equal(failed.status.code, 2);
    assert.equal(failed.attributes['error.type'], '13');
  });
});

for (const protocol of ['http/protobuf', 'http/json'] as const) {
  describe(`OpenTelemetry export over ${protocol}`, () => {
    let receiver: OtlpReceiver;
    let app: FastifyInstance;
    let logs: LogCapture;
    before(async () => {
      receiver = await OtlpReceiver.start();
      ({ app, logs } = await exportingApp(
        receiver,
        {
          otelExporterOtlpProtocol: protocol,
          otelExporterOtlpHeaders: [['api-key', 'k e y']],
          otelServiceName: 'greeter',
          otelResourceAttributes: [
            ['service.name', 'overridden'],
            ['deployment.environment.name', 'test'],
          ],
        },
        {
          get: () => Promise.reject(new Error('broken')),
          compareAndSet: () => Promise.reject(new Error('broken')),
        },
      ));
      await app.inject({
        url: '/api/v1/hello/ada?version=1',
        headers: {
          traceparent: VALID_TRACEPARENT,
          tracestate: 'rojo=00f067aa0ba902b7',
          'user-agent': 'tester/1.0',
          'x-request-id': 'continued',
        },
      });
      await app.inject({ url: '/api/hello', headers: { 'x-request-id': 'root' } });
      await app.inject({ url: '/api/nope', headers: { 'x-request-id': 'unrouted' } });
      await app.inject({ url: '/api/profile', headers: { 'x-request-id': 'failed' } });
      await app.inject({ url: '/api/hello/%ZZ', headers: { 'x-request-id': 'refused' } });
      await app.close();
    });
    after(() => receiver.close());

    it('sends the spans when the app closes, encoded as asked, with the headers of OTEL_EXPORTER_OTLP_HEADERS', () => {
      assert.ok(receiver.exports.length >= 1);
      for (const received of receiver.exports) {
        assert.equal(received.contentType, protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
        assert.equal(received.headers['api-key'], 'k e y');
      }
    });

    it("continues the caller's trace: one server span, its parent the caller's, attributed per the HTTP conventions", () => {
      const span = spanOf(receiver, 'continued');
      assert.equal(span.traceId, TRACE_ID);
      assert.equal(span.parentSpanId, PARENT_ID);
      assert.equal(span.traceState, 'rojo=00f067aa0ba902b7');
      assert.equal(span.name, 'GET /api/hello/:name');
      assert.equal(span.kind, SERVER);
      assert.deepEqual(span.status, { code: 0, message: '' });
      assert.deepEqual(span.attributes, {
        'http.request.method': 'GET',
        'url.scheme': 'http',
        'url.path': '/api/v1/hello/ada',
        'url.query': 'version=1',
        'server.address': 'localhost',
        'server.port': 80,
        'network.protocol.version': '1.1',
        'client.address': '127.0.0.1',
        'http.route': '/api/hello/:name',
        'user_agent.original': 'tester/1.0',
        request_id: 'continued',
        'http.response.status_code': 200,
      });
      assert.ok(span.endNs >= span.startNs && span.startNs > 0n);
    });

    it("writes the span's trace and span ids in the request's log line", () => {
      const span = spanOf(receiver, 'continued');
      const line = lineOf(logs, 'continued');
      assert.equal(line.trace_id, span.traceId);
      assert.equal(line.span_id, span.spanId);
      const root = spanOf(receiver, 'root');
      assert.equal(root.parentSpanId, '');
      assert.notEqual(root.traceId, TRACE_ID);
      assert.deepEqual([lineOf(logs, 'root').trace_id, lineOf(logs, 'root').span_id], [root.traceId, root.spanId]);
    });

    it('names a span without a route by its method alone, and marks a 5xx as an error', () => {
      const unrouted = spanOf(receiver, 'unrouted');
      assert.equal(unrouted.name, 'GET');
      assert.equal(unrouted.attributes['http.route'], undefined);
      assert.equal(unrouted.attributes['http.response.status_code'], 404);
      assert.equal(unrouted.status.code, 0);
      const failed = spanOf(receiver, 'failed');
      assert.equal(failed.name, 'GET /api/profile');
      assert.equal(failed.status.code, 2);
      assert.equal(failed.attributes['error.type'], '500');
      assert.equal(failed.attributes['http.response.status_code'], 500);
      assert.equal(lineOf(logs, 'failed').trace_id, failed.traceId);
    });

    it('makes a span of a request refused before routing too', () => {
      const refused = spanOf(receiver, 'refused');
      assert.equal(refused.attributes['http.response.status_code'], 400);
      assert.equal(refused.attributes['url.path'], '/api/hello/%ZZ');
      assert.ok(refused.endNs >= refused.startNs);
    });

    it('names the service and its resource as OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say', () => {
      const { resource } = spanOf(receiver, 'root');
      assert.equal(resource['service.name'], 'greeter');
      assert.equal(resource['deployment.environment.name'], 'test');
      assert.equal(typeof resource['service.version'], 'string');
    });
  });
}

describe('spans over HTTP/2', () => {
  it('are attributed as over HTTP/1.1, the version of HTTP as the conventions write it ("2")', async () => {
    const receiver = await OtlpReceiver.start();
    try {
      const { app } = await exportingApp(receiver, { http2: true });
      const origin = await app.listen({ host: '127.0.0.1', port: 0 });
      const session = connectHttp2(origin);
      try {
        const answer = await sendHttp2(session, {
          path: '/api/hello/ada',
          headers: { traceparent: VALID_TRACEPARENT, 'x-request-id': 'over-h2' },
        });
        assert.equal(answer.status, 200);
      } finally {
        session.close();
      }
      await app.close();
      const span = spanOf(receiver, 'over-h2');
      assert.equal(span.traceId, TRACE_ID);
      assert.equal(span.name, 'GET /api/hello/:name');
      assert.equal(span.attributes['network.protocol.version'], '2');
      assert.equal(span.attributes['url.scheme'], 'http');
      assert.equal(span.attributes['http.response.status_code'], 200);
    } finally {
      await receiver.close();
    }
  });
});

describe('sampling', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await OtlpReceiver.start();
  });
  after(() => receiver.close());

  /** The request ids whose spans arrived, of requests sent with these traceparents (none for undefined). */
  async function sampled(overrides: Partial<Config>, parents: (string | undefined)[]): Promise<string[]> {
    receiver.exports.length = 0;
    const { app } = await exportingApp(receiver, overrides);
    for (const [i, traceparent] of parents.entries()) {
      const headers = { 'x-request-id': `r${i}`, ...(traceparent !== undefined && { traceparent }) };
      assert.equal((await app.inject({ url: '/api/hello', headers })).statusCode, 200);
    }
    await app.close();
    return receiver.spans.map((span) => String(span.attributes.request_id));
  }

  it("follows the caller's decision by default, and samples every new trace", async () => {
    assert.deepEqual(await sampled({}, [VALID_TRACEPARENT, UNSAMPLED_PARENT, undefined]), ['r0', 'r2']);
  });

  it('parentbased_always_off starts no trace of its own, and still follows a sampled caller', async () => {
    const spans = await sampled({ otelTracesSampler: 'parentbased_always_off' }, [
      VALID_TRACEPARENT,
      UNSAMPLED_PARENT,
      undefined,
    ]);
    assert.deepEqual(spans, ['r0']);
  });

  it('always_off samples nothing, always_on everything, whatever the caller says', async () => {
    assert.deepEqual(await sampled({ otelTracesSampler: 'always_off' }, [VALID_TRACEPARENT, undefined]), []);
    assert.deepEqual(
      await sampled({ otelTracesSampler: 'always_on' }, [VALID_TRACEPARENT, UNSAMPLED_PARENT, undefined]),
      ['r0', 'r1', 'r2'],
    );
  });

  it('traceidratio samples its share of new traces: none at 0, all at 1, about half at 0.5', async () => {
    const roots = Array.from({ length: 300 }, () => undefined);
    const none = { otelTracesSampler: 'traceidratio', otelTracesSamplerArg: 0 } as const;
    assert.deepEqual(await sampled(none, roots.slice(0, 20)), []);
    const all = { otelTracesSampler: 'parentbased_traceidratio', otelTracesSamplerArg: 1 } as const;
    assert.equal((await sampled(all, roots.slice(0, 20))).length, 20);
    const half = { otelTracesSampler: 'parentbased_traceidratio', otelTracesSamplerArg: 0.5 } as const;
    const count = (await sampled(half, roots)).length;
    assert.ok(count > 90 && count < 210, `${count} of 300 sampled at 0.5`);
  });

  it('OTEL_SDK_DISABLED exports nothing; the log line keeps the trace it was sent, and invents none', async () => {
    const logs = new LogCapture();
    const app = await buildApp(
      testConfig({ logLevel: 'info', otelSdkDisabled: true, otelExporterOtlpEndpoint: receiver.url }),
      { logStream: logs },
    );
    receiver.exports.length = 0;
    await app.inject({ url: '/api/hello', headers: { traceparent: VALID_TRACEPARENT, 'x-request-id': 'sent' } });
    await app.inject({ url: '/api/hello', headers: { 'x-request-id': 'none' } });
    await app.close();
    assert.deepEqual(receiver.exports, []);
    assert.equal(lineOf(logs, 'sent').trace_id, TRACE_ID);
    assert.equal(lineOf(logs, 'none').trace_id, undefined);
  });
});

describe('a collector in trouble', () => {
  const hello = (app: FastifyInstance, id: string) =>
    app.inject({ url: '/api/hello/ada', headers: { traceparent: VALID_TRACEPARENT, 'x-request-id': id } });

  /** Sends `count` requests, 100 at a time; each must answer as without tracing, at once. */
  async function unchanged(app: FastifyInstance, count: number): Promise<void> {
    const one = async (i: number) => {
      const started = performance.now();
      const res = await hello(app, `load-${i}`);
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, '{"greeting":"Hello, ada!"}');
      assert.ok(performance.now() - started < 1000, 'answered within a second');
    };
    for (let from = 0; from < count; from += 100) {
      await Promise.all(Array.from({ length: Math.min(100, count - from) }, (_, i) => one(from + i)));
    }
  }

  const metric = async (app: FastifyInstance, reason: string) => {
    const text = (await app.inject({ url: '/metrics' })).body;
    const match = new RegExp(`^tracing_spans_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
    return Number(match?.[1]);
  };

  it('down: requests answer as ever, and the shutdown gives up on it in time', async () => {
    const port = await freePort();
    const logs = new LogCapture();
    const app = await buildApp(
      testConfig({
        logLevel: 'warn',
        rateLimitMax: 0,
        shutdownTimeoutMs: 1000,
        otelExporterOtlpTracesEndpoint: `http://127.0.0.1:${port}/v1/traces`,
      }),
      { logStream: logs },
    );
    await unchanged(app, 600);
    const started = performance.now();
    await app.close();
    assert.ok(performance.now() - started < 1000);
    assert.deepEqual(logs.warnings(), ['spans not exported before the shutdown timeout']);
  });

  it('answering 500: requests answer as ever, the refused spans are counted as dropped', async () => {
    const receiver = await OtlpReceiver.start();
    receiver.mode = 'fail';
    try {
      const { app } = await exportingApp(receiver, { rateLimitMax: 0 });
      await unchanged(app, 520);
      await waitFor(async () => (await metric(app, 'export_failed')) === 512);
      assert.equal(await metric(app, 'queue_full'), 0);
      await app.close();
      assert.equal(receiver.spans.filter((span) => span.name === 'GET /api/hello/:name').length, 520);
    } finally {
      await receiver.close();
    }
  });

  it('slow (10 s): requests answer as ever, spans beyond the queue are dropped and counted, and the shutdown gives up in time', async () => {
    const receiver = await OtlpReceiver.start();
    receiver.mode = 'slow';
    try {
      const { app, logs } = await exportingApp(receiver, {
        shutdownTimeoutMs: 1000,
        logLevel: 'warn',
        rateLimitMax: 0,
      });
      // One batch of 512 in flight, 2048 queued behind it, 40 more dropped.
      await unchanged(app, 512 + 2048 + 40);
      assert.equal(await metric(app, 'queue_full'), 40);
      const started = performance.now();
      await app.close();
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 1000, `closed in ${Math.round(tookMs)} ms`);
      assert.deepEqual(logs.warnings(), ['spans not exported before the shutdown timeout']);
    } finally {
      await receiver.close();
    }
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('Redis commands', { skip: REDIS_SERVER_MISSING && REDIS_SKIP_REASON }, () => {
  let redis: RedisServer;
  let receiver: OtlpReceiver;
  before(async () => {
    redis = await RedisServer.start();
    receiver = await OtlpReceiver.start();
  });
  after(async () => {
    await receiver.close();
    await redis.kill();
  });

  it("are client spans, children of their request's span, for reads and for writes with a body", async () => {
    const { app } = await exportingApp(receiver, { redisUrl: redis.url });
    await waitFor(async () => (await app.inject({ url: '/readyz' })).statusCode === 200);
    receiver.exports.length = 0;
    const headers = { traceparent: VALID_TRACEPARENT };
    await app.inject({ url: '/api/profile', headers: { ...headers, 'x-request-id': 'read' } });
    await app.inject({
      method: 'PATCH',
      url: '/api/profile',
      payload: { name: 'Ada' },
      headers: { ...headers, 'x-request-id': 'write' },
    });
    await app.close();
    for (const id of ['read', 'write']) {
      const parent = spanOf(receiver, id);
      const children = receiver.spans.filter((span) => span.parentSpanId === parent.spanId);
      // The rate limiter's count, then the profile's read with Redis's clock in one round trip (and, for
      // the write, its compare-and-set).
      const commands = children.map((child) => child.name.replace(/^EVALSHA$/, 'EVAL'));
      assert.deepEqual(commands, id === 'read' ? ['EVAL', 'HMGET', 'TIME'] : ['EVAL', 'HMGET', 'TIME', 'EVAL'], id);
      for (const child of children) {
        assert.equal(child.traceId, TRACE_ID);
        assert.equal(child.kind, CLIENT);
        assert.deepEqual(child.attributes, {
          'db.system.name': 'redis',
          'db.operation.name': child.name,
          'db.namespace': '0',
          'server.address': '127.0.0.1',
          'server.port': redis.port,
        });
        assert.ok(child.startNs >= parent.startNs && child.endNs <= parent.endNs);
      }
    }
    // Commands outside a request (the readiness probe's PING included) make no span of their own.
    assert.ok(receiver.spans.every((span) => span.kind === SERVER || span.parentSpanId !== ''));
  });
});

describe('the process', () => {
  it('exports the spans still queued when SIGTERM stops it, and exits 0', { timeout: 30_000 }, async () => {
    const receiver = await OtlpReceiver.start();
    const server = await startServer({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'stopped' });
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/api/hello`, {
        headers: { traceparent: VALID_TRACEPARENT, 'x-request-id': 'last' },
      });
      assert.equal(res.status, 200);
      server.child.kill('SIGTERM');
      const exit = await withTimeout(server.exited, 10_000, 'exit after SIGTERM');
      assert.deepEqual(exitOf(exit), { code: 0, signal: null });
      const span = spanOf(receiver, 'last');
      assert.equal(span.traceId, TRACE_ID);
      assert.equal(span.resource['service.name'], 'stopped');
      const line = server.lines.find((entry) => entry.request_id === 'last');
      assert.equal(line?.span_id, span.spanId);
    } finally {
      server.kill();
      await receiver.close();
    }
  });
});
