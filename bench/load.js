/**
 * The load generators the benchmark can drive: wrk when it is installed, autocannon otherwise.
 * wrk is C: parsing a response costs it the same whatever the headers, so it measures the server.
 * autocannon parses responses in JavaScript, so a server that sends more header bytes also costs
 * the load generator more, on the same two cores.
 *
 * Both answer the same figures: requests, seconds, failed requests (connection errors, timeouts,
 * statuses of 400 and above) and the p50 and p99 latencies in milliseconds.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';

const scripts = mkdtempSync(join(tmpdir(), 'greeting-bench-'));

/** A Lua long string that holds `text` whatever it contains. */
function luaString(text) {
  let level = '';
  while (text.includes(`]${level}]`)) level += '=';
  return `[${level}[${text}]${level}]`;
}

/** One request as wrk writes it on the wire. */
function luaRequest({ method = 'GET', path, headers = {}, body }) {
  const table = Object.entries(headers)
    .map(([name, value]) => `[ ${luaString(name)} ] = ${luaString(value)}`)
    .join(', ');
  return `wrk.format(${luaString(method)}, ${luaString(path)}, { ${table} }, ${body === undefined ? 'nil' : luaString(body)})`;
}

/** What wrk prints when it is done: one JSON line of the figures, latencies in microseconds. */
const REPORT = `
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"duration_us":%d,"failures":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`;

/**
 * A wrk script: each connection sends `requests` in turn, and with `total` the run stops after that
 * many responses (wrk has one thread here, so the count is the whole run's). Without a total, no
 * Lua runs per response, which would cost the load generator time.
 */
function wrkScript(requests, total) {
  // Formatted in init, once wrk knows the Host header every request needs.
  const lines = [
    'local requests',
    `function init() requests = { ${requests.map(luaRequest).join(',\n  ')} } end`,
    'local sent = 0',
    'request = function() sent = sent + 1; return requests[(sent - 1) % #requests + 1] end',
  ];
  if (total !== undefined) {
    // wrk's main thread sleeps out the whole duration whatever its threads do, so the run ends here.
    lines.push(
      'local answered, failed = 0, 0',
      'response = function(status)',
      '  answered = answered + 1',
      '  if status >= 400 then failed = failed + 1 end',
      `  if answered >= ${total} then`,
      `    io.write(string.format('{"requests":%d,"failures":%d}\\n', answered, failed))`,
      '    os.exit(0)',
      '  end',
      'end',
    );
  }
  const file = join(scripts, `run-${process.hrtime.bigint()}.lua`);
  writeFileSync(file, `${lines.join('\n')}\n${REPORT}`);
  return file;
}

function runWrk(base, requests, { connections, duration, total }) {
  // Without a total, the run lasts `duration`; with one, long enough for any machine to reach it.
  const seconds = total === undefined ? duration : 3600;
  const started = performance.now();
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', wrkScript(requests, total), base];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const line = output.split('\n').find((text) => text.startsWith('{"requests"'));
      if (code !== 0 || line === undefined)
        return reject(new Error(`wrk ${args.join(' ')} exited ${code}:\n${output}`));
      const figures = JSON.parse(line);
      resolve({
        requests: figures.requests,
        seconds: total === undefined ? figures.duration_us / 1e6 : (performance.now() - started) / 1000,
        failures: figures.failures,
        p50: figures.p50_us / 1000,
        p99: figures.p99_us / 1000,
      });
    });
  });
}

async function runAutocannon(base, requests, { connections, duration, total }) {
  const [first] = requests;
  const result = await autocannon({
    url: requests.length === 1 ? base + first.path : base,
    connections,
    ...(total === undefined ? { duration } : { amount: total }),
    ...(requests.length === 1
      ? { method: first.method, headers: first.headers, body: first.body }
      : { requests: requests.map(({ method, path, headers, body }) => ({ method, path, headers, body })) }),
  });
  return {
    requests: result.requests.total,
    seconds: result.duration,
    failures: result.errors + result.timeouts + result.non2xx,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}

/** Seconds of h2load's `finished in 5.00s` or a time such as `1.23ms`, in milliseconds. */
function h2loadMs(text) {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text ?? '');
  return match === null ? Number.NaN : Number(match[1]) * { us: 0.001, ms: 1, s: 1000 }[match[2]];
}

/**
 * HTTP/2 load with h2load (Debian: nghttp2-client), C like wrk: `clients` connections of
 * `streams` concurrent streams each, h2c with prior knowledge for http://, h2 by ALPN for https://
 * (HTTP/1.1 with `http1`), for `duration` seconds or `total` requests.
 * It reports no percentiles: `p50` is the mean time for a request, `p99` the longest; `dataBytes`
 * is what the answers' DATA frames carried, all told.
 */
export function runH2load(base, [request], { clients, streams, duration, total, http1 = false }) {
  const args = ['-c', String(clients), '-m', String(streams), '-t', '1'];
  args.push(...(total === undefined ? ['-D', String(duration)] : ['-n', String(total)]), ...(http1 ? ['--h1'] : []));
  for (const [name, value] of Object.entries(request.headers ?? {})) args.push('-H', `${name}: ${value}`);
  if (request.body !== undefined) {
    const file = join(scripts, `body-${process.hrtime.bigint()}.json`);
    writeFileSync(file, request.body);
    args.push('-d', file);
  }
  args.push(base + request.path);
  return new Promise((resolve, reject) => {
    const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', (error) =>
      reject(
        error.code === 'ENOENT' ? new Error('h2load is not installed (Debian: apt-get install nghttp2-client)') : error,
      ),
    );
    child.on('close', (code) => {
      const number = (pattern) => Number(pattern.exec(output)?.[1] ?? Number.NaN);
      const time = /^time for request:\s+(\S+)\s+(\S+)\s+(\S+)/m.exec(output);
      const done = number(/(\d+) done/);
      if (code !== 0 || time === null || !(done > 0)) {
        return reject(new Error(`h2load ${args.join(' ')} exited ${code}:\n${output}`));
      }
      resolve({
        requests: done,
        seconds: h2loadMs(/finished in (\S+),/.exec(output)?.[1]) / 1000,
        failures: number(/(\d+) failed/) + number(/(\d+) errored/) + number(/(\d+) 4xx/) + number(/(\d+) 5xx/),
        p50: h2loadMs(time[3]),
        p99: h2loadMs(time[2]),
        dataBytes: number(/\((\d+)\) data/),
      });
    });
  });
}

function wrkInstalled() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // wrk --version prints its usage and exits 1: installed all the same.
    return error.code !== 'ENOENT';
  }
}

/**
 * The load generator to use: wrk when installed and `--load autocannon` does not ask otherwise.
 * `run(base, requests, { connections, duration | total })` sends the requests in turn on every
 * connection, for `duration` seconds or until `total` have been answered.
 */
export function loadGenerator(preferred) {
  const name = preferred ?? (wrkInstalled() ? 'wrk' : 'autocannon');
  if (preferred === undefined && name === 'autocannon') {
    process.stderr.write(
      'wrk is not installed (Debian: apt-get install wrk): using autocannon, which parses responses in\n' +
        'JavaScript on the same cores, so a server that sends more header bytes also slows the load generator.\n',
    );
  }
  if (name === 'wrk' && !wrkInstalled()) {
    throw new Error('wrk is not installed (Debian: apt-get install wrk); run with --load autocannon to use autocannon');
  }
  if (name !== 'wrk' && name !== 'autocannon') throw new Error(`unknown load generator ${name}: wrk or autocannon`);
  return { name, run: name === 'wrk' ? runWrk : runAutocannon };
}
