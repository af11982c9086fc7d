import {
  API,
  burnThresholds,
  fastBurnRates,
  GRPC_API,
  GRPC_REFUSED,
  GRPC_TIMED,
  num,
  OBJECTIVES,
  OWN,
  ofService,
  type Slo,
  series,
  sliRecord,
  TIMED,
} from './rules.js';
import { LATENCY_THRESHOLD_SECONDS } from './settings.js';

/**
 * The Grafana dashboard (its JSON model), made from the same settings and selectors as the rules:
 * traffic, errors, latency, the SLOs' budgets and burn, the rate limit, faults, gRPC calls, open
 * streams, the process and the store. Its variables are the data source, the namespace and the instance (all
 * of each by default); rates are over 5 minutes, which spans several scrapes at any usual interval.
 */

/** A panel's query, and whether a running service may give it no data. */
export interface PanelQuery {
  panel: string;
  expr: string;
  /** The streams' series: none until the service has WebSocket and event streams. */
  mayBeEmpty: boolean;
}

/** Grafana's thresholds: a colour from each value up; `line` draws them on a time series. */
interface Thresholds {
  steps: { color: string; value: number | null }[];
  line?: boolean;
}

interface Target {
  expr: string;
  legend: string;
  mayBeEmpty?: boolean;
}

interface PanelSpec {
  title: string;
  description: string;
  unit: string;
  targets: Target[];
  /** A stat of the last value rather than a time series. */
  stat?: boolean;
  /** The panel's width in Grafana's 24 columns. */
  width?: number;
  min?: number;
  max?: number;
  thresholds?: Thresholds;
}

const RATE = '5m';
const DATASOURCE = { type: 'prometheus', uid: `\${datasource}` };

/** The matchers of the variables: the namespaces and instances picked (`.*` for all). */
export const VARIABLES = { namespace: 'namespace=~"$namespace"', instance: 'instance=~"$instance"' };
const PICKED = [VARIABLES.namespace, VARIABLES.instance];

/** The service's series of the metric, of the namespaces and instances picked. */
const picked = (name: string, ...matchers: string[]) => series(name, ...matchers, ...PICKED);
/** The rate of the service's series of the metric. */
const rate = (name: string, ...matchers: string[]) => ofService(`rate(${picked(name, ...matchers)}[${RATE}])`, RATE);
/** The service's series of the metric (a gauge). */
const gauge = (name: string, ...matchers: string[]) => ofService(picked(name, ...matchers), RATE);
/** A recorded series of the service's, of the namespaces picked. */
const recorded = (record: string, slo: Slo) => `${record}{${OWN},slo="${slo}",${VARIABLES.namespace}}`;

const [PAGE_FAST, PAGE_SLOW] = fastBurnRates() as [number, number];

const SLO_TITLES: Record<Slo, string> = {
  availability: `Availability: /api answers not 5xx and gRPC calls not failed, objective ${num(OBJECTIVES.availability * 100)}%`,
  latency: `Latency: /api answers and unary gRPC calls within ${num(LATENCY_THRESHOLD_SECONDS * 1000)} ms, objective ${num(OBJECTIVES.latency * 100)}%`,
};

function rows(): { title: string; panels: PanelSpec[] }[] {
  const slos = Object.keys(OBJECTIVES) as Slo[];
  return [
    {
      title: 'Service level objectives',
      panels: [
        ...slos.map(
          (slo): PanelSpec => ({
            title: `${SLO_TITLES[slo]}: error budget left`,
            description: `The share of the ${slo} error budget over the SLO's window that is left (below 0: spent).`,
            unit: 'percentunit',
            stat: true,
            width: 6,
            thresholds: {
              steps: [
                { color: 'red', value: null },
                { color: 'green', value: 0 },
              ],
            },
            targets: [{ expr: recorded('slo:error_budget:remaining_ratio', slo), legend: '{{job}} {{namespace}}' }],
          }),
        ),
        ...slos.map(
          (slo): PanelSpec => ({
            title: `${slo[0]?.toUpperCase()}${slo.slice(1)}: burn rate`,
            description: `How many times as fast as the SLO allows the ${slo} budget is being spent; 1 spends it exactly over the window. The alerts page above ${burnThresholds('fast')}, and open a ticket above ${burnThresholds('slow')}.`,
            unit: 'none',
            width: 6,
            // The page's two burn rates as lines: 6 (over 6 h and 30 m) and 14.4 (over 1 h and 5 m).
            thresholds: {
              line: true,
              steps: [
                { color: 'green', value: null },
                { color: 'orange', value: PAGE_SLOW },
                { color: 'red', value: PAGE_FAST },
              ],
            },
            targets: ['5m', '1h', '6h', '3d'].map((window) => ({
              expr: `${recorded(sliRecord(seconds(window)), slo)} / on (service, slo) group_left () (1 - slo:objective:ratio{${OWN}})`,
              legend: `{{job}} {{namespace}} over ${window}`,
            })),
          }),
        ),
      ],
    },
    {
      title: 'Traffic and errors',
      panels: [
        {
          title: 'Requests by route',
          description: 'Requests answered per second, by route template.',
          unit: 'reqps',
          targets: [{ expr: `sum by (route) (${rate('http_requests_total')})`, legend: '{{route}}' }],
        },
        {
          title: 'Errors by status',
          description: 'Answers with a 4xx or 5xx status per second, by status (429: the rate limit).',
          unit: 'reqps',
          targets: [
            {
              expr: `sum by (status) (${rate('http_requests_total', 'status=~"[45].."')})`,
              legend: '{{status}}',
            },
          ],
        },
        {
          title: 'Latency of /api',
          description:
            "Percentiles of the /api answers' durations, from the histogram's buckets; the event stream's are not, as long as their clients listen.",
          unit: 's',
          targets: [0.5, 0.9, 0.99].map((quantile) => ({
            expr: `histogram_quantile(${quantile}, sum by (le) (${rate('http_request_duration_seconds_bucket', TIMED)}))`,
            legend: `p${quantile * 100}`,
          })),
        },
        {
          title: 'Rate limit: share refused',
          description:
            "The share of /api requests and gRPC calls to the API's services the rate limit refused (429, ResourceExhausted).",
          unit: 'percentunit',
          targets: [
            {
              expr:
                `(sum(${rate('http_requests_total', API, 'status="429"')} or ${rate('grpc_server_handled_total', GRPC_API, GRPC_REFUSED)}) or vector(0))` +
                ` / sum(${rate('http_requests_total', API)} or ${rate('grpc_server_handled_total', GRPC_API)})`,
              legend: 'refused',
            },
          ],
        },
        {
          title: 'Injected faults',
          description: 'Faults injected on purpose per second, by kind and source (FAULT_ settings or headers).',
          unit: 'reqps',
          targets: [
            {
              expr: `sum by (kind, source) (${rate('faults_injected_total')})`,
              legend: '{{kind}} ({{source}})',
            },
          ],
        },
      ],
    },
    {
      title: 'gRPC',
      panels: [
        {
          title: 'gRPC calls by method',
          description:
            'Calls ended per second, by service and method, whatever their code (gRPC, gRPC-Web and Connect alike).',
          unit: 'reqps',
          targets: [
            {
              expr: `sum by (grpc_service, grpc_method) (${rate('grpc_server_handled_total')})`,
              legend: '{{grpc_service}}/{{grpc_method}}',
            },
          ],
        },
        {
          title: 'gRPC errors by code',
          description:
            'Calls ended with a code other than OK per second, by code (Unknown, Internal, Unavailable, DeadlineExceeded and DataLoss spend the availability budget).',
          unit: 'reqps',
          targets: [
            {
              expr: `sum by (grpc_code) (${rate('grpc_server_handled_total', 'grpc_code!="OK"')})`,
              legend: '{{grpc_code}}',
            },
          ],
        },
        {
          title: 'Latency of unary gRPC calls',
          description:
            "Percentiles of the unary calls' durations to the API's services, from the histogram's buckets; streams last as long as their callers ask.",
          unit: 's',
          targets: [0.5, 0.9, 0.99].map((quantile) => ({
            expr: `histogram_quantile(${quantile}, sum by (le) (${rate('grpc_server_handling_seconds_bucket', GRPC_TIMED)}))`,
            legend: `p${quantile * 100}`,
          })),
        },
      ],
    },
    {
      title: 'Streams',
      panels: [
        {
          title: 'Open streams',
          description: 'WebSocket connections and event streams open now.',
          unit: 'short',
          targets: [
            {
              expr: `sum(${gauge('websocket_connections_open')})`,
              legend: 'WebSocket connections',
              mayBeEmpty: true,
            },
            { expr: `sum(${gauge('event_streams_open')})`, legend: 'event streams', mayBeEmpty: true },
          ],
        },
        {
          title: 'Stream messages',
          description: 'WebSocket messages and events sent per second.',
          unit: 'cps',
          targets: [
            {
              expr: `sum(${rate('websocket_messages_total')})`,
              legend: 'WebSocket messages',
              mayBeEmpty: true,
            },
            { expr: `sum(${rate('events_sent_total')})`, legend: 'events sent', mayBeEmpty: true },
          ],
        },
      ],
    },
    {
      title: 'Instances and the store',
      panels: [
        {
          title: 'Ready instances',
          description: 'Instances ready for traffic (service_ready), of those scraped (up).',
          unit: 'short',
          targets: [
            { expr: `sum(${picked('service_ready')})`, legend: 'ready' },
            { expr: `sum(${gauge('up')})`, legend: 'scraped' },
          ],
        },
        {
          title: 'Store up',
          description: 'Per instance, whether the store it keeps its state in (memory or Redis) can serve.',
          unit: 'short',
          min: 0,
          max: 1,
          targets: [{ expr: picked('store_up'), legend: '{{instance}} {{store}}' }],
        },
        {
          title: 'CPU',
          description: 'CPU time per second, per instance.',
          unit: 'percentunit',
          targets: [{ expr: rate('process_cpu_seconds_total'), legend: '{{instance}}' }],
        },
        {
          title: 'Memory',
          description: 'Resident memory and heap used, per instance.',
          unit: 'bytes',
          targets: [
            { expr: gauge('process_resident_memory_bytes'), legend: '{{instance}} resident' },
            { expr: gauge('nodejs_heap_size_used_bytes'), legend: '{{instance}} heap used' },
          ],
        },
        {
          title: 'Event loop lag (p99)',
          description: 'How late the event loop runs what is due, per instance: every request there waits as long.',
          unit: 's',
          targets: [{ expr: gauge('nodejs_eventloop_lag_p99_seconds'), legend: '{{instance}}' }],
        },
        {
          title: 'Restarts in the last hour',
          description: 'Times each instance started within the last hour.',
          unit: 'short',
          targets: [
            { expr: ofService(`changes(${picked('process_start_time_seconds')}[1h])`, '1h'), legend: '{{instance}}' },
          ],
        },
        {
          title: 'Log lines dropped',
          description: 'Log lines dropped per second because standard output had not taken the ones before them.',
          unit: 'cps',
          targets: [{ expr: rate('log_lines_dropped_total'), legend: '{{instance}}' }],
        },
      ],
    },
  ];
}

function seconds(window: string): number {
  const [, amount, unit] = /^(\d+)([mhd])$/.exec(window) ?? [];
  return Number(amount) * { m: 60, h: 3600, d: 86400 }[unit as 'm' | 'h' | 'd'];
}

/** Every panel's queries, for the test that runs them against a real Prometheus. */
export function panelQueries(): PanelQuery[] {
  return rows().flatMap((row) =>
    row.panels.flatMap((panel) =>
      panel.targets.map((target) => ({
        panel: panel.title,
        expr: target.expr,
        mayBeEmpty: target.mayBeEmpty ?? false,
      })),
    ),
  );
}

/** A variable of the values of a label of `service_ready`: several may be picked, all of them by default (`.*`). */
function variable(name: string, label: string, query: string): Record<string, unknown> {
  return {
    name,
    label,
    type: 'query',
    datasource: DATASOURCE,
    query: { query, refId: name },
    definition: query,
    refresh: 2,
    multi: true,
    includeAll: true,
    allValue: '.*',
    current: { selected: true, text: ['All'], value: ['$__all'] },
    sort: 1,
  };
}

/** Grafana's JSON model of the dashboard. */
export function dashboard(): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows()) {
    panels.push({ type: 'row', title: row.title, id: id++, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y } });
    y += 1;
    let x = 0;
    for (const panel of row.panels) {
      const w = panel.width ?? 8;
      if (x + w > 24) {
        x = 0;
        y += 8;
      }
      panels.push({
        type: panel.stat ? 'stat' : 'timeseries',
        title: panel.title,
        description: panel.description,
        id: id++,
        datasource: DATASOURCE,
        gridPos: { h: 8, w, x, y },
        fieldConfig: {
          defaults: {
            unit: panel.unit,
            ...(panel.min === undefined ? {} : { min: panel.min }),
            ...(panel.max === undefined ? {} : { max: panel.max }),
            ...(panel.thresholds === undefined
              ? {}
              : {
                  thresholds: { mode: 'absolute', steps: panel.thresholds.steps },
                  ...(panel.thresholds.line ? { custom: { thresholdsStyle: { mode: 'line' } } } : {}),
                }),
          },
          overrides: [],
        },
        options: panel.stat
          ? { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'value' }
          : { legend: { displayMode: 'list', placement: 'bottom', showLegend: true }, tooltip: { mode: 'multi' } },
        targets: panel.targets.map((target, index) => ({
          datasource: DATASOURCE,
          expr: target.expr,
          legendFormat: target.legend,
          refId: String.fromCharCode(65 + index),
        })),
      });
      x += w;
    }
    y += 8;
  }
  return {
    title: 'Greeting and Echo Service',
    uid: 'greeting-service',
    description: 'Generated by npm run monitoring from scripts/monitoring/: do not edit here.',
    tags: ['greeting-service'],
    timezone: 'utc',
    schemaVersion: 39,
    version: 1,
    editable: true,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    templating: {
      list: [
        { name: 'datasource', label: 'Prometheus', type: 'datasource', query: 'prometheus', current: {} },
        variable('namespace', 'Namespace', `label_values(${series('service_ready')}, namespace)`),
        variable('instance', 'Instance', `label_values(${series('service_ready', VARIABLES.namespace)}, instance)`),
      ],
    },
    panels,
  };
}
