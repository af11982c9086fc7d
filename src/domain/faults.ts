import { type DelayRange, MAX_FAULT_DELAY_MS } from '../config/operations.js';

/**
 * Which faults a request gets: drawn at random as the FAULT_ settings say, and asked for by the
 * caller with Envoy's fault filter's headers (read as Envoy reads them, so that a suite written for
 * Envoy works unchanged) and with `x-fault-connection`. Free of HTTP's machinery: headers in,
 * a plan out; the plugin carries it out.
 */

/** The ways a connection is broken instead of answered. */
export const CONNECTION_FAULTS = ['reset', 'empty', 'truncate', 'malformed'] as const;
export type ConnectionFault = (typeof CONNECTION_FAULTS)[number];

/** Every kind of fault, as counted in /metrics and named in the log line. */
export const FAULT_KINDS = ['delay', 'abort', 'throughput', ...CONNECTION_FAULTS] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Where a fault came from: the FAULT_ settings' draw, or the request's own headers. */
export type FaultSource = 'settings' | 'headers';

export interface FaultSettings {
  /** The share of requests answered with `errorStatus` instead, 0 to 1. */
  errorRate: number;
  errorStatus: number;
  /** The share of requests held for a time drawn from `delayMs`, 0 to 1. */
  delayRate: number;
  delayMs: DelayRange;
  /** Whether the request headers may ask for faults. */
  headers: boolean;
}

/** What is done to one request, in this order: held, then answered `abort` (else served), its body paced, its connection broken. */
export interface FaultPlan {
  delay: { ms: number; source: FaultSource } | null;
  /** The status answered instead; for a gRPC call that asked by Envoy's gRPC header, the gRPC status too. */
  abort: { status: number; grpcStatus: number | null; source: FaultSource } | null;
  /** KiB per second the answer's body is sent at, at most. */
  throughput: number | null;
  connection: ConnectionFault | null;
}

/** Envoy's header names (its fault filter's documentation, "Controlling fault injection via HTTP headers"). */
export const FAULT_HEADERS = {
  abort: 'x-envoy-fault-abort-request',
  abortGrpc: 'x-envoy-fault-abort-grpc-request',
  abortPercentage: 'x-envoy-fault-abort-request-percentage',
  delay: 'x-envoy-fault-delay-request',
  delayPercentage: 'x-envoy-fault-delay-request-percentage',
  throughput: 'x-envoy-fault-throughput-response',
  throughputPercentage: 'x-envoy-fault-throughput-response-percentage',
  connection: 'x-fault-connection',
} as const;

/** Whether any setting turns fault injection on: otherwise nothing of it is installed. */
/**
 * The HTTP status of each gRPC status from 1 to 16, as gRPC's own mapping (google.rpc.Code) gives
 * it: what an aborted call's envelope and counts say.
 */
const HTTP_STATUS_OF_GRPC = [499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401];

export function faultsOn(settings: FaultSettings): boolean {
  return settings.errorRate > 0 || settings.delayRate > 0 || settings.headers;
}

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/**
 * A header's unsigned integer, as Envoy's absl::SimpleAtoi reads it: white space around it and a
 * leading `+` allowed; anything else is no number. Only the first value counts, as with Envoy: a
 * field sent twice arrives joined with `, `.
 */
function unsigned(value: string | string[] | undefined): number | null {
  if (value === undefined) return null;
  const first = (Array.isArray(value) ? value[0] : value)?.split(',', 1)[0] ?? '';
  const match = /^\s*\+?(\d{1,15})\s*$/.exec(first);
  return match === null ? null : Number(match[1]);
}

/**
 * Whether a header fault applies to this request: its `-percentage` header, an integer capped at
 * 100 (Envoy caps it at the configured percentage, 100 here), or every request when that header is
 * absent or no number.
 */
function applies(headers: Headers, name: string, random: () => number): boolean {
  const percentage = Math.min(unsigned(headers[name]) ?? 100, 100);
  return random() * 100 < percentage;
}

export class FaultChooser {
  readonly #settings: FaultSettings;
  readonly #random: () => number;

  constructor(settings: FaultSettings, random: () => number = Math.random) {
    this.#settings = settings;
    this.#random = random;
  }

  /** The faults of a request with these headers, or null for none. */
  plan(headers: Headers, grpc = false): FaultPlan | null {
    const settings = this.#settings;
    const random = this.#random;
    let delay: FaultPlan['delay'] = null;
    let abort: FaultPlan['abort'] = null;
    let throughput: number | null = null;
    let connection: ConnectionFault | null = null;
    let delayAsked = false;
    let abortAsked = false;
    if (settings.headers) {
      // What Envoy ignores is ignored: a status outside 200-599, a value that is no number; and a
      // delay over the longest this service holds a request.
      const ms = unsigned(headers[FAULT_HEADERS.delay]);
      if (ms !== null && ms <= MAX_FAULT_DELAY_MS) {
        delayAsked = true;
        if (applies(headers, FAULT_HEADERS.delayPercentage, random)) delay = { ms, source: 'headers' };
      }
      // A gRPC call may ask for a gRPC status (1 to 16), which then decides, as Envoy decides it.
      const grpcStatus = grpc ? unsigned(headers[FAULT_HEADERS.abortGrpc]) : null;
      const status =
        grpcStatus !== null && grpcStatus >= 1 && grpcStatus <= 16
          ? (HTTP_STATUS_OF_GRPC[grpcStatus - 1] as number)
          : unsigned(headers[FAULT_HEADERS.abort]);
      if (status !== null && status >= 200 && status < 600) {
        abortAsked = true;
        if (applies(headers, FAULT_HEADERS.abortPercentage, random)) {
          const asked = grpcStatus !== null && grpcStatus >= 1 && grpcStatus <= 16 ? grpcStatus : null;
          abort = { status, grpcStatus: asked, source: 'headers' };
        }
      }
      const kibps = unsigned(headers[FAULT_HEADERS.throughput]);
      if (kibps !== null && kibps > 0 && applies(headers, FAULT_HEADERS.throughputPercentage, random)) {
        throughput = kibps;
      }
      const asked = headers[FAULT_HEADERS.connection];
      connection = CONNECTION_FAULTS.find((kind) => kind === asked) ?? null;
    }
    // A fault the request asks for decides that kind of fault for it; the settings' draw, the rest.
    if (!delayAsked && settings.delayRate > 0 && random() < settings.delayRate) {
      const { min, max } = settings.delayMs;
      delay = { ms: min + Math.floor(random() * (max - min + 1)), source: 'settings' };
    }
    if (!abortAsked && settings.errorRate > 0 && random() < settings.errorRate) {
      abort = { status: settings.errorStatus, grpcStatus: null, source: 'settings' };
    }
    if (delay === null && abort === null && throughput === null && connection === null) return null;
    return { delay, abort, throughput, connection };
  }
}
