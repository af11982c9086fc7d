/**
 * The benchmark: the service with its production defaults against bare node:http and Express 5,
 * on the same endpoints, with the same load, in alternating rounds so that machine noise hits
 * all three alike. Then the service's memory over 1,000,000 requests. Before all that, every
 * server's start-up time, over several alternating starts.
 *
 *   npm run bench                       # 3 rounds of 5 s per endpoint and server
 *   npm run bench -- --rounds 2 --duration 3 --total 200000   # a quick look
 *   npm run bench -- --baseline ../other-checkout   # adds another build of the service to the rounds
 *   npm run bench -- --only hello,echo --total 0    # some endpoints (by name), no million-request run
 *   npm run bench -- --load autocannon              # wrk is used when installed
 *   npm run bench -- --tracing                      # adds the service exporting spans: all, and a tenth
 *   npm run bench -- --parts --only hello --total 0 # what each default costs: the service with each turned off
 *   npm run bench -- --faults                       # adds the service with fault injection on, no fault asked for
 *   npm run bench -- --http2                        # the service and bare Node over h2c, h2 (TLS) and HTTPS/1.1
 *   npm run bench -- --h2-streams 20                # with --http2: each h2load client's concurrent streams (10)
 *   npm run bench -- --streams                      # instead: the event stream against bare node:http (bench/streams.js),
 *                                                   # and the WebSocket echo against a bare ws server (bench/websocket.js)
 *   npm run bench -- --grpc                         # instead: a unary gRPC call of the service (h2c) against a bare
 *                                                   # @grpc/grpc-js server, both driven by h2load (bench/grpc.js)
 *   npm run bench -- --starts 15                    # start-up time: the median of 15 starts of each server (7 by default)
 *   npm run bench -- --encodings --starts 0 --total 0  # the OpenAPI document and a 64 KiB echo, plain and in each
 *                                                      # coding, against node:http + node:zlib at the same level
 *   npm run bench -- --instructions --only hello --parts  # instead: instructions per request (valgrind's callgrind),
 *                                                         # --warm 20000 requests, then --count 10000 counted
 *
 * Prints a Markdown report (the one BENCHMARKS.md quotes) and writes it, with the raw
 * figures as JSON, to bench/results/.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { connect as connectHttp2 } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { CODINGS } from '../dist/lib/content-coding.js';
import { codedEndpoints, ENDPOINTS } from './endpoints.js';
import { bareGrpcServer, checkSayHello, grpcMarkdown, REPLY, SAY_HELLO } from './grpc.js';
import { instructionsMarkdown, instructionsPerRequest } from './instructions.js';
import { loadGenerator, runH2load } from './load.js';
import { routeOf } from './servers/answer-request.js';
import { eventStreamsBench } from './streams.js';
import { websocketEcho, websocketMarkdown } from './websocket.js';

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
    http2: { type: 'boolean', default: false },
    'h2-streams': { type: 'string', default: '10' },
    streams: { type: 'boolean', default: false },
    grpc: { type: 'boolean', default: false },
    starts: { type: 'string', default: '7' },
    encodings: { type: 'boolean', default: false },
    instructions: { type: 'boolean', default: false },
    warm: { type: 'string', default: '20000' },
    count: { type: 'string', default: '10000' },
  },
});
/** The endpoints measured: all, or those whose name contains one of the words of `--only`. */
const MEASURED = (options.encodings ? codedEndpoints(CODINGS) : ENDPOINTS).filter(
  ({ name }) => options.only === undefined || options.only.split(',').some((word) => name.includes(word)),
);
const LOAD = loadGenerator(options.load);
const ROUNDS = Number(options.rounds);
const DURATION_S = Number(options.duration);
const CONNECTIONS = Number(options.connections);
/** With --http2: the concurrent streams of each h2load client, of which there are CONNECTIONS. */
const STREAMS = Number(options['h2-streams']);
const TOTAL_REQUESTS = Number(options.total);
/** How many times each server is started, alternating, for its start-up time. */
const STARTS = Number(options.starts);
const WARM_UP_S = 2;
/** With --instructions: the requests that warm each server, then those counted. */
const WARM = Number(options.warm);
const COUNT = Number(options.count);

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

/**
 * Polls until the server answers its `firstRequest` (GET /api/hello unless it has one) with 200;
 * resolves with the milliseconds since `since`.
 */
async function firstOk(server, since, timeoutMs = 10_000) {
  const request = server.firstRequest ?? { method: 'GET', path: '/api/hello' };
  for (;;) {
    try {
      if ((await answer(server, request)).status === 200) return performance.now() - since;
    } catch {
      // not listening yet
    }
    if (performance.now() - since > timeoutMs) {
      throw new Error(`${server.base}${request.path} did not answer 200 within ${timeoutMs} ms`);
    }
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
 * With --parts, the service with one default at a time turned off, then all three, bare Fastify,
 * and node:http writing the headers of every answer of the service: what each part of the production
 * defaults costs, what the framework does, and what the runtime charges for the contract's headers.
 */
const PARTS = [
  serviceServer('no-log', 'LOG_LEVEL=warn', root, { LOG_LEVEL: 'warn' }),
  serviceServer('no-metrics', 'METRICS_ENABLED=false', root, { METRICS_ENABLED: 'false' }),
  serviceServer('no-limit', 'RATE_LIMIT_MAX=0', root, { RATE_LIMIT_MAX: '0' }),
  serviceServer('none', 'all three off', root, { LOG_LEVEL: 'warn', METRICS_ENABLED: 'false', RATE_LIMIT_MAX: '0' }),
  { key: 'fastify', label: 'bare Fastify', cwd: root, script: 'bench/servers/fastify.js', env: {} },
];

/**
 * With --http2, a self-signed certificate for 127.0.0.1 (the load generators do not check it), for
 * the servers over TLS.
 */
function benchCertificate() {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-bench-tls-'));
  const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { encoding: 'utf8' },
  );
  if (made.status !== 0)
    throw new Error(`openssl could not make the bench's certificate: ${made.stderr ?? made.error}`);
  return { TLS_CERT_FILE: cert, TLS_KEY_FILE: key };
}
const certificate = options.http2 ? benchCertificate() : null;

/**
 * With --http2, the service and the bare Node server of each protocol, each pair driven alike:
 * HTTP/2 by h2load (h2c with prior knowledge, and h2 over TLS), HTTPS/1.1 by the HTTP/1.1 load
 * generator. Their protocol tells the bench how to reach them.
 */
const PROTOCOL_SERVERS =
  certificate === null
    ? []
    : [
        { ...serviceServer('service-h2c', 'service h2c', root, { HTTP2: 'true' }), protocol: 'h2c' },
        {
          key: 'node-h2c',
          label: 'node:http2 h2c',
          cwd: root,
          script: 'bench/servers/node-http2.js',
          env: {},
          protocol: 'h2c',
        },
        { ...serviceServer('service-h2', 'service h2', root, { HTTP2: 'true', ...certificate }), protocol: 'h2' },
        {
          key: 'node-h2',
          label: 'node:http2 h2',
          cwd: root,
          script: 'bench/servers/node-http2.js',
          env: certificate,
          protocol: 'h2',
        },
        { ...serviceServer('service-https', 'service HTTPS/1.1', root, certificate), protocol: 'https' },
        {
          key: 'node-https',
          label: 'node:https',
          cwd: root,
          script: 'bench/servers/node-https.js',
          env: certificate,
          protocol: 'https',
        },
      ];

/** The service and the bare server compared in each table of the report, the first the HTTP/1.1 one. */
const PAIRS = [
  ['HTTP/1.1', 'service', 'node'],
  ...(certificate === null
    ? []
    : [
        ['HTTP/2 with prior knowledge (h2c)', 'service-h2c', 'node-h2c'],
        ['HTTP/2 over TLS (h2)', 'service-h2', 'node-h2'],
        ['HTTPS/1.1', 'service-https', 'node-https'],
      ]),
];

/** With --encodings: the service (and the baseline) against bare node:http compressing with node:zlib at the same level. */
const ENCODING_SERVERS = [
  serviceServer('service', 'service', root),
  ...(options.baseline === undefined ? [] : [serviceServer('baseline', 'baseline', options.baseline)]),
  { key: 'node-zlib', label: 'node:http + node:zlib', cwd: root, script: 'bench/servers/node-http-zlib.js', env: {} },
];

/** The servers compared, the service first. */
const SERVERS = options.encodings
  ? ENCODING_SERVERS
  : [
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
      // Its SERVICE_HEADERS are read from the service's own answers when the run starts.
      {
        key: 'node-headers',
        label: "node:http, the service's headers",
        cwd: root,
        script: 'bench/servers/node-http.js',
        env: {},
      },
      // With --http2, the protocols' servers take Express's place in the rounds' time, and --parts's too.
      ...(certificate !== null
        ? PROTOCOL_SERVERS
        : options.parts
          ? []
          : [{ key: 'express', label: 'Express 5', cwd: root, script: 'bench/servers/express.js', env: {} }]),
    ];

/** The scheme of a server's URL. */
const schemeOf = (server) => (server.protocol === 'h2' || server.protocol === 'https' ? 'https' : 'http');

/**
 * Starts a server's process, behind the command `prefix` if any (valgrind); resolves once it has
 * answered its first 200.
 */
async function launch(server, { prefix = [], timeoutMs } = {}) {
  const port = await freePort();
  const stdout = server.log ? openSync(server.log, 'w') : 'ignore';
  const startedAt = performance.now();
  const [command, ...args] = [...prefix, process.execPath, server.script];
  const child = spawn(command, args, {
    cwd: server.cwd,
    env: { ...process.env, ...server.env, PORT: String(port) },
    stdio: ['ignore', stdout, 'inherit'],
  });
  const base = `${schemeOf(server)}://127.0.0.1:${port}`;
  return { ...server, child, base, startupMs: await firstOk({ ...server, base }, startedAt, timeoutMs) };
}

async function start(server) {
  const launched = await launch(server);
  // Idle: a second after the first answer, with nothing else asked of it.
  await sleep(1000);
  return { ...launched, idleRssMb: rssBytes(launched.child.pid) / MB };
}

/**
 * Each server's times from process start to its first 200, over STARTS starts taken in turn
 * (service, baseline, node:http, ..., service, ...), each process ended once it has answered:
 * one start says little on a machine whose load comes and goes.
 */
async function startTimes() {
  const times = new Map(SERVERS.map((server) => [server.key, []]));
  // fetch loads its client on first use: not in the first server's time.
  await fetch('http://127.0.0.1:1').catch(() => {});
  for (let round = 0; round < STARTS; round++) {
    for (const server of SERVERS) {
      const { child, startupMs } = await launch(server);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
      times.get(server.key).push(startupMs);
    }
  }
  return times;
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

/** One answer, in the server's protocol; the bench's certificate is not checked. */
async function answer(server, { method, path, headers = {}, body }) {
  if (server.protocol === 'h2c' || server.protocol === 'h2') {
    const session = connectHttp2(server.base, { rejectUnauthorized: false });
    try {
      return await new Promise((resolve, reject) => {
        session.once('error', reject);
        const stream = session.request(
          { ':method': method, ':path': path, ...headers },
          { endStream: body === undefined },
        );
        let status = 0;
        let text = '';
        stream.on('response', (fields) => {
          status = fields[':status'];
        });
        stream.setEncoding('utf8').on('data', (chunk) => {
          text += chunk;
        });
        stream.on('end', () => resolve({ status, text }));
        stream.on('error', reject);
        if (body !== undefined) stream.end(body);
      });
    } finally {
      session.close();
    }
  }
  if (server.protocol === 'https') {
    return new Promise((resolve, reject) => {
      const request = httpsRequest(server.base + path, { method, headers, rejectUnauthorized: false }, (response) => {
        let text = '';
        response.setEncoding('utf8').on('data', (chunk) => {
          text += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode, text }));
      });
      request.on('error', reject);
      request.end(body);
    });
  }
  const response = await fetch(server.base + path, { method, headers, body });
  return { status: response.status, text: await response.text() };
}

/**
 * Each server must answer each endpoint with the same status and body (timestamps aside), a coded
 * one decoded by fetch (which has no zstd everywhere).
 */
async function checkSameAnswers(servers) {
  const normalise = (text) => text.replace(/"timestamp":"[^"]+"/, '"timestamp":"…"');
  const coded = options.encodings ? MEASURED.filter(({ coding }) => coding !== 'zstd') : [];
  for (const endpoint of [...ENDPOINTS, ...coded]) {
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

/** Header fields node:http writes of its own, or the body decides. */
const OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

/** The header fields of a server's answer to an endpoint, but node:http's own: names and values as sent, in order. */
async function headerFields(server, { method, path, headers, body }) {
  const raw = await new Promise((resolve, reject) => {
    const request = httpRequest(server.base + path, { method, headers }, (response) => {
      response.resume().on('end', () => resolve(response.rawHeaders));
    });
    request.on('error', reject).end(body);
  });
  const fields = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!OWN_HEADERS.has(raw[i].toLowerCase())) fields.push([raw[i], raw[i + 1]]);
  }
  return fields;
}

/** The header fields of one live answer of the service to each endpoint, by route: what the same-headers baseline writes. */
async function serviceHeaders() {
  const service = await launch(SERVERS[0]);
  try {
    const byRoute = {};
    for (const endpoint of ENDPOINTS)
      byRoute[routeOf(endpoint.method, endpoint.path)] = await headerFields(service, endpoint);
    return JSON.stringify(byRoute);
  } finally {
    service.child.kill('SIGTERM');
  }
}

/** The same-headers baseline writes the names the service writes, in its order, on every endpoint. */
async function checkSameHeaders(service, baseline) {
  const names = async (server, endpoint) => (await headerFields(server, endpoint)).map(([name]) => name).join(', ');
  for (const endpoint of ENDPOINTS) {
    const [expected, actual] = [await names(service, endpoint), await names(baseline, endpoint)];
    if (expected !== actual)
      throw new Error(`${endpoint.name}: the service writes ${expected}; ${baseline.label} ${actual}`);
  }
}

async function main() {
  const sameHeaders = await serviceHeaders();
  for (const server of SERVERS) if (server.key === 'node-headers') server.env.SERVICE_HEADERS = sameHeaders;
  const starts = STARTS > 0 ? await startTimes() : null;
  const servers = [];
  for (const server of SERVERS) servers.push(await start(server));
  const [service] = servers;
  const load = (server, requests, extra) =>
    (server.protocol === 'h2c' || server.protocol === 'h2'
      ? runH2load(server.base, requests, { clients: CONNECTIONS, streams: STREAMS, ...extra })
      : LOAD.run(server.base, requests, { connections: CONNECTIONS, ...extra })
    ).catch(async (error) => {
      const { status, text } = await answer(server, requests[0]);
      throw new Error(`${server.label} ${requests[0].name}: ${error.message}\nIt now answers ${status} ${text}`);
    });
  try {
    await checkSameAnswers(servers);
    // With --encodings, no same-headers baseline runs: its pair compresses, and is held to the same bodies only.
    const sameHeadersServer = servers.find(({ key }) => key === 'node-headers');
    if (sameHeadersServer !== undefined) await checkSameHeaders(service, sameHeadersServer);
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
      http2: certificate === null ? null : { loadGenerator: 'h2load', clients: CONNECTIONS, streams: STREAMS },
      servers: servers.map(({ key, label }) => ({ key, label })),
      settings: {
        rounds: ROUNDS,
        durationSeconds: DURATION_S,
        connections: CONNECTIONS,
        totalRequests: TOTAL_REQUESTS,
        starts: STARTS,
      },
      startupMs: Object.fromEntries(
        servers.map(({ key, startupMs }) => [key, starts === null ? startupMs : median(starts.get(key))]),
      ),
      startupSamplesMs: starts === null ? null : Object.fromEntries(starts),
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

/** The table of the service and the servers compared with it (`labels`), the service first. */
function comparison(report, labels, latency) {
  const [service, ...compared] = labels;
  const header = [
    'endpoint',
    ...labels.flatMap(({ label }) => [`${label} req/s`, latency, 'CPU µs/req']),
    ...compared.map(({ label }) => `${service.label} / ${label}`),
  ];
  const rows = report.endpoints.map((endpoint) =>
    [
      endpoint.name,
      ...labels.flatMap(({ key }) => {
        const { rps, p50, p99, cpuMicros: cpu } = endpoint[key];
        return [fixed(rps), `${ms(p50)} / ${ms(p99)}`, fixed(cpu)];
      }),
      ...compared.map(({ key }) => fixed(endpoint[service.key].rps / endpoint[key].rps, 2)),
    ].join(' | '),
  );
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row} |`)];
}

function toMarkdown(report) {
  const labels = report.servers;
  const protocols = new Set(PROTOCOL_SERVERS.map(({ key }) => key));
  const { soak, settings, http2 } = report;
  const each = (figures, digits) =>
    labels.map(({ key, label }) => `${label} ${fixed(figures[key], digits)}`).join(', ');
  const byKey = (key) => labels.find((label) => label.key === key);
  const protocolTables = PAIRS.slice(1).flatMap(([title, service, bare]) => [
    '',
    `${title}:`,
    '',
    ...comparison(report, [byKey(service), byKey(bare)], title.startsWith('HTTP/2') ? 'mean / max ms' : 'p50 / p99 ms'),
  ]);
  return [
    `Machine: ${report.machine}.`,
    `Load: ${report.loadGenerator}, one thread, ${settings.connections} connections, ${settings.rounds} alternating rounds of ${settings.durationSeconds} s per endpoint and server; req/s and CPU per request are the medians of the rounds, latency the median p50 and the worst p99.`,
    ...(http2 === null
      ? []
      : [
          `HTTP/2: h2load, one thread, ${http2.clients} clients of ${http2.streams} concurrent streams each; h2load gives no percentiles, so the latency is the median of the rounds' mean time for a request and the worst round's longest.`,
        ]),
    '',
    ...comparison(
      report,
      labels.filter(({ key }) => !protocols.has(key) && !PARTS.some((part) => part.key === key)),
      'p50 / p99 ms',
    ),
    ...protocolTables,
    '',
    ...(options.parts ? partsTable(report) : []),
    report.startupSamplesMs === null
      ? `- Start to first 200 (ms), one start each: ${each(report.startupMs, 0)}.`
      : `- Start to first 200 (ms), the median of ${settings.starts} alternating starts (least to most): ${labels
          .map(({ key, label }) => {
            const samples = report.startupSamplesMs[key];
            return `${label} ${fixed(report.startupMs[key], 0)} (${fixed(Math.min(...samples), 0)} to ${fixed(Math.max(...samples), 0)})`;
          })
          .join(', ')}.`,
    `- Idle RSS a second after the first answer (MB): ${each(report.idleRssMb, 1)}.`,
    `- Peak RSS during the rounds (MB): ${each(report.peakRssDuringRunsMb, 1)}.`,
    soak === null
      ? '- No million-request run (--total 0).'
      : `- Service, ${soak.requests} requests over every endpoint in ${fixed(soak.seconds, 1)} s, ${soak.failures} failed: peak RSS ${fixed(soak.peakRssMb, 1)} MB, ${fixed(soak.rssAfterMb, 1)} MB after; RSS slope over the last half ${fixed(soak.lastHalfSlopeMbPerMinute, 2)} MB/min.`,
    '',
  ].join('\n');
}

/**
 * With --instructions: instructions per request of each server (but Express) on each endpoint,
 * counted by callgrind (bench/instructions.js), against node:http writing the service's headers.
 */
async function instructionsMain() {
  const sameHeaders = await serviceHeaders();
  const servers = SERVERS.filter(({ key }) => key !== 'express').map((server) =>
    server.key === 'node-headers' ? { ...server, env: { ...server.env, SERVICE_HEADERS: sameHeaders } } : server,
  );
  const counts = new Map(MEASURED.map(({ name }) => [name, new Map()]));
  for (const endpoint of MEASURED) {
    for (const server of servers) {
      const figure = await instructionsPerRequest(launch, server, endpoint, { warm: WARM, count: COUNT });
      counts.get(endpoint.name).set(server.key, figure);
      process.stderr.write(`${endpoint.name}, ${server.label}: ${Math.round(figure)} instructions per request\n`);
    }
  }
  const yardstick = servers.find(({ key }) => key === 'node-headers');
  const markdown = [
    `Node ${process.version}; callgrind, ${WARM} requests to warm each server, then ${COUNT} counted (h2load, HTTP/1.1, 10 connections).`,
    '',
    ...instructionsMarkdown(servers, MEASURED, counts, yardstick),
    '',
  ].join('\n');
  writeFileSync(join(resultsDir, 'instructions.md'), markdown);
  process.stdout.write(markdown);
}

/** With --streams: the long-lived answers alone, against their bare baselines. */
async function streamsMain() {
  const { figures, markdown } = await eventStreamsBench({ root, freePort, rounds: ROUNDS });
  const service = await start(serviceServer('service', 'service', root));
  const bare = await start({ key: 'ws', label: 'bare ws', cwd: root, script: 'bench/servers/ws-echo.js', env: {} });
  let websocket;
  try {
    websocket = await websocketEcho(service, bare, { rounds: ROUNDS, seconds: DURATION_S });
  } finally {
    service.child.kill('SIGTERM');
    bare.child.kill('SIGTERM');
  }
  const text = [
    `Machine: ${cpus().length} × ${cpus()[0].model}, Node ${process.version}.`,
    '',
    ...markdown,
    ...websocketMarkdown(websocket),
    '',
  ].join('\n');
  writeFileSync(join(resultsDir, 'streams.json'), `${JSON.stringify({ events: figures, websocket }, null, 2)}\n`);
  writeFileSync(join(resultsDir, 'streams.md'), text);
  process.stdout.write(text);
}

/**
 * With --grpc: the service's unary gRPC call against bare @grpc/grpc-js (bench/grpc.js), over h2c,
 * in alternating rounds of h2load. h2load counts an answer whose HTTP status is 200 as done, and a
 * failed call is one too (its status is in the trailers, and it has no reply): a round counts only
 * if its answers carried a whole reply for every call done (and at most one more for each stream,
 * whose reply came before the round ended and its trailers after), and the service's /metrics
 * must count no call but OK.
 */
async function grpcMain() {
  const servers = [
    await start({ ...serviceServer('service-grpc', 'service', root, { HTTP2: 'true' }), protocol: 'h2c' }),
    await start(bareGrpcServer(root)),
  ];
  const h2load = (server, extra) =>
    runH2load(server.base, [SAY_HELLO], { clients: CONNECTIONS, streams: STREAMS, ...extra });
  try {
    for (const server of servers) await checkSayHello(server);
    const rss = new Map(servers.map((server) => [server.key, sampleRss(server.child.pid, 100)]));
    for (const server of servers) await h2load(server, { duration: WARM_UP_S });
    const runs = new Map(servers.map((server) => [server.key, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const server of servers) {
        const cpuBefore = cpuMicros(server.child.pid);
        const result = await h2load(server, { duration: DURATION_S });
        const cpu = (cpuMicros(server.child.pid) - cpuBefore) / result.requests;
        const replies = result.dataBytes / REPLY.length;
        if (
          result.failures > 0 ||
          !Number.isInteger(replies) ||
          replies < result.requests ||
          replies > result.requests + CONNECTIONS * STREAMS
        ) {
          throw new Error(
            `${server.label}: ${result.failures} failed, ${result.dataBytes} bytes of replies for ${result.requests} calls of ${REPLY.length}`,
          );
        }
        runs.get(server.key).push({ rps: result.requests / result.seconds, mean: result.p50, max: result.p99, cpu });
      }
      process.stderr.write(`round ${round}/${ROUNDS}: gRPC SayHello\n`);
    }
    for (const sampler of rss.values()) sampler.stop();
    const metrics = (await answer(servers[0], { method: 'GET', path: '/metrics' })).text;
    const failed = metrics
      .split('\n')
      .filter((line) => /^grpc_server_handled_total\{/.test(line) && !/grpc_code="OK"/.test(line));
    if (failed.length > 0) throw new Error(`the service counted calls that did not end OK:\n${failed.join('\n')}`);
    const figures = servers.map((server) => {
      const list = runs.get(server.key);
      return {
        key: server.key,
        label: server.label,
        rps: median(list.map((run) => run.rps)),
        mean: median(list.map((run) => run.mean)),
        max: Math.max(...list.map((run) => run.max)),
        cpuMicros: median(list.map((run) => run.cpu)),
        idleRssMb: server.idleRssMb,
        peakRssMb: rss.get(server.key).peak() / MB,
      };
    });
    const text = [
      `Machine: ${cpus().length} × ${cpus()[0].model}, Node ${process.version}.`,
      '',
      ...grpcMarkdown(figures, { clients: CONNECTIONS, streams: STREAMS, rounds: ROUNDS, seconds: DURATION_S }),
      '',
    ].join('\n');
    writeFileSync(join(resultsDir, 'grpc.json'), `${JSON.stringify(figures, null, 2)}\n`);
    writeFileSync(join(resultsDir, 'grpc.md'), text);
    process.stdout.write(text);
  } finally {
    for (const server of servers) server.child.kill('SIGTERM');
  }
}

await (options.streams
  ? streamsMain()
  : options.grpc
    ? grpcMain()
    : options.instructions
      ? instructionsMain()
      : main());
