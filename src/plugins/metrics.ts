import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { type HistogramSeries, SeriesHistogram } from '../lib/histogram.js';
import type { RequestLog } from '../logging/request-log.js';
import type { EventStreams } from '../services/event-streams.js';
import type { CheckResults, Readiness } from '../services/readiness.js';
import type { StoreKind } from '../stores/stores.js';
import { BUILD_INFO } from '../version.js';

/** The route label of a request no route matched (a 404 or 405): never its raw URL, which has no bound. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * `fault`: the faults injected into the answer, as its log line names them (`delay`, `abort,reset`),
 * empty (no label) for an answer no fault touched, so that the SLIs can leave the others out.
 */
const LABELS = ['method', 'route', 'status', 'fault'] as const;

/** Seconds. The service answers most requests well within a millisecond, so the buckets start below one. */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A series of the duration histogram, with the method, status and faults it counts. */
interface KnownSeries {
  readonly method: string;
  readonly status: number;
  readonly fault: string;
  readonly series: HistogramSeries<(typeof LABELS)[number]>;
}

let processRegistry: Registry | undefined;

/**
 * The process's own metrics (CPU, memory, event loop, GC, handles), collected once per process
 * however many apps it builds: prom-client starts an event-loop monitor and a GC observer for each
 * collection and never stops them, and tests build hundreds of apps.
 */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's metrics and the process's, for `GET /metrics`. */
    readonly metricsRegistry: Registry;
  }
}

export interface MetricsOptions {
  requestLog: RequestLog;
  droppedLogLines: () => number;
  readiness: Readiness;
  /** Which store the service keeps its state in: the `store` label of `store_up`. */
  store: StoreKind;
  eventStreams: EventStreams;
}

/**
 * Counts every request that gets a response, by method, route template and status, and measures
 * its duration, in a registry of this app's own (an app per test, many in a process). The route is
 * the template (`/api/hello/:name`), so the number of series is bounded by the routes, not by the
 * URLs clients send; a request no route took (404, 405, a path refused before routing) is
 * `unmatched`. Requests are observed where they are logged, as they finish. Readiness and the
 * store's state are asked when `/metrics` is read, as `/readyz` asks them.
 */
export const metricsPlugin = fp(
  async (app: FastifyInstance, { requestLog, droppedLogLines, readiness, store, eventStreams }: MetricsOptions) => {
    const registry = new Registry();
    // One check of readiness per scrape, whichever gauge asks first: the store is asked once.
    let asking: Promise<CheckResults> | null = null;
    const checks = (): Promise<CheckResults> => {
      asking ??= readiness.checks().finally(() => {
        asking = null;
      });
      return asking;
    };
    // Set once: the labels are the build's, fixed for the life of the process (GET /version says the same).
    new Gauge({
      name: 'build_info',
      help: 'Always 1, labelled with the build that runs: its version, commit, build time and Node.js runtime.',
      labelNames: Object.keys(BUILD_INFO) as (keyof typeof BUILD_INFO)[],
      registers: [registry],
    }).set({ ...BUILD_INFO }, 1);
    new Gauge({
      name: 'service_ready',
      help: '1 when the instance is ready for traffic (as /readyz answers), 0 when it is not.',
      registers: [registry],
      async collect() {
        const results = await checks();
        this.set(Object.values(results).some((check) => check.state === 'failed') ? 0 : 1);
      },
    });
    new Gauge({
      name: 'store_up',
      help: '1 when the store the service keeps its state in can serve (as /readyz asks it), 0 when it cannot.',
      labelNames: ['store'] as const,
      registers: [registry],
      async collect() {
        this.set({ store }, (await checks()).store.state === 'failed' ? 0 : 1);
      },
    });
    new Gauge({
      name: 'event_streams_open',
      help: 'Event streams (GET /api/events) open now.',
      registers: [registry],
      collect() {
        this.set(eventStreams.open);
      },
    });
    new Counter({
      name: 'events_sent_total',
      help: 'Events sent on every event stream.',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(eventStreams.eventsSent);
      },
    });
    new Counter({
      name: 'log_lines_dropped_total',
      help: 'Log lines dropped because standard output had not taken the ones before them.',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(droppedLogLines());
      },
    });
    const duration = new SeriesHistogram({
      name: 'http_request_duration_seconds',
      help: 'Time from the start of a request to the end of its response, in seconds.',
      labelNames: LABELS,
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
    duration.counter({
      name: 'http_requests_total',
      help: 'Requests answered, by method, route template and status.',
      registers: [registry],
    });
    app.decorate('metricsRegistry', Registry.merge([processMetrics(), registry]));

    // Each series is made on its first request and found after by its route's template (the same
    // string for every request of a route), then by method and status: no key is made per request.
    const known = new Map<string, KnownSeries[]>();
    requestLog.onCompleted((request, reply, route, ms) => {
      if (request.grpcCall != null) return; // counted as a gRPC call, in grpc_server_*
      const template = route ?? UNMATCHED_ROUTE;
      const { method } = request;
      const status = reply.statusCode;
      const injected = request.faults?.injected;
      const fault = injected === undefined || injected.length === 0 ? '' : injected.join(',');
      let ofRoute = known.get(template);
      if (ofRoute === undefined) {
        ofRoute = [];
        known.set(template, ofRoute);
      }
      let found: KnownSeries | undefined;
      for (const entry of ofRoute) {
        if (entry.status === status && entry.method === method && entry.fault === fault) found = entry;
      }
      if (found === undefined) {
        found = { method, status, fault, series: duration.series([method, template, String(status), fault]) };
        ofRoute.push(found);
      }
      found.series.observe(ms / 1000);
    });
  },
  { name: 'metrics' },
);
