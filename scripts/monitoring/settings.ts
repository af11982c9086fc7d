/**
 * The values a team edits: the SLOs, what the alerts watch for, and where the service's series
 * are. `npm run monitoring` then writes the rules, the dashboard and their Kubernetes objects from
 * them (scripts/monitoring/write.ts); tests hold the files in deploy/ equal to what it writes.
 */

/** The window every SLO is measured over, and its error budget spent over, in seconds: 30 days. */
export const SLO_WINDOW_SECONDS = 30 * 24 * 3600;

/** Availability: the share of answers to /api that are not 5xx. */
export const AVAILABILITY_OBJECTIVE = 0.999;

/** Latency: the share of answers to /api given within the threshold. */
export const LATENCY_OBJECTIVE = 0.99;
/** Seconds; one of the bounds of `http_request_duration_seconds`'s buckets, since the SLI is read from them. */
export const LATENCY_THRESHOLD_SECONDS = 0.1;

/**
 * Whether answers replaced by an injected fault (FAULT_ERROR_RATE, the fault headers) spend the
 * budgets. False: they are counted apart, so that a chaos test does not spend the real budget.
 */
export const INJECTED_FAULTS_SPEND_BUDGET = false;

/**
 * The service's series are told from the rest of what Prometheus scrapes, whatever the scrape
 * job's name, by the jobs and instances that export `service_ready`, which only this service does.
 * This narrows them further, for a Prometheus that scrapes several deployments of it: a matcher
 * such as `namespace="production"` or `job="production/greeting-service"`; empty for all.
 */
export const SERVICE_SELECTOR = '';

/** The routes of the API, as the `route` label names them (any context path before `/api`). */
export const API_ROUTES = '(/.+)?/api/.+';

/** The rate limit is alerted on when it refuses more than this share of /api requests for 10 minutes. */
export const RATE_LIMIT_REFUSED_SHARE = 0.1;

/** Seconds of event-loop lag (p99) that, for 5 minutes, is alerted on. */
export const EVENT_LOOP_LAG_SECONDS = 0.1;

/** Restarts of one instance within an hour that are alerted on: more than this many. */
export const RESTARTS_PER_HOUR = 2;

/**
 * Where the alerts' runbook links point: docs/operations.md, with an anchor for each alert. Set it
 * to the address your team reads this repository's docs at (for example its page on your Git host).
 */
export const RUNBOOK_BASE = 'docs/operations.md';
