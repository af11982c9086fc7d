import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { SETTINGS } from '../src/config/index.js';
import { freePort } from './ports.js';

/**
 * The process entry, built to dist/server.js (npm run test:unit builds first), run as a real
 * child process with a clean environment: what the process tests, the hostile-client tests
 * and the load runs start.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * An environment without what npx was told when it started the tests (`npx -p node@22 -c '...'`,
 * as CI runs them): an `npx` a test runs would run that instead.
 */
export function withoutOuterNpx(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { npm_config_call: _call, npm_config_package: _package, ...rest } = env;
  return rest;
}

/** Every variable src/config/ reads: a value inherited from the test's own environment must not leak in. */
const CONFIG_VARIABLES = Object.values(SETTINGS).map(({ env }) => env);

export type LogLine = Record<string, unknown>;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when the process exited. */
  at: number;
}

export interface ServerProcess {
  readonly child: ChildProcess;
  /** Standard output, one entry per line: the parsed JSON, or `{ raw }` for a line that is not JSON. */
  readonly lines: LogLine[];
  stdout(): string;
  stderr(): string;
  /** The first log line, already written or still to come, that matches. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** Settles once the process has exited and its output has been read to the end. */
  readonly exited: Promise<Exit>;
  /** SIGKILL, unless the process has exited already. */
  kill(): void;
}

export interface RunningServer extends ServerProcess {
  readonly port: number;
}

/** Every child started, for killAllServers. */
const children = new Set<ServerProcess>();

const LISTENING = /^Server listening at https?:\/\/127\.0\.0\.1:(\d+)$/;

export interface SpawnOptions {
  /**
   * Standard output goes to this file instead of a pipe: for load runs, whose hundreds of
   * thousands of log lines are read once the process has exited (`lines` then stays empty).
   */
  logFile?: string;
  /** Options for Node itself, before the script: `--import` of a module that runs first, say. */
  nodeArgs?: string[];
  /** Runs it as this user and group rather than the test's own. */
  uid?: number;
  gid?: number;
  /** A cgroup's `cgroup.procs` file: the process is in that cgroup from its first instruction. */
  cgroupProcs?: string;
}

export async function spawnServer(
  env: Record<string, string> = {},
  args: string[] = [],
  { logFile, nodeArgs = [], uid, gid, cgroupProcs }: SpawnOptions = {},
): Promise<ServerProcess> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const name of [...CONFIG_VARIABLES, 'NODE_TEST_CONTEXT']) delete childEnv[name];
  Object.assign(childEnv, { PORT: '0', HOST: '127.0.0.1' }, env);

  const logFd = logFile === undefined ? undefined : openSync(logFile, 'w');
  const command = [process.execPath, ...nodeArgs, 'dist/server.js', ...args];
  // The shell joins the cgroup, then becomes Node: nothing of Node's is charged elsewhere.
  const [file, ...argv] =
    cgroupProcs === undefined ? command : ['sh', '-c', 'echo $$ > "$0" && exec "$@"', cgroupProcs, ...command];
  const child = spawn(file as string, argv, {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', logFd ?? 'pipe', 'pipe'],
    ...(uid !== undefined && { uid }),
    ...(gid !== undefined && { gid }),
  });
  if (logFd !== undefined) closeSync(logFd); // the child has its own copy
  const lines: LogLine[] = [];
  const waiters = new Set<{ predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void }>();
  let stdout = '';
  let stderr = '';
  let partial = '';
  let closed = false;
  let exitedAt = 0;

  const addLine = (text: string): void => {
    let line: LogLine;
    try {
      const parsed: unknown = JSON.parse(text);
      line = typeof parsed === 'object' && parsed !== null ? (parsed as LogLine) : { raw: text };
    } catch {
      line = { raw: text };
    }
    lines.push(line);
    for (const waiter of waiters) {
      if (waiter.predicate(line)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  };

  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    stdout += chunk;
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const part of parts) if (part !== '') addLine(part);
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.on('exit', () => {
    exitedAt = performance.now();
  });

  const exited = new Promise<Exit>((resolve) => {
    child.on('error', () => {
      resolve({ code: null, signal: null, at: performance.now() });
    });
    child.on('close', (code, signal) => {
      if (partial !== '') addLine(partial);
      closed = true;
      resolve({ code, signal, at: exitedAt || performance.now() });
    });
  });

  const server: ServerProcess = {
    child,
    lines,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitForLog(predicate, timeoutMs = 10_000) {
      const found = lines.find(predicate);
      if (found !== undefined) return Promise.resolve(found);
      const describe = () => `\nstdout:\n${stdout}\nstderr:\n${stderr}`;
      if (closed) return Promise.reject(new Error(`the process exited without writing the log line${describe()}`));
      return new Promise<LogLine>((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (line: LogLine) => {
            clearTimeout(timer);
            resolve(line);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no such log line within ${timeoutMs} ms${describe()}`));
        }, timeoutMs);
        waiters.add(waiter);
        void exited.then(() => {
          if (!waiters.delete(waiter)) return;
          clearTimeout(timer);
          reject(new Error(`the process exited without writing the log line${describe()}`));
        });
      });
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
  children.add(server);
  return server;
}

/**
 * Spawns the server and resolves once it is listening, with its port: the port it logs, or
 * with a log file, a free port chosen here and polled until /healthz answers.
 */
export async function startServer(
  env: Record<string, string> = {},
  args: string[] = [],
  options: SpawnOptions = {},
): Promise<RunningServer> {
  const chosenPort = options.logFile === undefined ? undefined : await freePort();
  const server = await spawnServer(
    chosenPort === undefined ? env : { ...env, PORT: String(chosenPort) },
    args,
    options,
  );
  try {
    if (chosenPort !== undefined) {
      await untilHealthy(server, chosenPort);
      return Object.assign(server, { port: chosenPort });
    }
    const line = await server.waitForLog((l) => typeof l.msg === 'string' && LISTENING.test(l.msg), 20_000);
    const port = Number(LISTENING.exec(line.msg as string)?.[1]);
    return Object.assign(server, { port });
  } catch (error) {
    server.kill();
    throw error;
  }
}

async function untilHealthy(server: ServerProcess, port: number, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let exited = false;
  void server.exited.then(() => {
    exited = true;
  });
  for (;;) {
    try {
      const res = await request(`http://127.0.0.1:${port}/healthz`, { reset: true });
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    if (exited) throw new Error(`the server exited before it listened\nstderr:\n${server.stderr()}`);
    if (performance.now() > deadline) throw new Error(`the server did not listen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The process's resident set (`VmRSS`), or its peak so far (`VmHWM`), in MiB, from /proc (Linux). */
export async function rssMiB(pid: number, which: 'VmRSS' | 'VmHWM' = 'VmRSS'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = Number(new RegExp(`^${which}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1]);
  return kib / 1024;
}

/**
 * The CPU time the process has used, its threads' included (user and system), in seconds, from
 * /proc (Linux), which counts it in ticks of 1/100 s (USER_HZ on every architecture Node runs on).
 */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command's name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The lines of a log file written by a server started with `logFile`, parsed. */
export async function readLog(file: string): Promise<LogLine[]> {
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as LogLine);
}

/** SIGKILLs every server still running: for a test file's final `after`, whatever happened. */
export function killAllServers(): void {
  for (const child of children) child.kill();
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export const exitOf = (exit: Exit) => ({ code: exit.code, signal: exit.signal });

/** Asserts `server` still runs, then that SIGTERM ends it with exit 0; its stderr says why when not. */
export async function assertStopsCleanly(server: ServerProcess): Promise<void> {
  assert.equal(server.child.exitCode, null, server.stderr());
  server.child.kill('SIGTERM');
  assert.deepEqual(
    exitOf(await withTimeout(server.exited, 10_000, 'exit')),
    { code: 0, signal: null },
    server.stderr(),
  );
}

/** A look inside a server process: what `expression` gives there, asked on SIGUSR2. */
export interface ProcessProbe<T> {
  /** What to start the server's node with (`SpawnOptions.nodeArgs`). */
  nodeArgs: string[];
  /** Signals `server`, started with `nodeArgs`, and returns what `expression` gave in it. */
  read(server: ServerProcess): Promise<T>;
}

/**
 * A module for `node --require`, written in `dir`, that on SIGUSR2 writes what `expression`
 * (CommonJS, evaluated in the server's process) gives, as JSON, to a file beside it.
 */
export async function processProbe<T>(
  dir: string,
  expression: string,
  nodeArgs: string[] = [],
): Promise<ProcessProbe<T>> {
  const module = join(dir, 'probe.cjs');
  const file = join(dir, 'probe.json');
  await writeFile(
    module,
    `process.on('SIGUSR2', () => require('node:fs').writeFileSync(${JSON.stringify(file)}, JSON.stringify(${expression})));`,
  );
  return {
    nodeArgs: [...nodeArgs, '--require', module],
    async read(server) {
      await rm(file, { force: true });
      server.child.kill('SIGUSR2');
      for (const deadline = performance.now() + 5000; performance.now() < deadline; await sleep(10)) {
        try {
          return JSON.parse(await readFile(file, 'utf8')) as T;
        } catch {
          // not written yet, or not whole
        }
      }
      throw new Error('the probe wrote nothing');
    },
  };
}
