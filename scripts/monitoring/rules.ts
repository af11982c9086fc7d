import { DURATION_BUCKETS } from '../../src/plugins/metrics.js';
import {
  API_ROUTES,
  AVAILABILITY_OBJECTIVE,
  EVENT_LOOP_LAG_SECONDS,
  INJECTED_FAULTS_SPEND_BUDGET,
  LATENCY_OBJECTIVE,
  LATENCY_THRESHOLD_SECONDS,
  RATE_LIMIT_REFUSED_SHARE,
  RESTARTS_PER_HOUR,
  RUNBOOK_BASE,
  SERVICE_SELECTOR,
  SLO_WINDOW_SECONDS,
} from './settings.js';

/**
 * The Prometheus rules, made from settings.ts: the SLIs recorded over the windows the alerts need,
 * the multi-window, multi-burn-rate alerts of the SRE workbook for each SLO, and the alerts on the
 * service's own state. `timeScale` divides every duration (windows, `for`), and nothing else, so
 * that a test can play hours in seconds on the same rules.
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
  rules: (RecordingRule | AlertingRule)[];
}

export interface RuleOptions {
  /** Every duration divided by this: 60 plays an hour in a minute. */
  timeScale?: number;
  /** Whether answers replaced by injected faults spend the budgets (settings.ts's choice by default). */
  injectedFaultsSpendBudget?: boolean;
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

/** Every window an SLI is recorded over: those of the alerts, and the SLO's own. */
const SLI_WINDOWS = [
  ...new Set([...FAST_BURN, ...SLOW_BURN].flatMap(({ long, short }) => [short, long])),
  SLO_WINDOW_SECONDS,
].sort((a, b) => a - b);

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

/** The recorded SLI of an SLO over a window: the share of /api answers that spent its budget. */
export const sliRecord = (window: number): string => `slo:errors:ratio_rate${duration(window)}`;

/** A selector of a metric, narrowed by SERVICE_SELECTOR and `matchers`. */
export function series(name: string, ...matchers: string[]): string {
  const all = [SERVICE_SELECTOR, ...matchers].filter((matcher) => matcher !== '');
  return all.length === 0 ? name : `${name}{${all.join(',')}}`;
}

/** `vector` with only the series of the service's jobs: those whose instances export `service_ready`. */
export const ofService = (vector: string): string =>
  `${vector} and on (job) group by (job) (${series('service_ready')})`;

/** `vector` with only the series of the service's instances. */
export const ofInstances = (vector: string): string => `${vector} and on (job, instance) ${series('service_ready')}`;

/** The matcher of the routes under /api. */
export const API = `route=~"${API_ROUTES}"`;

/** The rate of `selector`'s series of the service over `window`, summed over every instance. */
const sumRate = (selector: string, window: string) => `sum(${ofService(`rate(${selector}[${window}])`)})`;
/** The same, 0 when the series is absent (no fault injected, no error yet). */
const sumRateOr0 = (selector: string, window: string) => `(${sumRate(selector, window)} or vector(0))`;

function sliExpression(slo: Slo, window: string, spend: boolean): string {
  const counted = slo === 'availability' ? 'http_requests_total' : 'http_request_duration_seconds_count';
  const total = sumRate(series(counted, API), window);
  const injected = sumRateOr0(series('faults_injected_answers_total'), window);
  let bad: string;
  if (slo === 'availability') {
    bad = sumRateOr0(series('http_requests_total', API, 'status=~"5.."'), window);
    if (!spend) bad += `\n  - ${sumRateOr0(series('faults_injected_answers_total', 'status=~"5.."'), window)}`;
  } else {
    const fast = sumRate(
      series('http_request_duration_seconds_bucket', API, `le="${LATENCY_THRESHOLD_SECONDS}"`),
      window,
    );
    bad = `${total}\n  - ${fast}`;
    // A delayed request is taken as slow for its delay alone (FAULT_DELAY_MS over the threshold).
    if (!spend) bad += `\n  - ${sumRateOr0(series('faults_injected_total', 'kind="delay"'), window)}`;
  }
  const all = spend ? total : `${total}\n  - ${injected}`;
  return `clamp_min(\n  ${bad},\n  0\n)\n/\n(\n  ${all}\n)`;
}

const runbook = (alert: string): string => `${RUNBOOK_BASE}#${alert.toLowerCase()}`;

const percent = (share: number): string => `${num(share * 100)}%`;

/** The burn rate that spends a pair's share of the budget over its long window. */
const burn = (pair: BurnWindows) => num((pair.budgetShare * SLO_WINDOW_SECONDS) / pair.long);

/** When a burn alert fires, in words: `14.4 over 1h and 5m, or 6 over 6h and 30m`. */
export const burnThresholds = (speed: 'fast' | 'slow'): string =>
  (speed === 'fast' ? FAST_BURN : SLOW_BURN)
    .map((pair) => `${burn(pair)} over ${duration(pair.long)} and ${duration(pair.short)}`)
    .join(', or ');

function burnAlert(slo: Slo, speed: 'fast' | 'slow', scale: (seconds: number) => string): AlertingRule {
  const objective = OBJECTIVES[slo];
  const budget = num(1 - objective);
  const pairs = speed === 'fast' ? FAST_BURN : SLOW_BURN;
  const side = (window: number, pair: BurnWindows) => `${sliRecord(window)}{slo="${slo}"} / ${budget} > ${burn(pair)}`;
  const expr = pairs.map((pair) => `(\n  ${side(pair.long, pair)}\nand\n  ${side(pair.short, pair)}\n)`).join('\nor\n');
  const when = burnThresholds(speed);
  const name = `GreetingService${slo === 'availability' ? 'Availability' : 'Latency'}${speed === 'fast' ? 'Fast' : 'Slow'}Burn`;
  const what =
    slo === 'availability'
      ? `the ${percent(objective)} availability SLO (/api answers that are not 5xx)`
      : `the ${percent(objective)} latency SLO (/api answers within ${num(LATENCY_THRESHOLD_SECONDS * 1000)} ms)`;
  return {
    alert: name,
    expr,
    for: scale(speed === 'fast' ? 2 * MINUTE : 15 * MINUTE),
    labels: { severity: speed === 'fast' ? 'critical' : 'warning', slo },
    annotations: {
      summary: `The ${slo} error budget is burning ${speed === 'fast' ? 'fast: it will be gone in days' : 'steadily'}`,
      description:
        `The error budget of ${what} over ${duration(SLO_WINDOW_SECONDS)} is being spent {{ $value | humanize }} ` +
        `times as fast as the SLO allows (alerting above ${when}).`,
      runbook_url: runbook(name),
    },
  };
}

export function rules(options: RuleOptions = {}): RuleGroup[] {
  const timeScale = options.timeScale ?? 1;
  const spend = options.injectedFaultsSpendBudget ?? INJECTED_FAULTS_SPEND_BUDGET;
  const scale = (seconds: number) => duration(seconds / timeScale);
  if (!DURATION_BUCKETS.includes(LATENCY_THRESHOLD_SECONDS)) {
    throw new Error(
      `LATENCY_THRESHOLD_SECONDS ${LATENCY_THRESHOLD_SECONDS} is not a bucket bound: ${DURATION_BUCKETS}`,
    );
  }
  const slos = Object.keys(OBJECTIVES) as Slo[];
  const sli: RecordingRule[] = slos.flatMap((slo) => [
    ...SLI_WINDOWS.map((window) => ({
      record: sliRecord(window),
      expr: sliExpression(slo, scale(window), spend),
      labels: { slo },
    })),
    { record: 'slo:objective:ratio', expr: `vector(${num(OBJECTIVES[slo])})`, labels: { slo } },
    {
      record: 'slo:error_budget:remaining_ratio',
      expr: `1 - ${sliRecord(SLO_WINDOW_SECONDS)}{slo="${slo}"} / ${num(1 - OBJECTIVES[slo])}`,
      labels: { slo },
    },
  ]);
  const burns = slos.flatMap((slo) => [burnAlert(slo, 'fast', scale), burnAlert(slo, 'slow', scale)]);

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
    labels: { severity },
    annotations: { summary, description, runbook_url: runbook(name) },
  });
  const rateWindow = scale(10 * MINUTE);
  const service: AlertingRule[] = [
    alert(
      'GreetingServiceDown',
      // An instance that exported service_ready within the hour: the service's, though it exports nothing now.
      `${series('up')} == 0 and on (job, instance) max_over_time(${series('service_ready')}[${scale(HOUR)}])`,
      5 * MINUTE,
      'warning',
      'An instance cannot be scraped',
      'Prometheus has not scraped {{ $labels.instance }} ({{ $labels.job }}) for 5 minutes: it is down, or /metrics is not answered.',
    ),
    alert(
      'GreetingServiceNotReady',
      `${series('service_ready')} == 0`,
      5 * MINUTE,
      'warning',
      'An instance is not ready for traffic',
      '{{ $labels.instance }} has answered /readyz 503 for 5 minutes (shutting down, taken out by an operator, or its store unable to serve): it gets no traffic.',
    ),
    alert(
      'GreetingServiceRedisUnreachable',
      `${series('store_up', 'store="redis"')} == 0`,
      2 * MINUTE,
      'critical',
      'Redis cannot serve the service',
      '{{ $labels.instance }} has found Redis unable to serve for 2 minutes: the profile answers 503, and the rate limit lets requests through.',
    ),
    alert(
      'GreetingServiceRateLimitRefusing',
      `${sumRate(series('http_requests_total', API, 'status="429"'), rateWindow)}\n/\n${sumRate(series('http_requests_total', API), rateWindow)}\n> ${num(RATE_LIMIT_REFUSED_SHARE)}`,
      10 * MINUTE,
      'warning',
      'The rate limit refuses a large share of requests',
      `{{ $value | humanizePercentage }} of /api requests have been refused 429 by the rate limit for 10 minutes (alerting above ${percent(RATE_LIMIT_REFUSED_SHARE)}).`,
    ),
    alert(
      'GreetingServiceEventLoopLagging',
      ofInstances(`${series('nodejs_eventloop_lag_p99_seconds')} > ${num(EVENT_LOOP_LAG_SECONDS)}`),
      5 * MINUTE,
      'warning',
      'The event loop of an instance lags',
      `The event loop of {{ $labels.instance }} has lagged {{ $value | humanizeDuration }} (p99) for 5 minutes (alerting above ${num(EVENT_LOOP_LAG_SECONDS * 1000)} ms): every request there waits as long.`,
    ),
    alert(
      'GreetingServiceRestarting',
      ofInstances(`changes(${series('process_start_time_seconds')}[${scale(HOUR)}]) > ${RESTARTS_PER_HOUR}`),
      0,
      'warning',
      'An instance keeps restarting',
      `{{ $labels.instance }} has started {{ $value }} times in the last hour (alerting above ${RESTARTS_PER_HOUR}).`,
    ),
  ];
  return [
    { name: 'greeting-service-slis', rules: sli },
    { name: 'greeting-service-slo-burn', rules: burns },
    { name: 'greeting-service', rules: service },
  ];
}
