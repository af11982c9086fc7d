import { tracingChannel } from 'node:diagnostics_channel';
import {
  type Context,
  context,
  createContextKey,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
} from '@opentelemetry/api';
import type { CommandTraceContext } from 'ioredis';

/** Where a request's context keeps the tracer its Redis commands' spans are made with. */
const TRACER = createContextKey('greeting-service: the tracer of Redis commands');

/** `parent` with the tracer that makes a span of each Redis command run within it. */
export function withRedisSpans(parent: Context, tracer: Tracer): Context {
  return parent.setValue(TRACER, tracer);
}

type Traced = CommandTraceContext & { span?: Span; error?: unknown };

let subscribed = false;

/**
 * A client span per Redis command run within a request that is traced (see withRedisSpans), named
 * and attributed per OpenTelemetry's database conventions. ioredis reports each command it sends on
 * the `ioredis:command` tracing channel, from the caller's context; a command sent outside a traced
 * request (a health probe, reconnecting) makes no span.
 */
export function traceRedisCommands(): void {
  if (subscribed) return;
  subscribed = true;
  tracingChannel<unknown, Traced>('ioredis:command').subscribe({
    start(message) {
      const active = context.active();
      const tracer = active.getValue(TRACER) as Tracer | undefined;
      if (tracer === undefined) return;
      const operation = message.command.toUpperCase();
      message.span = tracer.startSpan(
        operation,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'db.system.name': 'redis',
            'db.operation.name': operation,
            'db.namespace': String(message.database),
            'server.address': message.serverAddress,
            ...(message.serverPort !== undefined && { 'server.port': message.serverPort }),
          },
        },
        active,
      );
    },
    end() {},
    asyncStart() {},
    error(message) {
      const error = message.error as Error | undefined;
      message.span?.setStatus({ code: SpanStatusCode.ERROR, message: error?.message ?? 'failed' });
      message.span?.setAttribute('error.type', error?.name ?? 'Error');
    },
    asyncEnd(message) {
      message.span?.end();
    },
  });
}
