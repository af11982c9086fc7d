import type { Socket } from 'node:net';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  errorResponse,
  errorResponses,
  RETRY_AFTER_HEADER,
  streamNotAcceptable,
  streamWhileMemoryFull,
  streamWhileShuttingDown,
  tooManyStreams,
  validationError,
} from '../errors.js';
import { accepts } from '../lib/accept.js';
import type { RequestLog } from '../logging/request-log.js';
import type { EventStreams } from '../services/event-streams.js';

const MAX_EVENTS = 1000;
const DEFAULT_COUNT = 10;
const MAX_INTERVAL_MS = 60_000;
const DEFAULT_INTERVAL_MS = 1000;
const DEFAULT_NAME = 'World';

const EVENT_STREAM_TYPE = 'text/event-stream; charset=utf-8';

export const EventsQuery = Type.Object({
  count: Type.Optional(
    Type.Integer({
      description: `How many events the stream sends, 1 to ${MAX_EVENTS}; it ends after the last.`,
      minimum: 1,
      maximum: MAX_EVENTS,
      default: DEFAULT_COUNT,
      errorMessage: `must be an integer from 1 to ${MAX_EVENTS}`,
      examples: [3],
    }),
  ),
  interval_ms: Type.Optional(
    Type.Integer({
      description: `Milliseconds between one event and the next, 0 to ${MAX_INTERVAL_MS}; the first is sent at once.`,
      minimum: 0,
      maximum: MAX_INTERVAL_MS,
      default: DEFAULT_INTERVAL_MS,
      errorMessage: `must be an integer from 0 to ${MAX_INTERVAL_MS}`,
      examples: [100],
    }),
  ),
  name: Type.Optional(
    Type.String({
      description: 'Who each event greets: any text, returned exactly; not empty.',
      minLength: 1,
      default: DEFAULT_NAME,
      errorMessage: 'must not be empty',
      examples: ['Ada'],
    }),
  ),
});

export const EventsHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.Integer({
      description:
        'The id of the last event received, 0 to `count`: the stream resumes with the next one (as an EventSource reconnects).',
      minimum: 0,
      maximum: MAX_EVENTS,
      errorMessage: 'must be an integer from 0 to count',
      examples: [2],
    }),
  ),
});

/** The data of one event: each event's `data` line is this object, as JSON. */
export interface GreetingEvent {
  id: number;
  greeting: string;
  /** The server's local date-time, as `GET /api/hello` gives it. */
  timestamp: string;
}

const STREAM_EXAMPLE = [
  'id: 1',
  'event: greeting',
  'data: {"id":1,"greeting":"Hello, Ada!","timestamp":"2026-01-02T03:04:05.678"}',
  '',
  'id: 2',
  'event: greeting',
  'data: {"id":2,"greeting":"Hello, Ada!","timestamp":"2026-01-02T03:04:05.778"}',
  '',
  '',
].join('\n');

/** The answer to a stream resumed at its end. */
const NOTHING_LEFT = {
  type: 'null',
  description:
    'Nothing left to send: `Last-Event-ID` names the last event (`count`). No body; an EventSource stops reconnecting.',
} as const;

/** The stream's own headers, besides those of every answer under `/api`. */
const STREAM_HEADERS = { 'x-accel-buffering': 'no' };

export interface EventsRoutesOptions {
  streams: EventStreams;
  requestLog: RequestLog;
  /** How long a stream's client has to take what was written to it once shutdown ends it. */
  shutdownTimeoutMs: number;
}

/**
 * Over HTTP/1.1, a connection on which nothing moved for the connection timeout is closed; between
 * two messages of a stream, the service is the one waiting, so only one whose client stopped reading
 * (bytes left unsent) is. Over HTTP/2, the session's own watch tells a stalled stream from a quiet one.
 */
export function keptWhileQuiet(res: FastifyReply['raw']): void {
  res.on('timeout', (socket: Socket) => {
    if (socket.writableLength > 0) socket.destroy();
  });
}

/**
 * Ends the stream when its response closes, however: its client gone, the connection broken, or
 * the answer finished. Over HTTP/1.1, a response its client left before it finished gets its one
 * log line here, as Fastify writes none for it (over HTTP/2, Fastify does, as the stream closes);
 * one whose connection a fault broke has had its line (status 0).
 */
function endWithResponse(request: FastifyRequest, reply: FastifyReply, requestLog: RequestLog, end: () => void): void {
  const res = reply.raw;
  keptWhileQuiet(res);
  res.once('close', () => {
    end();
    if (request.raw.httpVersionMajor !== 2 && !res.writableFinished && res.statusCode !== 0) {
      requestLog.requestCompleted(null, request, reply);
    }
  });
}

export const eventsRoutes: FastifyPluginAsyncTypebox<EventsRoutesOptions> = async (
  app,
  { streams, requestLog, shutdownTimeoutMs },
) => {
  // Shutdown ends every stream, after what each has written: its client reconnects with Last-Event-ID.
  app.addHook('preClose', (done) => {
    streams.endAll(shutdownTimeoutMs / 2);
    done();
  });

  app.get(
    '/api/events',
    {
      // Before the query is validated, as the versions Accept asks for are judged.
      preParsing: (request, _reply, payload, done) => {
        const { accept } = request.headers;
        done(accepts(accept, 'text/event-stream') ? null : streamNotAcceptable(accept ?? ''), payload);
      },
      schema: {
        operationId: 'getEvents',
        summary: 'A stream of greeting events',
        description:
          'Server-sent events (`text/event-stream`): event n (1 to `count`) is `id: n`, `event: greeting` and a `data` line holding `{"id":n,"greeting":"Hello, <name>!","timestamp":"<local date-time>"}`; ' +
          'the first at once, each next `interval_ms` after the one before, each written when due, and the answer ends after the last. ' +
          '`Last-Event-ID: k` resumes at k+1; `Last-Event-ID` equal to `count` (nothing left to send) is answered 204, which tells an EventSource to stop reconnecting. A stream quiet for 15 s gets a comment line (`: keep-alive`). ' +
          'Shutdown ends open streams; clients reconnect with `Last-Event-ID`. Never compressed, never buffered: `X-Accel-Buffering: no`.',
        tags: ['greeting'],
        querystring: EventsQuery,
        headers: EventsHeaders,
        response: {
          200: {
            description: 'The stream of events.',
            headers: {
              'X-Accel-Buffering': {
                type: 'string',
                const: 'no',
                description: 'Tells nginx not to buffer the stream.',
              },
            },
            content: {
              'text/event-stream': {
                schema: {
                  type: 'string',
                  description:
                    'Server-sent events as the HTML standard defines them; each `data` is the JSON object `{"id":n,"greeting":"Hello, <name>!","timestamp":"<local date-time>"}`.',
                  examples: [STREAM_EXAMPLE],
                },
              },
            },
          },
          204: NOTHING_LEFT,
          ...errorResponses(400),
          503: errorResponse(503, RETRY_AFTER_HEADER),
        },
      },
    },
    async (request, reply) => {
      const {
        count = DEFAULT_COUNT,
        interval_ms: intervalMs = DEFAULT_INTERVAL_MS,
        name = DEFAULT_NAME,
      } = request.query;
      const resumeAfter = request.headers['last-event-id'] ?? 0;
      if (resumeAfter > count) {
        throw validationError([
          {
            field: 'last-event-id',
            message: 'must be an integer from 0 to count',
            value: request.raw.headers['last-event-id'] ?? null,
          },
        ]);
      }
      // An EventSource reconnects after any stream that ends, but never after a 204 (WHATWG HTML,
      // server-sent events). Sent with no payload at all: a null would be serialised as a body.
      if (resumeAfter === count) return (reply as FastifyReply).code(204).send();
      if (request.method === 'HEAD') return reply.type(EVENT_STREAM_TYPE).headers(STREAM_HEADERS).send();
      if (request.server.draining) throw streamWhileShuttingDown();
      const stream = streams.begin(request, { first: resumeAfter + 1, count, intervalMs, name });
      if (stream === 'max') throw tooManyStreams(streams.max);
      if (stream === 'memory') throw streamWhileMemoryFull();
      reply.type(EVENT_STREAM_TYPE).headers(STREAM_HEADERS);
      endWithResponse(request, reply, requestLog, () => stream.destroy());
      return reply.send(stream);
    },
  );
};
