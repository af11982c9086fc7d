import { context, TraceFlags, type Tracer } from '@opentelemetry/api';
import type { ReadableSpan, Sampler, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, type Registry } from 'prom-client';
import type { Config } from '../config/index.js';
import type { TraceSampler } from '../config/tracing.js';
import { VERSION } from '../version.js';
import { traceRedisCommands } from './redis-spans.js';

/** Spans waiting to be sent: beyond this many, a span is dropped rather than held. */
export const MAX_QUEUED_SPANS = 2048;
/** Spans sent in one request to the collector, and the longest wait before a smaller batch goes. */
const BATCH_SIZE = 512;
const BATCH_DELAY_MS = 5000;
/** Time kept back from the shutdown timeout for what follows the flush: closing the stores, the last log lines. */
const SHUTDOWN_MARGIN_MS = 250;

const DEFAULT_SERVICE_NAME = 'greeting-service';

/**
 * OpenTelemetry's SDK and exporters, loaded when the first app that exports spans is built: a
 * service that exports none never reads them (the bundle leaves them in node_modules).
 */
async function loadSdk() {
  const [contextManager, core, json, protobuf, resources, sdk] = await Promise.all([
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/core'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
  ]);
  return {
    ...sdk,
    ...resources,
    ExportResultCode: core.ExportResultCode,
    AsyncLocalStorageContextManager: contextManager.AsyncLocalStorageContextManager,
    JsonExporter: json.OTLPTraceExporter,
    ProtobufExporter: protobuf.OTLPTraceExporter,
  };
}
type Sdk = Awaited<ReturnType<typeof loadSdk>>;

/** What became of the spans handed over for export, for /metrics. */
interface Tally {
  queued: number;
  exported: number;
  queueFull: number;
  exportFailed: number;
}

/**
 * The exporter, counting what it sends and what the collector refused or never answered. A batch
 * leaves the queue as it is handed over here.
 */
class CountingExporter implements SpanExporter {
  constructor(
    readonly inner: SpanExporter,
    readonly tally: Tally,
    readonly success: Sdk['ExportResultCode']['SUCCESS'],
  ) {}

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.tally.queued -= spans.length;
    this.inner.export(spans, (result) => {
      if (result.code === this.success) this.tally.exported += spans.length;
      else this.tally.exportFailed += spans.length;
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor behind a bounded queue of its own, so that every span it would drop is
 * counted: the SDK's processor drops them silently.
 */
class BoundedBatchProcessor implements SpanProcessor {
  readonly #batch: SpanProcessor;
  readonly #tally: Tally;

  constructor(sdk: Sdk, exporter: SpanExporter, tally: Tally) {
    this.#tally = tally;
    const counting = new CountingExporter(exporter, tally, sdk.ExportResultCode.SUCCESS);
    this.#batch = new sdk.BatchSpanProcessor(counting, {
      maxQueueSize: MAX_QUEUED_SPANS,
      maxExportBatchSize: BATCH_SIZE,
      scheduledDelayMillis: BATCH_DELAY_MS,
    });
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.#tally.queued >= MAX_QUEUED_SPANS) {
      this.#tally.queueFull++;
      return;
    }
    this.#tally.queued++;
    this.#batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.#batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.#batch.shutdown();
  }
}

function sampler(sdk: Sdk, name: TraceSampler, ratio: number): Sampler {
  const root = name.endsWith('always_off')
    ? new sdk.AlwaysOffSampler()
    : name.endsWith('traceidratio')
      ? new sdk.TraceIdRatioBasedSampler(ratio)
      : new sdk.AlwaysOnSampler();
  return name.startsWith('parentbased_') ? new sdk.ParentBasedSampler({ root }) : root;
}

let contextManaged = false;

/**
 * The context of the request being served follows its asynchronous work, so that a Redis
 * command knows its request's span: one context manager per process, however many apps. Only
 * Redis commands need it, and following every request's asynchronous work has a cost of its own.
 */
function manageContext(sdk: Sdk): void {
  if (contextManaged) return;
  contextManaged = true;
  context.setGlobalContextManager(new sdk.AsyncLocalStorageContextManager().enable());
}

/** Spans made, batched and sent to an OpenTelemetry collector over OTLP/HTTP. */
export interface SpanExport {
  readonly tracer: Tracer;
  /** Counts the spans exported and dropped in `registry`, for `GET /metrics`. */
  registerMetrics(registry: Registry): void;
  /** Sends the spans still queued, giving up after `budgetMs`; logs what was left unsent. */
  flush(budgetMs: number): Promise<void>;
}

/** The export the OTEL_ settings ask for, to `url` (see otlpTracesUrl). */
export async function createSpanExport(config: Config, url: string, log: FastifyBaseLogger): Promise<SpanExport> {
  const sdk = await loadSdk();
  if (config.redisUrl !== null) {
    manageContext(sdk);
    traceRedisCommands();
  }
  const attributes = Object.fromEntries(config.otelResourceAttributes);
  const resource = sdk.defaultResource().merge(
    sdk.resourceFromAttributes({
      ...attributes,
      'service.name': config.otelServiceName ?? attributes['service.name'] ?? DEFAULT_SERVICE_NAME,
      'service.version': attributes['service.version'] ?? VERSION,
    }),
  );
  const options = { url, headers: Object.fromEntries(config.otelExporterOtlpHeaders) };
  const exporter =
    config.otelExporterOtlpProtocol === 'http/json' ? new sdk.JsonExporter(options) : new sdk.ProtobufExporter(options);
  const tally: Tally = { queued: 0, exported: 0, queueFull: 0, exportFailed: 0 };
  const provider = new sdk.BasicTracerProvider({
    resource,
    sampler: sampler(sdk, config.otelTracesSampler, config.otelTracesSamplerArg),
    // A client's Host, User-Agent or query may be as long as Node's header limit allows.
    spanLimits: { attributeValueLengthLimit: 2048 },
    spanProcessors: [new BoundedBatchProcessor(sdk, exporter, tally)],
  });

  return {
    tracer: provider.getTracer(DEFAULT_SERVICE_NAME, VERSION),
    registerMetrics(registry) {
      new Counter({
        name: 'tracing_spans_exported_total',
        help: 'Spans the OpenTelemetry collector accepted.',
        registers: [registry],
        collect() {
          this.reset();
          this.inc(tally.exported);
        },
      });
      new Counter({
        name: 'tracing_spans_dropped_total',
        help: 'Spans never exported: queue_full when the queue was full (the collector too slow or away), export_failed when the collector refused them or did not answer.',
        labelNames: ['reason'],
        registers: [registry],
        collect() {
          this.reset();
          this.inc({ reason: 'queue_full' }, tally.queueFull);
          this.inc({ reason: 'export_failed' }, tally.exportFailed);
        },
      });
    },
    async flush(budgetMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), Math.max(0, budgetMs - SHUTDOWN_MARGIN_MS));
      });
      const done = provider.shutdown().then(
        () => false,
        () => false,
      );
      const timedOut = await Promise.race([done, late]);
      clearTimeout(timer);
      const unsent = tally.queued;
      if (timedOut || tally.exportFailed > 0) {
        log.warn(
          { spans_unsent: unsent, spans_dropped: tally.queueFull + tally.exportFailed },
          timedOut ? 'spans not exported before the shutdown timeout' : 'some spans could not be exported',
        );
      }
    },
  };
}
