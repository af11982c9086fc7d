import type { IncomingHttpHeaders } from 'node:http';
import { INJECTED_HEADER, type Response, RPC_PATH } from './http.js';

/**
 * What the contract asks of every answer, held to every answer the run receives: the checks ask
 * for answers, this sees them all, so no route is left out of a header's clause. An answer that
 * names a fault injected into it is the fault's, not the route's, and is left out.
 */

/** The headers each answer must carry, by the rule that asks for them. */
export type Rule = 'request-id' | 'json' | 'security' | 'api-version' | 'rate-limit';

/** An answer that broke a rule: the request, its status, and what was missing or wrong. */
export interface Finding {
  request: string;
  status: number;
  wrong: string;
}

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
};

const RATE_LIMIT_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];

/** Seconds a RateLimit-Reset may stray from counting down with the clock: the rounding of both ends. */
const RESET_SLACK_S = 2;

function value(headers: IncomingHttpHeaders, name: string): string | undefined {
  const found = headers[name];
  return Array.isArray(found) ? found.join(', ') : found;
}

/** The path without its query, the API version in the path dropped: `/api/v1/profile?x` is `/api/profile`. */
function route(path: string): string {
  return (path.split('?')[0] ?? '').replace(/^\/api\/v1(?=\/|$)/, '/api').replace(/(.)\/$/, '$1');
}

export class AnswerAudit {
  /** Answers held to the rules. */
  seen = 0;
  readonly findings: Record<Rule, Finding[]> = {
    'request-id': [],
    json: [],
    security: [],
    'api-version': [],
    'rate-limit': [],
  };
  /** The 429 answers under /api that no fault injected: the deployment limits this client. */
  readonly rateLimited: Response[] = [];
  /** Whether any answer under /api carried the RateLimit headers. */
  rateLimitHeaders = false;
  /** Answers under /api without them before any carried them: wrong once one does. */
  #unlimited: (() => void)[] = [];
  /** The first RateLimit-Reset of the current window, and when it came. */
  #window: { made: { from: number; to: number }; reset: number; remaining: number } | undefined;

  /** Holds one answer to every rule. */
  readonly inspect = (res: Response): void => {
    if (res.headers[INJECTED_HEADER] !== undefined || res.status === 0) return;
    this.seen += 1;
    const { headers } = res;
    const path = res.request.route;
    const api = /^\/api(?:[/?]|$)/.test(path);
    const where = `${res.request.method} ${res.request.path}`;
    const note = (rule: Rule, wrong: string) => this.findings[rule].push({ request: where, status: res.status, wrong });

    const id = value(headers, 'x-request-id');
    if (id === undefined || id === '') note('request-id', 'no X-Request-Id');

    const type = value(headers, 'content-type');
    // Every body is JSON but the metrics' text, the documentation page's HTML, the event stream and
    // the gRPC calls' (each in its protocol's own content type).
    const stream = res.status === 200 && route(path) === '/api/events';
    if (res.body.length > 0 && !stream && !RPC_PATH.test(path) && !/^\/(?:metrics|docs)(?:[/?]|$)/.test(path)) {
      if (type?.toLowerCase().replace(/\s*;\s*/g, '; ') !== 'application/json; charset=utf-8') {
        note('json', `Content-Type: ${type === undefined ? 'none' : JSON.stringify(type)}`);
      }
    }

    if (/^application\/json\b/i.test(type ?? '')) {
      // The profile's versions are revalidated (no-cache); its errors, like every other, may be no-store.
      const caches =
        route(path) !== '/api/profile' ? ['no-store'] : res.status < 400 ? ['no-cache'] : ['no-cache', 'no-store'];
      const expected: [string, readonly string[]][] = Object.entries(SECURITY_HEADERS).map(([n, v]) => [n, [v]]);
      for (const [name, allowed] of [...expected, ['cache-control', caches] as const]) {
        const sent = value(headers, name);
        if (sent === undefined || !allowed.includes(sent)) {
          note('security', `${name}: ${sent === undefined ? 'none' : JSON.stringify(sent)}`);
        }
      }
    }

    if (api) {
      const version = value(headers, 'api-version');
      if (version !== '1')
        note('api-version', `API-Version: ${version === undefined ? 'none' : JSON.stringify(version)}`);
      // A CORS preflight is the browser's, not the client's request: no quota is spent on it.
      if (res.request.method !== 'OPTIONS') this.#rateLimit(res, note);
    }
  };

  /** RateLimit headers, all three or none, in seconds: Reset counts down with the clock and agrees with Retry-After. */
  #rateLimit(res: Response, note: (rule: Rule, wrong: string) => void): void {
    if (res.status === 429) this.rateLimited.push(res);
    const [limit, remaining, reset] = RATE_LIMIT_HEADERS.map((name) => value(res.headers, name));
    if (limit === undefined && remaining === undefined && reset === undefined) {
      if (res.request.refusableInFront) return;
      const missing = () => note('rate-limit', 'no RateLimit headers, where other answers under /api carry them');
      if (this.rateLimitHeaders) missing();
      else this.#unlimited.push(missing);
      return;
    }
    this.rateLimitHeaders = true;
    for (const missing of this.#unlimited.splice(0)) missing();
    const numbers = [limit, remaining, reset].map((text) =>
      text !== undefined && /^\d+$/.test(text) ? Number(text) : NaN,
    );
    const [l, r, s] = numbers as [number, number, number];
    if (numbers.some(Number.isNaN)) {
      note(
        'rate-limit',
        `RateLimit-Limit, -Remaining and -Reset ${JSON.stringify([limit, remaining, reset])}, not three whole numbers`,
      );
      return;
    }
    if (r > l) note('rate-limit', `RateLimit-Remaining ${r} above RateLimit-Limit ${l}`);
    const retryAfter = value(res.headers, 'retry-after');
    if (res.status === 429 && retryAfter !== undefined && /^\d+$/.test(retryAfter)) {
      if (Math.abs(Number(retryAfter) - s) > RESET_SLACK_S) {
        note('rate-limit', `RateLimit-Reset ${s} where Retry-After says ${retryAfter} seconds`);
      }
    }
    // The service made the answer between its request's sending and its receipt.
    const made = { from: res.request.sentAt, to: Date.now() };
    const window = this.#window;
    // A new window: the first answer, more remaining than before, or the last window's end passed.
    if (window === undefined || r > window.remaining || made.to - window.made.to >= window.reset * 1000) {
      this.#window = { made, reset: s, remaining: r };
      return;
    }
    window.remaining = r;
    // Seconds between the two answers, at least and at most.
    const least = Math.max(0, made.from - window.made.to) / 1000;
    const most = (made.to - window.made.from) / 1000;
    if (
      least >= RESET_SLACK_S &&
      (s > window.reset - least + RESET_SLACK_S || s < window.reset - most - RESET_SLACK_S)
    ) {
      note(
        'rate-limit',
        `RateLimit-Reset ${s}, ${least.toFixed(1)}-${most.toFixed(1)} s after ${window.reset}: not seconds counting down`,
      );
      // Judged once per window: the next answers are measured against this one.
      this.#window = { made, reset: s, remaining: r };
    }
  }
}
