import type { Socket } from 'node:net';
import { expectEnvelope, expectEqual, expectObject, fail, header, show, skip } from '../assert.js';
import type { Check, Context } from '../context.js';
import type { Response } from '../http.js';

const RATE = 'spec 8.1; contract: Rate limiting, versioning, limits (rate limiting)';
const SLOW = 'contract: Rate limiting, versioning, limits (server timeouts against slow clients)';

/** How long a slow client may hold a connection before the check calls the service lax. */
const SLOW_LIMIT_MS = 65_000;

function integerHeader(res: Response, name: string): number | undefined {
  const value = header(res, name);
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`${name}: a whole number`, show(value));
  return Number(value);
}

function quota(res: Response): { limit: number; remaining: number; reset: number } | undefined {
  const [limit, remaining, reset] = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].map((name) =>
    integerHeader(res, name),
  );
  if (limit === undefined && remaining === undefined && reset === undefined) return undefined;
  if (limit === undefined || remaining === undefined || reset === undefined) {
    fail('RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset together', show([limit, remaining, reset]));
  }
  if (limit < 1 || remaining > limit)
    fail('1 <= RateLimit-Limit, RateLimit-Remaining <= RateLimit-Limit', show([limit, remaining]));
  return { limit, remaining, reset };
}

/**
 * The answer's quota; without RateLimit headers, a skip where the deployment limits no one, and a
 * failure where this run has met its 429s.
 */
function expectQuota(ctx: Context, res: Response): { limit: number; remaining: number; reset: number } {
  const found = quota(res);
  if (found !== undefined) return found;
  const refused = ctx.answers.rateLimited;
  const [first] = refused;
  if (first !== undefined) {
    fail(
      `${res.request.method} ${res.request.path}: RateLimit-Limit, -Remaining and -Reset, as this run met 429 answers`,
      `none, after ${refused.length} answers 429 (the first to ${first.request.method} ${first.request.path})`,
    );
  }
  return skip('no RateLimit-* headers: rate limiting is off on this deployment');
}

/**
 * Writes `first`, then one byte of `trickle` every `everyMs`, and resolves with what the service
 * did: closed the connection (with the answer it wrote, if any), or nothing within the limit.
 */
async function slowClient(ctx: Context, first: string, trickle: string, everyMs: number): Promise<string> {
  const limit = Math.min(SLOW_LIMIT_MS, ctx.http.timeLeft);
  const socket: Socket = await ctx.http.connect();
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    answer += chunk;
  });
  socket.write(ctx.http.withHeaders(first));
  let i = 0;
  const timer = setInterval(() => {
    if (!socket.writable) return;
    socket.write(trickle[i % trickle.length] as string);
    i += 1;
  }, everyMs);
  try {
    return await new Promise<string>((resolve) => {
      const give = setTimeout(() => resolve(`still open after ${Math.round(limit / 1000)} s`), limit);
      const end = () => {
        clearTimeout(give);
        resolve(answer === '' ? 'closed without an answer' : (answer.split('\r\n')[0] ?? ''));
      };
      socket.on('close', end);
      socket.on('error', end);
    });
  } finally {
    clearInterval(timer);
    socket.destroy();
  }
}

function expectCutOff(outcome: string, what: string): void {
  if (outcome.startsWith('still open')) fail(`the service to end ${what} within ${SLOW_LIMIT_MS / 1000} s`, outcome);
  if (outcome.startsWith('HTTP/1.1 2')) fail(`no success for ${what}`, outcome);
}

export const rateLimitChecks: Check[] = [
  {
    id: 'rate-limit.headers',
    group: 'rate-limit',
    clause: 'contract: Rate limiting, versioning, limits (rate limiting)',
    title:
      'answers under /api carry RateLimit-Limit, -Remaining and -Reset, counting down, Reset in seconds (on every answer of the run)',
    async run(ctx) {
      const first = expectQuota(ctx, await ctx.get('/api/hello'));
      const second = quota(await ctx.get('/api/no-such-route'));
      if (second === undefined) fail('RateLimit-* headers on a 404 under /api', 'none');
      if (second.remaining >= first.remaining && second.reset <= first.reset) {
        fail(`RateLimit-Remaining below ${first.remaining} on the next request`, `${second.remaining}`);
      }
      const [wrong, ...more] = ctx.answers.findings['rate-limit'];
      if (wrong !== undefined) {
        fail(
          'on every answer under /api: RateLimit-Limit, -Remaining and -Reset, whole numbers, Reset in seconds counting down and agreeing with Retry-After',
          `${wrong.request} (${wrong.status}): ${wrong.wrong}${more.length > 0 ? `; and ${more.length} more answers` : ''}`,
        );
      }
    },
  },
  {
    id: 'rate-limit.exceeded',
    group: 'rate-limit',
    clause: RATE,
    needs: 'rate-limit',
    title: 'past the limit: 429 RATE_LIMIT_EXCEEDED with Retry-After, on every /api route; /healthz still served',
    async run(ctx) {
      const start = expectQuota(ctx, await ctx.get('/api/hello'));
      const margin = 20;
      if (start.remaining + margin > ctx.http.requestsLeft) {
        skip(
          `the limit (${start.limit}, ${start.remaining} left) is more than the request budget left (${ctx.http.requestsLeft}) can spend; raise --max-requests`,
        );
      }
      let refused: Response | undefined;
      for (let sent = 0; refused === undefined && sent <= start.remaining + margin; sent += 8) {
        const batch = await Promise.all(
          Array.from({ length: 8 }, () => ctx.send({ path: '/api/hello', spendQuota: true })),
        );
        refused = batch.find((res) => res.status === 429);
      }
      if (refused === undefined) fail(`a 429 within ${start.remaining + margin} requests`, 'none');
      expectEnvelope(refused, 429, 'RATE_LIMIT_EXCEEDED');
      const retryAfter = integerHeader(refused, 'retry-after');
      if (retryAfter === undefined || retryAfter < 1)
        fail('Retry-After: whole seconds, at least 1', show(header(refused, 'retry-after')));
      expectEqual(header(refused, 'ratelimit-remaining'), '0', 'RateLimit-Remaining of the 429');
      const other = await ctx.send({ path: '/api/currencies/EUR', spendQuota: true });
      expectEnvelope(other, 429, 'RATE_LIMIT_EXCEEDED');
      expectEqual(expectObject(await ctx.get('/healthz'), 200).status, 'ok', 'GET /healthz while limited');
    },
  },
];

export const timeoutChecks: Check[] = [
  {
    id: 'timeouts.slow-headers',
    group: 'timeouts',
    clause: SLOW,
    needs: 'slow',
    title: 'a client that sends its headers a byte at a time is cut off',
    async run(ctx) {
      const host = ctx.http.origin.host;
      const outcome = await slowClient(
        ctx,
        `GET ${ctx.http.prefix}/api/hello HTTP/1.1\r\nHost: ${host}\r\n`,
        'X-Slow: abcdefgh\r\n',
        400,
      );
      expectCutOff(outcome, 'a request whose headers never end');
    },
  },
  {
    id: 'timeouts.slow-body',
    group: 'timeouts',
    clause: SLOW,
    needs: 'slow',
    title: 'a client that sends its body a byte at a time is cut off',
    async run(ctx) {
      const host = ctx.http.origin.host;
      // A length within the body limit, so that it is the timeout, not the size, that ends it.
      const length = Math.min(ctx.options.bodyLimit, 1_000_000);
      const head = `POST ${ctx.http.prefix}/api/echo HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n{"a":"`;
      expectCutOff(await slowClient(ctx, head, 'x', 400), 'a request whose body never ends');
    },
  },
];
