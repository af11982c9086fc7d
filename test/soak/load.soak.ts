import assert from 'node:assert/strict';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import autocannon from 'autocannon';
import { exitOf, killAllServers, processProbe, ROOT, readLog, rssMiB, startServer } from '../server-process.js';
import { MIX } from './mix.js';

/**
 * The soak: the built server with its production defaults (info logs to a file, rate limiting on
 * with a limit it never reaches, metrics, security headers) driven at full speed with every
 * endpoint for SOAK_SECONDS (120 by default) after a warm-up of WARM_UP_SECONDS at the same load,
 * its resident memory read every second. It must answer every request, warm-up included, with
 * the status that request must get, and what it holds must not grow over the second half. The
 * figures go to test/artifacts/soak.json and into RELIABILITY.md.
 */

const SECONDS = Number(process.env.SOAK_SECONDS ?? 120);
/**
 * The heap grows to its working size over the first some 80,000 requests (40 s on the machine
 * this was written on) and stays there; a slower machine takes longer, and that growth is not to
 * be read as a leak.
 */
const WARM_UP_SECONDS = 30;
const CONNECTIONS = 50;
/**
 * Growth of the memory a full collection leaves over the second half, in MiB per minute, above
 * which the process is taken to be leaking: 10 bytes a request at 1,700 requests a second. What a
 * full collection leaves is what the process holds: neither the heap's growth to its working size
 * nor garbage not yet collected counts, which the resident set's slope could not tell from a leak.
 */
const MAX_RETAINED_SLOPE_MIB_PER_MIN = 1;
/** How often the heap is collected in full and measured over the second half. */
const RETAINED_EVERY_MS = 2500;

/** The least-squares slope of `y` over `x`. */
function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  const mx = points.reduce((sum, p) => sum + p.x, 0) / n;
  const my = points.reduce((sum, p) => sum + p.y, 0) / n;
  const sxy = points.reduce((sum, p) => sum + (p.x - mx) * (p.y - my), 0);
  const sxx = points.reduce((sum, p) => sum + (p.x - mx) ** 2, 0);
  return sxy / sxx;
}

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

describe('soak: the server process at full speed on every endpoint', () => {
  after(() => killAllServers());

  it(`answers every request as it must for ${WARM_UP_SECONDS} + ${SECONDS} s, holding no more memory over the second half`, {
    timeout: (WARM_UP_SECONDS + SECONDS + 120) * 1000,
  }, async () => {
    const logFile = join(await mkdtemp(join(tmpdir(), 'soak-')), 'server.log');
    // Two full collections, then what is still in use: the heap and the memory its objects hold outside it (buffers).
    const retainedHeap = await processProbe<number>(
      dirname(logFile),
      '(gc(), gc(), ((memory) => memory.heapUsed + memory.external)(process.memoryUsage()))',
      ['--expose-gc'],
    );
    const server = await startServer({ RATE_LIMIT_MAX: String(2 ** 31 - 1) }, [], {
      logFile,
      nodeArgs: retainedHeap.nodeArgs,
    });
    const pid = server.child.pid as number;

    const samples: { second: number; rss: number }[] = [];
    const retained: { second: number; mib: number }[] = [];
    const started = performance.now();
    const second = () => (performance.now() - started) / 1000;
    const sampler = setInterval(() => {
      void rssMiB(pid).then((rss) => samples.push({ second: second(), rss }));
    }, 1000);
    const collector = setInterval(() => {
      if (second() < WARM_UP_SECONDS + SECONDS / 2) return;
      void retainedHeap.read(server).then((bytes) => retained.push({ second: second(), mib: bytes / 2 ** 20 }));
    }, RETAINED_EVERY_MS);

    // Each request names its place in the mix in X-Request-Id, which comes back on its response:
    // autocannon's own pairing of responses with requests is not to be relied on.
    const wrong = new Map<string, number>();
    const onResponse = (status: number, _body: string, _context: object, headers?: IncomingHttpHeaders) => {
      const id = String(headers?.['x-request-id']);
      const request = MIX[Number(/^mix-(\d+)$/.exec(id)?.[1])];
      if (request?.status === status) return;
      const key = request ? `${request.method} ${request.path}: ${status}, not ${request.status}` : `unknown id ${id}`;
      wrong.set(key, (wrong.get(key) ?? 0) + 1);
    };
    const result = await autocannon({
      url: `http://127.0.0.1:${server.port}`,
      connections: CONNECTIONS,
      duration: WARM_UP_SECONDS + SECONDS,
      requests: MIX.map(({ status: _, headers, ...request }, index) => ({
        ...request,
        headers: { ...headers, 'x-request-id': `mix-${index}` },
        onResponse,
      })),
    });
    clearInterval(sampler);
    clearInterval(collector);

    server.child.kill('SIGTERM');
    assert.deepEqual(exitOf(await server.exited), { code: 0, signal: null });
    const lines = await readLog(logFile);

    const secondHalf = samples
      .filter((s) => s.second >= WARM_UP_SECONDS + SECONDS / 2)
      .map((s) => ({ x: s.second / 60, y: s.rss }));
    const figures = {
      seconds: SECONDS,
      warm_up_seconds: WARM_UP_SECONDS,
      connections: CONNECTIONS,
      requests: result.requests.total,
      // No latency: autocannon's figures for a sequence of different requests break Little's law.
      requests_per_second: round(result.requests.average, 0),
      errors: result.errors,
      timeouts: result.timeouts,
      status_5xx: result['5xx'],
      wrong_status: Object.fromEntries(wrong),
      log_lines: lines.length,
      error_log_lines: lines.filter((line) => Number(line.level) >= 50).length,
      rss_mib: {
        start: round(samples[0]?.rss ?? Number.NaN),
        after_warm_up: round(samples.find((s) => s.second >= WARM_UP_SECONDS)?.rss ?? Number.NaN),
        peak: round(Math.max(...samples.map((s) => s.rss))),
        end: round(samples.at(-1)?.rss ?? Number.NaN),
        second_half_slope_per_min: round(slope(secondHalf), 2),
      },
      retained_heap_mib: {
        second_half: retained.map((r) => [round(r.second), round(r.mib, 2)]),
        slope_per_min: round(slope(retained.map((r) => ({ x: r.second / 60, y: r.mib }))), 2),
      },
      samples: samples.map((s) => [round(s.second), round(s.rss)]),
      node: process.version,
    };
    await mkdir(join(ROOT, 'test/artifacts'), { recursive: true });
    await writeFile(join(ROOT, 'test/artifacts/soak.json'), `${JSON.stringify(figures, null, 2)}\n`);
    const { samples: _, ...summary } = figures;
    console.log(`soak: ${JSON.stringify(summary)}`);

    assert.equal(result.errors, 0, 'connection errors');
    assert.equal(result.timeouts, 0, 'timeouts');
    assert.equal(result['5xx'], 0, '5xx responses');
    assert.deepEqual(figures.wrong_status, {}, 'requests that got another status than theirs');
    assert.equal(figures.error_log_lines, 0, 'lines logged at error level');
    // Every request was logged: one line each, on top of the start and stop lines.
    assert.ok(lines.length >= result.requests.total, `${lines.length} log lines for ${result.requests.total} requests`);
    assert.ok(retained.length >= 3, `${retained.length} full collections measured over the second half`);
    assert.ok(
      figures.retained_heap_mib.slope_per_min <= MAX_RETAINED_SLOPE_MIB_PER_MIN,
      `the heap held after a full collection grew ${figures.retained_heap_mib.slope_per_min} MiB/min over the second half`,
    );
  });
});
