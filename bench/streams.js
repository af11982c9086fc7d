/**
 * `--streams`, the event stream's part: the service's GET /api/events against bare node:http writing
 * the same events (bench/servers/node-sse.js), in the same run, in alternating rounds. Each round
 * opens 1,000 streams of 1,000 events 100 ms apart, then 50 ms apart (10,000 and 20,000 events a
 * second asked for in all), 50 at a time, and counts the events that arrive over 3 s once every
 * stream is open (none may have ended), and the server's CPU time per event. Then each server, fresh, holds 1,000 quiet streams (an event a minute): its RSS over what
 * it had with none, per stream.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

const OPEN = 1000;
const COUNT = 1000;
/** The events' spacing in each round's streams: 10,000 and 20,000 events a second asked for in all. */
const INTERVALS_MS = [100, 50];
const WINDOW_MS = 3000;
const SETTLE_MS = 1000;

const MB = 1024 * 1024;

function rssBytes(pid) {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
}

/** User and system CPU time of a process, in µs (clock ticks of 10 ms). */
function cpuMicros(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Starts a server and resolves once a stream of one event has come whole from it. */
async function launch(server, port) {
  const child = spawn(process.execPath, [server.script], {
    cwd: server.cwd,
    env: { ...process.env, ...server.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    try {
      const streams = await openStreams(base, 1, '/api/events?count=1&interval_ms=0');
      await streams.ended;
      return { ...server, child, base };
    } catch (error) {
      if (tries > 500) throw new Error(`${server.label} did not serve a stream: ${error.message}`);
      await sleep(20);
    }
  }
}

/** Streams opened at once: a thousand connections asked for together overflow the listen backlog. */
const BATCH = 50;

/**
 * Opens `n` streams, each on a connection of its own, `BATCH` at a time, and counts the events that
 * arrive (each ends with a blank line) and the streams that have ended; resolves once every stream
 * has its head.
 */
async function openStreams(base, n, path) {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  let events = 0;
  let ended = 0;
  const requests = [];
  const ends = [];
  const open = () =>
    new Promise((resolve, reject) => {
      const req = request(`${base}${path}`, { agent }, (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`status ${res.statusCode}`));
          res.resume();
          return;
        }
        let last = '';
        res.setEncoding('utf8');
        res.on('data', (text) => {
          const joined = last + text;
          events += joined.split('\n\n').length - 1;
          last = joined.endsWith('\n') ? '\n' : '';
        });
        ends.push(
          new Promise((done) =>
            res.on('close', () => {
              ended += 1;
              done();
            }),
          ),
        );
        resolve();
      });
      req.on('error', reject);
      requests.push(req);
      req.end();
    });
  for (let opened = 0; opened < n; opened += BATCH) {
    await Promise.all(Array.from({ length: Math.min(BATCH, n - opened) }, open));
  }
  return {
    events: () => events,
    endedCount: () => ended,
    ended: Promise.all(ends),
    close() {
      for (const req of requests) req.destroy();
      agent.destroy();
    },
  };
}

/** One round of a server: events a second over the window, and its CPU per event. */
async function throughput(server, intervalMs) {
  const streams = await openStreams(server.base, OPEN, `/api/events?count=${COUNT}&interval_ms=${intervalMs}`);
  await sleep(SETTLE_MS);
  const [events0, cpu0, t0] = [streams.events(), cpuMicros(server.child.pid), performance.now()];
  await sleep(WINDOW_MS);
  const [events1, cpu1, t1] = [streams.events(), cpuMicros(server.child.pid), performance.now()];
  const endedEarly = streams.endedCount();
  streams.close();
  // A stream that ended within the window would make the count a share of fewer streams.
  if (endedEarly > 0) throw new Error(`${server.label}: ${endedEarly} streams ended before the window did`);
  await sleep(500);
  return {
    eventsPerSecond: ((events1 - events0) * 1000) / (t1 - t0),
    cpuMicrosPerEvent: (cpu1 - cpu0) / (events1 - events0),
  };
}

/** A fresh server's RSS with 1,000 quiet streams open, over its RSS with none, per stream. */
async function memoryPerStream(server, freePort) {
  const launched = await launch(server, await freePort());
  try {
    // Warmed up: a round of short streams, so that what is measured is the streams, not first use.
    const warm = await openStreams(launched.base, 50, '/api/events?count=5&interval_ms=0');
    await warm.ended;
    warm.close();
    await sleep(1000);
    const before = rssBytes(launched.child.pid);
    const quiet = await openStreams(launched.base, OPEN, '/api/events?count=1000&interval_ms=60000');
    await sleep(2000);
    const after = rssBytes(launched.child.pid);
    quiet.close();
    return { idleRssMb: before / MB, openRssMb: after / MB, bytesPerStream: (after - before) / OPEN };
  } finally {
    launched.child.kill('SIGTERM');
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** The event stream's bench: its figures, and the lines of the report. */
export async function eventStreamsBench({ root, freePort, rounds }) {
  const servers = [
    {
      key: 'service',
      label: 'service',
      cwd: root,
      script: 'dist/server.js',
      // Production defaults (STREAMS_MAX 1000, a log line per stream, metrics), the rate limit far above the run's.
      env: { RATE_LIMIT_MAX: '2147483647' },
    },
    { key: 'node', label: 'node:http SSE', cwd: root, script: 'bench/servers/node-sse.js', env: {} },
  ];
  const launched = [];
  for (const server of servers) launched.push(await launch(server, await freePort()));
  const runs = new Map(servers.flatMap(({ key }) => INTERVALS_MS.map((ms) => [`${key} ${ms}`, []])));
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const ms of INTERVALS_MS) {
        for (const server of launched) runs.get(`${server.key} ${ms}`).push(await throughput(server, ms));
      }
      process.stderr.write(`streams round ${round}/${rounds}\n`);
    }
  } finally {
    for (const server of launched) server.child.kill('SIGTERM');
  }
  const memory = {};
  for (const server of servers) memory[server.key] = await memoryPerStream(server, freePort);
  const figures = Object.fromEntries(
    servers.map(({ key }) => [
      key,
      {
        rates: Object.fromEntries(
          INTERVALS_MS.map((ms) => {
            const list = runs.get(`${key} ${ms}`);
            return [
              `${(OPEN * 1000) / ms}`,
              {
                eventsPerSecond: median(list.map((r) => r.eventsPerSecond)),
                cpuMicrosPerEvent: median(list.map((r) => r.cpuMicrosPerEvent)),
              },
            ];
          }),
        ),
        ...memory[key],
      },
    ]),
  );
  const { service, node } = figures;
  const kib = (bytes) => (bytes / 1024).toFixed(1);
  const asked = INTERVALS_MS.map((ms) => `${(OPEN * 1000) / ms}`);
  const markdown = [
    `Event streams: ${OPEN} streams open at once, each of ${COUNT} events ${INTERVALS_MS.join(' or ')} ms apart (${asked.join(' or ')} events/s asked for in all), opened ${BATCH} at a time; events counted over ${WINDOW_MS / 1000} s once all are open, the median of ${rounds} alternating rounds; the service with its production defaults.`,
    '',
    `| server | ${asked.map((rate) => `${rate}/s asked: events/s, CPU µs/event`).join(' | ')} | RSS idle MB | RSS with 1,000 quiet streams MB | per stream KiB |`,
    `|---|${asked.map(() => '---').join('|')}|---|---|---|`,
    ...servers.map(({ key, label }) => {
      const f = figures[key];
      const rates = asked.map(
        (rate) => `${f.rates[rate].eventsPerSecond.toFixed(0)}, ${f.rates[rate].cpuMicrosPerEvent.toFixed(1)}`,
      );
      return `| ${label} | ${rates.join(' | ')} | ${f.idleRssMb.toFixed(1)} | ${f.openRssMb.toFixed(1)} | ${kib(f.bytesPerStream)} |`;
    }),
    '',
    `- Service / node:http SSE, events/s: ${asked.map((rate) => `${(service.rates[rate].eventsPerSecond / node.rates[rate].eventsPerSecond).toFixed(2)} at ${rate}/s`).join(', ')}; ${kib(service.bytesPerStream)} KiB per open stream against ${kib(node.bytesPerStream)}.`,
    '',
  ];
  return { figures, markdown };
}
