/**
 * Instructions per request (`npm run bench -- --instructions`): what a server runs for one request
 * of an endpoint, counted by valgrind's callgrind, a figure that does not move with what else the
 * machine is doing, as CPU time on these shared cores does. Each server runs under callgrind with
 * its counting off, takes `warm` requests from h2load (HTTP/1.1, 10 connections) so that V8 has
 * compiled what it will, then is counted over `count` more: neither start-up nor the first
 * compilations are in the figure. A fresh process for each endpoint.
 *
 * What is batched by time is not priced so: under valgrind a process runs some fifty times slower,
 * so a batch holds fewer requests and each bears more of the batch's own work (the log lines'
 * batches of 10 ms). Compare with `LOG_LEVEL=warn`, or in the wall-clock rounds.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { runH2load } from './load.js';

const run = promisify(execFile);

/**
 * `callgrind_control` finds the process by a name made of `$USER` and `$HOST`: the same for both.
 * HOST is also the service's own setting, which the bench sets to this address anyway.
 */
const NAMED = { USER: process.env.USER ?? 'bench', HOST: '127.0.0.1' };

/** A server under callgrind takes this long to answer its first request. */
const START_TIMEOUT_MS = 180_000;

/** Counting on or off in the callgrind running as `pid`. */
async function counting(pid, on) {
  await run('callgrind_control', ['-i', on ? 'on' : 'off', String(pid)], { env: { ...process.env, ...NAMED } });
}

/**
 * The instructions `server` runs per request of `endpoint`. `launch` starts a server's process
 * behind a command of its own (`prefix`) and resolves once it answers.
 */
export async function instructionsPerRequest(launch, server, endpoint, { warm, count }) {
  const profile = join(tmpdir(), `greeting-bench-callgrind-${server.key}-${process.pid}`);
  const launched = await launch(
    { ...server, env: { ...server.env, ...NAMED } },
    {
      prefix: ['valgrind', '-q', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${profile}`],
      timeoutMs: START_TIMEOUT_MS,
    },
  );
  const requests = (total) => runH2load(launched.base, [endpoint], { clients: 10, streams: 1, total, http1: true });
  try {
    await requests(warm);
    await counting(launched.child.pid, true);
    const { requests: done, failures } = await requests(count);
    await counting(launched.child.pid, false);
    if (failures > 0 || done !== count)
      throw new Error(`${server.label} ${endpoint.name}: ${failures} of ${done} failed`);
  } finally {
    const exited = once(launched.child, 'exit');
    launched.child.kill('SIGTERM');
    await exited;
  }
  // Not its `summary:`, which counts from the start, when counting was off: 0.
  const totals = /^totals:\s*(\d+)/m.exec(readFileSync(profile, 'utf8'));
  rmSync(profile, { force: true });
  if (totals === null) throw new Error(`${server.label}: callgrind wrote no totals`);
  return Number(totals[1]) / count;
}

/** The table: thousands of instructions per request for each server, and the service's over `yardstick`'s. */
export function instructionsMarkdown(servers, endpoints, counts, yardstick) {
  const header = ['endpoint', ...servers.map(({ label }) => label), `service / ${yardstick.label}`];
  const rows = endpoints.map(({ name }) => {
    const of = (key) => counts.get(name).get(key);
    return [
      name,
      ...servers.map(({ key }) => `${(of(key) / 1000).toFixed(1)}k`),
      (of('service') / of(yardstick.key)).toFixed(2),
    ];
  });
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ];
}
