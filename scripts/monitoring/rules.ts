import { DURATION_BUCKETS } from '../../src/plugins/metrics.js';
import {
  API_ROUTES,
  AVAILABILITY_OBJECTIVE,
  CRASH_LOOP_READY_SHARE,
  DEPLOYMENT_LABELS,
  DEPLOYMENT_MEMORY_SECONDS,
  EVENT_LOOP_LAG_SECONDS,
  GRPC_API_SERVICES,
  GRPC_SERVER_FAULT_CODES,
  INJECTED_FAULTS_SPEND_BUDGET,
  LATENCY_OBJECTIVE,
  LATENCY_THRESHOLD_SECONDS,
  LONG_LIVED_ROUTES,
  RATE_LIMIT_REFUSED_SHARE,
  RESTARTS_PER_HOUR,
  RUNBOOK_BASE_URL,
  SERVICE_NAME,
  SERVICE_SELECTOR,
  SLO_WINDOW_EVALUATION_SECONDS,
  SLO_WINDOW_SECONDS,
} from './settings.js';

/**
 * The Prometheus rules, made from settings.ts: the SLIs of each deployment recorded over the
 * windows the alerts need, the multi-window, multi-burn-rate alerts of the SRE workbook for each
 * SLO, a page for a deployment with no instance ready, and the alerts on each instance's state.
 * `timeScale` divides every duration (windows, `for`, intervals), and nothing else, so that a test
 * can play hours in seconds on the same rules.
 */

export interface RecordingRule {
  record: string;
  expr: string;
  labels?: Record<string, string>;
}

export interface AlertingRule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: 'critical' | 'warning'; [name: string]: string };
  annotations: { summary: string; description: string; runbook_url: string };
}

export interface RuleGroup {
  name: string;
  interval?: string;
  rules: (RecordingRule | AlertingRule)[];
}

export interface RuleOptions {
  /** Every duration divided by this: 60 plays an hour in a minute. */
  timeScale?: number;
  /** Whether answers injected faults touched count in the SLIs (settings.ts's choice by default). */
  injectedFaultsSpendBudget?: boolean;
  /** The latency SLO's threshold in seconds (settings.ts's by default): a bound of the histogram's buckets. */
  latencyThresholdSeconds?: number;
}

export type Slo = 'availability' | 'latency';

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A burn-rate alert's pair of windows, and the share of the whole budget spent over the long one at its threshold. */
interface BurnWindows {
  long: number;
  short: number;
  budgetShare: number;
}

/** The SRE workbook's pairs: paging at 2% of the budget in 1 h or 5% in 6 h, a ticket at 10% in 1 or 3 days. */
const FAST_BURN: BurnWindows[] = [
  { long: HOUR, short: 5 * MINUTE, budgetShare: 0.02 },
  { long: 6 * HOUR, short: 30 * MINUTE, budgetShare: 0.05 },
];
const SLOW_BURN: BurnWindows[] = [
  { long: DAY, short: 2 * HOUR, budgetShare: 0.1 },
  { long: 3 * DAY, short: 6 * HOUR, budgetShare: 0.1 },
];

/** Every window an SLI is recorded over for the alerts; the SLO's own is recorded in a slower group of its own. */
const ALERT_WINDOWS = [...new Set([...FAST_BURN, ...SLOW_BURN].flatMap(({ long, short }) => [short, long]))].sort(
  (a, b) => a - b,
);

/** The window over which a deployment's readiness is averaged to tell a crash loop. */
const CRASH_LOOP_WINDOW = 15 * MINUTE;
/**
 * How often the deployments' readiness and its page are evaluated, whatever the server's default
 * (a minute unless set): a dead service is seen one scrape and at most this long after it dies.
 */
const DEPLOYMENT_EVALUATION = 15;

export const OBJECTIVES: Record<Slo, number> = { availability: AVAILABILITY_OBJECTIVE, latency: LATENCY_OBJECTIVE };

/** A number as PromQL and a reader want it: no binary noise (1 - 0.999 is 0.001, not 0.0010000000000000009). */
export const num = (value: number): string => String(Number(value.toPrecision(10)));

/** Seconds as a Prometheus duration in its largest whole unit. */
function duration(seconds: number): string {
  const ms = Math.round(seconds * 1000);
  if (ms <= 0) throw new Error(`a duration of ${seconds} s is too short`);
  for (const [unit, size] of [
    ['d', DAY * 1000],
    ['h', HOUR * 1000],
    ['m', MINUTE * 1000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The recorded SLI of an SLO over a window: the share of /api answers and gRPC calls that spent its budget. */
export const sliRecord = (window: number): string => `slo:errors:ratio_rate${duration(window)}`;

/** Per instance: when it last exported `service_ready`, kept for DEPLOYMENT_MEMORY_SECONDS after. */
export const LAST_SEEN = 'greeting_service:instance_last_seen:timestamp_seconds';
/** Per deployment: 1 when an instance is ready, 0 when none is (though one was seen within the memory). */
export const READY = 'greeting_service:deployment_ready:max';

/** The labels of a deployment, and of an instance of it, as `by` and `on` list them. */
export const DEPLOYMENT = DEPLOYMENT_LABELS.join(', ');
export const INSTANCE = [...DEPLOYMENT_LABELS, 'instance'].join(', ');

/** The matcher of this service's recorded series and alerts. */
export const OWN = `service="${SERVICE_NAME}"`;

/** A selector of a metric, narrowed by SERVICE_SELECTOR and `matchers`. */
export function series(name: string, ...matchers: string[]): string {
  const all = [SERVICE_SELECTOR, ...matchers].filter((matcher) => matcher !== '');
  return all.length === 0 ? name : `${name}{${all.join(',')}}`;
}

/**
 * `vector` with only the series of the service's instances: those that exported `service_ready`,
 * which no other app does, at some time within `window`. Never empty for a missed scrape, and
 * never another app's, though it shares the scrape job.
 */
export const ofService = (vector: string, window: string): string =>
  `${vector} and on (${INSTANCE}) max_over_time(${series('service_ready')}[${window}])`;

/** The matcher of the routes under /api. */
export const API = `route=~"${API_ROUTES}"`;
/** The matcher of the routes whose answers the latency SLO times: /api, but for those that last as long as their client listens. */
export const TIMED = `${API},route!~"${LONG_LIVED_ROUTES}"`;

/** The matcher of the calls to the API's gRPC services. */
export const GRPC_API = `grpc_service=~"${GRPC_API_SERVICES}"`;
/** The matcher of the calls the latency SLO times: unary ones; a stream lasts as long as its caller asks. */
export const GRPC_TIMED = `${GRPC_API},grpc_type="unary"`;
/**
 * The matcher of the calls the rate limit refused: ResourceExhausted, its code, which a message
 * over BODY_LIMIT also gets (the metrics do not tell them apart).
 */
export const GRPC_REFUSED = 'grpc_code="ResourceExhausted"';
/** The matcher of the calls the service failed: their code is a server fault's. */
export const GRPC_FAILED = `grpc_code=~"${GRPC_SERVER_FAULT_CODES.join('|')}"`;

/**
 * The matcher of the histogram's bucket at `seconds`, whichever way Prometheus writes its bound:
 * `0.1` as it is, `1` as `1` (Prometheus 2) or `1.0` (Prometheus 3).
 */
export function bucket(seconds: number): string {
  const bound = num(seconds);
  const pattern = Number.isInteger(seconds) ? `${bound}(\\\\.0+)?` : `${bound.replace('.', '\\\\.')}0*`;
  return `le=~"${pattern}"`;
}

/**
 * The rate of the service's series of the selectors over `window`, summed by deployment. Each
 * series is of one selector alone (an answer's have a `route`, a gRPC call's a `grpc_method`), so
 * `or` takes them all, and a deployment with series of only one still has a sum.
 */
const sumRate = (window: string, ...selectors: string[]) => {
  const rates = selectors.map((selector) => `rate(${selector}[${window}])`);
  const vector = rates.length === 1 ? (rates[0] as string) : `(\n      ${rates.join('\n    or\n      ')}\n    )`;
  return `sum by (${DEPLOYMENT}) (\n    ${ofService(vector, window)}\n  )`;
};

function sliExpression(slo: Slo, window: string, spend: boolean, threshold: number): string {
  // Answers and calls no fault touched; the label is empty (absent) on all others.
  const real = spend ? [] : ['fault=""'];
  if (slo === 'availability') {
    const total = sumRate(
      window,
      series('http_requests_total', API, ...real),
      series('grpc_server_handled_total', GRPC_API, ...real),
    );
    const bad = sumRate(
      window,
      series('http_requests_total', API, ...real, 'status=~"5.."'),
      series('grpc_server_handled_total', GRPC_API, ...real, GRPC_FAILED),
    );
    // 0, not nothing, for a deployment without a 5xx or a failed call.
    return `(\n  ${bad}\nor\n  0 * ${total}\n)\n/\n  ${total}`;
  }
  const total = sumRate(
    window,
    series('http_request_duration_seconds_count', TIMED, ...real),
    series('grpc_server_handling_seconds_count', GRPC_TIMED, ...real),
  );
  const fast = sumRate(
    window,
    series('http_request_duration_seconds_bucket', TIMED, ...real, bucket(threshold)),
    series('grpc_server_handling_seconds_bucket', GRPC_TIMED, ...real, bucket(threshold)),
  );
  return `(\n  ${total}\n-\n  ${fast}\n)\n/\n  ${total}`;
}

const runbook = (alert: string): string => `${RUNBOOK_BASE_URL}#${alert.toLowerCase()}`;

const percent = (share: number): string => `${num(share * 100)}%`;

/** The burn rate that spends a pair's share of the budget over its long window. */
const burn = (pair: BurnWindows) => num((pair.budgetShare * SLO_WINDOW_SECONDS) / pair.long);

/** The page's thresholds: the burn rate of each fast pair (14.4 and 6 for a 30-day window). */
export const fastBurnRates = (): number[] => FAST_BURN.map((pair) => Number(burn(pair)));

/** When a burn alert fires, in words: `14.4 over 1h and 5m, or 6 over 6h and 30m`. */
export const burnThresholds = (speed: 'fast' | 'slow'): string =>
  (speed === 'fast' ? FAST_BURN : SLOW_BURN)
    .map((pair) => `${burn(pair)} over ${duration(pair.long)} and ${duration(pair.short)}`)
    .join(', or ');

/** Which deployment, in an alert's text: its job, and its namespace where it has one. */
const WHICH = '{{ $labels.job }}{{ with $labels.namespace }} in {{ . }}{{ end }}';

function burnAlert(
  slo: Slo,
  speed: 'fast' | 'slow',
  scale: (seconds: number) => string,
  threshold: number,
): AlertingRule {
  const objective = OBJECTIVES[slo];
  const budget = num(1 - objective);
  const pairs = speed === 'fast' ? FAST_BURN : SLOW_BURN;
  const side = (window: number, pair: BurnWindows) =>
    `${sliRecord(window)}{${OWN},slo="${slo}"} / ${budget} > ${burn(pair)}`;
  const expr = pairs.map((pair) => `(\n  ${side(pair.long, pair)}\nand\n  ${side(pair.short, pair)}\n)`).join('\nor\n');
  const when = burnThresholds(speed);
  const name = `GreetingService${slo === 'availability' ? 'Availability' : 'Latency'}${speed === 'fast' ? 'Fast' : 'Slow'}Burn`;
  const what =
    slo === 'availability'
      ? `the ${percent(objective)} availability SLO (/api answers that are not 5xx, gRPC calls the service did not fail)`
      : `the ${percent(objective)} latency SLO (/api answers and unary gRPC calls within ${num(threshold * 1000)} ms)`;
  return {
    alert: name,
    expr,
    for: scale(speed === 'fast' ? 2 * MINUTE : 15 * MINUTE),
    labels: { severity: speed === 'fast' ? 'critical' : 'warning', service: SERVICE_NAME, slo },
    annotations: {
      summary: `The ${slo} error budget of ${WHICH} is burning ${speed === 'fast' ? 'fast: it will be gone in days' : 'steadily'}`,
      description:
        `The error budget of ${what} over ${duration(SLO_WINDOW_SECONDS)} of ${WHICH} is being spent {{ $value | humanize }} ` +
        `times as fast as the SLO allows (alerting above ${when}).`,
      runbook_url: runbook(name),
    },
  };
}

export function rules(options: RuleOptions = {}): RuleGroup[] {
  const timeScale = options.timeScale ?? 1;
  const spend = options.injectedFaultsSpendBudget ?? INJECTED_FAULTS_SPEND_BUDGET;
  const threshold = options.latencyThresholdSeconds ?? LATENCY_THRESHOLD_SECONDS;
  const scale = (seconds: number) => duration(seconds / timeScale);
  if (!DURATION_BUCKETS.includes(threshold)) {
    throw new Error(`the latency threshold ${threshold} is not a bucket bound: ${DURATION_BUCKETS}`);
  }
  if (!/^https?:\/\/[^/]/.test(RUNBOOK_BASE_URL)) {
    throw new Error(`RUNBOOK_BASE_URL ${RUNBOOK_BASE_URL} is not an absolute http(s) address`);
  }
  const own = { service: SERVICE_NAME };
  const slos = Object.keys(OBJECTIVES) as Slo[];
  const sliRule = (slo: Slo, window: number): RecordingRule => ({
    record: sliRecord(window),
    expr: sliExpression(slo, scale(window), spend, threshold),
    labels: { ...own, slo },
  });
  const slis: RecordingRule[] = slos.flatMap((slo) => [
    ...ALERT_WINDOWS.map((window) => sliRule(slo, window)),
    { record: 'slo:objective:ratio', expr: `vector(${num(OBJECTIVES[slo])})`, labels: { ...own, slo } },
  ]);
  const sloWindow: RecordingRule[] = slos.flatMap((slo) => [
    sliRule(slo, SLO_WINDOW_SECONDS),
    {
      record: 'slo:error_budget:remaining_ratio',
      expr: `1 - ${sliRecord(SLO_WINDOW_SECONDS)}{${OWN},slo="${slo}"} / ${num(1 - OBJECTIVES[slo])}`,
      labels: { ...own, slo },
    },
  ]);
  const burns = slos.flatMap((slo) => [
    burnAlert(slo, 'fast', scale, threshold),
    burnAlert(slo, 'slow', scale, threshold),
  ]);

  const deployments: RecordingRule[] = [
    {
      record: LAST_SEEN,
      // Its own last value while the instance exports nothing, until that is older than the memory.
      expr:
        `max by (${INSTANCE}) (timestamp(${series('service_ready')}))\nor\n` +
        `  max by (${INSTANCE}) (max_over_time(${LAST_SEEN}{${OWN}}[${scale(HOUR)}])) > time() - ${num(DEPLOYMENT_MEMORY_SECONDS / timeScale)}`,
      labels: { ...own },
    },
    {
      record: READY,
      expr: `max by (${DEPLOYMENT}) (${series('service_ready')})\nor\n  0 * max by (${DEPLOYMENT}) (${LAST_SEEN}{${OWN}})`,
      labels: { ...own },
    },
  ];

  const alert = (
    name: string,
    expr: string,
    forSeconds: number,
    severity: 'critical' | 'warning',
    summary: string,
    description: string,
  ): AlertingRule => ({
    alert: name,
    expr,
    ...(forSeconds > 0 ? { for: scale(forSeconds) } : {}),
    labels: { severity, service: SERVICE_NAME },
    annotations: { summary, description, runbook_url: runbook(name) },
  });
  const rateWindow = scale(10 * MINUTE);
  const crashLoop = scale(CRASH_LOOP_WINDOW);
  const ready = `${READY}{${OWN}}`;
  const service: AlertingRule[] = [
    alert(
      'GreetingServiceUnavailable',
      `avg_over_time(${ready}[${crashLoop}]) and ${ready} == 0\nor\n` +
        `avg_over_time(${ready}[${crashLoop}]) < ${num(CRASH_LOOP_READY_SHARE)} and changes(${ready}[${crashLoop}]) > 2`,
      2 * MINUTE,
      'critical',
      `No instance of ${WHICH} is ready`,
      `No instance of ${WHICH} has been ready for 2 minutes, or they keep going down: ` +
        `one was ready {{ $value | humanizePercentage }} of the last ${duration(CRASH_LOOP_WINDOW)} ` +
        `(alerting at none now, or below ${percent(CRASH_LOOP_READY_SHARE)} while going up and down). Clients get no answer.`,
    ),
    alert(
      'GreetingServiceDown',
      // An instance that exported service_ready within the memory: the service's, though it exports nothing now.
      `${series('up')} == 0 and on (${INSTANCE}) ${LAST_SEEN}{${OWN}}`,
      5 * MINUTE,
      'warning',
      'An instance cannot be scraped',
      'Prometheus has not scraped {{ $labels.instance }} ({{ $labels.job }}) for 5 minutes: it is down, or /metrics is not answered.',
    ),
    alert(
      'GreetingServiceFaultsInjected',
      `sum by (${INSTANCE}) (\n  ${ofService(`rate(${series('faults_injected_total')}[${scale(5 * MINUTE)}])`, scale(5 * MINUTE))}\n) > 0\n` +
        `unless on (${INSTANCE}) max_over_time(${series('faults_expected')}[${scale(5 * MINUTE)}]) == 1`,
      // Any fault injected is one too many here: nothing to wait out.
      0,
      'critical',
      `Faults are injected into ${WHICH}, where they are not expected`,
      '{{ $labels.instance }} has injected {{ $value | humanize }} faults per second over the last 5 minutes (FAULT_ settings or fault headers), ' +
        'and its FAULTS_EXPECTED is not true: its clients get errors and delays on purpose, which no SLO counts.',
    ),
    alert(
      'GreetingServiceNotReady',
      // No ready sample in 5 minutes: a missed scrape neither starts it over nor ends it.
      `max_over_time(${series('service_ready')}[${scale(5 * MINUTE)}]) == 0`,
      0,
      'warning',
      'An instance is not ready for traffic',
      '{{ $labels.instance }} has answered /readyz 503 for 5 minutes (shutting down, taken out by an operator, or its store unable to serve): it gets no traffic.',
    ),
    alert(
      'GreetingServiceRedisUnreachable',
      ofService(`max_over_time(${series('store_up', 'store="redis"')}[${scale(2 * MINUTE)}]) == 0`, scale(2 * MINUTE)),
      0,
      'critical',
      'Redis cannot serve the service',
      '{{ $labels.instance }} has found Redis unable to serve for 2 minutes: the profile answers 503, and the rate limit lets requests through.',
    ),
    alert(
      'GreetingServiceRateLimitRefusing',
      `${sumRate(rateWindow, series('http_requests_total', API, 'status="429"'), series('grpc_server_handled_total', GRPC_API, GRPC_REFUSED))}\n/\n` +
        `${sumRate(rateWindow, series('http_requests_total', API), series('grpc_server_handled_total', GRPC_API))}\n> ${num(RATE_LIMIT_REFUSED_SHARE)}`,
      10 * MINUTE,
      'warning',
      `The rate limit of ${WHICH} refuses a large share of requests`,
      `{{ $value | humanizePercentage }} of /api requests and gRPC calls have been refused by the rate limit (429, ResourceExhausted) for 10 minutes (alerting above ${percent(RATE_LIMIT_REFUSED_SHARE)}).`,
    ),
    alert(
      'GreetingServiceEventLoopLagging',
      ofService(
        `min_over_time(${series('nodejs_eventloop_lag_p99_seconds')}[${scale(5 * MINUTE)}]) > ${num(EVENT_LOOP_LAG_SECONDS)}`,
        scale(5 * MINUTE),
      ),
      0,
      'warning',
      'The event loop of an instance lags',
      `The event loop of {{ $labels.instance }} has lagged {{ $value | humanizeDuration }} (p99) or more for 5 minutes (alerting above ${num(EVENT_LOOP_LAG_SECONDS * 1000)} ms): every request there waits as long.`,
    ),
    alert(
      'GreetingServiceRestarting',
      ofService(`changes(${series('process_start_time_seconds')}[${scale(HOUR)}]) > ${RESTARTS_PER_HOUR}`, scale(HOUR)),
      0,
      'warning',
      'An instance keeps restarting',
      `{{ $labels.instance }} has started {{ $value }} times in the last hour (alerting above ${RESTARTS_PER_HOUR}).`,
    ),
  ];
  const [unavailable, down, ...instances] = service as [AlertingRule, AlertingRule, ...AlertingRule[]];
  return [
    { name: 'greeting-service-slis', rules: slis },
    { name: 'greeting-service-slo-window', interval: scale(SLO_WINDOW_EVALUATION_SECONDS), rules: sloWindow },
    { name: 'greeting-service-slo-burn', rules: burns },
    // In one group, so that the alerts read what the rules before them recorded at the same time.
    {
      name: 'greeting-service-deployments',
      interval: scale(DEPLOYMENT_EVALUATION),
      rules: [...deployments, unavailable, down],
    },
    { name: 'greeting-service', rules: instances },
  ];
}
