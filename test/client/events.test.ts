import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ApiError, createClient, type GreetingEvent, NetworkError } from '../../packages/client/src/index.js';
import { type ListeningApp, listening, samples, sendTo } from '../helpers.js';
import { withTimeout } from '../server-process.js';

async function collect(events: AsyncIterable<GreetingEvent>): Promise<GreetingEvent[]> {
  const received: GreetingEvent[] = [];
  for await (const event of events) received.push(event);
  return received;
}

describe('the client: events, against the service in memory', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening({ logLevel: 'silent', streamsMax: 1 });
  });
  after(() => server.app.close());

  it('yields each greeting as it comes, then is done after the last', async () => {
    const api = createClient({ baseUrl: server.origin });
    const events = await collect(api.events({ count: 3, interval_ms: 0, name: 'Ada' }));
    assert.deepEqual(
      events.map(({ id, greeting }) => ({ id, greeting })),
      [1, 2, 3].map((id) => ({ id, greeting: 'Hello, Ada!' })),
    );
    for (const event of events) assert.match(event.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$/);
  });

  it('starts after lastEventId', async () => {
    const api = createClient({ baseUrl: server.origin });
    const events = await collect(api.events({ count: 4, interval_ms: 0 }, { lastEventId: 2 }));
    assert.deepEqual(
      events.map((event) => event.id),
      [3, 4],
    );
  });

  it('is done at once after lastEventId = count: the service answers 204', async () => {
    const api = createClient({ baseUrl: server.origin });
    const events = await withTimeout(
      collect(api.events({ count: 2, interval_ms: 0 }, { lastEventId: 2 })),
      2000,
      'done',
    );
    assert.deepEqual(events, []);
  });

  it('closes the stream when the loop is left: the service frees its slot at once', async () => {
    const api = createClient({ baseUrl: server.origin });
    for await (const event of api.events({ count: 1000, interval_ms: 50 })) {
      assert.equal(event.id, 1);
      break;
    }
    const deadline = Date.now() + 1000;
    for (;;) {
      const open = samples((await sendTo(server.origin, { path: '/metrics' })).text, 'event_streams_open').get('');
      if (open === 0) break;
      assert.ok(Date.now() < deadline, 'the slot was not freed within 1 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal((await collect(api.events({ count: 1, interval_ms: 0 }))).length, 1);
  });

  it('throws a refusal as an ApiError', async () => {
    const api = createClient({ baseUrl: server.origin });
    await assert.rejects(
      collect(api.events({ count: 0 })),
      (error) => error instanceof ApiError && error.status === 400 && error.details[0]?.field === 'count',
    );
  });
});

describe('the client: events and the timeout', () => {
  let server: ListeningApp;
  let silent: Server;
  before(async () => {
    server = await listening({ logLevel: 'silent' });
    silent = createServer(() => {}).listen(0, '127.0.0.1');
    await once(silent, 'listening');
  });
  after(async () => {
    silent.closeAllConnections();
    silent.close();
    await server.app.close();
  });

  it('does not cut a stream whose events come further apart than the timeout, once its head has come', async () => {
    const api = createClient({ baseUrl: server.origin, timeout: 150 });
    const events = await collect(api.events({ count: 3, interval_ms: 400 }, { reconnect: false }));
    assert.deepEqual(
      events.map((event) => event.id),
      [1, 2, 3],
    );
  });

  it("times the wait for the stream's head", { timeout: 10_000 }, async () => {
    const origin = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const api = createClient({ baseUrl: origin });
    await assert.rejects(collect(api.events({ count: 3 }, { timeout: 150 })), {
      name: 'TimeoutError',
      message: `GET ${origin}/api/events timed out after 150 ms`,
    });
  });
});

describe('the client: events from a stream that ends early', () => {
  let server: Server;
  let origin: string;
  const seen: IncomingHttpHeaders[] = [];
  before(async () => {
    // Ends its first stream after event 2, as a service shutting down does; then serves the rest.
    server = createServer((req, res) => {
      seen.push(req.headers);
      const after = Number(req.headers['last-event-id'] ?? 0);
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      const last = seen.length === 1 ? 2 : 3;
      for (let id = after + 1; id <= last; id++) {
        res.write(`id: ${id}\nevent: greeting\ndata: {"id":${id},"greeting":"Hello, World!","timestamp":"t"}\n\n`);
      }
      res.end();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  after(() => server.close());

  it('opens it again with Last-Event-ID, and yields each event once', async () => {
    seen.length = 0;
    const api = createClient({ baseUrl: origin });
    const events = await collect(api.events({ count: 3 }, { reconnect: { delayMs: 10 } }));
    assert.deepEqual(
      events.map((event) => event.id),
      [1, 2, 3],
    );
    assert.deepEqual(
      seen.map((headers) => [headers['last-event-id'], headers.accept]),
      [
        ['0', 'text/event-stream'],
        ['2', 'text/event-stream'],
      ],
    );
  });

  it('throws a NetworkError instead with reconnect: false, after the events it had', async () => {
    seen.length = 0;
    const api = createClient({ baseUrl: origin });
    const received: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const event of api.events({ count: 3 }, { reconnect: false })) received.push(event.id);
      })(),
      (error) => error instanceof NetworkError && /ended after event 2 of 3/.test(error.message),
    );
    assert.deepEqual(received, [1, 2]);
  });
});
