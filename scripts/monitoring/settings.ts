/**
 * The values a team edits: the SLOs, what the alerts watch for, and where the service's series
 * are. `npm run monitoring` then writes the rules, the dashboard and their Kubernetes objects from
 * them (scripts/monitoring/write.ts); tests hold the files in deploy/ equal to what it writes.
 */

/** The window every SLO is measured over, and its error budget spent over, in seconds: 30 days. */
export const SLO_WINDOW_SECONDS = 30 * 24 * 3600;
/**
 * How often the SLI over the whole window (and the budget left) is evaluated, in seconds: a rate
 * over 30 days moves little in a minute, and costs the most of all. The server must keep the whole
 * window and this much more (`--storage.tsdb.retention.time` of 31d at least), or it covers less.
 */
export const SLO_WINDOW_EVALUATION_SECONDS = 60;

/**
 * Availability: the share of answers to /api that are not 5xx, and of calls to the API's gRPC
 * services that end with no code of GRPC_SERVER_FAULT_CODES.
 */
export const AVAILABILITY_OBJECTIVE = 0.999;

/** Latency: the share of answers to /api, and of unary calls to the API's gRPC services, given within the threshold. */
export const LATENCY_OBJECTIVE = 0.99;
/**
 * Seconds; one of the bounds of the buckets of `http_request_duration_seconds` (and of
 * `grpc_server_handling_seconds`, which has the same), since the SLI is read from them.
 */
export const LATENCY_THRESHOLD_SECONDS = 0.1;

/**
 * Whether answers and calls an injected fault touched (`fault` label of `http_requests_total`,
 * `http_request_duration_seconds` and `grpc_server_handled_total`: FAULT_ settings, the fault
 * headers) count in the SLIs. False:
 * they are left out, so that a chaos test does not spend the real budget; GreetingServiceFaultsInjected
 * tells of faults where they are not expected.
 */
export const INJECTED_FAULTS_SPEND_BUDGET = false;

/** The `service` label of every recorded series and alert: what tells these SLOs from another service's. */
export const SERVICE_NAME = 'greeting-service';

/**
 * The labels that tell one deployment of the service from another (staging and production in one
 * Prometheus): each SLI is one per set of their values, and every alert carries them.
 */
export const DEPLOYMENT_LABELS = ['namespace', 'job'];

/**
 * The service's series are told from the rest of what Prometheus scrapes, even in a scrape job
 * shared with other apps, by the instances that export `service_ready`, which only this service
 * does. This narrows them further: a matcher such as `namespace="production"`; empty for all.
 */
export const SERVICE_SELECTOR = '';

/** The routes of the API, as the `route` label names them (any context path before `/api`). */
export const API_ROUTES = '(/.+)?/api/.+';
/**
 * The routes whose answers last as long as their client listens (the event stream): out of the
 * latency SLI, since their duration is the client's choice. The WebSocket's is its handshake alone.
 */
export const LONG_LIVED_ROUTES = '(/.+)?/api/events';

/**
 * The gRPC services of the API, as the `grpc_service` label names them: the gRPC tutorials'
 * Greeter and every service of the package `greeting`; not gRPC's own health and reflection
 * services, which are to the API what /readyz is to /api.
 */
export const GRPC_API_SERVICES = 'helloworld[.]Greeter|greeting[.].+';
/**
 * The gRPC status codes (`grpc_code`, as Go names them) of a call the service failed, which spend
 * the availability budget as a 5xx does: the codes the HTTP mapping of gRPC gives 500, 503 and 504.
 * The others are the caller's: a bad or refused request (InvalidArgument, NotFound, AlreadyExists,
 * FailedPrecondition, Aborted, OutOfRange, PermissionDenied, Unauthenticated), a call it ended
 * (Canceled), the rate limit or a message over BODY_LIMIT (ResourceExhausted, the HTTP 429 and
 * 413), or a method the service does not have (Unimplemented, a path no route matched).
 */
export const GRPC_SERVER_FAULT_CODES = ['Unknown', 'Internal', 'Unavailable', 'DeadlineExceeded', 'DataLoss'];

/** The rate limit is alerted on when it refuses more than this share of /api requests for 10 minutes. */
export const RATE_LIMIT_REFUSED_SHARE = 0.1;

/** Seconds of event-loop lag (p99) that, for 5 minutes, is alerted on. */
export const EVENT_LOOP_LAG_SECONDS = 0.1;

/** Restarts of one instance within an hour that are alerted on: more than this many. */
export const RESTARTS_PER_HOUR = 2;

/**
 * A deployment none of whose instances is ready pages; so does one ready less than this share of
 * the last 15 minutes while going up and down (a crash loop).
 */
export const CRASH_LOOP_READY_SHARE = 0.5;

/**
 * How long after its last instance was seen a deployment is still expected, in seconds: its outage
 * pages that long, unless silenced (a deployment removed on purpose).
 */
export const DEPLOYMENT_MEMORY_SECONDS = 7 * 24 * 3600;

/**
 * Where the alerts' runbook links point: the address of docs/operations.md where your team reads
 * it, each alert an anchor of it. Absolute, so that a notification can open it.
 */
export const RUNBOOK_BASE_URL = 'https://github.com/greeting-service/greeting-service/blob/main/docs/operations.md';
