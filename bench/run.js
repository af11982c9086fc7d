/**
 * The benchmark: the service with its production defaults against bare node:http and Express 5,
 * on the same endpoints, with the same load, in alternating rounds so that machine noise hits
 * all three alike. Then the service's memory over 1,000,000 requests, and its start-up time.
 *
 *   npm run bench                       # 3 rounds of 5 s per endpoint and server
 *   npm run bench -- --rounds 2 --duration 3 --total 200000   # a quick look
 *
 * Prints a Markdown report (the one BENCHMARKS.md quotes) and writes it, with the raw
 * figures as JSON, to bench/results/.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { ENDPOINTS } from './endpoints.js';

const { values: options } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    total: { type: 'string', default: '1000000' },
  },
});
const ROUNDS = Number(options.rounds);
const DURATION_S = Number(options.duration);
const CONNECTIONS = Number(options.connections);
const TOTAL_REQUESTS = Number(options.total);
const WARM_UP_S = 2;

const root = new URL('..', import.meta.url).pathname;
const resultsDir = join(root, 'bench', 'results');
mkdirSync(resultsDir, { recursive: true });

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** Polls until `url` answers 200; resolves with the milliseconds since `since`. */
async function firstOk(url, since, timeoutMs = 10_000) {
  for (;;) {
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      if (response.status === 200) return performance.now() - since;
    } catch {
      // not listening yet
    }
    if (performance.now() - since > timeoutMs) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await sleep(2);
  }
}

/** The servers compared; the service's log goes to a file, at info level, as in production. */
const SERVERS = [
  {
    key: 'service',
    label: 'service',
    script: 'dist/server.js',
    env: {
      LOG_LEVEL: 'info',
      RATE_LIMIT_MAX: '2147483647', // on, and far above what a run sends
      METRICS_ENABLED: 'true',
      HOST: '127.0.0.1',
    },
    log: join(tmpdir(), 'greeting-service-bench.log'),
  },
  { key: 'node', label: 'node:http', script: 'bench/servers/node-http.js', env: {} },
  { key: 'express', label: 'Express 5', script: 'bench/servers/express.js', env: {} },
];

async function start(server) {
  const port = await freePort();
  const stdout = server.log ? openSync(server.log, 'w') : 'ignore';
  const startedAt = performance.now();
  const child = spawn(process.execPath, [server.script], {
    cwd: root,
    env: { ...process.env, ...server.env, PORT: String(port) },
    stdio: ['ignore', stdout, 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  const startupMs = await firstOk(`${base}/api/hello`, startedAt);
  return { ...server, child, base, startupMs };
}

function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
}

/** Samples a process's RSS every `intervalMs` until stopped; the samples carry their time. */
function sampleRss(pid, intervalMs) {
  const samples = [];
  const timer = setInterval(() => samples.push({ at: performance.now(), rss: rssBytes(pid) }), intervalMs);
  return {
    samples,
    stop: () => clearInterval(timer),
  };
}

function load(base, endpoint, extra) {
  return autocannon({
    url: base + endpoint.path,
    method: endpoint.method,
    headers: endpoint.headers,
    body: endpoint.body,
    connections: CONNECTIONS,
    ...extra,
  });
}

/** Each server must answer each endpoint with the same status and body (timestamps aside). */
async function checkSameAnswers(servers) {
  const normalise = (text) => text.replace(/"timestamp":"[^"]+"/, '"timestamp":"…"');
  for (const endpoint of ENDPOINTS) {
    const answers = [];
    for (const server of servers) {
      const response = await fetch(server.base + endpoint.path, {
        method: endpoint.method,
        headers: endpoint.headers,
        body: endpoint.body,
      });
      answers.push(`${response.status} ${normalise(await response.text())}`);
    }
    if (new Set(answers).size !== 1) {
      throw new Error(`${endpoint.name}: the servers answer differently:\n${answers.join('\n')}`);
    }
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** Least-squares slope of y over x. */
function slope(points) {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

const MB = 1024 * 1024;
const fixed = (value, digits = 0) => value.toFixed(digits);

async function main() {
  const servers = [];
  for (const server of SERVERS) servers.push(await start(server));
  const [service] = servers;
  try {
    await checkSameAnswers(servers);
    const rss = sampleRss(service.child.pid, 100);

    for (const endpoint of ENDPOINTS) {
      for (const server of servers) await load(server.base, endpoint, { duration: WARM_UP_S });
    }
    const runs = new Map(ENDPOINTS.map((endpoint) => [endpoint.name, new Map(servers.map((s) => [s.key, []]))]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const endpoint of ENDPOINTS) {
        for (const server of servers) {
          const result = await load(server.base, endpoint, { duration: DURATION_S });
          const failures = result.errors + result.timeouts + result.non2xx;
          if (failures > 0) throw new Error(`${server.label} ${endpoint.name}: ${failures} failed requests`);
          runs
            .get(endpoint.name)
            .get(server.key)
            .push({
              rps: result.requests.total / result.duration,
              p50: result.latency.p50,
              p99: result.latency.p99,
            });
        }
        process.stderr.write(`round ${round}/${ROUNDS}: ${endpoint.name}\n`);
      }
    }
    rss.stop();
    const peakDuringRuns = Math.max(...rss.samples.map((s) => s.rss));

    // One million requests, every endpoint in turn on each connection, with RSS sampled along.
    const soak = sampleRss(service.child.pid, 250);
    const started = performance.now();
    const soakResult = await autocannon({
      url: service.base,
      connections: CONNECTIONS,
      amount: TOTAL_REQUESTS,
      requests: ENDPOINTS.map(({ method, path, headers, body }) => ({ method, path, headers, body })),
    });
    soak.stop();
    const soakSeconds = (performance.now() - started) / 1000;
    const halfway = started + (soakSeconds * 1000) / 2;
    const lastHalf = soak.samples
      .filter((sample) => sample.at >= halfway)
      .map((sample) => ({ x: (sample.at - started) / 1000, y: sample.rss / MB }));
    const soakFailures = soakResult.errors + soakResult.timeouts + soakResult.non2xx;

    const report = {
      machine: `${cpus().length} × ${cpus()[0].model}, ${fixed(totalmem() / 1024 ** 3, 1)} GiB, Node ${process.version}`,
      settings: {
        rounds: ROUNDS,
        durationSeconds: DURATION_S,
        connections: CONNECTIONS,
        totalRequests: TOTAL_REQUESTS,
      },
      startupMs: service.startupMs,
      peakRssDuringRunsMb: peakDuringRuns / MB,
      soak: {
        requests: soakResult.requests.total,
        failures: soakFailures,
        seconds: soakSeconds,
        peakRssMb: Math.max(...soak.samples.map((s) => s.rss)) / MB,
        rssAfterMb: rssBytes(service.child.pid) / MB,
        lastHalfSlopeMbPerMinute: slope(lastHalf) * 60,
      },
      endpoints: ENDPOINTS.map((endpoint) => {
        const byServer = runs.get(endpoint.name);
        const figures = Object.fromEntries(
          [...byServer].map(([key, list]) => [
            key,
            {
              rps: median(list.map((r) => r.rps)),
              p50: median(list.map((r) => r.p50)),
              p99: Math.max(...list.map((r) => r.p99)),
            },
          ]),
        );
        return { name: endpoint.name, ...figures };
      }),
    };
    const markdown = toMarkdown(report);
    writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(resultsDir, 'latest.md'), markdown);
    process.stdout.write(markdown);
  } finally {
    for (const server of servers) server.child.kill('SIGTERM');
  }
}

function toMarkdown(report) {
  const rows = report.endpoints.map(({ name, service, node, express }) =>
    [
      name,
      fixed(service.rps),
      `${service.p50} / ${service.p99}`,
      fixed(node.rps),
      `${node.p50} / ${node.p99}`,
      fixed(express.rps),
      `${express.p50} / ${express.p99}`,
      fixed(service.rps / node.rps, 2),
      fixed(service.rps / express.rps, 2),
    ].join(' | '),
  );
  const { soak, settings } = report;
  return [
    `Machine: ${report.machine}.`,
    `Load: autocannon, ${settings.connections} connections, ${settings.rounds} alternating rounds of ${settings.durationSeconds} s per endpoint and server; req/s is the median of the rounds, latency (ms) the median p50 and the worst p99.`,
    '',
    '| endpoint | service req/s | p50 / p99 | node:http req/s | p50 / p99 | Express 5 req/s | p50 / p99 | service / node:http | service / Express |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map((row) => `| ${row} |`),
    '',
    `- Start to first 200: ${fixed(report.startupMs)} ms.`,
    `- Peak RSS during the rounds: ${fixed(report.peakRssDuringRunsMb, 1)} MB.`,
    `- ${soak.requests} requests over every endpoint in ${fixed(soak.seconds, 1)} s, ${soak.failures} failed: peak RSS ${fixed(soak.peakRssMb, 1)} MB, ${fixed(soak.rssAfterMb, 1)} MB after; RSS slope over the last half ${fixed(soak.lastHalfSlopeMbPerMinute, 2)} MB/min.`,
    '',
  ].join('\n');
}

await main();
