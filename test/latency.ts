import assert from 'node:assert/strict';
import { connect as connectHttp2 } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { Client as HttpClient } from 'undici';

/**
 * A well-behaved client that keeps measuring its latency while others attack the server: the
 * hostile-client suites hold the server to serving it as usual.
 */

export interface Latency {
  requests: number;
  failures: string[];
  p50: number;
  p99: number;
  max: number;
  /** Each request's time, fastest first. */
  times: number[];
}

/** How long a well-behaved client waits for one answer. */
const UNANSWERED_MS = 10_000;

/**
 * Sends `one` again and again, each once the last is answered, until `until` settles, and reports
 * how long each took. `one` resolves with a failure's description, or undefined for a success.
 */
async function timeRequests(one: () => Promise<string | undefined>, until: Promise<unknown>): Promise<Latency> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const times: number[] = [];
  const failures: string[] = [];
  while (!done) {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    // A request never answered is a failure of its own, not a suite that never ends.
    const unanswered = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`no answer within ${UNANSWERED_MS} ms`), UNANSWERED_MS);
    });
    try {
      const failure = await Promise.race([one(), unanswered]);
      if (failure !== undefined) failures.push(failure);
    } catch (error) {
      failures.push(String(error));
    } finally {
      clearTimeout(timer);
    }
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? Number.NaN;
  return { requests: times.length, failures, p50: at(0.5), p99: at(0.99), max: times.at(-1) ?? Number.NaN, times };
}

/** GET /api/hello, one after another on a kept-alive HTTP/1.1 connection, until `until` settles. */
export async function measureLatency(origin: string, until: Promise<unknown>): Promise<Latency> {
  const client = new HttpClient(origin);
  try {
    return await timeRequests(async () => {
      const res = await client.request({ method: 'GET', path: '/api/hello' });
      const text = await res.body.text();
      return res.statusCode === 200 ? undefined : `${res.statusCode} ${text}`;
    }, until);
  } finally {
    await client.close();
  }
}

/** GET /api/hello, one after another on an HTTP/2 session (h2c), until `until` settles. */
export async function measureHttp2Latency(origin: string, until: Promise<unknown>): Promise<Latency> {
  const session = connectHttp2(origin);
  session.on('error', () => {});
  try {
    return await timeRequests(
      () =>
        new Promise((resolve, reject) => {
          const stream = session.request({ ':path': '/api/hello' });
          let status = 0;
          stream.on('response', (headers) => {
            status = Number(headers[':status']);
          });
          stream.on('error', reject);
          stream.resume();
          stream.on('end', () => resolve(status === 200 ? undefined : `status ${status}`));
        }),
      until,
    );
  } finally {
    session.close();
  }
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/**
 * Every request answered, at most 1% of them and `stalls` more slower than five times the quiet
 * p99, or 200 ms: a blocked server shows as seconds, while a test machine running other suites at
 * once adds up to a hundred ms. The `stalls`: each flood the server must read at once (a Rapid Reset
 * session) stalls it once, and on a busy machine a stall can fall on a request of the few a hundred
 * and fifty, where a p99 is its second-longest.
 */
export function assertNormalLatency(during: Latency, quiet: Latency, stalls = 1): void {
  const summary = `quiet: ${quiet.requests} requests, p50 ${round(quiet.p50)} ms, p99 ${round(quiet.p99)} ms; under attack: ${during.requests} requests, p50 ${round(during.p50)} ms, p99 ${round(during.p99)} ms, max ${round(during.max)} ms`;
  console.log(`  latency of a well-behaved client: ${summary}`);
  assert.deepEqual(during.failures, [], summary);
  assert.ok(during.requests >= 50, `served too few requests meanwhile: ${summary}`);
  const bound = Math.max(5 * quiet.p99, 200);
  const slow = during.times.filter((ms) => ms > bound).length;
  assert.ok(
    slow <= Math.floor(during.requests / 100) + stalls,
    `latency under attack: ${slow} over ${round(bound)} ms; ${summary}`,
  );
}
