import { spawn, spawnSync } from 'node:child_process';

/**
 * The HTTP/2 clients of other makers the tests drive: curl built with HTTP/2 (nghttp2) and h2load
 * (Debian's nghttp2-client). Without one, its tests skip, saying so once.
 */

const curlVersion = spawnSync('curl', ['--version'], { encoding: 'utf8' });
/** Why curl cannot be used here, or undefined when it speaks HTTP/2. */
export const CURL_SKIP =
  curlVersion.error !== undefined
    ? 'HTTP/2 tests with curl need curl'
    : /^Features:.*\bHTTP2\b/m.test(curlVersion.stdout)
      ? undefined
      : 'HTTP/2 tests with curl need a curl built with HTTP/2';

/** Why h2load cannot be used here, or undefined. */
export const H2LOAD_SKIP =
  spawnSync('h2load', ['--version']).error === undefined
    ? undefined
    : 'h2load tests need h2load (apt-get install nghttp2-client; .ci/run installs it)';

for (const reason of [CURL_SKIP, H2LOAD_SKIP]) if (reason !== undefined) process.stdout.write(`SKIPPED: ${reason}\n`);

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end without blocking the event loop (the server under test may be in this process). */
export function run(command: string, args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface H2loadResult {
  /** Requests done, succeeded, failed, errored. */
  done: number;
  succeeded: number;
  failed: number;
  /** Answers by class of status. */
  status2xx: number;
  status4xx: number;
  status5xx: number;
  reqPerSecond: number;
  /** Mean and largest time for a request, in ms. */
  meanMs: number;
  maxMs: number;
}

/** The figures of h2load's report. */
export function parseH2load(stdout: string): H2loadResult {
  const number = (pattern: RegExp) => Number(pattern.exec(stdout)?.[1] ?? Number.NaN);
  const time = (text: string | undefined) => {
    const match = /^([\d.]+)(us|ms|s)$/.exec(text ?? '');
    if (match === null) return Number.NaN;
    return Number(match[1]) * ({ us: 0.001, ms: 1, s: 1000 }[match[2] as 'us' | 'ms' | 's'] ?? Number.NaN);
  };
  const request = /^time for request:\s+(\S+)\s+(\S+)\s+(\S+)/m.exec(stdout);
  return {
    done: number(/(\d+) done/),
    succeeded: number(/(\d+) succeeded/),
    failed: number(/(\d+) failed/),
    status2xx: number(/(\d+) 2xx/),
    status4xx: number(/(\d+) 4xx/),
    status5xx: number(/(\d+) 5xx/),
    reqPerSecond: number(/finished in [\d.]+\w+, ([\d.]+) req\/s/),
    meanMs: time(request?.[3]),
    maxMs: time(request?.[2]),
  };
}
