/**
 * The benchmark: the service with its production defaults against bare node:http and Express 5,
 * on the same endpoints, with the same load, in alternating rounds so that machine noise hits
 * all three alike. Then the service's memory over 1,000,000 requests, and its start-up time.
 *
 *   npm run bench                       # 3 rounds of 5 s per endpoint and server
 *   npm run bench -- --rounds 2 --duration 3 --total 200000   # a quick look
 *   npm run bench -- --baseline ../other-checkout   # adds another build of the service to the rounds
 *   npm run bench -- --only hello,echo --total 0    # some endpoints (by name), no million-request run
 *   npm run bench -- --load autocannon              # wrk is used when installed
 *   npm run bench -- --tracing                      # adds the service exporting spans: all, and a tenth
 *   npm run bench -- --parts --only hello --total 0 # what each default costs: the service with each turned off
 *   npm run bench -- --faults                       # adds the service with fault injection on, no fault asked for
 *
 * Prints a Markdown report (the one BENCHMARKS.md quotes) and writes it, with the raw
 * figures as JSON, to bench/results/.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { ENDPOINTS } from './endpoints.js';
import { loadGenerator } from './load.js';

const { values: options } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    total: { type: 'string', default: '1000000' },
    load: { type: 'string' },
    baseline: { type: 'string' },
    only: { type: 'string' },
    tracing: { type: 'boolean', default: false },
    parts: { type: 'boolean', default: false },
    faults: { type: 'boolean', default: false },
  },
});
/** The endpoints measured: all, or those whose name contains one of the words of `--only`. */
const MEASURED =
  options.only === undefined
    ? ENDPOINTS
    : ENDPOINTS.filter(({ name }) => options.only.split(',').some((word) => name.includes(word)));
const LOAD = loadGenerator(options.load);
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

/** The service with its production defaults; its log goes to a file, at info level, as in production. */
function serviceServer(key, label, checkout, env = {}) {
  return {
    key,
    label,
    cwd: checkout,
    script: 'dist/server.js',
    env: {
      LOG_LEVEL: 'info',
      RATE_LIMIT_MAX: '2147483647', // on, and far above what a run sends
      METRICS_ENABLED: 'true',
      HOST: '127.0.0.1',
      ...env,
    },
    log: join(tmpdir(), `greeting-service-bench-${key}.log`),
  };
}

/**
 * With --tracing, an OTLP/HTTP receiver that takes every export and answers at once, as a
 * collector on the same host would: the cost measured is the service's.
 */
async function otlpSink() {
  const sink = createHttpServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve));
  return { sink, url: `http://127.0.0.1:${sink.address().port}` };
}
const tracing = options.tracing ? await otlpSink() : null;

/**
 * With --parts, the service with one default at a time turned off, then all three, and bare
 * Fastify: what each part of the production defaults costs, and what the framework does.
 */
const PARTS = [
  serviceServer('no-log', 'LOG_LEVEL=warn', root, { LOG_LEVEL: 'warn' }),
  serviceServer('no-metrics', 'METRICS_ENABLED=false', root, { METRICS_ENABLED: 'false' }),
  serviceServer('no-limit', 'RATE_LIMIT_MAX=0', root, { RATE_LIMIT_MAX: '0' }),
  serviceServer('none', 'all three off', root, { LOG_LEVEL: 'warn', METRICS_ENABLED: 'false', RATE_LIMIT_MAX: '0' }),
  { key: 'fastify', label: 'bare Fastify', cwd: root, script: 'bench/servers/fastify.js', env: {} },
];

/** The servers compared, the service first. */
const SERVERS = [
  serviceServer('service', 'service', root),
  ...(options.baseline === undefined ? [] : [serviceServer('baseline', 'baseline', options.baseline)]),
  ...(tracing === null
    ? []
    : [
        serviceServer('traced', 'spans, all exported', root, { OTEL_EXPORTER_OTLP_ENDPOINT: tracing.url }),
        serviceServer('sampled', 'spans, 10% exported', root, {
          OTEL_EXPORTER_OTLP_ENDPOINT: tracing.url,
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: '0.1',
        }),
      ]),
  ...(options.parts ? PARTS : []),
  // Its hooks run on every request under /api, reading the fault headers the load never sends.
  ...(options.faults ? [serviceServer('faults', 'faults on, none asked', root, { FAULT_HEADERS: 'true' })] : []),
  { key: 'node', label: 'node:http', cwd: root, script: 'bench/servers/node-http.js', env: {} },
  ...(options.parts
    ? []
    : [{ key: 'express', label: 'Express 5', cwd: root, script: 'bench/servers/express.js', env: {} }]),
];

async function start(server) {
  const port = await freePort();
  const stdout = server.log ? openSync(server.log, 'w') : 'ignore';
  const startedAt = performance.now();
  const child = spawn(process.execPath, [server.script], {
    cwd: server.cwd,
    env: { ...process.env, ...server.env, PORT: String(port) },
    stdio: ['ignore', stdout, 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  const startupMs = await firstOk(`${base}/api/hello`, startedAt);
  // Idle: a second after the first answer, with nothing else asked of it.
  await sleep(1000);
  return { ...server, child, base, startupMs, idleRssMb: rssBytes(child.pid) / MB };
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
    peak: () => Math.max(...samples.map((s) => s.rss)),
    stop: () => clearInterval(timer),
  };
}

async function answer(server, { method, path, headers, body }) {
  const response = await fetch(server.base + path, { method, headers, body });
  return { status: response.status, text: await response.text() };
}

/** Each server must answer each endpoint with the same status and body (timestamps aside). */
async function checkSameAnswers(servers) {
  const normalise = (text) => text.replace(/"timestamp":"[^"]+"/, '"timestamp":"…"');
  for (const endpoint of ENDPOINTS) {
    const answers = [];
    for (const server of servers) {
      const { status, text } = await answer(server, endpoint);
      answers.push(`${status} ${normalise(text)}`);
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

/** Server CPU time (user + system) of a process so far, in microseconds. */
function cpuMicros(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime and stime, fields 14 and 15
  return (ticks * 1e6) / 100; // USER_HZ is 100 on Linux
}

/** One million requests, every endpoint in turn on each connection, with the service's RSS sampled along. */
async function million(service, load) {
  const rss = sampleRss(service.child.pid, 250);
  const started = performance.now();
  const result = await load(service, ENDPOINTS, { total: TOTAL_REQUESTS });
  rss.stop();
  const seconds = (performance.now() - started) / 1000;
  const halfway = started + (seconds * 1000) / 2;
  const lastHalf = rss.samples
    .filter((sample) => sample.at >= halfway)
    .map((sample) => ({ x: (sample.at - started) / 1000, y: sample.rss / MB }));
  return {
    requests: result.requests,
    failures: result.failures,
    seconds,
    peakRssMb: rss.peak() / MB,
    rssAfterMb: rssBytes(service.child.pid) / MB,
    lastHalfSlopeMbPerMinute: slope(lastHalf) * 60,
  };
}

async function main() {
  const servers = [];
  for (const server of SERVERS) servers.push(await start(server));
  const [service] = servers;
  const load = (server, requests, extra) =>
    LOAD.run(server.base, requests, { connections: CONNECTIONS, ...extra }).catch(async (error) => {
      const { status, text } = await answer(server, requests[0]);
      throw new Error(`${server.label} ${requests[0].name}: ${error.message}\nIt now answers ${status} ${text}`);
    });
  try {
    await checkSameAnswers(servers);
    const rss = new Map(servers.map((server) => [server.key, sampleRss(server.child.pid, 100)]));

    for (const endpoint of MEASURED) {
      for (const server of servers) await load(server, [endpoint], { duration: WARM_UP_S });
    }
    const runs = new Map(MEASURED.map((endpoint) => [endpoint.name, new Map(servers.map((s) => [s.key, []]))]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const endpoint of MEASURED) {
        for (const server of servers) {
          const cpuBefore = cpuMicros(server.child.pid);
          const result = await load(server, [endpoint], { duration: DURATION_S });
          const cpu = (cpuMicros(server.child.pid) - cpuBefore) / result.requests;
          if (result.failures > 0)
            throw new Error(`${server.label} ${endpoint.name}: ${result.failures} failed requests`);
          runs
            .get(endpoint.name)
            .get(server.key)
            .push({ rps: result.requests / result.seconds, p50: result.p50, p99: result.p99, cpu });
        }
        process.stderr.write(`round ${round}/${ROUNDS}: ${endpoint.name}\n`);
      }
    }
    for (const sampler of rss.values()) sampler.stop();

    const soak = TOTAL_REQUESTS > 0 ? await million(service, load) : null;

    const report = {
      machine: `${cpus().length} × ${cpus()[0].model}, ${fixed(totalmem() / 1024 ** 3, 1)} GiB, Node ${process.version}`,
      loadGenerator: LOAD.name,
      servers: servers.map(({ key, label }) => ({ key, label })),
      settings: {
        rounds: ROUNDS,
        durationSeconds: DURATION_S,
        connections: CONNECTIONS,
        totalRequests: TOTAL_REQUESTS,
      },
      startupMs: Object.fromEntries(servers.map((server) => [server.key, server.startupMs])),
      idleRssMb: Object.fromEntries(servers.map((server) => [server.key, server.idleRssMb])),
      peakRssDuringRunsMb: Object.fromEntries([...rss].map(([key, sampler]) => [key, sampler.peak() / MB])),
      soak,
      endpoints: MEASURED.map((endpoint) => {
        const byServer = runs.get(endpoint.name);
        const figures = Object.fromEntries(
          [...byServer].map(([key, list]) => [
            key,
            {
              rps: median(list.map((r) => r.rps)),
              p50: median(list.map((r) => r.p50)),
              p99: Math.max(...list.map((r) => r.p99)),
              cpuMicros: median(list.map((r) => r.cpu)),
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
    tracing?.sink.close();
  }
}

const ms = (value) => (value < 10 ? fixed(value, 1) : fixed(value));

/** With --parts: each variant's req/s as a share of node:http's, and its CPU per request. */
function partsTable(report) {
  const parts = report.servers.filter(({ key }) => key === 'service' || PARTS.some((part) => part.key === key));
  const header = ['endpoint', ...parts.map(({ label }) => `${label}: / node:http, CPU µs/req`), 'node:http CPU µs/req'];
  const rows = report.endpoints.map((endpoint) => [
    endpoint.name,
    ...parts.map(({ key }) => `${fixed(endpoint[key].rps / endpoint.node.rps, 2)}, ${fixed(endpoint[key].cpuMicros)}`),
    fixed(endpoint.node.cpuMicros),
  ]);
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    '',
  ];
}

function toMarkdown(report) {
  const labels = report.servers.filter(({ key }) => !PARTS.some((part) => part.key === key));
  const compared = labels.filter(({ key }) => key !== 'service');
  const header = [
    'endpoint',
    ...labels.flatMap(({ label }) => [`${label} req/s`, 'p50 / p99 ms', 'CPU µs/req']),
    ...compared.map(({ label }) => `service / ${label}`),
  ];
  const rows = report.endpoints.map((endpoint) =>
    [
      endpoint.name,
      ...labels.flatMap(({ key }) => {
        const { rps, p50, p99, cpuMicros: cpu } = endpoint[key];
        return [fixed(rps), `${ms(p50)} / ${ms(p99)}`, fixed(cpu)];
      }),
      ...compared.map(({ key }) => fixed(endpoint.service.rps / endpoint[key].rps, 2)),
    ].join(' | '),
  );
  const { soak, settings } = report;
  const each = (figures, digits) =>
    report.servers.map(({ key, label }) => `${label} ${fixed(figures[key], digits)}`).join(', ');
  return [
    `Machine: ${report.machine}.`,
    `Load: ${report.loadGenerator}, one thread, ${settings.connections} connections, ${settings.rounds} alternating rounds of ${settings.durationSeconds} s per endpoint and server; req/s and CPU per request are the medians of the rounds, latency the median p50 and the worst p99.`,
    '',
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row} |`),
    '',
    ...(options.parts ? partsTable(report) : []),
    `- Start to first 200 (ms): ${each(report.startupMs, 0)}.`,
    `- Idle RSS a second after the first answer (MB): ${each(report.idleRssMb, 1)}.`,
    `- Peak RSS during the rounds (MB): ${each(report.peakRssDuringRunsMb, 1)}.`,
    soak === null
      ? '- No million-request run (--total 0).'
      : `- Service, ${soak.requests} requests over every endpoint in ${fixed(soak.seconds, 1)} s, ${soak.failures} failed: peak RSS ${fixed(soak.peakRssMb, 1)} MB, ${fixed(soak.rssAfterMb, 1)} MB after; RSS slope over the last half ${fixed(soak.lastHalfSlopeMbPerMinute, 2)} MB/min.`,
    '',
  ].join('\n');
}

await main();
