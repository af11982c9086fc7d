import { performance } from 'node:perf_hooks';
import {
  expectEnvelope,
  expectEqual,
  expectLocalNow,
  expectStatus,
  expectValidation,
  fail,
  header,
  isObject,
  show,
} from '../assert.js';
import type { Check, Context } from '../context.js';
import type { Response } from '../http.js';

const CLAUSE = 'contract: Streams and content codings (GET /api/events)';

/** One event of a stream, its fields as a client reads them. */
interface StreamEvent {
  id: string | undefined;
  event: string | undefined;
  data: string | undefined;
}

/** The events of a stream's text (the HTML standard's rules, for what the service sends), comments left out. */
function eventsOf(text: string): StreamEvent[] {
  const events: StreamEvent[] = [];
  for (const block of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    const fields = new Map<string, string>();
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      fields.set(name, fields.has(name) && name === 'data' ? `${fields.get(name)}\n${value}` : value);
    }
    if (fields.size > 0) events.push({ id: fields.get('id'), event: fields.get('event'), data: fields.get('data') });
  }
  return events;
}

/**
 * The stream's head: 200, text/event-stream in UTF-8, never stored, not compressed. Not its
 * `X-Accel-Buffering: no`, which is for the proxies on the way, and which nginx keeps to itself.
 */
function expectStreamHead(res: Response): void {
  expectStatus(res, 200);
  expectEqual(header(res, 'content-type'), 'text/event-stream; charset=utf-8', `${res.request.path}: Content-Type`);
  expectEqual(header(res, 'cache-control'), 'no-store', `${res.request.path}: Cache-Control`);
  const coding = header(res, 'content-encoding');
  if (coding !== undefined && coding !== 'identity') fail(`${res.request.path}: no Content-Encoding`, coding);
}

/** Asserts the stream holds greetings of `name` numbered `first` to `last`, in the contract's form. */
function expectGreetings(res: Response, name: string, first: number, last: number): void {
  const events = eventsOf(res.text);
  const ids = events.map((event) => event.id);
  const expected = Array.from({ length: last - first + 1 }, (_, i) => String(first + i));
  expectEqual(ids, expected, `${res.request.path}: the events' ids`);
  for (const event of events) {
    expectEqual(event.event, 'greeting', `event ${event.id}: its type`);
    let data: unknown;
    try {
      data = JSON.parse(event.data ?? '');
    } catch {
      fail(`event ${event.id}: JSON data`, show(event.data));
    }
    if (!isObject(data)) fail(`event ${event.id}: an object as data`, show(event.data));
    expectEqual(Object.keys(data), ['id', 'greeting', 'timestamp'], `event ${event.id}: the data's keys`);
    expectEqual(data.id, Number(event.id), `event ${event.id}: data.id`);
    expectEqual(data.greeting, `Hello, ${name}!`, `event ${event.id}: data.greeting`);
    expectLocalNow(data.timestamp, res, `event ${event.id}: data.timestamp`);
  }
}

/** How late an event may arrive after it was due, in ms: a network between the kit and the service is no loopback. */
export const LATE_MS = 500;

/**
 * Each of `arrivals` (ms from the request) came when due, `interval` ms after the one before,
 * within LATE_MS: a stream nothing on the way holds back.
 */
export function expectWhenDue(arrivals: readonly number[], interval: number, what: string): void {
  // When the schedule began, as the arrivals tell it: the earliest of each arrival less its offset.
  const start = Math.min(...arrivals.map((at, k) => at - k * interval));
  arrivals.forEach((at, k) => {
    const late = at - (start + k * interval);
    if (late > LATE_MS) {
      fail(
        `${what} ${k + 1} at ${k * interval} ms after the first (within ${LATE_MS} ms)`,
        `${Math.round(at - (arrivals[0] ?? 0))} ms: held back on the way (a buffering proxy?)`,
      );
    }
  });
}

/** Asks for a stream and notes when each of its events arrived, in ms from the request. */
async function timedStream(ctx: Context, path: string): Promise<{ res: Response; arrivals: number[] }> {
  const arrivals: number[] = [];
  const start = performance.now();
  let text = '';
  const res = await ctx.send({
    path,
    onData: (chunk) => {
      text += chunk.toString('utf8');
      const events = eventsOf(text.slice(0, text.lastIndexOf('\n\n') + 2)).length;
      while (arrivals.length < events) arrivals.push(performance.now() - start);
    },
  });
  return { res, arrivals };
}

export const eventChecks: Check[] = [
  {
    id: 'events.stream',
    group: 'events',
    clause: CLAUSE,
    title: 'GET /api/events sends count greetings of name as events id/event/data, then ends',
    async run(ctx) {
      const res = await ctx.get('/api/events?count=3&interval_ms=0&name=Ada');
      expectStreamHead(res);
      expectGreetings(res, 'Ada', 1, 3);
      const versioned = await ctx.get('/api/v1/events?count=2&interval_ms=0');
      expectStreamHead(versioned);
      expectGreetings(versioned, 'World', 1, 2);
    },
  },
  {
    id: 'events.when-due',
    group: 'events',
    clause: CLAUSE,
    title: `each event arrives when due, interval_ms after the one before (within ${LATE_MS} ms): nothing on the way holds it back`,
    async run(ctx) {
      const interval = 400;
      const count = 4;
      const { res, arrivals } = await timedStream(ctx, `/api/events?count=${count}&interval_ms=${interval}`);
      expectStreamHead(res);
      expectEqual(arrivals.length, count, 'events received');
      expectWhenDue(arrivals, interval, 'event');
    },
  },
  {
    id: 'events.last-event-id',
    group: 'events',
    clause: CLAUSE,
    title: 'Last-Event-ID: k resumes at k+1; k = count is a 204 with no body, which stops an EventSource reconnecting',
    async run(ctx) {
      const resumed = await ctx.get('/api/events?count=4&interval_ms=0', { 'Last-Event-ID': '2' });
      expectStreamHead(resumed);
      expectGreetings(resumed, 'World', 3, 4);
      const done = await ctx.get('/api/events?count=4&interval_ms=0', { 'Last-Event-ID': '4' });
      expectStatus(done, 204);
      expectEqual(done.text, '', `${done.request.path} with Last-Event-ID: 4: the body`);
    },
  },
  {
    id: 'events.bad-parameters',
    group: 'events',
    clause: `${CLAUSE}; contract: Errors`,
    title: 'a bad count, interval_ms, name or Last-Event-ID is a 400 VALIDATION_ERROR naming it, before any event',
    async run(ctx) {
      for (const [query, field, value] of [
        ['count=0', 'count', '0'],
        ['count=1001', 'count', '1001'],
        ['count=x', 'count', 'x'],
        ['interval_ms=-1', 'interval_ms', '-1'],
        ['interval_ms=60001', 'interval_ms', '60001'],
        ['name=', 'name', ''],
      ] as const) {
        expectValidation(await ctx.get(`/api/events?${query}`), field, value);
      }
      for (const id of ['3', 'x', '-1']) {
        expectValidation(await ctx.get('/api/events?count=2', { 'Last-Event-ID': id }), 'last-event-id', id);
      }
    },
  },
  {
    id: 'events.not-acceptable',
    group: 'events',
    clause: `${CLAUSE}; contract: Errors (406)`,
    title: 'an Accept without text/event-stream, text/* or */* is a 406 NOT_ACCEPTABLE',
    async run(ctx) {
      expectEnvelope(await ctx.get('/api/events?count=1', { Accept: 'application/json' }), 406, 'NOT_ACCEPTABLE');
      expectStreamHead(await ctx.get('/api/events?count=1&interval_ms=0', { Accept: 'text/*' }));
    },
  },
];
