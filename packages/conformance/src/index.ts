import { STATUS_CODES } from 'node:http';
import { named, shown } from '../../../src/lib/shown.js';
import { expectEnvelope, sentCode } from './assert.js';
import { ALL_CHECKS } from './checks/all.js';
import {
  type Check,
  CheckFailure,
  CheckSkip,
  type Context,
  DependencyFailure,
  GROUPS,
  type Group,
  makeContext,
} from './context.js';
import {
  BudgetError,
  Http,
  INJECTED_HEADER,
  isInjectedAbort,
  type Response,
  RPC_PATH,
  speaksTls,
  ToolError,
} from './http.js';
import { envelopes } from './protobuf.js';

/**
 * The conformance kit as a library: `runConformance` runs black-box checks of the interface
 * specification and the contract (docs/) against a running service, over HTTP only.
 */

export { junitXml } from './junit.js';
export { GROUPS, type Group, ToolError };

export type Outcome = 'pass' | 'fail' | 'skip';

export interface CheckResult {
  /** `group.name`, stable across releases. */
  id: string;
  group: Group;
  /** The section it verifies: `spec 4.2`, `contract: Errors`. */
  clause: string;
  title: string;
  outcome: Outcome;
  /** For a failure: what the clause asks for, and what the service answered. */
  expected?: string;
  actual?: string;
  /** For a skip: why it did not run. */
  reason?: string;
  durationMs: number;
}

export interface Report {
  /** The base URL checked. */
  target: string;
  passed: number;
  failed: number;
  skipped: number;
  /** Requests sent, connections opened included. */
  requests: number;
  /**
   * Answers that named faults injected into them (X-Fault-Injected): the deployment injects faults.
   * A check that failed on an injected error is skipped, saying so, not failed.
   */
  injected: number;
  durationMs: number;
  results: CheckResult[];
}

export interface Options {
  /** Base URL of the service: `http://localhost:8080`, or with its context path, `http://host/svc`. */
  baseUrl: string;
  /** Run the profile writes, which restore the profile found at the end (If-Match). */
  write?: boolean;
  /** Run the checks that exhaust the rate limit of this client's address. */
  rateLimit?: boolean;
  /** Run the checks that play slow clients and wait for the service's timeouts. */
  slow?: boolean;
  /** Only these groups (or check ids). */
  only?: readonly string[];
  /** Not these groups (or check ids). */
  skip?: readonly string[];
  /** Bounds of the run: requests in all (default 5000), milliseconds in all (default 600,000), milliseconds a request (default 10,000). */
  maxRequests?: number;
  maxTimeMs?: number;
  requestTimeoutMs?: number;
  /** Body size the deployment refuses with 413 above (default 1 MiB, the contract's BODY_LIMIT). */
  bodyLimit?: number;
  /** The `Origin` of the CORS checks (default `https://conformance.example`). */
  origin?: string;
  /** Send every request over HTTP/2 (h2c with prior knowledge for http://, h2 by ALPN for https://), and run the `http2` checks. */
  http2?: boolean;
  /**
   * Run the `grpc` checks: every RPC in the Connect protocol with JSON, and with `http2` gRPC itself
   * too. A deployment that answers 404 for them does not serve gRPC: the run stops with a ToolError.
   */
  grpc?: boolean;
  /** CA certificates (PEM) to trust for an https:// base URL instead of the system's: a private CA. */
  ca?: string | Buffer;
  /** Trust any certificate of an https:// base URL. */
  insecure?: boolean;
  /** Header fields sent on every request (an authenticating gateway's), the WebSocket handshake included: `[name, value]` pairs. */
  headers?: readonly (readonly [string, string])[];
  /** Called as each check starts and ends, for progress. */
  onCheckStart?: (check: { id: string }, index: number, total: number) => void;
  onResult?: (result: CheckResult, index: number, total: number) => void;
  /** Called when the run waits for the rate-limit window. */
  onWait?: (seconds: number) => void;
}

function baseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ToolError(`not a URL: ${shown(text)} (expected http://host:port)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ToolError(`not an http:// or https:// URL: ${named(text)}`);
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new ToolError(`the base URL takes a scheme, a host, a port and a path only: ${named(text)}`);
  }
  return url;
}

function selected(check: Check, only: readonly string[] | undefined, skip: readonly string[] | undefined): boolean {
  const names = [check.group, check.id];
  if (only !== undefined && only.length > 0 && !only.some((name) => names.includes(name))) return false;
  return !skip?.some((name) => names.includes(name));
}

/** Everything in `only` and `skip` names a group or a check. */
function checkNames(names: readonly string[]): void {
  const known = new Set<string>([...GROUPS, ...ALL_CHECKS.map((check) => check.id)]);
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new ToolError(`unknown group or check: ${named(unknown.join(', '))} (groups: ${GROUPS.join(', ')})`);
  }
}

/** The service answers at all, and in JSON: else nothing below would mean anything. */
async function preflight(http: Http): Promise<void> {
  const answers = [];
  for (const path of ['/healthz', '/api/hello']) {
    try {
      answers.push(await http.send({ path }));
    } catch (error) {
      const message = (error as Error).message;
      if (
        http.origin.protocol === 'http:' &&
        /ECONNRESET|socket hang up/.test(message) &&
        (await speaksTls(http.origin, http.requestTimeoutMs))
      ) {
        throw new ToolError(`${named(http.origin.origin)} speaks TLS: use https://${http.origin.host}${http.prefix}`);
      }
      throw new ToolError(`cannot reach ${named(http.origin.origin)}: ${message}`);
    }
  }
  const json = answers.some((res) => {
    try {
      JSON.parse(res.text);
      return /^application\/json\b/i.test(String(res.headers['content-type']));
    } catch {
      return false;
    }
  });
  if (!json) {
    const [health] = answers;
    throw new ToolError(
      `${named(`${http.origin.origin}${http.prefix}`)} does not look like the service: GET ${http.prefix}/healthz and GET ${http.prefix}/api/hello answer no JSON` +
        ` (GET ${http.prefix}/healthz: ${health?.status} ${health?.headers['content-type'] ?? 'no content type'})`,
    );
  }
}

export async function runConformance(options: Options): Promise<Report> {
  const started = Date.now();
  const base = baseUrl(options.baseUrl);
  checkNames([...(options.only ?? []), ...(options.skip ?? [])]);
  const http = new Http(
    base,
    {
      maxRequests: options.maxRequests ?? 5000,
      maxTimeMs: options.maxTimeMs ?? 600_000,
      requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
    },
    {
      http2: options.http2 ?? false,
      ...(options.ca !== undefined && { ca: options.ca }),
      ...(options.insecure !== undefined && { insecure: options.insecure }),
      ...(options.headers !== undefined && { headers: options.headers }),
    },
  );
  if (options.onWait !== undefined) http.onWait = options.onWait;
  try {
    return await run(http, base, options, started);
  } finally {
    http.close();
  }
}

/** The path of the call that tells whether gRPC is served. */
const SAY_HELLO = '/helloworld.Greeter/SayHello';

/** gRPC is served at all, at the origin's root (whatever the base URL's path): else every gRPC check would fail for that one reason. */
async function grpcPreflight(http: Http): Promise<void> {
  const where = `${http.origin.origin}${http.prefix}`;
  let res: Response;
  try {
    res = await http.send({
      method: 'POST',
      path: SAY_HELLO,
      atRoot: true,
      headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' },
      body: '{"name":"conformance"}',
    });
  } catch (error) {
    throw new ToolError(`cannot reach ${named(where)} for gRPC: ${(error as Error).message}`);
  }
  if (res.status === 404 && res.headers[INJECTED_HEADER] === undefined) {
    throw new ToolError(
      `${named(where)} does not serve gRPC: POST ${SAY_HELLO} answered 404 (a deployment with GRPC=false, or a proxy that does not pass gRPC's paths on): run without --grpc`,
    );
  }
}

async function run(http: Http, base: URL, options: Options, started: number): Promise<Report> {
  await preflight(http);
  const checks = ALL_CHECKS.filter((check) => selected(check, options.only, options.skip));
  if (options.grpc && checks.some((check) => check.group === 'grpc')) await grpcPreflight(http);

  const ctx: Context = makeContext(http, {
    write: options.write ?? false,
    rateLimit: options.rateLimit ?? false,
    slow: options.slow ?? false,
    http2: options.http2 ?? false,
    grpc: options.grpc ?? false,
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    origin: options.origin ?? 'https://conformance.example',
  });
  const results: CheckResult[] = [];
  let spent: string | undefined;
  for (const [index, check] of checks.entries()) {
    options.onCheckStart?.(check, index, checks.length);
    const checkStarted = Date.now();
    const result = await runOne(check, ctx, spent);
    if (result.outcome === 'skip' && result.reason?.startsWith('budget: ')) spent = result.reason;
    result.durationMs = Date.now() - checkStarted;
    results.push(result);
    options.onResult?.(result, index, checks.length);
  }
  const count = (outcome: Outcome) => results.filter((result) => result.outcome === outcome).length;
  return {
    target: base.href.replace(/\/$/, ''),
    passed: count('pass'),
    failed: count('fail'),
    skipped: count('skip'),
    requests: http.sent,
    injected: http.injected.length,
    durationMs: Date.now() - started,
    results,
  };
}

const FLAGS = {
  write: '--write',
  'rate-limit': '--rate-limit',
  slow: '--slow',
  http2: '--http2',
  grpc: '--grpc',
} as const;

async function runOne(check: Check, ctx: Context, spent: string | undefined): Promise<CheckResult> {
  const base = { id: check.id, group: check.group, clause: check.clause, title: check.title, durationMs: 0 };
  if (spent !== undefined) return { ...base, outcome: 'skip', reason: spent };
  const needs = check.needs;
  if (needs !== undefined && !ctx.options[needs === 'rate-limit' ? 'rateLimit' : needs]) {
    return { ...base, outcome: 'skip', reason: `needs ${FLAGS[needs]}` };
  }
  const injectedBefore = ctx.http.injected.length;
  try {
    await check.run(ctx);
    return { ...base, outcome: 'pass' };
  } catch (error) {
    if (error instanceof CheckSkip) return { ...base, outcome: 'skip', reason: error.message };
    if (error instanceof BudgetError) return { ...base, outcome: 'skip', reason: `budget: ${error.message}` };
    // The injected answers of this check's requests, and of those it depends on (the shared table).
    const aborts = [
      ...ctx.http.injected.slice(injectedBefore),
      ...(error instanceof DependencyFailure ? error.injected : []),
    ].filter(isInjectedAbort);
    if (aborts.length > 0) return injectedOutcome(base, aborts);
    if (error instanceof CheckFailure) {
      return { ...base, outcome: 'fail', expected: error.expected, actual: error.actual };
    }
    return { ...base, outcome: 'fail', expected: 'an answer', actual: (error as Error).message };
  }
}

/** A gRPC call's status as its answer says it: its grpc-status, else the Connect error's code (a stream's in its last message); null for none. */
function rpcCode(res: Response): string | null {
  const status = res.trailers?.['grpc-status'] ?? res.headers['grpc-status'];
  if (typeof status === 'string') return `grpc-status ${status}`;
  const stream = /^application\/connect\+json\b/i.test(String(res.headers['content-type']));
  try {
    const body = stream ? (envelopes(res.body).items.at(-1)?.data.toString('utf8') ?? '') : res.text;
    const parsed = JSON.parse(body) as { code?: unknown; error?: { code?: unknown } } | null;
    const code = stream ? parsed?.error?.code : parsed?.code;
    return typeof code === 'string' ? code : null;
  } catch {
    return null;
  }
}

/** The contract's codes of the statuses whose code is not their reason phrase in upper snake case. */
const CONTRACT_CODES: Readonly<Record<number, readonly string[]>> = {
  400: ['VALIDATION_ERROR', 'MALFORMED_JSON', 'BAD_REQUEST'],
  413: ['PAYLOAD_TOO_LARGE'],
  422: ['UNSUPPORTED_CURRENCY'],
  429: ['RATE_LIMIT_EXCEEDED'],
  500: ['INTERNAL_ERROR'],
};

/**
 * The codes the contract allows an injected error of `status`: the code its table gives that
 * status, else the reason phrase in upper snake case (418 IM_A_TEAPOT), else, with no phrase,
 * INTERNAL_ERROR (spec 7.2, rule 2).
 */
function injectedCodes(status: number): readonly string[] {
  const phrase = STATUS_CODES[status]?.replace(/'/g, '');
  return (
    CONTRACT_CODES[status] ?? [
      phrase === undefined ? 'INTERNAL_ERROR' : phrase.toUpperCase().replace(/[^A-Z0-9]+/g, '_'),
    ]
  );
}

/**
 * A check that failed where the deployment answered an injected error instead: the clause was not
 * tested, so the check is skipped, naming the answer; unless that answer breaks the contract's rule
 * for injected faults (the envelope of its status, with its code, as every error), which fails it.
 */
function injectedOutcome(base: Omit<CheckResult, 'outcome'>, aborts: readonly Response[]): CheckResult {
  for (const res of aborts) {
    // A success or a redirect injected has no body to hold to the envelope, nor has an answer to
    // HEAD; a gRPC call's error is its protocol's, not the envelope.
    if (res.status < 400 || res.request.method === 'HEAD' || RPC_PATH.test(res.request.route)) continue;
    const allowed = injectedCodes(res.status);
    const sent = sentCode(res);
    try {
      expectEnvelope(res, res.status, sent !== null && allowed.includes(sent) ? sent : (allowed[0] as string));
    } catch (error) {
      if (!(error instanceof CheckFailure)) throw error;
      return {
        ...base,
        outcome: 'fail',
        expected: `an injected fault's answer to be the contract's error envelope (contract: Errors): ${error.expected}`,
        actual: error.actual,
      };
    }
  }
  const [first] = aborts as [Response];
  const code = RPC_PATH.test(first.request.route) ? rpcCode(first) : sentCode(first);
  return {
    ...base,
    outcome: 'skip',
    reason: `an injected fault answered ${first.request.method} ${first.request.path}: ${first.status}${code === null ? '' : ` ${code}`} (${INJECTED_HEADER}: ${String(first.headers[INJECTED_HEADER])})`,
  };
}
